"""Seed inputs for the libFuzzer targets (csrc/fuzz/), written by `python3 tools/build/fuzz.py seeds`
into csrc/fuzz/corpus/<target>/seed-<name> (committed).

Each seed is a well-formed message in the input layout its target documents, so fuzzing starts
from inputs that reach deep into the parsers instead of failing at the first byte. The protobuf
encodings are spelled out by hand here (a few varints), independent of the C encoders they test.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src" / "test" / "scripts"))
from baidu_std_wire import frame, lfield, request_frame, rpc_meta, vfield

VS = 16  # value_size the fuzz targets' shard uses


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


# ---- RC slot protocol: mode u8 | request slot bytes (descriptor, payload) ----------------------

RC_MAGIC, RC_VERSION, RC_DESC = 0x52435053, 1, 192


def rc_desc(op: int, key_count: int, payload: bytes, msg_len: int, response_bytes: int = 4000,
            flags: int = 0, shard: int = 0, value_size: int = VS) -> bytes:
    # identity fields (client/qp ids, addresses, rkeys) and seq are filled in by the target
    d = struct.pack("<IHHQIIIIIIIIII", RC_MAGIC, RC_VERSION, op, 0, shard, 0, 0, key_count,
                    value_size, value_size // 4, RC_DESC, len(payload), response_bytes, msg_len)
    d += struct.pack("<QIIQII", 0, 0, 0, 0, flags, 0) + b"emb".ljust(64, b"\0")
    return d.ljust(RC_DESC, b"\0")


def rc_slot(mode: int, op: int, msg: bytes, att: bytes, key_count: int, **kw) -> bytes:
    payload = msg + att
    return bytes([mode]) + rc_desc(op, key_count, payload, len(msg), **kw) + payload


def rc_slot_seeds() -> dict[str, bytes]:
    get, put, update, command = 1, 2, 3, 4
    put_msg = vfield(2, VS) + vfield(6, 2) + vfield(7, 2 * VS)
    get_msg = vfield(2, VS) + vfield(6, 3)
    return {
        "put": rc_slot(0, put, put_msg, keys(2, 3) + rows(2), 2),
        "get": rc_slot(0, get, get_msg, keys(2, 3, 4), 3),
        "get-direct-sg": rc_slot(0, get, get_msg, keys(2, 3, 4), 3, flags=3),
        "get-direct-sg-no-fallback": rc_slot(0, get, get_msg, keys(2, 99, 4), 3, flags=1),
        "get-status-only": rc_slot(2, get, get_msg, keys(2, 3, 4), 3),
        "get-index-only": rc_slot(4, get, get_msg, keys(2, 3, 4), 3),
        "get-memset": rc_slot(6, get, get_msg, keys(2, 3, 4), 3),
        "update": rc_slot(0, update, vfield(2, VS) + vfield(6, 1) + vfield(7, VS), keys(2) + rows(1), 1),
        "command-stats": rc_slot(0, command, lfield(5, b"stats"), b"", 0),
        "command-small-room": rc_slot(0, command, lfield(5, b"stats"), b"", 0, response_bytes=16),
        "wrong-shard": rc_slot(0, get, get_msg, keys(2, 3, 4), 3, shard=5),
        "value-size-mismatch": rc_slot(0, get, get_msg, keys(2, 3, 4), 3, value_size=32),
        "get-too-many-for-room": rc_slot(0, get, get_msg, keys(2, 3, 4), 3, response_bytes=80),
        "fuzzed-identity": rc_slot(1, get, get_msg, keys(2, 3, 4), 3),
    }


# ---- RC control plane: kind u8 | body or frame stream ------------------------------------------

def ep_meta(addr: int, length: int, rkey: int, name: bytes) -> bytes:
    m = struct.pack("<QQIIIH", addr, length, rkey, 0x1234, 0x42, 7) + bytes([1, 2, 5, 3]) + b"\0\0"
    m += bytes(range(16)) + name.ljust(64, b"\0")
    return m.ljust(128, b"\0")


def attach_req(qps: int) -> bytes:
    b = b"shm".ljust(16, b"\0") + struct.pack("<IIIII", qps, 2, 4096, 4096, 0)
    for q in range(qps):
        b += ep_meta(0x7f0000000000 + q * 16384, 16384, 0x1001 + q, b"/recbench-rc-1-%d-abcd" % q)
    return b


def attach_rep(status: int, qps: int) -> bytes:
    b = struct.pack("<i", status) + (b"" if status == 0 else b"bad geometry").ljust(256, b"\0")
    b += struct.pack("<IIIII", 3, 0, VS, 500, qps)
    for q in range(qps):
        b += ep_meta(0x7e0000000000 + q * 16384, 16384, 0x2001 + q, b"/recbench-rc-2-%d-ef01" % q)
    return b


def ctrl_frame(msg_type: int, body: bytes) -> bytes:
    return struct.pack("<IHHII", 0x52444D41, 1, msg_type, len(body), 0) + body


def rc_ctrl_seeds() -> dict[str, bytes]:
    return {
        "attach-req-1": bytes([0]) + attach_req(1),
        "attach-req-3": bytes([0]) + attach_req(3),
        "attach-rep-ok": bytes([1]) + attach_rep(0, 2),
        "attach-rep-error": bytes([1]) + attach_rep(-30001, 0),
        "stream": bytes([2]) + ctrl_frame(1, b"") + ctrl_frame(3, attach_req(2)) + ctrl_frame(5, b""),
        "stream-reply": bytes([2]) + ctrl_frame(2, struct.pack("<5I", 1, 0, VS, 500, 1)) +
        ctrl_frame(4, attach_rep(0, 1)),
        "stream-truncated": bytes([2]) + ctrl_frame(3, attach_req(1))[:100],
        "stream-oversized": bytes([2]) + struct.pack("<IHHII", 0x52444D41, 1, 3, 1 << 30, 0),
    }


# ---- gRPC messages: shape u8 (op, slices, compression) | PSRequest with inline keys/rows ---------

def gzip_bytes(data: bytes) -> bytes:
    import zlib

    c = zlib.compressobj(wbits=31)
    return c.compress(data) + c.flush()


def grpc_seeds() -> dict[str, bytes]:
    import zlib

    get, put, update, command = 0, 1, 2, 3
    put_msg = vfield(2, VS) + lfield(3, keys(2, 3)) + lfield(4, rows(2))
    get_msg = vfield(2, VS) + lfield(3, keys(2, 3, 4))
    return {
        "get": bytes([get]) + get_msg,
        "get-3-slices": bytes([get | 2 << 2]) + get_msg,
        "put": bytes([put]) + put_msg,
        "put-8-slices": bytes([put | 7 << 2]) + put_msg,
        "update": bytes([update]) + vfield(2, VS) + lfield(3, keys(2)) + lfield(4, rows(1)),
        "command": bytes([command]) + lfield(5, b"stats"),
        "empty-get": bytes([get]),
        "get-deflate": bytes([get | 32]) + zlib.compress(get_msg),
        "put-gzip": bytes([put | 32 | 64]) + gzip_bytes(put_msg),
    }


# ---- YCSB: property file | NUL | -p arguments, one per line --------------------------------------

def ycsb_seeds() -> dict[str, bytes]:
    root = Path(__file__).resolve().parents[2] / "recbench" / "workloads"
    small = b"recordcount=1000\noperationcount=100\nthreadcount=2"
    out = {}
    for w in sorted(root.glob("workload[a-f]")):
        out[w.name] = w.read_bytes() + b"\0" + small
    out["hotspot"] = (b"requestdistribution=hotspot\nhotspotdatafraction=0.2\n"
                      b"hotspotopnfraction=0.8\nreadproportion=1\n\0" + small)
    out["latest-inserts"] = (b"requestdistribution=latest\ninsertproportion=0.5\n"
                             b"readproportion=0.5\ninsertorder=ordered\nzeropadding=12\0" + small)
    out["scan-zipfian"] = (b"scanproportion=1\nmaxscanlength=50\nminscanlength=5\n"
                           b"scanlengthdistribution=zipfian\nfieldlengthdistribution=uniform\n"
                           b"minfieldlength=3\nfieldlength=40\0" + small)
    out["comments-colons"] = (b"# comment\n! also a comment\n\nrecordcount: 500\n"
                              b"  readproportion = 0.9 \nupdateproportion=0.1\n\0"
                              b"ycsb.batch=true\nycsb.batch_size=16\nmeasurementtype=hdrhistogram")
    out["bad-value"] = b"recordcount=ten\0"
    out["bad-arg"] = b"\0recordcount\nfieldcount=0"
    return out


# ---- runner plan strings (atheris: selector byte, then UTF-8-ish text) ---------------------------

def topology_seeds() -> dict[str, bytes]:
    plans = {
        "server-plan": "0:127.0.0.1:25000:0,1:user@10.0.0.2:25001:1",
        "server-plan-ipv6": "0:u@[::1]:25000:0,1:[fe80::1%eth0]:25001:1",
        "client-plan": "0:host-a,1:host-a,2:user@host-b",
        "simple-list": "10.0.0.1,10.0.0.2",
        "fabric": "0:mlx5_0:1:3:ib,1:mlx5_1:1:3:rocev2:64:0:0",
        "transports": "grpc,brpc,shm,rdma",
        "sparse": "1:10.0.0.1:25000:0",
    }
    return {k: bytes([0]) + v.encode() for k, v in plans.items()}


def all_seeds() -> dict[str, dict[str, bytes]]:
    return {"fuzz_ps_codec": codec_seeds(), "fuzz_brpc_server": server_seeds(),
            "fuzz_brpc_client": client_seeds(), "fuzz_rc_slot": rc_slot_seeds(),
            "fuzz_rc_ctrl": rc_ctrl_seeds(), "fuzz_grpc_message": grpc_seeds(),
            "fuzz_ycsb_props": ycsb_seeds(), "fuzz_topology": topology_seeds()}


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
