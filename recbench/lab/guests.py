"""Starting, watching and stopping the lab's qemu processes, and reaching their sshd.

A `Lab` owns one run directory (`build/lab/` of the checkout, or $RECBENCH_LAB_DIR): the ssh keys
and configs, the link sockets, `state.json` (the qemu PIDs and ports of guests started by
`lab up`) and `share/` (consoles, sshd logs and whatever a guest writes for the host). `up()`
boots the guests in parallel and waits for each console's ready line; `down()` stops them by PID
(SIGTERM, then SIGKILL), only PIDs whose command line names this run directory, so a reused PID
is never hit. A Lab used as a context manager (tests, `lab run`) also asks the kernel to kill its
guests if the Python process dies (PR_SET_PDEATHSIG), and stops them on any error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from recbench.lab import initramfs
from recbench.lab.initramfs import FAIL_MARKER, READY_MARKER
from recbench.lab.kernel import GuestKernel, LabError, fetch_kernel
from recbench.lab.qemu import TCG, GuestSpec, choose_accel, qemu_argv
from recbench.sshd_config import sshd_config

log = logging.getLogger(__name__)

NAMES = ("lab-a", "lab-b", "lab-c", "lab-d")
MAX_GUESTS = len(NAMES)
HOST_KEY_ALIAS = "recbench-lab"
PR_SET_PDEATHSIG = 1


def default_run_dir() -> Path:
    env = os.environ.get("RECBENCH_LAB_DIR")
    if env:
        return Path(env).resolve()
    repo = Path(__file__).resolve().parents[2]
    return repo / "build" / "lab"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


class Proc:
    """A process of the lab (a guest's qemu, the switch), stopped by PID. Without a Popen (a
    process `lab up` started, seen from another Python) it counts as alive only while its
    command line names the lab's run directory, so a reused PID is never signalled."""

    def __init__(self, marker: Path, pid: int | None = None,
                 popen: subprocess.Popen | None = None):
        self.marker = str(marker)
        self.popen = popen
        self.pid = pid if pid is not None else (popen.pid if popen else None)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return self.pid is not None and self.marker in _cmdline(self.pid)

    def stop(self, grace: float = 10.0) -> None:
        if self.pid is None:
            return
        if self.popen is None and not self.alive():
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                if self.popen is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.popen.wait(timeout=max(0.01, deadline - time.monotonic()))
                else:
                    time.sleep(0.1)  # not our child: no wait() possible, watch /proc
            if not self.alive():
                break
        if self.popen is not None:
            self.popen.wait()
        self.pid = None


class Guest(Proc):
    def __init__(self, spec: GuestSpec, accel: str, pid: int | None = None,
                 popen: subprocess.Popen | None = None):
        super().__init__(spec.run_dir, pid, popen)
        self.spec = spec
        self.accel = accel
        self.ready_line = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def console_text(self) -> str:
        try:
            return self.spec.console.read_text(errors="replace")
        except OSError:
            return ""


class Lab:
    """N guests (1 to 4) on one private link, each with rxe0 and an sshd on a loopback port;
    3-4 guests share it through the lab's switch process (recbench.lab.switch)."""

    def __init__(self, guests: int = 2, accel: str = "auto", run_dir: Path | None = None,
                 mem_mb: int | None = None, smp: int | None = None, mtu: int = 9000,
                 boot_timeout: float = 300.0, detach: bool = False, netem_rtt_ms: float = 0.0,
                 qemu: str = "qemu-system-x86_64"):
        if not 1 <= guests <= MAX_GUESTS:
            raise ValueError(f"--guests {guests}: the lab boots 1 to {MAX_GUESTS} guests")
        if not 576 <= mtu <= 9000:
            raise ValueError(f"--mtu {mtu}: use 576..9000")
        if not 0 <= netem_rtt_ms <= 10000:
            raise ValueError(f"--netem-rtt-ms {netem_rtt_ms}: use 0..10000")
        self.netem_rtt_ms = netem_rtt_ms
        self.n = guests
        self.accel, self.accel_reason = choose_accel(accel)
        self.run_dir = (run_dir or default_run_dir()).resolve()
        self.share_dir = self.run_dir / "share"
        self.mem_mb = mem_mb or 2048
        self.smp = smp or 2  # an idle TCG vCPU halts: two per guest cost nothing when unused
        self.mtu = mtu
        self.boot_timeout = boot_timeout
        self.detach = detach
        self.qemu = qemu  # the emulator binary (a test gives a stand-in that plays a hung boot)
        self.guests: list[Guest] = []
        self.switch: Proc | None = None
        self.kernel: GuestKernel | None = None

    # ---- files ------------------------------------------------------------------------------
    @property
    def ssh_config(self) -> Path:
        return self.run_dir / "ssh_config"

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    def _keys(self) -> None:
        for name in ("id_lab", "ssh_host_ed25519_key"):
            key = self.run_dir / name
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", HOST_KEY_ALIAS,
                                "-f", str(key)], check=True, stdin=subprocess.DEVNULL)
        (self.run_dir / "authorized_keys").write_text((self.run_dir / "id_lab.pub").read_text())
        host_pub = (self.run_dir / "ssh_host_ed25519_key.pub").read_text().split()
        (self.run_dir / "known_hosts").write_text(f"{HOST_KEY_ALIAS} {host_pub[0]} {host_pub[1]}\n")
        (self.run_dir / "sshd_config").write_text(sshd_config(
            22, ["10.0.2.15"], f"{self.run_dir}/ssh_host_ed25519_key",
            f"{self.run_dir}/authorized_keys", "/run/sshd.pid"))

    def _write_ssh_config(self) -> None:
        blocks = []
        for g in self.guests:
            blocks.append(f"""Host {g.name} {g.spec.ip}
  HostName 127.0.0.1
  Port {g.spec.ssh_port}
  User root
  IdentityFile {self.run_dir}/id_lab
  IdentitiesOnly yes
  HostKeyAlias {HOST_KEY_ALIAS}
  UserKnownHostsFile {self.run_dir}/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
""")
        self.ssh_config.write_text("".join(blocks))

    def _write_state(self) -> None:
        self.state_file.write_text(json.dumps({
            "accel": self.accel, "accel_reason": self.accel_reason, "mtu": self.mtu,
            "netem_rtt_ms": self.netem_rtt_ms,
            "kernel": self.kernel.version if self.kernel else None,
            "switch_pid": self.switch.pid if self.switch else None,
            "guests": [{"name": g.name, "pid": g.pid, "ssh_port": g.spec.ssh_port,
                        "ip": g.spec.ip, "mem_mb": g.spec.mem_mb, "smp": g.spec.smp}
                       for g in self.guests]}, indent=1) + "\n")

    # ---- lifecycle ----------------------------------------------------------------------------
    def up(self) -> Lab:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if len(str(self.run_dir / "link-0.sock")) > 100:
            raise LabError(f"run directory {self.run_dir} is too long for a unix socket path; "
                           "set RECBENCH_LAB_DIR to a shorter one")
        stale = load_state(self.run_dir)
        if stale and any(g.alive() for g in stale):
            raise LabError(f"a lab is already up in {self.run_dir} (python -m recbench.lab down)")
        self.share_dir.mkdir(exist_ok=True)
        self._unlink_sockets()
        self.kernel = fetch_kernel()
        initrd = initramfs.build_initramfs(self.kernel)
        self._keys()
        try:
            if self.n > 2:
                self._start_switch()
            for i in range(self.n):
                spec = GuestSpec(NAMES[i], i, _free_port(), self.mem_mb, self.smp, self.mtu,
                                 self.run_dir, self.share_dir, self.n)
                self.guests.append(self._launch(spec, initrd))
            self._write_state()
            self._wait_ready(initrd)
            self._write_ssh_config()
            for g in self.guests:
                self.wait_ssh(g)
            if self.netem_rtt_ms:
                self.set_netem(self.netem_rtt_ms)
        except BaseException:
            self.down()
            raise
        return self

    def _launch(self, spec: GuestSpec, initrd: Path) -> Guest:
        """Start one guest's qemu (its console and qemu log begin empty)."""
        assert self.kernel is not None
        for p in (spec.console, self.share_dir / f"{spec.name}.qemu.log"):
            p.unlink(missing_ok=True)
        argv = qemu_argv(spec, self.kernel.vmlinuz, initrd, self.kernel.modules, self.accel,
                         self.qemu)
        log.debug("lab: starting %s (%s): %s", spec.name, self.accel, shlex.join(argv))
        with open(self.share_dir / f"{spec.name}.qemu.log", "wb") as err:
            popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if self.detach else _die_with_parent)  # noqa: PLW1509 — prctl only
        return Guest(spec, self.accel, popen=popen)

    def _start_switch(self) -> None:
        """The relay between 3-4 guests' link sockets; its socket is bound here, before any
        guest sends, and handed over as a descriptor."""
        path = self.run_dir / "switch.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(str(path))
            ports = [str(self.run_dir / f"link-{i}.sock") for i in range(self.n)]
            with open(self.share_dir / "switch.log", "wb") as out:
                popen = subprocess.Popen(
                    [sys.executable, "-m", "recbench.lab.switch", "--fd", str(sock.fileno()),
                     *ports], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    pass_fds=(sock.fileno(),), start_new_session=True,
                    cwd=Path(__file__).resolve().parents[2],
                    preexec_fn=None if self.detach else _die_with_parent)  # noqa: PLW1509 — prctl only
        finally:
            sock.close()
        self.switch = Proc(self.run_dir, popen=popen)
        log.info("lab: switch for %d guests, pid %d", self.n, popen.pid)

    def _unlink_sockets(self) -> None:
        for p in [*self.run_dir.glob("link-*.sock"), self.run_dir / "switch.sock"]:
            p.unlink(missing_ok=True)

    def _wait_ready(self, initrd: Path) -> None:
        """Wait until every guest's console has its ready line. A guest that is not ready within
        boot_timeout is restarted once (its console kept as <name>.console.hung): a TCG guest
        kernel now and then hangs early in boot (an RCU stall on its console, seen at 280 s where
        a boot takes 45 s), and a second boot of the same guest is independent of the first.
        A second timeout, a failure marker or an exited qemu fail the lab."""
        t0 = time.monotonic()
        started = {g.name: t0 for g in self.guests}
        restarted: set[str] = set()
        pending = list(self.guests)
        while pending:
            if self.switch is not None and not self.switch.alive():
                raise LabError("the lab's switch exited: "
                               + (self.share_dir / "switch.log").read_text(errors="replace")[-300:])
            for g in list(pending):
                text = g.console_text()
                if FAIL_MARKER in text or not g.alive():
                    raise LabError(f"{g.name} ({self.accel}) failed to boot: "
                                   f"{self._failure(g, text)}")
                for line in text.splitlines():
                    if line.startswith(READY_MARKER):
                        g.ready_line = line.strip()
                        pending.remove(g)
                        log.info("lab: %s ready after %.1f s: %s", g.name,
                                 time.monotonic() - t0, g.ready_line)
                        break
            now = time.monotonic()
            for g in [g for g in pending if now - started[g.name] > self.boot_timeout]:
                if g.name in restarted:
                    raise LabError(f"{g.name} ({self.accel}) not ready after "
                                   f"{self.boot_timeout:.0f} s, in its second boot too: "
                                   f"{self._failure(g)}")
                log.warning("lab: %s (%s) not ready after %.0f s (%s): restarting it once",
                            g.name, self.accel, self.boot_timeout, self._failure(g))
                g.stop()
                with contextlib.suppress(OSError):
                    g.spec.console.replace(g.spec.console.with_name(g.spec.console.name + ".hung"))
                again = self._launch(g.spec, initrd)
                self.guests[self.guests.index(g)] = again
                pending[pending.index(g)] = again
                started[g.name] = time.monotonic()
                restarted.add(g.name)
                self._write_state()
            if pending:
                time.sleep(0.2)  # the console is a file qemu appends to: watch it

    def _failure(self, g: Guest, text: str | None = None) -> str:
        text = g.console_text() if text is None else text
        lines = [ln for ln in text.splitlines() if ln.strip()]
        fail = [ln for ln in lines if FAIL_MARKER in ln]
        qlog = self.share_dir / f"{g.name}.qemu.log"
        qemu = qlog.read_text(errors="replace").strip() if qlog.exists() else ""
        qemu = " | ".join(ln for ln in qemu.splitlines() if "hub 0 is not connected" not in ln)
        parts = [fail[-1] if fail else (f"last console line {lines[-1]!r}" if lines
                                        else "no console output")]
        if qemu:
            parts.append(f"qemu: {qemu[-300:]}")
        return "; ".join(parts)

    def wait_ssh(self, g: Guest, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            res = self.ssh(g.name, "true", timeout=60, check=False)
            if res.returncode == 0:
                return
            last = (res.stderr or res.stdout).strip()
            if not g.alive():
                break
            time.sleep(0.5)  # sshd forks under emulation; retry until it answers
        raise LabError(f"ssh to {g.name} (127.0.0.1:{g.spec.ssh_port}) failed: {last}")

    def set_netem(self, rtt_ms: float) -> None:
        """Add rtt_ms of round trip on the private link: half of it as netem delay on the link
        NIC of each guest (0 removes it)."""
        for g in self.guests:
            dev = f"$(ip -o -4 addr show to {g.spec.ip}/32 | awk '{{print $2}}')"
            cmd = (f"tc qdisc del dev {dev} root 2>/dev/null; true" if rtt_ms <= 0 else
                   f"modprobe sch_netem && tc qdisc replace dev {dev} root netem delay "
                   f"{rtt_ms / 2:.4f}ms")
            self.ssh(g.name, cmd, timeout=120)
        self.netem_rtt_ms = max(rtt_ms, 0.0)
        if self.state_file.exists():
            self._write_state()

    def down(self) -> None:
        for g in self.guests:
            g.stop()
        self.guests = []
        if self.switch is not None:
            self.switch.stop()
            self.switch = None
        self.state_file.unlink(missing_ok=True)
        self._unlink_sockets()

    def __enter__(self) -> Lab:  # noqa: PYI034
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    # ---- use ------------------------------------------------------------------------------------
    def guest(self, name: str) -> Guest:
        for g in self.guests:
            if g.name == name:
                return g
        raise KeyError(f"no guest {name!r} (guests: {', '.join(g.name for g in self.guests)})")

    def ssh_argv(self, name: str, command: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), name, command]

    def ssh(self, name: str, command: str, timeout: float = 600.0, check: bool = True,
            input_text: str | None = None) -> subprocess.CompletedProcess:
        try:
            res = subprocess.run(self.ssh_argv(name, command), capture_output=True, text=True,
                                 timeout=timeout, input=input_text,
                                 stdin=subprocess.DEVNULL if input_text is None else None,
                                 check=False)
        except subprocess.TimeoutExpired as exc:
            raise LabError(f"{name}: {command!r} did not finish in {timeout:.0f} s") from exc
        if check and res.returncode != 0:
            raise LabError(f"{name}: {command!r} exited {res.returncode}: "
                           f"{(res.stderr or res.stdout).strip()[-600:]}")
        return res

    def describe(self) -> dict:
        return {"accel": self.accel, "accel_reason": self.accel_reason, "fabric": "rxe",
                "kernel": self.kernel.version if self.kernel else None, "mtu": self.mtu,
                "netem_rtt_ms": self.netem_rtt_ms,
                "link": {1: "unconnected hub port", 2: "qemu dgram pair"}.get(
                    len(self.guests), f"lab switch (pid {self.switch.pid if self.switch else None})"),
                "guests": {g.name: {"ssh": f"127.0.0.1:{g.spec.ssh_port}", "ip": g.spec.ip,
                                    "pid": g.pid, "smp": g.spec.smp, "mem_mb": g.spec.mem_mb}
                           for g in self.guests}}


def load_switch(run_dir: Path | None = None) -> Proc | None:
    """The switch `lab up` left running in run_dir (3-4 guests), or None."""
    run_dir = (run_dir or default_run_dir()).resolve()
    try:
        pid = json.loads((run_dir / "state.json").read_text()).get("switch_pid")
    except (OSError, ValueError):
        return None
    return Proc(run_dir, pid=pid) if pid else None


def load_state(run_dir: Path | None = None) -> list[Guest]:
    """The guests `lab up` left running in run_dir (by PID, from state.json)."""
    run_dir = (run_dir or default_run_dir()).resolve()
    try:
        state = json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return []
    out = []
    for i, g in enumerate(state.get("guests", [])):
        spec = GuestSpec(g["name"], i, g["ssh_port"], g.get("mem_mb", 0), g.get("smp", 0),
                         state.get("mtu", 9000), run_dir, run_dir / "share",
                         len(state["guests"]))
        out.append(Guest(spec, state.get("accel", TCG), pid=g["pid"]))
    return out


def attach(run_dir: Path | None = None) -> Lab:
    """A Lab for the guests `lab up` started (for run/ssh/down from another process)."""
    run_dir = (run_dir or default_run_dir()).resolve()
    guests = [g for g in load_state(run_dir) if g.alive()]
    if not guests:
        raise LabError(f"no lab is up in {run_dir} (python -m recbench.lab up)")
    state = json.loads((run_dir / "state.json").read_text())
    lab = Lab(len(guests), accel=TCG, run_dir=run_dir, mtu=state.get("mtu", 9000))
    lab.accel, lab.accel_reason = state["accel"], state.get("accel_reason", "")
    lab.guests = guests
    lab.switch = load_switch(run_dir)
    lab.netem_rtt_ms = state.get("netem_rtt_ms", 0.0)
    if state.get("kernel"):
        lab.kernel = GuestKernel(state["kernel"], Path())
    return lab
