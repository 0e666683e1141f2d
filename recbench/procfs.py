"""What a running process holds, read from Linux /proc: resident memory, open file descriptors,
shared-memory mappings, CPU time. Used by the soak benchmark (recbench.bench.soak_ps) and the fault tests
to show that a server frees what a dead client held and does not grow over time.

Every function that takes a PID raises ProcessLookupError when the process is gone; the host's
own readings (/proc/stat, /proc/sys settings) are None where the kernel has no such file.
"""

from __future__ import annotations

import os


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError as e:
        raise ProcessLookupError(f"process gone: {path}") from e


def read_host(path: str) -> str | None:
    """A host file's text (/proc/stat, a /proc/sys or /sys setting); None where the kernel has
    none."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def rss_kb(pid: int) -> int:
    """Resident set size in KiB (VmRSS of /proc/PID/status)."""
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    """Number of open file descriptors."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except FileNotFoundError as e:
        raise ProcessLookupError(f"process {pid} gone") from e


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors by kind: socket, pipe, anon_inode (epoll, eventfd), file."""
    out: dict[str, int] = {}
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except FileNotFoundError as e:
        raise ProcessLookupError(f"process {pid} gone") from e
    for n in names:
        try:
            target = os.readlink(f"{d}/{n}")
        except OSError:
            continue
        kind = target.split(":", 1)[0] if ":" in target and not target.startswith("/") else "file"
        out[kind] = out.get(kind, 0) + 1
    return out


def shm_mappings(pid: int, prefix: str = "recbench-rc-") -> int:
    """Mappings of POSIX shared-memory objects whose name starts with prefix (RC shm lanes);
    an object unlinked after mapping still shows, marked '(deleted)'."""
    n = 0
    for line in _read(f"/proc/{pid}/maps").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and f"/dev/shm/{prefix}" in parts[5]:
            n += 1
    return n


def stat_cpu_seconds(stat: str) -> float | None:
    """User + system CPU seconds from the text of a /proc/PID/stat (read here or over ssh);
    None when the text is not one."""
    try:
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
    except (ValueError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


# steal (percent of a host's CPU time over a measured window) from which benchmark outputs warn
STEAL_WARN_PCT = 5.0


def host_cpu_ticks(stat: str) -> tuple[int, int] | None:
    """(all, steal) clock ticks since boot of a host, from the aggregate `cpu` line of a
    /proc/stat text (read here or over ssh): user, nice, system, idle, iowait, irq, softirq and
    steal summed (guest time is inside user and nice already). Steal is the time a virtual CPU
    was ready to run while the hypervisor ran something else. None when the text has no such
    line."""
    for line in stat.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            ticks = [int(x) for x in fields[1:9]]
        except ValueError:
            return None
        if len(ticks) < 4:
            return None
        return sum(ticks), (ticks[7] if len(ticks) > 7 else 0)
    return None


def local_cpu_ticks() -> tuple[int, int] | None:
    """host_cpu_ticks of this machine (its /proc/stat); None where there is none."""
    stat = read_host("/proc/stat")
    return None if stat is None else host_cpu_ticks(stat)


def sched_autogroup(path: str = "/proc/sys/kernel/sched_autogroup_enabled") -> bool | None:
    """Whether the kernel's CFS autogroup is on: each session (the runner starts every process in
    its own) of the root cpu cgroup then shares the CPUs as one group, so a server's one poller
    gets half of a 2-core machine against 16 client threads instead of a 17th. shm's p99 with more
    client threads than cores depends on it (docs/scale.md). None when the kernel has no such
    setting."""
    text = read_host(path)
    return None if text is None else text.strip() != "0"


def tcp_congestion_control(path: str = "/proc/sys/net/ipv4/tcp_congestion_control") -> str | None:
    """The kernel's default TCP congestion control (new sockets get it). With ``bbr`` every
    connection paces its sends with a timer of its own, loopback included, which costs a server
    sending to many connections (gRPC's keys/s at 16 client threads, docs/scale.md). None when the
    kernel has no such setting."""
    text = read_host(path)
    return (text or "").strip() or None


def steal_pct(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    """Share of a host's CPU time the hypervisor took (steal) between two host_cpu_ticks
    readings, in percent; None when either is missing or no time passed."""
    if start is None or end is None or end[0] <= start[0]:
        return None
    return 100.0 * max(0, end[1] - start[1]) / (end[0] - start[0])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (utime + stime of /proc/PID/stat)."""
    cpu = stat_cpu_seconds(_read(f"/proc/{pid}/stat"))
    if cpu is None:
        raise ValueError(f"/proc/{pid}/stat has no CPU times")
    return cpu


def threads(pid: int) -> int:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = _read(f"/proc/{pid}/stat")
    except ProcessLookupError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
