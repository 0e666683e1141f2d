"""`python3 tools/benchmarks/run_benchmark_ps.py`: the PS benchmark runner.

For each transport x repeat it writes a RecStore-shaped config, starts the shard servers (locally
or over ssh, optionally in `docker exec`), starts the client processes, releases their run phases
together through the stdin `go` barrier, collects their result lines and writes summary.csv,
summary_totals.csv, the Chinese summary.md and run_config.json.

This module holds the command line: RecStore's flags with RecStore's defaults, the workload
profiles (`--profile`, explicit flags win), `--interactive`, and the post-parse validation and
derived defaults. The work is in recbench.ps_session (cases), recbench.runner_config (configs and
command lines), recbench.topology, recbench.execution, recbench.preflight, recbench.results and
recbench.report_md.
"""

import argparse
import os
import sys

from recbench.runner_config import scoped_transport_options
from recbench.topology import (
    RC_TRANSPORTS,
    TopologyError,
    build_topology_plan,
    fabric_node_ids,
    normalize_transport_list,
    parse_rdma_fabric_plan,
)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER_VERSION = 1
RESULT_DIR_PREFIX = "benchmark_ps_"
DEFAULT_RDMA_FETCH_QPS = 16
DEFAULT_RDMA_FETCH_SLOTS = 1
DEFAULT_RDMA_PREFETCH_DEPTH = 16
DEFAULT_TRANSPORTS = "rdma,grpc,brpc,shm"

# --profile values from the user's workload and concurrency tables. Explicit flags win.
PROFILES = {
    "smoke": dict(record_count=10000, value_size=128, batch_keys=64, runtime_seconds=1, repeat=1,
                  client_processes_per_ip=1, client_threads_per_process=1,
                  client_load_threads_per_process=1, server_worker_threads=2,
                  server_rdma_threads=1, rdma_rc_qps_per_client_per_shard=4,
                  rdma_rc_slots_per_qp=1, prefetch_depth=4, rdma_wait_timeout_ms=8000,
                  rdma_rc_server_get_workers=0, rdma_rc_server_coroutines_per_thread=1,
                  rdma_get_response_mode="auto"),
    "rpc-small": dict(record_count=5000, value_size=128, batch_keys=64, runtime_seconds=1,
                      repeat=1, client_processes_per_ip=1, client_threads_per_process=2,
                      client_load_threads_per_process=2, server_worker_threads=2),
    "rpc-stress-small": dict(record_count=50000, value_size=128, batch_keys=64, runtime_seconds=3,
                             repeat=1, client_processes_per_ip=4, client_threads_per_process=4,
                             client_load_threads_per_process=4, server_worker_threads=4),
    "fair-small": dict(record_count=10000, value_size=128, batch_keys=64, runtime_seconds=1,
                       repeat=1, client_processes_per_ip=1, client_threads_per_process=1,
                       client_load_threads_per_process=1, server_worker_threads=4,
                       server_rdma_threads=1, rdma_rc_server_get_workers=0,
                       rdma_rc_server_coroutines_per_thread=1, rdma_get_response_mode="auto"),
    "rdma-capacity": dict(record_count=1000000, value_size=512, batch_keys=500, runtime_seconds=5,
                          repeat=1, client_processes_per_ip=4, client_threads_per_process=3,
                          client_load_threads_per_process=3, server_rdma_threads=16,
                          prefetch_depth=16, rdma_rc_qps_per_client_per_shard=16,
                          rdma_rc_slots_per_qp=1, rdma_rc_profile_interval_ms=0,
                          index_type="DRAM_PET_HASH", rdma_rc_server_get_workers=0,
                          rdma_rc_server_coroutines_per_thread=1, rdma_get_response_mode="auto",
                          rdma_rc_server_numa_id=0, rdma_rc_client_numa_id=0,
                          rdma_server_bind_core_offset=0, rdma_client_bind_core_offset=16,
                          rdma_client_bind_core_stride=2),
}
CAPACITY_PROFILES = ("rpc-stress-small", "rdma-capacity")

RETIRED_FLAGS = {
    "--client-hosts": "--client-ips", "--server-hosts": "--server-shard-ips",
    "--server-count": "--server-shard-ips", "--client-count": "--client-processes-per-ip",
    "--threads": "--client-threads-per-process",
    "--load-threads": "--client-load-threads-per-process",
    "--server-num-threads": "--server-worker-threads", "--rdma-thread-num": "--server-rdma-threads",
}
REJECTED_FLAGS = {"--use-local-memcached": "recbench's PS does not use memcached"}

INTERACTIVE_PROMPTS = [
    ("transports", "Transports (comma list)", str),
    ("client_ips", "Client IPs", str),
    ("server_shard_ips", "Server shard IPs (one per shard)", str),
    ("client_processes_per_ip", "Client processes per IP", int),
    ("server_plan", "Server plan ([idx:]host:port:shard,...; empty = none)", str),
    ("client_plan", "Client plan ([idx:]host,...; empty = none)", str),
    ("record_count", "Record count", int),
    ("value_size", "Value size (bytes)", int),
    ("batch_keys", "Batch keys (keys per request)", int),
    ("client_threads_per_process", "Client threads per process", int),
    ("runtime_seconds", "Runtime seconds", float),
    ("repeat", "Repeat count", int),
    ("execution_backend", "Execution backend (local/ssh)", str),
    ("output_dir", "Output directory (empty = default)", str),
]


def build_parser():
    p = argparse.ArgumentParser(
        prog="run_benchmark_ps.py",
        description="Run recbench PS benchmarks (brpc, grpc, shm, rdma) locally or across hosts "
                    "and write summary.csv, summary_totals.csv, summary.md and run_config.json. "
                    "With no arguments: the smoke profile, locally, on every transport.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    g = p.add_argument_group("topology and transports")
    a = g.add_argument
    a("--profile", choices=sorted(PROFILES), default=None,
      help="workload/concurrency profile; explicit flags override its values")
    a("--transports", default=DEFAULT_TRANSPORTS,
      help="comma list of rdma, grpc, brpc, shm (case-insensitive, de-duplicated)")
    a("--client-ips", default="127.0.0.1", help="client hosts ([user@]host, IPv6 in brackets)")
    a("--server-shard-ips", default="127.0.0.1",
      help="one host per shard; repeat a host for several shards on it")
    a("--server-plan", default="",
      help="explicit servers: [server_index:]host:port:shard,... (host may be user@host)")
    a("--client-plan", default="", help="explicit clients: [client_index:]host,...")
    a("--client-processes-per-ip", type=int, default=1, help="client processes per client IP (>= 1)")
    a("--interactive", action="store_true", help="prompt for the main settings")
    g = p.add_argument_group("workload")
    a = g.add_argument
    a("--record-count", type=int, default=1000000, help="keys preloaded (1..N)")
    a("--value-size", type=int, default=512, help="bytes per row (multiple of 4)")
    a("--batch-keys", type=int, default=1024, help="keys per request")
    a("--client-threads-per-process", type=int, default=16, help="client --thread_num")
    a("--client-load-threads-per-process", type=int, default=0,
      help="client --load_thread_num (0 = run threads)")
    a("--runtime-seconds", type=float, default=5, help="run-phase duration")
    a("--distribution", choices=("uniform", "zipfian"), default="uniform")
    a("--zipfian-alpha", type=float, default=0.9)
    a("--mode", choices=("fetch", "insert", "mixed", "fetch_insert"), default="fetch")
    a("--read-ratio", type=int, default=100, help="percentage of fetches in mixed mode")
    a("--prefetch-depth", type=int, default=0,
      help="requests in flight per client thread (0 = driver default; RDMA fetch: 16)")
    a("--repeat", type=int, default=1, help="repeats per transport")
    a("--skip-load", action="store_true", help="skip the load phase")
    a("--verify-deterministic-values", action="store_true",
      help="load key-derived rows and verify every fetched row")
    a("--transaction-profile", action="store_true", help="client prints PS_BENCHMARK_PROFILE lines")
    a("--report-mode", choices=("summary", "per_round", "both"), default="summary")
    a("--fetch-key-space", type=int, default=0,
      help="keys requested come from 1..N (N > record count gives deliberate misses; 0 = records)")
    a("--warmup-seconds", type=float, default=0.0,
      help="unmeasured run time before the measured window")
    a("--seed", type=int, default=1, help="client k uses seed+k")
    g2 = p.add_argument_group("open loop (docs/open-loop.md)")
    g2.add_argument("--target-rate", type=float, default=0.0,
                    help="open loop: batches/s offered by each client process (ps_bench "
                    "--target_rate; 0 = closed loop, the default)")
    g2.add_argument("--arrival", choices=("poisson", "uniform"), default="poisson",
                    help="open loop: inter-arrival times (client k's generators use seed+k)")
    g2.add_argument("--target-rates", default="",
                    help="open loop: comma list of per-process rates; one runner pass per rate "
                    "under <output-dir>/rate_<r>/, then the latency-throughput curve per "
                    "transport in <output-dir>/summary.md, curve.csv, plots/latency_vs_rate.png")
    g2.add_argument("--slo-p99-us", type=float, default=0.0,
                    help="with --target-rates: report each transport's knee, the highest "
                    "achieved rate whose corrected p99 is <= this")
    a("--transport-options", default="",
      help="'k=v;k=v' passed to servers and clients (--transport_options); 'grpc:k=v' items "
           "reach only that transport (brpc, grpc, rdma, shm)")
    g = p.add_argument_group("server storage config")
    a = g.add_argument
    a("--capacity", type=int, default=0, help="base_kv_config.capacity (0 = record count)")
    a("--max-keys-per-request", type=int, default=500,
      help="max_keys_per_request = max(batch keys, this)")
    a("--server-worker-threads", type=int, default=32, help="gRPC/bRPC server threads")
    a("--index-type", default="DRAM_EXTENDIBLE_HASH",
      help="DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH, SSD_EXTENDIBLE_HASH, ...")
    a("--value-store-type", choices=("DRAM_VALUE_STORE", "TIERED_VALUE_STORE"),
      default="DRAM_VALUE_STORE")
    a("--dram-allocator", default="PERSIST_LOOP_SLAB")
    a("--tiered-dram-capacity-bytes", type=int, default=0, help="DRAM tier size override")
    a("--ssd-capacity-bytes", type=int, default=0, help="0 = auto")
    a("--ssd-io-backend", default="IOURING")
    a("--ssd-queue-depth", type=int, default=512)
    g = p.add_argument_group("execution and outputs")
    a = g.add_argument
    a("--benchmark-binary", default="",
      help="client program (default: python -m recbench.ps_bench); relative to the repo root")
    a("--server-binary", default="",
      help="server program (default: python -m recbench.ps_server); relative to the repo root")
    a("--build-dir", default="build",
      help="local build; a name containing 'release' (build_release) demands a Release build")
    a("--output-dir", default="", help="default results/benchmark_ps_MMDDHHMM under the repo root")
    a("--execution-backend", choices=("local", "ssh"), default="local")
    a("--remote-sync", choices=("check", "rsync", "none"), default="check",
      help="check: remote recbench version/commit must match; rsync: sync the tree and build; none")
    a("--remote-repo", default="", help="repo path on remote hosts (default: the local repo path)")
    a("--remote-build-dir", default="build",
      help="remote build; a name containing 'release' demands a Release build there")
    a("--remote-build-command", default="make build",
      help="--remote-sync rsync: how the synced tree is built on each host (run in the remote repo)")
    a("--remote-python", default="",
      help="python on remote hosts (default: <remote-repo>/.venv/bin/python)")
    a("--remote-container", default="", help="run every remote command in docker exec NAME")
    a("--remote-runtime-root", default="/tmp/recbench_ps_runtime",
      help="remote per-run configs and data")
    a("--local-data-root", default="",
      help="data dirs <root>/<transport>_repeat_<i>/{value,ssd} (default: <output-dir>/data)")
    a("--ssh-config", default="", help="ssh -F FILE")
    a("--ssh-option", action="append", default=[], metavar="K=V", help="ssh -o K=V (repeatable)")
    a("--startup-delay", type=float, default=2.0,
      help="after this many seconds without a ready line, a server is also ready once its port "
           "accepts TCP")
    a("--client-timeout", type=float, default=120, help="wall-clock limit for the client group")
    a("--cluster-timeout", type=float, default=45, help="limit on server readiness")
    a("--allow-debug-build", action="store_true",
      help="run on non-Release builds (rows are labelled with the build type)")
    a("--row-kind", choices=("auto", "fair", "capacity", "diagnostic"), default="auto",
      help="label of the rows; auto: diagnostic knobs -> diagnostic, capacity profiles -> "
           "capacity, else fair")
    a("--show-runner-logs", action="store_true", help="verbose runner logs on stderr")
    g = p.add_argument_group("RDMA (RC slot protocol; also used by shm)")
    a = g.add_argument
    a("--server-rdma-threads", type=int, default=1, help="RC poll threads per server")
    a("--rdma-namespace", default="auto", help="auto = benchmark-ps-<pid>-<repeat>")
    a("--rdma-control-plane-host", default="", help="default: first server host")
    a("--rdma-control-plane-port", type=int, default=None,
      help="control plane port of shard 0 (shard k: +k); local default: free ports, ssh: 25100")
    a("--rdma-fabric-plan", default="",
      help="node_id:device:port:gid_index:mode[:hop_limit:traffic_class:flow_label],...; mode ib, "
           "rocev1 or rocev2 (8 fields); servers are nodes 0..S-1, clients S+client_index")
    a("--rdma-wait-timeout-ms", type=int, default=None)
    a("--rdma-rc-qps-per-client-per-shard", type=int, default=None,
      help="RC QP pool size (RDMA fetch default 16)")
    a("--rdma-rc-slots-per-qp", type=int, default=None, help="logical slots per QP (default 1)")
    a("--rdma-rc-profile-interval-ms", type=int, default=None,
      help="periodic profile lines; nonzero makes rows diagnostic")
    a("--rdma-rc-server-coroutines-per-thread", type=int, default=None,
      help="scanners per poll thread; recbench has exactly 1")
    a("--rdma-rc-server-get-workers", type=int, default=None)
    a("--rdma-server-bind-core-offset", type=int, default=None)
    a("--rdma-client-bind-core-offset", type=int, default=None)
    a("--rdma-client-bind-core-stride", type=int, default=None)
    a("--rdma-rc-client-numa-id", type=int, default=None)
    a("--rdma-rc-server-numa-id", type=int, default=None)
    a("--rdma-rc-inline-bytes", type=int, default=None)
    a("--rdma-rc-fake-get-mode", choices=("none", "status_only", "index_only", "payload_memset"),
      default=None, help="diagnostic")
    a("--rdma-rc-skip-client-copy", action="store_true", help="diagnostic")
    a("--rdma-direct-async-fetch", action="store_true",
      help="RecStore's raw async GET mode; rejected: recbench has no such mode")
    a("--rdma-adapter-skip-prefetch-result-copy", action="store_true",
      help="RecStore adapter diagnostic; rejected: recbench has no adapter layer")
    a("--rdma-get-response-mode", choices=("auto", "direct_sg", "staging_copy"), default="auto",
      help="auto: staging_copy for DRAM_PET_HASH, else direct_sg")
    return p


def explicit_dests(parser, argv):
    """dest names the user gave on the command line (profile values do not override them)."""
    seen = set()
    option_map = {}
    for action in parser._actions:
        for opt in action.option_strings:
            option_map[opt] = action.dest
    for token in argv:
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        if name in option_map:
            seen.add(option_map[name])
        else:  # argparse accepts unique prefixes
            matches = {d for o, d in option_map.items() if o.startswith(name)}
            if len(matches) == 1:
                seen |= matches
    return seen


def _check_retired(parser, argv):
    for token in argv:
        name = token.split("=", 1)[0]
        if name in RETIRED_FLAGS:
            parser.error(f"{name} was retired; use {RETIRED_FLAGS[name]}")
        if name in REJECTED_FLAGS:
            parser.error(f"{name} is not supported: {REJECTED_FLAGS[name]}")


def apply_profile(args, explicit, profile):
    for dest, value in PROFILES[profile].items():
        if dest not in explicit:
            setattr(args, dest, value)


def parse_args(argv=None, input_fn=None):
    """Parse, apply the profile, prompt when --interactive (and `input_fn` is given), then validate
    and derive defaults from the final values."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    _check_retired(parser, argv)
    args = parser.parse_args(argv)
    args.explicit = sorted(explicit_dests(parser, argv))
    if not argv:
        args.profile = "smoke"
    if args.profile:
        apply_profile(args, set(args.explicit), args.profile)
    try:
        if args.interactive and input_fn is not None:
            apply_interactive_prompts(args, input_fn)
        finalize_args(args)
    except (ValueError, TopologyError) as exc:
        parser.error(str(exc))
    return args


def finalize_args(args):
    """Post-parse validation and derived defaults (RecStore's rules, plus recbench's)."""
    if args.client_processes_per_ip < 1:
        raise ValueError(f"client_processes_per_ip must be >= 1, got {args.client_processes_per_ip}")
    args.transport_list = normalize_transport_list(args.transports)
    if args.transport_options:
        scoped_transport_options(args.transport_options, "")  # refuses unknown prefixes
    for name in ("record_count", "value_size", "batch_keys", "client_threads_per_process",
                 "repeat", "server_worker_threads", "server_rdma_threads"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.value_size % 4:
        raise ValueError(f"--value-size {args.value_size} is not a multiple of 4 (rows are float32)")
    if args.runtime_seconds <= 0:
        raise ValueError(f"--runtime-seconds must be > 0, got {args.runtime_seconds}")
    if not 0 <= args.read_ratio <= 100:
        raise ValueError(f"--read-ratio {args.read_ratio} is not in 0..100")
    from recbench import rate_sweep

    rate_sweep.check_args(args)
    if args.prefetch_depth < 0 or args.client_load_threads_per_process < 0:
        raise ValueError("--prefetch-depth and --client-load-threads-per-process must be >= 0")
    if args.distribution == "zipfian" and not 0 < args.zipfian_alpha < 10:
        raise ValueError(f"--zipfian-alpha {args.zipfian_alpha} must be in (0, 10)")
    if args.client_timeout <= 0 or args.cluster_timeout <= 0:
        raise ValueError("--client-timeout and --cluster-timeout must be > 0")
    if args.remote_container and args.execution_backend != "ssh":
        raise ValueError("--remote-container needs --execution-backend ssh (docker is reached "
                         "through ssh)")
    for opt in args.ssh_option:
        if "=" not in opt:
            raise ValueError(f"--ssh-option {opt!r} must be K=V")
    for opt in ("benchmark_binary", "server_binary"):
        path = getattr(args, opt)
        if path:
            full = path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)
            if args.execution_backend == "local" and not (os.path.isfile(full)
                                                          and os.access(full, os.X_OK)):
                raise ValueError(f"--{opt.replace('_', '-')} {path}: no executable file at {full}")
    if args.rdma_rc_server_coroutines_per_thread not in (None, 1):
        raise ValueError(f"--rdma-rc-server-coroutines-per-thread "
                         f"{args.rdma_rc_server_coroutines_per_thread}: recbench's RC server runs "
                         "one scanner per poll thread (only 1 is possible; use "
                         "--server-rdma-threads for more pollers)")
    unsupported = {
        "rdma_direct_async_fetch": ("recbench's ps_bench always goes through the all-shards client; "
                                    "there is no raw async GET mode"),
        "rdma_adapter_skip_prefetch_result_copy": (
            "recbench has no PS adapter layer; use --rdma-rc-skip-client-copy for the "
            "response-copy diagnostic"),
    }
    for flag, why in unsupported.items():
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} is not available in recbench: {why}")
    refuse_unsupported_storage(args)
    if "rdma_namespace" in args.explicit and args.rdma_namespace not in ("auto", ""):
        raise ValueError(f"--rdma-namespace {args.rdma_namespace}: recbench has no shared control "
                         "plane to partition; each run's control planes are its own ports "
                         "(--rdma-control-plane-port)")
    rc = [t for t in args.transport_list if t in RC_TRANSPORTS]
    args.rc_derived = []
    if args.rdma_namespace.startswith("benchmark-ps-") and "rdma_namespace" not in args.explicit:
        args.rdma_namespace = "auto"
    if rc and args.mode == "fetch":
        for dest, value in (("rdma_rc_qps_per_client_per_shard", DEFAULT_RDMA_FETCH_QPS),
                            ("rdma_rc_slots_per_qp", DEFAULT_RDMA_FETCH_SLOTS)):
            if getattr(args, dest) is None:
                setattr(args, dest, value)
                args.rc_derived.append(dest)
        if args.prefetch_depth == 0:
            args.prefetch_depth = DEFAULT_RDMA_PREFETCH_DEPTH
            args.rc_derived.append("prefetch_depth")
        capacity = args.rdma_rc_qps_per_client_per_shard * args.rdma_rc_slots_per_qp
        if args.prefetch_depth > capacity:
            raise ValueError(
                f"RDMA fetch prefetch depth exceeds RC slot capacity: --prefetch-depth "
                f"{args.prefetch_depth} > --rdma-rc-qps-per-client-per-shard "
                f"{args.rdma_rc_qps_per_client_per_shard} x --rdma-rc-slots-per-qp "
                f"{args.rdma_rc_slots_per_qp}")
    if "RDMA" in args.transport_list and args.execution_backend == "local":
        load = args.client_load_threads_per_process or args.client_threads_per_process
        for dest, value in (("rdma_rc_server_numa_id", 0),):
            if getattr(args, dest) is None:
                setattr(args, dest, value)
                args.rc_derived.append(dest)
        if args.rdma_rc_client_numa_id is None:
            args.rdma_rc_client_numa_id = args.rdma_rc_server_numa_id
            args.rc_derived.append("rdma_rc_client_numa_id")
        if args.rdma_server_bind_core_offset is None:
            args.rdma_server_bind_core_offset = 0
            args.rc_derived.append("rdma_server_bind_core_offset")
        if args.rdma_client_bind_core_offset is None:
            shards = _shard_count(args)
            workers = args.rdma_rc_server_get_workers or 0
            args.rdma_client_bind_core_offset = (
                0 if args.rdma_rc_client_numa_id != args.rdma_rc_server_numa_id
                else shards * (args.server_rdma_threads + workers))
            args.rc_derived.append("rdma_client_bind_core_offset")
        if args.rdma_client_bind_core_stride is None:
            args.rdma_client_bind_core_stride = max(args.client_threads_per_process, load, 1)
            args.rc_derived.append("rdma_client_bind_core_stride")
    if args.rdma_namespace == "auto":
        args.rdma_namespace = f"benchmark-ps-{os.getpid()}"
    args.fabric = {}
    if args.rdma_fabric_plan.strip():
        if "RDMA" not in args.transport_list:
            raise ValueError("--rdma-fabric-plan applies to the rdma transport only")
        topo = build_topology_plan("RDMA", args.server_shard_ips, args.client_ips,
                                   args.client_processes_per_ip, args.server_plan, args.client_plan)
        nodes = fabric_node_ids(topo)
        plan = parse_rdma_fabric_plan(args.rdma_fabric_plan, [n for _, _, n in nodes])
        args.fabric = {(role, index): plan[node] for role, index, node in nodes}
    args.effective_row_kind = resolve_row_kind(args)
    return args


# RecStore storage flags whose only effect is on a value-store block that recbench's PS does not
# have: refused when set to anything but RecStore's default, so that nothing is silently ignored.
STORAGE_DEFAULTS = {
    "value_store_type": ("DRAM_VALUE_STORE", ("recbench's PS keeps rows in its DRAM slab value "
                                              "store; there is no tiered (DRAM+SSD) store")),
    "dram_allocator": ("PERSIST_LOOP_SLAB", "recbench's value store has one slab allocator"),
    "tiered_dram_capacity_bytes": (0, "only a tiered value store has a DRAM tier to size"),
    "ssd_capacity_bytes": (0, "only a tiered value store has an SSD tier"),
    "ssd_io_backend": ("IOURING", "only a tiered value store does SSD I/O"),
    "ssd_queue_depth": (512, "only a tiered value store does SSD I/O"),
}


def refuse_unsupported_storage(args):
    for dest, (default, why) in STORAGE_DEFAULTS.items():
        value = getattr(args, dest)
        if value != default:
            raise ValueError(f"--{dest.replace('_', '-')} {value} is not supported: {why}")


def _shard_count(args):
    from recbench.topology import parse_csv_list

    if parse_csv_list(args.server_plan):
        return len(parse_csv_list(args.server_plan))
    return max(1, len(parse_csv_list(args.server_shard_ips)))


def diagnostic_reasons(args):
    out = []
    if args.rdma_rc_profile_interval_ms:
        out.append(f"rdma_rc_profile_interval_ms={args.rdma_rc_profile_interval_ms}")
    if args.rdma_rc_fake_get_mode not in (None, "none"):
        out.append(f"rdma_rc_fake_get_mode={args.rdma_rc_fake_get_mode}")
    if args.rdma_rc_skip_client_copy:
        out.append("rdma_rc_skip_client_copy")
    if args.rdma_adapter_skip_prefetch_result_copy:
        out.append("rdma_adapter_skip_prefetch_result_copy")
    if args.transaction_profile:
        out.append("transaction_profile")
    return out


def resolve_row_kind(args):
    if args.row_kind != "auto":
        return args.row_kind
    if diagnostic_reasons(args):
        return "diagnostic"
    if args.profile in CAPACITY_PROFILES:
        return "capacity"
    return "fair"


def apply_interactive_prompts(args, input_fn=input, output=None):
    """Ask for the main settings in RecStore's order; an empty answer keeps the current value."""
    output = output or sys.stderr
    for dest, text, kind in INTERACTIVE_PROMPTS:
        current = getattr(args, dest)
        output.write(f"{text} [{current}]: ")
        output.flush()
        answer = input_fn().strip()
        if not answer:
            continue
        try:
            setattr(args, dest, kind(answer))
        except ValueError:
            raise ValueError(f"{text}: {answer!r} is not a valid {kind.__name__}") from None
        if dest not in args.explicit:
            args.explicit.append(dest)
    return args


def main(argv=None):
    from recbench import ps_session, rate_sweep

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv, input_fn=input)
    if args.target_rates_list:
        return rate_sweep.run(args, argv)
    return ps_session.run(args, argv)


if __name__ == "__main__":
    raise SystemExit(main())
