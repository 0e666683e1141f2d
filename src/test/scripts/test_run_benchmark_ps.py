"""Unit tests of the PS runner's pure parts: flags and validation, profiles, topology plans,
generated configs, command lines, result parsing, summary files and remote command wrapping.
They start no processes (the end-to-end tests are in test_ps_runner_e2e.py / _ssh.py)."""

import contextlib
import dataclasses
import io
import os
import shlex
import subprocess
import sys
import tempfile
import types
import unittest
from pathlib import Path

from recbench import transports
from recbench.runner import cli as runner_cli
from recbench.runner import config as ps_config
from recbench.runner import plan as runner_plan
from recbench.runner import results, topology
from recbench.runner.execution import (
    Host,
    Ssh,
    build_remote_exec_cmd,
    env_command,
    parse_proc_stat_cpu,
    remote_shell_command,
)

REPO = Path(__file__).resolve().parents[3]
T = transports.TRANSPORTS


def parse(*argv):
    return runner_cli.parse_args(list(argv))


def flat(plan):
    """Every field of a plan by its flag's dest name (the plan groups them by consumer)."""
    out = {}
    for part in (plan, plan.workload, plan.servers, plan.rc, plan.execution):
        out.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
    out["transport_list"] = [t.label for t in plan.transports]
    out["effective_row_kind"] = plan.row_kind
    return types.SimpleNamespace(**out)


def parse_error(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), unittest.TestCase().assertRaises(SystemExit):
        runner_cli.parse_args(list(argv))
    return err.getvalue()


def sample_args(*argv, **kw):
    """The plan of `--transports grpc` plus flags: kw name=value is --name value (True: --name)."""
    flags = list(argv)
    for k, v in kw.items():
        if v is True:
            flags.append(f"--{k.replace('_', '-')}")
        elif v is not False:
            flags += [f"--{k.replace('_', '-')}", str(v)]
    if "--transports" not in flags:
        flags = ["--transports", "grpc"] + flags
    return parse(*flags)


class TestLists(unittest.TestCase):
    def test_parse_csv_list_strips_empty_items(self):
        self.assertEqual(topology.parse_csv_list("grpc, brpc,,rdma"), ["grpc", "brpc", "rdma"])

    def test_normalize_transport_list_deduplicates_and_uppercases(self):
        self.assertEqual(topology.normalize_transport_list("grpc, brpc,,rdma,GRPC"),
                         ["GRPC", "BRPC", "RDMA"])
        self.assertEqual(topology.normalize_transport_list("shm"), ["SHM"])

    def test_unknown_transport_raises_naming_it(self):
        with self.assertRaisesRegex(ValueError, "'tcp'"):
            topology.normalize_transport_list("grpc,tcp")
        self.assertIn("unknown transport 'quic'", parse_error("--transports", "quic"))


class TestTopology(unittest.TestCase):
    def test_build_topology_plan_expands_shards_and_client_processes(self):
        topo = topology.build_topology_plan("GRPC", "server-a,server-b", "client-a,client-b", 2)
        self.assertEqual(len(topo.servers), 2)
        s1 = topo.servers[1]
        self.assertEqual((s1.host, s1.ssh_host, s1.shard, s1.port), ("server-b", "server-b", 1, 15001))
        self.assertEqual([(c.client_index, c.host) for c in topo.clients],
                         [(0, "client-a"), (1, "client-a"), (2, "client-b"), (3, "client-b")])

    def test_build_topology_plan_rejects_invalid_client_processes_per_ip(self):
        with self.assertRaisesRegex(ValueError, "client_processes_per_ip"):
            topology.build_topology_plan("GRPC", "a", "b", 0)
        self.assertIn("client_processes_per_ip", parse_error("--client-processes-per-ip", "0"))

    def test_parse_server_plan_supports_explicit_shard_binding(self):
        plan = topology.parse_server_plan("1:server-b:26000:8,0:server-a:25000:3")
        self.assertEqual([s.server_index for s in plan], [0, 1])
        self.assertEqual([s.shard for s in plan], [3, 8])
        self.assertEqual(plan[0].port, 25000)
        self.assertEqual(plan[1].port, 26000)

    def test_server_plan_without_index_uses_position(self):
        plan = topology.parse_server_plan("a:25000:0,b:25001:1")
        self.assertEqual([(s.server_index, s.host) for s in plan], [(0, "a"), (1, "b")])

    def test_parse_client_plan_supports_repeated_hosts(self):
        plan = topology.parse_client_plan("1:client-b,0:client-a,2:client-a")
        self.assertEqual([(c.client_index, c.host) for c in plan],
                         [(0, "client-a"), (1, "client-b"), (2, "client-a")])

    def test_explicit_plans_split_ssh_target_from_endpoint_host(self):
        s = topology.parse_server_plan("0:user@10.0.2.190:25000:0")[0]
        self.assertEqual((s.host, s.ssh_host), ("10.0.2.190", "user@10.0.2.190"))
        c = topology.parse_client_plan("0:user@10.0.2.191")[0]
        self.assertEqual((c.host, c.ssh_host), ("10.0.2.191", "user@10.0.2.191"))
        topo = topology.build_topology_plan("GRPC", "user@10.0.0.5", "me@10.0.0.6", 1)
        self.assertEqual((topo.servers[0].host, topo.servers[0].ssh_host),
                         ("10.0.0.5", "user@10.0.0.5"))
        self.assertEqual(topo.client_hosts(), ["10.0.0.6"])

    def test_ipv6_literals_in_brackets(self):
        s = topology.parse_server_plan("0:user@[fe80::1]:25000:2")[0]
        self.assertEqual((s.host, s.ssh_host, s.port, s.shard), ("fe80::1", "user@fe80::1", 25000, 2))
        c = topology.parse_client_plan("3:[::1]")[0]
        self.assertEqual((c.client_index, c.host), (3, "::1"))
        topo = topology.build_topology_plan("GRPC", "[::1],[::1]", "[::1]", 1)
        self.assertEqual([s.port for s in topo.servers], [15000, 15001])
        self.assertEqual(topology.format_hostport("::1", 15000), "[::1]:15000")
        with self.assertRaisesRegex(ValueError, "brackets"):
            topology.parse_client_plan("fe80::1")

    def test_plan_errors_name_the_bad_entry(self):
        cases = [
            ("0:a:25000:0,0:b:25001:1", "duplicate server_index 0.*'0:b:25001:1'"),
            ("0:a:25000:0,1:b:25001:0", "duplicate shard 0"),
            ("0:a:notaport:0", "port 'notaport' in topology entry '0:a:notaport:0'"),
            ("0:a:70000:0", "port 70000 .*out of range"),
            ("a:b", "must be \\[server_index:\\]host:port:shard"),
            ("0:@a:1:0", "bad user@host"),
            ("0:[::1:1:0", "unbalanced"),
        ]
        for text, pattern in cases:
            with self.subTest(text=text), self.assertRaisesRegex(topology.TopologyError, pattern):
                topology.parse_server_plan(text)
        with self.assertRaisesRegex(topology.TopologyError, "duplicate client_index 1"):
            topology.parse_client_plan("1:a,1:b")
        with self.assertRaisesRegex(topology.TopologyError, "'x:1:a'"):
            topology.parse_client_plan("x:1:a")
        with self.assertRaisesRegex(topology.TopologyError, "both listen on 127.0.0.1:9000"):
            topology.build_topology_plan("GRPC", server_plan="0:127.0.0.1:9000:0,1:127.0.0.1:9000:1")

    def test_build_topology_plan_uses_explicit_server_and_client_plan(self):
        topo = topology.build_topology_plan(
            "BRPC", server_plan="0:s-a:25010:4,1:s-b:25011:9", client_plan="0:c-a,1:c-b")
        self.assertEqual([(s.shard, s.port) for s in topo.servers], [(4, 25010), (9, 25011)])
        self.assertEqual([c.host for c in topo.clients], ["c-a", "c-b"])

    def test_build_topology_plan_allows_server_plan_with_default_clients(self):
        topo = topology.build_topology_plan("GRPC", client_ips="127.0.0.1", client_processes_per_ip=3,
                                            server_plan="0:127.0.0.1:15000:0")
        self.assertEqual(len(topo.clients), 3)
        self.assertEqual([c.client_index for c in topo.clients], [0, 1, 2])

    def test_resolve_base_port_uses_brpc_single_shard_default(self):
        self.assertEqual(topology.resolve_base_port("BRPC", 1), 15000)
        self.assertEqual(topology.resolve_base_port("BRPC", 2), 25000)
        self.assertEqual(topology.resolve_base_port("GRPC", 3), 15000)
        self.assertEqual(topology.resolve_base_port("RDMA", 1), 25000)
        self.assertEqual(topology.resolve_base_port("SHM", 2, rc_port=26100), 26100)
        topo = topology.build_topology_plan("BRPC", "a,a", "c", 1)
        self.assertEqual([s.port for s in topo.servers], [25000, 25001])


class TestConfig(unittest.TestCase):
    def topo(self):
        return topology.build_topology_plan("BRPC", server_plan="0:h0:25000:0,1:h1:25001:1",
                                            client_plan="0:c0")

    def test_build_runtime_config_writes_explicit_shards(self):
        cfg = ps_config.build_runtime_config(sample_args(), T["brpc"], self.topo(), "/data/x")
        self.assertEqual(cfg["cache_ps"]["ps_type"], "BRPC")
        self.assertEqual(cfg["distributed_client"]["servers"][1], {"host": "h1", "port": 25001, "shard": 1})
        self.assertEqual(cfg["client"]["port"], 25000)
        self.assertEqual(cfg["cache_ps"]["num_shards"], 2)
        self.assertEqual(cfg["distributed_client"]["hash_method"], "city_hash")
        self.assertEqual(cfg["cache_ps"]["max_batch_keys_size"], 1024)  # max(batch 1024, 500)

    def test_build_runtime_config_uses_rdma_ps_type(self):
        args = parse("--transports", "rdma")
        topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 1)
        cfg = ps_config.build_runtime_config(args, T["rdma"], topo, "/d")
        self.assertEqual(cfg["cache_ps"]["ps_type"], "RDMA")
        self.assertEqual(cfg["rdma"]["num_client_processes"], 1)
        self.assertEqual(cfg["rdma"]["num_server_processes"], 1)
        self.assertEqual(cfg["cache_ps"]["num_threads"], flat(args).server_rdma_threads)

    def test_build_runtime_config_adds_slab_metadata_capacity(self):
        args = sample_args(capacity=1024, value_size=128)
        cfg = ps_config.build_runtime_config(args, T["grpc"], self.topo(), "/d")
        value = cfg["cache_ps"]["base_kv_config"]["value"]
        self.assertEqual(value["dram_allocator"]["capacity_bytes"], 1 << 20)
        self.assertEqual(value["path"], "/d")
        self.assertEqual(cfg["cache_ps"]["base_kv_config"]["capacity"], 1024)

    def test_recommended_dram_capacity_bytes_adds_slab_headroom(self):
        self.assertEqual(ps_config.recommended_dram_capacity_bytes(1000000, 512, "PERSIST_LOOP_SLAB"),
                         596 << 20)

    def test_recommended_dram_capacity_bytes_keeps_non_slab_exact(self):
        self.assertEqual(ps_config.recommended_dram_capacity_bytes(100, 64, "R2_ALLOC"), 6400)

    def test_resolve_rdma_get_response_mode_auto_binds_pet_hash_to_staging(self):
        resolve = runner_plan.resolve_get_response_mode
        self.assertEqual(resolve("auto", "DRAM_PET_HASH"), "staging_copy")
        self.assertEqual(resolve("auto", "DRAM_EXTENDIBLE_HASH"), "direct_sg")
        self.assertEqual(resolve("direct_sg", "DRAM_PET_HASH"), "direct_sg")


class TestCommands(unittest.TestCase):
    def test_build_benchmark_cmd_includes_transactions_args(self):
        args = parse("--transports", "rdma", "--prefetch-depth", "4",
                     "--index-type", "DRAM_PET_HASH", "--rdma-rc-qps-per-client-per-shard", "4",
                     "--verify-deterministic-values", "--record-count", "777")
        topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 1)
        cmd = ps_config.build_benchmark_cmd(args, T["rdma"], topo, topo.clients[0], "/c.json",
                                            ["py", "-m", "recbench.ps_bench"])
        for flag in ("--workload=transactions", "--record_count=777", "--config_path=/c.json",
                     "--value_size=512", "--prefetch_depth=4", "--verify_deterministic_values=true",
                     "--transport=rdma", "--thread_num=16", "--load_thread_num=16", "--num_shards=1"):
            self.assertIn(flag, cmd)
        self.assertEqual(cmd[:3], ["py", "-m", "recbench.ps_bench"])
        opts = transport_options(cmd)
        self.assertEqual(opts["get_response_mode"], "staging_copy")
        self.assertEqual((opts["qps_per_client_per_shard"], opts["slots_per_qp"]), ("4", "1"))
        # RecStore's adapter diagnostic has no counterpart in recbench: refused, not ignored
        self.assertIn("--rdma-adapter-skip-prefetch-result-copy is not available in recbench",
                      parse_error("--transports", "rdma", "--rdma-adapter-skip-prefetch-result-copy"))
        self.assertIn("--rdma-direct-async-fetch is not available",
                      parse_error("--transports", "rdma", "--rdma-direct-async-fetch"))
        self.assertIn("only 1 is possible",
                      parse_error("--transports", "rdma", "--rdma-rc-server-coroutines-per-thread", "4"))
        parse("--transports", "rdma", "--rdma-rc-server-coroutines-per-thread", "1")

    def test_client_seed_differs_per_client(self):
        args = parse("--transports", "grpc", "--seed", "10")
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 2)
        seeds = [ps_config.build_benchmark_cmd(args, T["grpc"], topo, c, "/c", ["x"])[-1]
                 for c in topo.clients]
        self.assertEqual(seeds, ["--seed=10", "--seed=11"])

    def test_build_server_cmd_passes_brpc_config_and_port(self):
        args = sample_args()
        server = topology.ServerSpec(0, "10.0.0.1", "10.0.0.1", 25000, 3)
        cmd = ps_config.build_server_cmd(args, T["brpc"], server, 4, "/cfg.json", ["srv"])
        for flag in ("--config_path=/cfg.json", "--local_shard_id=3", "--brpc_server_port=25000",
                     "--transport=brpc", "--port=25000", "--host=10.0.0.1", "--num_shards=4",
                     "--num_threads=32", "--max_keys_per_request=1024"):
            self.assertIn(flag, cmd)

    def test_build_server_cmd_leaves_grpc_single_shard_default_port(self):
        server = topology.ServerSpec(0, "127.0.0.1", "127.0.0.1", 15000, 0)
        cmd = ps_config.build_server_cmd(sample_args(), T["grpc"], server, 1, "/c", ["srv"])
        self.assertIn("--local_shard_id=0", cmd)
        self.assertFalse(any(a.startswith("--brpc_server_port") for a in cmd))
        self.assertFalse(any(a.startswith("--rdma") for a in cmd))

    def test_build_rdma_runner_forwards_profile_interval(self):
        args = parse("--transports", "rdma", "--rdma-rc-profile-interval-ms", "250",
                     "--rdma-rc-server-get-workers", "2", "--rdma-rc-fake-get-mode", "status_only",
                     "--rdma-rc-client-numa-id", "1", "--rdma-rc-skip-client-copy",
                     "--rdma-wait-timeout-ms", "8000", "--transport-options", "poll_mode=busy")
        self.assertEqual(flat(args).rdma_rc_profile_interval_ms, 250)
        topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 2)
        srv = ps_config.build_server_cmd(args, T["rdma"], topo.servers[0], 1, "/c", ["s"],
                                         ps_config.bind_core_offset(args, T["rdma"], "server", 0, None))
        self.assertIn("--num_threads=1", srv)
        self.assertEqual(transport_options(srv), {
            "profile_interval_ms": "250", "server_get_workers": "2", "fake_get_mode": "status_only",
            "numa_id": "0", "get_response_mode": "direct_sg", "bind_core_offset": "0",
            "poll_mode": "busy"})
        cli = [ps_config.build_benchmark_cmd(args, T["rdma"], topo, c, "/c", ["c"],
                                             ps_config.bind_core_offset(args, T["rdma"], "client",
                                                                        c.client_index, None))
               for c in topo.clients]
        o = transport_options(cli[0])
        self.assertEqual((o["profile_interval_ms"], o["numa_id"], o["skip_client_copy"],
                          o["qps_per_client_per_shard"], o["wait_timeout_ms"], o["poll_mode"],
                          o["control_plane_timeout_ms"]),
                         ("250", "1", "true", "16", "8000", "busy", "45000"))
        # client NUMA differs from the server's: client cores start at 0, one block per process
        self.assertEqual([transport_options(c)["bind_core_offset"] for c in cli], ["0", "16"])
        self.assertEqual(flat(args).effective_row_kind, "diagnostic")

    def test_transport_options_scoped_by_transport_name(self):
        args = parse("--transports", "grpc,brpc,shm", "--transport-options",
                     "grpc:poll_strategy=poll;shm:poll_mode=busy,malloc_tuning=1")
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 1)
        grpc_srv = ps_config.build_server_cmd(args, T["grpc"], topo.servers[0], 1, "/c", ["s"])
        grpc_cli = ps_config.build_benchmark_cmd(args, T["grpc"], topo, topo.clients[0], "/c", ["c"])
        for cmd in (grpc_srv, grpc_cli):
            self.assertEqual(transport_options(cmd), {"poll_strategy": "poll", "malloc_tuning": "1"})
        brpc = ps_config.build_server_cmd(args, T["brpc"], topo.servers[0], 1, "/c", ["s"])
        self.assertEqual(transport_options(brpc), {"malloc_tuning": "1"})
        shm = transport_options(ps_config.build_server_cmd(args, T["shm"], topo.servers[0], 1, "/c",
                                                           ["s"]))
        self.assertEqual((shm["poll_mode"], shm["malloc_tuning"]), ("busy", "1"))
        self.assertNotIn("poll_strategy", shm)
        self.assertIn("unknown transport 'tcp'",
                      parse_error("--transports", "grpc", "--transport-options", "tcp:x=1"))

    def test_core_offsets_wrap_and_placement_defaults_skip_shm(self):
        args = parse("--transports", "rdma,shm", "--server-rdma-threads", "2",
                     "--client-processes-per-ip", "3")
        topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 3)
        offs = [ps_config.bind_core_offset(args, T["rdma"], "client", c.client_index, 4)
                for c in topo.clients]
        self.assertEqual(offs, [2, 2, 2])  # 2 + k*16 wraps on 4 cores
        cmd = ps_config.build_benchmark_cmd(args, T["rdma"], topo, topo.clients[1], "/c", ["c"],
                                            offs[1])
        self.assertEqual(transport_options(cmd)["bind_core_offset"], "2")
        self.assertIsNone(ps_config.bind_core_offset(args, T["shm"], "client", 0, 4))
        shm = transport_options(ps_config.build_benchmark_cmd(args, T["shm"], topo, topo.clients[0],
                                                              "/c", ["c"]))
        self.assertNotIn("bind_core_offset", shm)
        self.assertNotIn("numa_id", shm)
        explicit = parse("--transports", "shm", "--rdma-server-bind-core-offset", "1")
        offset = ps_config.bind_core_offset(explicit, T["shm"], "server", 0, 4)
        srv = ps_config.build_server_cmd(explicit, T["shm"], topo.servers[0], 1, "/c", ["s"], offset)
        self.assertEqual(transport_options(srv)["bind_core_offset"], "1")
        grpc = ps_config.build_server_cmd(args, T["grpc"], topo.servers[0], 1, "/c", ["s"])
        self.assertFalse(any(a.startswith("--transport_options") for a in grpc))


def transport_options(cmd):
    text = next(a for a in cmd if a.startswith("--transport_options=")).split("=", 1)[1]
    return dict(item.split("=", 1) for item in text.split(";"))


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


RESULT_TEXT = """noise
PS_BENCHMARK_RESULT phase=load transport=grpc mode=fetch distribution=uniform zipfian_alpha=0.9 threads=2 batch_size=64 records=1000 runtime_s=0.5 batches=100 key_ops=6400 throughput_batches_sec=200.0 throughput_keys_sec=12800.0 mean_us=10.5 p50_us=9 p95_us=20 p99_us=30 p999_us=40 max_us=50 cpu_user_s=0.2 cpu_sys_s=0.1 payload_gbps=0.0016
PS_BENCHMARK_LOADED
PS_BENCHMARK_RESULT phase=run transport=grpc mode=fetch distribution=uniform zipfian_alpha=0.9 threads=2 batch_size=64 records=1000 runtime_s=1.0 batches=1000 key_ops=64000 throughput_batches_sec=1000.0 throughput_keys_sec=64000.0 mean_us=100 p50_us=90 p95_us=150 p99_us=200 p999_us=300 max_us=400 cpu_user_s=0.5 cpu_sys_s=0.3 payload_gbps=0.0082
"""


class TestResults(unittest.TestCase):
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
            self.assertEqual(len(results.SUMMARY_COLUMNS), 36)  # RecStore 25 + recbench 11
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
            mean = next(t for t in totals if t["phase"] == "run" and t["repeat_index"] == "mean")
            # a case with a failed client is not a valid total: the mean leaves it out
            self.assertEqual((mean["repeats"], mean["status"]), (0, "no_success"))
            results.write_totals_csv(os.path.join(d, "t.csv"), totals)
            header = Path(d, "t.csv").read_text().splitlines()[0]
            self.assertEqual(header.split(","), results.TOTALS_COLUMNS)

    def test_mean_row_spread_over_repeats(self):
        cases = [{"transport": "GRPC", "repeat_index": i, "phase": "run", "status": "success",
                  "key_ops_per_sec": v, "row_kind": "fair", "clients_ok": 1, "clients_failed": 0}
                 for i, v in enumerate([100.0, 200.0, 300.0])]
        m = results.mean_row(cases, "GRPC", "run")
        self.assertEqual((m["key_ops_per_sec"], m["key_ops_per_sec_stdev"], m["key_ops_per_sec_min"],
                          m["key_ops_per_sec_max"], m["repeats"]), (200.0, 100.0, 100.0, 300.0, 3))


class TestRemoteCommands(unittest.TestCase):
    def test_build_remote_exec_cmd_wraps_container_when_present(self):
        cmd = build_remote_exec_cmd("worker-a", "/app/repo", "echo ready", container="recstore-dev")
        self.assertEqual(cmd[:4], ["ssh", "worker-a", "bash", "-lc"])
        self.assertEqual(len(cmd), 5)
        self.assertIn("docker exec recstore-dev bash -lc", cmd[4])
        self.assertIn("cd /app/repo && echo ready", cmd[4])
        # what the remote login shell gets after ssh joins the words: one argument to bash -lc
        remote = shlex.split(cmd[4])
        self.assertEqual(len(remote), 1)
        inner = shlex.split(remote[0])
        self.assertEqual(inner[:5], ["docker", "exec", "recstore-dev", "bash", "-lc"])
        self.assertEqual(inner[5], "cd /app/repo && echo ready")

    def test_build_remote_exec_cmd_quotes_remote_shell_command(self):
        cmd = build_remote_exec_cmd("worker-a", "/app/my repo", "mkdir -p '/tmp/x y' && echo $HOME")
        self.assertEqual(cmd[:4], ["ssh", "worker-a", "bash", "-lc"])
        self.assertTrue(cmd[4].startswith("'") and cmd[4].endswith("'"))
        self.assertEqual(shlex.split(cmd[4]), ["cd '/app/my repo' && mkdir -p '/tmp/x y' && echo $HOME"])
        # the remote shell really runs it as intended
        out = subprocess.run(["bash", "-c", "bash -lc " + cmd[4].replace("/app/my repo", "/")],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_container_command_survives_two_shells(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "it's here")
            inner = remote_shell_command(d, f"touch {shlex.quote(marker)} && echo \"$0\"", None)
            # emulate `docker exec C bash -lc <arg>` by a nested bash -lc of the same argument
            wrapped = remote_shell_command(d, f"touch {shlex.quote(marker)}", "c", interactive=True)
            self.assertTrue(wrapped.startswith("docker exec -i c bash -lc "))
            nested = shlex.split(wrapped)[6]
            res = subprocess.run(["bash", "-c", "bash -lc " + shlex.quote(nested)],
                                 capture_output=True, text=True)
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertTrue(os.path.exists(marker))
            self.assertIn("cd ", inner)

    def test_ssh_options_batchmode_controlmaster_config(self):
        ssh = Ssh("/etc/my_ssh_config", ["ConnectionAttempts=2", "Port=2222"])
        try:
            cmd = build_remote_exec_cmd("user@h", "/r", "true", ssh=ssh)
            self.assertEqual(cmd[:3], ["ssh", "-F", "/etc/my_ssh_config"])
            joined = " ".join(cmd)
            for opt in ("BatchMode=yes", "ControlMaster=auto", "ControlPersist=60",
                        f"ControlPath={ssh.control_dir}/%C", "ConnectionAttempts=2", "Port=2222"):
                self.assertIn(opt, joined)
            self.assertEqual(cmd[-4:-1], ["user@h", "bash", "-lc"])
        finally:
            ssh.close()
        self.assertFalse(os.path.exists(ssh.control_dir))

    def test_env_reaches_the_command(self):
        text = env_command(["python", "-m", "x"], {"RECSTORE_CONFIG": "/a b.json", "X": "1"})
        self.assertEqual(text, "exec env 'RECSTORE_CONFIG=/a b.json' X=1 python -m x")
        out = subprocess.run(["bash", "-c", env_command(["bash", "-c", "echo $RECSTORE_CONFIG"],
                                                         {"RECSTORE_CONFIG": "/a b.json"})],
                             capture_output=True, text=True)
        self.assertEqual(out.stdout.strip(), "/a b.json")

    def test_local_host_run_and_proc_stat(self):
        res = Host(None, repo="/").run("pwd")
        self.assertEqual(res.stdout.strip(), "/")
        with open(f"/proc/{os.getpid()}/stat") as f:
            self.assertGreaterEqual(parse_proc_stat_cpu(f.read()), 0.0)
        self.assertIsNone(parse_proc_stat_cpu("garbage"))


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


if __name__ == "__main__":
    unittest.main()


class TestAvailability(unittest.TestCase):
    def test_transport_availability_covers_the_table(self):
        from recbench import _ps
        from recbench.runner import preflight

        got = preflight.transport_availability()
        self.assertEqual(list(got), ["rdma", "grpc", "brpc", "shm"])  # the table's order
        self.assertEqual(got, {t: _ps.transports()[t] for t in got})


class TestFlagForwarding(unittest.TestCase):
    def test_unsupported_optional_flags(self):
        from recbench.runner import session as runner_session

        with tempfile.TemporaryDirectory() as d:
            args = parse("--transports", "grpc", "--transaction-profile", "--output-dir", d)
            session = runner_session.Session(args, [])
            supported = {"transport", "config_path"}
            argv = ["--transport=grpc", "--config_path=/c", "--brand_new_core_flag=1"]
            # core flags always pass, even when --help does not list them
            self.assertEqual(session.filter_flags(argv, supported, "ps_bench"), argv)
            # a flag the user set explicitly is never dropped silently
            with self.assertRaisesRegex(runner_session.PreflightError,
                                        "does not accept --transaction_profile .*--transaction-profile"):
                session.filter_flags(argv + ["--transaction_profile=true"], supported, "ps_bench")
            # a derived one is dropped and recorded
            session.plan = dataclasses.replace(session.plan, explicit=frozenset())
            self.assertEqual(session.filter_flags(argv + ["--report_mode=both"], supported, "b"), argv)
            self.assertEqual(session.not_forwarded, {"b: --report_mode"})
            # --help that could not be read: nothing is filtered
            self.assertEqual(session.filter_flags(argv, {"__error__": "x"}, "p"), argv)


class TestCaseTopology(unittest.TestCase):
    def test_shard_ids_must_be_dense_to_run(self):

        with tempfile.TemporaryDirectory() as d:
            self.assertRegex(parse_error("--transports", "grpc", "--server-plan",
                                         "0:a:25000:3,1:b:26000:8", "--output-dir", d),
                             r"shard ids \[3, 8\] must be dense, 0..1")
            ok = parse("--transports", "grpc,shm", "--server-plan", "1:a:25001:1,0:b:25000:0",
                       "--output-dir", d)
            topo = ok.topology(T["shm"])
            self.assertEqual([(s.host, s.port) for s in topo.servers], [("b", 25000), ("a", 25001)])

    def test_local_rc_ports_are_free_ports_and_shm_ps_type(self):

        with tempfile.TemporaryDirectory() as d:
            args = parse("--transports", "shm", "--server-shard-ips", "127.0.0.1,127.0.0.1",
                         "--output-dir", d, "--transport-options", "poll_mode=adaptive")
            topo = args.topology(T["shm"])
            ports = [s.port for s in topo.servers]
            self.assertEqual(len(set(ports)), 2)
            cfg = ps_config.build_runtime_config(args, T["shm"], topo, "/d")
            self.assertEqual(cfg["cache_ps"]["ps_type"], "LOCAL_SHM")
            srv = ps_config.build_server_cmd(args, T["shm"], topo.servers[1], 2, "/c", ["s"])
            self.assertEqual(transport_options(srv)["poll_mode"], "adaptive")
            self.assertIn(f"--port={ports[1]}", srv)
            cli = ps_config.build_benchmark_cmd(args, T["shm"], topo, topo.clients[0], "/c", ["c"])
            self.assertEqual(transport_options(cli)["poll_mode"], "adaptive")
            self.assertFalse(any(a.startswith(("--host=", "--port=")) for a in cli))


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


class TestBuildTypeCheck(unittest.TestCase):
    def problems(self, build_type, *extra):
        from recbench.runner import session as runner_session

        with tempfile.TemporaryDirectory() as d:
            session = runner_session.Session(parse("--transports", "brpc", "--output-dir", d, *extra), [])
            return session._build_problems("local", {"recbench": {"build_type": build_type}})

    def test_release_required_unless_allowed(self):
        self.assertEqual(self.problems("Release"), [])
        self.assertIn("Debug build; numbers need Release", self.problems("Debug")[0])
        self.assertEqual(self.problems("Debug", "--allow-debug-build"), [])
        self.assertIn("demands a Release build, found ASan",
                      self.problems("ASan", "--allow-debug-build", "--build-dir", "build_release")[0])


class TestFabricPlan(unittest.TestCase):
    def test_parse_rdma_fabric_plan_requires_all_nodes(self):
        plan = topology.parse_rdma_fabric_plan("0:mlx5_0:1:3:ib,1:mlx5_1:2:0:rocev1", [0, 1])
        self.assertEqual((plan[0].device, plan[0].port, plan[0].gid_index), ("mlx5_0", 1, 3))
        self.assertEqual((plan[1].device, plan[1].port, plan[1].mode), ("mlx5_1", 2, "rocev1"))
        with self.assertRaisesRegex(topology.TopologyError, "cover every node: missing node ids \\[1\\]"):
            topology.parse_rdma_fabric_plan("0:mlx5_0:1:0:ib", [0, 1])
        with self.assertRaisesRegex(topology.TopologyError, "not in the topology"):
            topology.parse_rdma_fabric_plan("0:a:1:0:ib,7:a:1:0:ib", [0])
        with self.assertRaisesRegex(topology.TopologyError, "mode 'iwarp'"):
            topology.parse_rdma_fabric_plan("0:a:1:0:iwarp", [0])

    def test_parse_rdma_fabric_plan_requires_rocev2_network_fields(self):
        with self.assertRaisesRegex(topology.TopologyError, "needs all 8 fields"):
            topology.parse_rdma_fabric_plan("0:mlx5_0:1:3:rocev2", [0])
        plan = topology.parse_rdma_fabric_plan("0:mlx5_0:1:3:rocev2:64:0:0", [0])
        self.assertEqual(plan[0].hop_limit, 64)
        with self.assertRaisesRegex(topology.TopologyError, "traffic_class=106 .*defaults"):
            topology.parse_rdma_fabric_plan("0:mlx5_0:1:3:rocev2:64:106:0", [0])

    def test_fabric_plan_reaches_each_rdma_process(self):
        args = parse("--transports", "rdma,shm", "--client-processes-per-ip", "2",
                     "--rdma-fabric-plan", "0:mlx5_0:1:3:ib,1:mlx5_1:1:0:ib,2:mlx5_2:2:1:ib")
        topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 2)
        srv = transport_options(ps_config.build_server_cmd(args, T["rdma"], topo.servers[0], 1, "/c", ["s"]))
        self.assertEqual((srv["device"], srv["ib_port"], srv["gid_index"]), ("mlx5_0", "1", "3"))
        cli = transport_options(ps_config.build_benchmark_cmd(args, T["rdma"], topo, topo.clients[1], "/c", ["c"]))
        self.assertEqual((cli["device"], cli["ib_port"], cli["gid_index"]), ("mlx5_2", "2", "1"))
        shm = transport_options(ps_config.build_benchmark_cmd(args, T["shm"], topo, topo.clients[1], "/c", ["c"]))
        self.assertNotIn("device", shm)
        self.assertIn("cover every node", parse_error("--transports", "rdma", "--rdma-fabric-plan",
                                                      "0:mlx5_0:1:0:ib"))
        self.assertIn("rdma transport only", parse_error("--transports", "grpc", "--rdma-fabric-plan",
                                                         "0:mlx5_0:1:0:ib,1:mlx5_0:1:0:ib"))

    def test_fabric_plan_checked_against_host_devices(self):
        from recbench.runner import session as runner_session

        with tempfile.TemporaryDirectory() as d:
            args = parse("--transports", "rdma", "--output-dir", d, "--rdma-fabric-plan",
                         "0:mlx5_0:1:0:rocev2:64:0:0,1:mlx5_9:1:0:ib")
            session = runner_session.Session(args, [])
            session.facts["local"] = {"rdma_devices": [
                {"name": "mlx5_0", "ports": [{"port": 1, "link_layer": "InfiniBand"}]}]}
            topo = topology.build_topology_plan("RDMA", "127.0.0.1", "127.0.0.1", 1)
            problems = session.fabric_problems(T["rdma"], topo)
            self.assertIn("mode rocev2 needs an Ethernet port, mlx5_0 port 1 on local is InfiniBand",
                          problems[0])
            self.assertIn("device mlx5_9 is not on local (it has mlx5_0)", problems[1])
