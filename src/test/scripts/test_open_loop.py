"""Open-loop ps_bench (--target_rate) against real servers on loopback: a server stopped with
SIGSTOP for a known interval is charged to every batch due during the stall in the corrected
latency (p99/max near the stall) but not in the service time, while the closed-loop run of the
same scenario records the stall once (the coordinated omission); a target above what the machine
can do ends on time with late sends and an achieved rate below target, on every transport built
here. Relationships are asserted, never machine speed."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import unittest

from fault_support import stall, wait_until
from ps_testlib import (
    ROOT,
    NoLeftoverServers,
    PSServerProcess,
    python_env,
    require_transport,
    result_lines,
    run_ps_bench,
)

from recbench import latency_hist

STALL_S = 0.5
RATE = 1000.0  # batches/s: one every ms, so ~STALL_S * RATE batches are due during the stall


def bench_args(srv: PSServerProcess, tmp: str, *extra: str) -> list[str]:
    return srv.bench_args(tmp) + ["--record_count", "2000", "--batch_keys", "10",
                                  "--thread_num", "1", "--skip_load", "--no_barrier"] + list(extra)


def handled_gets(srv: PSServerProcess) -> int:
    import recbench

    with recbench.PSClient(srv.uri) as c:
        return int(c.stats()[0]["handled_get"])


def run_with_stall(srv: PSServerProcess, args: list[str]) -> dict:
    """Run ps_bench; once its run phase is sending, SIGSTOP the server for STALL_S, SIGCONT it."""
    before = handled_gets(srv)
    proc = subprocess.Popen([sys.executable, "-m", "recbench.ps_bench"] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=python_env(), cwd=str(ROOT))
    try:
        # the client's run is under way once the server has answered some of its GETs
        wait_until(lambda: handled_gets(srv) >= before + 20, 30, "the client's first GETs",
                   interval=0.005)
        stall(srv.pid, STALL_S)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if proc.returncode != 0:
        raise AssertionError(f"ps_bench exit {proc.returncode}: {err}")
    return {"run": result_lines(out)["run"], "hists": latency_hist.collect(out)}


class OpenLoopStallTest(NoLeftoverServers, unittest.TestCase):
    def test_corrected_latency_charges_the_stall_and_closed_loop_omits_it(self):
        with tempfile.TemporaryDirectory() as tmp, PSServerProcess("brpc") as srv:
            opened = run_with_stall(srv, bench_args(srv, tmp, "--running_seconds", "3",
                                                    "--target_rate", str(RATE)))
            closed = run_with_stall(srv, bench_args(srv, tmp, "--running_seconds", "3"))
        o, c = opened["run"], closed["run"]
        stall_us = STALL_S * 1e6
        # open loop: the batch due when the server stopped waited for the whole stall ...
        self.assertGreater(float(o["max_us"]), 0.8 * stall_us, o)
        # ... and so did, in part, every batch due during it: ~STALL_S * RATE of ~3 * RATE
        # batches, so the top 1 % waited most of the stall
        self.assertGreater(float(o["p99_us"]), 0.5 * stall_us, o)
        self.assertGreaterEqual(int(o["late_sends"]), 0.5 * STALL_S * RATE, o)
        # the service time (from the actual send) saw the stall in one batch only
        self.assertLess(float(o["service_p99_us"]) * 5, float(o["p99_us"]), o)
        self.assertGreater(float(o["service_max_us"]), 0.8 * stall_us, o)
        self.assertEqual(o["arrival"], "poisson")
        self.assertIn("run_service", opened["hists"])
        # one corrected and one service time per batch due in the window and sent (~3 s at
        # RATE); the ones never sent before it closed are late sends, so nothing is dropped
        sent = opened["hists"]["run"].count
        self.assertEqual(opened["hists"]["run_service"].count, sent)
        self.assertGreater(sent + int(o["late_sends"]), 0.9 * 3 * RATE)
        # closed loop: the stall was there (its one batch waited for it) but only once
        self.assertGreater(float(c["max_us"]), 0.8 * stall_us, c)
        self.assertLess(float(c["p99_us"]) * 5, float(o["p99_us"]), (c, o))
        self.assertNotIn("late_sends", c)
        self.assertNotIn("run_service", closed["hists"])


class OpenLoopOverCapacityTest(NoLeftoverServers, unittest.TestCase):
    RUN_S = 1.0
    TARGET = 1e7  # batches/s (RS_PACING_MAX_RATE): far above what one client thread does anywhere

    def over_capacity(self, transport: str, arrival: str) -> None:
        require_transport(self, transport)
        with tempfile.TemporaryDirectory() as tmp, PSServerProcess(transport) as srv:
            t0 = time.monotonic()
            r = run_ps_bench(bench_args(srv, tmp, "--running_seconds", str(self.RUN_S),
                                        "--target_rate", f"{self.TARGET:g}", "--arrival",
                                        arrival, "--timeout_ms", "5000"), timeout=120)
            wall = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, r.stderr)
        run = result_lines(r.stdout)["run"]
        batches, late = int(run["batches"]), int(run["late_sends"])
        self.assertLessEqual(float(run["runtime_s"]), self.RUN_S + 1e-3, run)
        self.assertLess(float(run["achieved_rate"]), self.TARGET, run)
        self.assertEqual(float(run["target_rate"]), self.TARGET)
        self.assertGreater(batches, 0, run)
        # every batch due in the window was either sent (and counted) or is a late send
        self.assertGreaterEqual(batches + late, 0.95 * self.TARGET * self.RUN_S, run)
        self.assertGreater(late, batches, run)
        # the backlog grows through the window: the last batches sent were due long before
        self.assertGreater(float(run["max_us"]), 0.3 * self.RUN_S * 1e6, run)
        # nothing hung: the process did not outlive its run by the request timeout
        self.assertLess(wall, self.RUN_S + 30, r.stdout)

    def test_brpc_poisson(self):
        self.over_capacity("brpc", "poisson")

    def test_grpc_uniform(self):
        self.over_capacity("grpc", "uniform")

    def test_shm_uniform(self):
        self.over_capacity("shm", "uniform")


class OpenLoopFlagsTest(unittest.TestCase):
    def test_bad_rates_and_arrivals_are_refused_naming_the_flag(self):
        r = run_ps_bench(["--target_rate", "-5", "--no_barrier", "--skip_load"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--target_rate -5", r.stderr)
        r = run_ps_bench(["--target_rate", "100", "--arrival", "bursty"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("bursty", r.stderr)

    def test_c_layer_refuses_a_bad_arrival(self):
        from recbench import _ps

        with self.assertRaisesRegex(ValueError, "arrival 'bursty'"):
            _ps.bench_run("brpc", [("127.0.0.1", 1)], target_rate=10.0, arrival="bursty")
        with self.assertRaisesRegex(ValueError, "over 2 threads is below"):
            _ps.bench_run("brpc", [("127.0.0.1", 1)], target_rate=1e-9, threads=2)


if __name__ == "__main__":
    unittest.main()
