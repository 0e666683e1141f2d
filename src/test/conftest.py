"""pytest: no test may leave a process running.

Every process a test starts inherits RECBENCH_TEST_SESSION (set here, unique per session), also
through double forks and `start_new_session`. After each test, any live process carrying the
marker that was not there before the test has a grace period to exit (a server finishing its
shutdown); one still running then is killed and the test errors, naming its command line. At
the end of the session, processes started by class- or module-level fixtures get the same check.
Processes started on the loopback sshd do not inherit the marker; the runner tests check those
themselves (loopback_sshd.pids_mentioning).

Shared memory: the RC shm fabric names its POSIX shm objects /dev/shm/recbench-rc-<pid>-… and
unlinks each one as soon as both ends have mapped it. One that is still there at the end of the
session, was not there at its start, and whose creator is gone, was lost: it is removed and the
session errors naming it.
"""

import os
import select
import signal
import time
import uuid

import pytest

MARKER = "RECBENCH_TEST_SESSION"
os.environ[MARKER] = uuid.uuid4().hex
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


def marked_processes() -> dict[int, str]:
    """pid -> command line of the live (non-zombie) processes of this session, except this one."""
    out = {}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if _NEEDLE not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                out[int(name)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
    return out


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


@pytest.fixture(autouse=True)
def no_process_left_behind():
    before = set(marked_processes())
    yield
    left = reap_new(before)
    if left:
        pytest.fail(f"the test left {len(left)} process(es) running (killed now):\n  "
                    + "\n  ".join(left), pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def no_process_left_after_the_session():
    shm_before = shm_objects()
    yield
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
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
