"""Open-loop latency–throughput curve per transport on this host
(tools/benchmarks/bench_open_loop.py).

For each transport: one `recbench.ps_server`, loaded once; closed-loop `recbench.ps_bench` runs
(--closed_repeat of them, the median) give the transport's closed-loop maximum (batches/s) and
its p99 at saturation; then open-loop runs (`--target_rate`) at the given fractions of that
maximum (default 10 % .. 120 %) give the curve: achieved rate, corrected and service
p50/p99/p99.9, late sends, client CPU (its own report) and server CPU (/proc over the timed
window, between the `go` line and the result). With --repeat N every rate runs N times (the
fractions interleaved, so host noise spreads over the curve) and each field is the median. Each
client process is released through the PS_BENCHMARK_LOADED / go barrier. Outputs under
--out_dir: curve.csv (recbench.latency_curve), closed_loop.csv, latency_vs_rate.png, curve.md
(the Chinese table and the knee at --slo_p99_us) and bench.json (settings, host, build, runs).
--pacing_cost adds pacing_cost.csv: the client's instructions per batch under callgrind (closed
loop, open loop at --pacing_cost_rate, open loop saturated) on the first transport.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
from pathlib import Path

from recbench import _ps, latency_curve, procfs, records, transports
from recbench.cpuinfo import cpu_model
from recbench.launch import LineProcess, PSServerLauncher
from recbench.ps_server import SKIP_EXIT_CODE

DEFAULT_FRACTIONS = "0.1,0.25,0.5,0.75,0.9,1.0,1.1,1.2"
CLOSED_COLUMNS = ["transport", "throughput_batches_sec", "throughput_keys_sec", "p50_us", "p99_us",
                  "p999_us", "max_us", "cpu_user_s", "cpu_sys_s", "server_cpu_s"]


def parse_fractions(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--fractions '{text}': expected a comma list of numbers, e.g. 0.1,0.5,1.2")
    if not out or any(not f > 0 for f in out):
        raise ValueError(f"--fractions '{text}': every fraction must be > 0")
    return out


def _client(args, transport: str, port: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "recbench.ps_bench", "--transport", transport, "--host",
            "127.0.0.1", "--port", port, "--record_count", str(args.record_count),
            "--value_size", str(args.value_size), "--batch_keys", str(args.batch_keys),
            "--thread_num", str(args.client_threads), "--running_seconds",
            str(args.running_seconds), "--warmup_seconds", str(args.warmup_seconds),
            *(["--prefetch_depth", str(args.prefetch_depth)] if args.prefetch_depth else []),
            *extra]


def run_client(cmd: list[str], server_pid: int, timeout: float) -> dict:
    """One ps_bench process through the barrier; its run line plus the server's CPU seconds over
    the run (go .. result line)."""
    bench = LineProcess(cmd, stdin=subprocess.PIPE)
    try:
        bench.wait_line("PS_BENCHMARK_LOADED", 600)
        c0 = procfs.cpu_seconds(server_pid)
        bench.proc.stdin.write("go\n")
        bench.proc.stdin.flush()
        run = records.parse_kv(bench.wait_line("PS_BENCHMARK_RESULT phase=run", timeout))
        run["server_cpu_s"] = procfs.cpu_seconds(server_pid) - c0
        rc = bench.proc.wait(60)
        if rc != 0:
            raise RuntimeError(f"ps_bench exit {rc}: {' | '.join(bench.lines[-3:])}")
        return run
    finally:
        bench.stop()


def point_of(transport: str, offered: float, run: dict) -> latency_curve.CurvePoint:
    g = lambda k: float(run[k]) if k in run else None
    return latency_curve.CurvePoint(
        transport=transport, offered_rate=offered, achieved_rate=g("achieved_rate"),
        key_ops_per_sec=g("throughput_keys_sec"), p50_us=g("p50_us"), p99_us=g("p99_us"),
        p999_us=g("p999_us"), service_p50_us=g("service_p50_us"),
        service_p99_us=g("service_p99_us"), service_p999_us=g("service_p999_us"),
        late_sends=int(run["late_sends"]) if "late_sends" in run else None,
        client_cpu_s=g("cpu_user_s") + g("cpu_sys_s"), server_cpu_s=run["server_cpu_s"])


def median_point(runs: list[latency_curve.CurvePoint]) -> latency_curve.CurvePoint:
    """Field by field median over the repeats of one offered rate."""
    out = latency_curve.CurvePoint(runs[0].transport, runs[0].offered_rate)
    for name in latency_curve.CURVE_COLUMNS:
        if name in ("transport", "offered_rate", "status"):
            continue
        vals = [getattr(r, name) for r in runs if getattr(r, name) is not None]
        if vals:
            m = statistics.median(vals)
            setattr(out, name, round(m) if name == "late_sends" else m)
    return out


def start_server(args, transport: str):
    """(server process, port, None) once it is ready, or (None, None, why) when the transport
    cannot run here."""
    reason = _ps.transports().get(transport, "unknown transport")
    if reason is not None:
        return None, None, reason
    srv = PSServerLauncher([sys.executable, "-m", "recbench.ps_server", "--transport", transport,
                            "--host", "127.0.0.1", "--port", "0", "--num_threads",
                            str(args.server_threads), "--value_size", str(args.value_size),
                            "--capacity", str(args.record_count), "--max_keys_per_request",
                            str(max(args.batch_keys, 500)), "--index_type", args.index_type])
    try:
        return srv, srv.wait_ready(30)[0]["port"], None
    except RuntimeError:
        srv.stop()
        if srv.proc.returncode == SKIP_EXIT_CODE:
            return None, None, " ".join(srv.lines + srv.err_lines)
        raise


def _callgrind_ir(path: Path) -> tuple[int, int]:
    """(instructions collected, of which in rs_pacing_count_unsent) from a callgrind output."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(path)], capture_output=True,
                          text=True, check=True).stdout
    total = unsent = 0
    for line in text.splitlines():
        n = line.strip().split(" ", 1)[0].replace(",", "")
        if "PROGRAM TOTALS" in line and n.isdigit():
            total = int(n)
        elif "rs_pacing_count_unsent" in line and n.isdigit():
            unsent = int(n)
    return total, unsent


def pacing_cost(args, transport: str, out: Path) -> list[dict]:
    """Client instructions per batch (callgrind on the worker thread, worker_main) closed loop,
    open loop at --pacing_cost_rate and open loop saturated (10^5/s), same server and build;
    the one-off count of never-sent batches after the window is left out. [] without valgrind."""
    if not (shutil.which("valgrind") and shutil.which("callgrind_annotate")):
        print("[pacing cost] skipped: valgrind is not installed", flush=True)
        return []
    srv, port, skipped = start_server(args, transport)
    if skipped:
        print(f"[pacing cost] skipped: {transport}: {skipped}", flush=True)
        return []
    rows = []
    try:
        for label, extra in (("closed loop", ()),
                             (f"open loop {args.pacing_cost_rate:g}/s",
                              ("--target_rate", f"{args.pacing_cost_rate:g}")),
                             ("open loop saturated", ("--target_rate", "100000"))):
            cg = out / f"callgrind.{transport}.{len(rows)}"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                   "--toggle-collect=worker_main"] + _client(args, transport, port, "--skip_load",
                                                             *extra)
            run = run_client(cmd, srv.proc.pid, args.running_seconds + 300)
            total, unsent = _callgrind_ir(cg)
            batches = int(run["batches"])
            rows.append({"transport": transport, "run": label, "batches": batches,
                         "batches_per_sec": float(run["throughput_batches_sec"]),
                         "instructions": total, "count_unsent_instructions": unsent,
                         "instructions_per_batch": (total - unsent) / batches if batches else None})
    finally:
        srv.stop()
    base = rows[0]["instructions_per_batch"]
    for r in rows:
        ipb = r["instructions_per_batch"]
        r["vs_closed_pct"] = (ipb / base - 1) * 100 if ipb and base else None
        print(f"[pacing cost] {transport} {r['run']}: {r['batches']} batches, "
              f"{ipb:,.0f} instructions/batch" + (f" ({r['vs_closed_pct']:+.2f} %)"
                                                  if r is not rows[0] else ""), flush=True)
    return rows


def bench_transport(args, transport: str, fractions: list[float]) -> tuple[list, list]:
    """(closed-loop runs, curve points) of one transport; skipped transports give one point with
    status skipped: <reason>."""
    srv, port, skipped = start_server(args, transport)
    if skipped:
        return [], [latency_curve.CurvePoint(transport, 0.0, status=f"skipped: {skipped}")]
    timeout = args.running_seconds + args.warmup_seconds + 120
    closed, points = [], []
    try:
        for rep in range(args.closed_repeat):
            extra = ("--skip_load",) if rep else ()
            run = run_client(_client(args, transport, port, *extra), srv.proc.pid, timeout)
            run["transport"] = transport
            closed.append(run)
            print(f"[{transport}] closed loop: {float(run['throughput_batches_sec']):,.0f} "
                  f"batches/s, p99 {float(run['p99_us']):,.0f} us", flush=True)
        rates = sorted(float(r["throughput_batches_sec"]) for r in closed)
        max_rate = rates[len(rates) // 2]
        runs: dict[float, list] = {f: [] for f in fractions}
        for rep in range(args.repeat):  # fractions interleaved in time, so host noise spreads
            for f in fractions:
                offered = f * max_rate
                run = run_client(_client(args, transport, port, "--skip_load", "--target_rate",
                                         f"{offered:.3f}", "--arrival", args.arrival,
                                         "--arrival_seed", str(rep + 1)),
                                 srv.proc.pid, timeout)
                p = point_of(transport, offered, run)
                runs[f].append(p)
                print(f"[{transport}] open loop {f:.0%} ({offered:,.0f}/s) #{rep}: achieved "
                      f"{p.achieved_rate:,.0f}/s, p99 {p.p99_us:,.0f} us (service "
                      f"{p.service_p99_us:,.0f} us), late {p.late_sends}", flush=True)
        points = [median_point(runs[f]) for f in fractions]
    finally:
        srv.stop()
    return closed, points


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transports", default="brpc,grpc,shm",
                   help="comma list (unavailable ones are reported as skipped)")
    p.add_argument("--fractions", default=DEFAULT_FRACTIONS,
                   help="offered rates as fractions of the closed-loop maximum")
    p.add_argument("--slo_p99_us", type=float, default=1000.0, help="SLO of the knee")
    p.add_argument("--arrival", default="poisson", choices=["poisson", "uniform"])
    p.add_argument("--record_count", type=int, default=100000)
    p.add_argument("--value_size", type=int, default=512)
    p.add_argument("--batch_keys", type=int, default=500)
    p.add_argument("--prefetch_depth", type=int, default=0,
                   help="batches in flight per client thread (0 = ps_bench's default)")
    p.add_argument("--server_threads", type=int, default=1)
    p.add_argument("--client_threads", type=int, default=1)
    p.add_argument("--index_type", default="DRAM_PET_HASH")
    p.add_argument("--running_seconds", type=float, default=5.0)
    p.add_argument("--warmup_seconds", type=float, default=0.5)
    p.add_argument("--repeat", type=int, default=1,
                   help="open-loop runs per rate (medians reported, fractions interleaved)")
    p.add_argument("--closed_repeat", type=int, default=3,
                   help="closed-loop runs; their median rate is the 100 %% of --fractions")
    p.add_argument("--pacing_cost", action="store_true",
                   help="also measure the pacing's cost: client instructions per batch under "
                   "callgrind, closed vs open loop, on the first transport (needs valgrind)")
    p.add_argument("--pacing_cost_rate", type=float, default=2000.0,
                   help="--pacing_cost: the unsaturated open-loop rate (batches/s)")
    p.add_argument("--out_dir", type=Path, default=None,
                   help="output directory (default results/open_loop_MMDDHHMM)")
    return p


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        fractions = parse_fractions(args.fractions)
    except ValueError as e:
        ap.error(str(e))
    if args.closed_repeat < 1 or args.repeat < 1:
        ap.error("--closed_repeat and --repeat must be >= 1")
    out = args.out_dir or records.new_result_dir("results", "open_loop_")
    out.mkdir(parents=True, exist_ok=True)
    try:
        names = [t.name for t in transports.parse_list(args.transports)]
    except transports.UnknownTransport as e:
        ap.error(str(e))
    closed, points = [], []
    for t in names:
        c, p = bench_transport(args, t, fractions)
        closed += c
        points += p
    latency_curve.write_csv(points, out / "curve.csv")
    records.write_csv(out / "closed_loop.csv", CLOSED_COLUMNS, closed)
    cost = pacing_cost(args, names[0], out) if args.pacing_cost and names else []
    if cost:
        records.write_csv(out / "pacing_cost.csv", list(cost[0]), cost)
    md = latency_curve.markdown_lines(points, args.slo_p99_us, args.batch_keys)
    (out / "curve.md").write_text("\n".join(md) + "\n")
    if any(p.ok for p in points):
        from recbench import analysis

        analysis.plot_latency_vs_rate(points, out / "latency_vs_rate.png", args.slo_p99_us)
    (out / "bench.json").write_text(json.dumps(
        {"settings": {k: str(v) for k, v in vars(args).items()}, "host": socket.gethostname(),
         "cpu": cpu_model(),
         "build": _ps.build_info(), "closed_loop": closed, "pacing_cost": cost,
         "curve": [p.__dict__ for p in points]}, indent=2))
    print(f"CPU {cpu_model()}")
    print("\n".join(md))
    print(f"[output] {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
