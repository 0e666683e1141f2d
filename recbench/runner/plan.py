"""The PS runner's plan: what one invocation will run, as a value.

`build_plan(args, explicit)` turns the parsed flags into a frozen `Plan` once: every check runs
here (so a bad value is refused at parse time, naming the flag), every derived default is decided
here (RDMA fetch QP pool and prefetch depth, local RDMA placement, the GET response mode, the row
kind, the topology of each transport with its ports), and nothing changes afterwards. The session
executes the plan; config.py turns it into configs and command lines; run_config.json records it
(`Plan.record()`), and summary.md is rendered from that record.

Field names are the runner flags' argparse dests (`--value-size` -> `Workload.value_size`), grouped
by who consumes them: `Workload` (the clients' work), `Servers` (shard servers and their store),
`Rc` (the RC slot protocol of rdma and shm), `Execution` (where and how processes run). A new
runner flag is one field in the group that consumes it, one `add_argument` in cli.py and, if it
changes a process, one line in config.py (docs/ps-runner.md, "Adding a flag").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recbench import transports
from recbench.launch import SOURCE_ROOT, free_port
from recbench.runner.config import scoped_transport_options
from recbench.runner.topology import (
    FabricEntry,
    Topology,
    TopologyError,
    build_topology_plan,
    fabric_node_ids,
    normalize_transport_list,
    parse_rdma_fabric_plan,
)
from recbench.transports import RC_SSH_CONTROL_PLANE_PORT, Transport

try:  # the C bench loops' limits: row size (RS_PS_BENCH_MAX_VALUE_SIZE), open-loop rate
    from recbench._ps import BENCH_MAX_VALUE_SIZE, PACING_MAX_RATE  # (RS_PACING_MAX_RATE)
except ImportError:  # no build here: preflight reports that; only the C side can check the limits
    BENCH_MAX_VALUE_SIZE = None
    PACING_MAX_RATE = float("inf")

DEFAULT_RDMA_FETCH_QPS = 16
DEFAULT_RDMA_FETCH_SLOTS = 1
DEFAULT_RDMA_PREFETCH_DEPTH = 16
CAPACITY_PROFILES = ("rpc-stress-small", "rdma-capacity")
# RecStore's runner never gives a client less than this for its control-plane connect, whatever
# --cluster-timeout is (a short cluster timeout bounds server readiness, not the RC handshake).
MIN_CONTROL_PLANE_TIMEOUT_S = 30.0
RESPONSE_MODES = ("auto", "direct_sg", "staging_copy")
# --report-mode values recbench's ps_bench implements (it prints one summary per phase); the
# others are forwarded only to a --benchmark-binary, whose --help must list the flag.
PS_BENCH_REPORT_MODES = ("summary",)
MAX_TARGET_RATE: float = PACING_MAX_RATE  # batches/s per client process (recbench._ps)


class PlanError(ValueError):
    """A flag value the runner refuses; the message names the flag and what to do."""


@dataclass(frozen=True)
class Workload:
    record_count: int
    value_size: int
    batch_keys: int
    client_threads_per_process: int
    client_load_threads_per_process: int  # 0 = the run threads
    runtime_seconds: float
    warmup_seconds: float
    distribution: str
    zipfian_alpha: float
    mode: str
    read_ratio: int
    prefetch_depth: int
    repeat: int
    skip_load: bool
    verify_deterministic_values: bool
    transaction_profile: bool
    report_mode: str
    fetch_key_space: int
    seed: int
    wire: str = "native"  # "recstore": clients speak RecStore's ParameterService (brpc, grpc)
    target_rate: float = 0.0        # open loop: batches/s per client process (0 = closed loop)
    arrival: str = "poisson"        # open loop: poisson | uniform
    target_rates: tuple[float, ...] = ()  # --target-rates: one pass per rate (rate_sweep)
    slo_p99_us: float = 0.0         # --target-rates: the knee's corrected-p99 bound
    client_max_inflight_bytes: int = 0  # ps_bench --max_inflight_bytes (0: the client's default)

    @property
    def load_threads(self) -> int:
        return self.client_load_threads_per_process or self.client_threads_per_process


@dataclass(frozen=True)
class Servers:
    server_worker_threads: int
    server_rdma_threads: int
    capacity: int              # 0 = record count
    max_keys_per_request: int
    index_type: str
    value_store_type: str
    dram_allocator: str
    huge_pages: str            # ps_server --huge_pages (auto = the engine's default)

    def threads(self, transport: Transport) -> int:
        return self.server_rdma_threads if transport.rc else self.server_worker_threads


@dataclass(frozen=True)
class Rc:
    rdma_namespace: str
    rdma_control_plane_host: str
    rdma_control_plane_port: int | None
    rdma_wait_timeout_ms: int | None
    rdma_rc_qps_per_client_per_shard: int | None
    rdma_rc_slots_per_qp: int | None
    rdma_rc_profile_interval_ms: int | None
    rdma_rc_server_coroutines_per_thread: int | None
    rdma_rc_server_get_workers: int | None
    rdma_server_bind_core_offset: int | None
    rdma_client_bind_core_offset: int | None
    rdma_client_bind_core_stride: int | None
    rdma_rc_client_numa_id: int | None
    rdma_rc_server_numa_id: int | None
    rdma_rc_inline_bytes: int | None
    rdma_rc_fake_get_mode: str | None
    rdma_rc_skip_client_copy: bool
    rdma_rc_rows_in_slots: bool          # ps_bench --rdma_rc_rows_in_slots: GET rows without a copy
    rdma_get_response_mode: str          # as asked: auto, direct_sg, staging_copy
    get_response_mode: str               # resolved for verbs (Plan.get_response_mode: per transport)
    rdma_fabric_plan: str
    control_plane_timeout_ms: int        # what clients get: max(--cluster-timeout, 30 s)
    derived: frozenset[str] = frozenset()  # dests the runner filled in (not the user)
    fabric: Mapping[tuple[str, int], FabricEntry] = field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    execution_backend: str
    remote_sync: str
    remote_repo: str
    remote_build_dir: str
    remote_build_command: str
    remote_python: str
    remote_container: str
    remote_runtime_root: str
    local_data_root: str
    ssh_config: str
    ssh_option: tuple[str, ...]
    startup_delay: float
    client_timeout: float
    cluster_timeout: float
    allow_debug_build: bool
    benchmark_binary: str
    server_binary: str         # a RecStore-compatible ps_server started instead of recbench's
    build_dir: str
    output_dir: str
    show_runner_logs: bool
    auth_token_file: str = ""  # the deployment token's file; delivered to remote hosts
    grpc_tls_cert: str = ""    # gRPC over TLS: server certificate chain, key, clients' roots
    grpc_tls_key: str = ""
    grpc_tls_ca: str = ""
    server_args: tuple[str, ...] = ()  # --server-args, appended to every --server-binary command
    server_endpoints: str = ""         # an already-running deployment: no server is started

    @property
    def remote(self) -> bool:
        return self.execution_backend == "ssh"


@dataclass(frozen=True)
class Plan:
    profile: str | None
    transports: tuple[Transport, ...]
    transport_options: str
    server_shard_ips: str
    client_ips: str
    client_processes_per_ip: int
    server_plan: str
    client_plan: str
    row_kind: str                     # resolved: fair, capacity or diagnostic
    diagnostic_reasons: tuple[str, ...]
    workload: Workload
    servers: Servers
    rc: Rc
    execution: Execution
    topologies: Mapping[str, Topology]  # transport name -> topology (ports decided)
    explicit: frozenset[str]          # dests the user gave (profile values do not override them)
    flags: Mapping[str, Any] = field(default_factory=dict)  # the parsed flags, as given
    server_impl: str = "recbench"     # recbench, external (--server-endpoints) or the binary's name

    def topology(self, transport: Transport) -> Topology:
        return self.topologies[transport.name]

    def get_response_mode(self, transport: Transport) -> str:
        """The GET response mode an RC transport's processes get (`auto` resolved for it)."""
        return resolve_get_response_mode(self.rc.rdma_get_response_mode,
                                         self.servers.index_type, transport.name)

    def get_response_modes(self) -> dict[str, str]:
        """Transport label -> resolved GET response mode, for the RC transports of the plan."""
        return {t.label: self.get_response_mode(t) for t in self.transports if t.rc}

    def cases(self) -> list[tuple[Transport, int]]:
        """Every transport x repeat, in the order they run."""
        return [(t, r) for t in self.transports for r in range(self.workload.repeat)]

    def record(self) -> dict[str, Any]:
        """The plan as JSON-ready data (run_config.json's "plan"; summary.md is rendered from it)."""
        def conv(v: Any) -> Any:
            if isinstance(v, Transport):
                return v.label
            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
            if isinstance(v, Mapping):
                return {("/".join(map(str, k)) if isinstance(k, tuple) else str(k)): conv(x)
                        for k, x in v.items()}
            if isinstance(v, (frozenset, set)):
                return sorted(v)
            if isinstance(v, (list, tuple)):
                return [conv(x) for x in v]
            return v
        out = conv(self)
        del out["flags"]  # run_config.json keeps them under "args"
        out["topologies"] = {name: topo.to_dict() for name, topo in self.topologies.items()}
        out["get_response_modes"] = self.get_response_modes()
        return out


# RecStore storage flags whose only effect is on a value-store block that recbench's PS does not
# have: refused when set to anything but RecStore's default, so that nothing is silently ignored.
STORAGE_DEFAULTS: dict[str, tuple[Any, str]] = {
    "value_store_type": ("DRAM_VALUE_STORE", ("recbench's PS keeps rows in its DRAM slab value "
                                              "store; there is no tiered (DRAM+SSD) store")),
    "dram_allocator": ("PERSIST_LOOP_SLAB", "recbench's value store has one slab allocator"),
    "tiered_dram_capacity_bytes": (0, "only a tiered value store has a DRAM tier to size"),
    "ssd_capacity_bytes": (0, "only a tiered value store has an SSD tier"),
    "ssd_io_backend": ("IOURING", "only a tiered value store does SSD I/O"),
    "ssd_queue_depth": (512, "only a tiered value store does SSD I/O"),
}
UNSUPPORTED_FLAGS = {
    "rdma_direct_async_fetch": ("recbench's ps_bench always goes through the all-shards client; "
                                "there is no raw async GET mode"),
    "rdma_adapter_skip_prefetch_result_copy": (
        "recbench has no PS adapter layer; use --rdma-rc-skip-client-copy for the "
        "response-copy diagnostic"),
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def resolve_get_response_mode(mode: str | None, index_type: str, transport: str = "rdma") -> str:
    """`auto` is RecStore's rule on verbs: staging_copy for DRAM_PET_HASH (its row layout is not
    scatter-gather friendly), direct_sg for every other index. On shm it is staging_copy for every
    index: there the gather is the server's CPU copying row after row, slower than the engine's
    batch read (EH on Zen 3: 6.6 against 8.4 M keys/s, docs/rdma-shm.md; the C client's auto
    does the same, rc_client.c)."""
    if mode in (None, "", "auto"):
        return "staging_copy" if index_type == "DRAM_PET_HASH" or transport == "shm" else "direct_sg"
    return str(mode)


def _fields(cls: type, ns: argparse.Namespace, **override: Any) -> Any:
    names = [f.name for f in dataclasses.fields(cls)]
    values = {n: getattr(ns, n) for n in names if n not in override and hasattr(ns, n)}
    return cls(**values, **override)


def _check_workload(a: argparse.Namespace) -> None:
    for dest in ("record_count", "value_size", "batch_keys", "client_threads_per_process",
                 "repeat", "server_worker_threads", "server_rdma_threads"):
        if getattr(a, dest) < 1:
            raise PlanError(f"{_flag(dest)} must be >= 1, got {getattr(a, dest)}")
    if a.value_size % 4:
        raise PlanError(f"--value-size {a.value_size} is not a multiple of 4 (rows are float32)")
    if BENCH_MAX_VALUE_SIZE is not None and a.value_size > BENCH_MAX_VALUE_SIZE:
        raise PlanError(f"--value-size {a.value_size} exceeds ps_bench's row limit of "
                        f"{BENCH_MAX_VALUE_SIZE} bytes (recbench._ps.BENCH_MAX_VALUE_SIZE)")
    if a.runtime_seconds <= 0:
        raise PlanError(f"--runtime-seconds must be > 0, got {a.runtime_seconds}")
    if a.warmup_seconds < 0:
        raise PlanError(f"--warmup-seconds must be >= 0, got {a.warmup_seconds}")
    if not 0 <= a.read_ratio <= 100:
        raise PlanError(f"--read-ratio {a.read_ratio} is not in 0..100")
    if a.prefetch_depth < 0 or a.client_load_threads_per_process < 0:
        raise PlanError("--prefetch-depth and --client-load-threads-per-process must be >= 0")
    if a.fetch_key_space < 0:
        raise PlanError(f"--fetch-key-space must be >= 0, got {a.fetch_key_space}")

    if a.distribution == "zipfian" and not 0 < a.zipfian_alpha < 10:
        raise PlanError(f"--zipfian-alpha {a.zipfian_alpha} must be in (0, 10)")
    _check_open_loop(a)
    if a.report_mode not in PS_BENCH_REPORT_MODES and not a.benchmark_binary:
        raise PlanError(f"--report-mode {a.report_mode}: recbench's ps_bench prints one summary "
                        "line per phase and has no per-round report; use --report-mode summary "
                        "(or a --benchmark-binary that implements --report_mode)")


def parse_target_rates(text: str) -> tuple[float, ...]:
    """--target-rates 'r1,r2,...' -> rates (batches/s per client process), each in
    (0, MAX_TARGET_RATE], no repeats."""
    rates = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            r = float(item)
        except ValueError:
            raise PlanError(f"--target-rates '{text}': '{item}' is not a number") from None
        if not 0 < r <= MAX_TARGET_RATE:
            raise PlanError(f"--target-rates: {item} is not in (0, {MAX_TARGET_RATE:g}] batches/s")
        rates.append(r)
    if not rates:
        raise PlanError(f"--target-rates '{text}' holds no rate (e.g. 1000,5000,10000)")
    if len(set(rates)) != len(rates):
        raise PlanError(f"--target-rates '{text}' repeats a rate")
    return tuple(rates)


def _check_open_loop(a: argparse.Namespace) -> None:
    """--target-rate, --target-rates, --slo-p99-us (docs/open-loop.md); a.target_rates becomes the
    parsed tuple."""
    if not 0 <= a.target_rate <= MAX_TARGET_RATE:
        raise PlanError(f"--target-rate {a.target_rate:g} is not in [0, {MAX_TARGET_RATE:g}] "
                        "batches/s (0 = closed loop)")
    if isinstance(a.target_rates, str):
        a.target_rates = parse_target_rates(a.target_rates) if a.target_rates.strip() else ()
    if a.target_rates and a.target_rate:
        raise PlanError("give --target-rate (one rate) or --target-rates (a curve), not both")
    if a.slo_p99_us < 0:
        raise PlanError(f"--slo-p99-us {a.slo_p99_us:g} must be > 0")
    if a.slo_p99_us and not a.target_rates:
        raise PlanError("--slo-p99-us needs --target-rates (the knee is read off a curve)")


def _check_execution(a: argparse.Namespace) -> None:
    if a.client_timeout <= 0 or a.cluster_timeout <= 0:
        raise PlanError("--client-timeout and --cluster-timeout must be > 0")
    if a.startup_delay < 0:
        raise PlanError(f"--startup-delay must be >= 0, got {a.startup_delay}")
    if a.remote_container and a.execution_backend != "ssh":
        raise PlanError("--remote-container needs --execution-backend ssh (docker is reached "
                        "through ssh)")
    for dest in ("auth_token_file", "grpc_tls_cert", "grpc_tls_key", "grpc_tls_ca"):
        path = getattr(a, dest, "")
        if not path:
            continue
        try:
            with open(path, "rb") as f:
                ok = bool(f.read(4096).strip())
        except OSError as e:
            raise PlanError(f"{_flag(dest)} {path}: {e.strerror}") from None
        if not ok:
            raise PlanError(f"{_flag(dest)} {path} is empty")
    tls = [getattr(a, d, "") for d in ("grpc_tls_cert", "grpc_tls_key", "grpc_tls_ca")]
    if any(tls) and not all(tls):
        raise PlanError("--grpc-tls-cert, --grpc-tls-key and --grpc-tls-ca go together")
    for opt in a.ssh_option:
        if "=" not in opt:
            raise PlanError(f"--ssh-option {opt!r} must be K=V")
    for dest in ("benchmark_binary", "server_binary"):
        path = getattr(a, dest)
        if path and a.execution_backend == "local":
            full = path if os.path.isabs(path) else os.path.join(SOURCE_ROOT, path)
            if not (os.path.isfile(full) and os.access(full, os.X_OK)):
                raise PlanError(f"{_flag(dest)} {path}: no executable file at {full}")


def server_impl(server_binary: str, server_endpoints: str) -> str:
    """What serves the rows: `external` (an already-running deployment), the --server-binary's
    file name, or `recbench` (python -m recbench.ps_server)."""
    if server_endpoints.strip():
        return "external"
    if server_binary:
        return os.path.basename(server_binary.rstrip("/")) or server_binary
    return "recbench"


def _check_servers(a: argparse.Namespace, ts: tuple[Transport, ...],
                   explicit: frozenset[str]) -> tuple[str, ...]:
    """--server-endpoints and --server-binary/--server-args (a RecStore deployment); returns the
    parsed --server-args."""
    endpoints = str(getattr(a, "server_endpoints", "") or "").strip()
    args_text = str(getattr(a, "server_args", "") or "")
    try:
        server_args = tuple(shlex.split(args_text))
    except ValueError as e:
        raise PlanError(f"--server-args {args_text!r}: {e}") from None
    if server_args and not a.server_binary:
        raise PlanError("--server-args are arguments of --server-binary; give --server-binary too")
    if not endpoints and not a.server_binary:
        return server_args
    rc = [t.label for t in ts if t.rc]
    if endpoints:
        if a.server_binary:
            raise PlanError("--server-endpoints names servers that run already, --server-binary "
                            "starts them: give one of the two")
        if a.server_plan.strip() or "server_shard_ips" in explicit:
            raise PlanError("--server-endpoints replaces --server-plan and --server-shard-ips "
                            "(the endpoints are the servers); drop those")
        if len(ts) != 1 or rc:
            raise PlanError("--server-endpoints: a running deployment serves one transport; give "
                            "--transports grpc or --transports brpc (got "
                            f"{','.join(t.label for t in ts)})")
    elif rc:
        raise PlanError(f"--server-binary starts a RecStore-compatible ps_server (grpc, brpc), "
                        f"which has no {', '.join(rc)} transport; drop it from --transports")
    if getattr(a, "huge_pages", "auto") != "auto":
        raise PlanError(f"--huge-pages {a.huge_pages}: "
                        + ("a --server-binary gets RecStore's ps_server flags only, which have no "
                           "huge-pages setting" if a.server_binary else
                           "--server-endpoints servers run already; the runner starts none")
                        + "; drop it")
    if a.server_binary:
        for dest in ("auth_token_file", "grpc_tls_cert"):
            if getattr(a, dest, ""):
                raise PlanError(f"{_flag(dest)}: a --server-binary gets RecStore's ps_server "
                                "flags only, which have no deployment token or TLS files")
    return server_args


def _check_unsupported(a: argparse.Namespace, explicit: frozenset[str]) -> None:
    if a.rdma_rc_server_coroutines_per_thread not in (None, 1):
        raise PlanError(f"--rdma-rc-server-coroutines-per-thread "
                        f"{a.rdma_rc_server_coroutines_per_thread}: recbench's RC server runs "
                        "one scanner per poll thread (only 1 is possible; use "
                        "--server-rdma-threads for more pollers)")
    for dest, why in UNSUPPORTED_FLAGS.items():
        if getattr(a, dest):
            raise PlanError(f"{_flag(dest)} is not available in recbench: {why}")
    for dest, (default, why) in STORAGE_DEFAULTS.items():
        value = getattr(a, dest)
        if value != default:
            raise PlanError(f"{_flag(dest)} {value} is not supported: {why}")
    if "rdma_namespace" in explicit and a.rdma_namespace not in ("auto", ""):
        raise PlanError(f"--rdma-namespace {a.rdma_namespace}: recbench has no shared control "
                        "plane to partition; each run's control planes are its own ports "
                        "(--rdma-control-plane-port)")


def _topology(a: argparse.Namespace, t: Transport) -> Topology:
    rc_port = None
    if t.rc:
        rc_port = a.rdma_control_plane_port or (
            RC_SSH_CONTROL_PLANE_PORT if a.execution_backend == "ssh" else None)
    topo = build_topology_plan(t.label, a.server_shard_ips, a.client_ips,
                               a.client_processes_per_ip, a.server_plan, a.client_plan,
                               rc_port=rc_port,
                               server_endpoints=getattr(a, "server_endpoints", "") or "")
    if t.rc and a.rdma_control_plane_host and a.rdma_control_plane_host != topo.servers[0].host:
        raise TopologyError(f"--rdma-control-plane-host {a.rdma_control_plane_host}: in "
                            "recbench each shard's control plane is that shard's own endpoint, "
                            f"so it must be shard 0's host {topo.servers[0].host} (or empty)")
    if t.rc and rc_port is None and not a.server_plan.strip():
        # local control planes: ports the OS says are free now
        topo = Topology(tuple(dataclasses.replace(s, port=free_port(s.host))
                              for s in topo.servers), topo.clients)
    return topo


def _rc(a: argparse.Namespace, ts: tuple[Transport, ...], shards: int) -> tuple[Rc, int]:
    """RC settings with RecStore's derived defaults: the RDMA fetch QP pool and prefetch depth, and
    local RDMA placement (server NUMA 0 / core 0, clients after the servers' cores)."""
    v = {f.name: getattr(a, f.name) for f in dataclasses.fields(Rc) if hasattr(a, f.name)}
    derived: set[str] = set()
    prefetch = a.prefetch_depth

    def default(dest: str, value: Any) -> None:
        if v[dest] is None:
            v[dest] = value
            derived.add(dest)

    if a.rdma_rc_rows_in_slots and shards > 1:
        raise PlanError(f"--rdma-rc-rows-in-slots needs one server shard, not {shards}: with "
                        "several, a batch's rows come back per shard and are put in order by a copy")
    if any(t.rc for t in ts) and a.mode == "fetch":
        default("rdma_rc_qps_per_client_per_shard", DEFAULT_RDMA_FETCH_QPS)
        default("rdma_rc_slots_per_qp", DEFAULT_RDMA_FETCH_SLOTS)
        if prefetch == 0:
            prefetch = DEFAULT_RDMA_PREFETCH_DEPTH
            derived.add("prefetch_depth")
        # --rdma-rc-rows-in-slots sets one response slot aside per batch in flight: a QP pool the
        # user did not give (derived, or a profile's) grows to hold both
        need = prefetch * (2 if a.rdma_rc_rows_in_slots else 1)
        slots = v["rdma_rc_slots_per_qp"]
        if "rdma_rc_qps_per_client_per_shard" not in a.explicit_set:
            v["rdma_rc_qps_per_client_per_shard"] = max(v["rdma_rc_qps_per_client_per_shard"],
                                                        -(-need // slots))
        capacity = v["rdma_rc_qps_per_client_per_shard"] * slots
        if need > capacity:
            rows = " x 2 (--rdma-rc-rows-in-slots)" if a.rdma_rc_rows_in_slots else ""
            raise PlanError(
                f"RDMA fetch prefetch depth exceeds RC slot capacity: --prefetch-depth "
                f"{prefetch}{rows} > --rdma-rc-qps-per-client-per-shard "
                f"{v['rdma_rc_qps_per_client_per_shard']} x --rdma-rc-slots-per-qp "
                f"{v['rdma_rc_slots_per_qp']}")
    if transports.get("rdma") in ts and a.execution_backend == "local":
        default("rdma_rc_server_numa_id", 0)
        default("rdma_rc_client_numa_id", v["rdma_rc_server_numa_id"])
        default("rdma_server_bind_core_offset", 0)
        workers = v["rdma_rc_server_get_workers"] or 0
        default("rdma_client_bind_core_offset",
                0 if v["rdma_rc_client_numa_id"] != v["rdma_rc_server_numa_id"]
                else shards * (a.server_rdma_threads + workers))
        default("rdma_client_bind_core_stride",
                max(a.client_threads_per_process, a.client_load_threads_per_process, 1))
    if v["rdma_namespace"] in ("auto", "") or (v["rdma_namespace"].startswith("benchmark-ps-")
                                               and "rdma_namespace" not in a.explicit_set):
        v["rdma_namespace"] = f"benchmark-ps-{os.getpid()}"
    v["get_response_mode"] = resolve_get_response_mode(a.rdma_get_response_mode, a.index_type)
    v["control_plane_timeout_ms"] = int(max(a.cluster_timeout, MIN_CONTROL_PLANE_TIMEOUT_S) * 1000)
    v["derived"] = frozenset(derived)
    v["fabric"] = {}
    return Rc(**v), prefetch


def diagnostic_reasons(a: argparse.Namespace) -> tuple[str, ...]:
    out = []
    if a.rdma_rc_profile_interval_ms:
        out.append(f"rdma_rc_profile_interval_ms={a.rdma_rc_profile_interval_ms}")
    if a.rdma_rc_fake_get_mode not in (None, "none"):
        out.append(f"rdma_rc_fake_get_mode={a.rdma_rc_fake_get_mode}")
    if a.rdma_rc_skip_client_copy:
        out.append("rdma_rc_skip_client_copy")
    if a.rdma_adapter_skip_prefetch_result_copy:
        out.append("rdma_adapter_skip_prefetch_result_copy")
    if a.transaction_profile:
        out.append("transaction_profile")
    return tuple(out)


def resolve_row_kind(requested: str, reasons: tuple[str, ...], profile: str | None) -> str:
    if requested != "auto":
        return requested
    if reasons:
        return "diagnostic"
    if profile in CAPACITY_PROFILES:
        return "capacity"
    return "fair"


def build_plan(a: argparse.Namespace, explicit: frozenset[str] = frozenset()) -> Plan:
    """The plan of the parsed flags `a`; PlanError / TopologyError name the flag that is wrong.
    `a` is not changed."""
    a = argparse.Namespace(**vars(a), explicit_set=explicit)
    if a.client_processes_per_ip < 1:
        raise PlanError(f"client_processes_per_ip must be >= 1, got {a.client_processes_per_ip}")
    names = normalize_transport_list(a.transports)
    ts = tuple(transports.get(n) for n in names)
    other = [t.label for t in ts if not t.recstore_wire]
    if getattr(a, "wire", "native") == "recstore" and other:
        raise PlanError(f"--wire recstore: RecStore's wire exists on brpc and grpc only, not "
                        f"{', '.join(other)}")
    if a.transport_options:
        scoped_transport_options(a.transport_options, "")  # refuses unknown prefixes
    _check_workload(a)
    _check_execution(a)
    _check_unsupported(a, explicit)
    server_args = _check_servers(a, ts, explicit)
    topologies = {t.name: _topology(a, t) for t in ts}
    shards = len(next(iter(topologies.values())).servers)
    rc, prefetch = _rc(a, ts, shards)
    if a.rdma_fabric_plan.strip():
        rdma = transports.get("rdma")
        if rdma not in ts:
            raise PlanError("--rdma-fabric-plan applies to the rdma transport only")
        nodes = fabric_node_ids(topologies[rdma.name])
        fplan = parse_rdma_fabric_plan(a.rdma_fabric_plan, [n for _, _, n in nodes])
        rc = dataclasses.replace(rc, fabric={(role, index): fplan[node]
                                             for role, index, node in nodes})
    reasons = diagnostic_reasons(a)
    return Plan(
        profile=a.profile, transports=ts, transport_options=a.transport_options,
        server_shard_ips=a.server_shard_ips, client_ips=a.client_ips,
        client_processes_per_ip=a.client_processes_per_ip, server_plan=a.server_plan,
        client_plan=a.client_plan, row_kind=resolve_row_kind(a.row_kind, reasons, a.profile),
        diagnostic_reasons=reasons,
        workload=_fields(Workload, a, prefetch_depth=prefetch),
        servers=_fields(Servers, a), rc=rc,
        execution=_fields(Execution, a, ssh_option=tuple(a.ssh_option), server_args=server_args),
        topologies=topologies, explicit=explicit,
        flags={k: v for k, v in vars(a).items() if k != "explicit_set"},
        server_impl=server_impl(a.server_binary, getattr(a, "server_endpoints", "") or ""))
