"""Batches larger than one request: PSClient and ps_bench split them per shard at the server's
max_keys_per_request (and, on shm, at what one request slot holds), keep the chunks in flight
together and return rows in the caller's order. Real ps_server processes on loopback."""

import os
import tempfile
import unittest

import numpy as np
from ps_testlib import (
    NoLeftoverServers,
    PSServerProcess,
    require_transport,
    result_lines,
    rows_for,
    run_ps_bench,
)

import recbench
from recbench import _ps, errors

N = 1_000_000
VS = 16
DIM = VS // 4


class ChunkedBatchTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "brpc")

    def million_keys(self, shards: int) -> None:
        rng = np.random.default_rng(shards)
        keys = rng.permutation(N).astype(np.uint64) * 3 + 1
        with (
            PSServerProcess(
                "brpc", num_shards=shards, value_size=VS, capacity=N + N // 8, max_keys_per_request=500
            ) as srv,
            recbench.PSClient(srv.uri, prefetch_depth=2) as ps,
        ):
            ps.put(keys, rows_for(keys, DIM))
            self.assertEqual(sum(s["keys"] for s in ps.stats()), N)
            back = keys[::-1].copy()
            np.testing.assert_array_equal(ps.get(back), rows_for(back, DIM))
            ps.update(keys, np.ones((N, DIM), dtype=np.float32))
            sample = np.concatenate(
                [keys[:1000], np.array([2], dtype=np.uint64), keys[-1000:]]
            )  # key 2 was never written: zeros
            want = rows_for(sample, DIM) + 1
            want[1000] = 0
            np.testing.assert_array_equal(ps.get(sample), want)
            got = ps.get(keys)
            np.testing.assert_array_equal(got, rows_for(keys, DIM) + 1)
            # every request respected the limit: at least N / 500 requests reached the shards
            handled = sum(s["handled_get"] for s in ps.stats())
            self.assertGreaterEqual(handled, 2 * N // 500)

    def test_million_keys_one_shard(self):
        self.million_keys(1)

    def test_million_keys_three_shards(self):
        self.million_keys(3)

    def test_shard_error_mid_batch_fails_the_call_naming_the_shard(self):
        keys = np.arange(1, 20001, dtype=np.uint64)
        with (
            PSServerProcess(
                "brpc", num_shards=3, value_size=VS, capacity=2000, max_keys_per_request=500
            ) as srv,
            recbench.PSClient(srv.uri) as ps,
        ):
            with self.assertRaises(errors.ServerError) as cm:
                ps.put(keys, rows_for(keys, DIM))
            msg = str(cm.exception)
            self.assertRegex(msg, r"shard [012] \(brpc://127\.0\.0\.1:\d+\)")
            self.assertIn("capacity reached", msg)
            # the client stays usable: every chunk that was sent was drained
            np.testing.assert_array_equal(ps.get(keys[:3]).shape, (3, DIM))

    def test_a_small_inflight_budget_still_returns_every_row(self):
        # 16 KiB is about one chunk of 500 keys x (8 + 16) B: the chunks of all 3 shards queue for
        # the budget in turn, and every row still comes back in the caller's order
        keys = np.random.default_rng(7).permutation(20000).astype(np.uint64) + 1
        with (
            PSServerProcess(
                "brpc", num_shards=3, value_size=VS, capacity=30000, max_keys_per_request=500
            ) as srv,
            recbench.PSClient(srv.uri, prefetch_depth=2, max_inflight_bytes="16K") as ps,
        ):
            ps.put(keys, rows_for(keys, DIM))
            back = keys[::-1].copy()
            np.testing.assert_array_equal(ps.get(back), rows_for(back, DIM))
        with self.assertRaisesRegex(errors.InvalidArgument, "max_inflight_bytes: '16Q'"):
            recbench.PSClient("brpc://127.0.0.1:1", max_inflight_bytes="16Q")

    def test_ps_bench_batches_beyond_max_keys(self):
        with (
            PSServerProcess("brpc", num_shards=2, value_size=VS, max_keys_per_request=100) as srv,
            tempfile.TemporaryDirectory() as d,
        ):
            r = run_ps_bench(
                srv.bench_args(d)
                + [
                    "--record_count",
                    "5000",
                    "--batch_keys",
                    "1000",
                    "--thread_num",
                    "1",
                    "--prefetch_depth",
                    "2",
                    "--running_seconds",
                    "0.3",
                    "--warmup_seconds",
                    "0",
                    "--verify_deterministic_values=true",
                    "--no_barrier",
                ]
            )
            self.assertEqual(r.returncode, 0, r.stderr)
            run = result_lines(r.stdout)["run"]
            self.assertGreater(int(run["key_ops"]), 0)
            self.assertEqual(run["keys_missing"], "0")
            self.assertEqual(run["batch_size"], "1000")
            # brpc keeps to its default budget of bytes in flight: 4 MiB per CPU
            default = _ps.default_inflight_bytes("brpc")
            self.assertEqual(default, (4 << 20) * len(os.sched_getaffinity(0)))
            self.assertEqual(run["max_inflight_bytes"], str(default))


class ShmSlotBytesChunkTest(NoLeftoverServers, unittest.TestCase):
    """Issue 12's finding: a batch whose bytes exceed the RC request slot is split by bytes."""

    @classmethod
    def setUpClass(cls):
        require_transport(None, "shm")

    def test_batch_bigger_than_the_request_slot(self):
        vs = 512
        keys = np.arange(1, 5001, dtype=np.uint64)
        opts = "qps_per_client_per_shard=2;request_slot_bytes=65536;response_slot_bytes=65536"
        with (
            PSServerProcess(
                "shm", num_shards=2, value_size=vs, capacity=10000, max_keys_per_request=1000
            ) as srv,
            recbench.PSClient(srv.uri, transport_options=opts) as ps,
        ):
            ps.put(keys, rows_for(keys, vs // 4))
            back = keys[::-1].copy()
            np.testing.assert_array_equal(ps.get(back), rows_for(back, vs // 4))
            ps.update(keys, np.ones((len(keys), vs // 4), dtype=np.float32))
            np.testing.assert_array_equal(ps.get(keys), rows_for(keys, vs // 4) + 1)


if __name__ == "__main__":
    unittest.main()
