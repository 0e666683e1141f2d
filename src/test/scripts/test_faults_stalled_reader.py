"""Fault tests: a client that keeps sending but never reads its socket.

brpc data connections:
The server must not let it block anyone else (each worker thread serves many connections) and
must not buffer an unbounded amount of responses for it: once a connection's unsent output
passes the server's limit (64 MiB) the server stops reading from that connection, so TCP flow
control pushes back on the sender. Meanwhile a normal client on the same worker thread gets
correct rows. The stalled connection asked for far more than the limit (~0.5 GB of rows).

RC (shm/rdma) control plane: one server thread answers every client's control connection. A
client that floods it with READY requests and never reads the replies must not hold that thread
(and so every other client's attach, and the retirement of dead clients' lanes): the server gives
such a peer a bounded send time and drops it.
"""

import select
import socket
import struct
import unittest

import numpy as np
from baidu_std_wire import request_frame, vfield
from fault_support import wait_until
from ps_testlib import PSServerProcess, require_transport, rows_for

import recbench
from recbench import procfs

VS = 512
BATCH = 500
OUT_LIMIT_MB = 64


def get_frame(cid: int, keys: np.ndarray) -> bytes:
    """A baidu_std GET request: RpcMeta, PSRequest {value_size, num_keys}, keys as attachment."""
    return request_frame(cid, b"Get", vfield(2, VS) + vfield(6, len(keys)),
                         keys.astype("<u8").tobytes())


class StalledReaderTest(unittest.TestCase):
    def setUp(self):
        require_transport(self, "brpc")

    def test_stalled_reader_is_bounded_and_blocks_no_one(self):
        # one worker thread: the stalled connection and the good client share it
        with PSServerProcess("brpc", value_size=VS, num_threads=1, capacity=10000,
                             max_keys_per_request=BATCH) as srv:
            good = recbench.PSClient(srv.uri, timeout_ms=5000)
            keys = np.arange(1, BATCH + 1, dtype=np.uint64)
            good.put(keys, rows_for(keys, VS // 4))
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
                    np.testing.assert_array_equal(good.get(keys), rows_for(keys, VS // 4))
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
            np.testing.assert_array_equal(good.get(keys), rows_for(keys, VS // 4))
            good.close()


def tcp_queues(local_port: int, remote_port: int):
    """(send queue, receive queue) bytes of the established loopback TCP socket local->remote,
    from /proc/net/tcp; None when there is no such socket (closed)."""
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            if int(p[1].split(":")[1], 16) == local_port and \
                    int(p[2].split(":")[1], 16) == remote_port and p[3] == "01":
                tx, rx = p[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


class StalledControlReaderTest(unittest.TestCase):
    def setUp(self):
        require_transport(self, "shm")

    def test_rc_control_plane_serves_others_while_one_peer_does_not_read(self):
        with PSServerProcess("shm", value_size=64) as srv:
            stalled = socket.create_connection(("127.0.0.1", srv.ports[0]))
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.setblocking(False)
            ready_req = struct.pack("<IHHII", 0x52444D41, 1, 1, 0, 0) * 256  # 256 READY_REQ frames
            port, mine = srv.ports[0], stalled.getsockname()[1]
            seen, pending = [], [b""]

            def flood_until_server_stops_reading():
                """Send what fits; True once the server's side of the flood stands still with
                requests unread (its control thread is stuck sending replies nobody reads) or
                the server dropped the connection."""
                try:
                    while True:  # whole frames only: the stream stays well-formed
                        if not pending[0]:
                            pending[0] = ready_req
                        pending[0] = pending[0][stalled.send(pending[0]):]
                except BlockingIOError:
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    return True
                q = tcp_queues(port, mine)
                seen.append(q)
                return q is None or (len(seen) > 10 and q[1] > 0 and seen[-11] == q)

            try:
                try:  # usually a few seconds; on a loaded machine go on after 20 s regardless
                    wait_until(flood_until_server_stops_reading, 20, "the server to stop reading "
                               "the flood", interval=0.05)
                except AssertionError:
                    pass
                # the control thread is not stuck for good: a new client attaches and is served
                with recbench.PSClient(srv.uri, timeout_ms=5000,
                                       transport_options="control_plane_timeout_ms=10000") as c:
                    keys = np.arange(1, 11, dtype=np.uint64)
                    c.put(keys, np.ones((10, 16), np.float32))
                    np.testing.assert_array_equal(c.get(keys), np.ones((10, 16), np.float32))
            finally:
                stalled.close()


if __name__ == "__main__":
    unittest.main()
