"""pytest: no test may leave a process running.

Every process a test starts inherits RECBENCH_TEST_SESSION (set here, unique per session), also
through double forks and `start_new_session`; a child of this process or of a marked one counts
too (inside execve its environ reads empty). After each test, any such live process that was
not there before the test has a grace period to exit (a server finishing its shutdown); one still running then is killed and the test errors, naming its command line. At
the end of the session, processes started by class- or module-level fixtures get the same check.
Processes started on the loopback sshd do not inherit the marker; the runner tests check those
themselves (loopback_sshd.pids_mentioning).

Shared memory: the RC shm fabric names its POSIX shm objects /dev/shm/recbench-rc-<pid>-… and
unlinks each one as soon as both ends have mapped it. One that is still there at the end of the
session, was not there at its start, and whose creator is gone, was lost: it is removed and the
session errors naming it.
"""

import pytest

from src.test import leak_guard


@pytest.fixture(autouse=True)
def no_process_left_behind():
    before = set(leak_guard.marked_processes())
    yield
    left = leak_guard.reap_new(before)
    if left:
        pytest.fail(leak_guard.left_message(left), pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def no_process_left_after_the_session():
    shm_before = leak_guard.shm_objects()
    yield
    problems = leak_guard.session_problems(shm_before)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
