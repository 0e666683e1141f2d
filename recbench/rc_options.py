"""Command-line flags of the RC transports (``rdma``, ``shm``) and their ``extra`` option string.

ps_server and ps_bench add these flags with :func:`add_server_flags` / :func:`add_client_flags`;
the C transports read them from the ``k=v;k=v`` string that :func:`server_extra` /
:func:`client_extra` build (csrc/transport/rc/rc_options.c names the keys). Flag names keep
RecStore's spelling (``--rdma_rc_qps_per_client_per_shard``, ``--rdma_get_response_mode`` ...).
Only flags the user gave are passed on, so the C defaults (RecStore's) apply otherwise; an
explicit ``--transport_options`` string is appended last and wins.
"""

from __future__ import annotations

import argparse

from recbench.cli_flags import parse_bool
from recbench.transports import RC_NAMES as RC_TRANSPORTS

# (flag, extra key, type, help) shared by server and client
_COMMON = [
    ("--poll_mode", "poll_mode", str,
     ("busy | adaptive (default): adaptive spins, then yields, then sleeps when idle (shm: until "
      "the peer wakes it; verbs: naps up to 1 ms)")),
    ("--rdma_rc_idle_spin_rounds", "idle_spin_rounds", int,
     "adaptive poll mode: idle rounds spent spinning before yielding (default 2000)"),
    ("--rdma_rc_idle_yield_rounds", "idle_yield_rounds", int,
     ("adaptive poll mode: idle rounds spent yielding before sleeping (shm: a futex sleep the "
      "peer ends; verbs: naps) (default 256)")),
    ("--rdma_rc_idle_spin_us", "idle_spin_us", int,
     ("adaptive poll mode: spinning and yielding end this many microseconds into an idle streak "
      "(default 100; 0 = only the round counts)")),
    ("--rdma_rc_profile_interval_ms", "profile_interval_ms", int,
     "print rdma_rc_*_profile lines every N ms (0 = off; profiling costs throughput)"),
    ("--rdma_rc_inline_bytes", "inline_bytes", int, "writes up to N bytes go inline (verbs; default 64)"),
    ("--rdma_device", "device", str, "verbs device name (default: the first device)"),
    ("--rdma_ib_port", "ib_port", int, "verbs port number (default 1)"),
    ("--rdma_gid_index", "gid_index", int,
     "verbs GID index (default: LID on InfiniBand, 0 on RoCE)"),
    ("--bind_core_offset", "bind_core_offset", int,
     "bind RC threads to cores offset + i*stride (default: $RECSTORE_BIND_CORE_OFFSET, else none)"),
    ("--bind_core_stride", "bind_core_stride", int, "core stride for --bind_core_offset (default 1)"),
]

_SERVER = [
    ("--rdma_rc_server_get_workers", "server_get_workers", int,
     "GET worker threads behind the poll threads (default 0: pollers serve GETs themselves)"),
    ("--rdma_rc_fake_get_mode", "fake_get_mode", str,
     "diagnostics only: none | status_only | index_only | payload_memset"),
    ("--numa_id", "numa_id", int, "NUMA node of the server's RC memory and threads (default: none)"),
    ("--rdma_rc_server_numa_id", "numa_id", int, "same as --numa_id (RecStore's RC spelling)"),
]

_CLIENT = [
    ("--rdma_rc_qps_per_client_per_shard", "qps_per_client_per_shard", int,
     "QPs (lanes) per logical client per shard (default 16)"),
    ("--rdma_rc_slots_per_qp", "slots_per_qp", int, "request slots per QP (default 1)"),
    ("--rdma_rc_request_slot_bytes", "request_slot_bytes", int, "request slot size (default 1 MiB)"),
    ("--rdma_rc_response_slot_bytes", "response_slot_bytes", int, "response slot size (default 1 MiB)"),
    ("--rdma_get_response_mode", "get_response_mode", str,
     ("auto (default: staging_copy on shm and for DRAM_PET_HASH, else direct_sg) | staging_copy | "
      "direct_sg")),
    ("--rdma_rc_wait_spin_iterations", "wait_spin_iterations", int,
     "status polls before the poll-mode backoff starts (default 0)"),
    ("--rdma_wait_timeout_ms", "wait_timeout_ms", int, "per-request wait timeout (default 60000)"),
    ("--rdma_control_plane_timeout_ms", "control_plane_timeout_ms", int,
     "how long to wait for the server's control plane to be ready (default 30000)"),
    ("--rdma_rc_client_numa_id", "numa_id", int, "NUMA node of the client's RC memory (default: none)"),
]


def _add(group, specs, existing):
    for flag, _key, typ, help_ in specs:
        if flag in existing:
            continue
        group.add_argument(flag, type=typ, default=None, dest="rc_" + flag.lstrip("-"), help=help_)


def _existing(parser: argparse.ArgumentParser) -> set:
    return {s for a in parser._actions for s in a.option_strings}


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """Add the RC server flags (used with --transport rdma|shm; --port is the control-plane port)."""
    g = parser.add_argument_group("rdma/shm transports (RC slot protocol, server side)")
    existing = _existing(parser)
    if "--thread_num" not in existing:
        g.add_argument("--thread_num", type=int, default=None, dest="rc_thread_num",
                       help="RC poll threads (RecStore's petps_server flag; same as --num_threads)")
    _add(g, _COMMON + _SERVER, existing)


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """Add the RC client flags."""
    g = parser.add_argument_group("rdma/shm transports (RC slot protocol, client side)")
    existing = _existing(parser)
    _add(g, _COMMON + _CLIENT, existing)
    if "--rdma_rc_skip_client_copy" not in existing:
        g.add_argument("--rdma_rc_skip_client_copy", nargs="?", const=True, default=None, type=parse_bool,
                       dest="rc_rdma_rc_skip_client_copy",
                       help="leave GET rows in the response slot (diagnostics: no copy to the caller)")
    if "--rdma_rc_rows_in_slots" not in existing:
        g.add_argument("--rdma_rc_rows_in_slots", nargs="?", const=True, default=None, type=parse_bool,
                       dest="rc_rdma_rc_rows_in_slots",
                       help="ps_bench: the threads' GET row buffers are response slots set aside for "
                            "them (rows_buffers = prefetch depth), so rows land without the client's "
                            "copy; one shard only")


def _extra(args, specs, base: str | None, more: dict | None = None) -> str | None:
    parts = []
    for flag, key, _typ, _help in specs:
        v = getattr(args, "rc_" + flag.lstrip("-"), None)
        if v is not None:
            parts.append(f"{key}={v}")
    for k, v in (more or {}).items():
        parts.append(f"{k}={v}")
    if base:
        parts.append(base)
    return ";".join(parts) or None


def server_extra(args, base: str | None = None, max_keys: int | None = None) -> str | None:
    """The server's extra string from parsed args (base = --transport_options, appended last)."""
    more = {"max_keys_per_request": max_keys} if max_keys else None
    return _extra(args, _COMMON + _SERVER, base, more)


def server_threads(args, default: int | None) -> int | None:
    """--thread_num (RC poll threads) when given, else default."""
    v = getattr(args, "rc_thread_num", None)
    return v if v is not None else default


def client_extra(args, base: str | None = None, depth: int | None = None) -> str | None:
    """The client's extra string from parsed args (base = --transport_options, appended last;
    depth: the row buffers --rdma_rc_rows_in_slots sets aside)."""
    more = {}
    skip = getattr(args, "rc_rdma_rc_skip_client_copy", None)
    if skip is not None:
        more["skip_client_copy"] = 1 if skip else 0
    if rows_in_slots(args) and depth:
        more["rows_buffers"] = depth
    return _extra(args, _COMMON + _CLIENT, base, more)


def _given(args, specs) -> list[str]:
    names = [flag for flag, *_ in specs if getattr(args, "rc_" + flag.lstrip("-"), None) is not None]
    for flag in ("--thread_num", "--rdma_rc_skip_client_copy", "--rdma_rc_rows_in_slots"):
        if getattr(args, "rc_" + flag.lstrip("-"), None) is not None:
            names.append(flag)
    return names


def apply_server(args, transport: str, settings: list[dict]) -> None:
    """ps_server: fold the RC flags into each shard's settings (num_threads, extra).

    ValueError when RC flags are given for another transport (they would have no effect)."""
    if transport not in RC_TRANSPORTS:
        given = _given(args, _COMMON + _SERVER)
        if given:
            raise ValueError(f"{', '.join(given)} apply to the rdma and shm transports only, "
                             f"not {transport}")
        return
    for s in settings:
        s["num_threads"] = server_threads(args, s["num_threads"])
        s["extra"] = server_extra(args, s.get("extra"), s.get("max_keys_per_request"))


def rows_in_slots(args) -> bool:
    """--rdma_rc_rows_in_slots given (and not false)."""
    return bool(getattr(args, "rc_rdma_rc_rows_in_slots", None))


def bench_extra(args, transport: str, depth: int | None = None) -> str | None:
    """ps_bench: the client's extra string (RC flags + --transport_options).

    ValueError when RC flags are given for another transport (they would have no effect)."""
    if transport not in RC_TRANSPORTS:
        given = _given(args, _COMMON + _CLIENT)
        if given:
            raise ValueError(f"{', '.join(given)} apply to the rdma and shm transports only, "
                             f"not {transport}")
        return args.transport_options
    return client_extra(args, args.transport_options, depth)
