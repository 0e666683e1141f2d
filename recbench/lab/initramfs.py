"""The lab's initramfs: busybox, the guest kernel's virtio/9p/overlay modules, and two init stages.

Stage 1 (`/init`, busybox sh) loads the modules, mounts the host's `/` over virtio-9p read-only
(tag `hostroot`) with a tmpfs overlay on top for writes, mounts the run's share directory
read-write at the same path as on the host (tag `labshare`: what a guest writes there the host
sees), binds the unpacked module tree on `/lib/modules/$(uname -r)` and `switch_root`s into the
host's own bash running stage 2. The guest therefore runs the host's userland: the `.venv` and the
extension modules `make build` made work unchanged.

Stage 2 (`/recbench-lab-init`, bash, PID 1 after switch_root) configures the two NICs by MAC
(the management NIC that carries only the forwarded ssh port, and the private link), loads
`rdma_rxe` and adds `rxe0` on the link NIC, hides root's shell startup files (the guest's shells
start clean), starts sshd with the run's config and host key, prints
`RECBENCH-LAB-READY` on the console and reaps children until qemu is stopped.

The archive is written here as newc cpio (no cpio/find pipeline) and gzip-compressed. It depends
only on the kernel version and the init text, so it is cached next to the kernel.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import subprocess
from pathlib import Path

from recbench.lab.kernel import GuestKernel, LabError

BOOT_MODULES = ("virtio_pci", "virtio_net", "9pnet_virtio", "9p", "overlay")
READY_MARKER = "RECBENCH-LAB-READY"
FAIL_MARKER = "RECBENCH-LAB-FAIL"

STAGE1 = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "RECBENCH-LAB-FAIL stage1: $*"; echo o >/proc/sysrq-trigger; sleep 30; }
for m in $(cat /modules.list); do insmod "/mod/$m" || echo "stage1: insmod $m failed"; done
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^recbench_lab\.$1=//p" | tail -1; }
SHARE=$(arg share)
i=0; while [ ! -e /sys/bus/virtio/drivers/9pnet_virtio ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /lower || fail "9p hostroot"
mount -t tmpfs -o size=75%,mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || fail overlay
mkdir -p "/newroot$SHARE"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none labshare "/newroot$SHARE" \
    || fail "9p labshare"
KVER=$(uname -r)
mkdir -p "/newroot/lib/modules/$KVER"
mount --bind "/newroot$(arg modules)" "/newroot/lib/modules/$KVER" || fail "modules bind"
cp /stage2 /newroot/recbench-lab-init && chmod 755 /newroot/recbench-lab-init
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash /recbench-lab-init
echo "RECBENCH-LAB-FAIL stage1: switch_root"
"""

STAGE2 = r"""#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^recbench_lab\.$1=//p" | tail -1; }
fail() { echo "RECBENCH-LAB-FAIL stage2: $*"; echo o >/proc/sysrq-trigger; sleep 30; }
NAME=$(arg name); RUN=$(arg run); IP=$(arg ip); MTU=$(arg mtu)
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd /run/lock
hostname "$NAME"
# root's shell starts clean in the guest (this hides the host user's startup files in the overlay
# only): the host's would run there under every ssh command, and some take locks under $HOME that
# a guest may see stale through the 9p cache (pyenv's rehash then waits 60 s per shell)
rm -f /root/.bashrc /root/.profile /root/.bash_profile /root/.bash_login /root/.bash_logout
ip link set lo up
nic() { for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$1" ] && basename "$d"; done; }
MGMT=$(nic "$(arg mgmt_mac)"); LINK=$(nic "$(arg link_mac)")
[ -n "$MGMT" ] || fail "no management NIC"
ip addr add 10.0.2.15/24 dev "$MGMT" && ip link set "$MGMT" up || fail "management NIC $MGMT"
[ -n "$LINK" ] || fail "no link NIC"
ip addr add "$IP/24" dev "$LINK" && ip link set "$LINK" mtu "$MTU" && ip link set "$LINK" up \
    || fail "link NIC $LINK"
modprobe rdma_rxe || fail "modprobe rdma_rxe"
rdma link add rxe0 type rxe netdev "$LINK" || fail "rdma link add rxe0 netdev $LINK"
/usr/sbin/sshd -e -f "$RUN/sshd_config" -E "$(arg share)/$NAME.sshd.log" || fail sshd
read -r up _ </proc/uptime
echo "RECBENCH-LAB-READY name=$NAME uptime_s=$up link=$LINK mgmt=$MGMT kernel=$(uname -r)"
while :; do wait -n 2>/dev/null || sleep 3600; done
"""


def _module_files(kernel: GuestKernel) -> list[Path]:
    """The .ko files of BOOT_MODULES and their dependencies, in load order."""
    out: list[Path] = []
    for name in BOOT_MODULES:
        try:
            res = subprocess.run(["modprobe", "-d", str(kernel.root), "-S", kernel.version,
                                  "--show-depends", name], capture_output=True, text=True,
                                 timeout=60, check=False)
        except FileNotFoundError as exc:
            raise LabError("modprobe is not installed (kmod; run make deps)") from exc
        if res.returncode != 0:
            raise LabError(f"modprobe --show-depends {name} for {kernel.version}: "
                           f"{res.stderr.strip()}")
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod":
                p = Path(parts[1])
                if p not in out:
                    out.append(p)
    return out


class _Newc:
    """A newc ("070701") cpio archive written entry by entry."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)):
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
                  len(name) + 1, 0]
        self.ino += 1
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.buf.write(hdr + name.encode() + b"\0")
        self.buf.write(b"\0" * (-(len(hdr) + len(name) + 1) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-len(data) % 4))

    def directory(self, name: str):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def chardev(self, name: str, major: int, minor: int):
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


def build_initramfs(kernel: GuestKernel) -> Path:
    """initrd.img for `kernel` (cached in the kernel's directory, keyed by its contents)."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        raise LabError("busybox is not installed (busybox-static; run make deps)")
    mods = _module_files(kernel)
    key = hashlib.sha256("\n".join([STAGE1, STAGE2, busybox, *map(str, mods)]).encode())
    out = kernel.root / f"initrd-{key.hexdigest()[:12]}.img"
    if out.exists():
        return out
    a = _Newc()
    for d in ("bin", "mod", "proc", "sys", "dev"):
        a.directory(d)
    a.chardev("dev/console", 5, 1)
    a.file("bin/busybox", Path(busybox).read_bytes(), 0o755)
    a.file("init", STAGE1.encode(), 0o755)
    a.file("stage2", STAGE2.encode(), 0o755)
    a.file("modules.list", "".join(p.name + "\n" for p in mods).encode())
    for p in mods:
        a.file(f"mod/{p.name}", p.read_bytes())
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(a.finish(), compresslevel=1))
    tmp.replace(out)
    return out
