"""recbench.runner.execution and recbench.runner.preflight against real processes: local and through a real
sshd on loopback (ssh backend: remote PID tracking, stdin barrier, environment, cleanup), plus
recbench.rdma device discovery."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

from loopback_sshd import LoopbackSshd, pid_alive, pids_mentioning

from recbench import launch, procfs, rdma
from recbench.runner import preflight
from recbench.runner.execution import (
    Host,
    ProcessRegistry,
    Ssh,
    build_remote_exec_cmd,
    env_command,
    remote_shell_command,
    start_process,
)

REPO = Path(__file__).resolve().parents[3]


class TestRdmaDevices(unittest.TestCase):
    def test_devices_is_a_list_with_a_reason_when_empty(self):
        found, reason = rdma.devices_status()
        self.assertIsInstance(found, list)
        self.assertEqual(rdma.devices(), found)
        if found:
            self.assertIsNone(reason)
            for dev in found:
                self.assertIn("name", dev)
                for port in dev["ports"]:
                    self.assertIn(port["link_layer"], ("InfiniBand", "Ethernet", "UNSPECIFIED"))
        else:
            self.assertIn("RDMA", reason)

    def test_missing_library_gives_reason(self):
        found, reason = rdma.devices_status("libibverbs-does-not-exist.so.9")
        self.assertEqual(found, [])
        self.assertIn("libibverbs-does-not-exist.so.9 cannot be loaded", reason)


class TestLocalProcesses(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rbexec-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.registry = ProcessRegistry()

    def tearDown(self):
        self.registry.stop_all()

    def test_barrier_env_and_exit_code(self):
        cond = threading.Condition()
        code = "import os,sys; print('PS_BENCHMARK_LOADED', flush=True); " \
               "l=sys.stdin.readline().strip(); print('got', l, os.environ['RECSTORE_CONFIG']); " \
               "sys.stderr.write('err line\\n'); sys.exit(3)"
        p = start_process("client_0", Host(None), [sys.executable, "-c", code],
                          {"RECSTORE_CONFIG": "/x.json"}, f"{self.dir}/c.out", f"{self.dir}/c.err",
                          cond, ["PS_BENCHMARK_LOADED"], registry=self.registry)
        with cond:
            self.assertTrue(cond.wait_for(lambda: "PS_BENCHMARK_LOADED" in p.seen, 20))
        self.assertTrue(p.send_line("go"))
        self.assertTrue(p.wait(20))
        self.assertEqual(p.returncode, 3)
        self.assertIn("got go /x.json", Path(f"{self.dir}/c.out").read_text())
        self.assertEqual(Path(f"{self.dir}/c.err").read_text(), "err line\n")

    def test_stop_kills_the_whole_process_group(self):
        marker = f"{self.dir}/grandchild"
        p = start_process("server_0", Host(None),
                          ["bash", "-c", (f"(exec -a {marker}-grandchild sleep 300) & echo ready; "
                                          f"exec sleep 301 # {marker}")], {},
                          f"{self.dir}/s.log", None, None, ["ready"], registry=self.registry)
        with p.cond:
            self.assertTrue(p.cond.wait_for(lambda: "ready" in p.seen, 20))
        self.assertGreater(p.cpu_seconds(), -1)
        p.stop(5)
        self.assertFalse(pid_alive(p.pid))
        # the marker names both the child and the backgrounded grandchild (nothing else on the
        # machine can match it, unlike a bare "sleep 300")
        self.assertEqual(pids_mentioning(marker), [])

    def test_preflight_module_reports_ports(self):
        import socket

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            facts = preflight.host_facts([("127.0.0.1", port),
                                          ("127.0.0.1", launch.free_port())])
        self.assertEqual(list(facts["ports"].values()), ["in use", "free"])
        self.assertEqual(preflight.port_state("192.0.2.1", 80), "not a local address")
        self.assertEqual(preflight.port_state("no-such-host.invalid", 80), "unresolvable")
        self.assertIn("build_type", facts["recbench"])
        self.assertEqual(facts["cpu_cores"], os.cpu_count())
        self.assertEqual(facts["sched_autogroup"], procfs.sched_autogroup())
        self.assertEqual(facts["tcp_congestion_control"], procfs.tcp_congestion_control())


@unittest.skipIf(LoopbackSshd.unavailable_reason(), LoopbackSshd.unavailable_reason() or "")
class TestSshProcesses(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sshd = LoopbackSshd().start()

    @classmethod
    def tearDownClass(cls):
        cls.sshd.stop()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rbexecssh-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.registry = ProcessRegistry()
        self.ssh = Ssh(self.sshd.ssh_config)

    def tearDown(self):
        self.registry.stop_all()
        self.ssh.close()
        self.assertEqual(pids_mentioning(self.ssh.control_dir), [])

    def test_remote_process_gets_env_stdin_and_is_tracked(self):
        host = Host("client-a", self.ssh, repo=self.dir)
        p = start_process("client_0", host,
                          ["bash", "-c", 'echo PS_BENCHMARK_LOADED; read l; echo "$l $PWD $RECSTORE_CONFIG"'],
                          {"RECSTORE_CONFIG": "/r/config.json"}, f"{self.dir}/o.log",
                          f"{self.dir}/e.log", None, ["PS_BENCHMARK_LOADED"], registry=self.registry)
        with p.cond:
            self.assertTrue(p.cond.wait_for(lambda: "PS_BENCHMARK_LOADED" in p.seen, 30),
                            Path(f"{self.dir}/e.log").read_text())
        self.assertIsNotNone(p.remote_pid)
        p.send_line("go")
        self.assertTrue(p.wait(30))
        self.assertEqual(p.returncode, 0)
        self.assertIn(f"go {self.dir} /r/config.json", Path(f"{self.dir}/o.log").read_text())
        self.assertNotIn("RECBENCH_REMOTE_PID", Path(f"{self.dir}/o.log").read_text())

    def test_stop_kills_the_remote_process(self):
        marker = f"{self.dir}/remote-sleeper"
        host = Host("127.0.0.2", self.ssh, repo=self.dir)
        p = start_process("server_0", host, ["bash", "-c", f"echo ready; exec -a {marker} sleep 300"],
                          {}, f"{self.dir}/s.log", None, None, ["ready"], registry=self.registry)
        with p.cond:
            self.assertTrue(p.cond.wait_for(lambda: "ready" in p.seen, 30))
        self.assertTrue(pid_alive(p.remote_pid))
        self.assertIsNotNone(p.cpu_seconds())  # /proc read over ssh
        p.stop(5)
        self.assertFalse(pid_alive(p.remote_pid))
        self.assertFalse(pid_alive(p.pid))
        self.assertEqual(pids_mentioning(marker), [])

    def test_remote_preflight_json(self):
        host = Host("server-a", self.ssh, repo=str(REPO))
        res = host.run(f"PYTHONPATH={REPO} {sys.executable} -m recbench.runner.preflight "
                       f"--ports 127.0.0.2:{launch.free_port('127.0.0.2')}")
        self.assertEqual(res.returncode, 0, res.stderr)
        line = next(x for x in res.stdout.splitlines() if x.startswith(preflight.PREFLIGHT_MARKER))
        facts = json.loads(line[len(preflight.PREFLIGHT_MARKER):])
        self.assertEqual(list(facts["ports"].values()), ["free"])
        local = preflight.host_facts()
        self.assertEqual(preflight.compare_with_local(local, facts, "server-a"), [])
        facts["recbench"]["commit"] = "0" * 40
        self.assertIn("differs from local", preflight.compare_with_local(local, facts, "server-a")[0])

    def test_host_cpu_ticks_over_ssh(self):
        host = Host("127.0.0.2", self.ssh, repo=self.dir)
        first = host.cpu_ticks()  # the host's /proc/stat, read through ssh
        self.assertIsNotNone(first)
        self.assertLessEqual(first[1], first[0])
        second = host.cpu_ticks()
        self.assertGreaterEqual(second[0], first[0])
        self.assertGreaterEqual(second[1], first[1])

    def test_stdin_input_through_ssh(self):
        host = Host("client-b", self.ssh, repo=self.dir)
        res = host.run(f"cat > {self.dir}/cfg.json", input_text='{"a": 1}')
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(json.loads(Path(f"{self.dir}/cfg.json").read_text()), {"a": 1})


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
        with tempfile.TemporaryDirectory() as d:
            made = shlex.quote(os.path.join(d, "x y"))
            cmd = build_remote_exec_cmd("worker-a", "/app/my repo", f"mkdir -p {made} && echo $HOME")
            self.assertEqual(cmd[:4], ["ssh", "worker-a", "bash", "-lc"])
            self.assertTrue(cmd[4].startswith("'") and cmd[4].endswith("'"))
            self.assertEqual(shlex.split(cmd[4]),
                             [f"cd '/app/my repo' && mkdir -p {made} && echo $HOME"])
            # the remote shell really runs it as intended
            out = subprocess.run(["bash", "-c", "bash -lc " + cmd[4].replace("/app/my repo", "/")],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(os.path.isdir(os.path.join(d, "x y")))

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
            self.assertGreaterEqual(procfs.stat_cpu_seconds(f.read()), 0.0)
        self.assertIsNone(procfs.stat_cpu_seconds("garbage"))

    def test_sched_autogroup_setting(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sched_autogroup_enabled")
            for text, want in (("1\n", True), ("0\n", False)):
                with open(path, "w") as f:
                    f.write(text)
                self.assertIs(procfs.sched_autogroup(path), want)
            self.assertIsNone(procfs.sched_autogroup(os.path.join(d, "absent")))

    def test_tcp_congestion_control_setting(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tcp_congestion_control")
            for text, want in (("bbr\n", "bbr"), ("cubic\n", "cubic"), ("\n", None)):
                with open(path, "w") as f:
                    f.write(text)
                self.assertEqual(procfs.tcp_congestion_control(path), want)
            self.assertIsNone(procfs.tcp_congestion_control(os.path.join(d, "absent")))

    def test_host_steal_from_proc_stat(self):
        start = procfs.host_cpu_ticks(
            "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 18 0 0\nintr 1\n")
        self.assertEqual(start, (1000, 35))
        end = procfs.host_cpu_ticks("cpu  300 0 150 1200 10 0 5 335 7 0\n")
        self.assertEqual(end, (2000, 335))  # guest (7) is inside user already
        self.assertAlmostEqual(procfs.steal_pct(start, end), 30.0)
        self.assertIsNone(procfs.steal_pct(start, start))  # no time passed
        self.assertIsNone(procfs.steal_pct(None, end))
        self.assertEqual(procfs.host_cpu_ticks("cpu  1 2 3 4\n"), (10, 0))  # before steal
        self.assertIsNone(procfs.host_cpu_ticks("garbage"))
        self.assertIsNone(procfs.host_cpu_ticks("cpu  1 x 3 4 5\n"))
        local = Host(None).cpu_ticks()  # this machine's own /proc/stat
        self.assertIsNotNone(local)
        self.assertGreater(local[0], 0)
        self.assertLessEqual(local[1], local[0])


if __name__ == "__main__":
    unittest.main()
