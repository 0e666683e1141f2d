"""recbench.launch: the PS server launcher and LineProcess, with real ps_server processes."""

import sys
import unittest

from recbench.launch import LineProcess, PSServerLauncher


def ps_server(*flags):
    return [sys.executable, "-m", "recbench.ps_server", "--transport", "brpc", "--host",
            "127.0.0.1", "--port", "0", "--value_size", "64", "--capacity", "1000", *flags]


class TestPSServerLauncher(unittest.TestCase):
    def test_every_shard_ready_in_order_then_stopped_lines(self):
        srv = PSServerLauncher(ps_server("--num_shards", "2"), num_shards=2)
        try:
            ready = srv.wait_ready(60)
            self.assertEqual([kv["shard"] for kv in ready], ["0", "1"])
            self.assertNotEqual(ready[0]["port"], ready[1]["port"])
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual(sorted(kv["shard"] for kv in srv.stopped_lines()), ["0", "1"])

    def test_exit_before_ready_raises_with_stderr_kept_apart(self):
        srv = PSServerLauncher(ps_server("--index_type", "NO_SUCH_INDEX"))
        try:
            with self.assertRaisesRegex(RuntimeError, "no event=ready of 1 shard"):
                srv.wait_ready(60)
        finally:
            code = srv.stop()
        self.assertEqual(code, 1)
        self.assertTrue(any("unknown index_type 'NO_SUCH_INDEX'" in x for x in srv.err_lines),
                        srv.err_lines)
        self.assertFalse(any("NO_SUCH_INDEX" in x for x in srv.lines))


class TestLineProcess(unittest.TestCase):
    def test_stderr_merged_by_default_and_apart_on_request(self):
        code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True)"
        merged = LineProcess([sys.executable, "-c", code])
        merged.wait_line("err", 30)
        self.assertEqual(merged.proc.wait(30), 0)
        merged.stop()
        apart = LineProcess([sys.executable, "-c", code], separate_stderr=True)
        self.assertEqual(apart.wait_err_line("err", 30), "err")
        self.assertEqual(apart.proc.wait(30), 0)
        apart.stop()
        self.assertEqual(apart.lines, ["out"])


if __name__ == "__main__":
    unittest.main()
