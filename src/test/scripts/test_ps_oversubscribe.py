"""More client threads than cores: 16 client threads in each of 2 ps_bench processes against one
shm server on this 2-core machine, rows verified, every process finishing without a timeout
(the speed goal of oversubscription is a benchmark, not a test); the same under a budget of bytes
in flight far below what the threads ask for, and a bad budget refused."""

import os
import subprocess
import sys
import tempfile
import unittest

from ps_testlib import (
    ROOT,
    NoLeftoverServers,
    PSServerProcess,
    python_env,
    require_transport,
    result_lines,
    run_ps_bench,
)

from recbench import _ps

RECORDS = 20000


class ShmOversubscribedTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "shm")

    def test_sixteen_threads_times_two_processes_verified(self):
        with PSServerProcess("shm", value_size=128, capacity=2 * RECORDS,
                             extra_args=["--thread_num", "2"]) as srv, \
                tempfile.TemporaryDirectory() as d:
            common = srv.bench_args(d) + [
                "--record_count", str(RECORDS), "--value_size", "128", "--batch_keys", "200",
                "--prefetch_depth", "2", "--verify_deterministic_values=true", "--no_barrier",
                "--rdma_wait_timeout_ms", "20000"]
            load = run_ps_bench(common + ["--thread_num", "2", "--running_seconds", "0.1"])
            self.assertEqual(load.returncode, 0, load.stderr)
            args = [sys.executable, "-m", "recbench.ps_bench"] + common + [
                "--skip_load=true", "--thread_num", "16", "--running_seconds", "2",
                "--warmup_seconds", "0"]
            procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=python_env(), cwd=str(ROOT)) for _ in range(2)]
            outs = []
            for p in procs:
                try:
                    outs.append(p.communicate(timeout=180))
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                        q.communicate()
                    raise
            for p, (out, err) in zip(procs, outs):
                self.assertEqual(p.returncode, 0, err[-2000:])
                self.assertNotIn("timeout", err.lower())
                run = result_lines(out)["run"]
                self.assertEqual(run["threads"], "16")
                self.assertEqual(run["keys_missing"], "0")
                self.assertGreater(int(run["key_ops"]), 0)
                self.assertNotIn("PS_BENCHMARK_VERIFY_FAILED", out)
                # shm keeps to no budget of bytes in flight unless given one
                self.assertEqual(run["max_inflight_bytes"], "none")
                self.assertEqual(run["budget_deferred"], "0")

    def test_sixteen_threads_under_a_small_budget_verified(self):
        # 64 KiB over 16 threads is less than one 27 KB request each: every thread keeps one
        # request out instead of 2, the second waits in its client; rows still verified
        with PSServerProcess("shm", value_size=128, capacity=RECORDS,
                             extra_args=["--thread_num", "2"]) as srv, \
                tempfile.TemporaryDirectory() as d:
            common = srv.bench_args(d) + [
                "--record_count", str(RECORDS), "--value_size", "128", "--batch_keys", "200",
                "--prefetch_depth", "2", "--verify_deterministic_values=true", "--no_barrier",
                "--rdma_wait_timeout_ms", "20000", "--max_inflight_bytes", "64K"]
            r = run_ps_bench(common + ["--thread_num", "16", "--load_thread_num", "2",
                                       "--running_seconds", "1"])
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            run = result_lines(r.stdout)["run"]
            self.assertEqual(run["max_inflight_bytes"], "65536")
            self.assertGreater(int(run["budget_deferred"]), 0)
            self.assertGreater(int(run["key_ops"]), 0)
            self.assertEqual(run["keys_missing"], "0")

    def test_bad_budget_is_refused_naming_the_input(self):
        r = run_ps_bench(["--max_inflight_bytes", "8Q", "--no_barrier", "--skip_load"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--max_inflight_bytes", r.stderr)
        self.assertIn("'8Q' is not a byte count", r.stderr)


if __name__ == "__main__":
    unittest.main()


class DefaultBudgetTest(unittest.TestCase):
    """Each transport's default budget of bytes in flight, as its clients resolve it."""

    def test_defaults_per_transport(self):
        cpus = len(os.sched_getaffinity(0))
        available = _ps.transports()
        if available.get("brpc") is None:
            self.assertEqual(_ps.default_inflight_bytes("brpc"), (4 << 20) * cpus)
        if available.get("grpc") is None:
            self.assertEqual(_ps.default_inflight_bytes("grpc"), (8 << 20) * cpus)
        if available.get("shm") is None:
            self.assertIsNone(_ps.default_inflight_bytes("shm"))
        with self.assertRaisesRegex(ValueError, "pigeon"):
            _ps.default_inflight_bytes("pigeon")
