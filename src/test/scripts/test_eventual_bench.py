"""The wait-primitive benchmark: output format of recbench-eventual-bench, both wait modes complete,
CPU column present, argument errors; the sweep script writes a .dat and the plot script two PNGs.
No timing assertions: rates and CPU seconds are only checked to be numbers in range."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench import analysis, errors, eventual_bench

ROOT = Path(__file__).resolve().parents[3]
HEADER = "#<num_waiters>\t<test_duration_sec>\t<interval_msec>\t<ops/s>\t<cpu_time_sec>"


def bench_cmd():
    """The console script when installed next to this interpreter, else the module."""
    script = Path(sys.executable).parent / "recbench-eventual-bench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "recbench.eventual_bench"]


class EventualBenchTest(unittest.TestCase):
    def check_output(self, out, n, d, i):
        lines = out.strip().splitlines()
        self.assertEqual(len(lines), 2, out)
        self.assertEqual(lines[0], HEADER)
        fields = lines[1].split("\t")
        self.assertEqual(len(fields), 5, lines[1])
        self.assertEqual(int(fields[0]), n)
        self.assertEqual(float(fields[1]), d)
        self.assertEqual(float(fields[2]), i)
        ops, cpu = float(fields[3]), float(fields[4])
        self.assertGreaterEqual(ops, 0.0)
        self.assertGreaterEqual(cpu, 0.0)
        return ops, cpu

    def test_cli_block_and_spin(self):
        for mode in ("block", "spin"):
            with self.subTest(mode=mode):
                r = subprocess.run(bench_cmd() + ["-d", "0.2", "-i", "1", "-n", "3", "--wait-mode", mode],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check_output(r.stdout, 3, 0.2, 1)

    def test_api_result_fields(self):
        r = eventual_bench.run(4, 0.2, 0.5, "block")
        for key in ("ops", "ops_per_sec", "cpu_user_s", "cpu_sys_s", "cpu_time_s", "wall_s", "late_p50_us",
                    "late_p99_us", "late_max_us"):
            self.assertIn(key, r)
        self.assertAlmostEqual(r["cpu_time_s"], r["cpu_user_s"] + r["cpu_sys_s"], places=6)
        self.assertAlmostEqual(r["ops_per_sec"], r["ops"] / 0.2, places=3)
        self.assertGreaterEqual(r["wall_s"], 0.2)
        self.assertLessEqual(r["late_p50_us"], r["late_p99_us"])
        self.assertLessEqual(r["late_p99_us"], r["late_max_us"] + 1e-9)
        # interval 0: the setter sets as soon as it sees the eventual; still one row of numbers
        self.assertEqual(eventual_bench.format_row(eventual_bench.run(2, 0.1, 0, "spin")).count("\t"), 4)

    def test_bad_arguments(self):
        from recbench import _kv
        with self.assertRaisesRegex(errors.InvalidArgument, "num_waiters 0"):
            _kv.eventual_bench(0, 1.0, 1.0)
        with self.assertRaisesRegex(errors.InvalidArgument, "duration_s"):
            _kv.eventual_bench(1, 0.0, 1.0)
        with self.assertRaisesRegex(errors.InvalidArgument, "interval_ms"):
            _kv.eventual_bench(1, 1.0, -1.0)
        with self.assertRaisesRegex(errors.InvalidArgument, "wait_mode 'nap'"):
            _kv.eventual_bench(1, 1.0, 1.0, "nap")
        for args in (["-d", "1", "-i", "1", "-n", "0"], ["-d", "-1", "-i", "1", "-n", "1"],
                     ["-d", "1", "-i", "1", "-n", "1", "--wait-mode", "nap"], ["-d", "1", "-n", "1"]):
            r = subprocess.run(bench_cmd() + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("usage", r.stderr)


class EventualSweepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_evsweep_"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_sweep_and_plot(self):
        env = dict(os.environ)
        binary = " ".join(bench_cmd())
        r = subprocess.run(["bash", str(ROOT / "tools/benchmarks/sweep_eventual.sh"), "-d", "0.1", "-i", "1",
                            "-m", "block", "-o", str(self.tmp / "s.dat"), binary, "2", "5"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("... running benchmark with 5 waiters (block)", r.stdout)
        lines = (self.tmp / "s.dat").read_text().splitlines()
        self.assertEqual(lines[0], HEADER)
        self.assertEqual(len(lines), 3)
        dat = analysis.load_eventual_dat(self.tmp / "s.dat")
        self.assertEqual(dat["num_waiters"].tolist(), [2, 5])
        r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/plot_eventual.py"), str(self.tmp / "s.dat")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for suffix in (".rate.png", ".cpu.png"):
            png = self.tmp / f"s.dat{suffix}"
            self.assertTrue(png.read_bytes().startswith(b"\x89PNG"), png)

    def test_sweep_rejects_bad_input(self):
        r = subprocess.run(["bash", str(ROOT / "tools/benchmarks/sweep_eventual.sh"), "-m", "nap", "x"],
                           capture_output=True, text=True, timeout=30, cwd=self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-m nap", r.stderr)
        r = subprocess.run(["bash", str(ROOT / "tools/benchmarks/sweep_eventual.sh"), "x", "10", "ten"],
                           capture_output=True, text=True, timeout=30, cwd=self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'ten'", r.stderr)
        bad = self.tmp / "bad.dat"
        bad.write_text("1 2 3\n")
        r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/plot_eventual.py"), str(bad)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn(str(bad), r.stderr)


if __name__ == "__main__":
    unittest.main()
