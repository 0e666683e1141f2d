"""recbench.analysis.compare: verdicts per metric against the spread across repeats, per_repeat sums,
and totals."""

import csv
import math
import shutil
import tempfile
import unittest
from pathlib import Path

from recbench import analysis


def ps_file(path, runs, failures=(), shares=None):
    """runs: {transport: [per-repeat total keys/s, ...]}; two clients per repeat share the rate
    equally; p99 = 1e9 / keys/s (so latency falls when rate rises). failures: (transport, repeat,
    status) rows added. shares(transport, repeat, client) -> (slowest, fastest) thread shares of
    that client row (none by default, as from a --benchmark-binary)."""
    rows = []
    for t, rates in runs.items():
        for rep, rate in enumerate(rates):
            for ci in range(2):
                r = dict.fromkeys(analysis.PS_COLUMNS, "")
                r.update(transport=t, status="success", phase="run", client_index=ci, repeat_index=rep,
                         server_shards=1, client_processes=2, server_shard_ips="127.0.0.1",
                         client_ips="127.0.0.1", record_count=1000, value_size=64, batch_keys=32,
                         client_threads_per_process=1, runtime_seconds=2, distribution="uniform",
                         mode="fetch", ops_per_sec=rate / 2 / 32, key_ops_per_sec=rate / 2,
                         payload_gbps=rate / 2 * 64 / 1e9, mean_us=5e8 / rate, p50_us=5e8 / rate,
                         p95_us=8e8 / rate, p99_us=1e9 / rate, p999_us=2e9 / rate, max_us=4e9 / rate,
                         client_cpu_s=1.0, server_cpu_s=2.0, keys_per_cpu_sec=rate, build_type="Release",
                         index_type="DRAM_PET_HASH", row_kind="fair")
                if shares:
                    r["slowest_thread_share"], r["fastest_thread_share"] = shares(t, rep, ci)
                rows.append(r)
    for t, rep, status in failures:
        r = dict.fromkeys(analysis.PS_COLUMNS, "")
        r.update(transport=t, status=status, phase="run", client_index=-1, repeat_index=rep,
                 server_shards=1, client_processes=2, batch_keys=32, value_size=64, message="boom")
        rows.append(r)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, analysis.PS_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return analysis.load_ps_summary(path)


def kv_file(path, runs):
    """runs: {(workload, engine): [run ops/s per repeat]}"""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, analysis.KV_COLUMNS)
        w.writeheader()
        for (wl, eng), rates in runs.items():
            for rep, rate in enumerate(rates):
                ok = rate is not None
                w.writerow(dict(workload=wl, engine=eng, db=eng, repeat=rep, record_count=1000,
                                operation_count=1000, threads=2, phase="load-run", exit_code=0 if ok else 1,
                                load_runtime_sec=0.1, load_operations=1000, load_throughput_ops_sec=10000,
                                run_runtime_sec=1000 / rate if ok else "", run_operations=1000 if ok else "",
                                run_throughput_ops_sec=rate if ok else "", data_path="/tmp/d",
                                log_path="/tmp/l.log", error_tail="" if ok else "failed",
                                read_mode="get", batch_keys=0, run_p50_us=1e6 / rate if ok else "",
                                run_p99_us=4e6 / rate if ok else "", cpu_user_s=0.5, cpu_sys_s=0.1))
    return analysis.load_kv_summary(path)


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_cmp_"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def verdict(self, cmp, metric, **case):
        sel = cmp[cmp["metric"] == metric]
        for k, v in case.items():
            sel = sel[sel[k].astype(str) == str(v)]
        self.assertEqual(len(sel), 1, f"{metric} {case}: {sel}")
        return sel.iloc[0]

    def test_per_repeat_sums_clients(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000.0, 1100.0]})
        reps = analysis.per_repeat(b)
        self.assertEqual(sorted(reps["key_ops_per_sec"].round(6)), [1000.0, 1100.0])
        self.assertEqual(reps["clients"].tolist(), [2, 2])
        self.assertEqual(reps["client_cpu_s"].tolist(), [2.0, 2.0])  # summed over clients
        self.assertEqual(reps["server_cpu_s"].tolist(), [2.0, 2.0])  # the case's, not summed
        t = analysis.totals(b)
        self.assertAlmostEqual(t["key_ops_per_sec_mean"].iloc[0], 1050.0)
        self.assertAlmostEqual(t["key_ops_per_sec_std"].iloc[0], math.sqrt(5000))
        self.assertEqual(t["repeats"].iloc[0], 2)

    def test_thread_shares_per_repeat_and_sweep(self):
        path = self.tmp / "s.csv"
        # repeat 0: clients at 0.9-1.1 and 0.7-1.05; repeat 1: 0.95-1.3 and 0.85-1.0
        table = [[(0.9, 1.1), (0.7, 1.05)], [(0.95, 1.3), (0.85, 1.0)]]
        df = ps_file(path, {"GRPC": [1000.0, 1000.0]}, shares=lambda t, rep, ci: table[rep][ci])
        reps = analysis.per_repeat(df).sort_values("repeat_index")
        self.assertEqual(reps["slowest_thread_share"].tolist(), [0.7, 0.85])
        self.assertEqual(reps["fastest_thread_share"].tolist(), [1.1, 1.3])
        (row,) = analysis.sweep_rows("client-threads-per-process", "16", path)
        self.assertAlmostEqual(row["slowest_thread_share"], 0.775)  # mean over the repeats
        self.assertAlmostEqual(row["fastest_thread_share"], 1.2)
        ps_file(self.tmp / "n.csv", {"GRPC": [1.0]})
        (row,) = analysis.sweep_rows("client-threads-per-process", "16", self.tmp / "n.csv")
        self.assertIsNone(row["slowest_thread_share"])  # no client line had thread counts

    def test_a_straggler_is_a_regression(self):
        def with_shares(name, lows):  # two clients per repeat, one with the repeat's slowest thread
            return ps_file(self.tmp / name, {"BRPC": [1000.0, 1000.0, 1000.0]},
                           shares=lambda t, rep, ci: (lows[rep] if ci == 0 else 1.0, 1.1))
        base = with_shares("b.csv", [0.95, 0.96, 0.94])
        cmp = analysis.compare(base, with_shares("c.csv", [0.60, 0.62, 0.58]))
        self.assertEqual(self.verdict(cmp, "slowest_thread_share", transport="BRPC")["verdict"],
                         "regressed")
        self.assertEqual(self.verdict(cmp, "key_ops_per_sec", transport="BRPC")["verdict"],
                         "within noise")
        # a baseline from before the column: the metric is missing, which does not gate
        old = ps_file(self.tmp / "o.csv", {"BRPC": [1000.0, 1000.0, 1000.0]})
        cmp = analysis.compare(old, with_shares("c2.csv", [0.60, 0.62, 0.58]))
        self.assertEqual(self.verdict(cmp, "slowest_thread_share", transport="BRPC")["verdict"],
                         "missing")
        self.assertEqual(len(analysis.regressions(cmp)), 0)

    def test_clear_regression_and_improvement(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000, 1010, 990], "GRPC": [500, 505, 495]})
        c = ps_file(self.tmp / "c.csv", {"BRPC": [800, 810, 790], "GRPC": [600, 606, 594]})
        cmp = analysis.compare(b, c, threshold_pct=5)
        r = self.verdict(cmp, "key_ops_per_sec", transport="BRPC")
        self.assertAlmostEqual(r["change_pct"], -20.0)
        self.assertEqual(r["verdict"], "regressed")
        self.assertEqual(self.verdict(cmp, "p99_us", transport="BRPC")["verdict"], "regressed")
        self.assertEqual(self.verdict(cmp, "key_ops_per_sec", transport="GRPC")["verdict"], "improved")
        # lower latency is better: the GRPC p99 fell
        r = self.verdict(cmp, "p99_us", transport="GRPC")
        self.assertLess(r["change_pct"], 0)
        self.assertEqual(r["verdict"], "improved")
        self.assertEqual(set(analysis.regressions(cmp)["transport"].astype(str)), {"BRPC"})

    def test_small_change_is_within_threshold(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000, 1000]})
        c = ps_file(self.tmp / "c.csv", {"BRPC": [970, 970]})
        cmp = analysis.compare(b, c, threshold_pct=5)
        r = self.verdict(cmp, "key_ops_per_sec", transport="BRPC")
        self.assertAlmostEqual(r["noise_pct"], 5.0)
        self.assertEqual(r["verdict"], "within noise")
        self.assertEqual(analysis.compare(b, c, threshold_pct=2).pipe(
            lambda x: self.verdict(x, "key_ops_per_sec", transport="BRPC"))["verdict"], "regressed")

    def test_noisy_repeats_widen_the_band(self):
        # mean drops 20 %, but the repeats scatter by ~±40 %: not a regression
        b = ps_file(self.tmp / "b.csv", {"BRPC": [600, 1000, 1400]})
        c = ps_file(self.tmp / "c.csv", {"BRPC": [500, 800, 1100]})
        cmp = analysis.compare(b, c, threshold_pct=5)
        r = self.verdict(cmp, "key_ops_per_sec", transport="BRPC")
        self.assertAlmostEqual(r["change_pct"], -20.0)
        self.assertGreater(r["noise_pct"], 20.0)
        self.assertEqual(r["verdict"], "within noise")
        self.assertAlmostEqual(r["baseline_spread_pct"], 40.0)
        # the same drop with quiet repeats is a regression
        b2 = ps_file(self.tmp / "b2.csv", {"BRPC": [990, 1000, 1010]})
        c2 = ps_file(self.tmp / "c2.csv", {"BRPC": [790, 800, 810]})
        self.assertEqual(self.verdict(analysis.compare(b2, c2), "key_ops_per_sec", transport="BRPC")["verdict"],
                         "regressed")
        # k scales the band: with k=0 only the threshold is left
        self.assertEqual(self.verdict(analysis.compare(b, c, k=0), "key_ops_per_sec",
                                      transport="BRPC")["verdict"], "regressed")

    def test_single_repeat_uses_threshold_and_says_so(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000]})
        c = ps_file(self.tmp / "c.csv", {"BRPC": [900]})
        r = self.verdict(analysis.compare(b, c), "key_ops_per_sec", transport="BRPC")
        self.assertEqual(r["verdict"], "regressed")
        self.assertIn("one repeat", r["note"])

    def test_failed_and_missing_cases(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000, 1000], "GRPC": [500, 500]})
        c = ps_file(self.tmp / "c.csv", {"SHM": [2000]}, failures=[("BRPC", 0, "timeout")])
        cmp = analysis.compare(b, c)
        self.assertEqual(self.verdict(cmp, "*", transport="BRPC")["verdict"], "failed")
        self.assertEqual(self.verdict(cmp, "*", transport="GRPC")["verdict"], "missing")
        r = self.verdict(cmp, "*", transport="SHM")
        self.assertEqual((r["verdict"], r["note"]), ("missing", "case not in baseline"))
        self.assertEqual(set(analysis.regressions(cmp)["transport"].astype(str)), {"BRPC"})

    def test_failed_repeat_is_left_out_not_summed_low(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000, 1000, 1000]})
        c = ps_file(self.tmp / "c.csv", {"BRPC": [1000, 1000, 1000]}, failures=[("BRPC", 2, "client_failure")])
        reps = analysis.per_repeat(c)
        self.assertEqual(sorted(reps["repeat_index"].tolist()), [0, 1])
        r = self.verdict(analysis.compare(b, c), "key_ops_per_sec", transport="BRPC")
        self.assertEqual((r["verdict"], r["candidate_repeats"]), ("within noise", 2))

    def test_kv_compare(self):
        b = kv_file(self.tmp / "kb.csv", {("workloada", "kvdb"): [1e6, 1.01e6], ("workloada", "rocksdb"): [1e5, 1e5],
                                          ("workloadc", "lmdb"): [5e5, 5e5]})
        c = kv_file(self.tmp / "kc.csv", {("workloada", "kvdb"): [1.3e6, 1.31e6], ("workloada", "rocksdb"): [7e4, 7.1e4],
                                          ("workloadc", "lmdb"): [None, None]})
        cmp = analysis.compare(b, c)
        self.assertEqual(self.verdict(cmp, "run_throughput_ops_sec", engine="kvdb")["verdict"], "improved")
        self.assertEqual(self.verdict(cmp, "run_p99_us", engine="kvdb")["verdict"], "improved")
        self.assertEqual(self.verdict(cmp, "run_throughput_ops_sec", engine="rocksdb")["verdict"], "regressed")
        self.assertEqual(self.verdict(cmp, "*", engine="lmdb")["verdict"], "failed")
        self.assertEqual(self.verdict(cmp, "load_throughput_ops_sec", engine="kvdb")["verdict"], "within noise")

    def test_kind_mismatch_and_bad_threshold(self):
        b = ps_file(self.tmp / "b.csv", {"BRPC": [1000]})
        k = kv_file(self.tmp / "k.csv", {("workloada", "kvdb"): [1e6]})
        with self.assertRaisesRegex(ValueError, "cannot compare"):
            analysis.compare(b, k)
        with self.assertRaisesRegex(ValueError, "must not be negative"):
            analysis.compare(b, b, threshold_pct=-1)


if __name__ == "__main__":
    unittest.main()
