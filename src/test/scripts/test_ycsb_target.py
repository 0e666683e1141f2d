"""YCSB -target (open loop) end to end: operations start on the timetable, so a run cannot end
before its last operation is due; the Intended- latencies (from the scheduled start) are never
below the op latencies and carry a stall of the client process for every operation due during
it, which the op latencies record once; a target above what the engine can do reports late
sends and a throughput below target; measurement.interval selects what is recorded; bad targets
are refused naming the input."""

import subprocess
import sys
import unittest

from fault_support import stall
from ps_testlib import ROOT, python_env

from recbench import _ycsb, workloads
from recbench.errors import RecbenchError
from recbench.ycsb_report import parse_report

STALL_S = 0.4


def run(target, ops=4000, extra=()):
    props = ["recordcount=1000", f"operationcount={ops}", "threadcount=2", "basic.silent=true",
             f"target={target}", *extra]
    return _ycsb.run("basic", files=[workloads.resolve("workloada")], props=props, load=True,
                     run=True)


def by_name(ops):
    return {op["name"]: op for op in ops}


class YcsbTargetTest(unittest.TestCase):
    def test_operations_follow_the_timetable(self):
        rep = run(4000, ops=4000)
        ph = rep["run"]
        self.assertEqual(rep["target"], 4000)
        self.assertEqual(rep["arrival"], "uniform")
        self.assertEqual(rep["interval"], "both")
        # the last of 4000 operations at 4000/s is due 1 s - 1/4000 s after the start
        self.assertGreaterEqual(ph["runtime_s"], (4000 - 1) / 4000)
        self.assertGreaterEqual(rep["load"]["runtime_s"], (1000 - 1) / 4000)
        ops, intended = by_name(ph["ops"]), by_name(ph["intended_ops"])
        self.assertEqual(set(intended), {"Intended-" + n for n in ops})
        for name, op in ops.items():
            io = intended["Intended-" + name]
            self.assertEqual(io["count"], op["count"])
            for k in ("min_us", "p50_us", "p99_us", "max_us"):
                self.assertGreaterEqual(io[k] * 1.01, op[k], (name, k))  # 1 % = bucket width

    def test_poisson_arrivals_and_intervals(self):
        rep = run(4000, ops=2000, extra=["ycsb.arrival=poisson", "measurement.interval=intended"])
        self.assertEqual(rep["arrival"], "poisson")
        self.assertEqual(rep["run"]["ops"], [])
        self.assertTrue(rep["run"]["intended_ops"])
        rep = run(4000, ops=2000, extra=["measurement.interval=op"])
        self.assertEqual(rep["run"]["intended_ops"], [])
        # without a target nothing is paced and nothing is Intended- unless asked
        rep = _ycsb.run("basic", files=[workloads.resolve("workloada")],
                        props=["recordcount=100", "operationcount=100", "basic.silent=true"])
        self.assertEqual(rep["target"], 0)
        self.assertEqual(rep["run"]["intended_ops"], [])

    def test_over_capacity_is_late_and_below_target(self):
        rep = run(5e6, ops=200000)
        ph = rep["run"]
        self.assertLess(ph["throughput"], 5e6)
        self.assertGreater(ph["late_sends"], 0)
        intended = by_name(ph["intended_ops"])["Intended-ALL"]
        op = by_name(ph["ops"])["ALL"]
        self.assertGreater(intended["p99_us"], op["p99_us"])  # the backlog is charged

    def test_bad_target_is_refused(self):
        with self.assertRaisesRegex(RecbenchError, "target=-1"):
            run(-1)
        with self.assertRaisesRegex(RecbenchError, "over threadcount=2 is below"):
            run(1e-7)
        with self.assertRaisesRegex(RecbenchError, "ycsb.arrival"):
            run(100, extra=["ycsb.arrival=bursty"])
        r = subprocess.run([sys.executable, "-m", "recbench.ycsb", "-run", "-target", "0"],
                           capture_output=True, text=True, timeout=60, env=python_env(),
                           cwd=str(ROOT))
        self.assertEqual(r.returncode, 2)
        self.assertIn("-target 0", r.stderr)

    def test_client_stall_is_charged_to_every_operation_due_during_it(self):
        # 3000 operations at 1000/s: a 3 s run; the first status line comes 1 s into it
        args = [sys.executable, "-m", "recbench.ycsb", "-load", "-run", "-db", "basic",
                "-P", "workloada", "-threads", "1", "-target", "1000", "-s",
                "-p", "recordcount=1000", "-p", "operationcount=3000", "-p", "basic.silent=true",
                "-p", "status.interval=1"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=python_env(), cwd=str(ROOT))
        try:
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if "[RUN]" in line:
                    break
            stall(proc.pid, STALL_S)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 0, err)
        rep = parse_report("".join(lines) + out)["run"]
        op, intended = rep["ops"]["ALL"], rep["ops"]["Intended-ALL"]
        stall_us = STALL_S * 1e6
        self.assertGreater(intended["max_us"], 0.8 * stall_us, intended)
        # ~400 of 3000 operations were due during the stall: the top 1 % waited most of it
        self.assertGreater(intended["p99_us"], 0.5 * stall_us, intended)
        self.assertGreater(intended["p99_us"], 5 * op["p99_us"], (op, intended))
        self.assertGreaterEqual(rep["late_sends"], 0.5 * STALL_S * 1000)


if __name__ == "__main__":
    unittest.main()
