"""The test suite's guard: no test may leave a process running, no session a shared-memory
object (the rule is in src/test/conftest.py's docstring). One implementation for both runners:
pytest's fixtures (conftest.py) and bare `python3 -m unittest` (GuardedSuite, installed by
src/test/scripts/__init__.py's load_tests) call the functions here.

Importing this module marks the session: every process started afterwards inherits
RECBENCH_TEST_SESSION.
"""

from __future__ import annotations

import os
import select
import signal
import time
import unittest
import uuid

MARKER = "RECBENCH_TEST_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)
_NEEDLE = f"{MARKER}={os.environ[MARKER]}".encode()
GRACE_S = 20.0
SHM_DIR = "/dev/shm"
SHM_PREFIX = "recbench-rc-"


def shm_objects() -> set[str]:
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIX)}
    except FileNotFoundError:
        return set()


def shm_creator_alive(name: str) -> bool:
    pid = name[len(SHM_PREFIX):].split("-", 1)[0]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


def _read_proc(pid: str) -> tuple[int, str, bool, str] | None:
    """(ppid, state, carries the session's marker, command line) of one process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/environ", "rb") as f:
            marked = _NEEDLE in f.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return None
    return int(fields[1]), fields[0], marked, cmd


def marked_processes() -> dict[int, str]:
    """pid -> command line of the live (non-zombie) processes of this session, except this one.

    A process belongs to the session when its environment carries the marker, or when its
    parent is this process or belongs to the session. The second rule is not redundant: while a
    child is inside execve (after the close-on-exec that lets Popen return, before the kernel
    has laid out the new environment) its /proc environ reads empty, and a check that relied on
    the marker alone missed such a child on a loaded machine (48 of 3000 Popen calls under three
    busy loops, 2026-12-06)."""
    me = os.getpid()
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            info = _read_proc(name)
            if info is not None:
                procs[int(name)] = info
    members = {pid for pid, (_, _, marked, _) in procs.items() if marked}
    grown = True
    while grown:
        grown = False
        for pid, (ppid, _, _, _) in procs.items():
            if pid not in members and (ppid == me or ppid in members):
                members.add(pid)
                grown = True
    return {pid: procs[pid][3] or "(inside execve)" for pid in members
            if procs[pid][1] != "Z"}


def wait_exit(pids, timeout: float) -> None:
    """Block until every pid has exited or timeout passes (pidfds: no polling)."""
    fds = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        pending = list(fds)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select(pending, [], [], left)
            pending = [fd for fd in pending if fd not in ready]
    finally:
        for fd in fds:
            os.close(fd)


def reap_new(before: set[int]) -> list[str]:
    """Give processes not in `before` GRACE_S to exit; kill and describe the rest."""
    left = {p: c for p, c in marked_processes().items() if p not in before}
    if left:
        wait_exit(left, GRACE_S)
        left = {p: c for p, c in marked_processes().items() if p not in before}
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return [f"pid {p}: {c}" for p, c in sorted(left.items())]



def session_problems(shm_before: set[str]) -> list[str]:
    """What the whole session left behind (killed / removed now), as messages."""
    left = reap_new(set())
    lost = sorted(n for n in shm_objects() - shm_before if not shm_creator_alive(n))
    for name in lost:
        try:
            os.unlink(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            pass
    problems = []
    if left:
        problems.append(f"the session left {len(left)} process(es) running (killed now):\n  "
                        + "\n  ".join(left))
    if lost:
        problems.append(f"the session left {len(lost)} shared-memory object(s) in {SHM_DIR} "
                        "(removed now):\n  " + "\n  ".join(lost))
    return problems


def left_message(left: list[str]) -> str:
    return (f"the test left {len(left)} process(es) running (killed now):\n  "
            + "\n  ".join(left))


class _GuardedResult:
    """The result a GuardedSuite runs its tests with: the runner's own result, plus the check
    around every test (startTest/stopTest), so unittest's class and module fixtures run as
    usual."""

    def __init__(self, inner: unittest.TestResult):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_before", set())

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    def startTest(self, test):
        object.__setattr__(self, "_before", set(marked_processes()))
        self._inner.startTest(test)

    def stopTest(self, test):
        left = reap_new(self._before)
        if left:
            self._inner.addError(test, (AssertionError, AssertionError(left_message(left)), None))
        self._inner.stopTest(test)


class _Session(unittest.TestCase):
    """Stands for the whole session in a result's error list."""

    def runTest(self) -> None:
        pass

    def id(self) -> str:
        return "session"

    def __str__(self) -> str:
        return "session"


class GuardedSuite(unittest.TestSuite):
    """A unittest suite with the same guard as pytest's fixtures: after each test, a process it
    left running is killed and the test gets an error naming it; after the suite, the session
    check runs."""

    session_check = True  # False: per-test checks only (a suite run inside another session)

    def run(self, result, debug=False):  # type: ignore[override]
        shm_before = shm_objects()
        super().run(_GuardedResult(result), debug)  # type: ignore[arg-type]
        problems = session_problems(shm_before) if self.session_check else []
        if problems:
            result.addError(_Session(), (AssertionError, AssertionError("\n".join(problems)), None))
        return result
