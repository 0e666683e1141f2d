"""RecStore's wire in plain Python, written from docs/recstore-wire.md and independent of
recbench's C code: the row block (ParameterCompressor layout) and grpcio stubs generated at test
time from the .proto files shipped in recbench/proto. Tests use it to call recbench's servers as a
RecStore client would, and to build the RecStore-semantics fixture server."""

from __future__ import annotations

import atexit
import importlib
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

PROTO_DIR = Path(__file__).resolve().parents[3] / "recbench" / "proto"
_stubs: dict[str, tuple] = {}


def stubs(name: str = "recstore_ps"):
    """(pb2, pb2_grpc) modules for recbench/proto/<name>.proto, generated once per process."""
    if name not in _stubs:
        from grpc_tools import protoc

        out = Path(tempfile.mkdtemp(prefix="rs_stubs_"))
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}",
                          f"--grpc_python_out={out}", str(PROTO_DIR / f"{name}.proto")])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {name}.proto (exit {rc})")
        sys.path.insert(0, str(out))
        _stubs[name] = (importlib.import_module(f"{name}_pb2"),
                        importlib.import_module(f"{name}_pb2_grpc"))
    return _stubs[name]


def encode_block(items) -> bytes:
    """items: iterable of (key, float32 row or None for a missing key) -> row block bytes."""
    ends, body, end = [], [], 0
    for key, row in items:
        vals = b"" if row is None else np.asarray(row, dtype="<f4").tobytes()
        item = struct.pack("<Qi", key, len(vals) // 4) + vals
        body.append(item)
        end += len(item)
        ends.append(end)
    return struct.pack(f"<i{len(ends)}i", len(ends), *ends) + b"".join(body)


def decode_block(data: bytes) -> list[tuple[int, np.ndarray | None]]:
    """Row block bytes -> [(key, row or None for dim 0)]; ValueError when offsets do not add up."""
    if len(data) < 4:
        raise ValueError(f"row block of {len(data)} bytes")
    (n,) = struct.unpack_from("<i", data, 0)
    ends = struct.unpack_from(f"<{n}i", data, 4)
    base = 4 + 4 * n
    if base + (ends[-1] if n else 0) != len(data):
        raise ValueError(f"row block: {n} items ending at {ends[-1] if n else 0} in {len(data)} B")
    out, start = [], 0
    for end in ends:
        key, dim = struct.unpack_from("<Qi", data, base + start)
        if 12 + 4 * dim != end - start:
            raise ValueError(f"row block: item at {base + start} has dim {dim}, spans {end - start}")
        row = np.frombuffer(data, dtype="<f4", count=dim, offset=base + start + 12) if dim else None
        out.append((key, row))
        start = end
    return out


def keys_bytes(keys) -> bytes:
    return np.asarray(keys, dtype="<u8").tobytes()


def adagrad_reference(kind: str, w, a, g, lr, eps):
    """One step of RecStore's AdaGrad / RowWiseAdaGrad in float32 (src/optimizer/optimizer.cpp):
    the new (w, a). a is the accumulator row (RowWiseAdaGrad uses a[0] only)."""
    w, a, g = (np.array(x, dtype=np.float32) for x in (w, a, g))
    lr, eps = np.float32(lr), np.float32(eps)
    if kind == "RowWiseAdaGrad":
        sq = np.float32(0)
        for x in g:                      # the server sums in index order, in float
            sq = np.float32(sq + x * x)
        a[0] = np.float32(a[0] + np.float32(sq / np.float32(len(g))))
        step = np.float32(lr / np.float32(np.sqrt(a[0]) + eps))
        return (w - step * g).astype(np.float32), a
    a = (a + g * g).astype(np.float32)
    return (w - (lr / (np.sqrt(a) + eps)).astype(np.float32) * g).astype(np.float32), a

