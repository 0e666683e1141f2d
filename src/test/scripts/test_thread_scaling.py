"""tools/benchmarks/bench_thread_scaling.py: the goal arithmetic (fraction of the best keys/s,
Little's-law latency of the in-flight count, the gather bound's fraction) on known sweep rows,
argument checks, and a small end-to-end run through the real PS runner (brpc, 1 and 2 client
threads, 1 server thread) and the real engine (the gather bound)."""

import csv
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench import analysis, procfs
from recbench.bench import thread_scaling as ts

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "benchmarks" / "bench_thread_scaling.py"


def sweep_row(transport, threads, rate, p99):
    return dict(param="client-threads-per-process", value=str(threads), transport=transport,
                status="success", repeats=1, key_ops_per_sec=rate, key_ops_per_sec_std=0.0,
                p99_us=p99, client_cpu_s=1.0, server_cpu_s=2.0, keys_per_cpu_sec=rate / 3,
                summary_csv="x")


class GoalArithmeticTest(unittest.TestCase):
    def test_fraction_and_littles_law(self):
        # 100 keys per request, depth 2: 16 threads keep 32 requests in flight; at 1.6M keys/s
        # (16000 requests/s) Little's law gives W = 32 / 16000 s = 2000 us
        rows = ts.scaling_rows([sweep_row("SHM", 1, 1.0e6, 300.0), sweep_row("SHM", 16, 1.6e6, 3000.0),
                                sweep_row("SHM", 4, 2.0e6, 900.0), sweep_row("BRPC", 1, 1.0e6, 100.0),
                                sweep_row("BRPC", 16, 0.5e6, 20000.0)],
                               server_threads=2, prefetch_depth=2, batch_keys=100)
        at16 = {r["transport"]: r for r in rows if r["client_threads"] == 16}
        self.assertEqual(at16["SHM"]["in_flight_requests"], 32)
        self.assertAlmostEqual(at16["SHM"]["little_us"], 2000.0)
        self.assertAlmostEqual(at16["SHM"]["frac_of_best"], 0.8)
        self.assertAlmostEqual(at16["SHM"]["p99_over_little"], 1.5)
        goals = {g["transport"]: g for g in ts.goal_rows(rows)}
        self.assertEqual(goals["SHM"]["best_client_threads"], 4)
        self.assertFalse(goals["SHM"]["throughput_goal_met"])  # 0.8 < 0.9
        self.assertTrue(goals["SHM"]["p99_goal_met"])          # 1.5 <= 2
        self.assertFalse(goals["BRPC"]["throughput_goal_met"])
        self.assertFalse(goals["BRPC"]["p99_goal_met"])        # W = 6400 us, p99 3.1 x W
        self.assertIn("SHM", ts.goals_text(ts.goal_rows(rows)))
        self.assertIn("; CPU AMD EPYC (family 25 model 1)",
                      ts.goals_text(ts.goal_rows(rows), "AMD EPYC (family 25 model 1)"))

    def test_a_point_with_host_steal_is_flagged(self):
        quiet, stolen = sweep_row("SHM", 1, 1.0e6, 300.0), sweep_row("SHM", 16, 0.5e6, 3000.0)
        quiet["host_steal_pct"], stolen["host_steal_pct"] = 0.4, 31.2
        rows = ts.scaling_rows([quiet, stolen], server_threads=2, prefetch_depth=2, batch_keys=100)
        (g,) = ts.goal_rows(rows)
        self.assertEqual(g["host_steal_pct_at_max"], 31.2)
        text = ts.goals_text([g], rows=rows)
        self.assertIn("warning: host steal reached 5 % or more at 1 point(s) (worst 31.2 %: SHM, "
                      "2 server / 16 client threads)", text)
        self.assertRegex(text.splitlines()[2], r" 31\.2 +-$")
        stolen["host_steal_pct"] = 1.0
        rows = ts.scaling_rows([quiet, stolen], server_threads=2, prefetch_depth=2, batch_keys=100)
        self.assertNotIn("warning", ts.goals_text(ts.goal_rows(rows), rows=rows))

    def test_thread_shares_at_the_largest_count(self):
        one, many = sweep_row("GRPC", 1, 1.0e6, 300.0), sweep_row("GRPC", 16, 0.9e6, 80000.0)
        one.update(slowest_thread_share=1.0, fastest_thread_share=1.0)
        many.update(slowest_thread_share=0.59, fastest_thread_share=1.22)
        rows = ts.scaling_rows([one, many], server_threads=2, prefetch_depth=4, batch_keys=500)
        self.assertEqual([r["slowest_thread_share"] for r in rows], [1.0, 0.59])
        (g,) = ts.goal_rows(rows)
        self.assertEqual((g["slowest_thread_share_at_max"], g["fastest_thread_share_at_max"]),
                         (0.59, 1.22))
        text = ts.goals_text([g])
        self.assertIn("threads", text.splitlines()[1])
        self.assertTrue(text.splitlines()[2].endswith(" 0.59-1.22"), text)
        self.assertIn("p99 misses: GRPC (2 server threads): stragglers (stragglers: the "
                      "slowest client thread below 0.85 of the mean", text)
        many["slowest_thread_share"] = 0.97  # fair, and p99 still 2.25 W: every thread waits
        (g,) = ts.goal_rows(ts.scaling_rows([one, many], server_threads=2, prefetch_depth=4,
                                            batch_keys=500))
        self.assertIn("p99 misses: GRPC (2 server threads): every thread", ts.goals_text([g]))
        del many["slowest_thread_share"]  # a sweep.csv from before the column
        (g,) = ts.goal_rows(ts.scaling_rows([one, many], server_threads=2, prefetch_depth=4,
                                            batch_keys=500))
        self.assertTrue(ts.goals_text([g]).splitlines()[2].endswith(" -"))
        self.assertIn("GRPC (2 server threads): no thread counts", ts.goals_text([g]))

    def test_failed_point_fails_the_goal(self):
        rows = ts.scaling_rows([sweep_row("GRPC", 1, 1.0e6, 100.0),
                                dict(param="client-threads-per-process", value="16", transport="GRPC",
                                     status="failed", repeats=0)],
                               server_threads=1, prefetch_depth=1, batch_keys=10)
        (g,) = ts.goal_rows(rows)
        self.assertFalse(g["throughput_goal_met"])
        self.assertFalse(g["p99_goal_met"])
        self.assertIn("no successful run", ts.goals_text([g]))

    def test_paired_fractions_round_by_round(self):
        # round 2's drift slowed both points alike: paired, it is 0.9 like the others; a round
        # one point lacks (its runner failed) is left out
        best = {1: 10.0, 2: 6.0, 3: 9.0, 4: 8.0}
        at_max = {1: 9.0, 2: 5.4, 3: 6.3}
        self.assertEqual([round(f, 3) for f in ts.paired_fractions(best, at_max)], [0.9, 0.9, 0.7])
        self.assertEqual(ts.paired_fractions({1: 0.0}, {1: 1.0}), [])

    def test_goals_from_the_rates_per_round(self):
        # 1, 2 and 16 client threads in 3 rounds; 2 threads has the best median (11) thanks to
        # one round, the other rounds pick 1 or 2 (recbench.analysis.selection's example)
        per = {1: [10.0, 10.0, 10.0], 2: [12.0, 11.0, 9.0], 16: [10.0, 10.0, 10.0]}
        rows = ts.scaling_rows([sweep_row("SHM", t, sorted(v)[1], 500.0) for t, v in per.items()],
                               2, 4, 100)
        goals = ts.goal_rows(rows)
        rounds = [dict(transport="SHM", server_threads=2, client_threads=t, round=k + 1,
                       key_ops_per_sec=v[k]) for t, v in per.items() for k in range(3)]
        rounds.append(dict(transport="BRPC", server_threads=2, client_threads=1, round=1,
                           key_ops_per_sec=99.0))  # another configuration's: not mixed in
        ts.add_round_fractions(goals, rounds)
        (g,) = goals
        self.assertAlmostEqual(g["frac_of_best_at_max"], 10 / 11)
        self.assertEqual(g["frac_of_best_by_round"], "0.833;0.909;1.111")
        self.assertEqual(g["rounds_at_throughput_goal"], "2/3")
        self.assertEqual(g["held_out_best_by_round"], "1;2;2")
        self.assertEqual(g["frac_of_best_held_out"], 1.0)
        self.assertTrue(g["held_out_goal_met"])
        self.assertAlmostEqual(g["round_spread"], analysis.round_spread(
            {t: dict(enumerate(v, 1)) for t, v in per.items()}))
        self.assertEqual((g["flat_pass_rate"], g["flat_pass_rate_held_out"]),
                         analysis.pass_rates(g["round_spread"], 3, 3, ts.THROUGHPUT_GOAL))

    def test_held_out_lines_under_the_goals(self):
        rows = ts.scaling_rows([sweep_row("SHM", 1, 1.0e6, 300.0), sweep_row("SHM", 16, 0.9e6, 4000.0)],
                               2, 2, 100)
        (g,) = ts.goal_rows(rows)
        self.assertNotIn("held out", ts.goals_text([g]))  # one round: nothing to hold out
        g.update(frac_of_best_held_out=0.93, held_out_best_by_round="1;16;1", held_out_goal_met=True,
                 round_spread=0.12, flat_pass_rate=0.6, flat_pass_rate_held_out=0.82)
        line = ts.goals_text([g]).splitlines()[-1]
        self.assertEqual(line, "  SHM         2 server threads: held out 0.93 (yes; best by round "
                               "1;16;1), spread 12%, flat 60% / 82%")

    def test_gather_bound_beside_the_goals(self):
        rows = ts.scaling_rows([sweep_row("SHM", 1, 1.0e6, 300.0), sweep_row("SHM", 4, 1.2e6, 900.0),
                                sweep_row("SHM", 16, 0.9e6, 4000.0)], 1, 2, 100)
        goals = ts.goal_rows(rows)
        gather = [dict(client_threads=1, gather_key_ops_per_sec=20e6),
                  dict(client_threads=4, gather_key_ops_per_sec=19e6),
                  dict(client_threads=16, gather_key_ops_per_sec=15.2e6)]
        ts.add_gather(rows, goals, gather)
        self.assertEqual([r["gather_key_ops_per_sec"] for r in rows], [20e6, 19e6, 15.2e6])
        (g,) = goals
        # the best point (4 threads) against the largest count (16): 15.2 / 19
        self.assertEqual(g["best_client_threads"], 4)
        self.assertAlmostEqual(g["gather_frac_at_max"], 0.8)
        text = ts.goals_text(goals)
        self.assertIn(" 0.80 ", text.splitlines()[2])
        self.assertIn("gather: the engine alone", text.splitlines()[0])
        # a thread count the gather did not measure leaves the fraction out
        goals = ts.goal_rows(rows)
        ts.add_gather(rows, goals, gather[:2])
        self.assertNotIn("gather_frac_at_max", goals[0])
        self.assertNotIn("gather:", ts.goals_text(goals).splitlines()[0])

    def test_gather_bound_takes_the_runners_storage_flags(self):
        self.assertEqual(ts.runner_storage_flags([]), ("DRAM_EXTENDIBLE_HASH", "auto"))
        self.assertEqual(ts.runner_storage_flags(["--index-type", "DRAM_PET_HASH", "--huge-pages=off",
                                                  "--transport-options", "x"]),
                         ("DRAM_PET_HASH", "off"))
        # a profile's index where no flag names one, the flag where one does
        self.assertEqual(ts.runner_storage_flags(["--profile", "rdma-capacity"])[0], "DRAM_PET_HASH")
        self.assertEqual(ts.runner_storage_flags(["--profile", "rdma-capacity", "--index-type=DRAM"])[0],
                         "DRAM")
        cfg = ts.gather_config("DRAM_PET_HASH", "off", 1000, 64, 10, out_buffers=12)
        self.assertEqual((cfg["threads"], cfg["read_mode"], cfg["out_buffers"], cfg["batch_keys"]),
                         (1, "batch_get_flat", 12, 10))

    def test_bad_thread_lists(self):
        for text in ("", "0,1", "1,1", "a"):
            with self.assertRaises(ValueError):
                ts.parse_ints(text, "--client-threads")
        self.assertEqual(ts.parse_ints("4,1,2", "--server-threads"), [1, 2, 4])

    def test_swept_flags_are_refused(self):
        r = subprocess.run([sys.executable, str(TOOL), "--client-threads-per-process", "3"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--client-threads", r.stderr)
        r = subprocess.run([sys.executable, str(TOOL), "--rounds", "0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--rounds", r.stderr)
        out = Path(tempfile.mkdtemp(prefix="rb_scaling_")) / "out"
        try:  # the gather bound runs first, so a bad index type stops the run before any point
            r = subprocess.run([sys.executable, str(TOOL), "--index-type", "NO_SUCH_INDEX",
                                "--out-dir", str(out)], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2)
            self.assertIn("the gather bound (--index-type NO_SUCH_INDEX, --huge-pages auto)", r.stderr)
            self.assertIn("--no-gather-bound", r.stderr)
            self.assertFalse(out.exists())  # nothing created
            if all(Path(f"/proc/sys/vm/{k}").read_text().strip() == "0"
                   for k in ("nr_hugepages", "nr_overcommit_hugepages")):
                # the engine cannot run (no hugetlb pool for explicit pages): the same, named
                r = subprocess.run([sys.executable, str(TOOL), "--huge-pages", "explicit",
                                    "--out-dir", str(out)], capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("--huge-pages explicit): rs_kv_open:", r.stderr)
                self.assertIn("hugetlb pool", r.stderr)
                self.assertFalse(out.exists())
        finally:
            shutil.rmtree(out.parent)


class ThreadScalingEndToEndTest(unittest.TestCase):
    def test_small_run_through_the_runner(self):
        out = Path(tempfile.mkdtemp(prefix="rb_scaling_"))
        try:
            r = subprocess.run([sys.executable, str(TOOL), "--transports", "brpc", "--client-threads",
                                "1,2", "--server-threads", "1", "--runtime-seconds", "1",
                                "--warmup-seconds", "0", "--record-count", "2000", "--batch-keys", "16",
                                "--prefetch-depth", "2", "--rounds", "2", "--out-dir", str(out)],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for t in (1, 2):  # each point ran once per round
                for n in (1, 2):
                    self.assertTrue((out / "server_threads_1" / f"client-threads-per-process_{t}" /
                                     f"round_{n}" / "summary.csv").exists(), (t, n))
            with open(out / "thread_scaling.csv") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(sorted(int(x["client_threads"]) for x in rows), [1, 2])
            self.assertEqual({x["transport"] for x in rows}, {"BRPC"})
            for x in rows:
                self.assertEqual(int(x["in_flight_requests"]), 2 * int(x["client_threads"]))
                if x["status"] == "success":
                    self.assertGreater(float(x["key_ops_per_sec"]), 0)
                    self.assertTrue(0.0 <= float(x["host_steal_pct"]) <= 100.0, x)
                    # ps_bench's per-thread batch counts: the slowest at most the mean, the
                    # fastest at least it, and one thread is its own mean
                    lo, hi = float(x["slowest_thread_share"]), float(x["fastest_thread_share"])
                    self.assertTrue(0.0 < lo <= 1.0 <= hi, x)
                    if x["client_threads"] == "1":
                        self.assertEqual((lo, hi), (1.0, 1.0))
                    self.assertAlmostEqual(float(x["little_us"]),
                                           int(x["in_flight_requests"]) * 16
                                           / float(x["key_ops_per_sec"]) * 1e6, delta=1.0)
            with open(out / "thread_scaling_gather.csv") as f:
                gather = {int(x["client_threads"]): x for x in csv.DictReader(f)}
            self.assertEqual(sorted(gather), [1, 2])
            for t, x in gather.items():  # 2 in flight per thread, 16 keys x 512 B each
                self.assertEqual((int(x["in_flight_requests"]), int(x["out_buffer_bytes"])),
                                 (2 * t, 2 * t * 16 * 512))
                self.assertEqual(x["index_type"], "DRAM_EXTENDIBLE_HASH")
                # one rate per round, and the point's figure is their median (2 rounds: the
                # mean), in thread_scaling_gather.csv's 6 significant digits
                by_round = [float(v) for v in x["gather_key_ops_per_sec_by_round"].split(";")]
                self.assertEqual(len(by_round), 2)
                med = sum(by_round) / 2
                self.assertAlmostEqual(float(x["gather_key_ops_per_sec"]), med, delta=med * 1e-5)
            for x in rows:
                self.assertEqual(x["gather_key_ops_per_sec"],
                                 gather[int(x["client_threads"])]["gather_key_ops_per_sec"])
            with open(out / "thread_scaling_goals.csv") as f:
                (goal,) = list(csv.DictReader(f))
            if goal["best_client_threads"]:
                self.assertAlmostEqual(
                    float(goal["gather_frac_at_max"]),
                    float(gather[2]["gather_key_ops_per_sec"])
                    / float(gather[int(goal["best_client_threads"])]["gather_key_ops_per_sec"]),
                    delta=1e-4)
            self.assertEqual((goal["transport"], goal["max_client_threads"]), ("BRPC", "2"))
            self.assertIn(goal["throughput_goal_met"], ("yes", "no"))
            if all(x["status"] == "success" for x in rows):
                # both rounds paired; each point's rounds pool to its keys/s (2 values: the mean)
                fr = [float(f) for f in goal["frac_of_best_by_round"].split(";")]
                self.assertEqual(len(fr), 2, goal)
                self.assertTrue(all(f > 0 for f in fr), goal)
                if goal["best_client_threads"] == goal["max_client_threads"]:
                    self.assertEqual(fr, [1.0, 1.0])
                self.assertEqual(goal["rounds_at_throughput_goal"],
                                 f"{sum(f >= ts.THROUGHPUT_GOAL for f in fr)}/2")
                # held out: each round against the point the other round calls best; the
                # rounds file has every point's rate per round (6 significant digits)
                rates = {int(x["client_threads"]): ts.round_rates(x["summary_csv"], "BRPC")
                         for x in rows}
                with open(out / "thread_scaling_rounds.csv") as f:
                    written = [(x["transport"], x["server_threads"], int(x["client_threads"]),
                                int(x["round"]), float(x["key_ops_per_sec"]))
                               for x in csv.DictReader(f)]
                self.assertEqual([w[:4] for w in written],
                                 [("BRPC", "1", t, k) for t in (1, 2) for k in (1, 2)])
                for _, _, t, k, v in written:
                    self.assertAlmostEqual(v, rates[t][k], delta=rates[t][k] * 1e-5)
                other = {1: 2, 2: 1}
                picks = [max(sorted(rates), key=lambda t: rates[t][other[r]]) for r in (1, 2)]
                self.assertEqual(goal["held_out_best_by_round"], ";".join(map(str, picks)))
                held = [rates[2][r] / rates[p][r] for r, p in zip((1, 2), picks)]
                self.assertAlmostEqual(float(goal["frac_of_best_held_out"]), sum(held) / 2,
                                       delta=1e-5)
                self.assertEqual(goal["held_out_goal_met"],
                                 "yes" if sum(held) / 2 >= ts.THROUGHPUT_GOAL else "no")
                self.assertAlmostEqual(float(goal["round_spread"]),
                                       analysis.round_spread(rates), delta=1e-5)
                for col in ("flat_pass_rate", "flat_pass_rate_held_out"):
                    self.assertTrue(0.0 <= float(goal[col]) <= 1.0, goal)
                self.assertIn("held out ", r.stdout)
                for x in rows:
                    by_round = ts.round_rates(x["summary_csv"], "BRPC")
                    self.assertEqual(sorted(by_round), [1, 2], x)
                    # thread_scaling.csv keeps 6 significant digits
                    rate = float(x["key_ops_per_sec"])
                    self.assertAlmostEqual(sum(by_round.values()) / 2, rate, delta=rate * 1e-5)
            self.assertIn("goals at the largest client thread count", r.stdout)
            congestion = procfs.tcp_congestion_control()
            if congestion:  # the host's conditions beside the CPU: bbr paces every connection
                self.assertIn(f"; TCP congestion control {congestion}", r.stdout)
            if any(x["status"] == "success" for x in rows):  # a point may fail under load
                self.assertIn("rate_png=", r.stdout)
                self.assertTrue((out / "server_threads_1" / "sweep.rate.png").read_bytes()
                                .startswith(b"\x89PNG"), r.stdout)
        finally:
            shutil.rmtree(out)


if __name__ == "__main__":
    unittest.main()
