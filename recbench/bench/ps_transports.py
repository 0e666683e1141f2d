"""PS transports side by side with Redis MGET on this host (tools/benchmarks/bench_ps_transports.py).

For each repeat, in one run of this script:
  * Redis: a fresh redis-server (Debian's) on a free loopback port, loaded with keys 1..N of
    value_size bytes, then MGETs of batch_keys random keys on `connections` connections (one MGET
    in flight each) from a C client (recbench._ps.redis_bench);
  * each transport: a fresh `recbench.ps_server` (server_threads workers) and `recbench.ps_bench`
    (client_threads threads, prefetch_depth batches in flight, same keys/rows), released through
    the PS_BENCHMARK_LOADED / go barrier; before the load, the idle server's CPU time over
    idle_seconds is measured (an idle server must not spin).
Server CPU comes from /proc/<pid>/stat over exactly the timed window; client CPU from the
client's own report. Reported: keys/s, CPU seconds, keys per CPU-second (client + server), p50/p99
latency per request, medians over repeats, and each row's ratio to Redis.

Each run's shape is checked against the settings from what the processes themselves report (the
server's ready line: workers, row size; the client's result line: threads, batch, batches in
flight, requests per batch); a run of another shape is a failure, not a row. The systems of one
transport (brpc, recstore+brpc, and with --baseline_tree brpc@base, recstore+brpc@base) run back
to back in every repeat, in an order rotated per repeat, so that every RecStore-wire / native
pair (and every this-tree / baseline pair) is judged within one repeat: besides the medians of the
rates, the median and range of those per-repeat ratios are printed. --baseline_tree DIR runs the
same systems from another built source tree (before/after in one run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recbench import _ps, procfs, records, transports
from recbench.bench.tls_pki import make_test_pki
from recbench.cpuinfo import cpu_model
from recbench.launch import SOURCE_ROOT, LineProcess, PSServerLauncher, free_port
from recbench.ps_server import SKIP_EXIT_CODE
from recbench.runner.config import scoped_transport_options

ROOT = SOURCE_ROOT
def run_redis(args, repeat: int) -> dict:
    exe = shutil.which(args.redis_server)
    if not exe:
        return {"system": "redis", "status": "skipped", "reason": f"{args.redis_server} not found"}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="recbench-redis-") as d:
        srv = LineProcess([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", d, "--protected-mode", "yes"])
        try:
            srv.wait_line("Ready to accept connections", 30)
            _ps.redis_bench("127.0.0.1", port, connections=args.connections,
                            batch_keys=args.batch_keys, record_count=args.record_count,
                            value_size=args.value_size, running_seconds=0.5, load=True,
                            seed=repeat + 1)
            c0 = procfs.cpu_seconds(srv.proc.pid)
            r = _ps.redis_bench("127.0.0.1", port, connections=args.connections,
                                batch_keys=args.batch_keys, record_count=args.record_count,
                                value_size=args.value_size, running_seconds=args.running_seconds,
                                seed=repeat + 100)
            c1 = procfs.cpu_seconds(srv.proc.pid)
        finally:
            srv.stop()
    kps = r["key_ops"] / r["runtime_s"]
    return {"system": "redis", "status": "ok", "keys_s": kps,
            "client_cpu_s": r["cpu_user_s"] + r["cpu_sys_s"], "server_cpu_s": c1 - c0,
            "runtime_s": r["runtime_s"], "key_ops": r["key_ops"], "p50_us": r["p50_us"],
            "p99_us": r["p99_us"], "idle_cpu_s": None,
            # redis-server's sockets keep the host's congestion control
            "tcp_congestion": procfs.tcp_congestion_control() or ""}


BASE_SUFFIX = "@base"


def module_argv(module: str, tree: str | None) -> list[str]:
    """argv running `python -m module`, from the recbench of source tree `tree` when given."""
    if not tree:
        return [sys.executable, "-m", module]
    code = (f"import runpy, sys; sys.path.insert(0, {str(tree)!r}); "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code]


def shape_error(args, ready: dict, run: dict) -> str | None:
    """What of the run's shape, as its processes report it, differs from the settings."""
    batches = int(run.get("batches", 0) or 0)
    parts = int(run.get("get_parts", batches) or 0)
    have = {"server workers": int(ready.get("num_threads", -1)),
            "value_size": int(ready.get("value_size", -1)),
            "client threads": int(run.get("threads", -1)),
            "batch keys": int(run.get("batch_size", -1)),
            "batches in flight": int(run.get("prefetch_depth", -1)),
            "client requests per batch": round(parts / batches) if batches else -1}
    want = {"server workers": args.server_threads, "value_size": args.value_size,
            "client threads": args.client_threads, "batch keys": args.batch_keys,
            "batches in flight": args.prefetch_depth,
            "client requests per batch": 1}  # one shard taking the whole batch (RecStore's wire
    # chunks at 500 keys inside the transport: batches of <= 500 keys are one call)
    bad = [f"{k} {have[k]} (asked {want[k]})" for k in want if have[k] != want[k]]
    return "run shape differs: " + ", ".join(bad) if bad else None


def run_transport(args, system: str, repeat: int, pki=None) -> dict:
    # "recstore+grpc": the same grpc server, driven over RecStore's wire (ps_bench --wire recstore)
    # "grpc+tls": grpc over TLS with the test PKI `pki`
    # "brpc@base": brpc from the build in args.baseline_tree
    tree = args.baseline_tree if system.endswith(BASE_SUFFIX) else None
    name = system[:-len(BASE_SUFFIX)] if tree else system
    tls = name == "grpc+tls"
    wire, transport = ("recstore", name[9:]) if name.startswith("recstore+") else \
        ("native", "grpc" if tls else name)
    reason = _ps.transports().get(transport, "unknown transport")
    if reason is not None:
        return {"system": system, "status": "skipped", "reason": reason}
    srv_extra = ["--tls_cert", pki.cert, "--tls_key", pki.key] if tls else []
    cli_extra = ["--tls_ca", pki.ca] if tls else []
    for role, argv in (("server", srv_extra), ("client", cli_extra)):
        opts = scoped_transport_options(args.transport_options, transport, role)
        argv += ["--transport_options", opts] if opts else []
    srv = PSServerLauncher(module_argv("recbench.ps_server", tree) + ["--transport", transport, "--host",
                            "127.0.0.1", "--port", "0", "--num_threads", str(args.server_threads),
                            "--value_size", str(args.value_size), "--capacity",
                            str(args.record_count), "--max_keys_per_request",
                            str(max(args.batch_keys, 500)), "--index_type", args.index_type] + srv_extra)
    bench = None
    try:
        try:
            ready = srv.wait_ready(30)[0]
        except RuntimeError:
            if srv.proc.poll() == SKIP_EXIT_CODE:
                return {"system": system, "status": "skipped",
                        "reason": " ".join(srv.lines + srv.err_lines)}
            raise
        # idle check: nothing connected, nothing to do
        i0 = procfs.cpu_seconds(srv.proc.pid)
        time.sleep(args.idle_seconds)
        idle = procfs.cpu_seconds(srv.proc.pid) - i0
        bench = LineProcess(module_argv("recbench.ps_bench", tree) + ["--transport", transport,
                             "--wire", wire, "--host",
                             "127.0.0.1", "--port", ready["port"], "--record_count",
                             str(args.record_count), "--value_size", str(args.value_size),
                             "--batch_keys", str(args.batch_keys), "--thread_num",
                             str(args.client_threads), "--prefetch_depth",
                             str(args.prefetch_depth), "--running_seconds",
                             str(args.running_seconds), "--seed", str(repeat + 100)] + cli_extra,
                            stdin=subprocess.PIPE)
        bench.wait_line("PS_BENCHMARK_LOADED", 300)
        c0 = procfs.cpu_seconds(srv.proc.pid)
        bench.proc.stdin.write("go\n")
        bench.proc.stdin.flush()
        run = records.parse_kv(bench.wait_line("PS_BENCHMARK_RESULT phase=run", args.running_seconds + 120))
        c1 = procfs.cpu_seconds(srv.proc.pid)
        try:
            rc = bench.proc.wait(60)
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0:
            return {"system": system, "status": "failed", "reason": " | ".join(bench.lines[-3:])}
        bad_shape = shape_error(args, ready, run)
        if bad_shape:
            return {"system": system, "status": "failed", "reason": bad_shape}
    finally:
        if bench is not None:
            bench.stop()
        srv.stop()
    return {"system": system, "status": "ok", "keys_s": float(run["throughput_keys_sec"]),
            "client_cpu_s": float(run["cpu_user_s"]) + float(run["cpu_sys_s"]),
            "server_cpu_s": c1 - c0, "runtime_s": float(run["runtime_s"]),
            "key_ops": int(run["key_ops"]), "p50_us": float(run["p50_us"]),
            "p99_us": float(run["p99_us"]), "idle_cpu_s": idle,
            # the server's listener's, which its connections inherit ("" where the ready line
            # does not say: shm, rdma, a --baseline_tree from before the option)
            "tcp_congestion": ready.get("tcp_congestion", "")}


def keys_per_cpu_s(row: dict) -> float:
    cpu = row["client_cpu_s"] + row["server_cpu_s"]
    return row["key_ops"] / cpu if cpu > 0 else 0.0


def summarize(rows: list[dict]) -> list[dict]:
    by = {}
    for r in rows:
        by.setdefault(r["system"], []).append(r)
    out = []
    for system, rs in by.items():
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            out.append({"system": system, "status": rs[0]["status"], "reason": rs[0].get("reason")})
            continue

        def med(k, ok=ok):
            return statistics.median(r[k] for r in ok)

        idle = [r["idle_cpu_s"] for r in ok if r["idle_cpu_s"] is not None]
        out.append({"system": system, "status": "ok", "repeats": len(ok), "keys_s": med("keys_s"),
                    "keys_s_min": min(r["keys_s"] for r in ok),
                    "keys_s_max": max(r["keys_s"] for r in ok),
                    "client_cpu_s": med("client_cpu_s"), "server_cpu_s": med("server_cpu_s"),
                    "keys_per_cpu_s": statistics.median(keys_per_cpu_s(r) for r in ok),
                    "p50_us": med("p50_us"), "p99_us": med("p99_us"),
                    "idle_cpu_s": max(idle) if idle else None,
                    "steal_pct_max": max((r["steal_pct"] for r in ok
                                          if r.get("steal_pct") is not None), default=None),
                    "tcp_congestion": ";".join(sorted({r.get("tcp_congestion", "") for r in ok}
                                                      - {""}))})
    return out


def format_table(summary: list[dict], args) -> str:
    redis = next((s for s in summary if s["system"] == "redis" and s["status"] == "ok"), None)
    lines = [(f"# {args.record_count} records x {args.value_size} B, batch {args.batch_keys}, "
              f"uniform; PS: {args.server_threads} server worker(s), {args.client_threads} client "
              f"thread(s), {args.prefetch_depth} requests in flight; Redis: {args.connections} "
              f"connections; {args.running_seconds}s runs, median of {args.repeat}; CPU "
              f"{cpu_model()}"),
             ("| system | keys/s (median) | range | client CPU s | server CPU s | keys per CPU-s "
              "| p50 us | p99 us | vs Redis keys/s | idle server CPU s / "
              f"{args.idle_seconds:g}s | host steal % (max) | TCP |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in summary:
        if s["status"] != "ok":
            lines.append(f"| {s['system']} | {s['status']}: {s.get('reason')} |||||||||||")
            continue
        ratio = f"{s['keys_s'] / redis['keys_s']:.2f}x" if redis else "n/a"
        idle = "" if s["idle_cpu_s"] is None else f"{s['idle_cpu_s']:.3f}"
        steal = "" if s.get("steal_pct_max") is None else f"{s['steal_pct_max']:.1f}"
        lines.append(f"| {s['system']} | {s['keys_s']:,.0f} | {s['keys_s_min']:,.0f}–"
                     f"{s['keys_s_max']:,.0f} | {s['client_cpu_s']:.2f} | {s['server_cpu_s']:.2f} "
                     f"| {s['keys_per_cpu_s']:,.0f} | {s['p50_us']:.0f} | {s['p99_us']:.0f} | "
                     f"{ratio} | {idle} | {steal} | {s.get('tcp_congestion') or '-'} |")
    worst = max((s["steal_pct_max"] for s in summary if s.get("steal_pct_max") is not None),
                default=0.0)
    ccs = {s["system"]: s.get("tcp_congestion") for s in summary if s["status"] == "ok"}
    if redis and len(set(ccs.values()) - {"", None}) > 1:
        lines.append("\nnote: TCP is the congestion control each server's connections used: the PS "
                     "servers take cubic instead of a BBR on loopback (tcp_congestion=auto), "
                     "redis-server keeps the host's; --transport_options "
                     "'brpc:tcp_congestion=system;grpc:tcp_congestion=system' compares both "
                     "under the host's")
    if worst >= procfs.STEAL_WARN_PCT:
        lines.append(f"\nwarning: host steal reached {worst:.1f} % in a run (the hypervisor ran "
                     "other work on these CPUs): rates of runs with different steal do not compare")
    return "\n".join(lines)


def family(system: str) -> str:
    """The transport a system runs on: brpc for brpc, recstore+brpc, brpc@base, ..."""
    return system.removesuffix(BASE_SUFFIX).removeprefix("recstore+")


def repeat_order(systems: list[str], rep: int) -> list[str]:
    """Repeat rep's run order: each transport's systems back to back (so the pairs compared are
    measured minutes apart at most), the transports and the order inside each rotated by rep."""
    fams: dict[str, list[str]] = {}
    for s in systems:
        fams.setdefault(family(s), []).append(s)
    groups = list(fams.values())
    groups = groups[rep % len(groups):] + groups[:rep % len(groups)]
    return [s for g in groups for s in g[rep % len(g):] + g[:rep % len(g)]]


def pair_ratios(rows: list[dict], num: str, den: str, key: str = "keys_s") -> list[float]:
    """num / den of `key` within each repeat where both ran."""
    by = {(r["system"], r["repeat"]): r for r in rows if r["status"] == "ok"}
    reps = sorted({r["repeat"] for r in rows})
    val = (lambda r: keys_per_cpu_s(r)) if key == "keys_per_cpu_s" else (lambda r: r[key])
    return [val(by[num, i]) / val(by[den, i]) for i in reps
            if (num, i) in by and (den, i) in by and val(by[den, i]) > 0]


def pair_lines(rows: list[dict]) -> list[str]:
    """Per-repeat ratios: RecStore wire / native on each tree, this tree / the baseline tree."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    pairs = []
    for t in transports.RECSTORE_WIRE_NAMES:
        for suffix in ("", BASE_SUFFIX):
            pairs.append((f"recstore+{t}{suffix}", f"{t}{suffix}"))
    pairs += [(s[:-len(BASE_SUFFIX)], s) for s in systems if s.endswith(BASE_SUFFIX)]
    out = []
    for num, den in pairs:
        for key, what in (("keys_s", "keys/s"), ("keys_per_cpu_s", "keys per CPU-s")):
            rs = pair_ratios(rows, num, den, key)
            if rs:
                out.append(f"per repeat {num} / {den} {what}: median {statistics.median(rs):.2f}x "
                           f"(range {min(rs):.2f}-{max(rs):.2f}x over {len(rs)} pairs: "
                           f"{', '.join(f'{r:.2f}' for r in rs)})")
    return out


def goal_lines(summary: list[dict], args, rows: list[dict] | None = None) -> list[str]:
    by = {s["system"]: s for s in summary if s["status"] == "ok"}
    out = []
    for system in transports.RECSTORE_WIRE_NAMES:  # RecStore's wire >= 80 % of the native's keys/s
        rs = f"recstore+{system}"
        if system in by and rs in by:
            r = by[rs]["keys_s"] / by[system]["keys_s"]
            pr = pair_ratios(rows or [], rs, system)
            per = f"; median of per-repeat ratios {statistics.median(pr):.2f}x " \
                f"{'met' if statistics.median(pr) >= 0.8 else 'NOT met'}" if pr else ""
            out.append(f"goal {rs} >= 0.8x {system} keys/s: medians {r:.2f}x "
                       f"{'met' if r >= 0.8 else 'NOT met'}{per}")
    if "redis" not in by:
        return out + ["goals: no Redis baseline"]
    base = by["redis"]["keys_s"]
    for system, factor in (("brpc", 3.0), ("grpc", 1.0), ("shm", None)):
        if system in by and factor:
            r = by[system]["keys_s"] / base
            out.append(f"goal {system} >= {factor:g}x Redis keys/s: {r:.2f}x "
                       f"{'met' if r >= factor else 'NOT met'}")
    for system, s in by.items():
        if s["idle_cpu_s"] is not None:
            ok = s["idle_cpu_s"] < 0.1
            out.append(f"goal idle {system} server < 0.1 CPU-s over {args.idle_seconds:g}s: "
                       f"{s['idle_cpu_s']:.3f} {'met' if ok else 'NOT met'}")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transports", default="brpc,grpc",
                   help="comma list of PS transports (unavailable ones are reported as skipped); "
                   "recstore+brpc / recstore+grpc drive the same server over RecStore's wire; "
                   "grpc+tls runs grpc over TLS with a test PKI made by openssl")
    p.add_argument("--no_redis", action="store_true", help="skip the Redis baseline")
    p.add_argument("--redis_server", default="redis-server")
    p.add_argument("--record_count", type=int, default=100000)
    p.add_argument("--value_size", type=int, default=512)
    p.add_argument("--batch_keys", type=int, default=500)
    p.add_argument("--prefetch_depth", type=int, default=8)
    p.add_argument("--connections", type=int, default=8, help="Redis connections")
    p.add_argument("--server_threads", type=int, default=1)
    p.add_argument("--client_threads", type=int, default=1)
    p.add_argument("--index_type", default="DRAM_PET_HASH")
    p.add_argument("--running_seconds", type=float, default=5.0)
    p.add_argument("--idle_seconds", type=float, default=3.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--baseline_tree", default=None, metavar="DIR",
                   help="also run every PS system from the recbench built in DIR (a source tree "
                   "built in place, e.g. `git archive main | tar -x -C DIR` then `python setup.py "
                   "build_ext --inplace` there), labelled SYSTEM@base, next to this tree's in "
                   "every repeat: before/after in one run")
    p.add_argument("--transport_options", default="",
                   help="'k=v;k=v' for the PS servers and clients, scoped as the runner's "
                   "--transport-options ('grpc:k=v' one transport, 'brpc.client:k=v' one role of "
                   "one, docs/ps-runner.md); e.g. 'brpc:tcp_congestion=system;grpc:"
                   "tcp_congestion=system' gives the PS the host's congestion control, as "
                   "redis-server has. A --baseline_tree build must know the options too")
    p.add_argument("--output_json", default=None,
                   help="also write every run and the summary (with the settings) to this file")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        scoped_transport_options(args.transport_options, "")  # names every bad prefix
    except ValueError as e:
        parser.error(str(e))
    transports = [t.strip().lower() for t in args.transports.split(",") if t.strip()]
    pki_dir = tempfile.mkdtemp(prefix="rs_tls_pki_") if "grpc+tls" in transports else None
    pki = make_test_pki(pki_dir) if pki_dir else None
    if args.baseline_tree:
        base = Path(args.baseline_tree).resolve()
        if not list(base.glob("recbench/_ps*.so")):
            print(f"--baseline_tree {base}: no built recbench/_ps*.so there", file=sys.stderr)
            return 2
        args.baseline_tree = str(base)
        transports += [t + BASE_SUFFIX for t in transports]
    rows = []
    for rep in range(args.repeat):
        # each transport's systems back to back, the order rotated so none always runs first
        systems = ([] if args.no_redis else ["redis"]) + transports
        systems = repeat_order(systems, rep)
        for system in systems:
            ticks = procfs.local_cpu_ticks()
            row = (run_redis(args, rep) if system == "redis"
                   else run_transport(args, system, rep, pki))
            row["repeat"] = rep
            row["steal_pct"] = procfs.steal_pct(ticks, procfs.local_cpu_ticks())
            rows.append(row)
            if row["status"] == "ok":
                print(f"[repeat {rep}] {system}: {row['keys_s']:,.0f} keys/s, client "
                      f"{row['client_cpu_s']:.2f} CPU-s, server {row['server_cpu_s']:.2f} CPU-s, "
                      f"{keys_per_cpu_s(row):,.0f} keys/CPU-s, p50 {row['p50_us']:.0f} us",
                      flush=True)
            else:
                print(f"[repeat {rep}] {system}: {row['status']}: {row.get('reason')}", flush=True)
    if pki_dir:
        shutil.rmtree(pki_dir, ignore_errors=True)
    summary = summarize(rows)
    print()
    print(format_table(summary, args))
    print()
    goals = goal_lines(summary, args, rows)
    pairs = pair_lines(rows)
    for line in pairs + goals:
        print(line)
    if args.output_json:
        Path(args.output_json).write_text(json.dumps(
            {"settings": vars(args), "runs": rows, "summary": summary, "goals": goals,
             "pairs": pairs,
             "host": socket.gethostname(), "build": _ps.build_info()}, indent=2))
    return 0 if all(r["status"] in ("ok", "skipped") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
