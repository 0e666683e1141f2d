"""The guest kernel of the lab: Debian's own `linux-image-amd64`, unpacked, never installed.

`fetch_kernel()` asks apt which versioned package the meta package `linux-image-amd64` depends on
(so point releases are followed), downloads that .deb with `apt-get download` into the cache,
unpacks it with `dpkg -x` (no maintainer scripts run: the host's /boot and /lib/modules stay
untouched) and runs `depmod -b` on the unpacked tree. Everything lands in
`<cache>/kernel/<version>/` and is reused by later runs; a `.complete` file marks a finished
unpack, so an interrupted one is redone instead of trusted.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

META_PACKAGE = "linux-image-amd64"
RXE_MODULE = "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko"


class LabError(RuntimeError):
    """The lab cannot do what was asked; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class GuestKernel:
    version: str   # e.g. 6.1.0-57-amd64
    root: Path     # the unpacked package: boot/vmlinuz-<version>, lib/modules/<version>

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.version}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.version


def cache_dir() -> Path:
    """$RECBENCH_LAB_CACHE, else $XDG_CACHE_HOME/recbench-lab, else ~/.cache/recbench-lab."""
    env = os.environ.get("RECBENCH_LAB_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "recbench-lab"


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 300) -> str:
    try:
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError as exc:
        raise LabError(f"{argv[0]} is not installed (run make deps): {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"{' '.join(argv)} did not finish in {timeout:.0f} s") from exc
    if res.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed (exit {res.returncode}): "
                       f"{(res.stderr or res.stdout).strip()[-400:]}")
    return res.stdout


def kernel_package() -> str:
    """The versioned image package `linux-image-amd64` depends on (linux-image-6.1.0-57-amd64)."""
    out = _run(["apt-cache", "depends", META_PACKAGE])
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "Depends:" and parts[1].startswith("linux-image-") \
                and parts[1][len("linux-image-"):][:1].isdigit():
            return parts[1]
    raise LabError(f"apt-cache depends {META_PACKAGE} names no linux-image-<version> package "
                   "(run apt-get update?)")


def cached_kernel(cache: Path | None = None) -> GuestKernel | None:
    """The newest complete unpacked kernel in the cache, without asking apt (offline reuse)."""
    base = (cache or cache_dir()) / "kernel"
    done = sorted(glob.glob(str(base / "*" / ".complete")))
    if not done:
        return None
    root = Path(done[-1]).parent
    return GuestKernel(root.name, root)


def fetch_kernel(cache: Path | None = None) -> GuestKernel:
    """The guest kernel, downloaded and unpacked on first use, reused from the cache after."""
    cache = cache or cache_dir()
    try:
        package = kernel_package()
    except LabError as exc:
        cached = cached_kernel(cache)
        if cached is None:
            raise
        log.warning("lab: %s; using the cached kernel %s", exc, cached.version)
        return cached
    version = package[len("linux-image-"):]
    root = cache / "kernel" / version
    kernel = GuestKernel(version, root)
    if (root / ".complete").exists():
        return kernel
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        log.info("lab: apt-get download %s", package)
        _run(["apt-get", "download", "-q", package], cwd=debs, timeout=900)
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            raise LabError(f"apt-get download {package} left no .deb in {debs}")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    log.info("lab: unpacking %s", found[-1].name)
    _run(["dpkg", "-x", str(found[-1]), str(root)], timeout=600)
    _run(["depmod", "-b", str(root), version])
    if not kernel.vmlinuz.exists():
        raise LabError(f"{found[-1].name} has no boot/vmlinuz-{version}")
    if not (kernel.modules / RXE_MODULE).exists():
        raise LabError(f"{found[-1].name} has no rdma_rxe module ({RXE_MODULE}): soft-RoCE "
                       "is unavailable in this kernel")
    (root / ".complete").write_text(found[-1].name + "\n")
    return kernel
