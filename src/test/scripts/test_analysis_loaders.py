"""recbench.analysis loaders: typed frames from the committed samples, RecStore's own layouts, and
clear errors (file, line, column) for malformed and truncated files."""

import csv
import shutil
import tempfile
import unittest
from pathlib import Path

import pandas as pd

from recbench import analysis
from recbench.analysis import SummaryFormatError

DATA = Path(__file__).resolve().parents[3] / "notebooks" / "data"


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def write(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


class LoaderCase(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_loader_"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def variant(self, src, edit, name="summary.csv"):
        rows = read(src)
        edit(rows)
        return write(self.tmp / name, rows)

    def assertFormatError(self, fn, path, *needles):
        with self.assertRaises(SummaryFormatError) as cm:
            fn(path)
        msg = str(cm.exception)
        self.assertIn(str(path), msg)
        for n in needles:
            self.assertIn(n, msg)


class PSLoaderTest(LoaderCase):
    SRC = DATA / "ps_baseline_summary.csv"

    def test_types(self):
        df = analysis.load_ps_summary(self.SRC)
        self.assertEqual(list(df.columns[:len(analysis.PS_COLUMNS)]), analysis.PS_COLUMNS)
        self.assertIsInstance(df["status"].dtype, pd.CategoricalDtype)
        self.assertEqual(list(df["status"].cat.categories), analysis.PS_STATUSES)
        self.assertIsInstance(df["transport"].dtype, pd.CategoricalDtype)
        self.assertEqual(str(df["client_index"].dtype), "Int64")
        self.assertEqual(df["key_ops_per_sec"].dtype, "float64")
        self.assertEqual(df["p999_us"].dtype, "float64")
        row = df[df["status"] == "success"].iloc[0]
        self.assertEqual(row["server_shard_ips"], ["127.0.0.1"])
        self.assertEqual(len(row["log_path"]), 2)
        skipped = df[df["status"] == "skipped"]
        self.assertTrue(len(skipped) > 0)
        self.assertTrue(skipped["key_ops_per_sec"].isna().all())
        self.assertEqual(df.attrs["kind"], "ps")

    def test_write_csv_round_trip(self):
        df = analysis.load_ps_summary(self.SRC)
        out = analysis.write_csv(df, self.tmp / "again.csv")
        self.assertEqual(read(out)[0], analysis.PS_COLUMNS)
        again = analysis.load_ps_summary(out)
        self.assertEqual(again["log_path"].tolist(), df["log_path"].tolist())
        self.assertEqual(again["status"].tolist(), df["status"].tolist())
        self.assertTrue(((again["key_ops_per_sec"] - df["key_ops_per_sec"]).abs().fillna(0)
                         <= df["key_ops_per_sec"].abs().fillna(0) * 1e-5).all())

    def test_directory_argument(self):
        shutil.copy(self.SRC, self.tmp / "summary.csv")
        self.assertEqual(len(analysis.load_ps_summary(self.tmp)), len(analysis.load_ps_summary(self.SRC)))

    def test_recstore_24_and_25_column_files_load(self):
        def to25(rows):
            for r in rows:
                del r[25:]
        df = analysis.load_ps_summary(self.variant(self.SRC, to25))
        self.assertTrue(df["p999_us"].isna().all())

        def to24(rows):
            for r in rows:
                del r[25:]
                del r[18]  # payload_gbps
        df = analysis.load_ps_summary(self.variant(self.SRC, to24, "s24.csv"))
        self.assertTrue(df["payload_gbps"].isna().all())
        self.assertTrue(df["key_ops_per_sec"].notna().any())

    def test_truncated_row(self):
        def cut(rows):
            rows[3] = rows[3][:10]
        p = self.variant(self.SRC, cut)
        self.assertFormatError(analysis.load_ps_summary, p, "line 4", "value_size", "truncated")

    def test_truncated_header(self):
        def cut(rows):
            rows[:] = [rows[0][:12]]
        p = self.variant(self.SRC, cut)
        self.assertFormatError(analysis.load_ps_summary, p, "client_threads_per_process", "missing")

    def test_wrong_order(self):
        def swap(rows):
            for r in rows:
                r[0], r[1] = r[1], r[0]
        p = self.variant(self.SRC, swap)
        self.assertFormatError(analysis.load_ps_summary, p, "column #1", "'status'", "'transport'")

    def test_not_a_number(self):
        def bad(rows):
            rows[2][17] = "fast"
        p = self.variant(self.SRC, bad)
        self.assertFormatError(analysis.load_ps_summary, p, "line 3", "key_ops_per_sec", "'fast'")

    def test_not_an_integer(self):
        def bad(rows):
            rows[2][4] = "1.5"
        p = self.variant(self.SRC, bad)
        self.assertFormatError(analysis.load_ps_summary, p, "repeat_index", "not an integer")

    def test_unknown_status(self):
        def bad(rows):
            rows[5][1] = "exploded"
        p = self.variant(self.SRC, bad)
        self.assertFormatError(analysis.load_ps_summary, p, "line 6", "status", "exploded", "client_failure")

    def test_empty_and_missing_file(self):
        p = self.tmp / "empty.csv"
        p.write_text("")
        self.assertFormatError(analysis.load_ps_summary, p, "empty")
        self.assertFormatError(analysis.load_ps_summary, self.tmp / "nope.csv", "does not exist")

    def test_header_only_is_an_empty_frame(self):
        p = self.variant(self.SRC, lambda rows: rows.__delitem__(slice(1, None)))
        df = analysis.load_ps_summary(p)
        self.assertEqual(len(df), 0)
        self.assertEqual(list(df.columns[:len(analysis.PS_COLUMNS)]), analysis.PS_COLUMNS)


class KVLoaderTest(LoaderCase):
    SRC = DATA / "kv_baseline_summary.csv"

    def test_types(self):
        df = analysis.load_kv_summary(self.SRC)
        self.assertEqual(list(df.columns[:24]), analysis.KV_COLUMNS)
        self.assertEqual(str(df["exit_code"].dtype), "Int64")
        self.assertEqual(df["run_throughput_ops_sec"].dtype, "float64")
        self.assertIsInstance(df["engine"].dtype, pd.CategoricalDtype)
        self.assertEqual(list(df["status"].cat.categories), ["success", "failure"])
        self.assertIsInstance(df["log_path"].iloc[0], list)

    def test_seed_18_column_file_loads_and_failure_row(self):
        def to18(rows):
            for r in rows:
                del r[18:]
            rows[1][8] = "1"
            rows[1][14] = ""
            rows[1][17] = "rocksdb: IO error: lock held"
        df = analysis.load_kv_summary(self.variant(self.SRC, to18))
        self.assertEqual(df["status"].iloc[0], "failure")
        self.assertTrue(df["run_p99_us"].isna().all())
        self.assertEqual(df["error_tail"].iloc[0], "rocksdb: IO error: lock held")

    def test_missing_exit_code(self):
        def bad(rows):
            rows[2][8] = ""
        p = self.variant(self.SRC, bad)
        self.assertFormatError(analysis.load_kv_summary, p, "line 3", "exit_code")

    def test_truncated_row(self):
        def cut(rows):
            rows[-1] = rows[-1][:5]
        p = self.variant(self.SRC, cut)
        self.assertFormatError(analysis.load_kv_summary, p, "line 29", "operation_count", "truncated")

    def test_bad_number(self):
        def bad(rows):
            rows[1][14] = "12,3"
        p = self.variant(self.SRC, bad)
        with self.assertRaises(SummaryFormatError):
            analysis.load_kv_summary(p)

    def test_wrong_kind(self):
        self.assertFormatError(analysis.load_kv_summary, DATA / "ps_baseline_summary.csv", "column #1",
                               "'workload'")
        self.assertEqual(analysis.detect_kind(self.SRC), "kv")
        self.assertEqual(analysis.detect_kind(DATA / "ps_baseline_summary.csv"), "ps")
        p = write(self.tmp / "other.csv", [["a", "b"], ["1", "2"]])
        self.assertFormatError(analysis.detect_kind, p, "neither")


class TotalsLoaderTest(LoaderCase):
    def test_runner_totals_sample(self):
        df = analysis.load_ps_totals(DATA / "ps_baseline_summary_totals.csv")
        self.assertEqual(set(df["row_type"]), {"repeat", "mean"})
        mean_run = df[(df["row_type"] == "mean") & (df["phase"] == "run") & (df["transport"] == "BRPC")]
        self.assertEqual(len(mean_run), 1)
        # the runner's per-repeat total equals our per_repeat() sum of the same summary.csv
        reps = analysis.per_repeat(analysis.load_ps_summary(DATA / "ps_baseline_summary.csv"))
        ours = reps[(reps["transport"] == "BRPC") & (reps["phase"] == "run")].sort_values("repeat_index")
        theirs = df[(df["row_type"] == "repeat") & (df["phase"] == "run") & (df["transport"] == "BRPC")]
        theirs = theirs.sort_values("repeat_index")
        for col in ("key_ops_per_sec", "client_cpu_s", "keys_per_cpu_sec"):
            for a, b in zip(ours[col], theirs[col]):
                self.assertAlmostEqual(a, b, delta=abs(b) * 1e-3 + 1e-3, msg=col)
        # p99: per_repeat() takes the worst client's; the runner merges the clients' histograms
        # exactly (latency_merge=exact), which is never above the worst client's
        self.assertEqual(set(theirs["latency_merge"]), {"exact"})
        for a, b in zip(ours["p99_us"], theirs["p99_us"]):
            self.assertLessEqual(b, a + 1e-3)

    def test_totals_file(self):
        # the runner's layout: per-repeat rows, then a "mean" row per transport x phase
        p = write(self.tmp / "summary_totals.csv", [
            ["transport", "repeat_index", "phase", "row_kind", "status", "clients_ok", "clients_failed",
             "window_seconds", "key_ops_per_sec", "p99_us", "client_cpu_s", "repeats",
             "key_ops_per_sec_stdev"],
            ["BRPC", "0", "run", "fair", "success", "2", "0", "2.0", "2100000.5", "930.1", "3.2", "1", ""],
            ["BRPC", "1", "run", "fair", "client_failure", "1", "1", "2.0", "", "", "", "1", ""],
            ["BRPC", "mean", "run", "fair", "success", "3", "1", "2.0", "2100000.5", "930.1", "3.2", "1", "0"],
            ["RDMA", "mean", "run", "", "no_success", "0", "0", "", "", "", "", "0", ""],
        ])
        df = analysis.load_ps_totals(p)
        self.assertEqual(str(df["repeat_index"].dtype), "Int64")
        self.assertEqual(df["row_type"].tolist(), ["repeat", "repeat", "mean", "mean"])
        self.assertTrue(pd.isna(df["repeat_index"].iloc[2]))
        self.assertEqual(df["key_ops_per_sec"].dtype, "float64")
        self.assertEqual(df["key_ops_per_sec_stdev"].dtype, "float64")
        self.assertTrue(pd.isna(df["p99_us"].iloc[1]))
        self.assertEqual(df["status"].iloc[3], "no_success")
        self.assertEqual(analysis.detect_kind(p), "ps_totals")
        bad = write(self.tmp / "bad_totals.csv", [["transport", "repeat_index"], ["BRPC", "0"]])
        self.assertFormatError(analysis.load_ps_totals, bad, "'phase'")
        bad = write(self.tmp / "bad2.csv", [["transport", "phase", "repeat_index"], ["BRPC", "run", "first"]])
        self.assertFormatError(analysis.load_ps_totals, bad, "line 2", "repeat_index", "'first'")


class SweepLoaderTest(LoaderCase):
    SRC = DATA / "sweep_batch_keys.csv"

    def test_sample_and_sweeps_from_before_the_later_columns(self):
        df = analysis.load_sweep(self.SRC)
        self.assertEqual(read(self.SRC)[0][-3:], ["host_steal_pct", "slowest_thread_share",
                                                  "fastest_thread_share"])
        self.assertEqual(df["fastest_thread_share"].dtype, "float64")
        self.assertEqual(len(df), len(read(self.SRC)) - 1)
        # written before the thread shares (2026-12-02), and before host steal too: both load,
        # the missing columns empty
        for drop, name in ((2, "old1.csv"), (3, "old2.csv")):
            cut = slice(-drop, None)
            old = self.variant(self.SRC, lambda rows, cut=cut: [r.__delitem__(cut) for r in rows],
                               name)
            self.assertEqual(len(read(old)[0]), len(analysis.SWEEP_COLUMNS) - drop)
            df = analysis.load_sweep(old)
            self.assertTrue(df["slowest_thread_share"].isna().all())
            self.assertEqual(df["host_steal_pct"].isna().all(), drop == 3)
        stolen = self.variant(self.SRC, lambda rows: [r.__setitem__(-3, "12.5") for r in rows[1:]],
                              "sweep2.csv")
        self.assertEqual(analysis.load_sweep(stolen)["host_steal_pct"].tolist()[0], 12.5)
        bad = self.variant(self.SRC, lambda rows: rows[1].__setitem__(-3, "a lot"), "sweep3.csv")
        self.assertFormatError(analysis.load_sweep, bad, "host_steal_pct", "'a lot'")
        shares = self.variant(self.SRC, lambda rows: rows[1].__setitem__(-2, "0.59"), "sweep4.csv")
        self.assertEqual(analysis.load_sweep(shares)["slowest_thread_share"].tolist()[0], 0.59)

        def swap(rows):
            rows[0][-2:] = rows[0][-1], rows[0][-2]
        self.assertFormatError(analysis.load_sweep, self.variant(self.SRC, swap, "sweep5.csv"),
                               "'fastest_thread_share'", "expected 'slowest_thread_share'")


class EventualDatTest(LoaderCase):
    def test_dat(self):
        p = self.tmp / "x.dat"
        p.write_text("#<num_waiters>\t<test_duration_sec>\t<interval_msec>\t<ops/s>\t<cpu_time_sec>\n"
                     "100\t5\t1\t99000.5\t0.12\n200\t5\t1\t190000\t0.3\n")
        df = analysis.load_eventual_dat(p)
        self.assertEqual(df["num_waiters"].tolist(), [100, 200])
        p.write_text("100 5 1 fast 0.1\n")
        self.assertFormatError(analysis.load_eventual_dat, p, "line 1")
        p.write_text("100 5 1\n")
        self.assertFormatError(analysis.load_eventual_dat, p, "3 fields")
        p.write_text("# only a header\n")
        self.assertFormatError(analysis.load_eventual_dat, p, "no data rows")


if __name__ == "__main__":
    unittest.main()
