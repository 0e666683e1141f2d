"""Fault test: a network cut between two test "hosts" made with Linux network namespaces.

Two namespaces created by the test, joined by a veth pair with the test's own addresses
(10.231.7.1 and 10.231.7.2, which exist only inside those namespaces): a ps_server in one, a
client in the other. Once the client is being served across the link, the link is cut (veth down
on the client's side); the client's next request must fail with a timeout naming the server
within its --timeout, and the server keeps running. Everything (processes, namespaces, veth) is
removed at the end, also on failure.

Needs root and iproute2 (`ip netns add`); skipped with the exact reason otherwise.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import unittest

from fault_support import host_transports
from ps_testlib import PSServerProcess, ROOT, python_env

NET = "10.231.7"

CLIENT = textwrap.dedent("""
    import sys, numpy as np, recbench
    from recbench import errors
    uri, timeout_ms = sys.argv[1], int(sys.argv[2])
    keys = np.arange(1, 101, dtype=np.uint64)
    rows = np.tile(np.arange(16, dtype=np.float32), (100, 1))
    try:
        with recbench.PSClient(uri, timeout_ms=timeout_ms) as c:
            n = 0
            while True:
                c.put(keys, rows)
                assert (c.get(keys) == rows).all()
                n += 1
                if n in (1, 10) or n % 100 == 0:
                    print("served", n, flush=True)
    except errors.RecbenchError as e:
        print(f"error {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
""")


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def _netns_unavailable() -> str | None:
    if not shutil.which("ip"):
        return "iproute2 ('ip') is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (this test runs as uid %d)" % os.geteuid()
    probe = f"rsprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"'ip netns add' failed here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class NetworkCutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = _netns_unavailable()
        if why:
            raise unittest.SkipTest(why)

    def setUp(self):
        tag = os.getpid() % 100000
        self.ns_client, self.ns_server = f"rscli{tag}", f"rssrv{tag}"
        self.veth_client, self.veth_server = f"rsc{tag}", f"rss{tag}"
        for ns in (self.ns_client, self.ns_server):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            self.addCleanup(subprocess.run, ["ip", "netns", "del", ns], capture_output=True)
        # the pair is created directly inside the two namespaces: the host's links are untouched
        _ip("link", "add", self.veth_client, "netns", self.ns_client, "type", "veth", "peer",
            "name", self.veth_server, "netns", self.ns_server)
        for ns, dev, addr in ((self.ns_client, self.veth_client, f"{NET}.1/24"),
                              (self.ns_server, self.veth_server, f"{NET}.2/24")):
            _ip("addr", "add", addr, "dev", dev, ns=ns)
            _ip("link", "set", dev, "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)

    def _server(self, transport):
        srv = PSServerProcess(transport, value_size=64, extra_args=["--host", f"{NET}.2"])
        srv.args = ["ip", "netns", "exec", self.ns_server] + srv.args  # exec keeps the PID
        srv.start()
        self.addCleanup(srv.stop)
        return srv

    def test_cut_link_times_out_naming_the_server(self):
        for transport in [t for t in host_transports() if t != "shm"]:  # shm is same-host only
            with self.subTest(transport=transport):
                srv = self._server(transport)
                uri = f"{transport}://{NET}.2:{srv.ports[0]}"
                client = subprocess.Popen(
                    ["ip", "netns", "exec", self.ns_client, sys.executable, "-c", CLIENT, uri,
                     "2000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env=python_env(), cwd=str(ROOT))
                try:
                    first = client.stdout.readline()
                    self.assertTrue(first.startswith("served"),
                                    f"client not served across the veth: {first!r} "
                                    f"{client.stderr.read() if client.poll() is not None else ''}")
                    for line in client.stdout:  # keep going until it has done real work
                        if line.startswith("served 10"):
                            break
                    _ip("link", "set", self.veth_client, "down", ns=self.ns_client)
                    out, err = client.communicate(timeout=30)  # its timeout is 2 s
                finally:
                    if client.poll() is None:
                        client.kill()
                        client.communicate()
                self.assertEqual(client.returncode, 3, out + err)
                last = out.strip().splitlines()[-1]
                self.assertRegex(last, r"^error (Timeout|ConnectionFailed): .*%s\.2:%d" %
                                 (NET.replace(".", r"\."), srv.ports[0]))
                self.assertIn("Timeout", last.split(":")[0])
                self.assertIsNone(srv.proc.poll(), "the server died with the link")
                _ip("link", "set", self.veth_client, "up", ns=self.ns_client)
                srv.stop()
                self.assertEqual(srv.returncode, 0)


if __name__ == "__main__":
    unittest.main()
