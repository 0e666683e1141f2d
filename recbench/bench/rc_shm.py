"""Benchmark of the RC transports against storage-only reads and brpc (tools/benchmarks/bench_rc_shm.py).

Cases, each measured in the same run, `--repeats` times, interleaved so machine noise hits all:

* ``storage``      batch_get_flat on the engine itself, one thread (``recbench.kv_bench`` when it
                   exists, else a loop over ``recbench.KVEngine.batch_get_flat`` on pre-drawn keys)
* ``shm_adaptive`` / ``shm_busy``   ``ps_server --transport shm --thread_num 1 --poll_mode X`` and
                   ``ps_bench --thread_num 1`` (GET, uniform keys; the GET mode ``auto``, which on
                   shm is the staging copy)
* ``shm_direct_sg``  shm_adaptive with ``--rdma_get_response_mode direct_sg``: rows gathered from
                   the value store into the response (not in the default ``--cases``)
* ``brpc``         the same server and client on brpc (one worker thread)

For the PS cases the server's CPU seconds are read from /proc over the client's run phase only
(the client waits at its load barrier until told ``go``). Results: one table on stdout (median
M keys/s, ratio to storage and to brpc, client and server CPU-s), and a JSON list with
``--json``. Benchmarks are noisy on a shared machine: compare ratios within one run. The last
columns, keys per CPU-second of client + server and of the server alone (storage: its one
thread), are the cost view: they stay meaningful when the machine is oversubscribed and wall-clock
rates are not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from recbench import procfs, records
from recbench.cpuinfo import cpu_model
from recbench.launch import SOURCE_ROOT, LineProcess, PSServerLauncher, python_env

ROOT = SOURCE_ROOT



def storage_case(a) -> dict:
    """Storage-only batch_get_flat, one thread."""
    if importlib.util.find_spec("recbench.kv_bench") is not None:
        cmd = [sys.executable, "-m", "recbench.kv_bench", "--read_mode=batch_get_flat",
               f"--index_type={a.index_type}", f"--value_size={a.value_size}",
               f"--record_count={a.record_count}", f"--batch_keys={a.batch_keys}", "--thread_num=1",
               "--workload=c", f"--running_seconds={a.running_seconds}"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=python_env(), cwd=str(ROOT), check=False)
        for line in r.stdout.splitlines():
            if line.startswith("YCSB_RESULT"):
                kv = records.parse_kv(line)
                ops = float(kv["throughput_ops_sec"])
                return {"case": "storage", "keys_per_sec": ops, "client_cpu_s": float(kv.get("cpu_user_s", 0))
                        + float(kv.get("cpu_sys_s", 0)), "server_cpu_s": 0.0, "source": "kv_bench"}
        raise RuntimeError(f"kv_bench printed no YCSB_RESULT:\n{r.stdout}\n{r.stderr}")
    import numpy as np

    from recbench.kv import KVEngine

    kv = KVEngine(index_type=a.index_type, value_size=a.value_size, capacity=a.record_count)
    step = 100000
    for lo in range(1, a.record_count + 1, step):
        keys = np.arange(lo, min(lo + step, a.record_count + 1), dtype=np.uint64)
        kv.batch_put(keys, np.zeros((len(keys), a.value_size), dtype=np.uint8))
    rng = np.random.default_rng(1)
    pool = rng.integers(1, a.record_count + 1, size=a.batch_keys * 4096, dtype=np.uint64)
    out = np.empty((a.batch_keys, a.value_size), dtype=np.uint8)
    c0 = time.process_time()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < a.running_seconds:
        off = (n % 4096) * a.batch_keys
        kv.batch_get_flat(pool[off:off + a.batch_keys], out=out)
        n += 1
    el = time.perf_counter() - t0
    return {"case": "storage", "keys_per_sec": n * a.batch_keys / el,
            "client_cpu_s": time.process_time() - c0, "server_cpu_s": 0.0,
            "source": "KVEngine.batch_get_flat loop"}


def ps_case(a, name: str, transport: str, server_flags: list[str], client_flags: list[str]) -> dict:
    srv_cmd = [sys.executable, "-m", "recbench.ps_server", "--transport", transport,
               "--host", "127.0.0.1", "--port", "0", "--value_size", str(a.value_size),
               "--capacity", str(a.record_count), "--index_type", a.index_type,
               "--max_keys_per_request", str(max(a.batch_keys, 500)), "--num_threads", "1",
               *server_flags]
    srv = PSServerLauncher(srv_cmd, cwd=ROOT)
    cli = None
    try:
        try:
            port = int(srv.wait_ready(60)[0]["port"])
        except RuntimeError:
            srv.stop()
            raise RuntimeError(f"{name}: server did not start: {' '.join(srv.err_lines)}") from None
        cli_cmd = [sys.executable, "-m", "recbench.ps_bench", "--transport", transport,
                   "--host", "127.0.0.1", "--port", str(port), "--record_count", str(a.record_count),
                   "--value_size", str(a.value_size), "--batch_keys", str(a.batch_keys),
                   "--thread_num", "1", "--load_thread_num", "1",
                   "--running_seconds", str(a.running_seconds),
                   "--prefetch_depth", str(a.prefetch_depth), *client_flags]
        cli = LineProcess(cli_cmd, stdin=subprocess.PIPE, separate_stderr=True, cwd=ROOT)
        cli.wait_line("PS_BENCHMARK_LOADED", 120)
        cpu0 = procfs.cpu_seconds(srv.proc.pid)
        cli.send_line("go")
        try:
            line = cli.wait_for(lambda: next((x for x in cli.lines if x.startswith(
                "PS_BENCHMARK_RESULT") and "phase=run" in x), None), "run result",
                a.running_seconds + 60)
        except RuntimeError:
            raise RuntimeError(f"{name}: no run result (exit {cli.proc.poll()}): "
                               f"{' '.join(cli.err_lines[-5:])}") from None
        cpu1 = procfs.cpu_seconds(srv.proc.pid)
        run = records.parse_kv(line)
        cli.wait(60)
        return {"case": name, "keys_per_sec": float(run["throughput_keys_sec"]),
                "client_cpu_s": float(run["cpu_user_s"]) + float(run["cpu_sys_s"]),
                "server_cpu_s": cpu1 - cpu0,
                "p50_us": float(run.get("p50_us", 0)), "p99_us": float(run.get("p99_us", 0))}
    finally:
        if cli is not None:
            cli.stop(10)
        srv.stop(10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record_count", type=int, default=1000000)
    ap.add_argument("--value_size", type=int, default=512)
    ap.add_argument("--batch_keys", type=int, default=500)
    ap.add_argument("--index_type", default="DRAM_PET_HASH")
    ap.add_argument("--running_seconds", type=float, default=5.0)
    ap.add_argument("--prefetch_depth", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="storage,shm_adaptive,shm_busy,brpc")
    ap.add_argument("--json", help="write every measurement to this file")
    a = ap.parse_args(argv)
    rc_client = ["--rdma_rc_qps_per_client_per_shard", str(max(a.prefetch_depth, 1))]
    cases = {
        "storage": lambda: storage_case(a),
        "shm_adaptive": lambda: ps_case(a, "shm_adaptive", "shm",
                                        ["--thread_num", "1", "--poll_mode", "adaptive"],
                                        rc_client + ["--poll_mode", "adaptive"]),
        "shm_busy": lambda: ps_case(a, "shm_busy", "shm", ["--thread_num", "1", "--poll_mode", "busy"],
                                    rc_client + ["--poll_mode", "busy"]),
        "shm_direct_sg": lambda: ps_case(a, "shm_direct_sg", "shm",
                                         ["--thread_num", "1", "--poll_mode", "adaptive"],
                                         rc_client + ["--poll_mode", "adaptive",
                                                      "--rdma_get_response_mode", "direct_sg"]),
        "brpc": lambda: ps_case(a, "brpc", "brpc", [], []),
    }
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in cases:
            ap.error(f"unknown case {c!r} (known: {', '.join(cases)})")
    rows = []
    for rep in range(a.repeats):
        for c in names:
            r = cases[c]()
            r["repeat"] = rep
            rows.append(r)
            print(f"# repeat {rep} {c}: {r['keys_per_sec'] / 1e6:.3f} M keys/s", file=sys.stderr, flush=True)
    med = {c: statistics.median(r["keys_per_sec"] for r in rows if r["case"] == c) for c in names}
    print(f"GET {a.batch_keys} x {a.value_size} B, {a.index_type}, {a.record_count} records, "
          f"1 server poll thread, 1 client thread, depth {a.prefetch_depth}, "
          f"{a.running_seconds}s x {a.repeats} (median); CPU {cpu_model()}")
    print(f"{'case':<14}{'M keys/s':>10}{'vs storage':>12}{'vs brpc':>9}{'client CPU-s':>14}"
          f"{'server CPU-s':>14}{'M keys/CPU-s':>14}{'server-only':>13}")
    for c in names:
        rs = [r for r in rows if r["case"] == c]
        vs_st = f"{med[c] / med['storage'] * 100:.0f}%" if "storage" in med else "-"
        vs_b = f"{med[c] / med['brpc']:.2f}x" if "brpc" in med else "-"
        ccpu = statistics.median(r["client_cpu_s"] for r in rs)
        scpu = statistics.median(r["server_cpu_s"] for r in rs)
        keys = [r["keys_per_sec"] * a.running_seconds for r in rs]
        eff = statistics.median(k / max(r["client_cpu_s"] + r["server_cpu_s"], 1e-9)
                                for k, r in zip(keys, rs))
        srv_eff = statistics.median(k / max(r["server_cpu_s"] or r["client_cpu_s"], 1e-9)
                                    for k, r in zip(keys, rs))
        print(f"{c:<14}{med[c] / 1e6:>10.3f}{vs_st:>12}{vs_b:>9}{ccpu:>14.2f}{scpu:>14.2f}{eff / 1e6:>14.2f}"
              f"{srv_eff / 1e6:>13.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
