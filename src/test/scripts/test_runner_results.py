"""recbench.runner.results: result lines, summary rows, totals and the CSV files."""

import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from recbench import records
from recbench.runner import results

RESULT_TEXT = """noise
PS_BENCHMARK_RESULT phase=load transport=grpc mode=fetch distribution=uniform zipfian_alpha=0.9 threads=2 batch_size=64 records=1000 runtime_s=0.5 batches=100 key_ops=6400 throughput_batches_sec=200.0 throughput_keys_sec=12800.0 mean_us=10.5 p50_us=9 p95_us=20 p99_us=30 p999_us=40 max_us=50 cpu_user_s=0.2 cpu_sys_s=0.1 payload_gbps=0.0016
PS_BENCHMARK_LOADED
PS_BENCHMARK_RESULT phase=run transport=grpc mode=fetch distribution=uniform zipfian_alpha=0.9 threads=2 batch_size=64 records=1000 runtime_s=1.0 batches=1000 key_ops=64000 throughput_batches_sec=1000.0 throughput_keys_sec=64000.0 mean_us=100 p50_us=90 p95_us=150 p99_us=200 p999_us=300 max_us=400 cpu_user_s=0.5 cpu_sys_s=0.3 payload_gbps=0.0082 thread_batches_min=400 thread_batches_max=600
"""


class TestResults(unittest.TestCase):
    def test_runs_in_one_minute_get_their_own_directories(self):
        with tempfile.TemporaryDirectory() as tmp:
            picked = records.new_result_dir(tmp, "benchmark_ps_", create=False)
            self.assertFalse(picked.exists())
            dirs = [records.new_result_dir(tmp, "benchmark_ps_") for _ in range(3)]
            self.assertEqual(len(set(dirs)), 3)
            for d in dirs:
                self.assertTrue(d.is_dir())
                self.assertEqual(list(d.iterdir()), [])
                self.assertRegex(d.name, r"^benchmark_ps_\d{8}(_[23])?$")
            # the second of a minute is <first>_2 (unless the minute turned between the calls)
            if dirs[1].name.startswith(dirs[0].name):
                self.assertEqual(dirs[1].name, dirs[0].name + "_2")

    def test_servers_tcp_congestion_from_their_ready_lines(self):
        ready = "component=ps_server event=ready transport=brpc shard=0 port=15000"
        self.assertEqual(results.servers_tcp_congestion(
            [f"{ready} tcp_congestion=cubic", f"{ready} tcp_congestion=reno",
             f"{ready} tcp_congestion=cubic"]), "cubic;reno")
        # shm's line names none, nor does a server the runner saw no ready line of
        self.assertEqual(results.servers_tcp_congestion([ready, ""]), "")

    def test_collect_ps_result_rows_parses_load_and_run(self):
        rows = results.collect_ps_result_rows(RESULT_TEXT)
        self.assertEqual([r["phase"] for r in rows], ["load", "run"])
        self.assertEqual(rows[0]["throughput_keys_sec"], 12800.0)
        self.assertIsInstance(rows[0]["batches"], int)
        self.assertIsInstance(rows[1]["runtime_s"], float)
        self.assertEqual(rows[1]["p999_us"], 300.0)

    def test_collect_summary_rows_keeps_measure_phase(self):
        text = ("transport=grpc op=get phase=warmup summary rounds=1 iterations=10 batch_keys=4 "
                "elapsed_us_mean=999.0 elapsed_us_p50=1 elapsed_us_p95=1 elapsed_us_p99=1 "
                "ops_per_sec=1 key_ops_per_sec=4\n"
                "transport=grpc op=get phase=measure summary rounds=1 iterations=10 batch_keys=4 "
                "elapsed_us_mean=100.0 elapsed_us_p50=90 elapsed_us_p95=95 elapsed_us_p99=99 "
                "ops_per_sec=10 key_ops_per_sec=40\n")
        rows = results.collect_summary_rows(text)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["elapsed_us_mean"], 100.0)

    def test_result_rows_include_effective_payload_bandwidth(self):
        row = results.result_row({"runtime_seconds": 1, "value_size": 512},
                                 {"phase": "run", "throughput_keys_sec": 2e6,
                                  "throughput_batches_sec": 1.0})
        self.assertAlmostEqual(row["payload_gbps"], 1.024)  # the line has none: keys/s x 512 B
        # the line's own value_size and payload_gbps win over the runner's
        row = results.result_row({"runtime_seconds": 1, "value_size": 512},
                                 {"phase": "run", "throughput_keys_sec": 2e6, "value_size": 256,
                                  "payload_gbps": 0.5})
        self.assertEqual((row["value_size"], row["payload_gbps"]), (256, 0.5))

    def test_recstore_get_summary_line_gives_the_run_latencies(self):
        base = {"runtime_seconds": 2.0, "value_size": 128}
        text = RESULT_TEXT + ("transport=grpc op=get phase=warmup summary elapsed_us_mean=1 "
                              "elapsed_us_p50=1 elapsed_us_p95=1 elapsed_us_p99=1\n"
                              "transport=grpc op=get phase=measure summary rounds=3 iterations=9 "
                              "batch_keys=64 elapsed_us_mean=123.5 elapsed_us_p50=111 "
                              "elapsed_us_p95=222 elapsed_us_p99=333 ops_per_sec=10 "
                              "key_ops_per_sec=640\n")
        rows = [results.result_row(base, r) for r in results.collect_ps_result_rows(text)]
        self.assertTrue(results.apply_get_summary(rows, text))
        run = rows[1]
        self.assertEqual((run["mean_us"], run["p50_us"], run["p95_us"], run["p99_us"]),
                         (123.5, 111.0, 222.0, 333.0))
        self.assertEqual(run["p999_us"], 300.0)  # not in RecStore's line: the result line's
        self.assertEqual(rows[0]["p50_us"], 9.0)  # the load row keeps its own
        # runtime_seconds is the configured runtime; the measured window is its own column
        self.assertEqual((run["runtime_seconds"], run["measured_seconds"]), (2.0, 1.0))
        self.assertFalse(results.apply_get_summary(rows, RESULT_TEXT))

    def test_row_keeps_latency_and_cpu(self):
        parsed = results.collect_ps_result_rows(RESULT_TEXT)[1]
        row = results.result_row({"runtime_seconds": 1, "value_size": 128}, parsed, server_cpu_s=0.7)
        self.assertEqual((row["mean_us"], row["p50_us"], row["p99_us"], row["max_us"]),
                         (100.0, 90.0, 200.0, 400.0))
        self.assertAlmostEqual(row["client_cpu_s"], 0.8)
        self.assertAlmostEqual(row["keys_per_cpu_sec"], 80000.0)
        self.assertEqual(row["server_cpu_s"], 0.7)

    def test_write_summary_csv_writes_rows(self):
        base = {"transport": "GRPC", "repeat_index": 0, "server_shards": 2, "client_processes": 2,
                "server_shard_ips": ["10.0.0.1", "10.0.0.2"], "client_ips": ["10.0.0.3", "10.0.0.4"],
                "record_count": 1000, "value_size": 128, "batch_keys": 64,
                "client_threads_per_process": 2, "runtime_seconds": 1, "distribution": "uniform",
                "mode": "fetch", "client_index": 0, "build_type": "Release",
                "index_type": "DRAM_PET_HASH", "row_kind": "fair",
                "log_path": ["/l/client_0.stdout.log", "/l/client_0.stderr.log"]}
        parsed = results.collect_ps_result_rows(RESULT_TEXT)
        rows = [results.result_row(base, p) for p in parsed]
        rows.append(results.result_row(dict(base, client_index=1), parsed[1]))
        rows.append(results.failure_row(base, "client_failure", "client exited with code 3, oops",
                                        "run", 2, ["/a", "/b"]))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "summary.csv")
            results.write_summary_csv(path, rows)
            lines = Path(path).read_text().splitlines()
            self.assertTrue(lines[0].startswith("transport,status,phase,client_index"))
            self.assertEqual(lines[0].split(","), results.SUMMARY_COLUMNS)
            self.assertEqual(len(results.SUMMARY_COLUMNS), 50)  # 25 RecStore + 25 new
            self.assertEqual(results.SUMMARY_COLUMNS[-5], "host_steal_pct")
            self.assertEqual(results.SUMMARY_COLUMNS[-4:-2], results.FAIRNESS_COLUMNS)
            self.assertEqual(results.SUMMARY_COLUMNS[-2:], ["client_rows", "tcp_congestion"])
            self.assertEqual(results.SUMMARY_COLUMNS[33:35], ["measured_seconds", "wire"])
            self.assertEqual(results.SUMMARY_COLUMNS[35:41], results.OPEN_LOOP_COLUMNS)
            self.assertEqual(results.SUMMARY_COLUMNS[41:44], results.LAB_COLUMNS)
            self.assertEqual(results.SUMMARY_COLUMNS[:25], results.RECSTORE_COLUMNS)
            self.assertTrue(lines[2].startswith("GRPC,success,run,0"))
            for line in lines:  # no quoted cells: awk -F, sees fixed columns
                self.assertNotIn('"', line)
                self.assertEqual(len(line.split(",")), len(results.SUMMARY_COLUMNS))
            cells = lines[2].split(",")
            self.assertEqual(cells[7], "10.0.0.1;10.0.0.2")
            self.assertEqual(cells[17], "64000.000")
            self.assertEqual(cells[19], "100.000")
            self.assertEqual(cells[23], "/l/client_0.stdout.log;/l/client_0.stderr.log")
            self.assertEqual(lines[4].split(",")[1], "client_failure")
            self.assertEqual(lines[4].split(",")[24], "client exited with code 3; oops")
            awk = subprocess.run(["awk", "-F,", 'NR>1 && $3=="run" {s+=$18} END {printf "%.3f", s}',
                                  path], capture_output=True, text=True, check=True).stdout
            self.assertEqual(float(awk), 128000.0)
            csv_rows = results.read_summary_csv(path)
            totals = results.build_totals(csv_rows, [("GRPC", 0, 0.5, "client_failure")])
            run = next(t for t in totals if t["phase"] == "run" and t["repeat_index"] == 0)
            self.assertEqual(run["key_ops_per_sec"], 128000.0)
            self.assertEqual((run["clients_ok"], run["clients_failed"], run["status"]),
                             (2, 1, "client_failure"))
            self.assertEqual(run["max_us"], 400.0)
            self.assertEqual(run["mean_us"], 100.0)
            # 1000 batches over 2 threads: 500 each on average; the slowest did 400, the fastest 600
            self.assertEqual((run["slowest_thread_share"], run["fastest_thread_share"]), (0.8, 1.2))
            load = next(t for t in totals if t["phase"] == "load" and t["repeat_index"] == 0)
            self.assertNotIn("slowest_thread_share", load)  # its line has no thread counts
            mean = next(t for t in totals if t["phase"] == "run" and t["repeat_index"] == "mean")
            # a case with a failed client is not a valid total: the mean leaves it out
            self.assertEqual((mean["repeats"], mean["status"]), (0, "no_success"))
            results.write_totals_csv(os.path.join(d, "t.csv"), totals)
            header = Path(d, "t.csv").read_text().splitlines()[0]
            self.assertEqual(header.split(","), results.TOTALS_COLUMNS)

    def test_thread_shares(self):
        parsed = results.collect_ps_result_rows(RESULT_TEXT)
        self.assertEqual(results.thread_shares(parsed[0]), {})
        self.assertEqual(results.thread_shares(parsed[1]),
                         {"slowest_thread_share": 0.8, "fastest_thread_share": 1.2})
        self.assertEqual(results.thread_shares(dict(parsed[1], batches=0)), {})
        self.assertEqual(results.share_range(0.8, 1.2), "0.80-1.20")
        self.assertEqual(results.share_range("0.5", ""), "-")
        # over clients and over repeats: the slowest of the slowest, the fastest of the fastest;
        # a row without shares (a --benchmark-binary's client) leaves them empty
        rows = [dict(transport="BRPC", repeat_index=r, phase="run", status="success",
                     key_ops_per_sec=1.0, ops_per_sec=1.0, payload_gbps=0.0, mean_us=1.0,
                     p50_us=1.0, p95_us=1.0, p99_us=1.0, p999_us=1.0, max_us=1.0, client_cpu_s=1.0,
                     measured_seconds=1.0, slowest_thread_share=lo, fastest_thread_share=hi)
                for r, lo, hi in ((0, 0.9, 1.1), (0, 0.7, 1.05), (1, 0.95, 1.3))]
        totals = results.build_totals(rows, [("BRPC", 0, None, ""), ("BRPC", 1, None, "")])
        run0, run1, mean = (next(t for t in totals if t["phase"] == "run" and t["repeat_index"] == i)
                            for i in (0, 1, "mean"))
        self.assertEqual((run0["slowest_thread_share"], run0["fastest_thread_share"]), (0.7, 1.1))
        self.assertEqual((run1["slowest_thread_share"], run1["fastest_thread_share"]), (0.95, 1.3))
        self.assertEqual((mean["slowest_thread_share"], mean["fastest_thread_share"]), (0.7, 1.3))
        rows[1]["slowest_thread_share"] = ""
        run0 = results.case_totals(rows, "BRPC", 0, "run")
        self.assertNotIn("slowest_thread_share", run0)
        self.assertEqual(run0["fastest_thread_share"], 1.1)

    def test_mean_row_spread_over_repeats(self):
        cases = [{"transport": "GRPC", "repeat_index": i, "phase": "run", "status": "success",
                  "key_ops_per_sec": v, "row_kind": "fair", "clients_ok": 1, "clients_failed": 0}
                 for i, v in enumerate([100.0, 200.0, 300.0])]
        m = results.mean_row(cases, "GRPC", "run")
        self.assertEqual((m["key_ops_per_sec"], m["key_ops_per_sec_stdev"], m["key_ops_per_sec_min"],
                          m["key_ops_per_sec_max"], m["repeats"]), (200.0, 100.0, 100.0, 300.0, 3))


if __name__ == "__main__":
    unittest.main()
