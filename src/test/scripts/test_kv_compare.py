"""The KV compare runner end to end on small counts: every engine runs in its own data
directory, summary.csv has exactly the documented columns, a failing engine does not stop the
others and makes the exit status 1; bad flags give clear errors; --dry-run runs nothing."""

import csv
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench.bench import kvengine_compare

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "benchmarks" / "run_kvengine_compare.py"
COLUMNS = ["workload", "engine", "db", "repeat", "record_count", "operation_count", "threads",
           "phase", "exit_code", "load_runtime_sec", "load_operations", "load_throughput_ops_sec",
           "run_runtime_sec", "run_operations", "run_throughput_ops_sec", "data_path", "log_path",
           "error_tail", "read_mode", "batch_keys", "run_p50_us", "run_p99_us", "cpu_user_s",
           "cpu_sys_s"]


def compare(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300)


def read_rows(out: Path):
    with open(out / "summary.csv", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, r)) for r in reader]


class KvCompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rs_kvcmp_test_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_all_engines_end_to_end(self):
        out = self.tmp / "out"
        r = compare("--engines", *kvengine_compare.ENGINES, "--workloads", "workloada", "workloade",
                    "--record-count", "300", "--operation-count", "300", "--threads", "2",
                    "--output-dir", str(out))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        header, rows = read_rows(out)
        self.assertEqual(header, COLUMNS)
        self.assertEqual(len(rows), 2 * len(kvengine_compare.ENGINES))
        for row in rows:
            with self.subTest(engine=row["engine"], workload=row["workload"]):
                self.assertEqual(row["exit_code"], "0")
                self.assertEqual(row["phase"], "load-run")
                self.assertEqual(int(row["load_operations"]), 300)
                self.assertEqual(int(row["run_operations"]), 300)
                self.assertGreater(float(row["run_throughput_ops_sec"]), 0)
                self.assertGreater(float(row["run_p99_us"]), 0)
                self.assertLessEqual(float(row["run_p50_us"]), float(row["run_p99_us"]))
                self.assertNotEqual(row["cpu_user_s"], "")
                self.assertEqual(row["read_mode"], "get")
                self.assertEqual(row["error_tail"], "")
                data = Path(row["data_path"])
                self.assertEqual(data.parent, out / "data")
                self.assertEqual(data.name, f"{row['workload']}_{row['engine']}_r0")
                self.assertTrue(data.is_dir())
                log = Path(row["log_path"]).read_text()
                self.assertIn("command: ", log)
                self.assertIn("Run throughput(ops/sec)", log)
                if row["engine"] in ("rocksdb", "leveldb", "lmdb", "sqlite", "wiredtiger", "cceh"):
                    self.assertTrue(any(data.rglob("*")), f"{row['engine']} wrote nothing in {data}")
        self.assertIn("run ops/s", r.stdout)  # console table
        self.assertTrue((out / "run_config.json").exists())

    def test_batch_mode_and_repeat_and_failing_engine(self):
        out = self.tmp / "out"
        r = compare("--engines", "kvdb", "basic", "lmdb", "rocksdb", "--workloads", "c", "--record-count",
                    "2000", "--operation-count", "400", "--read-mode", "batch_get_flat",
                    "--batch-keys", "50", "--repeat", "2", "--engine-prop", "lmdb:lmdb.mapsize=8192",
                    "--output-dir", str(out))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        _, rows = read_rows(out)
        self.assertEqual(len(rows), 8)
        for row in rows:
            self.assertEqual(row["read_mode"], "batch_get_flat")
            self.assertEqual(row["batch_keys"], "50")
            if row["engine"] == "kvdb":  # recbench.kv_bench's batch_get_flat
                self.assertEqual(row["exit_code"], "0", row["error_tail"])
                self.assertEqual(row["db"], "kv_bench")
                self.assertEqual(row["run_operations"], "400")
                self.assertGreater(float(row["run_p99_us"]), 0)
                log = Path(row["log_path"]).read_text()
                self.assertIn("--read_mode=batch_get_flat --batch_keys=50", log)
                self.assertIn("YCSB_RESULT", log)
            elif row["engine"] == "lmdb":
                self.assertNotEqual(row["exit_code"], "0")
                self.assertIn("lmdb", row["error_tail"])
                self.assertIn("mapsize", row["error_tail"])
            else:
                self.assertEqual(row["exit_code"], "0", row["error_tail"])
                self.assertIn("BATCH-READ", Path(row["log_path"]).read_text())
        self.assertEqual(sorted({row["repeat"] for row in rows}), ["0", "1"])

    def test_fresh_data_dir_unless_keep_data(self):
        out = self.tmp / "out"
        stale = out / "data" / "workloada_basic_r0" / "stale"
        stale.parent.mkdir(parents=True)
        stale.write_text("old")
        args = ["--engines", "basic", "--record-count", "10", "--operation-count", "10",
                "--output-dir", str(out)]
        self.assertEqual(compare(*args, "--keep-data").returncode, 0)
        self.assertTrue(stale.exists())
        self.assertEqual(compare(*args).returncode, 0)
        self.assertFalse(stale.exists())

    def test_dry_run_runs_nothing(self):
        out = self.tmp / "out"
        r = compare("--engines", "rocksdb", "sqlite", "--workloads", "a", "--output-dir", str(out),
                    "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"rocksdb.dbname={out}/data/workloada_rocksdb_r0", r.stdout)
        self.assertIn(f"sqlite.dbpath={out}/data/workloada_sqlite_r0/ycsb.sqlite3", r.stdout)
        self.assertFalse(out.exists())

    def test_bad_input_errors(self):
        r = compare("--engines", "mongodb", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown engine 'mongodb'", r.stderr)
        r = compare("--engines", "basic", "--engine-prop", "rocksdb:rocksdb.destroy=true", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not in --engines", r.stderr)
        r = compare("--engines", "basic", "--engine-prop", "basic-silent", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("ENGINE:KEY=VALUE", r.stderr)
        r = compare("--engines", "basic", "--extra-prop", "fieldcount", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--extra-prop 'fieldcount'", r.stderr)
        r = compare("--engines", "basic", "--workloads", "workloadq", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("workloadq", r.stderr)
        blocker = self.tmp / "blocker"
        blocker.write_text("")
        r = compare("--engines", "basic", "--output-dir", str(blocker / "out"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("not writable", r.stderr)

    def test_bad_property_fails_the_row_with_its_message(self):
        out = self.tmp / "out"
        r = compare("--engines", "basic", "rocksdb", "--record-count", "10", "--operation-count", "10",
                    "--extra-prop", "requestdistribution=pareto", "--output-dir", str(out))
        self.assertEqual(r.returncode, 1)
        _, rows = read_rows(out)
        for row in rows:
            self.assertEqual(row["exit_code"], "2")
            self.assertIn("requestdistribution=pareto", row["error_tail"])
            self.assertNotIn(",", row["error_tail"])
        for line in (out / "summary.csv").read_text().splitlines():
            self.assertEqual(line.count(","), len(COLUMNS) - 1)  # no quoted cells


if __name__ == "__main__":
    unittest.main()
