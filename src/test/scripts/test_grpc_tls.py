"""gRPC over TLS through real processes, with a CA the test makes (openssl): a client trusting the
CA is served (PSClient and ps_bench); one trusting another CA, and a plain client, are refused; TLS
flags on another transport or a half-given pair are refused by name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from ps_testlib import PSServerProcess, python_env, require_transport

import recbench
from recbench import errors
from recbench.bench.tls_pki import make_test_pki


@unittest.skipIf(shutil.which("openssl") is None, "the openssl command is not installed")
class GrpcTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rs_tls_test_")
        cls.pki = make_test_pki(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tls_served_wrong_ca_and_plain_refused(self):
        require_transport(self, "grpc")
        with PSServerProcess("grpc", value_size=64, extra_args=[
                "--tls_cert", self.pki.cert, "--tls_key", self.pki.key]) as srv:
            with recbench.PSClient(srv.uri, tls_ca=self.pki.ca) as ps:
                keys = np.arange(1, 301, dtype=np.uint64)
                rows = np.full((300, 16), 2.5, np.float32)
                ps.put(keys, rows)
                np.testing.assert_array_equal(ps.get(keys), rows)
            for kw in ({"tls_ca": self.pki.other_ca}, {}):
                with self.assertRaises(errors.RecbenchError) as cm:
                    recbench.PSClient(srv.uri, timeout_ms=5000, **kw)
                self.assertIn(f"127.0.0.1:{srv.ports[0]}", str(cm.exception))
            bench = [sys.executable, "-m", "recbench.ps_bench", "--transport", "grpc", "--host",
                     "127.0.0.1", "--port", str(srv.ports[0]), "--value_size", "64",
                     "--record_count", "1000", "--batch_keys", "100", "--running_seconds", "0.3",
                     "--no_barrier", "--tls_ca", self.pki.ca]
            ok = subprocess.run(bench, capture_output=True, text=True, env=python_env(),
                                timeout=120)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("PS_BENCHMARK_RESULT phase=run", ok.stdout)

    def test_flags_refused_by_name(self):
        for flags, words in ((["--transport", "brpc", "--tls_cert", self.pki.cert, "--tls_key",
                               self.pki.key], "grpc transport only"),
                             (["--transport", "grpc", "--tls_cert", self.pki.cert],
                              "--tls_cert and --tls_key go together")):
            p = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--port", "0"] + flags,
                               capture_output=True, text=True, env=python_env(), timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(words, p.stderr)


if __name__ == "__main__":
    unittest.main()
