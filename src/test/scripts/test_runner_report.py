"""recbench.runner.report: summary.md and its plots come from a run directory alone, and
regenerating them (recbench-report RUN_DIR, python -m recbench.runner.report RUN_DIR) gives the
same bytes. The run directory here is written by the runner's own writers from result lines."""

import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from runner_testlib import parse

from recbench.launch import python_env
from recbench.runner import cli, report, results

RESULT = ("PS_BENCHMARK_RESULT phase=run transport=brpc mode=fetch distribution=uniform threads=1 "
          "batch_size=64 records=1000 runtime_s=1.0 batches={b} key_ops={k} "
          "throughput_batches_sec={b}.0 throughput_keys_sec={k}.0 mean_us=100 p50_us=90 p95_us=150 "
          "p99_us=200 p999_us=300 max_us=400 cpu_user_s=0.5 cpu_sys_s=0.3 payload_gbps=0.01 "
          "value_size=128")


def write_run_dir(out: Path, rates: list[int]) -> None:
    """A run directory as the runner writes it: one BRPC client, one repeat per rate."""
    plan = cli.parse_args(["--transports", "brpc", "--repeat", str(len(rates)),
                           "--output-dir", str(out)])
    rows, cases = [], []
    for i, k in enumerate(rates):
        base = {"transport": "BRPC", "repeat_index": i, "server_shards": 1, "client_processes": 1,
                "server_shard_ips": ["127.0.0.1"], "client_ips": ["127.0.0.1"],
                "record_count": 1000, "value_size": 128, "batch_keys": 64,
                "client_threads_per_process": 1, "runtime_seconds": 1.0, "distribution": "uniform",
                "mode": "fetch", "client_index": 0, "build_type": "Release",
                "index_type": "DRAM_EXTENDIBLE_HASH", "row_kind": "fair", "log_path": ["/l"]}
        parsed = results.collect_ps_result_rows(RESULT.format(b=k // 64, k=k))
        rows += [results.result_row(base, r, server_cpu_s=0.5) for r in parsed]
        cases.append(("BRPC", i, 0.5, "success"))
    results.write_summary_csv(out / "summary.csv", rows)
    results.write_totals_csv(out / "summary_totals.csv", results.build_totals(rows, cases))
    (out / "run_config.json").write_text(json.dumps({
        "plan": plan.record(), "git": {"commit": "abc123"}, "hostname": "host1",
        "run_config_path": str(out / "run_config.json"), "cases": [], "hosts": {}}))


class TestReportFromRunDir(unittest.TestCase):
    def setUp(self):
        self.out = Path(tempfile.mkdtemp(prefix="rb_report_"))
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_regenerates_byte_identical_with_plots(self):
        write_run_dir(self.out, [6_400_000, 6_500_000, 6_300_000])
        first = report.write_report(self.out).read_bytes()
        text = first.decode()
        self.assertEqual(text.splitlines()[:3], ["abc123", "host1", ""])
        self.assertIn("[plots/throughput.png](plots/throughput.png)", text)
        self.assertIn("[plots/latency.png](plots/latency.png)", text)
        for name in ("throughput", "latency"):
            self.assertEqual((self.out / "plots" / f"{name}.png").read_bytes()[:8],
                             b"\x89PNG\r\n\x1a\n")
        self.assertIn("latency_merge=worst_client", text)  # no PS_BENCHMARK_HIST lines here
        self.assertNotIn("警告", text)  # 1.6 % spread is stable
        (self.out / "summary.md").unlink()
        res = subprocess.run([sys.executable, "-m", "recbench.runner.report", str(self.out)],
                             capture_output=True, text=True, env=python_env(), timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual((self.out / "summary.md").read_bytes(), first)

    def test_unstable_repeats_get_a_warning_saying_what_to_do(self):
        write_run_dir(self.out, [6_000_000, 3_000_000])
        text = report.write_report(self.out).read_text()
        self.assertIn("**警告: BRPC 的 run 吞吐量在 2 次 repeat 之间的相对标准差为 47.1%", text)
        self.assertIn("--runtime-seconds", text)

    def test_host_steal_gets_a_warning_and_a_column(self):
        write_run_dir(self.out, [6_000_000, 5_950_000])
        totals = results.read_summary_csv(self.out / "summary_totals.csv")
        for t in totals:
            if t["phase"] == "run" and t["repeat_index"] == "1":
                t["host_steal_pct"] = "27.5"
        results.write_totals_csv(self.out / "summary_totals.csv", totals)
        text = report.write_report(self.out).read_text()
        self.assertIn("steal 时间", text)
        self.assertIn("BRPC repeat 1 27.5%", text)
        self.assertNotIn("BRPC repeat 0", text.split("steal 时间")[1].split("\n")[0])
        self.assertIn("| keys/CPU·s | steal % |", text)
        self.assertIn(" | 27.5 | - |", text)  # no thread counts in these lines

    def test_names_what_the_servers_connections_used(self):
        write_run_dir(self.out, [6_000_000, 5_950_000])
        rows = results.read_summary_csv(self.out / "summary.csv")
        for i, r in enumerate(rows):  # summary.csv's tcp_congestion, once per name
            r["tcp_congestion"] = "cubic" if i else ""
        results.write_summary_csv(self.out / "summary.csv", rows)
        cfg = json.loads((self.out / "run_config.json").read_text())
        (self.out / "run_config.json").write_text(json.dumps({**cfg,
                                                              "tcp_congestion_control": "bbr"}))
        text = report.write_report(self.out).read_text()
        self.assertIn("- TCP 拥塞控制: bbr; PS 服务端连接实际使用 (tcp_congestion): cubic\n", text)

    def test_thread_shares_column(self):
        write_run_dir(self.out, [6_000_000])
        totals = results.read_summary_csv(self.out / "summary_totals.csv")
        for t in totals:
            if t["phase"] == "run":
                t["slowest_thread_share"], t["fastest_thread_share"] = "0.594", "1.215"
        results.write_totals_csv(self.out / "summary_totals.csv", totals)
        text = report.write_report(self.out).read_text()
        self.assertIn("| steal % | 线程份额 |", text)
        self.assertIn(" | 0.59-1.22 |", text)
        self.assertIn("线程份额：最慢和最快的客户端线程", text)
        lines = report.steal_lines({"local": 27.46, "lab-b": 0.4, "gone": None})
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("host steal 27.5 % on local during the run window"))

    def test_refuses_a_directory_that_is_not_a_run(self):
        res = subprocess.run([sys.executable, "-m", "recbench.runner.report", str(self.out)],
                             capture_output=True, text=True, env=python_env(), timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("run_config.json does not exist", res.stderr)


class TestReport(unittest.TestCase):
    def test_summary_md_layout(self):
        from recbench.runner import report

        args = parse("--transports", "grpc,rdma", "--prefetch-depth", "4",
                     "--rdma-rc-qps-per-client-per-shard", "4")
        rows = [{c: "" for c in results.SUMMARY_COLUMNS}]
        rows[0].update(transport="GRPC", status="success", phase="run", client_index="0",
                       repeat_index="0", key_ops_per_sec="2500000.000", payload_gbps="0.32",
                       mean_us="10", row_kind="fair", build_type="Release")
        rows.append(dict(rows[0], transport="RDMA", status="skipped", phase="",
                         message="no RDMA verbs device on local: x"))
        totals = [{"transport": "GRPC", "repeat_index": "mean", "phase": "run",
                   "key_ops_per_sec": "2500000", "row_kind": "fair", "latency_merge": "exact"}]
        run_config = {"plan": args.record(), "git": {"commit": "abc123"}, "hostname": "myhost",
                      "run_config_path": "/out/run_config.json"}
        text = report.render(run_config, rows, totals)
        lines = text.splitlines()
        self.assertEqual(lines[:3], ["abc123", "myhost", ""])
        positions = [text.index(f"## {s}") for s in report.SECTIONS]
        self.assertEqual(positions, sorted(positions))
        self.assertIn("| GRPC | 0 | run | 0 | 2.500 |", text)
        self.assertIn("no RDMA verbs device", text)
        self.assertIn("只完成了构建与单元层面的验证", text)

    def test_names_the_cpu_of_each_host_that_differs(self):
        args = parse("--transports", "brpc")
        run_config = {"plan": args.record(), "git": {"commit": "abc123"}, "hostname": "myhost",
                      "run_config_path": "/out/run_config.json", "cpu_cores": 2,
                      "cpu_model": "AMD EPYC (family 25 model 17, AVX-512)",
                      "hosts": {"local": {"cpu_model": "AMD EPYC (family 25 model 17, AVX-512)"},
                                "node1": {"cpu_model": "AMD EPYC (family 25 model 1, no AVX-512)"}}}
        text = report.render(run_config, [], [])
        self.assertIn("- CPU: AMD EPYC (family 25 model 17, AVX-512) (2 核); "
                      "node1: AMD EPYC (family 25 model 1, no AVX-512)\n", text)
        for setting, said in ((True, "开"), (False, "关")):  # the kernel's CFS autogroup
            text = report.render({**run_config, "sched_autogroup": setting}, [], [])
            self.assertIn(f"(2 核; 内核 autogroup {said}); node1", text)

    def test_names_the_tcp_congestion_control_of_each_host_that_differs(self):
        args = parse("--transports", "brpc")
        run_config = {"plan": args.record(), "git": {"commit": "abc123"}, "hostname": "myhost",
                      "run_config_path": "/out/run_config.json", "cpu_cores": 2,
                      "cpu_model": "AMD EPYC", "tcp_congestion_control": "bbr",
                      "hosts": {"local": {"tcp_congestion_control": "bbr"},
                                "node1": {"tcp_congestion_control": "cubic"},
                                "node2": {"tcp_congestion_control": None}}}
        text = report.render(run_config, [], [])
        self.assertIn("- CPU: AMD EPYC (2 核)\n- TCP 拥塞控制: bbr; node1: cubic\n", text)
        text = report.render({**run_config, "tcp_congestion_control": None}, [], [])
        self.assertNotIn("拥塞控制", text)  # unknown: no line rather than a guess


    def test_names_the_budget_of_bytes_in_flight(self):
        for flags, said in (((), "各 transport 默认（brpc/grpc 每 CPU 8 MiB，shm/rdma 无）"),
                            (("--client-max-inflight-bytes", "4M"), "4194304 B"),
                            (("--client-max-inflight-bytes", "none"), "无")):
            args = parse("--transports", "brpc", *flags)
            run_config = {"plan": args.record(), "git": {"commit": "abc123"},
                          "hostname": "myhost", "run_config_path": "/out/run_config.json"}
            self.assertIn(f"- 在途字节预算: {said}（", report.render(run_config, [], []))


if __name__ == "__main__":
    unittest.main()
