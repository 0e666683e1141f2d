"""End-to-end tests of the RC slot protocol over shared memory (transport ``shm``).

Real servers (``python -m recbench.ps_server --transport shm`` or an in-process ``_ps.Server``)
and real clients (``recbench.PSClient``, ``python -m recbench.ps_bench``) on loopback; free
ports; every process started here is stopped here.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ps_testlib import PSServerProcess, python_env, require_transport, rows_for

import recbench
from recbench import _ps, rc_options, records
from recbench.launch import PSServerLauncher

ROOT = Path(__file__).resolve().parents[3]
SMALL = "qps_per_client_per_shard=2;request_slot_bytes=1048576;response_slot_bytes=1048576"
RS_PS_INVALID_PAYLOAD = 1


def run_bench(target: list[str], *extra: str, timeout: float = 120.0,
              transport: str = "shm") -> subprocess.CompletedProcess:
    """ps_bench against target (["--port", p] or a server's bench_args(tmpdir))."""
    args = [sys.executable, "-m", "recbench.ps_bench", "--transport", transport, "--no_barrier"] + \
        list(target) + list(extra)
    return subprocess.run(args, capture_output=True, text=True, env=python_env(), cwd=str(ROOT),
                          timeout=timeout)


def result(stdout: str, phase: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("PS_BENCHMARK_RESULT") and f"phase={phase}" in line:
            return records.parse_kv(line)
    raise AssertionError(f"no {phase} result line in:\n{stdout}")


def shm_names(pid: int) -> list[str]:
    return glob.glob(f"/dev/shm/recbench-rc-{pid}-*")


class RCOptionsTest(unittest.TestCase):
    def test_flags_become_extra_strings(self):
        import argparse

        p = argparse.ArgumentParser()
        rc_options.add_server_flags(p)
        a = p.parse_args(["--thread_num", "3", "--poll_mode", "busy", "--rdma_rc_fake_get_mode",
                          "index_only", "--numa_id", "0"])
        self.assertEqual(rc_options.server_threads(a, 1), 3)
        extra = rc_options.server_extra(a, "profile_interval_ms=5", max_keys=500)
        self.assertEqual(extra, "poll_mode=busy;fake_get_mode=index_only;numa_id=0;"
                                "max_keys_per_request=500;profile_interval_ms=5")
        c = argparse.ArgumentParser()
        rc_options.add_client_flags(c)
        b = c.parse_args(["--rdma_rc_qps_per_client_per_shard", "4", "--rdma_get_response_mode",
                          "direct_sg", "--rdma_rc_skip_client_copy"])
        self.assertEqual(rc_options.client_extra(b), "qps_per_client_per_shard=4;"
                                                     "get_response_mode=direct_sg;skip_client_copy=1")
        self.assertIsNone(rc_options.client_extra(c.parse_args([])))
        rows = c.parse_args(["--rdma_rc_rows_in_slots"])
        self.assertEqual(rc_options.client_extra(rows, "poll_mode=busy", depth=4),
                         "rows_buffers=4;poll_mode=busy")

    def test_result_line_says_how_rows_reached_the_bench(self):
        from recbench import ps_bench

        self.assertEqual(ps_bench.client_rows({"rows_in_slots": True, "extra": None}), "in_place")
        self.assertEqual(ps_bench.client_rows({"extra": "poll_mode=busy,skip_client_copy=on"}),
                         "skipped")
        self.assertEqual(ps_bench.client_rows({"extra": "skip_client_copy=false"}), "copy")
        self.assertEqual(ps_bench.client_rows({"extra": None}), "copy")
        self.assertEqual(ps_bench.client_rows({"rows_in_slots": True}, "load"), "none")
        self.assertEqual(ps_bench.client_rows({"mode": "insert", "extra": None}), "none")


class RcEndToEndCases:
    """The RC protocol's end-to-end cases, for any fabric (`transport`: shm here; rdma over the
    verbs fabric in test_rc_verbs.py, run on rxe in the lab): one shard, two shards with many
    clients, ps_bench verify in every response mode, slot limits, descriptor injection, a killed
    client."""

    transport = "shm"
    bench_seconds = "0.3"  # a run phase with GETs in it on this fabric

    def bench(self, target: list[str], *extra: str) -> subprocess.CompletedProcess:
        return run_bench(target, *extra, transport=self.transport)

    def test_one_shard_get_put_update(self):
        with PSServerProcess(self.transport, num_shards=1, value_size=64) as srv:
            server_pid = srv.pid
            with recbench.PSClient(srv.uri, transport_options=SMALL, prefetch_depth=2) as ps:
                keys = np.arange(1, 1001, dtype=np.uint64)
                ps.put(keys, rows_for(keys, 16))
                got = ps.get(keys)
                np.testing.assert_array_equal(got, rows_for(keys, 16))
                ps.update(keys[:10], np.ones((10, 16), dtype=np.float32))
                np.testing.assert_array_equal(ps.get(keys[:10]), rows_for(keys[:10], 16) + 1)
                missing = ps.get(np.array([10**9], dtype=np.uint64))
                self.assertFalse(missing.any())
        self.assertEqual(shm_names(server_pid), [])

    def test_two_shards_several_logical_clients_per_process(self):
        with PSServerProcess(self.transport, num_shards=2, value_size=128, num_threads=2) as srv:
            keys = np.arange(1, 4001, dtype=np.uint64)
            with recbench.PSClient(srv.uri, transport_options=SMALL) as loader:
                for lo in range(0, len(keys), 1000):  # max_keys_per_request 1000 per shard
                    loader.put(keys[lo:lo + 1000], rows_for(keys[lo:lo + 1000], 32))
            errors_seen = []

            def worker(i):
                try:
                    with recbench.PSClient(srv.uri, transport_options=SMALL, prefetch_depth=2) as ps:
                        rng = np.random.default_rng(i)
                        for _ in range(30):
                            k = rng.choice(keys, 300)
                            np.testing.assert_array_equal(ps.get(k), rows_for(k, 32))
                except Exception as e:  # noqa: BLE001 — reported below
                    errors_seen.append(e)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors_seen, [])

    def test_ps_bench_verify_both_response_modes(self):
        tmp = tempfile.mkdtemp(prefix="rc_bench_")
        self.addCleanup(shutil.rmtree, tmp, True)
        for index in ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH"):
            with PSServerProcess(self.transport, num_shards=2, value_size=128, index_type=index,
                                 extra_args=["--thread_num", "2"]) as srv:
                for mode in ("staging_copy", "direct_sg", "auto"):
                    r = self.bench(srv.bench_args(tmp), "--record_count", "3000",
                                   "--value_size", "128", "--batch_keys", "200", "--thread_num", "2",
                                   "--running_seconds", self.bench_seconds,
                                   "--verify_deterministic_values", "--prefetch_depth", "4",
                                   "--rdma_rc_qps_per_client_per_shard", "4",
                                   "--rdma_get_response_mode", mode, "--fetch_key_space", "3500")
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    res = result(r.stdout, "run")
                    self.assertGreater(int(res["key_ops"]), 0)
                    self.assertEqual(res["transport"], self.transport)
                    self.assertEqual(res["client_rows"], "copy")
                    # auto copies on shm for every index (a gather there is the CPU's, row by
                    # row) and for PET on verbs
                    if mode == "staging_copy" or (mode == "auto" and (
                            self.transport == "shm" or index == "DRAM_PET_HASH")):
                        self.assertEqual(res["get_path"], "staging_copy", (index, mode))
                # every key present: direct_sg GETs are all scatter-gathered (a missing key sends
                # its batch through the copy, which the fetch_key_space above provokes)
                r = self.bench(srv.bench_args(tmp), "--record_count", "3000", "--value_size", "128",
                               "--batch_keys", "200", "--running_seconds", self.bench_seconds,
                               "--prefetch_depth", "4", "--rdma_rc_qps_per_client_per_shard", "4",
                               "--rdma_get_response_mode", "direct_sg", "--fetch_key_space", "3000")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                res = result(r.stdout, "run")
                self.assertGreater(int(res["key_ops"]), 0, index)  # else get_path is "none"
                self.assertEqual(res["get_path"], "direct_sg", index)

    def test_ps_bench_rows_in_slots_land_without_a_copy(self):
        tmp = tempfile.mkdtemp(prefix="rc_bench_")
        self.addCleanup(shutil.rmtree, tmp, True)
        with PSServerProcess(self.transport, num_shards=1, value_size=128,
                             extra_args=["--thread_num", "2"]) as srv:
            for mode in ("staging_copy", "direct_sg"):
                r = self.bench(srv.bench_args(tmp), "--record_count", "3000", "--value_size", "128",
                               "--batch_keys", "200", "--thread_num", "2", "--prefetch_depth", "4",
                               "--running_seconds", self.bench_seconds,
                               "--verify_deterministic_values", "--rdma_rc_rows_in_slots",
                               "--rdma_rc_qps_per_client_per_shard", "8",
                               "--rdma_get_response_mode", mode,
                               "--rdma_rc_profile_interval_ms", "20")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                run = result(r.stdout, "run")
                self.assertGreater(int(run["key_ops"]), 0)
                self.assertEqual(run["client_rows"], "in_place")
                lines = [ln for ln in r.stdout.splitlines()
                         if ln.startswith("component=rdma_rc_client_profile")]
                fields = [dict(f.split("=", 1) for f in ln.split() if "=" in f) for ln in lines]
                self.assertTrue(any(int(f["rows_in_place"]) > 0 for f in fields), r.stdout)
                self.assertTrue(all(f["copied_bytes"] == "0" for f in fields), r.stdout)
            # every batch in flight needs its own slot beside the row buffers
            r = self.bench(srv.bench_args(tmp), "--record_count", "100", "--value_size", "128",
                           "--running_seconds", "0.2", "--prefetch_depth", "4",
                           "--rdma_rc_rows_in_slots", "--rdma_rc_qps_per_client_per_shard", "6")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("rows_buffers 4", r.stderr)
        with PSServerProcess(self.transport, num_shards=2, value_size=64) as srv:
            r = self.bench(srv.bench_args(tmp), "--record_count", "100", "--value_size", "64",
                           "--running_seconds", "0.2", "--prefetch_depth", "2",
                           "--rdma_rc_rows_in_slots")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("row buffers need a client of one shard", r.stderr)

    def test_ps_bench_streaming_copy_verifies(self):
        # client_copy=stream copies every GET's rows with streaming stores (plain: none); the
        # bench checks every row either way
        tmp = tempfile.mkdtemp(prefix="rc_bench_")
        self.addCleanup(shutil.rmtree, tmp, True)
        with PSServerProcess(self.transport, num_shards=1, value_size=128) as srv:
            for copy in ("stream", "plain"):
                r = self.bench(srv.bench_args(tmp), "--record_count", "3000", "--value_size", "128",
                               "--batch_keys", "200", "--thread_num", "2", "--prefetch_depth", "4",
                               "--running_seconds", self.bench_seconds,
                               "--verify_deterministic_values",
                               "--rdma_rc_qps_per_client_per_shard", "4",
                               "--rdma_rc_profile_interval_ms", "20",
                               "--transport_options", f"client_copy={copy}")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertGreater(int(result(r.stdout, "run")["key_ops"]), 0)
                fields = [dict(f.split("=", 1) for f in ln.split() if "=" in f)
                          for ln in r.stdout.splitlines()
                          if ln.startswith("component=rdma_rc_client_profile")]
                streamed = sum(int(f["stream_copies"]) for f in fields)
                if copy == "stream":
                    self.assertGreater(streamed, 0, r.stdout)
                else:
                    self.assertEqual(streamed, 0, r.stdout)
            r = self.bench(srv.bench_args(tmp), "--record_count", "100", "--value_size", "128",
                           "--running_seconds", "0.2", "--transport_options", "client_copy=nt")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("client_copy=nt", r.stderr)

    def test_prefetch_depth_beyond_slots_is_refused(self):
        with PSServerProcess(self.transport, num_shards=1, value_size=64) as srv:
            r = self.bench(["--host", "127.0.0.1", "--port", str(srv.ports[0])],
                           "--record_count", "100", "--value_size", "64",
                           "--running_seconds", "0.2", "--prefetch_depth", "9",
                           "--rdma_rc_qps_per_client_per_shard", "4", "--rdma_rc_slots_per_qp", "2")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("prefetch_depth 9", r.stderr)

    def test_corrupted_descriptor_gets_error_while_others_work(self):
        with PSServerProcess(self.transport, num_shards=1, value_size=64) as srv:
            keys = np.arange(1, 501, dtype=np.uint64)
            stop = threading.Event()
            failures, rounds = [], [0]

            def steady():
                try:
                    with recbench.PSClient(srv.uri, transport_options=SMALL) as ps:
                        ps.put(keys, rows_for(keys, 16))
                        while not stop.is_set() or rounds[0] < 20:
                            np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
                            rounds[0] += 1
                except Exception as e:  # noqa: BLE001 — reported below
                    failures.append(e)

            t = threading.Thread(target=steady)
            t.start()
            try:
                junk = bytes([0xAB]) * 256
                status, why = _ps.rc_debug_inject(self.transport, "127.0.0.1", srv.ports[0], junk,
                                                  extra=SMALL)
                self.assertEqual(status, RS_PS_INVALID_PAYLOAD)
                self.assertIn("magic", why)
                # right magic, lying about its client id
                desc = struct.pack("<IHHQIII", 0x52435053, 1, 1, 1, 0, 999999, 0) + bytes(164)
                status, why = _ps.rc_debug_inject(self.transport, "127.0.0.1", srv.ports[0], desc,
                                                  extra=SMALL)
                self.assertEqual(status, RS_PS_INVALID_PAYLOAD)
                self.assertIn("999999", why)
            finally:
                stop.set()
                t.join()
            self.assertEqual(failures, [])
            self.assertGreaterEqual(rounds[0], 20)

    def test_killed_client_does_not_stop_server_or_leak_lanes(self):
        srv = _ps.Server(transport=self.transport, host="127.0.0.1", port=0, shard=0,
                         num_shards=1, index_type="DRAM_PET_HASH", value_size=64, capacity=10000,
                         num_threads=1, max_keys_per_request=1000, extra="")
        try:
            args = [sys.executable, "-m", "recbench.ps_bench", "--transport", self.transport,
                    "--host", "127.0.0.1", "--port", str(srv.port), "--record_count", "2000",
                    "--value_size", "64", "--batch_keys", "100", "--running_seconds", "60", "--no_barrier",
                    "--rdma_rc_qps_per_client_per_shard", "4", "--prefetch_depth", "4",
                    "--rdma_rc_profile_interval_ms", "20"]
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=python_env(), cwd=str(ROOT))
            try:
                for line in p.stdout:  # the client profile only prints while requests complete
                    if "component=rdma_rc_client_profile" in line:
                        break
                self.assertEqual(srv.stats()["connections_open"], 1)
            finally:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=30)
                p.stdout.close()
                p.stderr.close()
            deadline = time.monotonic() + 10
            while srv.stats()["connections_open"] and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(srv.stats()["connections_open"], 0)
            self.assertEqual(shm_names(p.pid), [])
            with recbench.PSClient(f"{self.transport}://127.0.0.1:{srv.port}",
                                   transport_options=SMALL) as ps:
                keys = np.arange(1, 11, dtype=np.uint64)
                ps.put(keys, rows_for(keys, 16))
                np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
            deadline = time.monotonic() + 10
            while srv.stats()["connections_open"] and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(srv.stats()["connections_open"], 0)
        finally:
            srv.stop()
        self.assertEqual(shm_names(os.getpid()), [])


class ShmEndToEndTest(RcEndToEndCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "shm")

    def test_poll_threads_report_ready_and_bind_cores(self):
        ncpu = os.cpu_count() or 1
        with PSServerProcess("shm", num_shards=1, value_size=64,
                             extra_args=["--thread_num", "2", "--bind_core_offset", "0",
                                         "--bind_core_stride", "1", "--poll_mode", "busy"]) as srv:
            ready = [x for x in srv.stdout_lines if "component=rdma_server event=polling_thread_ready" in x]
            self.assertEqual(len(ready), 2, srv.stdout_lines)
            cores = sorted(int(x.split("core=")[1].split()[0]) for x in ready)
            self.assertEqual(cores, sorted({0 % ncpu, 1 % ncpu}) if ncpu > 1 else [0, 0])
            self.assertTrue(all("poll_mode=busy" in x for x in ready))

    def test_profile_lines_carry_recstore_fields(self):
        with PSServerProcess("shm", value_size=64,
                             extra_args=["--rdma_rc_profile_interval_ms", "50"]) as srv:
            with recbench.PSClient(srv.uri) as ps:
                keys = np.arange(1, 101, dtype=np.uint64)
                ps.put(keys, np.ones((100, 16), np.float32))
                ps.get(keys)

                def profile_with_gets():
                    for line in list(srv.stdout_lines):
                        if "component=rdma_rc_server_profile" in line:
                            kv = records.parse_kv(line)
                            if int(kv.get("handled_get", 0)) >= 1:
                                return kv
                    return None

                deadline = time.monotonic() + 20
                kv = profile_with_gets()
                while kv is None and time.monotonic() < deadline:
                    time.sleep(0.02)  # polls the server's output for the condition
                    kv = profile_with_gets()
            self.assertIsNotNone(kv, "no rdma_rc_server_profile line with handled_get >= 1")
            for field in ("shard", "threads", "scan_rounds", "scan_hit_pct", "handled_get",
                          "handled_put", "handle_get_avg_ns", "get_rows", "poll_loop_avg_ns",
                          "poller_max_get"):
                self.assertIn(field, kv)
            out = "\n".join(srv.stdout_lines)
            self.assertIn("component=rdma_rc_server_poller_profile", out)
            self.assertIn("component=rdma_rc_transport_profile role=server", out)

    def test_rc_flags_refused_for_other_transports(self):
        r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport", "brpc",
                            "--port", "0", "--poll_mode", "busy"], capture_output=True, text=True,
                           env=python_env(), cwd=str(ROOT), timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--poll_mode", r.stderr)

    def test_idle_adaptive_pollers_fall_asleep_and_stay_asleep(self):
        """Behaviour, not CPU seconds (which measure the machine): once the lanes go idle, every
        adaptive poller reaches its sleeping state (on shm: blocked on its lanes' doorbells), and
        while the server stays idle none of them wakes to spin or yield again; a request then
        rings the doorbell, wakes its poller and is answered."""
        self._idle_pollers_sleep_and_a_request_rings(SMALL)

    def test_a_busy_mode_client_rings_the_doorbells_too(self):
        """A client's poll mode is how it waits, not whether it rings: a busy-mode client's
        request wakes the sleeping poller through its doorbell (it used not to ring, and such a
        request waited for the poller's 100 ms safety wake-up)."""
        self._idle_pollers_sleep_and_a_request_rings(SMALL + ";poll_mode=busy")

    def _idle_pollers_sleep_and_a_request_rings(self, client_options: str) -> None:
        srv = _ps.Server(transport="shm", host="127.0.0.1", port=0, shard=0, num_shards=1,
                         index_type="DRAM_PET_HASH", value_size=64, capacity=1000, num_threads=2,
                         max_keys_per_request=1000, extra="")
        try:
            with recbench.PSClient(f"shm://127.0.0.1:{srv.port}",
                                   transport_options=client_options) as ps:
                ps.get(np.arange(1, 5, dtype=np.uint64))  # lanes exist, then stay idle
                deadline = time.monotonic() + 30
                while srv.stats()["pollers_sleeping"] < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)  # waiting for the condition, bounded
                before = srv.stats()
                self.assertEqual(before["pollers_sleeping"], 2, before)
                time.sleep(0.5)  # an idle interval under observation, not synchronisation
                after = srv.stats()
                self.assertEqual(after["pollers_sleeping"], 2, after)
                self.assertEqual(after["poller_awake_idle_rounds"],
                                 before["poller_awake_idle_rounds"],
                                 "an idle poller woke up to spin or yield")
                self.assertGreaterEqual(after["poller_blocks"], 2, after)  # futex, not naps
                rows = ps.get(np.arange(1, 5, dtype=np.uint64))
                woken = srv.stats()
            self.assertEqual(rows.shape[0], 4)
            self.assertGreater(woken["poller_doorbell_wakes"], after["poller_doorbell_wakes"], woken)
        finally:
            srv.stop()

    def test_clients_woken_after_their_lanes_verify(self):
        """Four client threads on one poller: the poller checks each answer's sleeper after its
        pass over that client's lanes (wakes after the client's lanes, rc_server.c), and every row
        of ps_bench's deterministic values still verifies."""
        srv = _ps.Server(transport="shm", host="127.0.0.1", port=0, shard=0, num_shards=1,
                         index_type="DRAM_PET_HASH", value_size=128, capacity=5000, num_threads=1,
                         max_keys_per_request=1000, extra="")
        try:
            r = subprocess.run(
                [sys.executable, "-m", "recbench.ps_bench", "--transport", "shm", "--host",
                 "127.0.0.1", "--port", str(srv.port), "--record_count", "3000", "--value_size",
                 "128", "--batch_keys", "200", "--thread_num", "4", "--prefetch_depth", "4",
                 "--running_seconds", self.bench_seconds, "--verify_deterministic_values",
                 "--no_barrier"],
                capture_output=True, text=True, env=python_env(), cwd=str(ROOT), timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertGreater(int(result(r.stdout, "run")["key_ops"]), 0)
            st = srv.stats()
            self.assertGreater(st["client_wake_checks_deferred"], 0, st)
        finally:
            srv.stop()

    def test_busy_pollers_never_sleep(self):
        srv = _ps.Server(transport="shm", host="127.0.0.1", port=0, shard=0, num_shards=1,
                         index_type="DRAM_PET_HASH", value_size=64, capacity=1000, num_threads=1,
                         max_keys_per_request=1000, extra="poll_mode=busy")
        try:
            with recbench.PSClient(f"shm://127.0.0.1:{srv.port}", transport_options=SMALL) as ps:
                ps.get(np.arange(1, 5, dtype=np.uint64))
                st = srv.stats()
                deadline = time.monotonic() + 30
                while st["poller_awake_idle_rounds"] < 10000 and time.monotonic() < deadline:
                    st = srv.stats()
            self.assertGreaterEqual(st["poller_awake_idle_rounds"], 10000, st)
            self.assertEqual(st["pollers_sleeping"], 0, st)
            self.assertEqual(st["poller_naps"], 0, st)
        finally:
            srv.stop()

    def test_rdma_without_device_exits_77(self):
        reason = _ps.transports().get("rdma")
        if reason is not None:
            self.skipTest(f"rdma not built: {reason}")
        srv = PSServerLauncher([sys.executable, "-m", "recbench.ps_server", "--transport", "rdma",
                                "--host", "127.0.0.1", "--port", "0", "--value_size", "64",
                                "--capacity", "1000"], cwd=ROOT)
        try:
            srv.wait_ready(60)  # raises when the server exits first
        except RuntimeError:
            pass
        else:  # a device exists and the server runs: test_rc_verbs covers that host
            srv.stop(30)
            self.skipTest("this host has an RDMA device (see test_rc_verbs)")
        code = srv.stop(60)
        stderr = "\n".join(srv.err_lines)
        self.assertEqual(code, 77, stderr)
        lines = [x for x in srv.err_lines if x.strip()]
        self.assertEqual(len(lines), 1, stderr)
        self.assertIn("RDMA", lines[0])


class RcBenchCommandTest(unittest.TestCase):
    """tools/benchmarks/bench_rc_shm.py runs every case it is asked for end to end and reports
    real measurements (numbers are not judged here: speed is for the benchmark command)."""

    def test_storage_shm_and_brpc_cases_report_measurements(self):
        require_transport(self, "shm")
        require_transport(self, "brpc")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "rows.json")
            r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_rc_shm.py"),
                                "--record_count", "2000", "--running_seconds", "0.2",
                                "--repeats", "1", "--cases", "storage,shm_adaptive,brpc",
                                "--json", str(out)],
                               capture_output=True, text=True, timeout=300, env=python_env(),
                               cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = json.loads(out.read_text())
        self.assertEqual([x["case"] for x in rows], ["storage", "shm_adaptive", "brpc"])
        for x in rows:
            self.assertGreater(x["keys_per_sec"], 0, x)
        self.assertGreater(rows[1]["server_cpu_s"], 0)  # read from the server's /proc entry
        table = r.stdout.splitlines()
        self.assertIn("vs storage", table[1])
        self.assertEqual([ln.split()[0] for ln in table[2:]], ["storage", "shm_adaptive", "brpc"])

    def test_unknown_case_is_a_usage_error(self):
        r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_rc_shm.py"),
                            "--cases", "storage,tcp"], capture_output=True, text=True, timeout=60,
                           env=python_env(), cwd=str(ROOT))
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown case 'tcp'", r.stderr)

    def test_idle_benchmark_measures_a_blocked_poller_and_skips_without_a_device(self):
        """tools/benchmarks/bench_rc_idle.py: on shm every lane rings, so in both cases the idle
        poller blocks and never naps; rdma without a verbs device is a skip with its reason."""
        require_transport(self, "shm")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "rows.json")
            r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_rc_idle.py"),
                                "--transport", "shm", "--idle_seconds", "0.5", "--repeats", "1",
                                "--json", str(out)], capture_output=True, text=True, timeout=120,
                               env=python_env(), cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = json.loads(out.read_text())
        self.assertEqual([x["case"] for x in rows], ["ringing", "not_ringing"])
        for x in rows:
            self.assertEqual((x["naps"], x["lanes_ringing"]), (0, 0), x)  # shm has no verbs lanes
            self.assertGreater(x["blocks"], 0, x)
            self.assertGreaterEqual(x["idle_s"], 0.5)
        self.assertIn("CPU-s per idle s", r.stdout)
        from recbench import rdma

        found, _ = rdma.devices_status()
        if not any(p["state"] == "ACTIVE" for d in found for p in d["ports"]):
            r = subprocess.run([sys.executable, str(ROOT / "tools/benchmarks/bench_rc_idle.py"),
                                "--transport", "rdma", "--idle_seconds", "0.1", "--repeats", "1"],
                               capture_output=True, text=True, timeout=120, env=python_env(),
                               cwd=str(ROOT))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("skipped: rdma: "), r.stdout)


if __name__ == "__main__":
    unittest.main()
