"""End-to-end runs of tools/benchmarks/run_benchmark_ps.py against the real recbench PS
(`python -m recbench.ps_server` / `recbench.ps_bench`) on loopback, on free ports chosen here:
the smoke profile on brpc and grpc (and shm when recbench has it), a client that crashes mid-run,
a server that dies, Ctrl-C, and the ssh backend through a real sshd with two "hosts" (server
endpoint 127.0.0.2, clients through ssh aliases). After every run no process started by the run is
left (checked by PID and by command line)."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from loopback_sshd import LoopbackSshd, pid_alive, pids_mentioning
from ps_testlib import loopback_congestion

from recbench import latency_hist, launch, procfs
from recbench.runner import preflight, report, results

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "tools" / "benchmarks" / "run_benchmark_ps.py"
SMALL = ["--profile", "smoke", "--record-count", "2000", "--runtime-seconds", "0.5",
         "--server-worker-threads", "1", "--cluster-timeout", "30", "--client-timeout", "60"]


def built_transports(candidates=("brpc", "grpc", "shm")):
    """The transports of `candidates` this build has (brpc always: the PS is built with it)."""
    have = preflight.transport_availability()
    return [t for t in candidates if t == "brpc" or have.get(t) is None]


def run_runner(args, timeout=240):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(RUNNER)] + args, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(REPO), stdin=subprocess.DEVNULL)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def write_script(path, body):
    Path(path).write_text(f"#!{sys.executable}\n" + body)
    os.chmod(path, 0o755)
    return str(path)


# A client that runs the real ps_bench but dies right after its run phase was released.
CRASHING_CLIENT = r'''
import os, signal, subprocess, sys
args = sys.argv[1:]
crash = any(a == "--seed=2" for a in args)   # client 1 (seed 1 + index 1)
child = subprocess.Popen([sys.executable, "-m", "recbench.ps_bench"] + args, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
for line in child.stdout:
    sys.stdout.write(line); sys.stdout.flush()
    if line.startswith("PS_BENCHMARK_LOADED"):
        go = sys.stdin.readline()
        child.stdin.write(go); child.stdin.flush()
        if crash:
            child.kill(); child.wait()
            sys.stderr.write("simulated crash in the run phase\n")
            os._exit(3)
child.wait()
sys.exit(child.returncode)
'''

# A server that becomes ready and then dies (SIGKILL of the real server).
DYING_SERVER = r'''
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-m", "recbench.ps_server"] + sys.argv[1:],
                         stdout=subprocess.PIPE, text=True)
for line in child.stdout:
    sys.stdout.write(line); sys.stdout.flush()
    if "event=ready" in line:
        child.kill(); child.wait()
        os._exit(9)
sys.exit(child.wait())
'''

# A client that records the environment it got (to check env reaches remote processes).
ENV_RECORDING_CLIENT = r'''
import json, os, sys
if "--help" in sys.argv:
    os.execv(sys.executable, [sys.executable, "-m", "recbench.ps_bench", "--help"])
seed = [a for a in sys.argv[1:] if a.startswith("--seed=")][0].split("=")[1]
env_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "env")
with open(os.path.join(env_dir, f"env_{seed}_{os.getpid()}.json"), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("RECSTORE_CONFIG", "PYTHONPATH")}
              | {"argv": sys.argv[1:], "cwd": os.getcwd()}, f)
os.execv(sys.executable, [sys.executable, "-m", "recbench.ps_bench"] + sys.argv[1:])
'''


class RunnerCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rbe2e-")
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        left = pids_mentioning(self.tmp)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(left, [], "processes left running")

    def port(self, host="127.0.0.1"):
        return launch.free_port(host)

    def assert_no_leftovers(self):
        self.assertEqual(pids_mentioning(self.out), [])
        cfg = json.loads(Path(self.out, "run_config.json").read_text())
        self.assertTrue(cfg["processes"], "run_config.json lists the started processes")
        for p in cfg["processes"]:
            self.assertFalse(pid_alive(p["pid"]), p)
            if p.get("remote_pid"):
                self.assertFalse(pid_alive(p["remote_pid"]), p)
        return cfg

    def assert_outputs(self):
        for name in ("run_config.json", "summary.csv", "summary_totals.csv", "summary.md"):
            self.assertTrue(Path(self.out, name).is_file(), name)
        rows = read_csv(Path(self.out, "summary.csv"))
        self.assertEqual(rows[0], results.SUMMARY_COLUMNS)
        self.assertEqual(rows[0][:25], results.RECSTORE_COLUMNS)
        for r in rows:
            self.assertEqual(len(r), len(results.SUMMARY_COLUMNS))
        totals = read_csv(Path(self.out, "summary_totals.csv"))
        self.assertEqual(totals[0], results.TOTALS_COLUMNS)
        steal = rows[0].index("host_steal_pct")
        for r in rows[1:]:  # every host here has a /proc/stat: each run row says its steal
            if r[1] == "success" and r[2] == "run":
                self.assertTrue(0.0 <= float(r[steal]) <= 100.0, r)
        md = Path(self.out, "summary.md").read_text().splitlines()
        git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        self.assertEqual(md[0], git)
        self.assertEqual(md[1], os.uname().nodename)
        self.assertEqual(md[2], "")
        text = "\n".join(md)
        positions = [text.index(f"## {s}") for s in report.SECTIONS]
        self.assertEqual(positions, sorted(positions))
        return results.read_summary_csv(Path(self.out, "summary.csv")), \
            results.read_summary_csv(Path(self.out, "summary_totals.csv"))

    def assert_awk_equals_totals(self, transport, repeat="0"):
        program = (f'NR>1 && $3=="run" && $1=="{transport}" && $5=="{repeat}" '
                   '{s+=$18} END {printf "%.3f", s}')
        awk = subprocess.run(["awk", "-F,", program, str(Path(self.out, "summary.csv"))],
                             capture_output=True, text=True, check=True).stdout
        totals = results.read_summary_csv(Path(self.out, "summary_totals.csv"))
        run = next(t for t in totals if t["transport"] == transport and t["repeat_index"] == repeat
                   and t["phase"] == "run")
        self.assertAlmostEqual(float(awk), float(run["key_ops_per_sec"]), places=2)
        self.assertGreater(float(awk), 0)


    def assert_exact_percentiles(self, transport, repeat, client_rows, totals):
        """summary_totals' percentiles are the merge of the clients' histograms: the same merge
        done here from the clients' own PS_BENCHMARK_HIST lines, and each client's histogram
        gives back the percentiles its C loop printed."""
        run = next(x for x in totals if x["transport"] == transport and x["repeat_index"] == repeat
                   and x["phase"] == "run")
        self.assertEqual(run["latency_merge"], "exact")
        merged = latency_hist.Hist()
        for r in client_rows:
            hist = latency_hist.collect(Path(r["log_path"].split(";")[0]).read_text())["run"]
            for col, p in (("p50_us", 50), ("p99_us", 99), ("p999_us", 99.9)):
                self.assertAlmostEqual(hist.percentile_ns(p) / 1e3, float(r[col]), places=3)
            merged.merge(hist)
        for col, p in (("p50_us", 50), ("p95_us", 95), ("p99_us", 99), ("p999_us", 99.9)):
            self.assertAlmostEqual(merged.percentile_ns(p) / 1e3, float(run[col]), places=3)
        p50s = [float(r["p50_us"]) for r in client_rows]
        self.assertTrue(min(p50s) <= float(run["p50_us"]) <= max(p50s), (p50s, run["p50_us"]))
        self.assertAlmostEqual(float(run["max_us"]), max(float(r["max_us"]) for r in client_rows),
                               places=3)


class TestLocalSmoke(RunnerCase):
    def test_smoke_brpc_grpc_shm_every_file_and_column(self):
        transports = ",".join(built_transports())
        port = self.port()
        res = run_runner(SMALL + ["--transports", transports, "--client-processes-per-ip", "2",
                                  "--server-plan", f"0:127.0.0.1:{port}:0", "--repeat", "2",
                                  "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-3000:])
        rows, totals = self.assert_outputs()
        names = [t.upper() for t in transports.split(",")]
        # brpc and gRPC servers on loopback: no BBR (their tcp_congestion=auto); shm names none
        tcp_cc = {"BRPC": loopback_congestion(), "GRPC": loopback_congestion(), "SHM": ""}
        for t in names:
            for rep in ("0", "1"):
                mine = [r for r in rows if r["transport"] == t and r["repeat_index"] == rep]
                self.assertEqual(sorted((r["phase"], r["client_index"]) for r in mine),
                                 [("load", "0"), ("load", "1"), ("run", "0"), ("run", "1")])
                for r in mine:
                    self.assertEqual(r["status"], "success", r)
                    self.assertEqual(r["tcp_congestion"], tcp_cc[t], r)
                    for col in ("ops_per_sec", "key_ops_per_sec", "payload_gbps", "mean_us",
                                "p50_us", "p95_us", "p99_us", "p999_us", "max_us",
                                "client_cpu_s"):
                        self.assertNotEqual(r[col], "", (col, r))
                    self.assertEqual(r["build_type"], "Release")
                    self.assertEqual(r["row_kind"], "fair")
                    for log in r["log_path"].split(";"):
                        self.assertTrue(Path(log).is_file(), log)
                    if r["phase"] == "run":  # (a load of 2000 keys may take < 1 ms of CPU)
                        self.assertNotEqual(r["server_cpu_s"], "")
                        self.assertNotEqual(r["keys_per_cpu_sec"], "")
                self.assert_awk_equals_totals(t, rep)
                self.assert_exact_percentiles(t, rep, [r for r in mine if r["phase"] == "run"],
                                              totals)
                self.assertTrue(Path(self.out, "configs", f"{t.lower()}_repeat_{rep}.json").is_file())
                self.assertTrue(Path(self.out, "logs", t.lower(), f"repeat_{rep}", "server",
                                     "server_0.log").is_file())
            mean = next(x for x in totals if x["transport"] == t and x["repeat_index"] == "mean"
                        and x["phase"] == "run")
            self.assertEqual(mean["repeats"], "2")
        cfg = self.assert_no_leftovers()
        self.assertEqual(cfg["git"]["commit"], Path(self.out, "summary.md").read_text().split("\n")[0])
        for key in ("hostname", "cpu_model", "cpu_cores", "sched_autogroup",
                    "tcp_congestion_control", "args", "hosts", "cases"):
            self.assertIn(key, cfg)
        self.assertEqual(cfg["tcp_congestion_control"], procfs.tcp_congestion_control())
        self.assertIn("build_type", cfg["hosts"]["local"]["recbench"])
        self.assertEqual(len(cfg["cases"]), 2 * len(names))
        self.assertIn("[output] summary_csv=", res.stdout)
        self.assertIn(f"[case {2 * len(names)}/{2 * len(names)}]", res.stderr)
        self.assertIn("0 cases left", res.stderr)

    def test_two_shards_from_an_explicit_plan(self):
        transport = built_transports(("grpc",))[0] if built_transports(("grpc",)) else "brpc"
        p0, p1 = self.port(), self.port()
        res = run_runner(SMALL + ["--transports", transport, "--server-plan",
                                  f"1:127.0.0.1:{p1}:1,0:127.0.0.1:{p0}:0",
                                  "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual({(r["status"], r["server_shards"], r["server_shard_ips"]) for r in rows},
                         {("success", "2", "127.0.0.1;127.0.0.1")})
        for k in (0, 1):
            log = Path(self.out, "logs", transport, "repeat_0", "server", f"server_{k}.log").read_text()
            self.assertIn(f"shard={k}", log)
            self.assertIn(f"port={(p0, p1)[k]}", log)
        cfg = json.loads(Path(self.out, "configs", f"{transport}_repeat_0.json").read_text())
        self.assertEqual([s["port"] for s in cfg["distributed_client"]["servers"]], [p0, p1])
        run = self.assert_no_leftovers()
        paths = [a for c in run["cases"][0]["commands"] if c["name"].startswith("server")
                 for a in c["argv"] if a.startswith("--data_path=")]
        self.assertEqual(len(set(paths)), 2)  # shard servers never share a data directory
        self.assertFalse(Path(self.out, "data", f"{transport}_repeat_0").exists())  # scratch

    def test_sparse_shard_ids_end_to_end(self):
        p0, p1 = self.port(), self.port()
        plan = f"0:127.0.0.1:{p0}:3,1:127.0.0.1:{p1}:8"
        res = run_runner(SMALL + ["--transports", "brpc", "--server-plan", plan,
                                  "--verify-deterministic-values", "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual({r["status"] for r in rows}, {"success"})
        for k, shard in ((0, 3), (1, 8)):
            log = Path(self.out, "logs", "brpc", "repeat_0", "server", f"server_{k}.log").read_text()
            self.assertIn(f"shard={shard}", log)
        run = self.assert_no_leftovers()
        self.assertEqual(run["server_plan"], {"BRPC": plan})
        self.assertEqual(run["client_plan"], {"BRPC": "0:127.0.0.1"})
        self.assertEqual(run["cases"][0]["server_plan"], plan)
        self.assertEqual(run["rdma_get_response_mode"], "direct_sg")
        self.assertEqual({r["runtime_seconds"] for r in rows}, {"0.500"})  # as configured
        self.assertTrue(all(float(r["measured_seconds"]) > 0 for r in rows))

    def test_recstore_get_summary_lines_of_a_benchmark_binary(self):
        client = write_script(Path(self.tmp, "recstore_style_client.py"), (
            "import subprocess, sys\n"
            "rc = subprocess.run([sys.executable, '-m', 'recbench.ps_bench'] + sys.argv[1:]).returncode\n"
            "if '--help' not in sys.argv:\n"
            "    print('transport=brpc op=get phase=measure summary rounds=1 iterations=10 '\n"
            "          'batch_keys=64 elapsed_us_mean=123.5 elapsed_us_p50=111 elapsed_us_p95=222 '\n"
            "          'elapsed_us_p99=333 ops_per_sec=10 key_ops_per_sec=640', flush=True)\n"
            "sys.exit(rc)\n"))
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--benchmark-binary", client, "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, totals = self.assert_outputs()
        run = next(r for r in rows if r["phase"] == "run")
        self.assertEqual((run["mean_us"], run["p50_us"], run["p95_us"], run["p99_us"]),
                         ("123.500", "111.000", "222.000", "333.000"))
        load = next(r for r in rows if r["phase"] == "load")
        self.assertNotEqual(load["p50_us"], "111.000")
        total = next(t for t in totals if t["phase"] == "run" and t["repeat_index"] == "0")
        self.assertEqual(total["latency_merge"], "worst_client")  # no histogram describes them
        self.assert_no_leftovers()

    @unittest.skipUnless("shm" in built_transports(), "this build has no shm transport")
    def test_rc_options_reach_shm_and_bad_ones_fail_loudly(self):
        port = self.port()
        res = run_runner(SMALL + ["--transports", "shm", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--rdma-rc-qps-per-client-per-shard", "2", "--prefetch-depth", "2",
                                  "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual({r["status"] for r in rows}, {"success"})
        cfg = self.assert_no_leftovers()
        client = next(c for c in cfg["cases"][0]["commands"] if c["name"] == "client_0")["argv"]
        self.assertIn("--prefetch_depth=2", client)
        self.assertTrue(any(a.startswith("--transport_options=") and "qps_per_client_per_shard=2" in a
                            for a in client))
        shutil.rmtree(self.out)
        res = run_runner(SMALL + ["--transports", "shm", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--transport-options", "no_such_option=1", "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual(rows[0]["status"], "startup_failure")
        self.assertIn("no_such_option", rows[0]["message"])
        self.assert_no_leftovers()

    def test_rdma_without_verbs_is_skipped_not_failed(self):
        from recbench import rdma

        if rdma.devices():
            self.skipTest("this host has a verbs device; the skip path cannot be exercised")
        res = run_runner(SMALL + ["--transports", "rdma", "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual([r["status"] for r in rows], ["skipped"])
        self.assertIn("no RDMA verbs device", rows[0]["message"])
        # a skipped case still gets its config, as RecStore's runner writes one for every case
        cfg = json.loads(Path(self.out, "configs", "rdma_repeat_0.json").read_text())
        self.assertEqual(cfg["cache_ps"]["ps_type"], "RDMA")

    def test_client_exit_77_is_a_skip(self):
        client = write_script(Path(self.tmp, "skipping_client.py"),
                              "import os, sys\nif '--help' in sys.argv:\n"
                              "    os.execv(sys.executable, [sys.executable, '-m', 'recbench.ps_bench', '--help'])\n"
                              "sys.stderr.write('recbench-ps-bench: skipped: no device\\n'); sys.exit(77)\n")
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--benchmark-binary", client, "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual([(r["status"], r["client_index"]) for r in rows], [("skipped", "0")])
        self.assertIn("code 77", rows[0]["message"])
        self.assertIn("no device", rows[0]["message"])
        self.assert_no_leftovers()

    def test_port_in_use_is_a_preflight_failure(self):
        import socket

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            res = run_runner(SMALL + ["--transports", "brpc", "--server-plan",
                                      f"0:127.0.0.1:{port}:0", "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual(rows[0]["status"], "preflight_failure")
        self.assertIn(f"127.0.0.1:{port} is in use", rows[0]["message"])

    def test_client_crash_mid_run(self):
        client = write_script(Path(self.tmp, "crashing_client.py"), CRASHING_CLIENT)
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--client-processes-per-ip", "3",
                                  "--server-plan", f"0:127.0.0.1:{port}:0", "--benchmark-binary",
                                  client, "--output-dir", self.out])
        self.assertEqual(res.returncode, 1, res.stderr[-2000:])
        rows, totals = self.assert_outputs()
        failed = [r for r in rows if r["status"] == "client_failure"]
        self.assertEqual(len(failed), 1)
        self.assertEqual(failed[0]["client_index"], "1")
        self.assertIn("client exited with code 3", failed[0]["message"])
        self.assertIn("simulated crash", failed[0]["message"])
        ok_run = sorted(r["client_index"] for r in rows if r["status"] == "success"
                        and r["phase"] == "run")
        self.assertEqual(ok_run, ["0", "2"])
        self.assert_awk_equals_totals("BRPC")
        run = next(t for t in totals if t["repeat_index"] == "0" and t["phase"] == "run")
        self.assertEqual((run["clients_ok"], run["clients_failed"], run["status"]),
                         ("2", "1", "client_failure"))
        self.assertIn("client_failure", Path(self.out, "summary.md").read_text())
        self.assert_no_leftovers()

    def test_server_dies(self):
        server = write_script(Path(self.tmp, "dying_server.py"), DYING_SERVER)
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--client-processes-per-ip", "2",
                                  "--server-plan", f"0:127.0.0.1:{port}:0", "--server-binary",
                                  server, "--client-timeout", "40", "--output-dir", self.out])
        self.assertEqual(res.returncode, 1, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertTrue(rows)
        for r in rows:
            if r["phase"] == "run" or r["client_index"] == "-1":
                self.assertIn(r["status"], ("client_failure", "timeout", "startup_failure"), r)
        self.assertFalse(any(r["status"] == "success" and r["phase"] == "run" for r in rows))
        self.assert_no_leftovers()

    def test_client_timeout_stops_clients(self):
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--client-processes-per-ip", "2",
                                  "--runtime-seconds", "120", "--client-timeout", "4",
                                  "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--output-dir", self.out])
        self.assertEqual(res.returncode, 1, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        timeouts = [r for r in rows if r["status"] == "timeout"]
        self.assertEqual(sorted(r["client_index"] for r in timeouts), ["0", "1"])
        self.assertIn("client timeout after 4s", timeouts[0]["message"])
        self.assert_no_leftovers()

    def test_server_exits_before_ready_is_a_startup_failure(self):
        server = write_script(Path(self.tmp, "broken_server.py"),
                              "import sys\nif '--help' in sys.argv: print('--transport'); sys.exit(0)\n"
                              "sys.stderr.write('cannot open the value store\\n'); sys.exit(4)\n")
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--server-binary", server, "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual([r["status"] for r in rows], ["startup_failure"])
        self.assertIn("exited with code 4 before it was ready", rows[0]["message"])
        self.assertIn("cannot open the value store", rows[0]["message"])
        self.assertTrue(rows[0]["log_path"].endswith("server/server_0.log"))
        self.assert_no_leftovers()

    def test_server_never_ready_hits_cluster_timeout(self):
        server = write_script(Path(self.tmp, "silent_server.py"),
                              "import sys\nif '--help' in sys.argv: print('--transport'); sys.exit(0)\n"
                              "sys.stdin.read()\n")  # blocks: the runner keeps stdin open
        port = self.port()
        res = run_runner(SMALL + ["--transports", "brpc", "--server-plan", f"0:127.0.0.1:{port}:0",
                                  "--server-binary", server, "--cluster-timeout", "3",
                                  "--startup-delay", "1", "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual([r["status"] for r in rows], ["startup_failure"])
        self.assertIn("not ready within --cluster-timeout 3s", rows[0]["message"])
        self.assert_no_leftovers()

    def test_ctrl_c_stops_everything(self):
        port = self.port()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, str(RUNNER)] + SMALL + [
            "--transports", "brpc", "--runtime-seconds", "60", "--client-processes-per-ip", "2",
            "--server-plan", f"0:127.0.0.1:{port}:0", "--show-runner-logs", "--output-dir",
            self.out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(REPO))
        try:
            for line in proc.stderr:
                if "go sent" in line:
                    break
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 130, err[-2000:])
        self.assertIn("[output] summary_md=", out)
        self.assert_outputs()
        cfg = self.assert_no_leftovers()
        self.assertTrue(cfg["interrupted"])


@unittest.skipIf(LoopbackSshd.unavailable_reason(), LoopbackSshd.unavailable_reason() or "")
class TestSshBackend(RunnerCase):
    @classmethod
    def setUpClass(cls):
        cls.sshd = LoopbackSshd().start()

    @classmethod
    def tearDownClass(cls):
        cls.sshd.stop()

    def ssh_args(self):
        return ["--execution-backend", "ssh", "--ssh-config", self.sshd.ssh_config,
                "--remote-repo", str(REPO), "--remote-python", sys.executable,
                "--remote-runtime-root", os.path.join(self.tmp, "remote")]

    def test_two_hosts_server_on_127_0_0_2_clients_over_ssh(self):
        env_dir = Path(self.tmp, "env")
        env_dir.mkdir()
        client = write_script(Path(self.tmp, "env_client.py"), ENV_RECORDING_CLIENT)
        port = self.port("127.0.0.2")
        res = run_runner(SMALL + self.ssh_args() + [
            "--transports", "brpc", "--server-plan", f"0:127.0.0.2:{port}:0",
            "--client-plan", "0:client-a,1:client-b", "--remote-sync", "check",
            "--benchmark-binary", client, "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stdout[-1000:] + res.stderr[-3000:])
        rows, _ = self.assert_outputs()
        names = ["BRPC"]
        for t in names:
            mine = [r for r in rows if r["transport"] == t]
            self.assertEqual(sorted((r["phase"], r["client_index"], r["status"]) for r in mine),
                             [("load", "0", "success"), ("load", "1", "success"),
                              ("run", "0", "success"), ("run", "1", "success")])
            self.assertEqual({r["server_shard_ips"] for r in mine}, {"127.0.0.2"})
            self.assertEqual({r["client_ips"] for r in mine}, {"client-a;client-b"})
            self.assert_awk_equals_totals(t)
        cfg = self.assert_no_leftovers()
        self.assertIn("client-a", cfg["hosts"])
        self.assertIn("127.0.0.2", cfg["hosts"])
        seen = sorted(env_dir.glob("env_*.json"))
        self.assertEqual(len(seen), 2 * len(names))  # 2 clients x transports
        for path in seen:
            env = json.loads(path.read_text())
            self.assertTrue(env["RECSTORE_CONFIG"].startswith(os.path.join(self.tmp, "remote")), env)
            self.assertIn(f"--config_path={env['RECSTORE_CONFIG']}", env["argv"])
            self.assertEqual(env["cwd"], str(REPO))
        self.assertFalse(any(Path(self.tmp, "remote").rglob("config.json")))  # cleaned up

    def test_remote_sync_rsync_copies_the_tree_and_runs_from_it(self):
        remote_repo = Path(self.tmp, "synced")
        port = self.port()
        build = f"cp -a {REPO}/recbench/*.so recbench/"  # stands in for `make build` (minutes)
        args = [a if a != str(REPO) else str(remote_repo) for a in self.ssh_args()]
        res = run_runner(SMALL + args + [
            "--transports", "brpc", "--server-plan", f"0:127.0.0.1:{port}:0",
            "--client-plan", "0:client-a", "--remote-sync", "rsync", "--remote-build-command", build,
            "--output-dir", self.out])
        self.assertEqual(res.returncode, 0, res.stderr[-3000:])
        self.assertTrue((remote_repo / "recbench" / "runner" / "cli.py").is_file())
        self.assertTrue((remote_repo / "tools" / "build" / "rsbuild.py").is_file())
        self.assertFalse((remote_repo / ".venv").exists())
        rows, _ = self.assert_outputs()
        self.assertEqual({r["status"] for r in rows}, {"success"})
        cfg = self.assert_no_leftovers()
        self.assertTrue(cfg["hosts"]["client-a"]["recbench"]["package_path"].startswith(str(remote_repo)))

    def test_remote_container_without_docker_is_a_preflight_failure(self):
        port = self.port()
        res = run_runner(SMALL + self.ssh_args() + [
            "--transports", "brpc", "--server-plan", f"0:client-a:{port}:0",
            "--client-plan", "0:client-b", "--remote-container", "recbench-test-container",
            "--output-dir", self.out])
        self.assertEqual(res.returncode, 1)
        rows, _ = self.assert_outputs()
        self.assertEqual([r["status"] for r in rows], ["preflight_failure"])
        self.assertIn("preflight failed", rows[0]["message"])
        self.assertEqual(pids_mentioning(self.out), [])

    def test_remote_commit_mismatch_fails_check(self):
        # --remote-repo points at a copy whose recbench reports another version
        fake = Path(self.tmp, "otherrepo")
        shutil.copytree(REPO / "recbench", fake / "recbench",
                        ignore=shutil.ignore_patterns("__pycache__"))
        init = fake / "recbench" / "build.py"
        init.write_text(init.read_text().replace('info["modules"] = modules',
                                                 'info["modules"] = modules\n    info["commit"] = "0" * 40'))
        port = self.port()
        args = [a if a != str(REPO) else str(fake) for a in self.ssh_args()]
        res = run_runner(SMALL + args + ["--transports", "brpc", "--server-plan",
                                         f"0:127.0.0.1:{port}:0", "--client-plan", "0:client-a",
                                         "--output-dir", self.out])
        self.assertEqual(res.returncode, 1, res.stderr[-2000:])
        rows, _ = self.assert_outputs()
        self.assertEqual(rows[0]["status"], "preflight_failure")
        self.assertIn("differs from local", rows[0]["message"])


if __name__ == "__main__":
    unittest.main()
