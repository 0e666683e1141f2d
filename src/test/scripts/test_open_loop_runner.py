"""The PS runner's open-loop flags end to end on loopback: --target-rate reaches every client
(the summary.csv rows carry target_rate, achieved_rate, late_sends and service percentiles), and
--target-rates gives one runner pass per rate plus the curve (curve.csv, summary.md in Chinese
with the knee at --slo-p99-us, plots/latency_vs_rate.png); the flags' checks are unit-tested in
test_runner_plan.py. Speed is not judged."""

import csv
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench import latency_curve, launch

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "tools" / "benchmarks" / "run_benchmark_ps.py"
SMALL = ["--profile", "smoke", "--record-count", "2000", "--runtime-seconds", "0.5",
         "--server-worker-threads", "1", "--cluster-timeout", "30", "--client-timeout", "60",
         "--transports", "brpc"]


def run_runner(args, timeout=300):
    # a free port, not brpc's default 15000: another process on this host may hold that one
    args = args + ["--server-plan", f"0:127.0.0.1:{launch.free_port()}:0"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(RUNNER)] + args, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(REPO), stdin=subprocess.DEVNULL)


class RunnerOpenLoopTest(unittest.TestCase):
    def test_target_rates_give_a_curve_and_a_knee(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_runner(SMALL + ["--target-rates", "200,400", "--arrival", "uniform",
                                    "--slo-p99-us", "1e9", "--output-dir", tmp])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            out = Path(tmp)
            with open(out / "rate_200" / "summary.csv", newline="") as f:
                rows = [x for x in csv.DictReader(f) if x["phase"] == "run"]
            self.assertTrue(rows)
            for row in rows:
                self.assertEqual(float(row["target_rate"]), 200.0)
                self.assertGreater(float(row["achieved_rate"]), 0)
                self.assertNotEqual(row["service_p99_us"], "")
                self.assertNotEqual(row["late_sends"], "")
            points = latency_curve.read_csv(out / "curve.csv")
            self.assertEqual(sorted(p.offered_rate for p in points), [200.0, 400.0])
            self.assertTrue(all(p.ok and p.service_p99_us is not None for p in points), points)
            md = (out / "summary.md").read_text()
            self.assertIn("延迟–吞吐曲线", md)
            self.assertIn("拐点", md)
            self.assertIn("plots/latency_vs_rate.png", md)
            self.assertTrue((out / "plots" / "latency_vs_rate.png").exists())
            knee = latency_curve.knee(points, 1e9)  # every point meets a 1000 s SLO
            self.assertIn(f"| {knee.transport} | {knee.achieved_rate:,.0f} |", md)

    def test_closed_loop_rows_leave_the_open_loop_columns_empty(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_runner(SMALL + ["--output-dir", tmp])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(Path(tmp) / "summary.csv", newline="") as f:
                rows = [x for x in csv.DictReader(f) if x["phase"] == "run"]
        self.assertTrue(rows)
        self.assertTrue(all(x["target_rate"] == "" and x["service_p99_us"] == "" for x in rows))


if __name__ == "__main__":
    unittest.main()
