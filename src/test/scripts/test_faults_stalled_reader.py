"""Fault test: a brpc client that keeps sending requests but never reads its socket.

The server must not let it block anyone else (each worker thread serves many connections) and
must not buffer an unbounded amount of responses for it: once a connection's unsent output
passes the server's limit (64 MiB) the server stops reading from that connection, so TCP flow
control pushes back on the sender. Meanwhile a normal client on the same worker thread gets
correct rows. The stalled connection asked for far more than the limit (~0.5 GB of rows).
"""

import select
import socket
import struct
import unittest

import numpy as np

import recbench
from recbench import procfs
from fault_support import wait_until
from ps_testlib import PSServerProcess, require_transport

VS = 512
BATCH = 500
OUT_LIMIT_MB = 64


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _lfield(num, data):
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def get_frame(cid: int, keys: np.ndarray) -> bytes:
    """A baidu_std GET request: RpcMeta, PSRequest {value_size, num_keys}, keys as attachment."""
    att = keys.astype("<u8").tobytes()
    req = _lfield(1, b"recstore.PSService") + _lfield(2, b"Get")
    meta = _lfield(1, req) + _varint(4 << 3) + _varint(cid) + _varint(5 << 3) + _varint(len(att))
    msg = _varint(2 << 3) + _varint(VS) + _varint(6 << 3) + _varint(len(keys))
    body = meta + msg + att
    return b"PRPC" + struct.pack(">II", len(body), len(meta)) + body


def rows_for(keys):
    keys = np.asarray(keys, dtype=np.float32)
    return (keys[:, None] + np.arange(VS // 4, dtype=np.float32)[None, :]).astype(np.float32)


class StalledReaderTest(unittest.TestCase):
    def setUp(self):
        require_transport(self, "brpc")

    def test_stalled_reader_is_bounded_and_blocks_no_one(self):
        # one worker thread: the stalled connection and the good client share it
        with PSServerProcess("brpc", value_size=VS, num_threads=1, capacity=10000,
                             max_keys_per_request=BATCH) as srv:
            good = recbench.PSClient(srv.uri, timeout_ms=5000)
            keys = np.arange(1, BATCH + 1, dtype=np.uint64)
            good.put(keys, rows_for(keys))
            rss0 = procfs.rss_kb(srv.pid)
            stalled = socket.create_connection(("127.0.0.1", srv.ports[0]))
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.setblocking(False)
            frame = get_frame(1, keys)
            want = 2000  # 2000 x 256 KB of rows asked for = ~0.5 GB
            sent_frames, buf = 0, b""
            try:
                while sent_frames < want:
                    if not buf:
                        buf = frame
                    try:
                        n = stalled.send(buf)
                    except BlockingIOError:
                        # the server may be busy for a moment; 2 s without room = it stopped reading
                        if not select.select([], [stalled], [], 2.0)[1]:
                            break
                        continue
                    buf = buf[n:]
                    if not buf:
                        sent_frames += 1
                # the server stopped reading before we asked for everything: backpressure
                self.assertLess(sent_frames, want)
                for _ in range(20):  # the other client on the same worker thread is served
                    np.testing.assert_array_equal(good.get(keys), rows_for(keys))
                handled = good.stats()[0]["handled_get"]
                self.assertLess(handled, want)
                grown_mb = (procfs.rss_kb(srv.pid) - rss0) / 1024
                self.assertLess(grown_mb, OUT_LIMIT_MB + 64,
                                f"server RSS grew {grown_mb:.0f} MiB for one stalled reader")
                fds_with_stalled = procfs.open_fds(srv.pid)
            finally:
                stalled.close()
            wait_until(lambda: procfs.open_fds(srv.pid) < fds_with_stalled, 20,
                       "the server to drop the stalled connection once closed")
            np.testing.assert_array_equal(good.get(keys), rows_for(keys))
            good.close()


if __name__ == "__main__":
    unittest.main()
