"""The one table of recbench's PS transports: names, RecStore's spellings, default ports and what
each one needs.

`name` is how programs take it (`ps_server --transport=brpc`, log directories, `grpc:k=v` option
scopes); `label` is how RecStore's runner writes it (summary.csv's transport column, `--transports`
is case-insensitive); `ps_type` is the config's `cache_ps.ps_type`. The RC transports (rdma, shm)
run the RC slot protocol: their server port is the control plane, and the runner's `--rdma-*`
flags reach them as transport options. `recstore_wire`: RecStore's own service exists on it
(`--wire recstore`, `recstore+NAME://`; docs/recstore-wire.md). Every program and harness takes
transport names through `get` / `parse_list` (any case), never by comparing spellings itself.

Ports when nothing names one (RecStore's rules): gRPC 15000+shard; bRPC 15000 for one shard, else
25000+shard; the RC control planes 25000+shard (the runner over ssh: 25100+shard).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Transport:
    name: str          # lower case: --transport=NAME of ps_server / ps_bench
    label: str         # upper case: summary.csv, RecStore's runner
    ps_type: str       # config cache_ps.ps_type
    rc: bool           # RC slot protocol (control plane port, RC transport options)
    needs_verbs: bool  # needs an RDMA verbs device on every host
    base_port: int     # shard 0's default port (one shard for brpc)
    recstore_wire: bool = False  # RecStore's ParameterService is served/spoken on it

    def default_port(self, shard: int, num_shards: int) -> int:
        if self.name == "brpc" and num_shards > 1:
            return BRPC_MULTI_SHARD_BASE_PORT + shard
        return self.base_port + shard


BRPC_MULTI_SHARD_BASE_PORT = 25000
RC_SSH_CONTROL_PLANE_PORT = 25100

# the order is the runner's default order (--transports rdma,grpc,brpc,shm)
TRANSPORTS: dict[str, Transport] = {t.name: t for t in (
    Transport("rdma", "RDMA", "RDMA", rc=True, needs_verbs=True, base_port=25000),
    Transport("grpc", "GRPC", "GRPC", rc=False, needs_verbs=False, base_port=15000,
              recstore_wire=True),
    Transport("brpc", "BRPC", "BRPC", rc=False, needs_verbs=False, base_port=15000,
              recstore_wire=True),
    Transport("shm", "SHM", "LOCAL_SHM", rc=True, needs_verbs=False, base_port=25000),
)}
NAMES = tuple(TRANSPORTS)
RC_NAMES = tuple(n for n, t in TRANSPORTS.items() if t.rc)
RECSTORE_WIRE_NAMES = tuple(n for n, t in TRANSPORTS.items() if t.recstore_wire)


class UnknownTransport(ValueError):
    """A transport name that is not in the table; the message names it and the known ones."""


def get(name: str) -> Transport:
    """The transport called `name` (any case: 'brpc', 'BRPC')."""
    t = TRANSPORTS.get(str(name).strip().lower())
    if t is None:
        raise UnknownTransport(f"unknown transport {name!r}: choose from {', '.join(NAMES)}")
    return t


def parse_list(text: str) -> list[Transport]:
    """A comma list of transport names ('GRPC, brpc,,grpc'): any case, empty items dropped,
    repeats dropped (the first one wins); UnknownTransport names a bad item."""
    out: list[Transport] = []
    for item in str(text).split(","):
        if item.strip():
            t = get(item)
            if t not in out:
                out.append(t)
    return out


def by_ps_type(ps_type: str) -> Transport:
    for t in TRANSPORTS.values():
        if t.ps_type == str(ps_type).upper():
            return t
    raise UnknownTransport(f"unknown ps_type {ps_type!r}: choose from "
                           f"{', '.join(t.ps_type for t in TRANSPORTS.values())}")


def default_port(name: str, shard: int, num_shards: int) -> int:
    """RecStore's port for shard `shard` of `num_shards` on transport `name`."""
    return get(name).default_port(shard, num_shards)
