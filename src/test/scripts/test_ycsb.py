"""The YCSB driver end to end: `python -m recbench.ycsb` output format, workload mixes against
their proportions, batched reads, status lines, and the errors a user can cause."""

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench import _ycsb, errors, workloads
from recbench.ycsb_report import parse_report


def ycsb_cli(*args):
    return subprocess.run([sys.executable, "-m", "recbench.ycsb", *args], capture_output=True,
                          text=True, timeout=120)


class YcsbTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rs_ycsb_test_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_mix(self, workload, db="basic", ops=20000, extra=()):
        props = ["recordcount=2000", f"operationcount={ops}", "threadcount=2", "basic.silent=true",
                 *extra]
        rep = _ycsb.run(db, files=[workloads.resolve(workload)], props=props)
        counts = {}
        for op in rep["run"]["ops"]:
            base = op["name"].split("-NOT")[0].split("-FAILED")[0]
            counts[base] = counts.get(base, 0) + op["count"]
        return rep, counts

    def test_output_format_and_exit_code(self):
        r = ycsb_cli("-load", "-run", "-db", "rocksdb", "-threads", "2", "-P", "workloada",
                     "-p", f"rocksdb.dbname={self.tmp / 'db'}", "-p", "recordcount=500",
                     "-p", "operationcount=800")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        for label in ("Load", "Run"):
            for what in ("runtime(sec)", "operations(ops)", "throughput(ops/sec)"):
                self.assertTrue(any(ln.startswith(f"{label} {what}: ") for ln in lines), (label, what))
        rep = parse_report(r.stdout)
        self.assertEqual(rep["load"]["operations"], 500)
        self.assertEqual(rep["run"]["operations"], 800)
        self.assertEqual(rep["load"]["ops"]["INSERT"]["count"], 500)
        run_ops = rep["run"]["ops"]
        self.assertEqual(run_ops["READ"]["count"] + run_ops["UPDATE"]["count"], 800)
        for k in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
            self.assertIn(k, run_ops["READ"])
        self.assertLessEqual(run_ops["READ"]["p50_us"], run_ops["READ"]["max_us"])
        self.assertIn("cpu_user_s", rep["run"])
        self.assertTrue((self.tmp / "db").is_dir())

    def test_measurementtype_basic_has_no_percentiles(self):
        r = ycsb_cli("-load", "-db", "basic", "-p", "basic.silent=true", "-p", "recordcount=10",
                     "-p", "measurementtype=basic")
        self.assertEqual(r.returncode, 0, r.stderr)
        ins = next(ln for ln in r.stdout.splitlines() if ln.startswith("Load INSERT:"))
        self.assertIn("Count=10", ins)
        self.assertNotIn("p50", ins)

    def test_basic_prints_operations_unless_silent(self):
        r = ycsb_cli("-load", "-db", "basic", "-p", "recordcount=3", "-p", "insertorder=ordered")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("INSERT usertable user1 [ field0=", r.stdout)

    def test_status_lines(self):
        r = ycsb_cli("-load", "-run", "-s", "-db", "basic", "-p", "basic.silent=true",
                     "-p", "recordcount=100", "-p", "operationcount=100")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\d+ sec: 100 operations; .* current ops/sec \[RUN\]")

    def test_workload_mixes(self):
        want = {"workloada": {"READ": 0.5, "UPDATE": 0.5}, "workloadb": {"READ": 0.95, "UPDATE": 0.05},
                "workloadc": {"READ": 1.0}, "workloadd": {"READ": 0.95, "INSERT": 0.05},
                "workloade": {"SCAN": 0.95, "INSERT": 0.05},
                "workloadf": {"READ-MODIFY-WRITE": 0.5}}
        for wl, mix in want.items():
            rep, counts = self.run_mix(wl, db="rocksdb" if wl == "workloade" else "basic",
                                       ops=4000 if wl == "workloade" else 20000,
                                       extra=[f"rocksdb.dbname={self.tmp / wl}"])
            total = rep["run"]["operations"]
            for op, frac in mix.items():
                self.assertAlmostEqual(counts.get(op, 0) / total, frac, delta=0.02, msg=(wl, op))
            if wl == "workloadf":  # RMW = one READ plus one UPDATE, measured separately too
                self.assertAlmostEqual(counts["READ"] / total, 1.0, delta=0.02)
                self.assertEqual(counts["UPDATE"], counts["READ-MODIFY-WRITE"])

    def test_run_inserts_extend_keyspace_and_reads_find_them(self):
        # workload d: inserts during the run; 'latest' reads must target acknowledged records only
        rep, counts = self.run_mix("workloadd", ops=20000)
        self.assertGreater(counts["INSERT"], 0)
        self.assertNotIn("READ-NOTFOUND", [o["name"] for o in rep["run"]["ops"]])
        self.assertEqual(rep["run"]["errors"], 0)

    def test_batched_reads(self):
        rep = _ycsb.run("rocksdb", files=[workloads.resolve("workloadc")],
                        props=["recordcount=1000", "operationcount=1000", "ycsb.batch=true",
                               "ycsb.batch_size=64", f"rocksdb.dbname={self.tmp / 'b'}"])
        ops = {o["name"]: o for o in rep["run"]["ops"]}
        self.assertEqual(rep["run"]["operations"], 1000)
        self.assertEqual(ops["BATCH-READ"]["count"], 16)  # 15 batches of 64 + one of 40
        self.assertNotIn("READ", ops)

    def test_scan_not_supported_is_counted(self):
        rep, _ = self.run_mix("workloade", ops=500)
        names = {o["name"]: o["count"] for o in rep["run"]["ops"]}
        self.assertGreater(names.get("SCAN-NOTSUPPORTED", 0), 400)
        self.assertEqual(rep["run"]["errors"], 0)

    def test_seeds_are_explicit_and_reproducible(self):
        a = _ycsb.run("basic", props=["recordcount=100", "operationcount=3000", "basic.silent=true"])
        b = _ycsb.run("basic", props=["recordcount=100", "operationcount=3000", "basic.silent=true"])
        c = _ycsb.run("basic", props=["recordcount=100", "operationcount=3000", "basic.silent=true",
                                      "ycsb.seed=99"])
        count = lambda r: {o["name"]: o["count"] for o in r["run"]["ops"]}
        self.assertEqual(count(a), count(b))
        self.assertNotEqual(count(a), count(c))

    def test_errors_name_the_input(self):
        r = ycsb_cli("-load", "-db", "nosuchdb")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown db 'nosuchdb'", r.stderr)
        r = ycsb_cli("-load", "-db", "basic", "-p", "fieldcount=ten")
        self.assertEqual(r.returncode, 2)
        self.assertIn("fieldcount=ten (from -p)", r.stderr)
        bad = self.tmp / "bad.properties"
        bad.write_text("recordcount=10\nthis line is wrong\n")
        r = ycsb_cli("-load", "-db", "basic", "-P", str(bad))
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{bad}:2:", r.stderr)
        r = ycsb_cli("-load", "-db", "basic", "-P", "workloadz")
        self.assertEqual(r.returncode, 2)
        self.assertIn("workloadz", r.stderr)
        r = ycsb_cli("-load", "-db", "basic", "-p", "novalue")
        self.assertEqual(r.returncode, 2)
        self.assertIn("-p 'novalue'", r.stderr)
        blocker = self.tmp / "file"
        blocker.write_text("")
        r = ycsb_cli("-load", "-db", "lmdb", "-p", f"lmdb.dbpath={blocker / 'sub'}")
        self.assertEqual(r.returncode, 2)
        self.assertIn("lmdb.dbpath", r.stderr)
        r = ycsb_cli("-load", "-db", "rocksdb")
        self.assertEqual(r.returncode, 2)
        self.assertIn("rocksdb.dbname is not set", r.stderr)
        r = ycsb_cli("-db", "basic")
        self.assertEqual(r.returncode, 2)
        self.assertIn("-load and/or -run", r.stderr)
        with self.assertRaises(errors.InvalidArgument):
            _ycsb.run("basic", props=["requestdistribution=pareto"])

    def test_kvdb_modes(self):
        base = ["recordcount=500", "operationcount=2000", "threadcount=2",
                f"hybridkv.path={self.tmp / 'kv'}"]
        wl = [workloads.resolve("workloada")]
        for extra in ([], ["hybridkv.read_return=parse"], ["hybridkv.mode=compat"],
                      ["hybridkv.synthetic_bytes=512", "hybridkv.read_return=blob"],
                      ["hybridkv.index_type=DRAM_EXTENDIBLE_HASH"],
                      ["ycsb.batch=true", "ycsb.batch_size=32", "readproportion=1",
                       "updateproportion=0"]):
            with self.subTest(extra=extra):
                rep = _ycsb.run("kvdb", files=wl, props=base + extra)
                self.assertEqual(rep["run"]["errors"], 0, rep["run"]["first_error"])
                names = {o["name"] for o in rep["run"]["ops"]}
                self.assertFalse({n for n in names if "NOTFOUND" in n or "FAILED" in n}, names)
        bad = (["hybridkv.synthetic_bytes=64", "hybridkv.read_return=parse"],
               ["hybridkv.mode=fast"], ["hybridkv.index_type=BTREE"],
               ["fieldlengthdistribution=uniform"], ["hybridkv.synthetic_bytes=64", "hybridkv.mode=compat"])
        for extra in bad:
            with self.subTest(bad=extra), self.assertRaises(errors.InvalidArgument) as cm:
                _ycsb.run("kvdb", files=wl, props=base + extra)
            self.assertRegex(str(cm.exception), "hybridkv|fieldlength")

    def test_cceh_value_size_and_reopen(self):
        path = self.tmp / "cceh"
        props = ["recordcount=300", "operationcount=300", f"cceh.path={path}"]
        rep = _ycsb.run("cceh", files=[workloads.resolve("workloadb")], props=props)
        self.assertEqual(rep["run"]["errors"], 0, rep["run"]["first_error"])
        self.assertTrue(any(path.iterdir()))
        # the data survives a reopen: a run without load finds every record
        rep = _ycsb.run("cceh", files=[workloads.resolve("workloadc")], props=props, load=False)
        self.assertEqual([o["name"] for o in rep["run"]["ops"]], ["READ", "ALL"])
        with self.assertRaises(errors.InvalidArgument) as cm:
            _ycsb.run("cceh", props=props + ["cceh.value_size=100"], run=False)
        self.assertIn("cceh.value_size=100", str(cm.exception))

    def test_engines_in_build_info(self):
        import recbench
        feats = recbench.build_info()["features"]
        names = _ycsb.db_names()
        for eng in ("rocksdb", "leveldb", "lmdb", "sqlite", "wiredtiger"):
            self.assertEqual(eng in feats, eng in names, eng)


if __name__ == "__main__":
    unittest.main()
