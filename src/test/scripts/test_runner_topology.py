"""recbench.runner.topology: plan strings, topologies, ports and the RDMA fabric plan."""

import tempfile
import unittest

from runner_testlib import T, parse, parse_error, transport_options

from recbench.runner import config as ps_config
from recbench.runner import topology


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


if __name__ == "__main__":
    unittest.main()
