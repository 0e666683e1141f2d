"""recbench.runner.config: the generated configs and the server/client command lines."""

import tempfile
import unittest

from runner_testlib import T, flat, parse, parse_error, sample_args, transport_options

from recbench.runner import config as ps_config
from recbench.runner import plan as runner_plan
from recbench.runner import topology


def server_and_client_options(args, name: str) -> tuple[dict, dict]:
    """The --transport_options of transport `name`'s first server and first client commands."""
    topo = topology.build_topology_plan(name.upper(), "127.0.0.1", "127.0.0.1", 1)
    srv = ps_config.build_server_cmd(args, T[name], topo.servers[0], 1, "/c", ["s"])
    cli = ps_config.build_benchmark_cmd(args, T[name], topo, topo.clients[0], "/c", ["c"])
    return transport_options(srv), transport_options(cli)


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
        self.assertEqual(cfg["distributed_client"]["hash_method"], "rs_mix64")
        self.assertEqual(cfg["cache_ps"]["max_batch_keys_size"], 1024)  # max(batch 1024, 500)

    def test_config_of_a_recstore_wire_case_says_city_hash(self):
        cfg = ps_config.build_runtime_config(sample_args("--wire", "recstore"), T["brpc"],
                                             self.topo(), "/data/x")
        self.assertEqual(cfg["distributed_client"]["hash_method"], "city_hash")

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
        # on shm the gather would be the server's CPU copying row by row: the staging copy
        self.assertEqual(resolve("auto", "DRAM_EXTENDIBLE_HASH", "shm"), "staging_copy")
        self.assertEqual(resolve("direct_sg", "DRAM_EXTENDIBLE_HASH", "shm"), "direct_sg")


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

    def test_wire_recstore_reaches_the_clients(self):
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 1)
        cmd = ps_config.build_benchmark_cmd(parse("--transports", "grpc,brpc", "--wire", "recstore"),
                                            T["grpc"], topo, topo.clients[0], "/c", ["x"])
        self.assertIn("--wire=recstore", cmd)
        native = ps_config.build_benchmark_cmd(parse("--transports", "grpc"), T["grpc"], topo,
                                               topo.clients[0], "/c", ["x"])
        self.assertFalse([a for a in native if a.startswith("--wire")])
        self.assertIn("RecStore's wire exists on brpc and grpc only, not SHM",
                      parse_error("--transports", "grpc,shm", "--wire", "recstore"))

    def test_client_seed_differs_per_client(self):
        args = parse("--transports", "grpc", "--seed", "10")
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 2)
        seeds = [ps_config.build_benchmark_cmd(args, T["grpc"], topo, c, "/c", ["x"])[-1]
                 for c in topo.clients]
        self.assertEqual(seeds, ["--seed=10", "--seed=11"])

    def test_target_rate_reaches_the_clients_only_when_set(self):
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 2)
        args = parse("--transports", "grpc", "--seed", "10", "--target-rate", "500",
                     "--arrival", "uniform")
        cmds = [ps_config.build_benchmark_cmd(args, T["grpc"], topo, c, "/c", ["x"])
                for c in topo.clients]
        for i, cmd in enumerate(cmds):
            for flag in ("--target_rate=500", "--arrival=uniform", f"--arrival_seed={10 + i}"):
                self.assertIn(flag, cmd)
        closed = ps_config.build_benchmark_cmd(parse("--transports", "grpc"), T["grpc"], topo,
                                               topo.clients[0], "/c", ["x"])
        self.assertFalse([a for a in closed if a.startswith(("--target_rate", "--arrival"))])

    def test_inflight_budget_reaches_the_clients_only_when_set(self):
        topo = topology.build_topology_plan("GRPC", "127.0.0.1", "127.0.0.1", 1)
        for text, flag in (("4M", "--max_inflight_bytes=4194304"),
                           ("none", "--max_inflight_bytes=none")):
            cmd = ps_config.build_benchmark_cmd(
                parse("--transports", "grpc", "--client-max-inflight-bytes", text), T["grpc"],
                topo, topo.clients[0], "/c", ["x"])
            self.assertIn(flag, cmd)
        default = ps_config.build_benchmark_cmd(parse("--transports", "grpc"), T["grpc"], topo,
                                                topo.clients[0], "/c", ["x"])
        self.assertFalse([a for a in default if a.startswith("--max_inflight_bytes")])
        self.assertIn("'lots' is not a byte count",
                      parse_error("--transports", "grpc", "--client-max-inflight-bytes", "lots"))

    def test_build_server_cmd_passes_brpc_config_and_port(self):
        args = sample_args()
        server = topology.ServerSpec(0, "10.0.0.1", "10.0.0.1", 25000, 3)
        cmd = ps_config.build_server_cmd(args, T["brpc"], server, 4, "/cfg.json", ["srv"])
        for flag in ("--config_path=/cfg.json", "--local_shard_id=3", "--brpc_server_port=25000",
                     "--transport=brpc", "--port=25000", "--host=10.0.0.1", "--num_shards=4",
                     "--num_threads=32", "--max_keys_per_request=1024"):
            self.assertIn(flag, cmd)

    def test_huge_pages_reach_the_servers_and_are_refused_where_no_server_is_ours(self):
        server = topology.ServerSpec(0, "127.0.0.1", "127.0.0.1", 15000, 0)
        default = ps_config.build_server_cmd(sample_args(), T["brpc"], server, 1, "/c", ["srv"])
        self.assertFalse(any(a.startswith("--huge_pages") for a in default))  # auto: ps_server's own
        for mode in ("explicit", "thp", "off"):
            cmd = ps_config.build_server_cmd(sample_args("--huge-pages", mode), T["brpc"], server,
                                             1, "/c", ["srv"])
            self.assertIn(f"--huge_pages={mode}", cmd)
        self.assertIn("invalid choice", parse_error("--huge-pages", "always"))
        self.assertIn("--huge-pages thp: a --server-binary",
                      parse_error("--transports", "brpc", "--huge-pages", "thp",
                                  "--server-binary", "/bin/true"))
        self.assertIn("--huge-pages off: --server-endpoints",
                      parse_error("--transports", "grpc", "--huge-pages", "off",
                                  "--server-endpoints", "127.0.0.1:1"))

    def test_build_server_cmd_leaves_grpc_single_shard_default_port(self):
        server = topology.ServerSpec(0, "127.0.0.1", "127.0.0.1", 15000, 0)
        cmd = ps_config.build_server_cmd(sample_args(), T["grpc"], server, 1, "/c", ["srv"])
        self.assertIn("--local_shard_id=0", cmd)
        self.assertFalse(any(a.startswith("--brpc_server_port") for a in cmd))
        self.assertFalse(any(a.startswith("--rdma") for a in cmd))

    def test_shm_processes_get_the_staging_copy_by_default(self):
        args = parse("--transports", "shm")  # the default index, extendible hash
        topo = topology.build_topology_plan("SHM", "127.0.0.1", "127.0.0.1", 1)
        srv = ps_config.build_server_cmd(args, T["shm"], topo.servers[0], 1, "/c", ["s"],
                                         ps_config.bind_core_offset(args, T["shm"], "server", 0, None))
        cli = ps_config.build_benchmark_cmd(args, T["shm"], topo, topo.clients[0], "/c", ["c"])
        for cmd in (srv, cli):
            self.assertEqual(transport_options(cmd)["get_response_mode"], "staging_copy")

    def test_rows_in_slots_reaches_ps_bench_with_slots_for_it(self):
        args = parse("--transports", "brpc,shm", "--prefetch-depth", "12", "--rdma-rc-rows-in-slots")
        topo = topology.build_topology_plan("SHM", "127.0.0.1", "127.0.0.1", 1)
        cli = ps_config.build_benchmark_cmd(args, T["shm"], topo, topo.clients[0], "/c", ["c"])
        self.assertIn("--rdma_rc_rows_in_slots=true", cli)
        # a response slot set aside per batch in flight: the derived QP pool doubles the depth
        self.assertEqual(transport_options(cli)["qps_per_client_per_shard"], "24")
        smoke = parse("--profile", "smoke", "--transports", "shm", "--rdma-rc-rows-in-slots")
        self.assertEqual(transport_options(ps_config.build_benchmark_cmd(
            smoke, T["shm"], topo, topo.clients[0], "/c", ["c"]))["qps_per_client_per_shard"], "8")
        brpc = ps_config.build_benchmark_cmd(args, T["brpc"], topo, topo.clients[0], "/c", ["c"])
        self.assertNotIn("--rdma_rc_rows_in_slots=true", brpc)
        self.assertIn("one server shard, not 2",
                      parse_error("--transports", "shm", "--server-shard-ips", "127.0.0.1,127.0.0.1",
                                  "--rdma-rc-rows-in-slots"))
        self.assertIn("x 2 (--rdma-rc-rows-in-slots)",
                      parse_error("--transports", "shm", "--prefetch-depth", "8",
                                  "--rdma-rc-qps-per-client-per-shard", "12",
                                  "--rdma-rc-rows-in-slots"))

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
        # RecStore gives clients at least 30 s for the control plane, whatever --cluster-timeout
        short = parse("--transports", "shm", "--cluster-timeout", "5")
        o = transport_options(ps_config.build_benchmark_cmd(short, T["shm"], topo, topo.clients[0],
                                                            "/c", ["c"]))
        self.assertEqual(o["control_plane_timeout_ms"], "30000")
        # client NUMA differs from the server's: client cores start at 0, one block per process
        self.assertEqual([transport_options(c)["bind_core_offset"] for c in cli], ["0", "16"])
        self.assertEqual(flat(args).effective_row_kind, "diagnostic")

    def test_transport_options_scoped_by_transport_name(self):
        args = parse("--transports", "grpc,brpc,shm", "--transport-options",
                     "grpc:poll_strategy=poll;shm:poll_mode=busy,malloc_tuning=1")
        for opts in server_and_client_options(args, "grpc"):
            self.assertEqual(opts, {"poll_strategy": "poll", "malloc_tuning": "1"})
        self.assertEqual(server_and_client_options(args, "brpc")[0], {"malloc_tuning": "1"})
        shm = server_and_client_options(args, "shm")[0]
        self.assertEqual((shm["poll_mode"], shm["malloc_tuning"]), ("busy", "1"))
        self.assertNotIn("poll_strategy", shm)
        self.assertIn("unknown transport 'tcp'",
                      parse_error("--transports", "grpc", "--transport-options", "tcp:x=1"))

    def test_transport_options_scoped_by_role(self):
        # gRPC's streams=N is a client option: grpc.client: keeps it off the servers, which
        # refuse unknown keys
        args = parse("--transports", "grpc,brpc", "--transport-options",
                     "grpc.client:streams=1;server:malloc_tuning=0;client:max_frame_size=65536")
        srv, cli = server_and_client_options(args, "grpc")
        self.assertEqual(srv, {"malloc_tuning": "0"})
        self.assertEqual(cli, {"streams": "1", "max_frame_size": "65536"})
        self.assertEqual(server_and_client_options(args, "brpc")[1], {"max_frame_size": "65536"})
        self.assertIn("unknown role 'worker'",
                      parse_error("--transports", "grpc", "--transport-options",
                                  "grpc.worker:x=1"))
        self.assertIn("unknown transport 'tcp'",
                      parse_error("--transports", "grpc", "--transport-options", "tcp.client:x=1"))

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


class TestCaseTopology(unittest.TestCase):
    def test_sparse_shard_ids_are_carried_through(self):
        # RecStore's plans use shard ids such as 3 and 8: the config lists them and each server
        # serves its own id; clients route to the servers in shard-id order
        p = parse("--transports", "grpc", "--server-plan", "0:a:25000:3,1:b:26000:8")
        topo = p.topology(T["grpc"])
        self.assertEqual(topo.server_plan(), "0:a:25000:3,1:b:26000:8")
        cfg = ps_config.build_runtime_config(p, T["grpc"], topo, "/d")
        self.assertEqual([s["shard"] for s in cfg["cache_ps"]["servers"]], [3, 8])
        cmds = [ps_config.build_server_cmd(p, T["grpc"], s, 2, "/c", ["s"]) for s in topo.servers]
        self.assertEqual([[a for a in c if a.startswith("--local_shard_id=")] for c in cmds],
                         [["--local_shard_id=3"], ["--local_shard_id=8"]])

    def test_explicit_plan_keeps_ports_of_rc_transports(self):
        with tempfile.TemporaryDirectory() as d:
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


if __name__ == "__main__":
    unittest.main()
