"""`python3 tools/benchmarks/run_benchmark_ps.py`: the PS benchmark runner.

For each transport x repeat it writes a RecStore-shaped config, starts the shard servers (locally
or over ssh, optionally in `docker exec`), starts the client processes, releases their run phases
together through the stdin `go` barrier, collects their result lines and writes summary.csv,
summary_totals.csv, the Chinese summary.md and run_config.json.

This module holds the command line: RecStore's flags with RecStore's defaults, the workload
profiles (`--profile`, explicit flags win), `--interactive`, and the post-parse validation and
derived defaults. The work is in the other recbench.runner modules: session (cases), config
(configs and command lines), topology, execution, preflight, results and report.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from recbench import transports
from recbench.cli_flags import parse_inflight_budget
from recbench.kv_bench import HUGE_PAGES
from recbench.runner import session
from recbench.runner.plan import Plan, build_plan
from recbench.runner.topology import TopologyError

DEFAULT_TRANSPORTS = ",".join(transports.NAMES)

# --profile values from the user's workload and concurrency tables. Explicit flags win.
PROFILES: dict[str, dict[str, Any]] = {
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

RETIRED_FLAGS = {
    "--client-hosts": "--client-ips", "--server-hosts": "--server-shard-ips",
    "--server-count": "--server-shard-ips", "--client-count": "--client-processes-per-ip",
    "--threads": "--client-threads-per-process",
    "--load-threads": "--client-load-threads-per-process",
    "--server-num-threads": "--server-worker-threads", "--rdma-thread-num": "--server-rdma-threads",
}
REJECTED_FLAGS = {"--use-local-memcached": "recbench's PS does not use memcached"}

INTERACTIVE_PROMPTS: list[tuple[str, str, Callable[[str], Any]]] = [
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


def build_parser() -> argparse.ArgumentParser:
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
    a("--client-max-inflight-bytes", type=parse_inflight_budget, default=0,
      metavar="BYTES|none",
      help="each client process's budget of request bytes (keys + rows) in flight, shared by "
           "its threads (ps_bench --max_inflight_bytes; 0 = the transport's default: 8M per CPU "
           "on brpc and grpc, none on shm and rdma; none = no budget; docs/scale.md)")
    a("--repeat", type=int, default=1, help="repeats per transport")
    a("--wire", choices=("native", "recstore"), default="native",
      help="clients speak recbench's native service (default) or RecStore's own ParameterService "
      "(brpc, grpc; ps_bench --wire recstore, docs/recstore-wire.md)")
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
    a("--target-rate", type=float, default=0.0,
      help="open loop: batches/s offered by each client process (ps_bench --target_rate; "
           "0 = closed loop, the default; docs/open-loop.md)")
    a("--arrival", choices=("poisson", "uniform"), default="poisson",
      help="open loop: inter-arrival times (client k's generators use seed+k)")
    a("--target-rates", default="",
      help="open loop: comma list of per-process rates; one runner pass per rate under "
           "<output-dir>/rate_<r>/, then the latency-throughput curve per transport in "
           "<output-dir>/summary.md, curve.csv and plots/latency_vs_rate.png")
    a("--slo-p99-us", type=float, default=0.0,
      help="with --target-rates: each transport's knee, the highest achieved rate whose "
           "corrected p99 is <= this")
    a("--transport-options", default="",
      help="'k=v;k=v' passed to servers and clients (--transport_options); 'grpc:k=v' items "
           "reach only that transport (brpc, grpc, rdma, shm), 'client:k=v' / 'server:k=v' "
           "only one role, 'grpc.client:k=v' one role of one transport")
    g = p.add_argument_group("server storage config")
    a = g.add_argument
    a("--capacity", type=int, default=0, help="base_kv_config.capacity (0 = record count)")
    a("--max-keys-per-request", type=int, default=500,
      help="max_keys_per_request = max(batch keys, this)")
    a("--server-worker-threads", type=int, default=32, help="gRPC/bRPC server threads")
    a("--index-type", default="DRAM_EXTENDIBLE_HASH",
      help="DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH, SSD_EXTENDIBLE_HASH, ...")
    a("--huge-pages", choices=HUGE_PAGES, default="auto",
      help="pages for each shard's KV index and value slab (ps_server --huge_pages): auto, "
           "explicit (2 MiB hugetlb pages, reserved in /proc/sys/vm/nr_hugepages), thp, off")
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
      help="a RecStore-compatible ps_server to start per server entry instead of recbench's "
           "(RecStore's flags: --config_path, --grpc_local_shard_id | --local_shard_id "
           "--brpc_server_port); relative to the repo root; the rows say server_impl=its name")
    a("--server-args", default="",
      help="more arguments for every --server-binary command (one shell-quoted string, e.g. "
           "'--brpc_server_num_threads=8')")
    a("--server-endpoints", default="",
      help="host:port,... of an already-running deployment (shard i = entry i): no server is "
           "started, the clients get these endpoints; one transport (grpc or brpc); the rows "
           "say server_impl=external")
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
    a("--auth-token-file", default="",
      help="the deployment token's file: servers require it, clients send it "
           "(--auth_token_file); copied to remote hosts (mode 600) like the configs, never "
           "put on a command line")
    a("--grpc-tls-cert", default="", help="gRPC over TLS: the servers' PEM certificate chain "
      "(with --grpc-tls-key and --grpc-tls-ca); copied to remote hosts like the token")
    a("--grpc-tls-key", default="", help="gRPC over TLS: the servers' PEM private key")
    a("--grpc-tls-ca", default="", help="gRPC over TLS: the PEM roots the clients trust")
    a("--ssh-option", action="append", default=[], metavar="K=V", help="ssh -o K=V (repeatable)")
    a("--startup-delay", type=float, default=2.0,
      help="for a --server-binary on the local backend: after this many seconds without a ready "
           "line, the server is also ready once its port accepts TCP")
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
    a("--rdma-rc-rows-in-slots", action="store_true",
      help="rdma/shm: each client thread's GET row buffers are response slots set aside for it, so "
           "rows land without the client's copy (ps_bench --rdma_rc_rows_in_slots; one shard)")
    a("--rdma-direct-async-fetch", action="store_true",
      help="RecStore's raw async GET mode; rejected: recbench has no such mode")
    a("--rdma-adapter-skip-prefetch-result-copy", action="store_true",
      help="RecStore adapter diagnostic; rejected: recbench has no adapter layer")
    a("--rdma-get-response-mode", choices=("auto", "direct_sg", "staging_copy"), default="auto",
      help="auto: staging_copy on shm and for DRAM_PET_HASH, else direct_sg (verbs)")
    return p


def explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """dest names the user gave on the command line (profile values do not override them)."""
    seen: set[str] = set()
    option_map: dict[str, str] = {}
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


def _check_retired(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    for token in argv:
        name = token.split("=", 1)[0]
        if name in RETIRED_FLAGS:
            parser.error(f"{name} was retired; use {RETIRED_FLAGS[name]}")
        if name in REJECTED_FLAGS:
            parser.error(f"{name} is not supported: {REJECTED_FLAGS[name]}")


def apply_profile(args: argparse.Namespace, explicit: set[str], profile: str) -> None:
    for dest, value in PROFILES[profile].items():
        if dest not in explicit:
            setattr(args, dest, value)


def parse_args(argv: Sequence[str] | None = None,
               input_fn: Callable[[], str] | None = None) -> Plan:
    """Parse, apply the profile, prompt when --interactive (and `input_fn` is given), then build
    the plan (every check and derived default; a bad value exits 2 naming the flag)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    _check_retired(parser, argv)
    args = parser.parse_args(argv)
    explicit = explicit_dests(parser, argv)
    if not argv:
        args.profile = "smoke"
    if args.profile:
        apply_profile(args, explicit, args.profile)
    try:
        if args.interactive and input_fn is not None:
            explicit |= apply_interactive_prompts(args, input_fn)
        return build_plan(args, frozenset(explicit))
    except (ValueError, TopologyError) as exc:
        parser.error(str(exc))


def apply_interactive_prompts(args: argparse.Namespace, input_fn: Callable[[], str] = input,
                              output: TextIO | None = None) -> set[str]:
    """Ask for the main settings in RecStore's order; an empty answer keeps the current value.
    Returns the dests answered (they count as given on the command line)."""
    output = output or sys.stderr
    answered: set[str] = set()
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
        answered.add(dest)
    return answered


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    plan = parse_args(argv, input_fn=input)
    if plan.workload.target_rates:
        from recbench.runner import rate_sweep

        return rate_sweep.run(plan, argv)
    return session.run(plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
