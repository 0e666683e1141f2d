"""Soak test of the parameter server: hours-long mixed traffic with verification, client churn and
injected client kills, while the servers' memory and descriptors are watched from /proc.

    python3 tools/benchmarks/soak_ps.py --minutes 10            # every transport this host runs
    python3 tools/benchmarks/soak_ps.py --minutes 1 --transports brpc,shm --output soak.json

Per transport (run one after the other, --minutes each): two `python -m recbench.ps_server`
processes (shards 0 and 1 of 2) on free loopback ports, and against them
- `--steady-clients` threads, each with one long-lived recbench.PSClient,
- one churn thread that opens a new PSClient every `--churn-seconds` and closes it again,
- every `--kill-every` seconds a `python -m recbench.ps_bench` process that is killed with
  SIGKILL in its run phase (an injected fault: its failure is expected and not counted as an
  error; the servers must free its connections and, for shm, its lanes).
Every client thread owns a key range and keeps the exact expected rows: PUT sets rows, UPDATE
adds small integer deltas, GET (batches that mix both shards) compares every row. Any exception
or mismatch is an error; the result expects none.

Every `--sample-seconds` each server's RSS, open descriptors, shm lane mappings and CPU time
are read from /proc. The report (stdout lines and optional JSON) gives requests and keys served,
errors, injected kills, RSS after warm-up vs at the end (growth), descriptors idle before and
after the run (must match: nothing leaked) and shm mappings (must return to zero).
Transports whose device is missing (rdma without a verbs NIC) are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time

import numpy as np

from recbench import _ps, procfs, transports
from recbench.launch import LineProcess, PSServerLauncher
from recbench.ps_client import PSClient

log = logging.getLogger("recbench.bench.soak_ps")
INTERRUPTED = threading.Event()  # SIGINT/SIGTERM: finish the current transport early, report

VALUE_SIZE = 64
DIM = VALUE_SIZE // 4
KEYS_PER_CLIENT = 20000
BATCH = 200


# ---- server processes -------------------------------------------------------------------------

class ShardServer:
    """One `python -m recbench.ps_server` process serving one shard on a free loopback port."""

    def __init__(self, transport: str, shard: int, num_shards: int):
        self.transport, self.shard = transport, shard
        self.args = [sys.executable, "-m", "recbench.ps_server", "--transport", transport,
                     "--host", "127.0.0.1", "--port", "0", "--num_shards", str(num_shards),
                     "--local_shard_id", str(shard), "--value_size", str(VALUE_SIZE),
                     "--capacity", "400000", "--num_threads", "2",
                     "--max_keys_per_request", "1000"]
        self.launcher: PSServerLauncher | None = None
        self.port = 0
        self.final: dict = {}
        self.stderr: list[str] = []

    def start(self, timeout: float = 60) -> ShardServer:
        self.launcher = PSServerLauncher(self.args, 1)
        self.stderr = self.launcher.err_lines
        try:
            ready = self.launcher.wait_ready(timeout)
        except RuntimeError:
            code = self.stop()
            raise RuntimeError(f"{self.transport} shard {self.shard} server did not start "
                               f"(exit {code}): {' | '.join(self.stderr[-3:])}") from None
        self.port = int(ready[0]["port"])
        return self

    @property
    def pid(self) -> int:
        assert self.launcher is not None
        return self.launcher.proc.pid

    def stop(self) -> int | None:
        if self.launcher is None:
            return None
        code = self.launcher.stop(15)
        stopped = self.launcher.stopped_lines()
        if stopped:
            self.final = stopped[-1]
        return code


# ---- client workers ---------------------------------------------------------------------------

class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = self.keys = self.errors = self.clients_opened = self.injected_kills = 0
        self.error_samples: list[str] = []

    def add(self, requests=0, keys=0):
        with self.lock:
            self.requests += requests
            self.keys += keys

    def error(self, what: str):
        with self.lock:
            self.errors += 1
            if len(self.error_samples) < 5:
                self.error_samples.append(what)


class KeyRange:
    """The exact expected rows of a thread's keys (rows start as zeros: missing keys read 0)."""

    def __init__(self, base: int, n: int, seed: int):
        self.keys = np.arange(base, base + n, dtype=np.uint64)
        self.rows = np.zeros((n, DIM), dtype=np.float32)
        self.rng = np.random.default_rng(seed)

    def step(self, client: PSClient, counters: Counters) -> None:
        idx = self.rng.choice(len(self.keys), size=BATCH, replace=False)
        keys = self.keys[idx]
        op = self.rng.integers(0, 10)
        if op < 5:  # GET, verified row by row
            got = client.get(keys)
            bad = np.nonzero((got != self.rows[idx]).any(axis=1))[0]
            if len(bad):
                k = int(keys[bad[0]])
                raise AssertionError(f"GET key {k}: got {got[bad[0]][:4]}..., expected "
                                     f"{self.rows[idx][bad[0]][:4]}... ({len(bad)} bad rows)")
        elif op < 8:  # PUT
            rows = (keys.astype(np.float32)[:, None] % 1000 + self.rng.integers(
                0, 100, size=(BATCH, 1)).astype(np.float32) + np.arange(DIM, dtype=np.float32))
            client.put(keys, rows)
            self.rows[idx] = rows
        else:  # UPDATE with small integer deltas: float32 sums stay exact
            deltas = self.rng.integers(-3, 4, size=(BATCH, DIM)).astype(np.float32)
            client.update(keys, deltas)
            self.rows[idx] += deltas
        counters.add(1, BATCH)


def _steady(uri, opts, kr: KeyRange, stop: threading.Event, counters: Counters):
    try:
        with PSClient(uri, **opts) as c:
            with counters.lock:
                counters.clients_opened += 1
            while not stop.is_set():
                kr.step(c, counters)
    except Exception as e:  # noqa: BLE001 - every failure is a soak error
        counters.error(f"steady client: {type(e).__name__}: {e}")


def _churn(uri, opts, kr: KeyRange, stop: threading.Event, counters: Counters, every: float):
    while not stop.is_set():
        try:
            with PSClient(uri, **opts) as c:
                with counters.lock:
                    counters.clients_opened += 1
                until = time.monotonic() + every
                while time.monotonic() < until and not stop.is_set():
                    kr.step(c, counters)
        except Exception as e:  # noqa: BLE001
            counters.error(f"churn client: {type(e).__name__}: {e}")
            stop.wait(1)


def _killer(transport, servers, stop: threading.Event, counters: Counters, every: float,
            workdir: str):
    """Start a ps_bench, let it reach its run phase, SIGKILL it; repeat."""
    cfg = os.path.join(workdir, f"soak_{transport}.json")
    from recbench.ps_config import build_config

    with open(cfg, "w") as f:
        json.dump(build_config(transport, [("127.0.0.1", s.port) for s in servers],
                               value_size=VALUE_SIZE), f)
    while not stop.wait(every):
        args = [sys.executable, "-m", "recbench.ps_bench", "--config_path", cfg, "--transport",
                transport, "--mode", "mixed", "--record_count", "2000", "--batch_keys", "100",
                "--thread_num", "1", "--prefetch_depth", "2", "--running_seconds", "600",
                "--no_barrier", "--value_size", str(VALUE_SIZE)]
        p = LineProcess(args)
        try:
            try:  # PS_BENCHMARK_LOADED: load done, run phase starting
                p.wait_line("PS_BENCHMARK_LOADED", 60)
            except RuntimeError:
                pass  # it exited or is slow: kill it all the same
            stop.wait(0.5)  # let it run a little (no synchronisation depends on this)
        finally:
            if p.proc.poll() is None:
                p.signal(signal.SIGKILL)
                with counters.lock:
                    counters.injected_kills += 1
            p.stop()


# ---- one transport ------------------------------------------------------------------------------

def _sample(servers, t0) -> dict:
    s = {"t_s": round(time.monotonic() - t0, 1)}
    for srv in servers:
        try:
            s[f"shard{srv.shard}"] = {"rss_mb": round(procfs.rss_kb(srv.pid) / 1024, 1),
                                      "fds": procfs.open_fds(srv.pid),
                                      "shm_maps": procfs.shm_mappings(srv.pid),
                                      "cpu_s": round(procfs.cpu_seconds(srv.pid), 2)}
        except ProcessLookupError:
            s[f"shard{srv.shard}"] = None
    return s


def _wait(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def soak_transport(transport: str, seconds: float, args, out=sys.stdout) -> dict:
    result = {"transport": transport, "status": "ok", "seconds": seconds}
    servers = [ShardServer(transport, i, 2) for i in range(2)]
    counters = Counters()
    stop = threading.Event()
    threads = []
    t0 = time.monotonic()
    samples = []
    try:
        for s in servers:
            s.start()
        uri = f"{transport}://" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
        idle_fds = [procfs.open_fds(s.pid) for s in servers]
        opts = {"timeout_ms": 10000, "prefetch_depth": 2}
        if transports.get(transport).rc:  # small lanes: many clients attach and detach
            opts["transport_options"] = ("qps_per_client_per_shard=2;slots_per_qp=2;"
                                         "request_slot_bytes=65536;response_slot_bytes=65536")
        base = 1 << 40
        for i in range(args.steady_clients):
            kr = KeyRange(base + i * KEYS_PER_CLIENT, KEYS_PER_CLIENT, seed=i)
            threads.append(threading.Thread(target=_steady, args=(uri, opts, kr, stop, counters),
                                            name=f"steady{i}", daemon=True))
        kr = KeyRange(base + args.steady_clients * KEYS_PER_CLIENT, KEYS_PER_CLIENT, seed=99)
        threads.append(threading.Thread(target=_churn, args=(uri, opts, kr, stop, counters,
                                                             args.churn_seconds),
                                        name="churn", daemon=True))
        workdir = tempfile.mkdtemp(prefix="recbench-soak-")
        if args.kill_every > 0:
            threads.append(threading.Thread(target=_killer, args=(transport, servers, stop,
                                                                  counters, args.kill_every,
                                                                  workdir),
                                            name="killer", daemon=True))
        for t in threads:
            t.start()
        samples.append(_sample(servers, t0))
        next_sample = time.monotonic() + args.sample_seconds
        end = t0 + seconds
        while time.monotonic() < end and not INTERRUPTED.is_set():
            stop.wait(min(0.5, max(0.0, end - time.monotonic())))
            if time.monotonic() >= next_sample:
                samples.append(_sample(servers, t0))
                next_sample += args.sample_seconds
                if any(v is None for k, v in samples[-1].items() if k.startswith("shard")):
                    counters.error("a server process died")
                    break
        stop.set()
        for t in threads:
            t.join(60)
        samples.append(_sample(servers, t0))
        # every client is gone: the servers must be back to their idle descriptors, no lanes
        freed = _wait(lambda: [procfs.open_fds(s.pid) for s in servers] == idle_fds and
                      all(procfs.shm_mappings(s.pid) == 0 for s in servers), 20)
        end_fds = [procfs.open_fds(s.pid) for s in servers]
        end_maps = [procfs.shm_mappings(s.pid) for s in servers]
        samples.append(_sample(servers, t0))
        result.update(_summarise(samples, counters, idle_fds, end_fds, end_maps, freed))
    except Exception as e:  # noqa: BLE001
        stop.set()
        if "device" in str(e).lower() or "exit 77" in str(e):
            result.update(status="skipped", reason=str(e))
        else:
            result.update(status="failed", reason=f"{type(e).__name__}: {e}")
    finally:
        stop.set()
        for s in servers:
            s.stop()
        shutil_rmtree(locals().get("workdir"))
    if INTERRUPTED.is_set():
        result["interrupted_after_s"] = round(time.monotonic() - t0, 1)
    result["server_final"] = [s.final for s in servers]
    result["samples"] = samples
    if result["status"] == "ok" and (result["errors"] or not result["resources_freed"]):
        result["status"] = "failed"
    return result


def shutil_rmtree(path):
    if path:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def _summarise(samples, counters, idle_fds, end_fds, end_maps, freed) -> dict:
    warm = samples[max(1, len(samples) // 5)] if len(samples) > 2 else samples[0]
    live = [s for s in samples if all(s.get(f"shard{i}") for i in range(2))]
    rss_warm = sum(warm[f"shard{i}"]["rss_mb"] for i in range(2))
    rss_end = sum(live[-1][f"shard{i}"]["rss_mb"] for i in range(2))
    rss_max = max(sum(s[f"shard{i}"]["rss_mb"] for i in range(2)) for s in live)
    fds_max = max(max(s[f"shard{i}"]["fds"] for i in range(2)) for s in live)
    cpu = sum(live[-1][f"shard{i}"]["cpu_s"] for i in range(2))
    return {
        "requests": counters.requests, "keys": counters.keys, "errors": counters.errors,
        "error_samples": counters.error_samples, "clients_opened": counters.clients_opened,
        "injected_kills": counters.injected_kills,
        "rss_after_warmup_mb": round(rss_warm, 1), "rss_end_mb": round(rss_end, 1),
        "rss_max_mb": round(rss_max, 1), "rss_growth_mb": round(rss_end - rss_warm, 1),
        "fds_idle_before": idle_fds, "fds_idle_after": end_fds, "fds_max": fds_max,
        "shm_maps_after": end_maps, "resources_freed": bool(freed),
        "server_cpu_s": round(cpu, 2),
    }


def result_line(r: dict) -> str:
    keys = ("transport", "status", "seconds", "requests", "keys", "errors", "injected_kills",
            "clients_opened", "rss_after_warmup_mb", "rss_end_mb", "rss_max_mb", "rss_growth_mb",
            "fds_idle_before", "fds_idle_after", "fds_max", "shm_maps_after", "server_cpu_s")
    parts = []
    for k in keys:
        if k in r:
            v = r[k]
            parts.append(f"{k}={';'.join(map(str, v)) if isinstance(v, list) else v}")
    if r.get("reason"):
        parts.append(f"reason=\"{r['reason']}\"")
    return "SOAK_RESULT " + " ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="soak_ps.py", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, required=True,
                   help="soak time per transport (fractions allowed)")
    p.add_argument("--transports", default=None,
                   help="comma list (default: every transport of this build; rdma is skipped "
                   "with the reason where there is no verbs device)")
    p.add_argument("--steady-clients", type=int, default=2)
    p.add_argument("--churn-seconds", type=float, default=3.0,
                   help="lifetime of each churn client")
    p.add_argument("--kill-every", type=float, default=10.0,
                   help="seconds between injected ps_bench SIGKILLs (0 = none)")
    p.add_argument("--sample-seconds", type=float, default=5.0)
    p.add_argument("--output", help="write the full result (with samples) as JSON here")
    p.add_argument("--log_level", default="WARNING")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING))
    if args.minutes <= 0:
        print("soak_ps.py: error: --minutes must be > 0", file=sys.stderr)
        return 2
    have = _ps.transports()
    names = args.transports.split(",") if args.transports else list(have)
    unknown = [n for n in names if n not in have]
    if unknown:
        print(f"soak_ps.py: error: unknown transport(s) {','.join(unknown)}; "
              f"this build knows {','.join(have)}", file=sys.stderr)
        return 2
    def on_signal(signum, frame):
        INTERRUPTED.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    results = []
    for name in names:
        if INTERRUPTED.is_set():
            results.append({"transport": name, "status": "skipped", "reason": "interrupted"})
            print(result_line(results[-1]), flush=True)
            continue
        if have[name] is not None:
            r = {"transport": name, "status": "skipped", "reason": have[name]}
        elif name == "rdma" and not _verbs_device():
            r = {"transport": name, "status": "skipped", "reason": "no RDMA verbs device"}
        else:
            print(f"[soak] {name}: {args.minutes} min ...", file=sys.stderr, flush=True)
            r = soak_transport(name, args.minutes * 60, args)
        results.append(r)
        print(result_line(r), flush=True)
        for e in r.get("error_samples", []):
            print(f"[soak] {name} error: {e}", file=sys.stderr)
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
        print(f"[output] {args.output}", file=sys.stderr)
    return 1 if any(r["status"] == "failed" for r in results) else 0


def _verbs_device() -> bool:
    try:
        from recbench import rdma

        return bool(rdma.devices())
    except Exception:  # noqa: BLE001 - no libibverbs: no device
        return False
