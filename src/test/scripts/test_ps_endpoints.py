"""recbench._ps takes endpoints as [(host, port), ...] per shard, for the client and the bench
loops alike (csrc/python/ps_endpoints.c): bad entries are refused naming what is wrong, before
anything connects."""

import unittest

from recbench import _ps


class EndpointsTest(unittest.TestCase):
    CASES = (([], ValueError, "at least one server"),
             ([("127.0.0.1", 0)], ValueError, "endpoint 0: port 0 is out of range"),
             ([("127.0.0.1", 15000), ("127.0.0.1", 70000)], ValueError, "endpoint 1: port 70000"),
             ([("127.0.0.1",)], TypeError, "endpoint must be (host, port)"),
             (5, TypeError, "endpoints must be a sequence"))

    def test_client_refuses_bad_endpoints(self):
        for endpoints, exc, text in self.CASES:
            with self.subTest(endpoints=endpoints):
                with self.assertRaises(exc) as cm:
                    _ps.Client("brpc", endpoints)
                self.assertIn(text, str(cm.exception))

    def test_bench_refuses_bad_endpoints(self):
        for endpoints, exc, text in self.CASES:
            with self.subTest(endpoints=endpoints):
                with self.assertRaises(exc) as cm:
                    _ps.bench_run("brpc", endpoints, running_seconds=0.1)
                self.assertIn(text, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
