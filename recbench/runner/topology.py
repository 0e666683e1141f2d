"""Topology plans for the PS runner: which server shard runs where on which port, and which client
processes run on which host.

Two ways to describe a topology, as in RecStore's runner:
- simple lists: `--server-shard-ips a,b` (one entry per shard, shard i on port base+i) and
  `--client-ips x,y` x `--client-processes-per-ip n` (clients numbered in host order);
- explicit plans: `--server-plan [server_index:]host:port:shard,...` and
  `--client-plan [client_index:]host,...`; indices and shards must be unique, entries are sorted by
  index, shard ids and ports are kept as given.

A host may be written `user@host`: the part after `@` is the endpoint (what configs and TCP checks
use), the whole entry is the ssh target. IPv6 literals are written in brackets (`[fe80::1]`,
`user@[::1]`) so that the colons of a plan entry stay unambiguous; the brackets are not part of the
endpoint. Every error names the offending entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from recbench import transports

_NAME_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\Z")  # host names, IPv4, ssh aliases, users
_IPV6_RE = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?\Z")  # inside brackets, optional %zone


class TopologyError(ValueError):
    """A topology entry is malformed or inconsistent; the message names the entry."""


@dataclass(frozen=True)
class ServerSpec:
    server_index: int
    host: str       # endpoint host (no user@, no brackets)
    ssh_host: str   # ssh target (may be user@host)
    port: int
    shard: int


@dataclass(frozen=True)
class ClientSpec:
    client_index: int
    host: str
    ssh_host: str


@dataclass(frozen=True)
class Topology:
    servers: tuple[ServerSpec, ...] = ()
    clients: tuple[ClientSpec, ...] = ()
    external: bool = False  # --server-endpoints: the servers run already; the runner starts none

    def launched_servers(self) -> tuple[ServerSpec, ...]:
        """The servers the runner starts (none for an already-running deployment)."""
        return () if self.external else self.servers

    def server_hosts(self) -> list[str]:
        return [s.host for s in self.servers]

    def client_hosts(self) -> list[str]:
        return sorted({c.host for c in self.clients})

    def server_plan(self) -> str:
        """The servers as a --server-plan string (`server_index:host:port:shard,...`)."""
        return ",".join(f"{s.server_index}:{_plan_host(s.ssh_host)}:{s.port}:{s.shard}"
                        for s in self.servers)

    def client_plan(self) -> str:
        """The clients as a --client-plan string (`client_index:host,...`)."""
        return ",".join(f"{c.client_index}:{_plan_host(c.ssh_host)}" for c in self.clients)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"servers": [asdict(s) for s in self.servers],
                               "clients": [asdict(c) for c in self.clients]}
        if self.external:
            out["external"] = True
        return out


def _plan_host(target: str) -> str:
    """An ssh target as a plan entry writes it: IPv6 literals in brackets."""
    user, at, host = target.rpartition("@")
    return f"{user}{at}[{host}]" if ":" in host else target


def parse_csv_list(text: str | Iterable[str] | None) -> list[str]:
    """Split a comma list, strip items and drop empty ones: "grpc, brpc,,rdma" -> [grpc, brpc, rdma]."""
    if text is None:
        return []
    if isinstance(text, (list, tuple)):
        items: list[str] = []
        for t in text:
            items.extend(parse_csv_list(t))
        return items
    return [item.strip() for item in str(text).split(",") if item.strip()]


def normalize_transport_list(items: str | Iterable[str] | None) -> list[str]:
    """Upper-case labels, de-duplicated (first occurrence wins), of the transports named."""
    try:
        out = [t.label for t in transports.parse_list(",".join(parse_csv_list(items)))]
    except transports.UnknownTransport as e:
        raise TopologyError(str(e)) from None
    if not out:
        raise TopologyError("no transport given: --transports needs at least one of "
                            f"{', '.join(transports.NAMES)}")
    return out


def split_fields(entry: str) -> list[str]:
    """Split a plan entry on ':' outside [brackets], so `0:user@[::1]:25000:0` has 4 fields."""
    fields: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in entry:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise TopologyError(f"unbalanced ']' in topology entry {entry!r}")
        if ch == ":" and depth == 0:
            fields.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise TopologyError(f"unbalanced '[' in topology entry {entry!r}")
    fields.append("".join(cur))
    return fields


def split_target(text: str, entry: str | None = None) -> tuple[str, str]:
    """`user@host` -> (endpoint host, ssh target). Brackets around an IPv6 literal are removed from
    both (ssh takes `user@::1` as it is)."""
    entry = entry if entry is not None else text
    text = text.strip()
    if not text:
        raise TopologyError(f"empty host in topology entry {entry!r}")
    user = ""
    host = text
    if "@" in text:
        user, host = text.rsplit("@", 1)
        if not user or not host:
            raise TopologyError(f"bad user@host {text!r} in topology entry {entry!r}")
    bracketed = host.startswith("[")
    if bracketed:
        if not host.endswith("]") or len(host) < 3:
            raise TopologyError(f"bad bracketed IPv6 host {host!r} in topology entry {entry!r}")
        host = host[1:-1]
    elif ":" in host:
        raise TopologyError(f"IPv6 host {host!r} in topology entry {entry!r} must be written in "
                            f"brackets, e.g. [{host}]")
    if any(c.isspace() for c in host) or "[" in host or "]" in host:
        raise TopologyError(f"bad host {host!r} in topology entry {entry!r}")
    # hosts and users end up as ssh arguments: one starting with '-' would be taken as an ssh
    # option (-oProxyCommand=... runs a command), control characters make unusable configs
    if not (_IPV6_RE.match(host) if bracketed else _NAME_RE.match(host)):
        raise TopologyError(f"bad host {host!r} in topology entry {entry!r}: use letters, digits, "
                            "'.', '-' and '_' (not first), or a bracketed IPv6 address")
    if user and not _NAME_RE.match(user):
        raise TopologyError(f"bad user {user!r} in topology entry {entry!r}: use letters, digits, "
                            "'.', '-' and '_' (not first)")
    ssh_host = f"{user}@{host}" if user else host
    return host, ssh_host


def _int_field(value: str, what: str, entry: str, minimum: int = 0,
               maximum: int | None = None) -> int:
    try:
        n = int(value)
    except ValueError:
        raise TopologyError(f"{what} {value!r} in topology entry {entry!r} is not an integer") from None
    if n < minimum or (maximum is not None and n > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise TopologyError(f"{what} {n} in topology entry {entry!r} is out of range ({bound})")
    return n


def parse_server_plan(text: str) -> list[ServerSpec]:
    """`[server_index:]host:port:shard,...` -> ServerSpec list sorted by server_index."""
    specs = []
    entries = parse_csv_list(text)
    for pos, entry in enumerate(entries):
        fields = split_fields(entry)
        if len(fields) == 3:
            index, (host_field, port, shard) = pos, fields
        elif len(fields) == 4:
            index = _int_field(fields[0], "server_index", entry)
            host_field, port, shard = fields[1:]
        else:
            raise TopologyError(f"server plan entry {entry!r} must be [server_index:]host:port:shard"
                                + _ipv6_hint(fields))
        host, ssh_host = split_target(host_field, entry)
        specs.append(ServerSpec(index, host, ssh_host, _int_field(port, "port", entry, 1, 65535),
                                _int_field(shard, "shard", entry)))
    _check_unique([s.server_index for s in specs], "server_index", entries, specs)
    _check_unique([s.shard for s in specs], "shard", entries, specs)
    return sorted(specs, key=lambda s: s.server_index)


def parse_server_endpoints(text: str) -> list[ServerSpec]:
    """`host:port,...` of an already-running deployment -> ServerSpec list, shard i = entry i (the
    order RecStore's clients route in). No `user@`: nothing is started on those hosts."""
    specs = []
    for pos, entry in enumerate(parse_csv_list(text)):
        fields = split_fields(entry)
        if len(fields) != 2 or "@" in fields[0]:
            raise TopologyError(f"--server-endpoints entry {entry!r} must be host:port (IPv6 in "
                                "brackets, e.g. [::1]:15000; no user@: nothing is started there)")
        host, _ = split_target(fields[0], entry)
        specs.append(ServerSpec(pos, host, host, _int_field(fields[1], "port", entry, 1, 65535),
                                pos))
    if not specs:
        raise TopologyError(f"--server-endpoints {text!r} names no endpoint")
    return specs


def parse_client_plan(text: str) -> list[ClientSpec]:
    """`[client_index:]host,...` -> ClientSpec list sorted by client_index; hosts may repeat."""
    specs = []
    entries = parse_csv_list(text)
    for pos, entry in enumerate(entries):
        fields = split_fields(entry)
        if len(fields) == 1:
            index, host_field = pos, fields[0]
        elif len(fields) == 2:
            index, host_field = _int_field(fields[0], "client_index", entry), fields[1]
        else:
            raise TopologyError(f"client plan entry {entry!r} must be [client_index:]host"
                                + _ipv6_hint(fields))
        host, ssh_host = split_target(host_field, entry)
        specs.append(ClientSpec(index, host, ssh_host))
    _check_unique([c.client_index for c in specs], "client_index", entries, specs)
    return sorted(specs, key=lambda c: c.client_index)


def _ipv6_hint(fields: Sequence[str]) -> str:
    return " (write IPv6 hosts in brackets, e.g. [fe80::1])" if len(fields) > 4 or "" in fields else ""


def _check_unique(values: Iterable[int], what: str, entries: Iterable[str],
                  specs: object) -> None:
    seen: dict[int, str] = {}
    for value, entry in zip(values, entries):
        if value in seen:
            raise TopologyError(f"duplicate {what} {value}: entries {seen[value]!r} and {entry!r}")
        seen[value] = entry


def resolve_base_port(transport: str, num_shards: int, rc_port: int | None = None) -> int:
    """Port of shard 0 when the topology comes from simple lists (recbench.transports' rule);
    the RC transports' control planes start at `rc_port` when one is given."""
    try:
        t = transports.get(transport)
    except transports.UnknownTransport as e:
        raise TopologyError(str(e)) from None
    if t.rc and rc_port:
        return rc_port
    return t.default_port(0, num_shards)


def build_topology_plan(transport: str, server_shard_ips: str = "127.0.0.1",
                        client_ips: str = "127.0.0.1", client_processes_per_ip: int = 1,
                        server_plan: str = "", client_plan: str = "",
                        base_port: int | None = None, rc_port: int | None = None,
                        server_endpoints: str = "") -> Topology:
    """Servers and clients of one case. An explicit plan wins over the simple list of its side;
    `server_endpoints` (an already-running deployment) wins over both."""
    if int(client_processes_per_ip) < 1:
        raise ValueError(f"client_processes_per_ip must be >= 1, got {client_processes_per_ip}")
    if parse_csv_list(server_endpoints):
        servers = parse_server_endpoints(server_endpoints)
    elif parse_csv_list(server_plan):
        servers = parse_server_plan(server_plan)
    else:
        shard_ips = parse_csv_list(server_shard_ips)
        if not shard_ips:
            raise TopologyError("--server-shard-ips is empty and there is no --server-plan")
        base = base_port if base_port is not None else resolve_base_port(transport, len(shard_ips),
                                                                          rc_port)
        servers = []
        for shard, entry in enumerate(shard_ips):
            host, ssh_host = split_target(entry)
            servers.append(ServerSpec(shard, host, ssh_host, base + shard, shard))
    if parse_csv_list(client_plan):
        clients = parse_client_plan(client_plan)
    else:
        ips = parse_csv_list(client_ips)
        if not ips:
            raise TopologyError("--client-ips is empty and there is no --client-plan")
        clients = []
        for entry in ips:
            host, ssh_host = split_target(entry)
            for _ in range(int(client_processes_per_ip)):
                clients.append(ClientSpec(len(clients), host, ssh_host))
    _check_endpoints(servers)
    return Topology(tuple(servers), tuple(clients), external=bool(parse_csv_list(server_endpoints)))


def _check_endpoints(servers: Iterable[ServerSpec]) -> None:
    seen: dict[tuple[str, int], int] = {}
    for s in servers:
        key = (s.host, s.port)
        if key in seen:
            raise TopologyError(f"servers {seen[key]} and {s.server_index} both listen on "
                                f"{format_hostport(s.host, s.port)}")
        seen[key] = s.server_index


def format_hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_local_host(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


FABRIC_MODES = ("ib", "rocev1", "rocev2")
# recbench's RC transport takes device, ib_port and gid_index per process; the RoCEv2 address
# fields keep the verbs defaults (the GID entry's own), so other values are refused.
FABRIC_ROCE_DEFAULTS = {"hop_limit": 64, "traffic_class": 0, "flow_label": 0}
EXPECTED_LINK_LAYER = {"ib": "InfiniBand", "rocev1": "Ethernet", "rocev2": "Ethernet"}


@dataclass(frozen=True)
class FabricEntry:
    node_id: int
    device: str
    port: int
    gid_index: int
    mode: str
    hop_limit: int = 64
    traffic_class: int = 0
    flow_label: int = 0


def parse_rdma_fabric_plan(text: str, node_ids: Iterable[int]) -> dict[int, FabricEntry]:
    """`node_id:device:port:gid_index:mode[:hop_limit:traffic_class:flow_label],...` -> {node_id:
    FabricEntry}. Servers are nodes 0..S-1 (by server_index), clients S+client_index; the plan must
    cover every node of `node_ids`; rocev2 entries need all 8 fields."""
    plan: dict[int, FabricEntry] = {}
    for entry in parse_csv_list(text):
        f = entry.split(":")
        if len(f) not in (5, 8):
            raise TopologyError(f"RDMA fabric plan entry {entry!r} must be node_id:device:port:"
                                "gid_index:mode[:hop_limit:traffic_class:flow_label]")
        node = _int_field(f[0], "node_id", entry)
        mode = f[4].lower()
        if mode not in FABRIC_MODES:
            raise TopologyError(f"mode {f[4]!r} in RDMA fabric plan entry {entry!r} must be one of "
                                f"{', '.join(FABRIC_MODES)}")
        if mode == "rocev2" and len(f) != 8:
            raise TopologyError(f"rocev2 entry {entry!r} needs all 8 fields "
                                "(node_id:device:port:gid_index:rocev2:hop_limit:traffic_class:flow_label)")
        if not f[1]:
            raise TopologyError(f"empty device in RDMA fabric plan entry {entry!r}")
        e = FabricEntry(node, f[1], _int_field(f[2], "port", entry, 1, 255),
                        _int_field(f[3], "gid_index", entry, 0, 255), mode)
        if len(f) == 8:
            e = FabricEntry(node, e.device, e.port, e.gid_index, mode,
                            _int_field(f[5], "hop_limit", entry, 0, 255),
                            _int_field(f[6], "traffic_class", entry, 0, 255),
                            _int_field(f[7], "flow_label", entry, 0, (1 << 20) - 1))
            for name, default in FABRIC_ROCE_DEFAULTS.items():
                if getattr(e, name) != default:
                    raise TopologyError(f"{name}={getattr(e, name)} in RDMA fabric plan entry "
                                        f"{entry!r}: recbench's RC transport uses the GID entry's "
                                        f"defaults ({name}={default})")
        if node in plan:
            raise TopologyError(f"duplicate node_id {node} in RDMA fabric plan entry {entry!r}")
        plan[node] = e
    missing = sorted(set(node_ids) - set(plan))
    if missing:
        raise TopologyError(f"RDMA fabric plan must cover every node: missing node ids {missing} "
                            f"(servers are 0..S-1, clients S+client_index)")
    extra = sorted(set(plan) - set(node_ids))
    if extra:
        raise TopologyError(f"RDMA fabric plan names node ids {extra} that are not in the topology")
    return plan


def fabric_node_ids(topo: Topology) -> list[tuple[str, int, int]]:
    """Node ids of a topology: servers 0..S-1 in server_index order, then clients at
    S + client_index. (Servers are numbered by rank, not by their index: with a sparse
    --server-plan such as "1:h:p:0", index 1 as a node id would collide with client 0.)"""
    n = len(topo.servers)
    ranked = sorted(topo.servers, key=lambda s: s.server_index)
    return ([("server", s.server_index, rank) for rank, s in enumerate(ranked)]
            + [("client", c.client_index, n + c.client_index) for c in topo.clients])
