"""The soak benchmark (tools/benchmarks/soak_ps.py -> recbench.bench.soak_ps), run briefly: verified
traffic with client churn and an injected client kill on brpc (and shm where built) ends with
zero errors, the servers back at their idle descriptors and no shm lanes left; bad flags are
refused."""

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from fault_support import host_transports
from ps_testlib import ROOT, python_env

SCRIPT = str(ROOT / "tools" / "benchmarks" / "soak_ps.py")


class SoakTest(unittest.TestCase):
    def test_short_soak_is_clean(self):
        names = [t for t in ("brpc", "shm") if t in host_transports()]
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "soak.json"
            r = subprocess.run([sys.executable, SCRIPT, "--minutes", "0.1", "--transports",
                                ",".join(names), "--kill-every", "2", "--sample-seconds", "1",
                                "--churn-seconds", "1", "--output", str(out)],
                               capture_output=True, text=True, timeout=180, env=python_env(),
                               cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + (out.read_text() if out.exists() else ""))
            results = {x["transport"]: x for x in json.loads(out.read_text())["results"]}
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("SOAK_RESULT")]
        self.assertEqual(len(lines), len(names))
        for name in names:
            res = results[name]
            self.assertEqual(res["status"], "ok", res)
            self.assertEqual(res["errors"], 0, res.get("error_samples"))
            self.assertGreater(res["requests"], 0)
            self.assertGreaterEqual(res["clients_opened"], 3)  # 2 steady + churned ones
            self.assertEqual(res["fds_idle_after"], res["fds_idle_before"])
            self.assertEqual(res["shm_maps_after"], [0, 0])
            self.assertTrue(res["samples"])
            self.assertTrue(res["server_final"][0].get("handled_get"))

    def test_bad_flags(self):
        for args in (["--minutes", "0"], ["--minutes", "1", "--transports", "carrier-pigeon"]):
            r = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True,
                               timeout=60, env=python_env(), cwd=str(ROOT))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("error", r.stderr)


if __name__ == "__main__":
    unittest.main()
