"""recbench.runner.session without processes: flag forwarding and the build-type check."""

import dataclasses
import tempfile
import unittest

from runner_testlib import parse


class TestFlagForwarding(unittest.TestCase):
    def test_unsupported_optional_flags(self):
        from recbench.runner import session as runner_session

        with tempfile.TemporaryDirectory() as d:
            args = parse("--transports", "grpc", "--transaction-profile", "--output-dir", d)
            session = runner_session.Session(args, [])
            supported = {"transport", "config_path"}
            argv = ["--transport=grpc", "--config_path=/c", "--brand_new_core_flag=1"]
            # core flags always pass, even when --help does not list them
            self.assertEqual(session.filter_flags(argv, supported, "ps_bench"), argv)
            # a flag the user set explicitly is never dropped silently
            with self.assertRaisesRegex(runner_session.PreflightError,
                                        "does not accept --transaction_profile .*--transaction-profile"):
                session.filter_flags(argv + ["--transaction_profile=true"], supported, "ps_bench")
            # a derived one is dropped and recorded
            session.plan = dataclasses.replace(session.plan, explicit=frozenset())
            self.assertEqual(session.filter_flags(argv + ["--report_mode=both"], supported, "b"), argv)
            self.assertEqual(session.not_forwarded, {"b: --report_mode"})
            # --help that could not be read: nothing is filtered
            self.assertEqual(session.filter_flags(argv, {"__error__": "x"}, "p"), argv)


class TestBuildTypeCheck(unittest.TestCase):
    def problems(self, build_type, *extra):
        from recbench.runner import session as runner_session

        with tempfile.TemporaryDirectory() as d:
            session = runner_session.Session(parse("--transports", "brpc", "--output-dir", d, *extra), [])
            return session._build_problems("local", {"recbench": {"build_type": build_type}})

    def test_release_required_unless_allowed(self):
        self.assertEqual(self.problems("Release"), [])
        self.assertIn("Debug build; numbers need Release", self.problems("Debug")[0])
        self.assertEqual(self.problems("Debug", "--allow-debug-build"), [])
        self.assertIn("demands a Release build, found ASan",
                      self.problems("ASan", "--allow-debug-build", "--build-dir", "build_release")[0])


class TestSshConnectTimeout(unittest.TestCase):
    def test_ssh_gives_up_after_the_cluster_timeout(self):
        """A cut-off host must fail within --cluster-timeout (test_faults_netcut cuts one): ssh's
        ConnectTimeout follows it, clamped to 1..10 s."""
        from recbench.runner import session as runner_session

        for cluster_timeout, expected in (("3", 3), ("0.2", 1), ("60", 10)):
            with self.subTest(cluster_timeout=cluster_timeout), tempfile.TemporaryDirectory() as d:
                session = runner_session.Session(
                    parse("--transports", "brpc", "--output-dir", d, "--execution-backend", "ssh",
                          "--cluster-timeout", cluster_timeout), [])
                host = session.host("user@h")
                try:
                    self.assertIn(f"ConnectTimeout={expected}", host.ssh.base_args("user@h"))
                finally:
                    host.ssh.close()


if __name__ == "__main__":
    unittest.main()
