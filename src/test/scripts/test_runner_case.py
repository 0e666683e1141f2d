"""recbench.runner.case without processes: the argv, env and logs of every process of a case."""

import dataclasses
import unittest
from pathlib import Path

from runner_testlib import parse

from recbench import transports
from recbench.runner import case as runner_case

ROOT = Path("/src/recbench")
LOGS = Path("/out/logs/brpc/repeat_0")


def place(label, remote, **kw):
    base = "/remote/recbench" if remote else str(ROOT)
    return runner_case.HostPlace(
        label=label, remote=remote, repo=base, python=f"{base}/.venv/bin/python",
        config_path=kw.pop("config_path", f"/cfg/{label}.json"),
        data_base=kw.pop("data_base", f"/data/{label}"), **kw)


def two_shard_ssh(transport="brpc", *extra):
    plan = parse("--transports", transport, "--execution-backend", "ssh",
                 "--server-plan", "0:u@hostA:16000:3,1:hostB:16001:8",
                 "--client-plan", "0:hostC,1:hostC", "--value-size", "256", *extra)
    t = transports.get(transport)
    topo = plan.topology(t)
    places = {"u@hostA": place("u@hostA", True, cores=4),
              "hostB": place("hostB", True, cores=4),
              "hostC": place("hostC", True, cores=2)}
    host_of = {"u@hostA": "u@hostA", "hostB": "hostB", "hostC": "hostC"}
    return plan, runner_case.build_case(plan, t, 0, topo, places, host_of, LOGS, ROOT, "/py")


class TestBuildCase(unittest.TestCase):
    def test_two_shard_ssh_plan(self):
        _, case = two_shard_ssh()
        self.assertEqual([p.name for p in case.servers], ["server_0", "server_1"])
        self.assertEqual([p.name for p in case.clients], ["client_0", "client_1"])
        s0, s1 = case.servers
        self.assertEqual(s0.host, "u@hostA")
        self.assertEqual(s0.argv[:3], ("/remote/recbench/.venv/bin/python", "-m",
                                       "recbench.ps_server"))
        for flag in ("--transport=brpc", "--config_path=/cfg/u@hostA.json", "--local_shard_id=3",
                     "--host=hostA", "--port=16000", "--num_shards=2", "--value_size=256",
                     "--brpc_server_port=16000", "--data_path=/data/u@hostA/shard_3"):
            self.assertIn(flag, s0.argv)
        self.assertIn("--local_shard_id=8", s1.argv)
        self.assertIn("--data_path=/data/hostB/shard_8", s1.argv)
        self.assertEqual(dict(s0.env), {"PYTHONPATH": "/remote/recbench",
                                        "RECSTORE_CONFIG": "/cfg/u@hostA.json",
                                        "RECBENCH_CONFIG": "/cfg/u@hostA.json"})
        self.assertEqual(s0.markers, (runner_case.READY_MARKER,))
        self.assertEqual(s0.stdout_log, str(LOGS / "server" / "server_0.log"))
        self.assertIsNone(s0.stderr_log)
        self.assertIsNone(s0.cwd)  # remote: the remote shell cds into the repo
        c0, c1 = case.clients
        self.assertEqual(c0.argv[2], "recbench.ps_bench")
        self.assertIn("--num_shards=2", c0.argv)
        self.assertIn("--workload=transactions", c0.argv)
        seeds = [a for p in case.clients for a in p.argv if a.startswith("--seed=")]
        self.assertEqual(len(set(seeds)), 2)  # one seed per client
        self.assertEqual(c1.stderr_log, str(LOGS / "client_1.stderr.log"))
        self.assertIn(runner_case.LOADED_MARKER, c0.markers)
        self.assertEqual(case.not_forwarded, ())

    def test_case_carries_its_config_and_remote_files(self):
        import json
        import tempfile

        from recbench.runner.config import build_runtime_config

        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write("s3cret\n")
            token.flush()
            plan = parse("--transports", "brpc", "--execution-backend", "ssh",
                         "--server-plan", "0:hostA:16000:0", "--client-plan", "0:hostC",
                         "--auth-token-file", token.name)
            t = transports.get("brpc")
            topo = plan.topology(t)
            config = build_runtime_config(plan, t, topo, "/local/data/value")
            places = {h: place(h, True, config_path=f"/rt/{h}/config.json",
                               data_base=f"/rt/{h}/data/value",
                               secrets={"auth_token_file": f"/rt/{h}/auth_token"})
                      for h in ("hostA", "hostC")}
            case = runner_case.build_case(plan, t, 0, topo, places,
                                          {"hostA": "hostA", "hostC": "hostC"}, LOGS, ROOT, "/py",
                                          config=config, config_path="/out/configs/brpc_0.json",
                                          data_root="/local/data", remote_dir="/rt")
        self.assertEqual(case.config, config)
        self.assertEqual(case.record()["config_path"], "/out/configs/brpc_0.json")
        files = {(f.host, f.path): f for f in case.remote_files}
        self.assertEqual(sorted(files), [("hostA", "/rt/hostA/auth_token"),
                                         ("hostA", "/rt/hostA/config.json"),
                                         ("hostC", "/rt/hostC/auth_token"),
                                         ("hostC", "/rt/hostC/config.json")])
        cfg = files[("hostA", "/rt/hostA/config.json")]
        self.assertFalse(cfg.private)
        self.assertEqual(cfg.mkdir, "/rt/hostA/data/value")
        value = json.loads(cfg.text)["cache_ps"]["base_kv_config"]["value"]
        self.assertEqual(value["path"], "/rt/hostA/data/value")  # that host's path, not ours
        self.assertEqual(config["cache_ps"]["base_kv_config"]["value"]["path"], "/local/data/value")
        tok = files[("hostC", "/rt/hostC/auth_token")]
        self.assertEqual((tok.text, tok.private), ("s3cret\n", True))
        self.assertNotIn("s3cret", json.dumps(case.record()))

    def test_local_process_runs_in_the_repo(self):
        plan = parse("--transports", "grpc")
        t = transports.get("grpc")
        topo = plan.topology(t)
        case = runner_case.build_case(plan, t, 1, topo, {"local": place("local", False)},
                                      {"": "local", **{s.ssh_host: "local" for s in topo.servers},
                                       **{c.ssh_host: "local" for c in topo.clients}},
                                      LOGS, ROOT, "/py")
        self.assertEqual(case.servers[0].argv[:3], ("/py", "-m", "recbench.ps_server"))
        self.assertEqual(case.servers[0].cwd, str(ROOT))
        self.assertEqual(case.servers[0].env["PYTHONPATH"], str(ROOT))

    def test_rc_bind_offset_reaches_option_and_env(self):
        _, case = two_shard_ssh("shm", "--rdma-server-bind-core-offset", "3",
                                "--rdma-client-bind-core-offset", "1")
        s1 = case.servers[1]
        offset = s1.env["RECSTORE_BIND_CORE_OFFSET"]
        options = next(a for a in s1.argv if a.startswith("--transport_options="))
        self.assertIn(f"bind_core_offset={offset}", options)
        self.assertEqual(int(offset), int(offset) % 4)  # wrapped around hostB's 4 cores
        self.assertNotEqual(case.servers[0].env["RECSTORE_BIND_CORE_OFFSET"], offset)

    def test_secrets_by_role(self):
        plan = parse("--transports", "grpc", "--execution-backend", "ssh",
                     "--server-plan", "0:hostA:16000:0", "--client-plan", "0:hostC")
        t = transports.get("grpc")
        secrets = {"auth_token_file": "/r/auth_token", "tls_cert": "/r/cert",
                   "tls_key": "/r/key", "tls_ca": "/r/ca"}
        places = {h: place(h, True, secrets=secrets) for h in ("hostA", "hostC")}
        case = runner_case.build_case(plan, t, 0, plan.topology(t), places,
                                      {"hostA": "hostA", "hostC": "hostC"}, LOGS, ROOT, "/py")
        server, client = case.servers[0].argv, case.clients[0].argv
        self.assertIn("--auth_token_file=/r/auth_token", server)
        self.assertIn("--tls_cert=/r/cert", server)
        self.assertNotIn("--tls_ca=/r/ca", server)
        self.assertIn("--tls_ca=/r/ca", client)
        self.assertNotIn("--tls_key=/r/key", client)

    def test_derived_flag_a_program_lacks_is_dropped_and_named(self):
        plan = parse("--transports", "brpc", "--execution-backend", "ssh", "--transaction-profile",
                     "--server-plan", "0:hostA:16000:0", "--client-plan", "0:hostC")
        t = transports.get("brpc")
        old_bench = {"transport", "config_path"}
        places = {"hostA": place("hostA", True),
                  "hostC": place("hostC", True,
                                 program_flags={runner_case.CLIENT_MODULE: old_bench})}
        hosts = {"hostA": "hostA", "hostC": "hostC"}
        # set by the user: refused, naming the flag
        with self.assertRaisesRegex(runner_case.PreflightError, "--transaction-profile"):
            runner_case.build_case(plan, t, 0, plan.topology(t), places, hosts, LOGS, ROOT, "/py")
        # derived (here: as if a profile had set it): dropped and named
        plan = dataclasses.replace(plan, explicit=frozenset())
        case = runner_case.build_case(plan, t, 0, plan.topology(t), places, hosts, LOGS, ROOT,
                                      "/py")
        self.assertFalse(any(a.startswith("--transaction_profile") for a in case.clients[0].argv))
        self.assertEqual(case.not_forwarded, ("recbench.ps_bench: --transaction_profile",))

    def test_launcher_binary(self):
        self.assertEqual(runner_case.launcher(True, "/r", "/r/py", "m", "build/ps", ROOT, "/py"),
                         ["/r/build/ps"])
        self.assertEqual(runner_case.launcher(False, "/r", "/r/py", "m", "build/ps", ROOT, "/py"),
                         [str(ROOT / "build/ps")])
        self.assertEqual(runner_case.launcher(False, "/r", "/r/py", "m", "/abs/ps", ROOT, "/py"),
                         ["/abs/ps"])


if __name__ == "__main__":
    unittest.main()
