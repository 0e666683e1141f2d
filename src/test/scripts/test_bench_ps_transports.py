"""tools/benchmarks/bench_ps_transports.py end to end on tiny settings: a real redis-server and
real PS servers and clients, every requested system reported (measured, or skipped with the
server's own reason), the JSON and the table agree. Speed is not judged here."""

import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from ps_testlib import ROOT, python_env


class BenchPsTransportsTest(unittest.TestCase):
    def test_redis_and_transports_are_measured_or_skipped_with_a_reason(self):
        if not shutil.which("redis-server"):
            self.skipTest("redis-server is not installed (make deps installs it)")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "ps.json")
            r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_ps_transports.py"),
                                "--transports", "brpc,rdma", "--record_count", "2000",
                                "--running_seconds", "0.2", "--idle_seconds", "0.1",
                                "--repeat", "1", "--output_json", str(out)],
                               capture_output=True, text=True, timeout=300, env=python_env(),
                               cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(out.read_text())
        runs = {x["system"]: x for x in doc["runs"]}
        self.assertEqual(sorted(runs), ["brpc", "rdma", "redis"])
        for name in ("redis", "brpc"):
            self.assertEqual(runs[name]["status"], "ok", runs[name])
            self.assertGreater(runs[name]["keys_s"], 0)
            self.assertEqual(runs[name]["key_ops"] % 500, 0)  # whole batches of 500 keys
        self.assertIsNotNone(runs["brpc"]["idle_cpu_s"])  # the idle server was measured
        if runs["rdma"]["status"] != "ok":
            self.assertEqual(runs["rdma"]["status"], "skipped")
            self.assertIn("RDMA", runs["rdma"]["reason"])
            self.assertIn("| rdma | skipped:", r.stdout)
        self.assertIn("| brpc |", r.stdout)
        self.assertIn("| redis |", r.stdout)


if __name__ == "__main__":
    unittest.main()
