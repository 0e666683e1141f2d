"""A baidu_std parameter server written in Python (baidu_std_wire's encoder, not recbench's C), so
recbench's brpc client is tested against responses it never gets from recbench's own server:
messages compressed as a bRPC server set to compress its responses sends them (RpcMeta
compress_type 1 snappy, 2 gzip, 3 zlib), and RpcMeta's CRC32C (checksum_type/checksum_value,
with or without checksum_with_attachment), correct or deliberately wrong.

    python baidu_std_fixture_server.py --value_size 32 [--compress 0..3]
        [--rows_in message|attachment] [--checksum none|crc32c|crc32c_attachment|wrong|type2]

Serves recstore.PSService (Get, Put, Command ping/clear; stats is refused, as by a server
without it) and RecStore's recstoreps_brpc.ParameterService (GetParameter, PutParameter, Command
CLEAR_PS / LOAD_FAKE_DATA). --rows_in message puts GET rows in the message (PSResponse.rows,
GetParameterResponse.parameter_value), where compression applies; attachment puts them in the
response attachment. Prints "listening on 127.0.0.1:<port>" when ready; stops on SIGTERM."""

from __future__ import annotations

import argparse
import gzip
import signal
import socket
import struct
import sys
import threading
import zlib

import numpy as np
from baidu_std_wire import (
    brpc_crc32c,
    frame,
    lfield,
    parse_fields,
    read_frame,
    rpc_meta,
    snappy_literals,
    vfield,
)
from recstore_wire_py import decode_block, encode_block

NATIVE = b"recstore.PSService"
RECSTORE = b"recstoreps_brpc.ParameterService"


class Store:
    def __init__(self, value_size: int):
        self.vs = value_size
        self.rows: dict[int, bytes] = {}
        self.lock = threading.Lock()

    def native(self, method: bytes, msg: bytes, att: bytes) -> tuple[bytes, bytes, bool]:
        """(PSResponse, rows, rows may go in the attachment)"""
        f = parse_fields(msg)
        nkeys = f.get(6, [0])[0]
        keys_b = att[:nkeys * 8] if nkeys else f.get(3, [b""])[0]
        keys = struct.unpack(f"<{len(keys_b) // 8}Q", keys_b)
        vs = vfield(3, self.vs)
        if method == b"Get":
            with self.lock:
                got = [self.rows.get(k) for k in keys]
            rows = b"".join(r if r is not None else bytes(self.vs) for r in got)
            return vs + vfield(6, sum(r is not None for r in got)), rows, True
        if method == b"Put":
            rows = att[nkeys * 8:] if nkeys else f.get(4, [b""])[0]
            with self.lock:
                for i, k in enumerate(keys):
                    self.rows[k] = rows[i * self.vs:(i + 1) * self.vs]
            return vs, b"", False
        cmd = f.get(5, [b""])[0]
        if cmd == b"ping":
            return vs + lfield(5, b"pong"), b"", False
        if cmd == b"clear":
            with self.lock:
                self.rows.clear()
            return vs + lfield(5, b"ok"), b"", False
        return vfield(1, 5) + lfield(2, b"unknown command " + cmd), b"", False

    def recstore(self, method: bytes, msg: bytes, att: bytes) -> tuple[bytes, bytes, bool]:
        """(response message without the block, block, block may go in the attachment)"""
        f = parse_fields(msg)
        if method == b"GetParameter":
            keys_b = att or f.get(1, [b""])[0]
            keys = struct.unpack(f"<{len(keys_b) // 8}Q", keys_b)
            with self.lock:
                got = [self.rows.get(k) for k in keys]
            items = [(k, None if r is None else np.frombuffer(r, "<f4")) for k, r in zip(keys, got)]
            return b"", encode_block(items), True
        if method == b"PutParameter":
            with self.lock:
                for k, row in decode_block(att or f.get(2, [b""])[0]):
                    self.rows[k] = np.asarray(row, "<f4").tobytes()
            return b"", b"", False
        command = f.get(1, [0])[0]
        if command == 0:  # CLEAR_PS
            with self.lock:
                self.rows.clear()
            return b"", b"", False
        n = struct.unpack("<q", f[2][0])[0] if command == 2 else 0  # LOAD_FAKE_DATA
        return lfield(1, b"\xab" * n), b"", False


def compress(ctype: int, msg: bytes) -> bytes:
    if ctype == 1:
        return snappy_literals(msg)
    if ctype == 2:
        return gzip.compress(msg)
    if ctype == 3:
        return zlib.compress(msg)
    return msg


def respond(args, store: Store, meta: bytes, rest: bytes) -> bytes:
    f = parse_fields(meta)
    req = parse_fields(f[1][0])
    svc, method = req.get(1, [b""])[0], req.get(2, [b""])[0]
    cid = f.get(4, [0])[0]
    att_len = f.get(5, [0])[0]
    msg, att = rest[:len(rest) - att_len], rest[len(rest) - att_len:]
    if svc == NATIVE:
        head, rows, movable = store.native(method, msg, att)
        field, rows_len = 4, vfield(7, len(rows))
    elif svc == RECSTORE:
        head, rows, movable = store.recstore(method, msg, att)
        field, rows_len = 1, b""
    else:
        return frame(rpc_meta(cid, error=(1001, b"unknown service " + svc)))
    if movable and args.rows_in == "attachment":
        out_msg, out_att = head + rows_len, rows
    else:
        out_msg, out_att = head + (lfield(field, rows) if rows or movable else b""), b""
    out_msg = compress(args.compress, out_msg)
    checksum = None
    if args.checksum != "none":
        with_att = args.checksum == "crc32c_attachment"
        value = brpc_crc32c(out_msg, out_att, with_att)
        if args.checksum == "wrong":
            value = bytes([value[0] ^ 0x80]) + value[1:]
        checksum = (2 if args.checksum == "type2" else 1, value, with_att)
    return frame(rpc_meta(cid, len(out_att), error=None, compress_type=args.compress,
                          checksum=checksum), out_msg, out_att)


def serve_conn(args, store: Store, conn: socket.socket) -> None:
    with conn:
        while True:
            try:
                meta, rest = read_frame(conn)
            except (ConnectionError, OSError):
                return
            conn.sendall(respond(args, store, meta, rest))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--value_size", type=int, required=True)
    ap.add_argument("--compress", type=int, choices=(0, 1, 2, 3), default=0)
    ap.add_argument("--rows_in", choices=("message", "attachment"), default="message")
    ap.add_argument("--checksum", default="none",
                    choices=("none", "crc32c", "crc32c_attachment", "wrong", "type2"))
    args = ap.parse_args()
    store = Store(args.value_size)
    lsock = socket.create_server(("127.0.0.1", args.port))
    signal.signal(signal.SIGTERM, lambda *_: (lsock.close(), sys.exit(0)))
    print(f"listening on 127.0.0.1:{lsock.getsockname()[1]}", flush=True)
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return 0
        threading.Thread(target=serve_conn, args=(args, store, conn), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
