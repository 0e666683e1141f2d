"""recbench.runner.plan: the plan is built once from the flags, is immutable, refuses what the
programs cannot do at parse time (naming the flag and the limit), and records itself as data."""

import contextlib
import dataclasses
import io
import json
import unittest

from recbench import _ps, transports
from recbench.runner import cli, plan


def parse(*argv):
    return cli.parse_args(list(argv))


def parse_error(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), unittest.TestCase().assertRaises(SystemExit):
        cli.parse_args(list(argv))
    return err.getvalue()


class TestPlan(unittest.TestCase):
    def test_plan_is_frozen_and_grouped_by_consumer(self):
        p = parse("--transports", "grpc,BRPC", "--value-size", "256")
        self.assertEqual([t.name for t in p.transports], ["grpc", "brpc"])
        self.assertEqual(p.workload.value_size, 256)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            p.workload.value_size = 512
        self.assertEqual(p.cases(), [(transports.get("grpc"), 0), (transports.get("brpc"), 0)])

    def test_value_size_limit_comes_from_the_c_bench_loops(self):
        limit = _ps.BENCH_MAX_VALUE_SIZE
        self.assertEqual(plan.BENCH_MAX_VALUE_SIZE, limit)
        parse("--transports", "grpc", "--value-size", str(limit))
        msg = parse_error("--transports", "grpc", "--value-size", str(limit * 2))
        self.assertIn(f"--value-size {limit * 2} exceeds ps_bench's row limit of {limit} bytes", msg)

    def test_target_rate_limit_comes_from_the_c_pacing(self):
        limit = _ps.PACING_MAX_RATE
        self.assertEqual(plan.MAX_TARGET_RATE, limit)
        parse("--transports", "grpc", "--target-rate", f"{limit:g}")
        self.assertIn(f"is not in [0, {limit:g}] batches/s",
                      parse_error("--transports", "grpc", "--target-rate", f"{limit * 2:g}"))
        self.assertIn(f"is not in (0, {limit:g}]",
                      parse_error("--transports", "grpc", "--target-rates", f"{limit * 2:g}"))

    def test_report_mode_per_round_is_refused_without_a_binary_that_has_it(self):
        for mode in ("per_round", "both"):
            self.assertIn(f"--report-mode {mode}: recbench's ps_bench prints one summary",
                          parse_error("--transports", "grpc", "--report-mode", mode))
        self.assertEqual(parse("--transports", "grpc").workload.report_mode, "summary")

    def test_open_loop_flags(self):
        p = parse("--transports", "grpc", "--target-rates", "10, 20.5", "--slo-p99-us", "500")
        self.assertEqual(p.workload.target_rates, (10.0, 20.5))
        self.assertEqual((p.workload.target_rate, p.workload.slo_p99_us), (0.0, 500.0))
        self.assertEqual(parse("--transports", "grpc").workload.target_rates, ())
        self.assertEqual(parse("--transports", "grpc", "--target-rate", "300", "--arrival",
                               "uniform").workload.arrival, "uniform")
        for args, msg in ((["--target-rate", "-1"], "--target-rate -1 is not in"),
                          (["--target-rate", "2e7"], "--target-rate 2e+07 is not in"),
                          (["--target-rates", "10,x"], "'x' is not a number"),
                          (["--target-rates", "10,0"], "0 is not in (0,"),
                          (["--target-rates", "10,10"], "repeats a rate"),
                          (["--target-rates", " , "], "holds no rate"),
                          (["--target-rate", "5", "--target-rates", "10"], "not both"),
                          (["--slo-p99-us", "100"], "needs --target-rates"),
                          (["--target-rates", "10", "--slo-p99-us", "-1"], "must be > 0")):
            self.assertIn(msg, parse_error("--transports", "grpc", *args), args)

    def test_record_is_json_data_with_topologies(self):
        p = parse("--transports", "shm", "--server-shard-ips", "127.0.0.1,127.0.0.1")
        rec = json.loads(json.dumps(p.record()))
        self.assertEqual(rec["transports"], ["SHM"])
        self.assertEqual(rec["workload"]["record_count"], 1000000)
        self.assertEqual(rec["rc"]["get_response_mode"], "direct_sg")  # what verbs would get
        self.assertEqual(rec["get_response_modes"], {"SHM": "staging_copy"})  # what shm gets
        both = parse("--transports", "shm,rdma")
        self.assertEqual(both.get_response_modes(), {"SHM": "staging_copy", "RDMA": "direct_sg"})
        pinned = parse("--transports", "shm", "--rdma-get-response-mode", "direct_sg")
        self.assertEqual(pinned.get_response_modes(), {"SHM": "direct_sg"})
        ports = [s["port"] for s in rec["topologies"]["shm"]["servers"]]
        self.assertEqual(ports, [s.port for s in p.topology(transports.get("shm")).servers])
        self.assertEqual(len(set(ports)), 2)

    def test_building_does_not_change_the_parsed_flags(self):
        args = cli.build_parser().parse_args(["--transports", "rdma"])
        before = dict(vars(args))
        p = plan.build_plan(args)
        self.assertEqual(vars(args), before)
        self.assertEqual(p.workload.prefetch_depth, plan.DEFAULT_RDMA_PREFETCH_DEPTH)
        self.assertIn("prefetch_depth", p.rc.derived)


if __name__ == "__main__":
    unittest.main()
