"""recbench.runner.cli: RecStore's flags, profiles, validation messages, --interactive."""

import contextlib
import io
import subprocess
import sys
import unittest

from runner_testlib import REPO, flat, parse, parse_error

from recbench.runner import cli as runner_cli


class TestArgs(unittest.TestCase):
    def test_defaults_match_recstore(self):
        a = parse("--transports", "grpc")
        self.assertEqual((flat(a).record_count, flat(a).value_size, flat(a).batch_keys, flat(a).client_threads_per_process,
                          flat(a).runtime_seconds, flat(a).server_worker_threads, flat(a).max_keys_per_request,
                          flat(a).client_timeout, flat(a).cluster_timeout, flat(a).startup_delay, flat(a).index_type,
                          flat(a).remote_sync, flat(a).execution_backend),
                         (1000000, 512, 1024, 16, 5, 32, 500, 120, 45, 2.0,
                          "DRAM_EXTENDIBLE_HASH", "check", "local"))
        self.assertIsNone(flat(a).profile)

    def test_parse_args_rejects_rdma_prefetch_depth_above_slot_capacity(self):
        msg = parse_error("--transports", "rdma", "--rdma-rc-qps-per-client-per-shard", "4",
                          "--rdma-rc-slots-per-qp", "1")
        self.assertIn("RDMA fetch prefetch depth exceeds RC slot capacity", msg)
        ok = parse("--transports", "rdma", "--rdma-rc-qps-per-client-per-shard", "4",
                   "--prefetch-depth", "4")
        self.assertEqual(flat(ok).prefetch_depth, 4)

    def test_parse_args_sets_rdma_fetch_qp_default(self):
        a = parse("--transports", "rdma")
        self.assertEqual((flat(a).rdma_rc_qps_per_client_per_shard, flat(a).rdma_rc_slots_per_qp,
                          flat(a).prefetch_depth), (16, 1, 16))
        g = parse("--transports", "grpc")
        self.assertIsNone(flat(g).rdma_rc_qps_per_client_per_shard)
        self.assertEqual(flat(g).prefetch_depth, 0)
        m = parse("--transports", "rdma", "--mode", "insert")
        self.assertIsNone(flat(m).rdma_rc_qps_per_client_per_shard)

    def test_parse_args_accepts_build_dirs(self):
        a = parse("--transports", "grpc", "--build-dir", "build_release", "--remote-build-dir",
                  "build_release")
        self.assertEqual((flat(a).build_dir, flat(a).remote_build_dir), ("build_release", "build_release"))

    def test_parse_args_refuses_storage_flags_recbench_cannot_apply(self):
        # RecStore keeps --tiered-dram-capacity-bytes; recbench's PS has no tiered store, so the
        # value is refused with the reason instead of being written into a config nobody reads.
        self.assertIn("--tiered-dram-capacity-bytes 1048576 is not supported: only a tiered",
                      parse_error("--transports", "grpc", "--tiered-dram-capacity-bytes", "1048576"))
        self.assertIn("no tiered", parse_error("--value-store-type", "TIERED_VALUE_STORE"))
        self.assertIn("--dram-allocator R2_ALLOC", parse_error("--dram-allocator", "R2_ALLOC"))
        self.assertIn("--ssd-queue-depth 8", parse_error("--ssd-queue-depth", "8"))
        self.assertIn("no shared control plane", parse_error("--rdma-namespace", "mine"))
        a = parse("--transports", "grpc", "--value-store-type", "DRAM_VALUE_STORE",
                  "--rdma-namespace", "auto")
        self.assertEqual(a.servers.value_store_type, "DRAM_VALUE_STORE")

    def test_parse_args_sets_local_rdma_bind_core_defaults(self):
        a = parse("--transports", "rdma", "--server-rdma-threads", "16",
                  "--client-threads-per-process", "1", "--client-load-threads-per-process", "1")
        self.assertEqual((flat(a).rdma_server_bind_core_offset, flat(a).rdma_rc_server_numa_id,
                          flat(a).rdma_rc_client_numa_id, flat(a).rdma_client_bind_core_offset,
                          flat(a).rdma_client_bind_core_stride), (0, 0, 0, 16, 1))
        b = parse("--transports", "rdma", "--rdma-rc-client-numa-id", "1")
        self.assertEqual(flat(b).rdma_client_bind_core_offset, 0)
        ssh = parse("--transports", "rdma", "--execution-backend", "ssh")
        self.assertIsNone(flat(ssh).rdma_server_bind_core_offset)

    def test_validation_names_bad_values(self):
        self.assertIn("--value-size 130 is not a multiple of 4", parse_error("--value-size", "130"))
        self.assertIn("--read-ratio 101", parse_error("--read-ratio", "101"))
        self.assertIn("--batch-keys must be >= 1", parse_error("--batch-keys", "0"))
        self.assertIn("--remote-container needs --execution-backend ssh",
                      parse_error("--remote-container", "c"))
        self.assertIn("--ssh-option 'BatchMode' must be K=V",
                      parse_error("--execution-backend", "ssh", "--ssh-option", "BatchMode"))

    def test_retired_and_rejected_flags(self):
        self.assertIn("--threads was retired; use --client-threads-per-process",
                      parse_error("--threads", "4"))
        self.assertIn("--use-local-memcached is not supported", parse_error("--use-local-memcached"))

    def test_profiles_fill_values_and_explicit_flags_win(self):
        a = parse("--profile", "rpc-small", "--transports", "grpc")
        self.assertEqual((flat(a).record_count, flat(a).client_threads_per_process, flat(a).server_worker_threads,
                          flat(a).runtime_seconds), (5000, 2, 2, 1))
        b = parse("--profile", "rpc-small", "--transports", "grpc", "--record-count", "123",
                  "--client-threads-per-process", "3")
        self.assertEqual((flat(b).record_count, flat(b).client_threads_per_process), (123, 3))
        c = parse("--profile", "rdma-capacity", "--transports", "rdma")
        self.assertEqual((flat(c).record_count, flat(c).value_size, flat(c).batch_keys, flat(c).index_type,
                          flat(c).client_processes_per_ip, flat(c).rdma_rc_qps_per_client_per_shard,
                          flat(c).prefetch_depth, flat(c).rdma_client_bind_core_offset,
                          flat(c).effective_row_kind), (1000000, 512, 500, "DRAM_PET_HASH", 4, 16, 16,
                                                  16, "capacity"))
        s = flat(parse("--profile", "rpc-stress-small", "--transports", "grpc"))
        self.assertEqual((s.record_count, s.client_processes_per_ip, s.runtime_seconds), (50000, 4, 3))
        f = flat(parse("--profile", "fair-small", "--transports", "rdma,grpc,brpc"))
        self.assertEqual((f.client_threads_per_process, f.client_load_threads_per_process,
                          f.effective_row_kind), (1, 1, "fair"))

    def test_no_arguments_is_the_smoke_profile_on_every_transport(self):
        a = parse()
        self.assertEqual(flat(a).profile, "smoke")
        self.assertEqual(set(flat(a).transport_list), {"RDMA", "GRPC", "BRPC", "SHM"})
        self.assertEqual((flat(a).record_count, flat(a).value_size, flat(a).batch_keys, flat(a).runtime_seconds, flat(a).repeat),
                         (10000, 128, 64, 1, 1))
        # the smoke profile's QP pool (4 x 1) holds its prefetch depth
        self.assertLessEqual(flat(a).prefetch_depth,
                             flat(a).rdma_rc_qps_per_client_per_shard * flat(a).rdma_rc_slots_per_qp)

    def test_apply_interactive_prompts_updates_prompted_values(self):
        args = runner_cli.build_parser().parse_args(["--transports", "grpc"])
        answers = iter(["grpc,brpc", "10.0.0.2", "10.0.0.1,10.0.0.1", "2", "", "", "5000", "256",
                        "32", "4", "3", "2", "ssh", "/tmp/out"])
        out = io.StringIO()
        answered = runner_cli.apply_interactive_prompts(args, lambda: next(answers), out)
        self.assertIn("record_count", answered)
        self.assertNotIn("server_plan", answered)
        self.assertEqual((args.transports, args.client_ips, args.server_shard_ips,
                          args.client_processes_per_ip, args.record_count, args.value_size,
                          args.batch_keys, args.client_threads_per_process, args.runtime_seconds,
                          args.repeat, args.execution_backend, args.output_dir),
                         ("grpc,brpc", "10.0.0.2", "10.0.0.1,10.0.0.1", 2, 5000, 256, 32, 4, 3.0,
                          2, "ssh", "/tmp/out"))
        self.assertEqual(len(runner_cli.INTERACTIVE_PROMPTS), 14)
        self.assertIn("Record count", out.getvalue())
        bad = iter(["", "", "", "many"])
        with self.assertRaisesRegex(ValueError, "'many'"):
            runner_cli.apply_interactive_prompts(runner_cli.build_parser().parse_args([]),
                                                 lambda: next(bad), out)

    def test_help_mentions_remote_and_topology_args(self):
        text = runner_cli.build_parser().format_help()
        for flag in ("--server-plan", "--client-plan", "--server-shard-ips", "--client-ips",
                     "--remote-sync", "--remote-repo", "--remote-container", "--execution-backend",
                     "--prefetch-depth", "--rdma-rc-fake-get-mode", "--rdma-rc-skip-client-copy",
                     "--rdma-get-response-mode", "--profile", "--interactive", "--ssh-config",
                     "--ssh-option", "--allow-debug-build", "--rdma-control-plane-port"):
            self.assertIn(flag, text)
        for retired in runner_cli.RETIRED_FLAGS:
            self.assertNotIn(retired + " ", text)
            self.assertNotIn(retired + "\n", text)
        self.assertNotIn("use-local-memcached", text)

    def test_wrapper_help_runs(self):
        res = subprocess.run([sys.executable, str(REPO / "tools/benchmarks/run_benchmark_ps.py"),
                              "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("--server-plan", res.stdout)


class TestInteractiveParse(unittest.TestCase):
    def test_derived_defaults_follow_the_answers(self):
        answers = iter(["brpc"] + [""] * 13)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            args = runner_cli.parse_args(["--interactive"], input_fn=lambda: next(answers))
        self.assertEqual(flat(args).transport_list, ["BRPC"])
        self.assertEqual(flat(args).prefetch_depth, 0)  # no RDMA: the RC fetch defaults do not apply
        self.assertIsNone(flat(args).rdma_rc_qps_per_client_per_shard)
        self.assertIn("Transports", err.getvalue())


if __name__ == "__main__":
    unittest.main()
