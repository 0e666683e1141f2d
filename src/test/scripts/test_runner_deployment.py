"""The runner against a deployment it does not own (docs/ps-runner.md, "Benchmarking a RecStore
deployment"): `--server-endpoints h:p,...` (servers that run already; the runner starts none) and
`--server-binary PATH [--server-args ...]` (a RecStore-compatible ps_server started per server
entry with RecStore's flags). The plan's checks and commands are tested without processes; the
end-to-end tests run the real runner against recbench's own ps_server started here (native and
RecStore wire), against recstore_fixture_server.py (an independent grpcio server with RecStore's
semantics) with --wire recstore, and with recbench's `recbench-ps-server` entry point as the
external binary."""

import json
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

from ps_testlib import PSServerProcess, require_transport
from runner_testlib import REPO, parse, parse_error
from test_ps_runner_e2e import SMALL, RunnerCase, run_runner

from recbench.launch import LineProcess
from recbench.runner import case as case_procs
from recbench.runner.case import HostPlace

HERE = Path(__file__).resolve().parent
SERVER_ENTRY = Path(sys.executable).parent / "recbench-ps-server"


class TestPlan(unittest.TestCase):
    def test_endpoints_make_an_external_topology(self):
        plan = parse("--transports", "grpc", "--server-endpoints", "127.0.0.1:7001,[::1]:7002")
        topo = plan.topology(plan.transports[0])
        self.assertTrue(topo.external)
        self.assertEqual([(s.host, s.port, s.shard) for s in topo.servers],
                         [("127.0.0.1", 7001, 0), ("::1", 7002, 1)])
        self.assertEqual(topo.launched_servers(), ())
        self.assertEqual(plan.server_impl, "external")
        self.assertTrue(plan.record()["topologies"]["grpc"]["external"])

    def test_endpoint_errors_name_the_input(self):
        self.assertIn("'127.0.0.1' must be host:port",
                      parse_error("--transports", "grpc", "--server-endpoints", "127.0.0.1"))
        self.assertIn("no user@", parse_error("--transports", "grpc", "--server-endpoints",
                                              "u@h:1"))
        self.assertIn("port 70000", parse_error("--transports", "grpc", "--server-endpoints",
                                                "h:70000"))
        self.assertIn("give --transports grpc or --transports brpc",
                      parse_error("--transports", "grpc,brpc", "--server-endpoints", "h:1"))
        self.assertIn("give --transports grpc or --transports brpc",
                      parse_error("--transports", "shm", "--server-endpoints", "h:1"))
        self.assertIn("replaces --server-plan",
                      parse_error("--transports", "grpc", "--server-endpoints", "h:1",
                                  "--server-plan", "h:2:0"))
        self.assertIn("give one of the two",
                      parse_error("--transports", "grpc", "--server-endpoints", "h:1",
                                  "--server-binary", str(SERVER_ENTRY)))

    def test_server_binary_errors(self):
        self.assertIn("give --server-binary too", parse_error("--transports", "grpc",
                                                               "--server-args=--x=1"))
        self.assertIn("no SHM transport", parse_error("--transports", "brpc,shm",
                                                       "--server-binary", str(SERVER_ENTRY)))
        self.assertIn("--server-args", parse_error("--transports", "grpc", "--server-binary",
                                                   str(SERVER_ENTRY), "--server-args", "'open"))

    def test_server_binary_gets_recstore_flags_per_entry(self):
        plan = parse("--transports", "brpc", "--server-binary", str(SERVER_ENTRY),
                     "--server-args", "--brpc_server_num_threads=4 --x='a b'",
                     "--server-plan", "0:127.0.0.1:25003:3,1:127.0.0.1:26008:8")
        self.assertEqual(plan.server_impl, "recbench-ps-server")
        t = plan.transports[0]
        topo = plan.topology(t)
        place = HostPlace("local", False, str(REPO), sys.executable, "/cfg.json", "/data")
        built = case_procs.build_case(plan, t, 0, topo, {"local": place}, {"127.0.0.1": "local"},
                                      Path("/logs"), REPO, sys.executable)
        self.assertEqual([list(s.argv) for s in built.servers], [
            [str(SERVER_ENTRY), "--config_path=/cfg.json", f"--local_shard_id={shard}",
             f"--brpc_server_port={port}", "--brpc_server_num_threads=4", "--x=a b"]
            for shard, port in ((3, 25003), (8, 26008))])
        self.assertIn(case_procs.RECSTORE_READY_MARKER, built.servers[0].markers)
        grpc = parse("--transports", "grpc", "--server-binary", str(SERVER_ENTRY))
        g = grpc.transports[0]
        built = case_procs.build_case(grpc, g, 0, grpc.topology(g), {"local": place},
                                      {"127.0.0.1": "local"}, Path("/logs"), REPO, sys.executable)
        self.assertEqual(list(built.servers[0].argv)[1:],
                         ["--config_path=/cfg.json", "--grpc_local_shard_id=0"])

    def test_external_case_starts_no_server(self):
        plan = parse("--transports", "grpc", "--server-endpoints", "127.0.0.1:7001")
        t = plan.transports[0]
        place = HostPlace("local", False, str(REPO), sys.executable, "/cfg.json", "/data")
        built = case_procs.build_case(plan, t, 0, plan.topology(t), {"local": place},
                                      {"127.0.0.1": "local"}, Path("/logs"), REPO, sys.executable)
        self.assertEqual(built.servers, ())
        self.assertEqual(len(built.clients), 1)
        self.assertIn("--num_shards=1", built.clients[0].argv)


class DeploymentCase(RunnerCase):
    def assert_success(self, res, transport, wire, impl, server_cpu):
        self.assertEqual(res.returncode, 0, res.stderr[-3000:])
        rows, _ = self.assert_outputs()
        self.assertEqual(sorted((r["phase"], r["status"]) for r in rows),
                         [("load", "success"), ("run", "success")])
        for r in rows:
            self.assertEqual((r["transport"], r["wire"], r["server_impl"]), (transport, wire, impl))
            self.assertGreater(float(r["key_ops_per_sec"]), 0)
            if r["phase"] == "run":  # the servers' CPU over the common run window
                self.assertEqual(r["server_cpu_s"] != "", server_cpu, r)
        cfg = json.loads(Path(self.out, "run_config.json").read_text())
        self.assertEqual((cfg["wire"], cfg["server_impl"]), (wire, impl))
        self.assertEqual(cfg["plan"]["server_impl"], impl)
        md = Path(self.out, "summary.md").read_text()
        self.assertIn(f"服务端实现 (server_impl): {impl}；wire: {wire}", md)
        return rows, cfg


class TestAlreadyRunning(DeploymentCase):
    def _against_own_server(self, transport, wire):
        require_transport(self, transport)
        with PSServerProcess(transport, num_shards=2, value_size=128, capacity=10000) as srv:
            endpoints = ",".join(f"{h}:{p}" for h, p in srv.endpoints)
            res = run_runner(SMALL + ["--transports", transport, "--wire", wire,
                                      "--server-endpoints", endpoints, "--output-dir", self.out])
            self.assertIsNone(srv.proc.poll(), "the runner must not stop a server it did not start")
        _, cfg = self.assert_success(res, transport.upper(), wire, "external", False)
        case = cfg["cases"][0]
        self.assertTrue(case["topology"]["external"])
        self.assertEqual([c["name"] for c in case["commands"]], ["client_0"])
        self.assertEqual(cfg["server_endpoints"], endpoints)
        self.assertIn(f"--server-endpoints {endpoints}", Path(self.out, "summary.md").read_text())
        served = {int(kv["shard"]): kv for kv in srv.final_lines}
        self.assertEqual(sorted(served), [0, 1])
        self.assertEqual(sum(int(kv["requests"]) > 0 for kv in served.values()), 2, served)

    def test_own_grpc_server_native_wire(self):
        self._against_own_server("grpc", "native")

    def test_own_brpc_server_recstore_wire(self):
        self._against_own_server("brpc", "recstore")

    def test_fixture_server_recstore_wire(self):
        env_path = str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")
        fixtures = []
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = env_path  # the fixture imports recstore_wire_py from here
        try:
            for shard in (0, 1):
                fixtures.append(LineProcess([sys.executable, str(HERE / "recstore_fixture_server.py"),
                                             "--shard", str(shard)], separate_stderr=True))
            ports = [int(f.wait_line("listening on", 60).rsplit(":", 1)[1]) for f in fixtures]
            endpoints = ",".join(f"127.0.0.1:{p}" for p in ports)
            res = run_runner(SMALL + ["--transports", "grpc", "--wire", "recstore",
                                      "--server-endpoints", endpoints, "--output-dir", self.out])
        finally:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old
            for f in fixtures:
                f.stop()
        self.assert_success(res, "GRPC", "recstore", "external", False)
        for f in fixtures:
            calls = [json.loads(x) for x in f.lines if x.startswith("{")]
            gets = [c for c in calls if c["method"] == "GetParameter"]
            self.assertTrue(gets, "every shard is read")
            self.assertTrue(all(0 < len(c["keys"]) <= 500 for c in gets))
            self.assertTrue(any(c["method"] == "PutParameter" for c in calls), "the load phase")

    def test_endpoint_down_is_a_preflight_failure(self):
        port = self.port()
        res = run_runner(SMALL + ["--transports", "grpc", "--server-endpoints",
                                  f"127.0.0.1:{port}", "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual([r["status"] for r in rows], ["preflight_failure"])
        self.assertIn(f"127.0.0.1:{port} does not accept TCP connections", rows[0]["message"])
        self.assertEqual(rows[0]["server_impl"], "external")


class TestServerBinary(DeploymentCase):
    def test_recbench_entry_point_as_external_binary(self):
        if not SERVER_ENTRY.is_file():
            self.skipTest(f"{SERVER_ENTRY}: recbench is not pip-installed in this interpreter")
        ports = [self.port(), self.port()]
        res = run_runner(SMALL + ["--transports", "brpc", "--wire", "recstore",
                                  "--server-binary", str(SERVER_ENTRY),
                                  "--server-args=--log_level=INFO",
                                  "--server-plan",
                                  f"0:127.0.0.1:{ports[0]}:3,1:127.0.0.1:{ports[1]}:8",
                                  "--output-dir", self.out])
        _, cfg = self.assert_success(res, "BRPC", "recstore", "recbench-ps-server", True)
        argv = [c["argv"] for c in cfg["cases"][0]["commands"] if c["name"].startswith("server")]
        self.assertEqual([a[1:] for a in argv], [
            [f"--config_path={cfg['cases'][0]['config_path']}", f"--local_shard_id={shard}",
             f"--brpc_server_port={port}", "--log_level=INFO"]
            for shard, port in ((3, ports[0]), (8, ports[1]))])
        for i in (0, 1):
            log = Path(self.out, "logs", "brpc", "repeat_0", "server", f"server_{i}.log")
            self.assertIn("event=ready", log.read_text())
        self.assert_no_leftovers()

    def test_missing_binary_is_refused_at_parse_time(self):
        missing = os.path.join(tempfile.gettempdir(), "no-such-ps-server")
        self.assertIn("no executable file", parse_error("--transports", "grpc",
                                                        "--server-binary", missing))
        self.assertIsNone(shutil.which(missing))


if __name__ == "__main__":
    unittest.main()
