"""A minimal protobuf and baidu_std encoder for hand-made wire input: the brpc tests' raw frames
(test_ps_brpc.py, test_faults_stalled_reader.py) and the fuzz seeds (tools/build/fuzz_seeds.py).

A baidu_std frame is "PRPC", u32 body size, u32 meta size (big-endian), then the RpcMeta, the
message and the attachment."""

from __future__ import annotations

import struct


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def vfield(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def lfield(num: int, data: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(data)) + data


def rpc_meta(cid: int, att: int = 0, service: bytes | None = b"recstore.PSService",
             method: bytes | None = None, error: tuple[int, bytes] | None = None) -> bytes:
    """RpcMeta of a request (method given) or a response (error code and text, if any)."""
    m = b""
    if method is not None:
        req = (lfield(1, service) if service is not None else b"") + lfield(2, method)
        m += lfield(1, req)
    else:
        resp = b""
        if error:
            resp = vfield(1, error[0]) + lfield(2, error[1])
        m += lfield(2, resp)
    m += vfield(4, cid)
    if att:
        m += vfield(5, att)
    return m


def frame(meta: bytes, msg: bytes = b"", att: bytes = b"") -> bytes:
    body = meta + msg + att
    return b"PRPC" + struct.pack(">II", len(body), len(meta)) + body


def request_frame(cid: int, method: bytes, msg: bytes = b"", att: bytes = b"",
                  service: bytes = b"recstore.PSService") -> bytes:
    return frame(rpc_meta(cid, len(att), service=service, method=method), msg, att)
