"""The runner's --target-rates: one runner pass per offered rate, then the latency–throughput
curve and the knee per transport (the flags are checked in recbench.runner.plan).

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

import dataclasses
import logging
import socket
import statistics
from pathlib import Path

from recbench import latency_curve, latency_hist, records
from recbench.runner import session
from recbench.runner.plan import Plan

log = logging.getLogger("recbench.runner.rate_sweep")


def _num(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)


def _read(path: Path) -> list[dict]:
    return records.read_csv(path) if path.exists() else []


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
    vals: dict[str, list[float]] = {"service_p50_us": [], "service_p99_us": [],
                                    "service_p999_us": []}
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


def _plot(points: list[latency_curve.CurvePoint], path: Path, slo_p99_us: float | None) -> Path | None:
    """plots/latency_vs_rate.png, or None (logged) without a successful point or without the
    analysis extra (pandas, matplotlib)."""
    if not any(p.ok for p in points):
        return None
    try:
        from recbench import analysis
    except ImportError as exc:
        log.warning("no plots/latency_vs_rate.png: pip install -e '.[analysis]' (%s)", exc)
        return None
    return analysis.plot_latency_vs_rate(points, path, slo_p99_us)


def render(plan: Plan, argv: list[str], points: list[latency_curve.CurvePoint],
           rate_dirs: list[Path], out_dir: Path, plot_path: Path | None) -> str:
    w = plan.workload
    labels = [t.label for t in plan.transports]
    lines = [session.git_state()["commit"], socket.gethostname(), "",
             "# PS 开环基准：延迟–吞吐曲线 (run_benchmark_ps.py --target-rates)", "",
             f"- 命令: `run_benchmark_ps.py {' '.join(argv)}`",
             (f"- Transports: {', '.join(labels)}；每个客户端进程的目标速率（批次/秒）: "
             f"{', '.join(f'{r:g}' for r in w.target_rates)}；到达过程: {w.arrival}"),
             (f"- 每个速率是一次完整的 runner 运行，结果在 {', '.join(str(d.name) for d in rate_dirs)}/"
             "（各自有 summary.csv、summary_totals.csv、summary.md）。"),
             "- 目标速率 = 每进程速率 × 客户端进程数；实际速率与 keys/s 为各 repeat 的均值。", ""]
    lines += latency_curve.markdown_lines(points, w.slo_p99_us or None, w.batch_keys)
    if plot_path is not None:
        lines += [f"![latency vs rate]({plot_path.relative_to(out_dir)})", ""]
    return "\n".join(lines) + "\n"


def run(plan: Plan, argv: list[str]) -> int:
    """Every rate through session.run, then curve.csv, the plot and summary.md."""
    w = plan.workload
    if plan.execution.output_dir:
        out_dir = Path(plan.execution.output_dir)
        if not out_dir.is_absolute():
            out_dir = session.REPO_ROOT / out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
    else:
        out_dir = records.new_result_dir(session.REPO_ROOT / "results", "benchmark_ps_curve_")
    labels = [t.label for t in plan.transports]
    worst, points, rate_dirs = 0, [], []
    for i, rate in enumerate(w.target_rates, 1):
        rate_dir = out_dir / f"rate_{rate:g}"
        rate_dirs.append(rate_dir)
        sub = dataclasses.replace(
            plan, workload=dataclasses.replace(w, target_rate=rate, target_rates=()),
            execution=dataclasses.replace(plan.execution, output_dir=str(rate_dir)))
        print(f"[rate {i}/{len(w.target_rates)}] --target-rate {rate:g}", flush=True)
        rc = session.run(sub, argv)
        worst = max(worst, rc)
        points += points_of(rate_dir, rate, labels)
        if rc == 130:
            break
    latency_curve.write_csv(points, out_dir / "curve.csv")
    plot_path = _plot(points, out_dir / "plots" / "latency_vs_rate.png", w.slo_p99_us or None)
    (out_dir / "summary.md").write_text(render(plan, argv, points, rate_dirs, out_dir, plot_path))
    for key, path in (("curve_csv", out_dir / "curve.csv"), ("summary_md", out_dir / "summary.md"),
                      ("latency_vs_rate_png", plot_path)):
        if path is not None:
            print(f"[output] {key}={path}", flush=True)
    return worst
