"""The tcp_congestion transport option of the brpc and gRPC servers and clients, end to end.

A real `ps_server` on loopback reports its listener's congestion control in its ready line (the
connections it accepts inherit it); the client runs in this process, so its connections are read
back from this process's own sockets (getsockopt TCP_CONGESTION). The rule of auto on BBR sockets
is checked in C (test_tcp_congestion.c), where a socket can be given BBR without touching the
host's setting.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import unittest

import numpy as np
from ps_testlib import (
    NoLeftoverServers,
    PSServerProcess,
    loopback_congestion,
    require_transport,
    rows_for,
)

import recbench
from recbench import errors, procfs
from recbench.launch import python_env

TRANSPORTS = ("brpc", "grpc")


def system_default() -> str:
    return procfs.tcp_congestion_control() or "?"


def client_congestion(port: int) -> list[str]:
    """The congestion control of every TCP connection of this process whose peer port is port."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                peer = s.getpeername()
            except OSError:
                continue
            if peer[1] == port:
                raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
                names.append(raw.split(b"\0", 1)[0].decode())
        finally:
            s.close()
    return names


class TestTcpCongestion(NoLeftoverServers, unittest.TestCase):
    def test_named_congestion_control_on_both_ends(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                require_transport(self, t)
                with PSServerProcess(t, extra_args=["--transport_options",
                                                    "tcp_congestion=reno"]) as srv:
                    self.assertEqual(srv.ready_lines[0]["tcp_congestion"], "reno")
                    with recbench.PSClient(srv.uri, transport_options="tcp_congestion=reno") as ps:
                        keys = np.arange(1, 101, dtype=np.uint64)
                        ps.put(keys, rows_for(keys, 16))
                        np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
                        names = client_congestion(srv.ports[0])
                        self.assertTrue(names)
                        self.assertEqual(set(names), {"reno"})

    def test_auto_never_leaves_bbr_on_loopback(self):
        # auto (the default): BBR becomes cubic on loopback; any other default stays
        want = loopback_congestion()
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                require_transport(self, t)
                with PSServerProcess(t) as srv:
                    self.assertEqual(srv.ready_lines[0]["tcp_congestion"], want)
                    with recbench.PSClient(srv.uri) as ps:
                        ps.get(np.arange(1, 11, dtype=np.uint64))
                        self.assertEqual(set(client_congestion(srv.ports[0])), {want})
                # system: the kernel's choice, as before the option
                with PSServerProcess(t, extra_args=["--transport_options",
                                                    "tcp_congestion=system"]) as srv:
                    self.assertEqual(srv.ready_lines[0]["tcp_congestion"], system_default())
                    with recbench.PSClient(srv.uri, transport_options="tcp_congestion=system") as ps:
                        ps.get(np.arange(1, 11, dtype=np.uint64))
                        self.assertEqual(set(client_congestion(srv.ports[0])), {system_default()})

    def test_bad_values_are_refused_naming_the_option(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                require_transport(self, t)
                for bad, why in (("tcp_congestion=cu bic", "tcp_congestion=cu bic: expected auto"),
                                 ("tcp_congestion=no_such_cc",
                                  "tcp_congestion=no_such_cc: the kernel refused it")):
                    r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport",
                                        t, "--host", "127.0.0.1", "--port", "0",
                                        "--transport_options", bad],
                                       capture_output=True, text=True, timeout=60,
                                       env=python_env(), check=False)
                    self.assertNotEqual(r.returncode, 0)
                    self.assertIn(f"{t} server option {why}", r.stderr)
                with PSServerProcess(t) as srv:
                    with self.assertRaises(errors.InvalidArgument) as cm:
                        recbench.PSClient(srv.uri, transport_options="tcp_congestion=no_such_cc")
                    self.assertIn(f"{t} client option tcp_congestion=no_such_cc: the kernel "
                                  "refused it", str(cm.exception))
                    self.assertIn("may choose: ", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
