"""A minimal protobuf and baidu_std encoder for hand-made wire input: the brpc tests' raw frames
(test_ps_brpc.py, test_faults_stalled_reader.py) and the fuzz seeds (tools/build/fuzz_seeds.py).

A baidu_std frame is "PRPC", u32 body size, u32 meta size (big-endian), then the RpcMeta, the
message and the attachment. It also reads frames back (read_frame, parse_fields), calls a server
(BaiduStdClient, e.g. RecStore's recstoreps_brpc.ParameterService with keys and blocks in the
attachment) and writes a raw snappy block of literals (snappy_literals), so compressed requests
can be made without a snappy library. brpc_crc32c is bRPC's checksum_value (RpcMeta field 12):
the CRC-32C of the message as sent (then of the attachment when checksum_with_attachment, field
13, is set), masked as LevelDB masks stored CRCs, in 4 big-endian bytes."""

from __future__ import annotations

import socket
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


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """Standard CRC-32C (Castagnoli) of data, continuing crc (a previous result)."""
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _CRC32C_TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def brpc_crc32c(msg: bytes, att: bytes = b"", with_attachment: bool = False) -> bytes:
    """RpcMeta.checksum_value for checksum_type 1 (CRC32C), as bRPC computes it."""
    crc = crc32c(msg)
    if with_attachment:
        crc = crc32c(att, crc)
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return struct.pack(">I", masked)


def rpc_meta(cid: int, att: int = 0, service: bytes | None = b"recstore.PSService",
             method: bytes | None = None, error: tuple[int, bytes] | None = None,
             compress_type: int = 0, checksum: tuple[int, bytes, bool] | None = None,
             content_type: int = 0) -> bytes:
    """RpcMeta of a request (method given) or a response (error code and text, if any);
    checksum = (checksum_type, checksum_value, checksum_with_attachment)."""
    m = b""
    if method is not None:
        req = (lfield(1, service) if service is not None else b"") + lfield(2, method)
        m += lfield(1, req)
    else:
        resp = b""
        if error:
            resp = vfield(1, error[0]) + lfield(2, error[1])
        m += lfield(2, resp)
    if compress_type:
        m += vfield(3, compress_type)
    m += vfield(4, cid)
    if att:
        m += vfield(5, att)
    if content_type:
        m += vfield(10, content_type)
    if checksum:
        m += vfield(11, checksum[0]) + lfield(12, checksum[1])
        if checksum[2]:
            m += vfield(13, 1)
    return m


def frame(meta: bytes, msg: bytes = b"", att: bytes = b"") -> bytes:
    body = meta + msg + att
    return b"PRPC" + struct.pack(">II", len(body), len(meta)) + body


def request_frame(cid: int, method: bytes, msg: bytes = b"", att: bytes = b"",
                  service: bytes = b"recstore.PSService") -> bytes:
    return frame(rpc_meta(cid, len(att), service=service, method=method), msg, att)


def parse_fields(data: bytes) -> dict[int, list]:
    """Protobuf bytes -> {field number: [values]} (varints as int, length-delimited as bytes)."""
    out: dict[int, list] = {}
    i = 0

    def rd_varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    while i < len(data):
        tag = rd_varint()
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            val = rd_varint()
        elif wt == 2:
            n = rd_varint()
            val = data[i:i + n]
            i += n
        elif wt in (1, 5):
            w = 8 if wt == 1 else 4
            val = data[i:i + w]
            i += w
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(num, []).append(val)
    return out


def read_frame(sock: socket.socket) -> tuple[bytes, bytes]:
    """One frame from sock: (RpcMeta bytes, message + attachment bytes)."""
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    head = exact(12)
    if head[:4] != b"PRPC":
        raise ValueError(f"bad magic {head[:4]!r}")
    body_size, meta_size = struct.unpack(">II", head[4:])
    body = exact(body_size)
    return body[:meta_size], body[meta_size:]


class Reply:
    """A decoded response: error (code, text) from RpcResponseMeta, message, attachment."""

    def __init__(self, meta: bytes, rest: bytes):
        f = parse_fields(meta)
        resp = parse_fields(f.get(2, [b""])[0])
        self.error_code = resp.get(1, [0])[0]
        self.error_text = resp.get(2, [b""])[0].decode()
        self.correlation_id = f.get(4, [0])[0]
        self.compress_type = f.get(3, [0])[0]
        att = f.get(5, [0])[0]
        self.message = rest[:len(rest) - att]
        self.attachment = rest[len(rest) - att:]


class BaiduStdClient:
    """One baidu_std connection; call() sends a request and waits for its reply."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.cid = 0

    def call(self, service: str, method: str, message: bytes = b"", attachment: bytes = b"",
             compress_type: int = 0, checksum: tuple[int, bytes, bool] | None = None,
             content_type: int = 0) -> Reply:
        self.cid += 1
        meta = rpc_meta(self.cid, len(attachment), service=service.encode(),
                        method=method.encode(), compress_type=compress_type, checksum=checksum,
                        content_type=content_type)
        self.sock.sendall(frame(meta, message, attachment))
        reply = Reply(*read_frame(self.sock))
        if reply.correlation_id != self.cid:
            raise ValueError(f"reply for {reply.correlation_id}, expected {self.cid}")
        return reply

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def snappy_literals(data: bytes) -> bytes:
    """data as a valid raw snappy block made of literal elements only (no copies)."""
    out = bytearray(varint(len(data)))
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)
