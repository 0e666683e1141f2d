"""RecStore's PS config JSON, read and written in RecStore's shape.

The shape (what RecStore's runner generates and its servers read)::

    {"cache_ps": {"ps_type": "BRPC", "num_threads": 1, "num_shards": 2,
                  "max_batch_keys_size": 500,
                  "servers": [{"host": "127.0.0.1", "port": 25000, "shard": 0}, ...],
                  "base_kv_config": {"capacity": 100000, "index": {"type": "DRAM_PET_HASH"},
                                     "value": {"type": "DRAM_VALUE_STORE",
                                               "default_value_size_hint": 512, "path": "..."}}},
     "distributed_client": {"num_shards": 2, "hash_method": "rs_mix64",
                            "max_keys_per_request": 500, "servers": [...]},
     "client": {"host": ..., "port": ..., "shard": 0}}

Every field is optional when reading; a field of the wrong type is an error that names the file and
the field. Ports follow RecStore's defaults (default_port). distributed_client.hash_method says how
clients route keys (HASH_METHODS); ps_bench uses it unless --hash_method is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from recbench import transports


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the field."""


# distributed_client.hash_method: rs_mix64 is recbench's native wire (recstore/hash.h); city_hash
# and simple_mod are RecStore's, used on RecStore's wire (docs/recstore-wire.md)
HASH_METHODS = ("rs_mix64", "city_hash", "simple_mod")


@dataclass
class ServerEntry:
    host: str
    port: int
    shard: int


@dataclass
class PSConfig:
    """The settings recbench reads from a RecStore config; None = not given."""

    path: str = ""
    transport: str | None = None
    num_threads: int | None = None
    num_shards: int | None = None
    servers: list[ServerEntry] = field(default_factory=list)
    capacity: int | None = None
    index_type: str | None = None
    value_size: int | None = None
    max_keys_per_request: int | None = None
    data_path: str | None = None
    hash_method: str | None = None  # distributed_client.hash_method: how clients route keys
    # cache_ps.optimizer as server transport options ("optimizer=...;learning_rate=...")
    optimizer_options: str | None = None

    def server_for(self, shard: int) -> ServerEntry | None:
        for s in self.servers:
            if s.shard == shard:
                return s
        return None


def _get(obj: dict, key: str, kind, where: str, path: str):
    if not isinstance(obj, dict) or key not in obj or obj[key] is None:
        return None
    v = obj[key]
    if kind is int and isinstance(v, bool):
        raise ConfigError(f"{path}: {where}.{key} must be an integer, got {v!r}")
    if kind is int and isinstance(v, str) and v.strip().isdigit():
        return int(v)
    if not isinstance(v, kind):
        raise ConfigError(f"{path}: {where}.{key} must be {kind.__name__}, got {v!r}")
    return v


def _optimizer_options(cps: dict, path: str) -> str | None:
    """cache_ps.optimizer {type, learning_rate, epsilon} as the servers' transport options (the
    server checks the values and names a type it does not implement)."""
    opt = cps.get("optimizer")
    if opt is None:
        return None
    where = "cache_ps.optimizer"
    if not isinstance(opt, dict):
        raise ConfigError(f"{path}: {where} must be an object")
    parts = []
    kind = _get(opt, "type", str, where, path)
    if kind is not None:
        parts.append(f"optimizer={kind}")
    for key in ("learning_rate", "epsilon"):
        v = opt.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"{path}: {where}.{key} must be a number, got {v!r}")
        parts.append(f"{key}={v!r}")
    return ";".join(parts) or None


def parse_config(doc: dict, path: str = "<config>") -> PSConfig:
    """Read the fields recbench uses from a RecStore config document."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object")
    cps = doc.get("cache_ps") or {}
    if not isinstance(cps, dict):
        raise ConfigError(f"{path}: cache_ps must be an object")
    cfg = PSConfig(path=path)
    ps_type = _get(cps, "ps_type", str, "cache_ps", path)
    if ps_type is not None:
        try:
            cfg.transport = transports.by_ps_type(ps_type).name
        except transports.UnknownTransport as e:
            raise ConfigError(f"{path}: cache_ps.{e}") from None
    cfg.num_threads = _get(cps, "num_threads", int, "cache_ps", path)
    cfg.num_shards = _get(cps, "num_shards", int, "cache_ps", path)
    cfg.max_keys_per_request = _get(cps, "max_batch_keys_size", int, "cache_ps", path)
    cfg.optimizer_options = _optimizer_options(cps, path)
    dc = doc.get("distributed_client") or {}
    mk = _get(dc, "max_keys_per_request", int, "distributed_client", path)
    if mk is not None:
        cfg.max_keys_per_request = max(mk, cfg.max_keys_per_request or 0)
    cfg.hash_method = _get(dc, "hash_method", str, "distributed_client", path)
    if cfg.hash_method is not None and cfg.hash_method not in HASH_METHODS:
        raise ConfigError(f"{path}: distributed_client.hash_method {cfg.hash_method!r} is not "
                          f"one of {', '.join(HASH_METHODS)}")
    servers = cps.get("servers")
    if servers is None:
        servers = dc.get("servers") if isinstance(dc, dict) else None
    if servers is not None:
        if not isinstance(servers, list):
            raise ConfigError(f"{path}: cache_ps.servers must be a list")
        for i, s in enumerate(servers):
            where = f"cache_ps.servers[{i}]"
            host = _get(s, "host", str, where, path)
            port = _get(s, "port", int, where, path)
            shard = _get(s, "shard", int, where, path)
            if host is None or port is None:
                raise ConfigError(f"{path}: {where} needs host and port")
            cfg.servers.append(ServerEntry(host, port, i if shard is None else shard))
    if cfg.num_shards is None and cfg.servers:
        cfg.num_shards = len(cfg.servers)
    kv = cps.get("base_kv_config") or {}
    cfg.capacity = _get(kv, "capacity", int, "cache_ps.base_kv_config", path)
    index = kv.get("index") if isinstance(kv, dict) else None
    cfg.index_type = _get(index or {}, "type", str, "cache_ps.base_kv_config.index", path)
    value = kv.get("value") if isinstance(kv, dict) else None
    cfg.value_size = _get(value or {}, "default_value_size_hint", int,
                          "cache_ps.base_kv_config.value", path)
    cfg.data_path = (_get(kv, "path", str, "cache_ps.base_kv_config", path)
                     or _get(value or {}, "path", str, "cache_ps.base_kv_config.value", path))
    return cfg


def load_config(path: str | Path) -> PSConfig:
    """Read a RecStore config file; ConfigError names the file and what is wrong."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the config: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON: {e}") from None
    return parse_config(doc, str(p))


def build_config(transport: str, servers: list[tuple[str, int]] | list[tuple[str, int, int]], *,
                 num_threads: int = 1,
                 capacity: int = 1000000, index_type: str = "DRAM_PET_HASH",
                 value_size: int = 512, max_keys_per_request: int = 500,
                 data_path: str | None = None, hash_method: str = "rs_mix64") -> dict:
    """A config document in RecStore's shape (the one builder of it: the runner adds its blocks to
    this one): servers[i] = (host, port) serves shard i, (host, port, shard) names the shard.
    hash_method is how the clients route keys: rs_mix64 (the native wire), or city_hash /
    simple_mod for clients on RecStore's wire."""
    if hash_method not in HASH_METHODS:
        raise ValueError(f"hash_method {hash_method!r} is not one of {', '.join(HASH_METHODS)}")
    entries = [{"host": s[0], "port": s[1], "shard": s[2] if len(s) > 2 else i}
               for i, s in enumerate(servers)]
    value = {"type": "DRAM_VALUE_STORE", "default_value_size_hint": value_size}
    if data_path:
        value["path"] = data_path
    return {
        "cache_ps": {
            "ps_type": transports.get(transport).ps_type,
            "max_batch_keys_size": max_keys_per_request,
            "num_threads": num_threads,
            "num_shards": len(entries),
            "servers": entries,
            "base_kv_config": {"capacity": capacity, "index": {"type": index_type},
                               "value": value},
        },
        "distributed_client": {"num_shards": len(entries), "hash_method": hash_method,
                               "max_keys_per_request": max_keys_per_request,
                               "servers": entries},
        "client": dict(entries[0]) if entries else {},
    }
