"""A CCEH-backed ps_server killed with SIGKILL during a heavy PUT stream (fresh keys force segment
splits and directory doubling; rewrites of earlier keys), restarted on the same path, several
times at seeded random kill points: every PUT the client saw acknowledged is there with its value,
the batch in flight is each key's old or new row, no other key changed, and COMMAND verify passes.
Also: --sync modes start and answer, a bad one is refused by name."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np
from ps_testlib import PSServerProcess, python_env, rows_for

import recbench
from recbench import errors

VS = 256
DIM = VS // 4
BATCH = 2000
STREAMS = 3  # concurrent PUT streams, so that the kill lands while the server is writing


class PutStream(threading.Thread):
    """Batch i: BATCH/2 fresh keys and BATCH/2 rewrites of earlier ones, all with version i; the
    keys of stream j are those = j mod STREAMS. `acked` counts batches whose put returned; the
    one after it may be in flight when the server dies."""

    def __init__(self, uri: str, j: int, first_batch: int, next_key: int, seed: int):
        super().__init__(daemon=True)
        self.uri, self.j, self.first, self.next_key = uri, j, first_batch, next_key
        self.rng = np.random.default_rng(seed)
        self.batches: list[tuple[np.ndarray, int]] = []
        self.acked = 0
        self.cv = threading.Condition()
        self.error: Exception | None = None

    def make(self, i: int) -> np.ndarray:
        fresh = np.arange(self.next_key, self.next_key + BATCH // 2, dtype=np.uint64)
        self.next_key += BATCH // 2
        old = self.rng.integers(0, max(self.next_key - BATCH // 2, 1), BATCH // 2,
                                dtype=np.uint64)
        return np.unique(np.concatenate([fresh, old])) * STREAMS + self.j

    def run(self):
        try:
            with recbench.PSClient(self.uri, timeout_ms=5000) as ps:
                i = self.first
                while True:
                    keys = self.make(i)
                    self.batches.append((keys, i))
                    ps.put(keys, rows_for(keys, DIM, scale=3.0, offset=i))
                    with self.cv:
                        self.acked += 1
                        self.cv.notify_all()
                    i += 1
        except errors.RecbenchError as e:
            self.error = e

    def wait_acked(self, n: int) -> None:
        with self.cv:
            ok = self.cv.wait_for(lambda: self.acked >= n or not self.is_alive(), timeout=120)
        if not ok or self.acked < n:
            raise AssertionError(f"only {self.acked} of {n} batches acknowledged ({self.error})")


class CCEHKill9(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_cceh_kill_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _server(self, sync="none"):
        return PSServerProcess("brpc", value_size=VS, capacity=400000,
                               index_type="SSD_EXTENDIBLE_HASH", max_keys_per_request=BATCH,
                               extra_args=["--data_path", os.path.join(self.tmp, "data"),
                                           "--sync", sync])

    def test_kill9_during_put_stream(self):
        rng = random.Random(20261201)
        version: dict[int, int] = {}
        next_batch, next_key, depths = [0] * STREAMS, [0] * STREAMS, []
        for _round in range(4):
            srv = self._server().start()
            try:
                with recbench.PSClient(srv.uri, timeout_ms=20000) as ps:
                    self._check(ps, version, [])
                    depths.append(int(ps.verify()[0].split("global_depth=")[1].split()[0]))
                streams = [PutStream(srv.uri, j, next_batch[j], next_key[j],
                                     seed=rng.randrange(1 << 30)) for j in range(STREAMS)]
                for st in streams:
                    st.start()
                streams[0].wait_acked(rng.randrange(3, 25))   # the kill point
                os.kill(srv.proc.pid, signal.SIGKILL)
                for st in streams:
                    st.join(60)
                    self.assertFalse(st.is_alive())
                    self.assertIsNotNone(st.error)          # its in-flight put saw the death
            finally:
                srv.stop()
            inflight = []
            for j, st in enumerate(streams):
                for keys, i in st.batches[:st.acked]:
                    for k in keys.tolist():
                        version[k] = i
                if len(st.batches) > st.acked:
                    inflight.append(st.batches[st.acked])
                next_batch[j] = st.first + len(st.batches)
                next_key[j] = st.next_key
            srv = self._server().start()
            try:
                with recbench.PSClient(srv.uri, timeout_ms=20000) as ps:
                    self._check(ps, version, inflight)
                    self.assertTrue(ps.verify()[0].startswith("ok "))
            finally:
                srv.stop()
        srv = self._server().start()
        try:
            with recbench.PSClient(srv.uri, timeout_ms=20000) as ps:
                depths.append(int(ps.verify()[0].split("global_depth=")[1].split()[0]))
        finally:
            srv.stop()
        self.assertGreater(depths[-1], depths[0], "the stream should have doubled the directory")

    def _check(self, ps, version: dict[int, int], inflight: list) -> None:
        """Acked keys hold their last acked row; in-flight keys old or new (updates `version`);
        keys never written read as zeros."""
        top = max([*version, *(int(b[0].max()) for b in inflight)], default=-1) + 1
        keys = np.arange(top + 100, dtype=np.uint64)
        got = np.concatenate([ps.get(keys[i:i + BATCH]) for i in range(0, len(keys), BATCH)])
        fly = {int(k): i for b, i in inflight for k in b}
        vers = np.array([version.get(k, -1) for k in range(len(keys))])
        want = np.where((vers >= 0)[:, None], rows_for(keys, DIM, scale=3.0, offset=vers), 0.0)
        ok = (got == want).all(axis=1)
        for k in np.flatnonzero(~ok).tolist():
            if k in fly and np.array_equal(got[k], rows_for(np.array([k]), DIM, scale=3.0, offset=np.array([fly[k]]))[0]):
                ok[k] = True
        for k, i in fly.items():   # the new row went in: it is the acknowledged state now
            if np.array_equal(got[k], rows_for(np.array([k]), DIM, scale=3.0, offset=np.array([i]))[0]):
                version[k] = i
        bad = np.flatnonzero(~ok).tolist()
        self.assertEqual(bad[:10], [], f"{len(bad)} keys differ from what was acknowledged")


class SyncFlag(unittest.TestCase):
    def test_modes_serve_and_bad_mode_refused(self):
        tmp = tempfile.mkdtemp(prefix="rs_cceh_sync_")
        try:
            for mode in ("none", "interval:20", "always"):
                with PSServerProcess("grpc", value_size=VS, index_type="SSD_EXTENDIBLE_HASH",
                                     extra_args=["--data_path", os.path.join(tmp, mode),
                                                 "--sync", mode]) as srv, \
                        recbench.PSClient(srv.uri) as ps:
                    keys = np.arange(2000, dtype=np.uint64)
                    for i in range(0, 2000, 500):
                        ps.put(keys[i:i + 500], rows_for(keys[i:i + 500], DIM, scale=3.0, offset=1.0))
                    ps.update(keys[:500], np.ones((500, DIM), np.float32))
                    ps.put(keys[:500], rows_for(keys[:500], DIM, scale=3.0, offset=1.0))
                    np.testing.assert_array_equal(ps.get(keys[:500]),
                                                  rows_for(keys[:500], DIM, scale=3.0, offset=1.0))
                    self.assertTrue(ps.verify()[0].startswith("ok "))
            for flags, words in ((["--index_type", "SSD_EXTENDIBLE_HASH", "--data_path", tmp,
                                   "--sync", "sometimes"], "sync 'sometimes'"),
                                 (["--sync", "always"], "only SSD_EXTENDIBLE_HASH")):
                p = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--port", "0"]
                                   + flags, capture_output=True, text=True, env=python_env(),
                                   timeout=60)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(words, p.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
