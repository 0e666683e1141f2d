"""What the PS runner hands to its processes: the generated config JSON
(`configs/<transport>_repeat_<i>.json`, RecStore's shape) and the command lines of
`python -m recbench.ps_server` and `python -m recbench.ps_bench`.

Flags of the two programs keep RecStore's underscore spelling (`--config_path`, `--local_shard_id`,
`--brpc_server_port`). RecStore's `--rdma-*` runner flags reach the RC transports (rdma, shm) as
their `--transport_options` keys (qps_per_client_per_shard, slots_per_qp, bind_core_offset, ...);
`--transport-options` of the runner is appended to that string, so the user's keys win.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recbench import transports
from recbench.cli_flags import format_inflight_budget
from recbench.ps_config import build_config
from recbench.transports import Transport

if TYPE_CHECKING:
    from recbench.runner.plan import Plan
    from recbench.runner.topology import ClientSpec, ServerSpec, Topology

MIB = 1 << 20
SLAB_ALLOCATORS = ("PERSIST_LOOP_SLAB", "CONCURRENT_SLAB_MEMORY_POOL")
SLAB_METADATA_BYTES = 8
SLAB_HEADROOM = (6, 5)


def recommended_dram_capacity_bytes(capacity: int, value_size: int, allocator: str) -> int:
    """Slab allocators: ceil(capacity x (value_size + 8) x 6/5) rounded up to 1 MiB; other
    allocators: capacity x value_size."""
    if allocator in SLAB_ALLOCATORS:
        raw = math.ceil(capacity * (value_size + SLAB_METADATA_BYTES) * SLAB_HEADROOM[0]
                        / SLAB_HEADROOM[1])
        return max(MIB, -(-raw // MIB) * MIB)
    return capacity * value_size


def build_runtime_config(plan: Plan, transport: Transport, topology: Topology,
                         data_root: str) -> dict[str, Any]:
    """RecStore-shaped config of one case: recbench.ps_config's document (the one builder of that
    shape) with the runner's value-store block and, for the RC transports, the rdma block."""
    srv, w = plan.servers, plan.workload
    capacity = srv.capacity or w.record_count
    cfg = build_config(transport.name, [(s.host, s.port, s.shard) for s in topology.servers],
                       num_threads=srv.threads(transport), capacity=capacity,
                       index_type=srv.index_type, value_size=w.value_size,
                       max_keys_per_request=max(w.batch_keys, srv.max_keys_per_request),
                       hash_method="city_hash" if w.wire == "recstore" else "rs_mix64")
    cfg["cache_ps"]["base_kv_config"]["value"] = {
        "type": srv.value_store_type,
        "default_value_size_hint": w.value_size,
        "dram_allocator": {"type": srv.dram_allocator, "capacity_bytes":
                           recommended_dram_capacity_bytes(capacity, w.value_size,
                                                           srv.dram_allocator)},
        "path": data_root,
    }
    if transport.rc:
        cfg["rdma"] = {
            "namespace": plan.rc.rdma_namespace,
            "control_plane_host": plan.rc.rdma_control_plane_host or topology.servers[0].host,
            "get_response_mode": plan.get_response_mode(transport),
            "num_server_processes": len(topology.servers),
            "num_client_processes": len(topology.clients),
            "num_logical_clients": len(topology.clients) * w.client_threads_per_process,
        }
    return cfg


# RC options (`--transport_options k=v;k=v` of ps_server / ps_bench for rdma and shm) and the
# runner flags they come from. The RC transport applies or rejects every key by name.
RC_SERVER_OPTIONS = [
    ("profile_interval_ms", "rdma_rc_profile_interval_ms"),
    ("server_get_workers", "rdma_rc_server_get_workers"),
    ("fake_get_mode", "rdma_rc_fake_get_mode"),
    ("inline_bytes", "rdma_rc_inline_bytes"),
    ("numa_id", "rdma_rc_server_numa_id"),
]
RC_CLIENT_OPTIONS = [
    ("qps_per_client_per_shard", "rdma_rc_qps_per_client_per_shard"),
    ("slots_per_qp", "rdma_rc_slots_per_qp"),
    ("wait_timeout_ms", "rdma_wait_timeout_ms"),
    ("profile_interval_ms", "rdma_rc_profile_interval_ms"),
    ("inline_bytes", "rdma_rc_inline_bytes"),
    ("numa_id", "rdma_rc_client_numa_id"),
    ("skip_client_copy", "rdma_rc_skip_client_copy"),
]
# Placement defaults the runner derives for local RDMA runs; shm gets them only when set explicitly.
PLACEMENT_DESTS = ("rdma_rc_server_numa_id", "rdma_rc_client_numa_id",
                   "rdma_server_bind_core_offset", "rdma_client_bind_core_offset",
                   "rdma_client_bind_core_stride")


def _rc_value(plan: Plan, transport: Transport, dest: str) -> Any:
    """An RC setting as it applies to `transport` (None: not passed)."""
    if transport.name == "shm" and dest in PLACEMENT_DESTS and dest in plan.rc.derived:
        return None
    return getattr(plan.rc, dest)


def bind_core_offset(plan: Plan, transport: Transport, role: str, index: int,
                     cores: int | None) -> int | None:
    """The first core of one RC process (role "server": its shard's server_index, "client": its
    client_index), wrapped around the host's core count when known; None = no binding."""
    if not transport.rc:
        return None
    if role == "server":
        base = _rc_value(plan, transport, "rdma_server_bind_core_offset")
        step = plan.servers.server_rdma_threads + (plan.rc.rdma_rc_server_get_workers or 0)
    else:
        base = _rc_value(plan, transport, "rdma_client_bind_core_offset")
        step = plan.rc.rdma_client_bind_core_stride or 1
    if base is None:
        return None
    offset = base + index * step
    return offset % cores if cores else offset


ROLES = ("server", "client")  # --transport-options role scopes


def rc_transport_options(plan: Plan, transport: Transport, role: str, index: int = 0,
                         bind_offset: int | None = None) -> str:
    """The `k=v;k=v` RC options of one process: role "server" (server_index) or "client"
    (client_index)."""
    table = RC_SERVER_OPTIONS if role == "server" else RC_CLIENT_OPTIONS
    opts = []
    for key, dest in table:
        value = _rc_value(plan, transport, dest)
        if value is None or value is False or (key == "fake_get_mode" and value == "none"):
            continue
        opts.append(f"{key}={'true' if value is True else value}")
    opts.append(f"get_response_mode={plan.get_response_mode(transport)}")
    fabric = plan.rc.fabric.get((role, index)) if transport.name == "rdma" else None
    if fabric is not None:
        opts += [f"device={fabric.device}", f"ib_port={fabric.port}",
                 f"gid_index={fabric.gid_index}"]
    if role == "server" and bind_offset is not None:
        opts.append(f"bind_core_offset={bind_offset}")
    if role == "client":  # RecStore's runner: at least 30 s for the control-plane connect
        opts.append(f"control_plane_timeout_ms={plan.rc.control_plane_timeout_ms}")
    if role == "client" and bind_offset is not None:
        opts.append(f"bind_core_offset={bind_offset}")
    return ";".join(opts)


def scoped_transport_options(text: str, transport: str, role: str = "") -> str:
    """The user's --transport-options for one transport and role: `k=v` items go to every
    process, `name:k=v` items (name = brpc, grpc, rdma or shm) only to that transport's servers
    and clients, `server:k=v` / `client:k=v` only to one role, and `name.server:k=v` /
    `name.client:k=v` to one role of one transport (for options only one side has, such as gRPC's
    client-only `streams`). Items are separated by ';' or ','. With transport "" (validation)
    nothing is selected. Raises ValueError naming an unknown transport or role prefix."""
    out = []
    for item in (x.strip() for x in text.replace(",", ";").split(";")):
        if not item:
            continue
        head, sep, rest = item.partition(":")
        if not sep or "=" in head:
            out.append(item)
            continue
        name, dot, scope_role = head.partition(".")
        if not dot and name in ROLES:
            name, scope_role = "", name
        if (dot or scope_role) and scope_role not in ROLES:
            raise ValueError(f"--transport-options item '{item}': unknown role '{scope_role}' "
                             f"(known: {', '.join(ROLES)})")
        scope = ""
        if name:
            try:
                scope = transports.get(name).name
            except transports.UnknownTransport:
                raise ValueError(f"--transport-options item '{item}': unknown transport "
                                 f"'{name}' (known: {', '.join(transports.NAMES)})") from None
        if not transport or (scope and scope != transports.get(transport).name):
            continue
        if scope_role and scope_role != role:
            continue
        out.append(rest)
    return ";".join(out)


def _transport_options(plan: Plan, transport: Transport, role: str, index: int,
                       bind_offset: int | None) -> str:
    parts = []
    if transport.rc:
        parts.append(rc_transport_options(plan, transport, role, index, bind_offset))
    if plan.transport_options:  # the user's keys come last and win
        parts.append(scoped_transport_options(plan.transport_options, transport.name, role))
    return ";".join(p for p in parts if p)


def build_server_cmd(plan: Plan, transport: Transport, server: ServerSpec, num_shards: int,
                     config_path: str, launcher: Sequence[str],
                     bind_offset: int | None = None) -> list[str]:
    """argv of one shard server. `launcher` is the argv prefix (python -m recbench.ps_server, or
    --server-binary)."""
    srv, w = plan.servers, plan.workload
    cmd = list(launcher) + [
        f"--transport={transport.name}", f"--config_path={config_path}",
        f"--local_shard_id={server.shard}", f"--host={server.host}", f"--port={server.port}",
        f"--num_shards={num_shards}", f"--index_type={srv.index_type}",
        f"--value_size={w.value_size}", f"--capacity={srv.capacity or w.record_count}",
        f"--num_threads={srv.threads(transport)}",
        f"--max_keys_per_request={max(w.batch_keys, srv.max_keys_per_request)}",
    ]
    if transport.name == "brpc":
        cmd.append(f"--brpc_server_port={server.port}")
    if srv.huge_pages != "auto":
        cmd.append(f"--huge_pages={srv.huge_pages}")
    options = _transport_options(plan, transport, "server", server.server_index, bind_offset)
    if options:
        cmd.append(f"--transport_options={options}")
    return cmd


def build_recstore_server_cmd(plan: Plan, transport: Transport, server: ServerSpec,
                              config_path: str, launcher: Sequence[str]) -> list[str]:
    """argv of one shard of a RecStore-compatible ps_server (--server-binary) with RecStore's own
    flags: the config (its cache_ps.ps_type picks grpc or brpc, cache_ps.servers the listen
    addresses), the shard to serve (`--grpc_local_shard_id` for gRPC, `--local_shard_id` and
    `--brpc_server_port` for bRPC, as RecStore's runner passes them), then --server-args."""
    cmd = list(launcher) + [f"--config_path={config_path}"]
    if transport.name == "grpc":
        cmd.append(f"--grpc_local_shard_id={server.shard}")
    else:
        cmd += [f"--local_shard_id={server.shard}", f"--brpc_server_port={server.port}"]
    return cmd + list(plan.execution.server_args)


def build_benchmark_cmd(plan: Plan, transport: Transport, topology: Topology, client: ClientSpec,
                        config_path: str, launcher: Sequence[str],
                        bind_offset: int | None = None) -> list[str]:
    """argv of one client process (`--workload=transactions`). The shard endpoints come from the
    config (servers[] in shard order), not from --host/--port, so explicit plans keep their
    hosts and ports."""
    w = plan.workload
    cmd = list(launcher) + [
        f"--transport={transport.name}", f"--config_path={config_path}",
        f"--num_shards={len(topology.servers)}",
        "--workload=transactions", f"--mode={w.mode}", f"--record_count={w.record_count}",
        f"--value_size={w.value_size}", f"--batch_keys={w.batch_keys}",
        f"--thread_num={w.client_threads_per_process}",
        f"--load_thread_num={w.load_threads}",
        f"--running_seconds={w.runtime_seconds}", f"--distribution={w.distribution}",
        f"--zipfian_alpha={w.zipfian_alpha}", f"--read_ratio={w.read_ratio}",
        f"--prefetch_depth={w.prefetch_depth}",
        f"--seed={w.seed + client.client_index}",
    ]
    if w.skip_load:
        cmd.append("--skip_load=true")
    if w.verify_deterministic_values:
        cmd.append("--verify_deterministic_values=true")
    if w.fetch_key_space:
        cmd.append(f"--fetch_key_space={w.fetch_key_space}")
    if w.warmup_seconds:
        cmd.append(f"--warmup_seconds={w.warmup_seconds}")
    if w.client_max_inflight_bytes:
        cmd.append(f"--max_inflight_bytes={format_inflight_budget(w.client_max_inflight_bytes)}")
    if w.transaction_profile:
        cmd.append("--transaction_profile=true")
    if w.target_rate:
        cmd += [f"--target_rate={w.target_rate:g}", f"--arrival={w.arrival}",
                f"--arrival_seed={w.seed + client.client_index}"]
    if transport.rc and plan.rc.rdma_rc_rows_in_slots:
        cmd.append("--rdma_rc_rows_in_slots=true")
    options = _transport_options(plan, transport, "client", client.client_index, bind_offset)
    if options:
        cmd.append(f"--transport_options={options}")
    if w.report_mode != "summary":
        cmd.append(f"--report_mode={w.report_mode}")
    if w.wire != "native":
        cmd.append(f"--wire={w.wire}")
    return cmd


def flag_name(arg: str) -> str | None:
    """`--name=value` -> `name` (None for non-flags)."""
    if not arg.startswith("--"):
        return None
    return arg[2:].split("=", 1)[0]
