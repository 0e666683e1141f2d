"""tools/benchmarks/bench_ps_transports.py end to end on tiny settings: a real redis-server and
real PS servers and clients, every requested system reported (measured, or skipped with the
server's own reason), the JSON and the table agree; and how runs are paired and their shape
checked. Speed is not judged here."""

import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from ps_testlib import ROOT, python_env

from recbench import procfs


class BenchPsTransportsTest(unittest.TestCase):
    def test_redis_and_transports_are_measured_or_skipped_with_a_reason(self):
        if not shutil.which("redis-server"):
            self.skipTest("redis-server is not installed (make deps installs it)")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "ps.json")
            r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_ps_transports.py"),
                                "--transports", "brpc,rdma", "--record_count", "2000",
                                "--running_seconds", "0.2", "--idle_seconds", "0.1",
                                "--repeat", "1", "--output_json", str(out),
                                "--transport_options", "brpc:tcp_congestion=reno"],
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
        for name in ("redis", "brpc"):  # this machine's /proc/stat: each run says its steal
            self.assertTrue(0.0 <= runs[name]["steal_pct"] <= 100.0, runs[name])
        self.assertIn("host steal % (max) |", r.stdout)
        if runs["rdma"]["status"] != "ok":
            self.assertEqual(runs["rdma"]["status"], "skipped")
            self.assertIn("RDMA", runs["rdma"]["reason"])
            self.assertIn("| rdma | skipped:", r.stdout)
        self.assertIn("| brpc |", r.stdout)
        self.assertIn("| redis |", r.stdout)
        # the options reached brpc's server and client (rdma's take none of them); TCP says
        # what each server's connections used: redis-server the host's
        self.assertEqual(runs["brpc"]["tcp_congestion"], "reno")
        self.assertEqual(runs["redis"]["tcp_congestion"], procfs.tcp_congestion_control())
        self.assertRegex(r.stdout, r"\| brpc \|.*\| reno \|\n")
        self.assertIn("note: TCP is the congestion control each server's connections used",
                      r.stdout)

    def test_transport_options_of_an_unknown_transport_are_refused(self):
        r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_ps_transports.py"),
                            "--transport_options", "brcp:tcp_congestion=system"],
                           capture_output=True, text=True, timeout=60, env=python_env(),
                           cwd=str(ROOT))
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown transport 'brcp'", r.stderr)


class PairingTest(unittest.TestCase):
    """How runs are ordered and judged: each transport's systems back to back in every repeat,
    ratios per repeat, the run shape read back from the processes' own lines."""

    def test_each_transports_systems_run_back_to_back_rotated(self):
        from recbench.bench.ps_transports import repeat_order
        systems = ["brpc", "recstore+brpc", "grpc", "recstore+grpc", "brpc@base",
                   "recstore+brpc@base"]
        seen = set()
        for rep in range(4):
            order = repeat_order(systems, rep)
            self.assertEqual(sorted(order), sorted(systems))
            fams = [s.removesuffix("@base").removeprefix("recstore+") for s in order]
            # one block per transport: the family changes exactly once
            self.assertEqual(sum(a != b for a, b in zip(fams, fams[1:])), 1, order)
            seen.add(tuple(order))
        self.assertEqual(len(seen), 4)  # the order is rotated per repeat

    def test_ratios_are_taken_within_each_repeat(self):
        from recbench.bench.ps_transports import pair_ratios
        rows = [{"system": "brpc", "repeat": 0, "status": "ok", "keys_s": 10.0},
                {"system": "recstore+brpc", "repeat": 0, "status": "ok", "keys_s": 9.0},
                {"system": "brpc", "repeat": 1, "status": "ok", "keys_s": 4.0},
                {"system": "recstore+brpc", "repeat": 1, "status": "ok", "keys_s": 4.0},
                {"system": "brpc", "repeat": 2, "status": "ok", "keys_s": 8.0},
                {"system": "recstore+brpc", "repeat": 2, "status": "failed"}]
        self.assertEqual(pair_ratios(rows, "recstore+brpc", "brpc"), [0.9, 1.0])

    def test_a_run_of_another_shape_is_named(self):
        import argparse

        from recbench.bench.ps_transports import shape_error
        args = argparse.Namespace(server_threads=1, value_size=512, client_threads=1,
                                  batch_keys=500, prefetch_depth=8)
        ready = {"num_threads": "1", "value_size": "512"}
        run = {"threads": "1", "batch_size": "500", "prefetch_depth": "8", "batches": "10",
               "get_parts": "10"}
        self.assertIsNone(shape_error(args, ready, run))
        err = shape_error(args, {**ready, "num_threads": "2"}, {**run, "get_parts": "20"})
        self.assertIn("server workers 2 (asked 1)", err)
        self.assertIn("client requests per batch 2 (asked 1)", err)


if __name__ == "__main__":
    unittest.main()
