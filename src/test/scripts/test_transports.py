"""recbench.transports, the one table of PS transports, and the programs that take names from it
(any spelling reaches the same transport; an unknown name is refused naming it)."""

import subprocess
import sys
import unittest

from recbench import transports
from recbench.launch import SOURCE_ROOT, python_env


class TestTable(unittest.TestCase):
    def test_any_case_one_transport(self):
        for spelling in ("grpc", "GRPC", " Grpc "):
            self.assertIs(transports.get(spelling), transports.TRANSPORTS["grpc"])
        self.assertEqual(transports.get("shm").ps_type, "LOCAL_SHM")
        self.assertIs(transports.by_ps_type("local_shm"), transports.get("SHM"))

    def test_parse_list(self):
        self.assertEqual([t.name for t in transports.parse_list("GRPC, brpc,,grpc,Shm")],
                         ["grpc", "brpc", "shm"])
        self.assertEqual(transports.parse_list(" , "), [])
        with self.assertRaisesRegex(transports.UnknownTransport, "unknown transport 'quic'"):
            transports.parse_list("grpc,quic")

    def test_capabilities(self):
        self.assertEqual(transports.RC_NAMES, ("rdma", "shm"))
        self.assertEqual(transports.RECSTORE_WIRE_NAMES, ("grpc", "brpc"))
        self.assertEqual(transports.default_port("BRPC", 1, 2), 25001)
        self.assertEqual(transports.default_port("grpc", 1, 2), 15001)


class TestPrograms(unittest.TestCase):
    def run_module(self, *argv):
        return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                              env=python_env(), cwd=str(SOURCE_ROOT), timeout=60,
                              stdin=subprocess.DEVNULL)

    def test_ps_server_refuses_an_unknown_transport_by_name(self):
        r = self.run_module("recbench.ps_server", "--transport", "quic", "--port", "0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown transport 'quic'", r.stderr)

    def test_ps_bench_takes_any_case(self):
        r = self.run_module("recbench.ps_bench", "--transport", "SHM", "--wire", "recstore",
                            "--no_barrier")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--wire recstore needs --transport brpc or grpc, not shm", r.stderr)


if __name__ == "__main__":
    unittest.main()
