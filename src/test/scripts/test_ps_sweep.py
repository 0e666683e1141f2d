"""tools/benchmarks/sweep_ps.py: argument checks, sweep rows from a PS summary, and an end-to-end
sweep through the real PS runner (two values of --batch-keys on the smoke profile)."""

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import pandas as pd

from recbench import analysis
from recbench.bench import sweep_ps

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "notebooks" / "data"
TOOL = ROOT / "tools" / "benchmarks" / "sweep_ps.py"


class SweepArgsTest(unittest.TestCase):
    def test_flag_names(self):
        self.assertEqual(sweep_ps.flag_name("batch_keys"), "--batch-keys")
        self.assertEqual(sweep_ps.flag_name("--client-threads-per-process"), "--client-threads-per-process")
        with self.assertRaisesRegex(ValueError, "not a runner flag"):
            sweep_ps.flag_name("batch keys")

    def test_values(self):
        self.assertEqual(sweep_ps.parse_values(" 64, 256,,1024 "), ["64", "256", "1024"])
        with self.assertRaisesRegex(ValueError, "no value"):
            sweep_ps.parse_values(",")
        with self.assertRaisesRegex(ValueError, "repeats"):
            sweep_ps.parse_values("1,1")
        with self.assertRaisesRegex(ValueError, "output directory"):
            sweep_ps.parse_values("a/b")

    def test_passthrough_conflicts(self):
        with self.assertRaisesRegex(ValueError, "swept parameter"):
            sweep_ps.check_passthrough("--batch-keys", ["--repeat", "2", "--batch-keys=5"])
        with self.assertRaisesRegex(ValueError, "--out-dir"):
            sweep_ps.check_passthrough("--batch-keys", ["--output-dir", "x"])
        sweep_ps.check_passthrough("--batch-keys", ["--value-size", "64"])

    def test_cli_errors(self):
        r = subprocess.run([sys.executable, str(TOOL), "--param", "batch-keys", "--values", "1,2",
                            "--batch-keys", "3"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("swept parameter", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, str(TOOL), "--param", "batch-keys", "--values", "1",
                                "--runner", str(Path(d) / "nope.py"), "--out-dir", d],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2)
            self.assertIn("nope.py does not exist", r.stderr)


class SweepRowsTest(unittest.TestCase):
    def test_rounds_pool_their_repeats(self):
        one = DATA / "ps_baseline_summary.csv"
        other = DATA / "ps_candidate_summary.csv"
        rows = {r["transport"]: r for r in analysis.sweep_rows("batch-keys", "256", [one, other])}
        reps = pd.concat([analysis.per_repeat(analysis.load_ps_summary(p)) for p in (one, other)])
        brpc = reps[(reps["transport"] == "BRPC") & (reps["phase"] == "run")]
        self.assertEqual(rows["BRPC"]["repeats"], len(brpc))
        self.assertAlmostEqual(rows["BRPC"]["key_ops_per_sec"], brpc["key_ops_per_sec"].median())
        self.assertEqual(rows["BRPC"]["summary_csv"], f"{one};{other}")
        with self.assertRaisesRegex(ValueError, "no summary.csv"):
            analysis.sweep_rows("batch-keys", "256", [])

    def test_rows_per_transport(self):
        rows = analysis.sweep_rows("batch-keys", "256", DATA / "ps_baseline_summary.csv")
        by = {r["transport"]: r for r in rows}
        self.assertEqual(set(by), {"BRPC", "GRPC", "SHM", "RDMA"})
        self.assertEqual(by["RDMA"]["status"], "skipped")
        self.assertEqual(by["BRPC"]["repeats"], 3)
        reps = analysis.per_repeat(analysis.load_ps_summary(DATA / "ps_baseline_summary.csv"))
        brpc = reps[(reps["transport"] == "BRPC") & (reps["phase"] == "run")]
        self.assertAlmostEqual(by["BRPC"]["key_ops_per_sec"], brpc["key_ops_per_sec"].median())
        self.assertAlmostEqual(by["BRPC"]["p99_us"], brpc["p99_us"].mean())
        self.assertGreater(by["BRPC"]["keys_per_cpu_sec"], 0)
        with tempfile.TemporaryDirectory() as d:
            sweep_ps.write_sweep_csv(rows, Path(d) / "sweep.csv")
            sweep = analysis.load_sweep(Path(d) / "sweep.csv")
            self.assertEqual(len(sweep), 4)
            self.assertEqual(sweep["value_num"].iloc[0], 256)


RUNNER = ROOT / "tools" / "benchmarks" / "run_benchmark_ps.py"


@unittest.skipUnless(RUNNER.exists(), "the PS runner (tools/benchmarks/run_benchmark_ps.py) has not landed "
                     "on this branch yet")
class SweepEndToEndTest(unittest.TestCase):
    def test_two_points_through_the_runner(self):
        out = Path(tempfile.mkdtemp(prefix="rb_sweep_"))
        try:
            r = subprocess.run([sys.executable, str(TOOL), "--param", "batch-keys", "--values", "16,64",
                                "--out-dir", str(out), "--profile", "smoke", "--transports", "brpc",
                                "--runtime-seconds", "1", "--record-count", "2000"],
                               capture_output=True, text=True, timeout=300)
            logs = "".join(p.read_text() for p in sorted(out.glob("*.runner.log")))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + logs)
            sweep = analysis.load_sweep(out / "sweep.csv")
            self.assertEqual(sorted(sweep["value"]), ["16", "64"])
            self.assertEqual(set(sweep["transport"]), {"BRPC"})
            for _, row in sweep.iterrows():
                # each sweep row agrees with the summary.csv the runner wrote for that point
                summary = analysis.load_ps_summary(row["summary_csv"])
                self.assertEqual(Path(row["summary_csv"]).parent.name, f"batch-keys_{row['value']}")
                self.assertEqual(set(summary["batch_keys"].dropna()), {int(row["value"])})
                if row["status"] == "success":
                    reps = analysis.per_repeat(summary)
                    run = reps[reps["phase"] == "run"]
                    self.assertGreater(row["key_ops_per_sec"], 0)
                    self.assertAlmostEqual(row["key_ops_per_sec"], run["key_ops_per_sec"].mean(),
                                           delta=run["key_ops_per_sec"].mean() * 1e-5)
                else:  # the runner recorded a failure under load: the sweep reports it, not a number
                    self.assertIn(row["status"], set(summary["status"].astype(str)), logs)
                    self.assertTrue(pd.isna(row["key_ops_per_sec"]))
            if (sweep["status"] == "success").any():
                for name in ("sweep.rate.png", "sweep.cpu.png"):
                    self.assertTrue((out / name).read_bytes().startswith(b"\x89PNG"))
        finally:
            shutil.rmtree(out)

    def test_rounds_run_the_values_in_turn(self):
        out = Path(tempfile.mkdtemp(prefix="rb_sweep_rounds_"))
        try:
            r = subprocess.run([sys.executable, str(TOOL), "--param", "batch-keys", "--values", "16,64",
                                "--rounds", "2", "--out-dir", str(out), "--profile", "smoke",
                                "--transports", "brpc", "--runtime-seconds", "1", "--record-count",
                                "2000"], capture_output=True, text=True, timeout=300)
            logs = "".join(p.read_text() for p in sorted(out.glob("*.runner.log")))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + logs)
            runs = [out / f"batch-keys_{v}" / f"round_{n}" / "summary.csv"
                    for n in (1, 2) for v in (16, 64)]
            for p in runs:
                self.assertTrue(p.exists(), p)
            # round by round: 16, 64, 16, 64
            times = [p.stat().st_mtime_ns for p in runs]
            self.assertEqual(times, sorted(times))
            sweep = analysis.load_sweep(out / "sweep.csv")
            self.assertEqual(sorted(sweep["value"]), ["16", "64"])
            for _, row in sweep.iterrows():
                self.assertEqual(row["summary_csv"].split(";"),
                                 [str(out / f"batch-keys_{row['value']}" / f"round_{n}" / "summary.csv")
                                  for n in (1, 2)])
                if row["status"] == "success":
                    self.assertEqual(row["repeats"], 2)
            bad = subprocess.run([sys.executable, str(TOOL), "--param", "batch-keys", "--values", "16",
                                  "--rounds", "0"], capture_output=True, text=True, timeout=60)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("--rounds 0", bad.stderr)
        finally:
            shutil.rmtree(out)


if __name__ == "__main__":
    unittest.main()
