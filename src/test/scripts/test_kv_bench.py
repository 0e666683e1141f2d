"""benchmark_kv_engine (`python -m recbench.kv_bench`): RecStore's result lines and keys, counted
and timed runs, every read mode and index type, the ceiling mode, and flag errors that name the
flag."""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from recbench import kv_bench
from recbench.cpuinfo import cpu_model

ROOT = Path(__file__).resolve().parents[3]
LOAD_KEYS = ["records", "threads", "seconds", "ops", "throughput_ops_sec"]
RUN_KEYS = ["workload", "distribution", "zipfian_alpha", "read_mode", "threads", "records",
            "runtime_s", "ops", "throughput_ops_sec", "read_ops", "update_ops"]
NEW_KEYS = ["p50_us", "p95_us", "p99_us", "p999_us", "max_us", "cpu_user_s", "cpu_sys_s"]


def bench(*flags):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "recbench.kv_bench", *flags], capture_output=True,
                          text=True, env=env, timeout=120)


def parse(line):
    tag, *pairs = line.split()
    return tag, [tuple(p.split("=", 1)) for p in pairs]


class KVBenchOutputTest(unittest.TestCase):
    def lines(self, *flags):
        r = bench(*flags)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = {}
        for line in r.stdout.splitlines():
            tag, pairs = parse(line)
            out[tag] = pairs
        self.assertEqual(set(out), {"YCSB_LOAD_RESULT", "YCSB_RESULT"})
        return out

    def check_common(self, out):
        load, run = out["YCSB_LOAD_RESULT"], out["YCSB_RESULT"]
        # RecStore's keys come first, in RecStore's order; the new keys follow
        self.assertEqual([k for k, _ in load[:len(LOAD_KEYS)]], LOAD_KEYS)
        self.assertEqual([k for k, _ in run[:len(RUN_KEYS)]], RUN_KEYS)
        for pairs in (load, run):
            d = dict(pairs)
            for k in NEW_KEYS:
                self.assertIn(k, d)
            p = [float(d[k]) for k in ("p50_us", "p95_us", "p99_us", "p999_us", "max_us")]
            self.assertEqual(p, sorted(p))
            self.assertGreater(float(d["throughput_ops_sec"]), 0)
        return dict(load), dict(run)

    def test_batch_get_flat_counts_keys(self):
        out = self.lines("--index_type=DRAM_PET_HASH", "--read_mode=batch_get_flat", "--batch_keys=100",
                         "--value_size=64", "--record_count=5000", "--operation_count=20000")
        load, run = self.check_common(out)
        self.assertEqual(load["ops"], "5000")
        self.assertEqual(load["records"], "5000")
        self.assertEqual(run["read_mode"], "batch_get_flat")
        self.assertEqual(int(run["ops"]), 20000)  # counted in keys
        self.assertEqual(int(run["batches"]) * 100, 20000)
        self.assertEqual(run["not_found"], "0")
        self.assertEqual(run["latency_per"], "batch")
        self.assertEqual(run["update_ops"], "0")
        # memory per key: 5000 / 0.7875 / 4 -> 2048 lines of 64 B and 2 B of writer state each,
        # plus 64-byte rows
        self.assertEqual(run["index_bytes"], str(2048 * 66))
        self.assertAlmostEqual(float(run["bytes_per_key"]), 64 + 2048 * 66 / 5000, places=2)
        self.assertIn(run["slab_pages"], ("4k", "thp", "hugetlb"))  # < 2 MiB: 4k unless hugetlb

    def test_huge_pages_off_is_reported(self):
        out = self.lines("--index_type=DRAM_PET_HASH", "--read_mode=batch_get_flat", "--batch_keys=10",
                         "--value_size=64", "--record_count=500", "--operation_count=1000",
                         "--huge_pages=off")
        _, run = self.check_common(out)
        self.assertEqual((run["index_pages"], run["slab_pages"]), ("4k", "4k"))

    def test_workload_a_zipfian_get_every_index(self):
        with tempfile.TemporaryDirectory() as d:
            for it in ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH", "SSD_EXTENDIBLE_HASH"):
                with self.subTest(index_type=it):
                    out = self.lines(f"--index_type={it}", "--workload=a", "--distribution=zipfian",
                                     "--read_mode=get", "--record_count=3000", "--operation_count=6000",
                                     "--threads=2", f"--ssd_path={d}/{it}")
                    _, run = self.check_common(out)
                    self.assertEqual(int(run["read_ops"]) + int(run["update_ops"]), 6000)
                    self.assertGreater(int(run["update_ops"]), 1000)
                    self.assertGreater(int(run["read_ops"]), 1000)
                    self.assertIn("update_p99_us", run)
                    self.assertIn("read_p99_us", run)
                    self.assertEqual(run["not_found"], "0")
            self.assertTrue(Path(d, "SSD_EXTENDIBLE_HASH", "cceh.index").exists())

    def test_timed_ceiling(self):
        out = self.lines("--read_mode=ceiling", "--value_size=256", "--record_count=2000",
                         "--running_seconds=0.3", "--batch_keys=50", "--workload=b")
        _, run = self.check_common(out)
        self.assertEqual(run["index_type"], "none")
        self.assertGreaterEqual(float(run["runtime_s"]), 0.3)
        self.assertGreater(int(run["update_ops"]), 0)

    def test_ceiling_index_lines_touch_a_pet_sized_line_array(self):
        pet = self.lines("--index_type=DRAM_PET_HASH", "--read_mode=batch_get_flat",
                         "--value_size=64", "--record_count=30000", "--operation_count=5000")
        _, pet_run = self.check_common(pet)
        plain = dict(self.lines("--read_mode=ceiling", "--value_size=64", "--record_count=30000",
                                "--operation_count=5000")["YCSB_RESULT"])
        self.assertEqual(plain["index_bytes"], "0")
        self.assertNotIn("ceiling_index_lines", plain)
        for n in ("1", "2"):
            with self.subTest(lines=n):
                out = self.lines("--read_mode=ceiling", f"--ceiling_index_lines={n}",
                                 "--value_size=64", "--record_count=30000",
                                 "--operation_count=5000")
                _, run = self.check_common(out)
                self.assertEqual(run["ceiling_index_lines"], n)
                # PET's line array (PET also counts 2 bytes of writer state per line)
                self.assertEqual(int(run["index_bytes"]), int(pet_run["index_bytes"]) // 66 * 64)
                self.assertEqual(run["ops"], "5000")
                self.assertEqual(run["not_found"], "0")

    def test_ceiling_index_bytes_sizes_the_line_array(self):
        for size in ("128", "4096", "1048576"):
            with self.subTest(size=size):
                out = self.lines("--read_mode=ceiling", "--ceiling_index_lines=2",
                                 f"--ceiling_index_bytes={size}", "--value_size=64",
                                 "--record_count=30000", "--operation_count=5000")
                _, run = self.check_common(out)
                self.assertEqual(run["index_bytes"], size)
                self.assertEqual(run["ops"], "5000")

    def test_paired_ceiling_times_a_ceiling_batch_after_every_batch(self):
        for flags in (["--read_mode=batch_get_flat", "--index_type=DRAM_PET_HASH"],
                      ["--read_mode=ceiling", "--ceiling_index_lines=1"], ["--read_mode=ceiling"]):
            with self.subTest(flags=flags):
                out = self.lines(*flags, "--paired_ceiling", "--value_size=64",
                                 "--record_count=30000", "--operation_count=5000")
                _, run = self.check_common(out)
                self.assertEqual(run["ops"], "5000")  # the paired batches are not counted
                self.assertEqual(run["paired_batches"], run["batches"])
                self.assertAlmostEqual(float(run["pct_of_paired_ceiling"]),
                                       100.0 * float(run["paired_ceiling_mean_us"])
                                       / float(run["read_mean_us"]), delta=0.1)  # of 3-decimal fields
                self.assertGreater(float(run["pct_of_paired_ceiling_p50"]), 0.0)
        plain = dict(self.lines("--read_mode=batch_get_flat", "--index_type=DRAM_PET_HASH",
                                "--value_size=64", "--record_count=3000",
                                "--operation_count=500")["YCSB_RESULT"])
        self.assertNotIn("paired_batches", plain)
        r = bench("--read_mode=get", "--paired_ceiling", "--record_count=10")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--paired_ceiling needs --read_mode=batch_get_flat or ceiling", r.stderr)

    def test_out_buffers_report_the_bytes_the_batches_wrote(self):
        # 2 threads x 10 batches of 50 keys x 64 B over 4 buffers each: 4 written per thread
        for mode in ("batch_get_flat", "ceiling"):
            with self.subTest(mode=mode):
                out = self.lines(f"--read_mode={mode}", "--index_type=DRAM_PET_HASH",
                                 "--out_buffers=4", "--threads=2", "--batch_keys=50",
                                 "--value_size=64", "--record_count=3000", "--operation_count=1000")
                _, run = self.check_common(out)
                self.assertEqual((run["out_buffers"], run["out_bytes"]), ("4", str(2 * 4 * 50 * 64)))
                self.assertEqual(run["not_found"], "0")
        plain = dict(self.lines("--read_mode=ceiling", "--value_size=64", "--record_count=3000",
                                "--operation_count=500")["YCSB_RESULT"])
        self.assertNotIn("out_buffers", plain)
        r = bench("--read_mode=get", "--out_buffers=4", "--record_count=10")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--out_buffers needs --read_mode=batch_get_flat or ceiling", r.stderr)
        r = bench("--read_mode=ceiling", "--out_buffers=0", "--record_count=10")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--out_buffers", r.stderr)

    def test_rows_huge_pct_reports_the_rows_pages(self):
        for mode in ("ceiling", "batch_get_flat"):
            for pages in ("off", "thp"):
                with self.subTest(mode=mode, pages=pages):
                    out = self.lines(f"--read_mode={mode}", "--index_type=DRAM_PET_HASH",
                                     f"--huge_pages={pages}", "--value_size=512",
                                     "--record_count=16384", "--operation_count=5000")
                    _, run = self.check_common(out)
                    pct = float(run["rows_huge_pct"])
                    if pages == "off":
                        self.assertEqual(pct, 0.0)
                    else:  # what the kernel granted: anything from none to all
                        self.assertGreaterEqual(pct, 0.0)
                        self.assertLessEqual(pct, 100.0)

    def test_ceiling_index_lines_errors(self):
        for flags, word in ((["--read_mode=ceiling", "--ceiling_index_lines=3"], "ceiling_index_lines"),
                            (["--read_mode=batch_get_flat", "--ceiling_index_lines=1"],
                             "ceiling_index_lines")):
            with self.subTest(flags=flags):
                r = bench(*flags, "--record_count=10")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(word, r.stderr)
        with self.assertRaisesRegex(ValueError, "ceiling_index_lines"):
            kv_bench.run(dict(index_type="DRAM_PET_HASH", value_size=64, record_count=10,
                              read_mode="ceiling", operation_count=10, ceiling_index_lines=3))
        for flags, text in ((["--ceiling_index_lines=1", "--ceiling_index_bytes=3000"],
                             "ceiling_index_bytes must be a power of two >= 128 (got 3000)"),
                            (["--ceiling_index_lines=1", "--ceiling_index_bytes=64"],
                             "ceiling_index_bytes must be a power of two >= 128 (got 64)"),
                            (["--ceiling_index_bytes=4096"],
                             "--ceiling_index_bytes needs --ceiling_index_lines")):
            with self.subTest(flags=flags):
                r = bench("--read_mode=ceiling", *flags, "--record_count=10")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(text, r.stderr)

    def test_bad_flags_name_the_flag(self):
        for flags, word in ((["--workload=z"], "workload"), (["--read_mode=scan"], "read_mode"),
                            (["--zipfian_alpha=1.5"], "zipfian_alpha"),
                            (["--index_type=BTREE"], "index_type"), (["--record_count=-5"], "record_count"),
                            (["--engine=cceh", "--index_type=DRAM_PET_HASH"], "index_type"),
                            (["--running_seconds=0"], "running_seconds"),
                            (["--value_size=0"], "--value_size: must be >= 1, got 0"),
                            (["--threads=x"], "--threads/--thread_num: 'x' is not an integer")):
            with self.subTest(flags=flags):
                r = bench(*flags, "--record_count=10" if "--record_count=-5" not in flags else "--threads=1")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(word, r.stderr)
                self.assertEqual(r.stdout, "")


class CompareIndexesTest(unittest.TestCase):
    def test_table_has_every_case_and_ratios(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=1)
        self.assertEqual(set(res["median"]), {"ceiling", "DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH"})
        self.assertAlmostEqual(res["median"]["ceiling"]["pct_of_ceiling"], 100.0)
        for m in res["median"].values():
            self.assertEqual(m["not_found"], 0)
            self.assertGreater(m["keys_per_cpu_sec"], 0)
        table = kv_bench.format_comparison(res)
        self.assertIn("PET/EH", table)
        self.assertIn("2.67x", table)
        self.assertIn(f"CPU {cpu_model()}", table.splitlines()[0])
        self.assertEqual(len(re.findall(r"^\| (ceiling|DRAM_)", table, re.MULTILINE)), 3)
        for m in res["median"].values():  # this machine has a /proc/stat
            self.assertTrue(0.0 <= m["steal_pct_max"] <= 100.0, m)
        self.assertIn("steal % (max)", table)

    def test_steal_warning_names_the_worst_run(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=1, index_types=("DRAM_PET_HASH",))
        res["median"]["DRAM_PET_HASH"]["steal_pct_max"] = 31.0
        table = kv_bench.format_comparison(res)
        self.assertIn("warning: host steal reached 31.0 % in a run", table)
        self.assertRegex(table, r"\| DRAM_PET_HASH .*\|\s+31\.0 % \|")
        res["median"]["DRAM_PET_HASH"]["steal_pct_max"] = 1.0
        res["median"]["ceiling"]["steal_pct_max"] = 0.0
        self.assertNotIn("warning: host steal", kv_bench.format_comparison(res))

    def test_line_bounds_are_ceiling_cases(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=1, index_types=("DRAM_PET_HASH",),
                                       index_lines=(1, 2))
        self.assertEqual(set(res["median"]), {"ceiling", "ceiling+1 line", "ceiling+2 lines",
                                              "DRAM_PET_HASH"})
        self.assertAlmostEqual(res["median"]["ceiling"]["pct_of_ceiling_p50"], 100.0)
        self.assertEqual(res["params"]["index_lines"], [1, 2])
        self.assertIn("ceiling+2 lines", kv_bench.format_comparison(res))

    def test_index_sizes_add_one_line_bounds_of_that_size(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=1, index_types=(),
                                       huge_pages=("off",), index_sizes=(4096, 1 << 20))
        self.assertEqual(set(res["median"]), {"ceiling", "ceiling+1 line, 4 KiB",
                                              "ceiling+1 line, 1 MiB"})
        self.assertEqual(res["params"]["index_sizes"], [4096, 1 << 20])
        # the line array is counted in bytes per key: 1 MiB over 2000 keys beside the 64-byte
        # row (the rows' array rounded up to whole 4 KiB pages)
        rows = res["median"]["ceiling+1 line, 1 MiB"]["bytes_per_key"] - (1 << 20) / 2000
        self.assertTrue(64 <= rows <= 64 + 4096 / 2000, rows)
        self.assertIn("| ceiling+1 line, 1 MiB ", kv_bench.format_comparison(res))

    def test_paired_cases_take_their_ratio_from_their_own_runs(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=3, index_types=("DRAM_PET_HASH",),
                                       index_lines=(1,), huge_pages=("off",), paired=True)
        self.assertTrue(res["params"]["paired"])
        for name in ("ceiling", "ceiling+1 line", "DRAM_PET_HASH"):
            runs, m = res["samples"][name], res["median"][name]
            self.assertEqual(m["pct_of_ceiling"], statistics.median(s["paired_pct"] for s in runs))
            self.assertEqual(m["pct_of_ceiling_p50"],
                             statistics.median(s["paired_pct_p50"] for s in runs))
        self.assertGreater(res["median"]["ceiling"]["paired_pct"], 0.0)  # the ceiling against itself
        self.assertIn("paired: every case alternated", kv_bench.format_comparison(res))

    def test_bench_script_rejects_sizes_that_are_not_powers_of_two(self):
        script = Path(__file__).resolve().parents[3] / "tools/benchmarks/bench_kv_indexes.py"
        for arg, text in (("3", "[3] not powers of two"), ("4M", "'4M' is not a list of whole MiB")):
            with self.subTest(arg=arg):
                r = subprocess.run([sys.executable, str(script), "--bound_index_mib", arg],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(f"--bound_index_mib: {text}", r.stderr)

    def test_several_huge_page_modes_compare_within_their_mode(self):
        res = kv_bench.compare_indexes(record_count=2000, value_size=64, batch_keys=50,
                                       running_seconds=0.1, repeats=1, index_types=("DRAM_PET_HASH",),
                                       huge_pages=("thp", "off"))
        self.assertEqual(set(res["median"]), {"ceiling/thp", "DRAM_PET_HASH/thp", "ceiling/off",
                                              "DRAM_PET_HASH/off"})
        self.assertAlmostEqual(res["median"]["ceiling/off"]["pct_of_ceiling"], 100.0)
        self.assertEqual(res["median"]["DRAM_PET_HASH/off"]["slab_pages"], "4k")
        self.assertIn("4k/4k", kv_bench.format_comparison(res))


if __name__ == "__main__":
    unittest.main()
