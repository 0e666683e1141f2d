"""recbench.lab: its pieces here, and the real thing in CI: three qemu guests with soft-RoCE.

The fast tests check what the lab builds without booting anything (accelerator choice, the qemu
command line's network isolation, the initramfs archive, the facts that label rows) and the
switch between real sockets. The lab tests boot three guests once (TCG here; the third makes the
link go through the lab's switch) and run the suite's CI steps: recbench.rdma in a guest, the
verbs tests and the RC protocol suite over verbs in a guest, perftest between two guests and the
runner's rdma run over its ssh backend with the server in lab-a and clients in lab-b and lab-c,
then check the rows; then the network-cut fault test across two kernels. They skip, with the
reason, where the machine cannot run qemu guests (no qemu, not root, no kernel package
reachable); a guest that fails to boot is a failure. Set RECBENCH_LAB_TESTS=0 to skip them
deliberately (they take about ten minutes under TCG).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from recbench.lab import facts, initramfs, qemu, suite
from recbench.lab.guests import Lab
from recbench.lab.kernel import GuestKernel, LabError, cached_kernel, fetch_kernel


class AccelTest(unittest.TestCase):
    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_no_vmx_or_svm_means_tcg_without_probing(self):
        cpu = self.write("processor\t: 0\nflags\t\t: fpu sse2 avx2 hypervisor\n")
        accel, why = qemu.choose_accel("auto", cpuinfo=cpu, kvm_dev="/dev/null")
        self.assertEqual(accel, "tcg")
        self.assertIn("vmx/svm", why)
        with self.assertRaisesRegex(ValueError, "kvm impossible"):
            qemu.choose_accel("kvm", cpuinfo=cpu, kvm_dev="/dev/null")

    def test_vmx_and_a_usable_device_means_kvm(self):
        cpu = self.write("flags\t\t: fpu vmx sse2\n")
        dev = self.write("")  # a writable file stands in for the device node's permission check
        self.assertEqual(qemu.choose_accel("auto", cpuinfo=cpu, kvm_dev=dev)[0], "kvm")
        self.assertEqual(qemu.choose_accel("tcg", cpuinfo=cpu, kvm_dev=dev)[0], "tcg")
        with self.assertRaises(ValueError):
            qemu.choose_accel("hvf")


class QemuCommandTest(unittest.TestCase):
    def spec(self, index: int, peers: int) -> qemu.GuestSpec:
        return qemu.GuestSpec(f"lab-{'ab'[index]}", index, 40000 + index, 2048, 2, 9000,
                              Path("/run/lab"), Path("/run/lab/share"), peers)

    def test_nothing_leaves_the_machine(self):
        argv = qemu.qemu_argv(self.spec(0, 2), Path("vmlinuz"), Path("initrd"), Path("mods"), "tcg")
        user = [a for a in argv if a.startswith("user,")]
        self.assertEqual(len(user), 1)
        self.assertIn("restrict=on", user[0])  # no routing from the guest to the host or beyond
        self.assertIn("hostfwd=tcp:127.0.0.1:40000-10.0.2.15:22", user[0])
        dgram = next(a for a in argv if a.startswith("dgram,"))
        self.assertIn("local.type=unix", dgram)
        self.assertIn("remote.path=/run/lab/link-1.sock", dgram)
        self.assertNotIn("-nic", argv)
        append = argv[argv.index("-append") + 1]
        self.assertIn("recbench_lab.ip=198.18.0.1", append)
        self.assertIn("recbench_lab.accel=tcg", append)
        self.assertIn("readonly=on", argv[argv.index("-virtfs") + 1])

    def test_single_guest_link_is_an_unconnected_hub(self):
        argv = qemu.qemu_argv(self.spec(0, 1), Path("v"), Path("i"), Path("m"), "kvm")
        self.assertIn("hubport,id=link,hubid=0", argv)
        self.assertEqual(argv[argv.index("-accel") + 1], "kvm")

    def test_three_or_four_guests_send_to_the_switch(self):
        for peers in (3, 4):
            argv = qemu.qemu_argv(self.spec(1, peers), Path("v"), Path("i"), Path("m"), "tcg")
            dgram = next(a for a in argv if a.startswith("dgram,"))
            self.assertIn("local.path=/run/lab/link-1.sock", dgram)
            self.assertIn("remote.path=/run/lab/switch.sock", dgram)

    def test_lab_refuses_bad_sizes(self):
        with self.assertRaisesRegex(ValueError, "1 to 4"):
            Lab(guests=5, accel="tcg")
        with self.assertRaisesRegex(ValueError, "mtu"):
            Lab(guests=1, accel="tcg", mtu=10000)


class SwitchTest(unittest.TestCase):
    """The switch process between real unix datagram sockets standing in for three guests."""

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="rbsw-"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.paths = [str(self.dir / f"link-{i}.sock") for i in range(3)]
        self.guests = []
        for p in self.paths:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(p)
            s.settimeout(30)
            self.addCleanup(s.close)
            self.guests.append(s)
        lab = Lab(guests=3, accel="tcg", run_dir=self.dir)
        lab.share_dir.mkdir()
        lab._start_switch()
        self.addCleanup(lab.down)
        self.lab = lab
        self.switch = str(self.dir / "switch.sock")

    @staticmethod
    def frame(dst: int, src: int, n: int = 0) -> bytes:
        mac = (lambda i: bytes([0x52, 0x54, 0, 0x18, 0, i]) if i else b"\xff" * 6)
        return mac(dst) + mac(src) + b"\x08\x00" + n.to_bytes(4, "big") + b"x" * 1000

    def test_floods_unknown_then_forwards_learned_and_queues_for_a_slow_guest(self):
        a, b, c = self.guests
        a.sendto(self.frame(0, 1), self.switch)  # broadcast from guest 1 (socket a)
        self.assertEqual(b.recv(2048)[6:12], self.frame(0, 1)[6:12])
        self.assertEqual(c.recv(2048)[6:12], self.frame(0, 1)[6:12])
        b.sendto(self.frame(1, 2), self.switch)  # to the learned MAC of guest 1 only
        self.assertEqual(a.recv(2048)[:6], self.frame(1, 2)[:6])
        # 200 frames to a guest that reads nothing meanwhile: far more than its socket queues
        # (net.unix.max_dgram_qlen, 10); the switch holds them and none is lost or reordered
        for n in range(200):
            c.sendto(self.frame(1, 3, n), self.switch)
        got = [int.from_bytes(a.recv(2048)[14:18], "big") for _ in range(200)]
        self.assertEqual(got, list(range(200)))
        b.settimeout(0.5)
        with self.assertRaises(TimeoutError):  # unicast to guest 1 never reached guest 2
            b.recv(2048)
        self.lab.down()
        log = (self.lab.share_dir / "switch.log").read_text()
        self.assertRegex(log, r"event=stopped ports=3 frames=202 flooded=1 dropped=0 ")


# Plays a guest's qemu for BootRestartTest: its console is the `-serial file:PATH` of its argv.
# Each start counts itself in PATH.starts; the starts listed in $HANG_STARTS print a boot line
# and never the ready line (a guest kernel stuck in boot), the others print the ready line.
STAND_IN_QEMU = r"""
import os, signal, sys
console = next(a.split(":", 1)[1] for a in sys.argv if a.startswith("file:"))
starts = console + ".starts"
n = int(open(starts).read()) + 1 if os.path.exists(starts) else 1
open(starts, "w").write(str(n))
with open(console, "a") as f:
    f.write("[    0.000000] Linux version (stand-in)\n")
    if str(n) not in os.environ["HANG_STARTS"].split(","):
        f.write("RECBENCH-LAB-READY name=stand-in\n")
signal.pause()  # a guest runs until the lab stops it (SIGTERM)
"""


class BootRestartTest(unittest.TestCase):
    """A guest not ready within the boot timeout is restarted once, and a second hang fails the
    lab. The hang a real TCG guest shows now and then (its kernel stuck early in boot, an RCU
    stall on the console) cannot be produced on demand, so a stand-in for qemu plays the guest."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_lab_restart_"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.stand_in = self.tmp / "qemu"
        self.stand_in.write_text(f"#!{sys.executable}\n{STAND_IN_QEMU}")
        self.stand_in.chmod(0o755)

    def boot(self, hang_starts: str) -> tuple[Lab, Path]:
        os.environ["HANG_STARTS"] = hang_starts
        self.addCleanup(os.environ.pop, "HANG_STARTS", None)
        lab = Lab(guests=1, accel="tcg", run_dir=self.tmp / "run", boot_timeout=1.5,
                  qemu=str(self.stand_in))
        self.addCleanup(lab.down)
        lab.share_dir.mkdir(parents=True)
        lab.kernel = GuestKernel("stand-in", self.tmp)
        spec = qemu.GuestSpec("lab-a", 0, 1, 256, 1, 1500, lab.run_dir, lab.share_dir, 1)
        lab.guests = [lab._launch(spec, self.tmp / "initrd")]
        return lab, spec.console

    def test_a_hung_boot_is_restarted_once(self):
        lab, console = self.boot("1")
        with self.assertLogs("recbench.lab.guests", "WARNING") as logs:
            lab._wait_ready(self.tmp / "initrd")
        self.assertEqual(Path(str(console) + ".starts").read_text(), "2")
        self.assertIn("lab-a (tcg) not ready after 2 s", logs.output[0])
        self.assertIn("restarting it once", logs.output[0])
        self.assertNotIn("READY", console.with_name(console.name + ".hung").read_text())
        self.assertTrue(lab.guests[0].ready_line.startswith("RECBENCH-LAB-READY"))
        self.assertTrue(lab.guests[0].alive())
        self.assertEqual(json.loads(lab.state_file.read_text())["guests"][0]["pid"],
                         lab.guests[0].pid)  # `lab down` from another shell stops the new one

    def test_a_second_hang_fails_the_lab(self):
        lab, console = self.boot("1,2")
        with self.assertLogs("recbench.lab.guests", "WARNING"), \
                self.assertRaisesRegex(LabError, r"lab-a \(tcg\) not ready after 2 s, in its "
                                       r"second boot too: last console line .*stand-in"):
            lab._wait_ready(self.tmp / "initrd")
        self.assertEqual(Path(str(console) + ".starts").read_text(), "2")
        pids = [g.pid for g in lab.guests]
        lab.down()
        self.assertTrue(all(not os.path.exists(f"/proc/{p}") for p in pids if p))


class NewcTest(unittest.TestCase):
    def test_archive_lists_its_entries(self):
        a = initramfs._Newc()
        a.directory("dev")
        a.chardev("dev/console", 5, 1)
        a.file("init", b"#!/bin/sh\n", 0o755)
        data = a.finish()
        names, off = [], 0
        while True:  # walk the newc headers as the kernel does
            self.assertEqual(data[off:off + 6], b"070701")
            fields = [int(data[off + 6 + 8 * i:off + 14 + 8 * i], 16) for i in range(13)]
            namesize, filesize = fields[11], fields[6]
            name = data[off + 110:off + 110 + namesize - 1].decode()
            off += 110 + namesize
            off += -off % 4
            off += filesize + (-filesize % 4)
            if name == "TRAILER!!!":
                break
            names.append((name, fields[1] >> 12))
        self.assertEqual(names, [("dev", 0o04), ("dev/console", 0o02), ("init", 0o10)])
        self.assertEqual(gzip.decompress(gzip.compress(data)), data)


class FactsTest(unittest.TestCase):
    def test_guest_cmdline_and_row_labels(self):
        fd, path = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write("console=ttyS0 recbench_lab.name=lab-b recbench_lab.accel=tcg quiet\n")
        self.addCleanup(os.unlink, path)
        g = facts.guest_facts(path)
        self.assertEqual(g, {"guest": "lab-b", "accel": "tcg"})
        self.assertIsNone(facts.guest_facts("/nonexistent"))
        hosts = [{"lab": g, "rdma_devices": [{"name": "rxe0", "kind": "rxe"}]}] * 2
        self.assertEqual(facts.row_labels("RDMA", hosts), {"fabric": "rxe", "accelerator": "tcg"})
        self.assertEqual(facts.row_labels("BRPC", hosts)["fabric"], "tcp")
        self.assertEqual(facts.row_labels("SHM", [{}]), {"fabric": "shm", "accelerator": "native"})


def lab_unavailable() -> str | None:
    if os.environ.get("RECBENCH_LAB_TESTS") == "0":
        return "RECBENCH_LAB_TESTS=0"
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 is not installed (make deps installs qemu-system-x86)"
    if os.geteuid() != 0:
        return "the lab needs root (qemu's 9p passthrough of the host root)"
    for tool in ("busybox", "ssh", "ssh-keygen", "modprobe", "depmod", "dpkg", "apt-get"):
        if not shutil.which(tool) and not os.path.exists(f"/sbin/{tool}"):
            return f"{tool} is not installed (make deps)"
    try:
        fetch_kernel()
    except LabError as exc:
        if cached_kernel() is None:
            return f"no guest kernel: {exc}"
    return None


AGAIN = """
import sys, numpy as np, recbench
keys = np.arange(1, 101, dtype=np.uint64)
rows = np.tile(np.arange(16, dtype=np.float32), (100, 1)) + 1
with recbench.PSClient(sys.argv[1], timeout_ms=int(sys.argv[2])) as c:
    c.put(keys, rows)
    assert (c.get(keys) == rows).all()
print("served again", flush=True)
"""


class LabGuestsTest(unittest.TestCase):
    """One boot of three guests (two on a qemu dgram pair would not need the switch) for every
    real-verbs check CI runs: minutes under TCG."""

    lab: Lab

    @classmethod
    def setUpClass(cls):
        reason = lab_unavailable()
        if reason:
            raise unittest.SkipTest(f"lab: {reason}")
        cls.run_dir = Path(tempfile.mkdtemp(prefix="rblab-run-"))  # its own: a lab may be up
        cls.lab = Lab(guests=3, accel="auto", run_dir=cls.run_dir)
        try:
            cls.lab.up()
        except BaseException:
            shutil.rmtree(cls.run_dir, True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.lab.down()
        shutil.rmtree(cls.run_dir, True)

    def test_1_verbs_and_the_runner_across_three_guests(self):
        out = Path(tempfile.mkdtemp(prefix="rblab-"))
        self.addCleanup(shutil.rmtree, out, True)
        a = argparse.Namespace(out=str(out), only="", rpc=False, local_smoke=False,
                               seeds=False, runtime_seconds=1.0)
        rc = suite.run_suite(self.lab, a)  # the lab is up: run_suite leaves it up
        self.assertTrue(self.lab.guests and all(g.alive() for g in self.lab.guests))
        report = json.loads((out / "lab.json").read_text())
        steps = {s["name"]: s for s in report["steps"]}
        self.assertEqual(rc, 0, json.dumps(report["steps"], indent=1)[-4000:])
        for name in suite.DEFAULT_STEPS:
            self.assertEqual(steps[name]["status"], "PASS", steps[name])
        with open(out / "runner_rdma" / "summary.csv") as f:
            rows = list(csv.DictReader(f))
        # server in lab-a, clients in lab-b and lab-c: three kernels over the lab's switch
        self.assertEqual(sorted((r["client_index"], r["phase"]) for r in rows),
                         [("0", "load"), ("0", "run"), ("1", "load"), ("1", "run")])
        for r in rows:
            self.assertEqual((r["transport"], r["status"], r["fabric"]), ("RDMA", "success", "rxe"))
            self.assertIn(r["accelerator"], ("tcg", "kvm"))
            self.assertGreater(float(r["key_ops_per_sec"]), 0)
        run = [r for r in rows if r["phase"] == "run"]
        self.assertEqual(run[0]["get_path"], "staging_copy")  # auto on DRAM_PET_HASH
        self.assertIn("not NIC performance", (out / "lab.md").read_text())
        cmp_ = report["comparison"]
        self.assertGreater(cmp_["ib_write_bw_gbps"], 0)
        self.assertGreater(cmp_["get_payload_over_write_bw"], 0)

    def _link_state(self, guest: str) -> str:
        return self.lab.ssh(guest, "rdma link show rxe0/1", timeout=60).stdout

    def test_2_network_cut_between_two_kernels(self):
        """The link of lab-b cut (its NIC down: nothing in or out) while an rdma client there is
        being served by lab-a: the client fails with a timeout naming the server, within its own
        timeout, no hang; the server lives on and serves lab-b again once the link is back."""
        from ps_testlib import ROOT, PSServerProcess
        from test_faults_netcut import CLIENT

        server_ip = self.lab.guest("lab-a").spec.ip
        nic = self.lab.ssh("lab-b", f"ip -o -4 addr show to {self.lab.guest('lab-b').spec.ip}/32"
                           " | awk '{print $2}'", timeout=60).stdout.strip()
        self.assertTrue(nic, "no link NIC in lab-b")
        timeout_ms = 5000
        for transport in ("rdma",):  # brpc/grpc cuts: test_faults_netcut.py (one kernel)
            with self.subTest(transport=transport):
                srv = PSServerProcess(transport, value_size=64, ready_timeout=180,
                                      extra_args=["--host", server_ip])
                srv.args = self.lab.ssh_argv("lab-a", f"cd {ROOT} && exec {shlex.join(srv.args)}")
                srv.start()
                self.addCleanup(srv.stop)
                pid = srv.ready_lines[0]["pid"]  # in lab-a: stopping the local ssh would not stop it
                self.addCleanup(self.lab.ssh, "lab-a", f"kill -TERM {pid} 2>/dev/null; true", 60,
                                False)
                uri = f"{transport}://{server_ip}:{srv.ports[0]}"
                client = subprocess.Popen(
                    self.lab.ssh_argv("lab-b", f"cd {ROOT} && exec {suite.PY} -c "
                                      f"{shlex.quote(CLIENT)} {uri} {timeout_ms}"),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    stdin=subprocess.DEVNULL)
                try:
                    first = client.stdout.readline()
                    self.assertTrue(first.startswith("served"),
                                    f"client in lab-b not served by lab-a: {first!r} "
                                    f"{client.stderr.read() if client.poll() is not None else ''}")
                    for line in client.stdout:  # keep going until it has done real work
                        if line.startswith("served 10"):
                            break
                    self.lab.ssh("lab-b", f"ip link set {nic} down", timeout=60)
                    self.assertIn("state DOWN", self._link_state("lab-b"))
                    # its timeout is 5 s; ssh and emulation add seconds, not a minute
                    out, err = client.communicate(timeout=90)
                finally:
                    if client.poll() is None:
                        client.kill()
                        client.communicate()
                    self.lab.ssh("lab-b", f"ip link set {nic} up", timeout=60)
                self.assertEqual(client.returncode, 3, out + err)
                last = out.strip().splitlines()[-1]
                net = server_ip.replace(".", r"\.")
                self.assertRegex(last, rf"^error Timeout: .*{net}:{srv.ports[0]}")
                self.assertIsNone(srv.proc.poll(), "the server died with the link")
                deadline = time.monotonic() + 60
                while "ACTIVE" not in self._link_state("lab-b"):  # rxe follows its netdev up
                    self.assertLess(time.monotonic(), deadline, "rxe0 in lab-b not ACTIVE again")
                    time.sleep(0.5)
                again = self.lab.ssh("lab-b", f"cd {ROOT} && timeout 120 {suite.PY} -c "
                                     f"{shlex.quote(AGAIN)} {uri} 20000", timeout=180, check=False)
                self.assertEqual((again.returncode, again.stdout.strip()), (0, "served again"),
                                 again.stderr[-1000:])
                self.lab.ssh("lab-a", f"kill -TERM {pid}", timeout=60)
                srv.proc.wait(timeout=120)  # ssh exits with the server's status
                self.assertEqual(srv.stop(timeout=60), 0, " | ".join(srv.stderr_lines[-5:]))


if __name__ == "__main__":
    unittest.main()
