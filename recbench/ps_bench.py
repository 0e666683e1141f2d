"""recbench-ps-bench: the PS client benchmark (RecStore's ps_transport_benchmark, transactions).

    python3 -m recbench.ps_bench --transport brpc --host 127.0.0.1 --port 15000 \\
        --record_count 100000 --value_size 512 --batch_keys 500 --thread_num 1 \\
        --prefetch_depth 8 --running_seconds 5 --no_barrier

Phases: load (keys 1..record_count, PUT; skipped with --skip_load), then the barrier — the line
``PS_BENCHMARK_LOADED`` on stdout and a wait for a line ``go`` on stdin, so a runner can release
every client process together (--no_barrier skips the wait) — then the timed run. Each phase
prints one line:

    PS_BENCHMARK_RESULT phase=run transport=brpc mode=fetch distribution=uniform zipfian_alpha=0.9
      threads=1 batch_size=500 records=100000 runtime_s=5.000 batches=... key_ops=...
      throughput_batches_sec=... throughput_keys_sec=... mean_us=... p50_us=... p95_us=...
      p99_us=... p999_us=... max_us=... cpu_user_s=... cpu_sys_s=... payload_gbps=...

(RecStore's keys first, then latency per request measured in C, CPU seconds of this process and
payload GB/s; then value_size, prefetch_depth, num_shards, keys_missing, wire, get_path,
get_parts, get_parts_gathered, and thread_batches_min / thread_batches_max: the batches completed
by the slowest and the fastest thread, so a server that serves some connections worse than
others — stragglers for a synchronous trainer — shows; then max_inflight_bytes, the process's
budget of bytes in flight its threads share (--max_inflight_bytes; "none" for no budget),
budget_deferred, how often a thread's next request waited in its client because its share was
out, and client_rows: how GET rows reached the bench's buffers (copy; in_place with
--rdma_rc_rows_in_slots; skipped with the skip_client_copy diagnostic; none without GETs); on a
transport that counts its waits for answers (brpc), wait_spun, wait_blocked, wait_quick,
wait_unspun and wait_preempted: waits answered while the thread spun, waits that blocked, waits
begun without a spin because the connection's recent waits did not pay for one (adaptive
spinning), waits begun without a spin because more of the process's threads were waiting than it
has CPUs or every spin slot was taken, and spins during which the kernel switched the thread out
for another (docs/scale.md).)

Open loop: --target_rate R sends R batches/s for the whole process (split over its threads) on a
uniform or Poisson timetable (--arrival, --arrival_seed; docs/open-loop.md). The run line's
p50_us..max_us are then measured from each batch's scheduled send time (coordinated omission
corrected) and the line ends with service_p50_us .. service_max_us (from the actual send),
late_sends, achieved_rate, target_rate, arrival and arrival_seed; a second histogram line with
phase=run_service carries the service times. Without --target_rate (closed loop) nothing
changes. Each result line is
followed by a PS_BENCHMARK_HIST line with the phase's latency histogram (recbench.latency_hist),
which the runner merges across clients for exact percentiles. --transaction_profile adds
RecStore's PS_BENCHMARK_PROFILE line (average ns per batch of each step). The loops are C
(recbench._ps.bench_load / bench_run). Exit codes: 0 ok, 1 failure (verification: the first bad
key is printed), 2 bad flags, 77 when the transport's device is missing (a skip).
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading

from recbench import _ps, errors, latency_hist, rc_options, transports
from recbench.cli_flags import (
    add_bool_flag,
    format_inflight_budget,
    parse_bool,
    parse_inflight_budget,
    tls_options,
)
from recbench.ps_config import HASH_METHODS, ConfigError, load_config
from recbench.transports import default_port

log = logging.getLogger("recbench.ps_bench")

SKIP_EXIT_CODE = 77
DEFAULT_SEED = 0x9E3779B97F4A7C15
MAX_TARGET_RATE = _ps.PACING_MAX_RATE  # RS_PACING_MAX_RATE (csrc/include/recstore/pacing.h)
RC_TRANSPORTS = transports.RC_NAMES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="recbench-ps-bench",
                                description="PS client benchmark (load + timed run) in C.")
    p.add_argument("--transport", default=None, help="brpc | grpc | shm | rdma (default: the "
                   "config's cache_ps.ps_type, else brpc)")
    p.add_argument("--wire", default="native", choices=["native", "recstore"],
                   help="native: recbench's recstore.PSService; recstore: RecStore's own "
                   "ParameterService (brpc and grpc; keys routed by CityHash64, 500 keys per "
                   "request), e.g. against RecStore's ps_server")
    p.add_argument("--hash_method", default=None, choices=list(HASH_METHODS),
                   help="shard routing (default: the config's distributed_client.hash_method, "
                   "else the wire's own: rs_mix64 native, city_hash on RecStore's wire; "
                   "simple_mod = key mod shards, RecStore's wire only)")
    p.add_argument("--config_path", help="RecStore config JSON: servers, shards, value size, "
                   "hash method")
    p.add_argument("--host", default=None, help="server host when no config (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None,
                   help="port of shard 0 when no config; shard i is at port+i "
                   "(default RecStore's: brpc 15000 / 25000+shard, grpc 15000+shard)")
    p.add_argument("--num_shards", type=int, default=None, help="shards (default 1)")
    p.add_argument("--workload", default="transactions", choices=["transactions"],
                   help="RecStore workload; recbench implements transactions")
    p.add_argument("--mode", default="fetch", choices=["fetch", "insert", "mixed", "fetch_insert"])
    p.add_argument("--record_count", type=int, default=1000000, help="keys 1..N loaded")
    p.add_argument("--value_size", type=int, default=None,
                   help="row bytes, a multiple of 4 (default the config's, else 512)")
    p.add_argument("--batch_keys", type=int, default=500, help="keys per request batch")
    p.add_argument("--thread_num", type=int, default=1, help="client threads in the run phase")
    p.add_argument("--load_thread_num", type=int, default=0,
                   help="client threads in the load phase (0 = thread_num)")
    p.add_argument("--running_seconds", type=float, default=5.0, help="timed run length")
    p.add_argument("--warmup_seconds", type=float, default=0.0,
                   help="run before the timed window, not counted")
    p.add_argument("--distribution", default="uniform", choices=["uniform", "zipfian"])
    p.add_argument("--zipfian_alpha", type=float, default=0.9, help="zipfian theta (0 < a < 1)")
    p.add_argument("--read_ratio", type=int, default=100, help="mixed: percent of fetch batches")
    p.add_argument("--prefetch_depth", type=int, default=0,
                   help="batches in flight per thread (0 = 16 for rdma/shm, else 1)")
    add_bool_flag(p, "--skip_load", "skip the load phase")
    p.add_argument("--fetch_key_space", type=int, default=0,
                   help="fetch keys from 1..N (N > record_count requests misses; 0 = record_count)")
    add_bool_flag(p, "--verify_deterministic_values",
                  "load rows derived from each key; check every fetched row (misses must be 0)")
    p.add_argument("--seed", type=lambda s: int(s, 0), default=DEFAULT_SEED, help="rng seed")
    add_bool_flag(p, "--no_barrier", "do not wait for 'go' on stdin after the load phase")
    add_bool_flag(p, "--transaction_profile",
                  "print PS_BENCHMARK_PROFILE: average ns per batch of key generation, submit, "
                  "wait (rows received) and consume")
    p.add_argument("--target_rate", type=float, default=0.0,
                   help="open loop: batches/s offered by this process, split over its threads "
                   "(0 = closed loop, the default)")
    p.add_argument("--arrival", default="poisson", choices=["poisson", "uniform"],
                   help="open loop: inter-arrival times (poisson: seeded exponential gaps; "
                   "uniform: exact spacing)")
    p.add_argument("--arrival_seed", type=lambda s: int(s, 0), default=1,
                   help="open loop: seed of the arrival generators (one per thread)")
    p.add_argument("--max_inflight_bytes", type=parse_inflight_budget, default=0,
                   metavar="BYTES|none",
                   help="the process's budget of request bytes (keys + rows) in flight, shared "
                   "equally by its threads with batches in flight; a thread's request past its "
                   "share waits for its own earlier ones (0 = the transport's default: 8M per CPU "
                   "on brpc and grpc, none on shm and rdma; none = no budget; docs/scale.md)")
    p.add_argument("--timeout_ms", type=int, default=10000, help="per-request timeout")
    p.add_argument("--transport_options", default=None, help="transport-specific 'k=v;k=v'")
    p.add_argument("--tls_ca", default=None, metavar="PEM",
                   help="grpc only: connect with TLS, trusting these root certificates")
    p.add_argument("--auth_token_file", default=None, metavar="FILE",
                   help="send the deployment token read from FILE (the servers' "
                   "--auth_token_file); the token is never printed")
    p.add_argument("--log_level", default="WARNING")
    rc_options.add_client_flags(p)  # --rdma_rc_*, --rdma_get_response_mode, --poll_mode (rdma/shm)
    return p


def resolve(args) -> dict:
    """Keyword arguments of _ps.bench_load/bench_run from flags and config."""
    cfg = load_config(args.config_path) if args.config_path else None
    transport = transports.get(args.transport or (cfg.transport if cfg else None) or "brpc").name
    num_shards = args.num_shards or (cfg.num_shards if cfg else None) or 1
    endpoints = []
    # a config listing every shard gives the endpoints in shard-id order (ids may be sparse,
    # e.g. 3 and 8: key k goes to the (hash(k) % num_shards)-th of them)
    from_config = cfg is not None and args.port is None and args.host is None
    listed = (sorted(cfg.servers, key=lambda s: s.shard)
              if from_config and cfg and len(cfg.servers) == num_shards else None)
    for shard in range(num_shards):
        entry = listed[shard] if listed else (cfg.server_for(shard) if from_config and cfg else None)
        if entry is not None:
            endpoints.append((entry.host, entry.port))
        else:
            host = args.host or "127.0.0.1"
            port = (args.port + shard if args.port is not None
                    else default_port(transport, shard, num_shards))
            endpoints.append((host, port))
    value_size = args.value_size or (cfg.value_size if cfg else None) or 512
    if value_size % 4:
        raise ValueError(f"--value_size {value_size} is not a multiple of 4 (float32 rows)")
    for name in ("record_count", "batch_keys", "thread_num"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1")
    if not 0 <= args.read_ratio <= 100:
        raise ValueError(f"--read_ratio {args.read_ratio} is not a percentage")
    if args.running_seconds <= 0:
        raise ValueError("--running_seconds must be > 0")
    if not 0 <= args.target_rate <= MAX_TARGET_RATE:
        raise ValueError(f"--target_rate {args.target_rate:g} is not in [0, {MAX_TARGET_RATE:g}] "
                         "batches/s (0 = closed loop)")
    depth = args.prefetch_depth or (16 if transport in RC_TRANSPORTS else 1)
    if args.wire == "recstore":
        if not transports.get(transport).recstore_wire:
            raise ValueError(f"--wire recstore needs --transport brpc or grpc, not {transport}")
        transport = f"recstore+{transport}"  # the client connections of RecStore's wire
    return {
        "transport": transport, "endpoints": endpoints, "value_size": value_size,
        "prefetch_depth": depth, "timeout_ms": args.timeout_ms,
        "extra": ";".join(x for x in (rc_options.bench_extra(args, transport, depth),
                                      tls_options(transport, {"tls_ca": args.tls_ca})) if x)
        or None,
        "mode": args.mode, "record_count": args.record_count, "batch_keys": args.batch_keys,
        "threads": args.thread_num, "load_threads": args.load_thread_num,
        "running_seconds": args.running_seconds, "warmup_seconds": args.warmup_seconds,
        "distribution": args.distribution, "zipfian_alpha": args.zipfian_alpha,
        "read_ratio": args.read_ratio, "fetch_key_space": args.fetch_key_space,
        "verify": bool(args.verify_deterministic_values), "seed": args.seed,
        "profile": bool(args.transaction_profile),
        "target_rate": args.target_rate, "arrival": args.arrival,
        "arrival_seed": args.arrival_seed,
        "auth_token_file": args.auth_token_file,
        "hash_method": args.hash_method or (cfg.hash_method if cfg else None),
        "max_inflight_bytes": args.max_inflight_bytes,
        "rows_in_slots": rc_options.rows_in_slots(args),
    }


def get_path(transport: str, res: dict) -> str:
    """Which path the phase's GET responses took: direct_sg (every shard response's rows were
    scatter-gathered from the server's value store), staging_copy (none were), mixed, none (no
    GET), n/a (brpc/grpc: rows travel inside the RPC message)."""
    if transport not in RC_TRANSPORTS:
        return "n/a"
    parts, gathered = res.get("get_parts", 0), res.get("get_parts_gathered", 0)
    if not parts:
        return "none"
    if gathered == parts:
        return "direct_sg"
    return "staging_copy" if gathered == 0 else "mixed"


def client_rows(kw: dict, phase: str = "run") -> str:
    """How a phase's GET rows reach the caller's buffer: in_place (the client's row buffers,
    --rdma_rc_rows_in_slots, run phase), skipped (the RC diagnostic skip_client_copy: they stay in
    the response slot), copy (every other case, every transport), none (a phase without GETs: the
    load, or --mode insert)."""
    if phase == "load" or kw.get("mode") == "insert":
        return "none"
    if kw.get("rows_in_slots"):
        return "in_place"
    for item in re.split(r"[;,]", kw.get("extra") or ""):
        key, _, value = item.partition("=")
        if key.strip() == "skip_client_copy":
            try:
                if parse_bool(value):
                    return "skipped"
            except argparse.ArgumentTypeError:
                pass  # the transport refused it before any result
    return "copy"


def result_line(phase: str, kw: dict, res: dict) -> str:
    rt = res["runtime_s"]
    threads = kw["threads"] if phase == "run" else (kw["load_threads"] or kw["threads"])
    bps = res["batches"] / rt if rt > 0 else 0.0
    kps = res["key_ops"] / rt if rt > 0 else 0.0
    fields = [
        ("phase", phase), ("transport", kw["transport"].split("+")[-1]), ("mode", kw["mode"]),
        ("distribution", kw["distribution"]), ("zipfian_alpha", kw["zipfian_alpha"]),
        ("threads", threads), ("batch_size", kw["batch_keys"]), ("records", kw["record_count"]),
        ("runtime_s", f"{rt:.6f}"), ("batches", res["batches"]), ("key_ops", res["key_ops"]),
        ("throughput_batches_sec", f"{bps:.3f}"), ("throughput_keys_sec", f"{kps:.3f}"),
        ("mean_us", f"{res['mean_us']:.3f}"), ("p50_us", f"{res['p50_us']:.3f}"),
        ("p95_us", f"{res['p95_us']:.3f}"), ("p99_us", f"{res['p99_us']:.3f}"),
        ("p999_us", f"{res['p999_us']:.3f}"), ("max_us", f"{res['max_us']:.3f}"),
        ("cpu_user_s", f"{res['cpu_user_s']:.3f}"), ("cpu_sys_s", f"{res['cpu_sys_s']:.3f}"),
        ("payload_gbps", f"{kps * kw['value_size'] / 1e9:.6f}"),
        ("value_size", kw["value_size"]), ("prefetch_depth", kw["prefetch_depth"]),
        ("num_shards", len(kw["endpoints"])), ("keys_missing", res["keys_missing"]),
        ("wire", "recstore" if kw["transport"].startswith("recstore+") else "native"),
        ("get_path", get_path(kw["transport"], res)),
        ("get_parts", res.get("get_parts", 0)),
        ("get_parts_gathered", res.get("get_parts_gathered", 0)),
        ("thread_batches_min", res.get("thread_batches_min", 0)),
        ("thread_batches_max", res.get("thread_batches_max", 0)),
        ("max_inflight_bytes", format_inflight_budget(res.get("budget_bytes", 0))),
        ("budget_deferred", res.get("budget_deferred", 0)),
        ("client_rows", client_rows(kw, phase)),
    ]
    if "wait_spun" in res:  # the transport counts how its waits ended (brpc)
        fields += [(k, res[k]) for k in ("wait_spun", "wait_blocked", "wait_quick", "wait_unspun",
                                         "wait_preempted")]
    if phase == "run" and "late_sends" in res:
        fields += [(f"service_{p}_us", f"{res[f'service_{p}_us']:.3f}")
                   for p in ("p50", "p95", "p99", "p999", "max")]
        fields += [("late_sends", res["late_sends"]), ("achieved_rate", f"{bps:.3f}"),
                   ("target_rate", f"{kw['target_rate']:.3f}"), ("arrival", kw["arrival"]),
                   ("arrival_seed", kw["arrival_seed"])]
    return "PS_BENCHMARK_RESULT " + " ".join(f"{k}={v}" for k, v in fields)


def hist_line(phase: str, res: dict, key: str = "hist") -> str:
    return latency_hist.format_line(phase, latency_hist.Hist.from_tuple(res[key]))


def profile_line(kw: dict, res: dict) -> str:
    """RecStore's PS_BENCHMARK_PROFILE line (--transaction_profile)."""
    return (f"PS_BENCHMARK_PROFILE phase=run transport={kw['transport']} mode={kw['mode']} "
            f"prefetch_depth={kw['prefetch_depth']} batches={res['batches']} "
            f"make_keys_avg_ns={res['make_keys_avg_ns']:.1f} "
            f"submit_avg_ns={res['submit_avg_ns']:.1f} "
            f"consume_avg_ns={res['consume_avg_ns']:.1f} "
            f"wait_plus_result_avg_ns={res['wait_avg_ns']:.1f}")


def _run_phase(fn, kw: dict) -> dict:
    """Run a C phase in a worker thread so SIGINT/SIGTERM reach Python and can stop it."""
    box = {}

    def target():
        try:
            box["res"] = fn(**kw)
        except BaseException as e:  # noqa: BLE001 — handed to the main thread
            box["exc"] = e

    t = threading.Thread(target=target, name="ps_bench-phase")
    t.start()
    while t.is_alive():
        t.join(0.25)
    if "exc" in box:
        raise box["exc"]
    return box["res"]


def wait_for_go(stdin) -> None:
    for line in stdin:
        word = line.strip()
        if word == "go":
            return
        if word:
            log.warning("ignoring %r on stdin while waiting for 'go'", word)
    raise RuntimeError("stdin closed before the 'go' line (use --no_barrier to run standalone)")


def run(args, out=sys.stdout, stdin=sys.stdin) -> int:
    kw = resolve(args)
    stopped = {"signal": None}

    def on_signal(signum, frame):
        stopped["signal"] = signum
        _ps.bench_stop()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    _ps.bench_clear_stop()
    try:
        if not args.skip_load:
            res = _run_phase(_ps.bench_load, kw)
            print(result_line("load", kw, res), file=out, flush=True)
            print(hist_line("load", res), file=out, flush=True)
        if stopped["signal"]:
            return 1
        print("PS_BENCHMARK_LOADED", file=out, flush=True)
        if not args.no_barrier:
            wait_for_go(stdin)
        res = _run_phase(_ps.bench_run, kw)
        print(result_line("run", kw, res), file=out, flush=True)
        print(hist_line("run", res), file=out, flush=True)
        if "service_hist" in res:
            print(hist_line("run_service", res, "service_hist"), file=out, flush=True)
        if kw["profile"]:
            print(profile_line(kw, res), file=out, flush=True)
        if res.get("verify_error"):
            print(f"PS_BENCHMARK_VERIFY_FAILED first_bad_key={res['first_bad_key']} "
                  f"bad_rows={res['verify_bad_rows']} checked_rows={res['verify_checked_rows']}",
                  file=out, flush=True)
            print(f"recbench-ps-bench: {res['verify_error']}", file=sys.stderr)
            return 1
        if kw["verify"] and res["keys_missing"]:
            print(f"recbench-ps-bench: verification failed: {res['keys_missing']} loaded keys "
                  "were missing", file=sys.stderr)
            return 1
        return 1 if stopped["signal"] else 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return run(args)
    except (ConfigError, ValueError) as e:
        if isinstance(e, errors.RecbenchError):
            print(f"recbench-ps-bench: error: {e}", file=sys.stderr)
            return 1
        print(f"recbench-ps-bench: error: {e}", file=sys.stderr)
        return 2
    except errors.DeviceUnavailable as e:
        print(f"recbench-ps-bench: skipped: {e}", file=sys.stderr)
        return SKIP_EXIT_CODE
    except (errors.RecbenchError, RuntimeError) as e:
        print(f"recbench-ps-bench: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
