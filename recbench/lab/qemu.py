"""qemu for the lab: which accelerator to use, and the command line of one guest.

Accelerator. KVM only where the CPU advertises hardware virtualisation (`vmx` or `svm` in
/proc/cpuinfo) and /dev/kvm is usable; otherwise TCG (software emulation, 10-100x slower). The
flag check costs nothing, unlike a boot probe: on hosts whose /dev/kvm is a software hypervisor
(kvm_pvm, no vmx/svm flag) a stock kernel either aborts at once ("failed to set MSR 0x10a") or
crawls for minutes, so the lab does not try it. Every result the lab produces names the
accelerator it ran under.

Networking of a guest, two virtio NICs, neither reaching beyond this machine:
  management  qemu user-mode networking with `restrict=on` (the guest can reach nothing: no
              routing to the host or outside) and one forward, 127.0.0.1:<port> -> guest :22, so
              the host's ssh (and the runner's ssh backend) reaches the guest's sshd on loopback.
  link        the private guest-to-guest Ethernet, 198.18.0.0/24 (RFC 2544 benchmarking range),
              MTU 9000 (rxe then runs a 4096-byte RoCE MTU): a qemu `dgram` netdev over unix
              datagram sockets in the run directory, sending to the other guest's socket for a
              pair and to the lab's switch (recbench.lab.switch) for 3-4 guests; an unconnected
              hub port for a single guest (rxe loops back on it).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

TCG, KVM = "tcg", "kvm"
LINK_NET = "198.18.0"
MGMT_MAC = "52:54:00:12:34:{:02x}"
LINK_MAC = "52:54:00:18:00:{:02x}"


def choose_accel(requested: str = "auto", cpuinfo: str = "/proc/cpuinfo",
                 kvm_dev: str = "/dev/kvm") -> tuple[str, str]:
    """(accelerator, why) for `requested` in auto|kvm|tcg. ValueError if kvm is demanded and
    impossible here."""
    if requested not in ("auto", KVM, TCG):
        raise ValueError(f"accelerator {requested!r}: use auto, kvm or tcg")
    if requested == TCG:
        return TCG, "tcg requested"
    try:
        with open(cpuinfo) as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    hw = "vmx" in flags or "svm" in flags
    usable = os.access(kvm_dev, os.R_OK | os.W_OK)
    if hw and usable:
        return KVM, "vmx/svm present and /dev/kvm usable"
    why = ("no vmx/svm flag in /proc/cpuinfo (any /dev/kvm here is not hardware KVM)" if not hw
           else f"{kvm_dev} is missing or not writable")
    if requested == KVM:
        raise ValueError(f"--accel kvm impossible here: {why}")
    return TCG, why


@dataclasses.dataclass
class GuestSpec:
    name: str            # lab-a, lab-b, ...
    index: int           # 0-based; link address LINK_NET.(index+1)
    ssh_port: int        # 127.0.0.1:ssh_port -> guest:22
    mem_mb: int
    smp: int
    mtu: int
    run_dir: Path        # sshd config, keys, sockets (read by the guest through the host root)
    share_dir: Path      # mounted read-write at the same path in the guest
    peers: int           # guests on the link (1 to 4)

    @property
    def ip(self) -> str:
        return f"{LINK_NET}.{self.index + 1}"

    @property
    def console(self) -> Path:
        return self.share_dir / f"{self.name}.console"

    def link_socket(self, index: int) -> Path:
        return self.run_dir / f"link-{index}.sock"

    @property
    def switch_socket(self) -> Path:
        return self.run_dir / "switch.sock"


def qemu_argv(spec: GuestSpec, vmlinuz: Path, initrd: Path, modules: Path, accel: str,
              qemu: str = "qemu-system-x86_64") -> list[str]:
    mgmt_mac, link_mac = MGMT_MAC.format(spec.index + 1), LINK_MAC.format(spec.index + 1)
    append = " ".join([
        "console=ttyS0", "panic=-1", "quiet", "loglevel=4",
        f"recbench_lab.name={spec.name}", f"recbench_lab.accel={accel}",
        f"recbench_lab.ip={spec.ip}", f"recbench_lab.mtu={spec.mtu}",
        f"recbench_lab.run={spec.run_dir}", f"recbench_lab.share={spec.share_dir}",
        f"recbench_lab.modules={modules}",
        f"recbench_lab.mgmt_mac={mgmt_mac}", f"recbench_lab.link_mac={link_mac}",
    ])
    if accel == KVM:
        acc = ["-accel", "kvm", "-cpu", "host"]
    else:
        acc = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    if spec.peers == 1:
        link = ["-netdev", "hubport,id=link,hubid=0"]
    else:
        remote = spec.link_socket(1 - spec.index) if spec.peers == 2 else spec.switch_socket
        link = ["-netdev", (f"dgram,id=link,local.type=unix,local.path={spec.link_socket(spec.index)}"
                            f",remote.type=unix,remote.path={remote}")]
    return [qemu, *acc, "-m", str(spec.mem_mb), "-smp", str(spec.smp),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-name", f"recbench-lab-{spec.name},process=recbench-lab-{spec.name}",
            "-serial", f"file:{spec.console}",
            "-kernel", str(vmlinuz), "-initrd", str(initrd), "-append", append,
            "-virtfs", ("local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,"
                        "multidevs=remap"),
            "-virtfs", (f"local,path={spec.share_dir},mount_tag=labshare,"
                        "security_model=passthrough,multidevs=remap"),
            "-netdev", ("user,id=mgmt,restrict=on,net=10.0.2.0/24,"
                        f"hostfwd=tcp:127.0.0.1:{spec.ssh_port}-10.0.2.15:22"),
            "-device", f"virtio-net-pci,netdev=mgmt,mac={mgmt_mac},romfile=",
            *link,
            "-device", f"virtio-net-pci,netdev=link,mac={link_mac},romfile=,host_mtu={spec.mtu}"]
