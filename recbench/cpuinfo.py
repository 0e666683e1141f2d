"""The CPU a figure was measured on, in one line, for every benchmark's output.

Virtual machines of one kind report CPUs by a bare marketing name ("AMD EPYC", "Intel(R) Xeon(R)
Processor") whatever the generation underneath, while the figures depend on it (AMD Zen 3 and
Zen 4 differ in AVX-512; an Intel host had a quarter of the random-gather ceiling of a Zen 4 one).
So the name is followed by the vendor's family and model numbers, whether AVX-512 is there, and
the L3 size: enough to tell the machines apart in a table.

    cpu_model()  ->  'Intel(R) Xeon(R) Processor (family 6 model 167, AVX-512, L3 105 MiB)'
"""

from __future__ import annotations

import os
import platform


def _field(text: str, name: str) -> str | None:
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
        if not line.strip():
            break  # the first processor's block only
    return None


def _l3_bytes(sysfs: str) -> int | None:
    """Size of the level-3 cache of cpu0 from sysfs (cache/indexN/{level,size}), or None."""
    base = os.path.join(sysfs, "cpu0", "cache")
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return None
    for entry in entries:
        try:
            with open(os.path.join(base, entry, "level")) as f:
                if f.read().strip() != "3":
                    continue
            with open(os.path.join(base, entry, "size")) as f:
                size = f.read().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if size and size[-1] in units and size[:-1].isdigit():
            return int(size[:-1]) * units[size[-1]]
        if size.isdigit():
            return int(size)
    return None


def binary_size(n: int) -> str:
    """'4 MiB', '512 KiB', '1 GiB', or bytes: the largest binary unit that divides n."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def describe(cpuinfo: str, l3_bytes: int | None = None) -> str:
    """One line for the first processor of a /proc/cpuinfo text (and the L3 size, if known)."""
    name = _field(cpuinfo, "model name") or platform.processor() or "unknown CPU"
    details = []
    family, model = _field(cpuinfo, "cpu family"), _field(cpuinfo, "model")
    if family and model:
        details.append(f"family {family} model {model}")
    flags = _field(cpuinfo, "flags")
    if flags is not None:
        details.append("AVX-512" if "avx512f" in flags.split() else "no AVX-512")
    if l3_bytes:
        details.append(f"L3 {binary_size(l3_bytes)}")
    return f"{name} ({', '.join(details)})" if details else name


def cpu_model(cpuinfo_path: str = "/proc/cpuinfo", sysfs: str = "/sys/devices/system/cpu") -> str:
    """describe() of this machine's CPU; the bare platform name where /proc/cpuinfo is missing."""
    try:
        with open(cpuinfo_path) as f:
            text = f.read()
    except OSError:
        return platform.processor() or "unknown CPU"
    return describe(text, _l3_bytes(sysfs))
