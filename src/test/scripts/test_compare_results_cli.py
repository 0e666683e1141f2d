"""tools/benchmarks/compare_results.py: exit codes (0 no regression, 1 regression, 2 bad input),
Markdown in both languages, compare.md/compare.csv in --out-dir."""

import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench.bench import compare_results

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "benchmarks" / "compare_results.py"
DATA = ROOT / "notebooks" / "data"


def run(*args):
    """The tool as a user runs it: a subprocess."""
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def run_inproc(*args):
    """The same entry point in this process (faster); returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = compare_results.main([str(a) for a in args])
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def slowed_copy(src, dst, transport="BRPC", phase="run", factor=0.5):
    """`src` (a PS summary.csv) with one transport's rates of one phase scaled by `factor`: a
    regression far outside any noise band, whatever the sample's own noise."""
    import csv

    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["transport"] == transport and r["phase"] == phase and r["key_ops_per_sec"]:
            for col in ("ops_per_sec", "key_ops_per_sec", "payload_gbps"):
                r[col] = f"{float(r[col]) * factor:.3f}"
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return dst


class CompareResultsCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_cmpcli_"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_same_run_exits_0(self):
        r = run(DATA / "ps_baseline_summary.csv", DATA / "ps_baseline_summary.csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("No regression beyond the noise band", r.stdout)

    def test_regression_exits_1_and_writes_files(self):
        slow = slowed_copy(DATA / "ps_baseline_summary.csv", self.tmp / "slow.csv")
        r = run(DATA / "ps_baseline_summary.csv", slow, "--out-dir", self.tmp)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("## Regressions", r.stdout)
        self.assertIn("| BRPC run | key_ops_per_sec |", r.stdout)
        md = (self.tmp / "compare.md").read_text()
        self.assertEqual(md, r.stdout)
        lines = (self.tmp / "compare.csv").read_text().splitlines()
        self.assertTrue(lines[0].startswith("transport,phase,"))
        self.assertIn("verdict", lines[0])
        self.assertTrue(any(",regressed," in ln for ln in lines))

    def test_threshold_gates(self):
        # a -50 % BRPC run rate regresses at the default threshold; a 5000 % threshold lets it
        # and every noisy change of the samples pass
        slow = slowed_copy(DATA / "ps_baseline_summary.csv", self.tmp / "slow.csv")
        self.assertEqual(run_inproc(DATA / "ps_baseline_summary.csv", slow).returncode, 1)
        r = run_inproc(DATA / "ps_baseline_summary.csv", slow, "--threshold", "5000")
        self.assertEqual(r.returncode, 0, r.stdout)
        r = run_inproc(DATA / "ps_baseline_summary.csv", DATA / "ps_candidate_summary.csv",
                       "--threshold", "5000")
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_kv_and_chinese(self):
        r = run_inproc(DATA / "kv_baseline_summary.csv", DATA / "kv_candidate_summary.csv", "--lang", "zh")
        self.assertIn(r.returncode, (0, 1))
        self.assertIn("# 基准对比: KV 引擎对比 summary", r.stdout)
        self.assertIn("判定规则", r.stdout)
        self.assertIn("退化", r.stdout)
        # the samples are two runs of the same build; tiny runs on a shared machine still differ
        self.assertEqual(r.returncode, 1)

    def test_directory_arguments(self):
        (self.tmp / "a").mkdir()
        (self.tmp / "b").mkdir()
        shutil.copy(DATA / "kv_baseline_summary.csv", self.tmp / "a" / "summary.csv")
        shutil.copy(DATA / "kv_baseline_summary.csv", self.tmp / "b" / "summary.csv")
        self.assertEqual(run_inproc(self.tmp / "a", self.tmp / "b").returncode, 0)

    def test_bad_input_exits_2_naming_the_file(self):
        bad = self.tmp / "broken.csv"
        text = (DATA / "ps_baseline_summary.csv").read_text().splitlines()
        bad.write_text("\n".join(text[:3] + [text[3][:40]]) + "\n")
        r = run(DATA / "ps_baseline_summary.csv", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn(str(bad), r.stderr)
        self.assertIn("line 4", r.stderr)
        r = run_inproc(DATA / "ps_baseline_summary.csv", DATA / "kv_baseline_summary.csv")
        self.assertEqual(r.returncode, 2)
        self.assertIn("must both be", r.stderr)
        r = run_inproc(DATA / "ps_baseline_summary.csv", self.tmp / "missing.csv")
        self.assertEqual(r.returncode, 2)
        self.assertIn("does not exist", r.stderr)
        r = run_inproc(DATA / "ps_baseline_summary.csv", DATA / "ps_baseline_summary.csv", "--threshold", "-3")
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main()
