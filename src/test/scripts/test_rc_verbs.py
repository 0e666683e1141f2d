"""Integration test of the ``rdma`` transport (RC slot protocol on libibverbs).

It runs where a verbs device with an ACTIVE port exists (a NIC, or soft-RoCE ``rxe``), and skips
with the reason the verbs fabric gives where not (no device, kernel without RDMA support, or a
build without libibverbs-dev). Device, port and GID index come from RECBENCH_RDMA_DEVICE,
RECBENCH_RDMA_PORT and RECBENCH_RDMA_GID_INDEX when set.
"""

from __future__ import annotations

import os
import unittest

import numpy as np

import recbench
from recbench import _ps, errors

CLIENT = "qps_per_client_per_shard=2;request_slot_bytes=65536;response_slot_bytes=131072"


def fabric_options() -> str:
    parts = []
    for env, key in (("RECBENCH_RDMA_DEVICE", "device"), ("RECBENCH_RDMA_PORT", "ib_port"),
                     ("RECBENCH_RDMA_GID_INDEX", "gid_index")):
        if os.environ.get(env):
            parts.append(f"{key}={os.environ[env]}")
    return ";".join(parts)  # server and client both select the device


class VerbsIntegrationTest(unittest.TestCase):
    def test_get_put_over_verbs(self):
        reason = _ps.transports().get("rdma")
        if reason is not None:
            self.skipTest(f"rdma transport not built: {reason}")
        opts = fabric_options()
        try:
            srv = _ps.Server(transport="rdma", host="127.0.0.1", port=0, shard=0, num_shards=1,
                             index_type="DRAM_PET_HASH", value_size=64, capacity=10000, num_threads=1,
                             max_keys_per_request=1000, extra=opts or None)
        except errors.DeviceUnavailable as e:
            self.skipTest(f"no usable RDMA verbs device: {e}")
        try:
            keys = np.arange(1, 2001, dtype=np.uint64)
            rows = keys.astype(np.float32)[:, None] + np.arange(16, dtype=np.float32)[None, :]
            for mode in ("staging_copy", "direct_sg"):
                with recbench.PSClient(f"rdma://127.0.0.1:{srv.port}", prefetch_depth=2,
                                       transport_options=f"{opts};{CLIENT};get_response_mode={mode}"
                                       .lstrip(";")) as ps:
                    ps.put(keys, rows)
                    np.testing.assert_array_equal(ps.get(keys), rows)
                    self.assertFalse(ps.get(np.array([10**9], dtype=np.uint64)).any())
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
