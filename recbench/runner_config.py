"""What the PS runner hands to its processes: the generated config JSON
(`configs/<transport>_repeat_<i>.json`, RecStore's shape) and the command lines of
`python -m recbench.ps_server` and `python -m recbench.ps_bench`.

Flags of the two programs keep RecStore's underscore spelling (`--config_path`, `--local_shard_id`,
`--brpc_server_port`). RecStore's `--rdma-*` runner flags reach the RC transports (rdma, shm) as
their `--transport_options` keys (qps_per_client_per_shard, slots_per_qp, bind_core_offset, ...);
`--transport-options` of the runner is appended to that string, so the user's keys win.
"""

import math

from recbench.topology import RC_TRANSPORTS, TRANSPORTS

MIB = 1 << 20
SLAB_ALLOCATORS = ("PERSIST_LOOP_SLAB", "CONCURRENT_SLAB_MEMORY_POOL")
SLAB_METADATA_BYTES = 8
SLAB_HEADROOM = (6, 5)
MIN_SSD_CAPACITY_BYTES = 256 * MIB
VALUE_STORE_TYPES = ("DRAM_VALUE_STORE", "TIERED_VALUE_STORE")
RESPONSE_MODES = ("auto", "direct_sg", "staging_copy")
FAKE_GET_MODES = ("none", "status_only", "index_only", "payload_memset")


def recommended_dram_capacity_bytes(capacity, value_size, allocator):
    """Slab allocators: ceil(capacity x (value_size + 8) x 6/5) rounded up to 1 MiB; other
    allocators: capacity x value_size."""
    if allocator in SLAB_ALLOCATORS:
        raw = math.ceil(capacity * (value_size + SLAB_METADATA_BYTES) * SLAB_HEADROOM[0]
                        / SLAB_HEADROOM[1])
        return max(MIB, -(-raw // MIB) * MIB)
    return capacity * value_size


def recommended_ssd_capacity_bytes(capacity, value_size):
    return max(capacity * max(value_size + SLAB_METADATA_BYTES, 128) * 2, MIN_SSD_CAPACITY_BYTES)


def resolve_rdma_get_response_mode(mode, index_type):
    """`auto` is staging_copy for DRAM_PET_HASH (row layout is not scatter-gather friendly),
    direct_sg for every other index."""
    if mode in (None, "", "auto"):
        return "staging_copy" if index_type == "DRAM_PET_HASH" else "direct_sg"
    return mode


def value_store_block(args, data_root):
    capacity = args.capacity or args.record_count
    if args.value_store_type == "TIERED_VALUE_STORE":
        dram = args.tiered_dram_capacity_bytes or recommended_dram_capacity_bytes(
            capacity, args.value_size, args.dram_allocator)
        return {
            "type": "TIERED_VALUE_STORE",
            "default_value_size_hint": args.value_size,
            "dram_allocator": {"type": args.dram_allocator, "capacity_bytes": dram,
                               "path": f"{data_root}/dram"},
            "ssd_allocator": {
                "type": "SSD_SLAB",
                "capacity_bytes": args.ssd_capacity_bytes
                or recommended_ssd_capacity_bytes(capacity, args.value_size),
                "min_block_size": 128, "max_block_size": 4096,
                "io": {"type": args.ssd_io_backend, "queue_depth": args.ssd_queue_depth,
                       "base_offset_bytes": 4096},
                "path": f"{data_root}/ssd.db",
            },
            "tiering": {"cache_policy": "LRU"},
        }
    return {
        "type": "DRAM_VALUE_STORE",
        "default_value_size_hint": args.value_size,
        "dram_allocator": {"type": args.dram_allocator, "capacity_bytes":
                           args.tiered_dram_capacity_bytes or recommended_dram_capacity_bytes(
                               capacity, args.value_size, args.dram_allocator)},
        "path": data_root,
    }


PS_TYPES = {"BRPC": "BRPC", "GRPC": "GRPC", "RDMA": "RDMA", "SHM": "LOCAL_SHM"}


def build_runtime_config(args, transport, topology, data_root):
    """RecStore-shaped config for one case."""
    servers = [{"host": s.host, "port": s.port, "shard": s.shard} for s in topology.servers]
    max_keys = max(args.batch_keys, args.max_keys_per_request)
    capacity = args.capacity or args.record_count
    cfg = {
        "cache_ps": {
            "ps_type": PS_TYPES[transport.upper()],
            "max_batch_keys_size": max_keys,
            "num_threads": server_threads(args, transport),
            "num_shards": len(servers),
            "servers": servers,
            "base_kv_config": {"capacity": capacity, "index": {"type": args.index_type},
                               "value": value_store_block(args, data_root)},
        },
        "distributed_client": {"num_shards": len(servers), "hash_method": "city_hash",
                               "max_keys_per_request": max_keys, "servers": servers},
        "client": dict(servers[0]),
    }
    if transport.upper() in RC_TRANSPORTS:
        cfg["rdma"] = {
            "namespace": args.rdma_namespace,
            "control_plane_host": args.rdma_control_plane_host or servers[0]["host"],
            "get_response_mode": resolve_rdma_get_response_mode(args.rdma_get_response_mode,
                                                                args.index_type),
            "num_server_processes": len(servers),
            "num_client_processes": len(topology.clients),
            "num_logical_clients": len(topology.clients) * args.client_threads_per_process,
        }
    return cfg


def server_threads(args, transport):
    return args.server_rdma_threads if transport.upper() in RC_TRANSPORTS else args.server_worker_threads


def _flag(name, value):
    if isinstance(value, bool):
        return f"--{name}={'true' if value else 'false'}"
    return f"--{name}={value}"


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


def _applies(args, transport, dest):
    return not (transport.upper() == "SHM" and dest in PLACEMENT_DESTS
                and dest in getattr(args, "rc_derived", ()))


def rc_transport_options(args, transport, role, index=0, cores=None):
    """The `k=v;k=v` RC options of one process: role "server" (shard index) or "client" (client
    index). Core offsets wrap around the host's core count when it is known."""
    table = RC_SERVER_OPTIONS if role == "server" else RC_CLIENT_OPTIONS
    opts = []
    for key, dest in table:
        value = getattr(args, dest, None)
        if value is None or value is False or (key == "fake_get_mode" and value == "none"):
            continue
        if not _applies(args, transport, dest):
            continue
        opts.append(f"{key}={'true' if value is True else value}")
    opts.append("get_response_mode="
                + resolve_rdma_get_response_mode(args.rdma_get_response_mode, args.index_type))
    fabric = getattr(args, "fabric", {}).get((role, index)) if transport.upper() == "RDMA" else None
    if fabric is not None:
        opts += [f"device={fabric.device}", f"ib_port={fabric.port}",
                 f"gid_index={fabric.gid_index}"]
    if role == "server" and args.rdma_server_bind_core_offset is not None and _applies(
            args, transport, "rdma_server_bind_core_offset"):
        per = args.server_rdma_threads + (args.rdma_rc_server_get_workers or 0)
        offset = args.rdma_server_bind_core_offset + index * per
        opts.append(f"bind_core_offset={offset % cores if cores else offset}")
    if role == "client":  # RecStore's runner gives clients its cluster timeout for the control plane
        opts.append(f"control_plane_timeout_ms={int(args.cluster_timeout * 1000)}")
    if role == "client" and args.rdma_client_bind_core_offset is not None and _applies(
            args, transport, "rdma_client_bind_core_offset"):
        offset = args.rdma_client_bind_core_offset + index * (args.rdma_client_bind_core_stride or 1)
        opts.append(f"bind_core_offset={offset % cores if cores else offset}")
    return ";".join(opts)


def bind_core_offset(options):
    """The bind_core_offset in an RC option string (for RECSTORE_BIND_CORE_OFFSET), or None."""
    for item in options.split(";"):
        if item.startswith("bind_core_offset="):
            return int(item.split("=", 1)[1])
    return None


def scoped_transport_options(text: str, transport: str) -> str:
    """The user's --transport-options for one transport: `k=v` items go to every transport,
    `name:k=v` items (name = brpc, grpc, rdma or shm) only to that one. Items are separated by
    ';' or ','. Raises ValueError naming an unknown transport prefix."""
    out = []
    for item in (x.strip() for x in text.replace(",", ";").split(";")):
        if not item:
            continue
        head, sep, rest = item.partition(":")
        if sep and "=" not in head:
            if head.upper() not in TRANSPORTS:
                raise ValueError(f"--transport-options item '{item}': unknown transport "
                                 f"'{head}' (known: {', '.join(t.lower() for t in TRANSPORTS)})")
            if head.upper() == transport.upper():
                out.append(rest)
        else:
            out.append(item)
    return ";".join(out)


def _transport_options(args, transport, role, index, cores):
    parts = []
    if transport.upper() in RC_TRANSPORTS:
        parts.append(rc_transport_options(args, transport, role, index, cores))
    if args.transport_options:  # the user's keys come last and win
        parts.append(scoped_transport_options(args.transport_options, transport))
    return ";".join(p for p in parts if p)


def build_server_cmd(args, transport, server, num_shards, config_path, launcher, cores=None):
    """argv of one shard server. `launcher` is the argv prefix (python -m recbench.ps_server, or
    --server-binary)."""
    t = transport.lower()
    cmd = list(launcher) + [
        f"--transport={t}", f"--config_path={config_path}", f"--local_shard_id={server.shard}",
        f"--host={server.host}", f"--port={server.port}", f"--num_shards={num_shards}",
        f"--index_type={args.index_type}", f"--value_size={args.value_size}",
        f"--capacity={args.capacity or args.record_count}",
        f"--num_threads={server_threads(args, transport)}",
        f"--max_keys_per_request={max(args.batch_keys, args.max_keys_per_request)}",
    ]
    if t == "brpc":
        cmd.append(f"--brpc_server_port={server.port}")
    options = _transport_options(args, transport, "server", server.server_index, cores)
    if options:
        cmd.append(f"--transport_options={options}")
    return cmd


def build_rpc_server_cmd(args, transport, server, num_shards, config_path, launcher, cores=None):
    """RecStore's name for the gRPC/bRPC server command (same builder for every transport)."""
    return build_server_cmd(args, transport, server, num_shards, config_path, launcher, cores)


def build_benchmark_cmd(args, transport, topology, client, config_path, launcher, cores=None):
    """argv of one client process (`--workload=transactions`). The shard endpoints come from the
    config (servers[] in shard order), not from --host/--port, so explicit plans keep their
    hosts and ports."""
    cmd = list(launcher) + [
        f"--transport={transport.lower()}", f"--config_path={config_path}",
        f"--num_shards={len(topology.servers)}",
        "--workload=transactions", f"--mode={args.mode}", f"--record_count={args.record_count}",
        f"--value_size={args.value_size}", f"--batch_keys={args.batch_keys}",
        f"--thread_num={args.client_threads_per_process}",
        f"--load_thread_num={args.client_load_threads_per_process or args.client_threads_per_process}",
        f"--running_seconds={args.runtime_seconds}", f"--distribution={args.distribution}",
        f"--zipfian_alpha={args.zipfian_alpha}", f"--read_ratio={args.read_ratio}",
        f"--prefetch_depth={args.prefetch_depth}",
        f"--seed={args.seed + client.client_index}",
    ]
    if args.skip_load:
        cmd.append("--skip_load=true")
    if args.verify_deterministic_values:
        cmd.append("--verify_deterministic_values=true")
    if args.fetch_key_space:
        cmd.append(f"--fetch_key_space={args.fetch_key_space}")
    if args.warmup_seconds:
        cmd.append(f"--warmup_seconds={args.warmup_seconds}")
    if args.transaction_profile:
        cmd.append("--transaction_profile=true")
    if args.target_rate:
        cmd += [f"--target_rate={args.target_rate:g}", f"--arrival={args.arrival}",
                f"--arrival_seed={args.seed + client.client_index}"]
    options = _transport_options(args, transport, "client", client.client_index, cores)
    if options:
        cmd.append(f"--transport_options={options}")
    if args.report_mode != "summary":
        cmd.append(f"--report_mode={args.report_mode}")
    return cmd


def flag_name(arg):
    """`--name=value` -> `name` (None for non-flags)."""
    if not arg.startswith("--"):
        return None
    return arg[2:].split("=", 1)[0]
