"""Server limits on every host transport: connections at once (--max_connections, safe default),
running out of file descriptors, sizes read from the wire, and binding only the given address.

- brpc and rdma/shm accept at most max_connections connections (control connections for RC) and
  close the rest at once; grpc cannot enforce a count and refuses a non-zero value.
- A server whose process has no descriptor left sheds further connections (accepts and closes
  them through a reserved descriptor) instead of leaving them unanswered in the backlog, where
  the listening socket would stay readable and its threads spin.
- Sizes: a baidu_std body over --max_body_bytes, an RC control frame over its 64 KiB limit and a
  gRPC message over --max_body_bytes are refused before allocating; the server keeps serving.
- The server listens only on the address it was given: nothing on 0.0.0.0, and a connection to
  another loopback address (127.0.0.2) is refused.
"""

import os
import select
import socket
import struct
import subprocess
import sys
import unittest

import numpy as np
from fault_support import host_transports, wait_until
from ps_testlib import ROOT, NoLeftoverServers, PSServerProcess, python_env

import recbench
from recbench import errors

VS = 64


def closed_by_server(sock: socket.socket) -> bool:
    """True if the server closed this connection (EOF/reset is readable), without blocking."""
    r, _, _ = select.select([sock], [], [], 0)
    if not r:
        return False
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def listening_addresses(pid: int) -> set:
    """Local addresses of the TCP sockets the process listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for path, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(path) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] == "0A" and p[9] in inodes:  # LISTEN
                    addr_hex = p[1].split(":")[0]
                    if width == 8:
                        out.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr_hex)[::-1]))
                    else:
                        raw = b"".join(bytes.fromhex(addr_hex[i:i + 8])[::-1] for i in range(0, 32, 8))
                        a = socket.inet_ntop(socket.AF_INET6, raw)
                        out.add(a[7:] if a.startswith("::ffff:") and "." in a else a)  # v4-mapped
    return out


class MaxConnectionsTest(NoLeftoverServers, unittest.TestCase):
    def test_connections_over_the_limit_are_closed(self):
        for t in [t for t in host_transports() if t != "grpc"]:
            with self.subTest(transport=t), PSServerProcess(
                    t, value_size=VS, extra_args=["--max_connections", "3"]) as srv:
                client = recbench.PSClient(srv.uri, timeout_ms=5000)  # connection 1
                keys = np.arange(1, 11, dtype=np.uint64)
                client.put(keys, np.ones((10, VS // 4), np.float32))
                held = [socket.create_connection(("127.0.0.1", srv.ports[0])) for _ in range(2)]
                extra = socket.create_connection(("127.0.0.1", srv.ports[0]))
                try:
                    wait_until(lambda s=extra: closed_by_server(s), 10,
                               "the server to close the connection over max_connections")
                    self.assertFalse(any(closed_by_server(s) for s in held))
                    np.testing.assert_array_equal(client.get(keys),
                                                  np.ones((10, VS // 4), np.float32))
                finally:
                    extra.close()
                    for s in held:
                        s.close()
                client.close()

    def test_grpc_refuses_a_limit_it_cannot_enforce(self):
        if "grpc" not in host_transports():
            self.skipTest("grpc is not part of this build")
        r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport", "grpc",
                            "--port", "0", "--max_connections", "3"], capture_output=True,
                           text=True, timeout=60, env=python_env(), cwd=str(ROOT))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("max_connections", r.stderr)

    def test_negative_limit_is_a_flag_error(self):
        r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--port", "0",
                            "--max_connections", "-1"], capture_output=True, text=True,
                           timeout=60, env=python_env(), cwd=str(ROOT))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--max_connections", r.stderr)


class OutOfDescriptorsTest(NoLeftoverServers, unittest.TestCase):
    def test_connections_beyond_the_fd_limit_are_shed_not_left_pending(self):
        for t in [t for t in host_transports() if t != "grpc"]:
            with self.subTest(transport=t):
                srv = PSServerProcess(t, value_size=VS)
                srv.args = ["prlimit", "--nofile=64:64", "--"] + srv.args  # exec: same PID
                with srv:
                    baseline = open_descriptors(srv.pid)
                    socks = []
                    try:
                        for _ in range(100):
                            socks.append(socket.create_connection(("127.0.0.1", srv.ports[0]),
                                                                  timeout=5))
                        # at most ~55 fit in 64 descriptors; every other one must be closed, not
                        # left waiting in the backlog with the listening socket readable
                        wait_until(lambda ss=socks: sum(closed_by_server(s) for s in ss) >= 100 - 56,
                                   20, "the server to shed connections beyond its descriptor limit")
                    finally:
                        for s in socks:
                            s.close()
                    # the server frees its descriptors as it notices the closes; a client that
                    # connects before that is shed too, which is the behaviour under test
                    wait_until(lambda s=srv, b=baseline: open_descriptors(s.pid) <= b, 20,
                               "the server to close the connections the test closed")
                    with recbench.PSClient(srv.uri, timeout_ms=5000) as c:
                        keys = np.arange(1, 4, dtype=np.uint64)
                        c.put(keys, np.ones((3, VS // 4), np.float32))
                        self.assertEqual(c.get(keys).shape, (3, VS // 4))
                    srv.stop()
                    self.assertEqual(srv.returncode, 0)


class WireSizeLimitTest(NoLeftoverServers, unittest.TestCase):
    def test_rc_control_frame_over_the_limit_is_refused(self):
        if "shm" not in host_transports():
            self.skipTest("shm is not part of this build")
        with PSServerProcess("shm", value_size=VS) as srv:
            with socket.create_connection(("127.0.0.1", srv.ports[0]), timeout=10) as s:
                # ATTACH_REQ claiming a 1 GiB body: refused from the header alone
                s.sendall(struct.pack("<IHHII", 0x52444D41, 1, 3, 1 << 30, 0))
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.assertIn(b"exceeds", data)  # the error frame says why, then it closes
            with recbench.PSClient(srv.uri, timeout_ms=5000) as c:
                self.assertEqual(c.get(np.arange(2, dtype=np.uint64)).shape, (2, VS // 4))

    def test_brpc_default_body_limit_is_the_exported_one(self):
        """Without --max_body_bytes a server refuses a body one byte over
        recbench._ps.DEFAULT_MAX_BODY_BYTES (transport.h's RS_PS_DEFAULT_MAX_BODY_BYTES), from the
        header alone, and keeps serving."""
        from recbench import _ps
        self.assertEqual(_ps.DEFAULT_MAX_BODY_BYTES, 64 << 20)  # the documented default
        self.assertEqual(_ps.DEFAULT_TIMEOUT_MS, 10000)
        self.assertEqual(_ps.MAX_REPLY_BYTES, 2**31 - 1)
        self.assertEqual(_ps.DEFAULT_MAX_CONNECTIONS, 1024)
        with PSServerProcess("brpc", value_size=VS) as srv:
            with socket.create_connection(("127.0.0.1", srv.ports[0]), timeout=10) as s:
                s.sendall(b"PRPC" + struct.pack(">II", _ps.DEFAULT_MAX_BODY_BYTES + 1, 16))
                self.assertEqual(s.recv(1), b"")  # closed, nothing allocated or answered
            with recbench.PSClient(srv.uri, timeout_ms=5000) as c:
                self.assertEqual(c.get(np.arange(2, dtype=np.uint64)).shape, (2, VS // 4))

    def test_grpc_message_over_max_body_is_refused(self):
        if "grpc" not in host_transports():
            self.skipTest("grpc is not part of this build")
        with PSServerProcess("grpc", value_size=VS,
                             extra_args=["--max_body_bytes", "65536"]) as srv, \
                recbench.PSClient(srv.uri, timeout_ms=5000) as c:
                keys = np.arange(1, 2001, dtype=np.uint64)  # 16 KB keys + 128 KB rows
                with self.assertRaises(errors.RecbenchError) as cm:
                    c.put(keys, np.ones((2000, VS // 4), np.float32))
                self.assertRegex(str(cm.exception), r"(?i)RESOURCE_EXHAUSTED|larger than|max")
                c.put(keys[:100], np.ones((100, VS // 4), np.float32))  # still serving
                self.assertEqual(c.get(keys[:100]).sum(), 100 * (VS // 4))


class BindAddressTest(NoLeftoverServers, unittest.TestCase):
    def test_servers_listen_only_on_the_given_address(self):
        for t in host_transports():
            with self.subTest(transport=t), PSServerProcess(t, value_size=VS) as srv:
                addrs = listening_addresses(srv.pid)
                self.assertEqual(addrs, {"127.0.0.1"}, f"{t} listens on {addrs}")
                with self.assertRaises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.2", srv.ports[0]), timeout=5).close()


if __name__ == "__main__":
    unittest.main()
