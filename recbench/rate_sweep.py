"""The runner's open-loop flags: --target-rate checks, and --target-rates (one runner pass per
offered rate, then the latency–throughput curve and the knee per transport).

`run_benchmark_ps.py --target-rates r1,r2,... [--slo-p99-us X] [runner flags]` runs the whole
runner (every transport x repeat) once per rate r with --target-rate r (batches/s per client
process) into <output-dir>/rate_<r>/, each with its usual summary.csv, summary_totals.csv,
summary.md and logs. Then, per transport and rate, one curve point from those files: offered rate
(r x client processes), achieved rate and keys/s (the totals' mean over repeats), corrected
p50/p99/p99.9 (from the scheduled send time; the totals merge the clients' histograms), service
p50/p99/p99.9 (the clients' PS_BENCHMARK_HIST phase=run_service lines merged per repeat, mean over
repeats), late sends and CPU seconds of clients and servers. Written to <output-dir>/curve.csv,
plots/latency_vs_rate.png and a Chinese summary.md with the curve and, with --slo-p99-us, each
transport's knee (recbench.latency_curve).
"""

from __future__ import annotations

import copy
import csv
import logging
import os
import statistics
import time
from pathlib import Path

from recbench import latency_curve, latency_hist

log = logging.getLogger("recbench.rate_sweep")

MAX_TARGET_RATE = 1e7  # RS_PACING_MAX_RATE (csrc/include/recstore/pacing.h)


def parse_rates(text: str) -> list[float]:
    rates = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            r = float(item)
        except ValueError:
            raise ValueError(f"--target-rates '{text}': '{item}' is not a number")
        if not 0 < r <= MAX_TARGET_RATE:
            raise ValueError(f"--target-rates: {item} is not in (0, {MAX_TARGET_RATE:g}] batches/s")
        rates.append(r)
    if not rates:
        raise ValueError(f"--target-rates '{text}' holds no rate (e.g. 1000,5000,10000)")
    if len(set(rates)) != len(rates):
        raise ValueError(f"--target-rates '{text}' repeats a rate")
    return rates


def check_args(args) -> None:
    """Validate the open-loop flags; sets args.target_rates_list."""
    if not 0 <= args.target_rate <= MAX_TARGET_RATE:
        raise ValueError(f"--target-rate {args.target_rate:g} is not in [0, {MAX_TARGET_RATE:g}] "
                         "batches/s (0 = closed loop)")
    args.target_rates_list = parse_rates(args.target_rates) if args.target_rates else []
    if args.target_rates_list and args.target_rate:
        raise ValueError("give --target-rate (one rate) or --target-rates (a curve), not both")
    if args.slo_p99_us < 0:
        raise ValueError(f"--slo-p99-us {args.slo_p99_us:g} must be > 0")
    if args.slo_p99_us and not args.target_rates_list:
        raise ValueError("--slo-p99-us needs --target-rates (the knee is read off a curve)")


def _num(text):
    return None if text in (None, "") else float(text)


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _service_percentiles(rows: list[dict]) -> dict:
    """Service p50/p99/p99.9: per repeat the clients' run_service histograms merged (from their
    stdout logs), then the mean over repeats; {} when a log lacks the line."""
    per_repeat: dict[str, list] = {}
    for r in rows:
        if r["phase"] != "run" or r["status"] != "success":
            continue
        stdout = next((p for p in r["log_path"].split(";") if p.endswith(".stdout.log")), "")
        try:
            h = latency_hist.collect(Path(stdout).read_text()).get("run_service")
        except (OSError, ValueError):
            h = None
        per_repeat.setdefault(r["repeat_index"], []).append(h)
    vals = {"service_p50_us": [], "service_p99_us": [], "service_p999_us": []}
    for hs in per_repeat.values():
        if not hs or any(h is None for h in hs):
            return {}
        merged = latency_hist.Hist()
        for h in hs:
            merged.merge(h)
        for col, p in (("service_p50_us", 50), ("service_p99_us", 99), ("service_p999_us", 99.9)):
            vals[col].append(merged.percentile_ns(p) / 1e3)
    return {k: statistics.mean(v) for k, v in vals.items() if v}


def points_of(run_dir: Path, rate: float, transports: list[str]) -> list[latency_curve.CurvePoint]:
    """One curve point per transport from one runner pass at per-process rate `rate`."""
    rows = _read(run_dir / "summary.csv")
    totals = _read(run_dir / "summary_totals.csv")
    out = []
    for t in transports:
        mine = [r for r in rows if r["transport"] == t]
        procs = max((int(r["client_processes"]) for r in mine if r["client_processes"]), default=1)
        mean = next((x for x in totals if x["transport"] == t and x["repeat_index"] == "mean"
                     and x["phase"] == "run"), None)
        if mean is None or mean["status"] != "success":
            bad = [r for r in mine if r["status"] != "success"]
            status = bad[0]["status"] if bad else (mean["status"] if mean else "no_result")
            out.append(latency_curve.CurvePoint(t, rate * procs, status=status))
            continue
        runs = [r for r in mine if r["phase"] == "run" and r["status"] == "success"]
        late_by_repeat: dict[str, int] = {}
        for r in runs:
            late_by_repeat[r["repeat_index"]] = (late_by_repeat.get(r["repeat_index"], 0)
                                                 + int(float(r["late_sends"] or 0)))
        out.append(latency_curve.CurvePoint(
            transport=t, offered_rate=rate * procs, achieved_rate=_num(mean["ops_per_sec"]),
            key_ops_per_sec=_num(mean["key_ops_per_sec"]), p50_us=_num(mean["p50_us"]),
            p99_us=_num(mean["p99_us"]), p999_us=_num(mean["p999_us"]),
            late_sends=round(statistics.mean(late_by_repeat.values())) if late_by_repeat else None,
            client_cpu_s=_num(mean["client_cpu_s"]), server_cpu_s=_num(mean["server_cpu_s"]),
            **_service_percentiles(runs)))
    return out


def render(args, argv, points, rate_dirs, out_dir: Path, plot_path: Path | None) -> str:
    import socket

    from recbench.ps_session import git_state

    lines = [git_state()["commit"], socket.gethostname(), "",
             "# PS 开环基准：延迟–吞吐曲线 (run_benchmark_ps.py --target-rates)", "",
             f"- 命令: `run_benchmark_ps.py {' '.join(argv)}`",
             (f"- Transports: {', '.join(args.transport_list)}；每个客户端进程的目标速率（批次/秒）: "
             f"{', '.join(f'{r:g}' for r in args.target_rates_list)}；到达过程: {args.arrival}"),
             (f"- 每个速率是一次完整的 runner 运行，结果在 {', '.join(str(d.name) for d in rate_dirs)}/"
             "（各自有 summary.csv、summary_totals.csv、summary.md）。"),
             "- 目标速率 = 每进程速率 × 客户端进程数；实际速率与 keys/s 为各 repeat 的均值。", ""]
    lines += latency_curve.markdown_lines(points, args.slo_p99_us or None, args.batch_keys)
    if plot_path is not None:
        lines += [f"![latency vs rate]({plot_path.relative_to(out_dir)})", ""]
    return "\n".join(lines) + "\n"


def run(args, argv) -> int:
    """Every rate through ps_session.run, then curve.csv, the plot and summary.md."""
    from recbench import ps_session

    out_dir = Path(args.output_dir or os.path.join(
        "results", "benchmark_ps_curve_" + time.strftime("%m%d%H%M")))
    if not out_dir.is_absolute():
        out_dir = ps_session.REPO_ROOT / out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    worst, points, rate_dirs = 0, [], []
    for i, rate in enumerate(args.target_rates_list, 1):
        sub = copy.copy(args)
        sub.target_rate, sub.target_rates_list = rate, []
        sub.output_dir = str(out_dir / f"rate_{rate:g}")
        rate_dirs.append(Path(sub.output_dir))
        print(f"[rate {i}/{len(args.target_rates_list)}] --target-rate {rate:g}", flush=True)
        rc = ps_session.run(sub, argv)
        worst = max(worst, rc)
        points += points_of(Path(sub.output_dir), rate, args.transport_list)
        if rc == 130:
            break
    latency_curve.write_csv(points, out_dir / "curve.csv")
    plot_path = None
    if any(p.ok for p in points):
        plot_path = latency_curve.plot(points, out_dir / "plots" / "latency_vs_rate.png",
                                       args.slo_p99_us or None)
    (out_dir / "summary.md").write_text(render(args, argv, points, rate_dirs, out_dir, plot_path))
    for key, path in (("curve_csv", out_dir / "curve.csv"), ("summary_md", out_dir / "summary.md"),
                      ("latency_vs_rate_png", plot_path)):
        if path is not None:
            print(f"[output] {key}={path}", flush=True)
    return worst
