"""recbench.runner.preflight: what this host's recbench build can run."""

import unittest


class TestAvailability(unittest.TestCase):
    def test_transport_availability_covers_the_table(self):
        from recbench import _ps
        from recbench.runner import preflight

        got = preflight.transport_availability()
        self.assertEqual(list(got), ["rdma", "grpc", "brpc", "shm"])  # the table's order
        self.assertEqual(got, {t: _ps.transports()[t] for t in got})


if __name__ == "__main__":
    unittest.main()
