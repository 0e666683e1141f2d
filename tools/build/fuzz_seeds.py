"""Seed inputs for the libFuzzer targets (csrc/fuzz/), written by `python3 tools/build/fuzz.py seeds`
into csrc/fuzz/corpus/<target>/seed-<name> (committed).

Each seed is a well-formed message in the input layout its target documents, so fuzzing starts
from inputs that reach deep into the parsers instead of failing at the first byte. The protobuf
encodings are spelled out by hand here (a few varints), independent of the C encoders they test.
"""

from __future__ import annotations

import struct
from pathlib import Path

VS = 16  # value_size the fuzz targets' shard uses


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


def keys(*ks: int) -> bytes:
    return b"".join(struct.pack("<Q", k) for k in ks)


def rows(n: int) -> bytes:
    return b"".join(struct.pack("<4f", i, i + 0.5, -i, 2.0) for i in range(n))


# ---- PS payload codec: kind u8 | attachment length u16 LE | message | attachment --------------

def codec_input(kind: int, msg: bytes, att: bytes = b"") -> bytes:
    return bytes([kind]) + struct.pack("<H", len(att)) + msg + att


def codec_seeds() -> dict[str, bytes]:
    get, put, update, command, response = 0, 1, 2, 3, 4
    return {
        "get-inline": codec_input(get, vfield(1, 1) + vfield(2, VS) + lfield(3, keys(1, 2, 3))),
        "get-attach": codec_input(get, vfield(2, VS) + vfield(6, 2), keys(5, 9)),
        "put-inline": codec_input(put, vfield(2, VS) + lfield(3, keys(4, 8)) + lfield(4, rows(2))),
        "put-attach": codec_input(put, vfield(2, VS) + vfield(6, 2) + vfield(7, 2 * VS),
                                  keys(4, 8) + rows(2)),
        "update-attach": codec_input(update, vfield(1, 0) + vfield(2, VS) + vfield(6, 1) +
                                     vfield(7, VS), keys(4) + rows(1)),
        "command-stats": codec_input(command, lfield(5, b"stats")),
        "unknown-fields": codec_input(get, vfield(9, 3) + lfield(10, b"xyz") + b"\x5d" + b"\0" * 4 +
                                      b"\x59" + b"\0" * 8 + lfield(3, keys(7))),
        "response-inline": codec_input(response, vfield(3, VS) + vfield(6, 2) + lfield(4, rows(2))),
        "response-attach": codec_input(response, vfield(3, VS) + vfield(6, 1) + vfield(7, VS),
                                       rows(1)),
        "response-error": codec_input(response, vfield(1, 3) + lfield(2, b"batch too large: 999 keys")),
        "response-negative-status": codec_input(response, vfield(1, -1)),
        "response-reply": codec_input(response, lfield(5, b'{"handled_get": 3}')),
    }


# ---- baidu_std frames -----------------------------------------------------------------------

def rpc_meta(cid: int, att: int = 0, service: bytes | None = b"recstore.PSService",
             method: bytes | None = None, error: tuple[int, bytes] | None = None) -> bytes:
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


def request_frame(cid: int, method: bytes, msg: bytes, att: bytes = b"",
                  service: bytes = b"recstore.PSService") -> bytes:
    return frame(rpc_meta(cid, len(att), service=service, method=method), msg, att)


def server_seeds() -> dict[str, bytes]:
    # the shard is shard 0 of 2: keys whose rs_mix64 lands elsewhere get "wrong shard", also useful
    put = request_frame(1, b"Put", vfield(2, VS) + vfield(6, 2) + vfield(7, 2 * VS),
                        keys(2, 3) + rows(2))
    get = request_frame(2, b"Get", vfield(2, VS) + vfield(6, 3), keys(2, 3, 4))
    upd = request_frame(3, b"Update", vfield(2, VS) + vfield(6, 1) + vfield(7, VS), keys(2) + rows(1))
    return {
        "put": put,
        "get": get,
        "update": upd,
        "pipeline": put + get + upd + get,
        "command-stats": request_frame(4, b"Command", lfield(5, b"stats")),
        "command-ping": request_frame(5, b"Command", lfield(5, b"ping")),
        "command-clear": request_frame(6, b"Command", lfield(5, b"clear")),
        "command-unknown": request_frame(7, b"Command", lfield(5, b"reboot")),
        "get-inline": request_frame(8, b"Get", vfield(2, VS) + lfield(3, keys(2, 3))),
        "get-no-value-size": request_frame(9, b"Get", vfield(6, 1), keys(11)),
        "put-wrong-size": request_frame(10, b"Put", vfield(2, 8) + vfield(6, 1) + vfield(7, 8),
                                        keys(2) + b"\0" * 8),
        "unknown-method": request_frame(11, b"Delete", b""),
        "unknown-service": request_frame(12, b"Get", b"", service=b"other.Service"),
        "partial-frame": get[:len(get) - 5],
        "header-only": get[:12],
    }


def client_seeds() -> dict[str, bytes]:
    # shape byte: (number of requests - 1) in the low 2 bits; then one byte per request:
    # op = d % 4 (Get, Put, Update, Command), num_keys = (d >> 2) % 9
    def d(op: int, n: int) -> int:
        return op | n << 2

    def resp(cid: int, msg: bytes, att: bytes = b"", error=None) -> bytes:
        return frame(rpc_meta(cid, len(att), error=error), msg, att)

    get1 = resp(1, vfield(3, VS) + vfield(6, 1) + vfield(7, VS), rows(1))
    return {
        "get-one": bytes([0, d(0, 1)]) + get1,
        "get-empty": bytes([0, d(0, 0)]) + resp(1, vfield(3, VS)),
        "put-ok": bytes([0, d(1, 2)]) + resp(1, vfield(3, VS)),
        "pipeline-reordered": bytes([2, d(0, 2), d(1, 1), d(3, 0)]) +
        resp(3, lfield(5, b"{}")) + resp(2, b"") +
        resp(1, vfield(3, VS) + vfield(6, 2) + vfield(7, 2 * VS), rows(2)),
        "rpc-error": bytes([1, d(0, 1), d(0, 1)]) +
        resp(1, b"", error=(1002, b"unknown method")) + resp(2, vfield(1, 3) + lfield(2, b"too big")),
        "unknown-cid": bytes([0, d(0, 1)]) + resp(77, b""),
        "truncated": bytes([0, d(0, 1)]) + get1[:-3],
    }


def all_seeds() -> dict[str, dict[str, bytes]]:
    return {"fuzz_ps_codec": codec_seeds(), "fuzz_brpc_server": server_seeds(),
            "fuzz_brpc_client": client_seeds()}


def write_all(corpus: Path) -> list[Path]:
    written = []
    for target, seeds in all_seeds().items():
        d = corpus / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            p = d / f"seed-{name}"
            p.write_bytes(data)
            written.append(p)
    return written
