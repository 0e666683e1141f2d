"""recbench.PSClient: the parameter server as a Python library.

    from recbench import PSClient
    with PSClient("brpc://127.0.0.1:15000") as ps:            # value_size asked from the server
        ps.put(keys, rows)                                     # rows: (n, dim) float32
        rows = ps.get(keys)                                    # numpy (n, value_size // 4) float32
        ps.update(keys, deltas)                                # rows += deltas
        ps.stats()                                             # one dict per shard
        ps.save("monday"); ps.load("monday")                   # checkpoints in --checkpoint_root

A URI names the transport and one address per shard, in shard order:
``grpc://h:15000,h:15001``; IPv6 hosts go in brackets (``brpc://[::1]:15000``). Keys and rows
may be numpy arrays or any buffer; they are passed to C without per-key work in Python. A batch
may be of any size: the C client splits it per shard into requests of at most the server's
max_keys_per_request (and of what one RC request slot holds), sent together. Errors
are recbench.errors exceptions naming the shard, the server and the cause.

RecStore's wire (``recstore+grpc://`` / ``recstore+brpc://``, docs/recstore-wire.md) routes keys
as RecStore's clients do: ``hash_method="city_hash"`` (the default, CityHash64 of the key's 8
little-endian bytes mod shards) or ``"simple_mod"`` (key mod shards). recbench's native wire
routes by ``rs_mix64`` only. The method a RecStore config names (``distributed_client.hash_method``)
is ``recbench.ps_config.load_config(path).hash_method``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from recbench import _ps, errors, records
from recbench.cli_flags import parse_inflight_budget, tls_options


def parse_uri(uri: str) -> tuple[str, list[tuple[str, int]]]:
    """'brpc://h:1,h:2' -> ('brpc', [('h', 1), ('h', 2)]); ValueError naming the bad part."""
    if not isinstance(uri, str) or "://" not in uri:
        raise ValueError(f"PS uri {uri!r} must look like brpc://host:port[,host:port...]")
    transport, rest = uri.split("://", 1)
    transport = transport.lower()
    if not transport:
        raise ValueError(f"PS uri {uri!r} names no transport")
    endpoints = []
    for part in rest.split(","):
        part = part.strip()
        if part.startswith("["):
            host, _, port = part[1:].partition("]:")
        else:
            host, _, port = part.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"PS uri {uri!r}: {part!r} is not host:port")
        endpoints.append((host, int(port)))
    return transport, endpoints


def _keys(keys) -> object:
    """Keys as a contiguous 1-D 64-bit integer buffer (vectorised checks, no per-key Python)."""
    if isinstance(keys, (bytes, bytearray, memoryview)):
        return keys
    arr = keys if isinstance(keys, np.ndarray) else np.asarray(keys)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.ndim != 1:
        raise ValueError(f"keys must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"keys must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and (arr < 0).any():
        raise ValueError("keys must be non-negative (uint64)")
    if arr.dtype in (np.uint64, np.int64) and arr.flags.c_contiguous:
        return arr
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _rows(rows, n: int, dim: int, what: str):
    if isinstance(rows, np.ndarray):
        if rows.dtype != np.float32 or not rows.flags.c_contiguous:
            rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.size != n * dim:
            raise ValueError(f"{what}: {rows.size} floats for {n} keys of {dim} floats "
                             f"(expected shape ({n}, {dim}))")
        return rows
    if isinstance(rows, (bytes, bytearray, memoryview)):
        return rows
    return _rows(np.asarray(rows, dtype=np.float32), n, dim, what)


def _ckpt_dir(directory) -> str:
    d = str(directory)
    if not d or "\0" in d or "\n" in d:
        raise ValueError(f"checkpoint directory {directory!r} must be a non-empty path")
    return d


def parse_stats(reply: str) -> dict:
    """'shard=0 keys=10 index_type=X' -> {'shard': 0, 'keys': 10, 'index_type': 'X'}."""
    return {k: int(v) if v.isdigit() else v for k, v in records.parse_kv(reply).items()}


class PSClient:
    """A client of every shard of one PS deployment (see the module docstring)."""

    def __init__(self, uri: str, value_size: int | None = None, *, prefetch_depth: int = 1,
                 timeout_ms: int = 10000, transport_options: str | None = None,
                 auth_token_file: str | None = None, tls_ca: str | None = None,
                 hash_method: str | None = None, max_inflight_bytes: int | str = 0):
        """auth_token_file: send the deployment token read from that file (servers started
        with --auth_token_file require it); the token itself is never an argument.
        tls_ca: grpc only, connect with TLS trusting these PEM root certificates.
        hash_method: shard routing, None = the wire's own (native: rs_mix64; recstore+...:
        city_hash); "simple_mod" on RecStore's wire. A method the wire cannot use (a RecStore
        method on the native wire, rs_mix64 on RecStore's) raises InvalidArgument.
        max_inflight_bytes: the budget of request bytes (keys + rows) that all the PS clients of
        this process with batches in flight share equally; a request past this client's share
        waits for its earlier ones. Bytes or "8M"-style text; 0 = the transport's default
        (`recbench._ps.default_inflight_bytes(transport)`: 4 MiB per CPU on brpc, 8 MiB on grpc,
        none on shm and rdma), "none" = no budget (docs/scale.md)."""
        transport, endpoints = parse_uri(uri)
        if tls_ca:
            transport_options = ";".join(
                x for x in (transport_options, tls_options(transport, {"tls_ca": tls_ca})) if x)
        self.uri = uri
        self.transport = transport
        try:
            budget = parse_inflight_budget(str(max_inflight_bytes))
        except argparse.ArgumentTypeError as e:
            raise errors.InvalidArgument(f"max_inflight_bytes: {e}") from None
        self._c = _ps.Client(transport, endpoints, value_size or 0, prefetch_depth, timeout_ms,
                             transport_options, auth_token_file, hash_method, budget)
        self.hash_method = hash_method or ("city_hash" if transport.startswith("recstore+")
                                           else "rs_mix64")

    @property
    def value_size(self) -> int:
        return self._c.value_size

    @property
    def dim(self) -> int:
        return self._c.value_size // 4

    @property
    def num_shards(self) -> int:
        return self._c.num_shards

    def get(self, keys) -> np.ndarray:
        """Rows of keys in order, shape (len(keys), value_size // 4); missing keys are zeros."""
        keys = _keys(keys)
        n = len(memoryview(keys).cast("B")) // 8
        out = np.empty((n, self.dim), dtype=np.float32)
        self._c.get(keys, out)
        return out

    def put(self, keys, rows) -> None:
        """Store rows (n x value_size//4 float32, or n*value_size bytes) under keys."""
        keys = _keys(keys)
        n = len(memoryview(keys).cast("B")) // 8
        self._c.put(keys, _rows(rows, n, self.dim, "put"))

    def update(self, keys, deltas) -> None:
        """Add float32 deltas element-wise to the rows of keys (missing rows start at zero)."""
        keys = _keys(keys)
        n = len(memoryview(keys).cast("B")) // 8
        self._c.update(keys, _rows(deltas, n, self.dim, "update"))

    def command(self, name: str, shard: int = 0) -> str:
        """Send a COMMAND (ping, ready, stats, clear, save DIR, load DIR) to one shard; returns
        its reply text."""
        return self._c.command(name, shard)

    def stats(self) -> list[dict]:
        """The 'stats' counters of every shard, in shard order."""
        return [parse_stats(self._c.command("stats", s)) for s in range(self.num_shards)]

    def clear(self) -> None:
        """Remove every key on every shard."""
        for s in range(self.num_shards):
            self._c.command("clear", s)

    def verify(self) -> list[str]:
        """Every shard's full consistency check of its engine (writers wait meanwhile); one
        'ok ...' line per shard, or ServerError naming the first problem."""
        return [self._c.command("verify", s) for s in range(self.num_shards)]

    def save(self, directory: str, timeout_s: float = 600.0,
             shards: list[int] | None = None) -> list[str]:
        """Checkpoint every shard into `directory` on its server (shard_<id>.rsckpt each; a path
        inside the server's --checkpoint_root, relative to it or absolute under it; see
        docs/durability.md) while serving continues. Waits for every shard; returns each shard's
        summary line (for `shards` only, if given). ServerError naming the shard, file and cause
        if one fails."""
        return self._checkpoint("save", directory, timeout_s, shards)

    def load(self, directory: str, timeout_s: float = 600.0,
             shards: list[int] | None = None) -> list[str]:
        """Replace every shard's rows with its checkpoint in `directory` on its server. A shard
        whose file is damaged, truncated or from another shard layout refuses (ServerError naming
        the file and offset) and keeps its rows; other shards still load. Returns each shard's
        summary line (for `shards` only, if given)."""
        return self._checkpoint("load", directory, timeout_s, shards)

    def _checkpoint(self, op: str, directory, timeout_s: float,
                    shards: list[int] | None) -> list[str]:
        d = _ckpt_dir(directory)
        wanted = list(range(self.num_shards)) if shards is None else list(shards)
        for s in wanted:
            if not 0 <= s < self.num_shards:
                raise ValueError(f"shard {s} is out of range for {self.num_shards} shards")
            self._c.command(f"{op} {d}", s)
        results: dict[int, str] = {}
        failures: dict[int, str] = {}
        deadline = time.monotonic() + timeout_s
        while True:
            for s in wanted:
                if s in results or s in failures:
                    continue
                st = self._c.command("checkpoint_status", s)
                if st.startswith("done: "):
                    results[s] = st[len("done: "):]
                elif st.startswith("failed: "):
                    failures[s] = st[len("failed: "):]
                elif not st.startswith("running: "):
                    failures[s] = f"shard {s}: checkpoint {op} ended unexpectedly ({st})"
            if len(results) + len(failures) == len(wanted):
                break
            if time.monotonic() > deadline:
                raise errors.Timeout(f"PSClient.{op}: not finished after {timeout_s} s")
            time.sleep(0.01)  # the job runs on the server; its status is polled
        if failures:
            raise errors.ServerError(f"PSClient.{op} {d}: " + "; ".join(failures.values()))
        return [results[s] for s in wanted]

    def close(self) -> None:
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self._c.closed else f"value_size={self.value_size}"
        return f"PSClient({self.uri!r}, {state})"
