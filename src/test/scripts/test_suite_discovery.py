"""Bare `python3 -m unittest` from the repository root finds the same tests as pytest, and runs
them under the same no-process-left guard (src/test/leak_guard.py)."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

from src.test import leak_guard

REPO = Path(__file__).resolve().parents[3]

UNITTEST_IDS = """
import unittest
def walk(s):
    for t in s:
        yield from walk(t) if isinstance(t, unittest.TestSuite) else [t]
suite = unittest.defaultTestLoader.discover(".")
print(type(suite).__name__, [type(t).__name__ for t in suite])
for t in walk(suite):
    print(t.id())
"""


class TestDiscovery(unittest.TestCase):
    def test_unittest_from_the_root_finds_what_pytest_finds(self):
        ut = subprocess.run([sys.executable, "-c", UNITTEST_IDS], cwd=REPO, capture_output=True,
                            text=True, timeout=300, check=True).stdout.splitlines()
        self.assertIn("GuardedSuite", ut[0])  # the scripts package's load_tests wraps them
        got = {i.removeprefix("src.test.scripts.") for i in ut[1:]}
        pt = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "src/test"],
                            cwd=REPO, capture_output=True, text=True, timeout=300).stdout
        want = set()
        for line in pt.splitlines():
            if "::" in line:
                path, *names = line.split("::")
                want.add(".".join([Path(path).stem, *names]))
        self.assertGreater(len(want), 200)
        self.assertEqual(got, want)

    def run_leaky(self, env: dict[str, str] | None) -> tuple[unittest.TestResult, int]:
        class Leaky(unittest.TestCase):
            @classmethod
            def setUpClass(cls):  # class fixtures still run inside the guard
                cls.fixture = "set"

            def test_fixture(self):
                self.assertEqual(self.fixture, "set")

            def test_leak(self):
                self.child = subprocess.Popen(["/bin/sleep", "600"], env=env)

        leaky = Leaky("test_leak")
        suite = leak_guard.GuardedSuite([Leaky("test_fixture"), leaky])
        suite.session_check = False  # this pytest session's other processes are not its business
        result = unittest.TestResult()
        saved, leak_guard.GRACE_S = leak_guard.GRACE_S, 0.0
        try:
            suite.run(result)
        finally:
            leak_guard.GRACE_S = saved
            leaky.child.kill()  # already killed by the guard when it worked
            leaky.child.wait()
        return result, leaky.child.pid

    def assert_only_the_leak_failed(self, result: unittest.TestResult, pid: int) -> None:
        self.assertEqual(result.testsRun, 2)
        self.assertEqual(len(result.errors), 1, result.errors)
        self.assertIn("test_leak", result.errors[0][0].id())
        # by pid: the command line may still read empty if the child is inside execve
        self.assertIn(f"pid {pid}:", result.errors[0][1])

    def test_guarded_suite_fails_a_test_that_leaves_a_process(self):
        self.assert_only_the_leak_failed(*self.run_leaky(env=None))

    def test_a_child_without_the_marker_is_still_the_tests(self):
        # a child whose environment lacks the marker (a test's own env=, or one caught inside
        # execve, when /proc/PID/environ reads empty) belongs to the session through its parent
        self.assert_only_the_leak_failed(*self.run_leaky(env={}))

if __name__ == "__main__":
    unittest.main()
