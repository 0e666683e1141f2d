"""recbench.latency_curve (knee at a p99 SLO, the curve CSV, the Chinese summary section) and
recbench.analysis.plot_latency_vs_rate on hand-made points, and tools/benchmarks/bench_open_loop.py
end to end on tiny settings against a real brpc server (speed is not judged)."""

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from ps_testlib import ROOT, python_env

from recbench import analysis, latency_curve, records
from recbench.latency_curve import CurvePoint


def pt(t, offered, achieved, p99, status="success"):
    return CurvePoint(t, offered, achieved_rate=achieved, key_ops_per_sec=achieved * 500,
                      p50_us=p99 / 3, p99_us=float(p99), p999_us=p99 * 2.0, service_p50_us=50.0,
                      service_p99_us=80.0, service_p999_us=100.0, late_sends=0,
                      client_cpu_s=0.5, server_cpu_s=0.7, status=status)


POINTS = [pt("brpc", 100, 100, 200), pt("brpc", 500, 499, 900), pt("brpc", 1000, 990, 1000),
          pt("brpc", 1200, 1010, 90000), pt("shm", 100, 100, 5000),
          pt("grpc", 100, 100, 10, status="client_failure")]


class LatencyCurveTest(unittest.TestCase):
    def test_knee_is_the_highest_achieved_rate_within_the_slo(self):
        k = latency_curve.knees(POINTS, 1000)
        self.assertEqual(k["brpc"].achieved_rate, 990)  # p99 == SLO counts; 1010 misses it
        self.assertIsNone(k["shm"])                      # no point meets it
        self.assertIsNone(k["grpc"])                     # failed points never count
        self.assertEqual(latency_curve.knee(POINTS, 500).achieved_rate, 100)
        with self.assertRaisesRegex(ValueError, "slo-p99-us"):
            latency_curve.knee(POINTS, 0)

    def test_csv_round_trip_and_bad_cells(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = latency_curve.write_csv(POINTS, Path(tmp) / "curve.csv")
            back = latency_curve.read_csv(path)
            self.assertEqual([(p.transport, p.offered_rate, p.p99_us, p.status) for p in back],
                             [(p.transport, p.offered_rate, p.p99_us, p.status) for p in POINTS])
            text = path.read_text().replace("90000.000", "lots")
            path.write_text(text)
            with self.assertRaisesRegex(ValueError, r"curve.csv:5: column p99_us: 'lots'"):
                latency_curve.read_csv(path)

    def test_markdown_and_plot(self):
        md = "\n".join(latency_curve.markdown_lines(POINTS, 1000, 500))
        self.assertIn("## 开环负载：延迟–吞吐曲线", md)
        self.assertIn("| brpc | 990 | 495,000 | 1,000.0 | 80.0 |", md)
        self.assertIn("| shm | 没有一个点满足 SLO |", md)
        self.assertIn("每批 500 个键", md)
        with tempfile.TemporaryDirectory() as tmp:
            png = analysis.plot_latency_vs_rate(POINTS, Path(tmp) / "plots" / "latency_vs_rate.png",
                                                1000)
            self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
        with self.assertRaisesRegex(ValueError, "no successful"):
            analysis.plot_latency_vs_rate([POINTS[-1]], "unused.png")


class BenchOpenLoopTest(unittest.TestCase):
    def test_tiny_curve_on_brpc(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run(
                [sys.executable, str(ROOT / "tools/benchmarks/bench_open_loop.py"),
                 "--transports", "brpc,rdma", "--record_count", "2000", "--batch_keys", "50",
                 "--running_seconds", "0.3", "--warmup_seconds", "0", "--closed_repeat", "1",
                 "--fractions", "0.2,1.5", "--out_dir", tmp],
                capture_output=True, text=True, timeout=300, env=python_env(), cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            points = latency_curve.read_csv(Path(tmp) / "curve.csv")
            self.assertTrue((Path(tmp) / "latency_vs_rate.png").exists())
            self.assertIn("拐点", (Path(tmp) / "curve.md").read_text())
        brpc = [p for p in points if p.transport == "brpc"]
        self.assertEqual(len(brpc), 2)
        low, high = sorted(brpc, key=lambda p: p.offered_rate)
        self.assertAlmostEqual(high.offered_rate / low.offered_rate, 1.5 / 0.2, places=2)
        self.assertTrue(all(p.ok and p.service_p99_us is not None for p in brpc))
        self.assertGreater(high.late_sends, 0)  # 150 % of the closed-loop maximum
        rdma = [p for p in points if p.transport == "rdma"]
        if rdma:  # no verbs device here: reported, not measured
            self.assertTrue(rdma[0].status == "success" or rdma[0].status.startswith("skipped"))


    def test_pacing_cost_under_callgrind(self):
        if not shutil.which("valgrind"):
            self.skipTest("valgrind is not installed (Debian package valgrind)")
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run(
                [sys.executable, str(ROOT / "tools/benchmarks/bench_open_loop.py"),
                 "--transports", "brpc", "--record_count", "2000", "--batch_keys", "50",
                 "--running_seconds", "0.3", "--warmup_seconds", "0", "--closed_repeat", "1",
                 "--fractions", "0.5", "--pacing_cost", "--pacing_cost_rate", "200",
                 "--out_dir", tmp],
                capture_output=True, text=True, timeout=600, env=python_env(), cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            rows = records.read_csv(Path(tmp) / "pacing_cost.csv")
        self.assertEqual([x["run"] for x in rows],
                         ["closed loop", "open loop 200/s", "open loop saturated"])
        self.assertTrue(all(float(x["instructions_per_batch"]) > 0 for x in rows))
        self.assertEqual(int(rows[0]["count_unsent_instructions"]), 0)
        self.assertGreater(int(rows[2]["count_unsent_instructions"]), 0)  # 10^5/s: a backlog


if __name__ == "__main__":
    unittest.main()
