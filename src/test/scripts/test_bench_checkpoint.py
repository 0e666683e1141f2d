"""tools/benchmarks/bench_checkpoint.py runs end to end on a small shard: dd, save, load and the
GET windows are reported, the JSON holds every repeat, and nothing is left in the directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


class BenchCheckpoint(unittest.TestCase):
    def test_small_run(self):
        tmp = tempfile.mkdtemp(prefix="rs_ckbench_test_")
        try:
            out = os.path.join(tmp, "r.json")
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            p = subprocess.run([sys.executable, str(REPO / "tools/benchmarks/bench_checkpoint.py"),
                                "--records", "5000", "--repeats", "1", "--dir", tmp,
                                "--json", out], capture_output=True, text=True, env=env,
                               timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            for words in ("dd write (fdatasync)", "% of dd write", "load into an empty shard (one pass)",
                          "reload of the full shard", "% of the faster dd read",
                          "GET during save", "GET during load"):
                self.assertIn(words, p.stdout)
            res = json.loads(Path(out).read_text())
            rep = res["result"]["repeats"][0]
            self.assertEqual(rep["file_bytes"], 4096 + 32 + 5000 * (8 + 512) + 3 * 32)
            self.assertGreater(rep["save_s"], 0)
            self.assertGreater(rep["load_empty_s"], 0)
            self.assertGreater(rep["load_read_verify_s"], 0)
            self.assertEqual(sorted(os.listdir(tmp)), ["r.json"])  # its scratch dir is gone
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
