"""Command line of the lab (`python -m recbench.lab`, `tools/lab/lab.py`, `make lab`).

  fetch                    download/unpack the guest kernel and build the initramfs (cached)
  up [--guests N]          boot N (1-4) guests and leave them running (state in build/lab/)
  status                   the guests `up` started, and whether they still run
  ssh NAME -- CMD...       run CMD in guest NAME (lab-a .. lab-d)
  down                     stop the guests `up` started (by PID)
  netem RTT_MS             added round trip on the link of the lab that is up (0 removes it)
  run [--guests N] -- CMD  boot, run CMD on this host with the lab's ssh config in the
                           environment (RECBENCH_LAB_SSH_CONFIG, RECBENCH_LAB_ACCEL), stop
  check [--out DIR]        the lab's suite: verbs tests, perftest, the runner's two-host rows
                           (recbench.lab.suite); exits 1 if a step failed

Every line this prints names the accelerator (tcg or kvm). Guests are stopped on any error and
on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys

from recbench.lab import guests as lab_guests
from recbench.lab import initramfs, suite
from recbench.lab.kernel import LabError, fetch_kernel

log = logging.getLogger("recbench.lab")


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt


def _lab_args(p: argparse.ArgumentParser, default_guests: int) -> None:
    p.add_argument("--guests", type=int, default=default_guests,
                   help="1 to 4 (3-4 share the link through the lab's switch process)")
    p.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                   help="auto: KVM only where /proc/cpuinfo has vmx/svm and /dev/kvm is usable")
    p.add_argument("--mtu", type=int, default=9000, help="MTU of the guests' link NIC")
    p.add_argument("--mem-mb", type=int, default=0, help="guest memory (default 2048)")
    p.add_argument("--smp", type=int, default=0, help="vCPUs per guest (default 2)")
    p.add_argument("--boot-timeout", type=float, default=300.0,
                   help="seconds per boot; a guest not ready by then is restarted once")
    p.add_argument("--netem-rtt-ms", type=float, default=0.0,
                   help="added round trip on the guests' link (tc netem, half on each side)")


def _make_lab(a: argparse.Namespace, detach: bool) -> lab_guests.Lab:
    return lab_guests.Lab(a.guests, accel=a.accel, mem_mb=a.mem_mb or None, smp=a.smp or None,
                          mtu=a.mtu, boot_timeout=a.boot_timeout, detach=detach,
                          netem_rtt_ms=a.netem_rtt_ms)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m recbench.lab",
                                 description="soft-RoCE qemu guests for real verbs runs")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="guest kernel + initramfs into the cache")
    _lab_args(sub.add_parser("up", help="boot guests and leave them running"), 2)
    sub.add_parser("status", help="guests started by up")
    sub.add_parser("down", help="stop the guests started by up")
    p = sub.add_parser("ssh", help="run a command in a guest")
    p.add_argument("name")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("netem", help="set the added round trip on the link of the lab that is up")
    p.add_argument("rtt_ms", type=float, help="milliseconds (0 removes the delay)")
    p = sub.add_parser("run", help="boot, run a host command against the guests, stop")
    _lab_args(p, 2)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("check", help="the lab suite (verbs tests, perftest, runner rows)")
    _lab_args(p, 2)
    suite.add_arguments(p)
    return ap


def _strip_dashdash(cmd: list[str]) -> list[str]:
    return cmd[1:] if cmd[:1] == ["--"] else cmd


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO,
                        format="[lab] %(message)s")
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        return _dispatch(a)
    except (LabError, ValueError) as exc:
        print(f"[lab] error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[lab] interrupted; guests stopped", file=sys.stderr)
        return 130


def _dispatch(a: argparse.Namespace) -> int:
    if a.cmd == "fetch":
        k = fetch_kernel()
        print(f"[lab] kernel {k.version}: {k.vmlinuz}")
        print(f"[lab] initramfs: {initramfs.build_initramfs(k)}")
        return 0
    if a.cmd == "up":
        lab = _make_lab(a, detach=True).up()
        print(f"[lab] accel={lab.accel} ({lab.accel_reason}) fabric=rxe guests up:")
        print(json.dumps(lab.describe(), indent=1))
        print(f"[lab] ssh -F {lab.ssh_config} lab-a   |   python -m recbench.lab down")
        return 0
    if a.cmd == "status":
        gs = lab_guests.load_state()
        if not gs:
            print(f"[lab] no lab is up in {lab_guests.default_run_dir()}")
            return 1
        for g in gs:
            print(f"[lab] accel={g.accel} {g.name} pid={g.pid} ssh=127.0.0.1:{g.spec.ssh_port} "
                  f"ip={g.spec.ip} {'running' if g.alive() else 'gone'}")
        return 0
    if a.cmd == "down":
        gs = lab_guests.load_state()
        for g in gs:
            pid = g.pid
            g.stop()
            print(f"[lab] accel={g.accel} stopped {g.name} (pid {pid})")
        switch = lab_guests.load_switch()
        if switch is not None and switch.alive():
            pid = switch.pid
            switch.stop()
            print(f"[lab] stopped the switch (pid {pid})")
        run_dir = lab_guests.default_run_dir()
        (run_dir / "state.json").unlink(missing_ok=True)
        return 0
    if a.cmd == "ssh":
        lab = lab_guests.attach()
        cmd = _strip_dashdash(a.command)
        return subprocess.call(lab.ssh_argv(a.name, " ".join(cmd) if cmd else "true"))
    if a.cmd == "netem":
        lab = lab_guests.attach()
        lab.set_netem(a.rtt_ms)
        print(f"[lab] accel={lab.accel} netem_rtt_ms={lab.netem_rtt_ms} on "
              f"{', '.join(g.name for g in lab.guests)}")
        return 0
    if a.cmd == "run":
        cmd = _strip_dashdash(a.command)
        if not cmd:
            raise ValueError("run needs a command after --")
        with _make_lab(a, detach=False) as lab:
            print(f"[lab] accel={lab.accel} fabric=rxe: running {' '.join(cmd)}")
            env = {**os.environ, **lab_env(lab)}
            return subprocess.call(cmd, env=env)
    if a.cmd == "check":
        return suite.run_suite(_make_lab(a, detach=False), a)
    raise AssertionError(a.cmd)


def lab_env(lab: lab_guests.Lab) -> dict[str, str]:
    """What a host command needs to reach the guests."""
    env = {"RECBENCH_LAB_SSH_CONFIG": str(lab.ssh_config), "RECBENCH_LAB_ACCEL": lab.accel,
           "RECBENCH_LAB_GUESTS": ",".join(g.name for g in lab.guests)}
    for g in lab.guests:
        env[f"RECBENCH_LAB_IP_{g.name[-1].upper()}"] = g.spec.ip
    return env


if __name__ == "__main__":
    raise SystemExit(main())
