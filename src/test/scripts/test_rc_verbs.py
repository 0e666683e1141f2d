"""Integration tests of the ``rdma`` transport (RC slot protocol on libibverbs).

They run where a verbs device with an ACTIVE port exists (a NIC, or soft-RoCE ``rxe``: the lab's
guests, see docs/lab.md and test_lab.py, run this file), and skip with the reason the verbs fabric
gives where not (no device, kernel without RDMA support, or a build without libibverbs-dev).
Device, port and GID index come from RECBENCH_RDMA_DEVICE, RECBENCH_RDMA_PORT and
RECBENCH_RDMA_GID_INDEX when set.

Sizes are consistent: the server takes at most 1000 keys per request, every PUT/GET here sends at
most that many, and the slots hold such a request (1000 x 64 B rows + keys + header < 256 KiB).
RcProtocolOverVerbsTest runs test_rc_shm's protocol cases (RcEndToEndCases) over verbs unchanged.
The direct_sg cases assert the path the server took (its get_direct_sg / fallback counters in the
profile lines), so a device without on-demand paging cannot pass them through the copy fallback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_rc_shm
from ps_testlib import PSServerProcess, rows_for

import recbench
from recbench import _ps, errors
from recbench.launch import python_env
from recbench.records import parse_kv as parse_kv_line

ROOT = Path(__file__).resolve().parents[3]
MAX_KEYS = 1000
SLOTS = "qps_per_client_per_shard=2;request_slot_bytes=262144;response_slot_bytes=262144"


def fabric_options() -> str:
    parts = []
    for env, key in (("RECBENCH_RDMA_DEVICE", "device"), ("RECBENCH_RDMA_PORT", "ib_port"),
                     ("RECBENCH_RDMA_GID_INDEX", "gid_index")):
        if os.environ.get(env):
            parts.append(f"{key}={os.environ[env]}")
    return ";".join(parts)  # server and client both select the device


def client_options(*more: str) -> str:
    return ";".join(x for x in (fabric_options(), SLOTS, *more) if x)


def require_device(test: unittest.TestCase) -> None:
    reason = _ps.transports().get("rdma")
    if reason is not None:
        raise unittest.SkipTest(f"rdma transport not built: {reason}")
    from recbench import rdma

    found, why = rdma.devices_status()
    if not any(p["state"] == "ACTIVE" for d in found for p in d["ports"]):
        raise unittest.SkipTest(f"no RDMA verbs device with an ACTIVE port: {why or found}")


def server(index_type: str = "DRAM_PET_HASH", *extra: str) -> PSServerProcess:
    args = ["--rdma_rc_profile_interval_ms", "100"]
    if fabric_options():
        args += ["--transport_options", fabric_options()]
    return PSServerProcess("rdma", value_size=64, capacity=20000, max_keys_per_request=MAX_KEYS,
                           index_type=index_type, extra_args=args + list(extra),
                           ready_timeout=120.0)


def line_totals(lines, component: str) -> dict[str, int]:
    """Sums of the integer counters of every `component=...` profile line (per-interval deltas)."""
    tot: dict[str, int] = {}
    for line in lines:
        if f"component={component}" in line:
            for k, v in parse_kv_line(line).items():
                if v.isdigit():
                    tot[k] = tot.get(k, 0) + int(v)
    return tot


def profile_totals(srv: PSServerProcess, want: dict[str, int], timeout: float = 60.0,
                   component: str = "rdma_rc_server_profile") -> dict:
    """Sums of the server's profile counters (rdma_rc_server_profile unless `component` names
    another line) once each `want` key reaches its value."""
    def totals() -> dict[str, int]:
        return line_totals(list(srv.stdout_lines) + list(srv.stderr_lines), component)

    def complete() -> dict[str, int] | None:
        tot = totals()
        return tot if all(tot.get(k, 0) >= v for k, v in want.items()) else None

    # re-read whenever the server prints a line (a profile line comes every interval)
    return srv.wait_for(complete, f"profile totals {want}", timeout) or totals()


def run_bench(port: int, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "recbench.ps_bench", "--transport", "rdma", "--host",
            "127.0.0.1", "--port", str(port), "--no_barrier", "--value_size", "64",
            "--record_count", "2000", "--batch_keys", "100", "--running_seconds", "0.5",
            "--prefetch_depth", "2", "--rdma_rc_qps_per_client_per_shard", "2"]
    if fabric_options():
        args += ["--transport_options", fabric_options()]
    return subprocess.run(args + list(extra), capture_output=True, text=True, env=python_env(),
                          cwd=str(ROOT), timeout=600)


def result(stdout: str, phase: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("PS_BENCHMARK_RESULT") and f"phase={phase}" in line:
            return parse_kv_line(line)
    raise AssertionError(f"no {phase} result line in:\n{stdout}")


class VerbsIntegrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_device(cls)

    def test_get_put_over_verbs_in_server_sized_batches(self):
        try:
            srv = _ps.Server(transport="rdma", host="127.0.0.1", port=0, shard=0, num_shards=1,
                             index_type="DRAM_PET_HASH", value_size=64, capacity=10000,
                             num_threads=1, max_keys_per_request=MAX_KEYS,
                             extra=fabric_options() or None)
        except errors.DeviceUnavailable as e:
            self.skipTest(f"no usable RDMA verbs device: {e}")
        try:
            keys = np.arange(1, 2001, dtype=np.uint64)
            for mode in ("staging_copy", "direct_sg"):
                with recbench.PSClient(f"rdma://127.0.0.1:{srv.port}", prefetch_depth=2,
                                       transport_options=client_options(
                                           f"get_response_mode={mode}")) as ps:
                    for lo in range(0, len(keys), MAX_KEYS):
                        ps.put(keys[lo:lo + MAX_KEYS], rows_for(keys[lo:lo + MAX_KEYS], 16))
                    for lo in range(0, len(keys), MAX_KEYS):
                        np.testing.assert_array_equal(ps.get(keys[lo:lo + MAX_KEYS]),
                                                      rows_for(keys[lo:lo + MAX_KEYS], 16))
                    self.assertFalse(ps.get(np.array([10**9], dtype=np.uint64)).any())
        finally:
            srv.stop()

    def test_direct_sg_takes_the_scatter_gather_path(self):
        """On a device without implicit ODP the server pins the value store, so direct_sg GETs
        are served by scatter-gather writes, not by the copy fallback."""
        with server("DRAM_EXTENDIBLE_HASH") as srv:
            keys = np.arange(1, 801, dtype=np.uint64)
            with recbench.PSClient(srv.uri, prefetch_depth=2,
                                   transport_options=client_options(
                                       "get_response_mode=direct_sg")) as ps:
                ps.put(keys, rows_for(keys, 16))
                for _ in range(3):
                    np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
            tot = profile_totals(srv, {"get_direct_sg": 3})
            self.assertGreaterEqual(tot.get("get_direct_sg", 0), 3, tot)
            self.assertEqual(tot.get("get_direct_sg_fallback", 0), 0, tot)
            self.assertGreaterEqual(tot.get("get_direct_sg_wr", 0), 3, tot)
            err = "\n".join(srv.stderr_lines)
            self.assertIn("component=rdma_fabric event=device_open", err)
            if "odp_implicit=0" in err:
                self.assertIn("event=direct_sg_pinned", err)
            # ps_bench reports the path its GETs took, per row
            for mode, path in (("direct_sg", "direct_sg"), ("staging_copy", "staging_copy")):
                r = run_bench(srv.ports[0], "--rdma_get_response_mode", mode,
                              "--verify_deterministic_values")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertEqual(result(r.stdout, "run")["get_path"], path, mode)

    def test_fake_get_modes_and_skip_copy_are_diagnostic_paths(self):
        for fake in ("status_only", "payload_memset"):  # server-side knobs
            with server("DRAM_PET_HASH", "--rdma_rc_fake_get_mode", fake) as srv:
                r = run_bench(srv.ports[0])
                self.assertEqual(r.returncode, 0, f"{fake}: {r.stdout}{r.stderr}")
                self.assertGreater(int(result(r.stdout, "run")["key_ops"]), 0, fake)
        with server() as srv:  # client-side knob
            r = run_bench(srv.ports[0], "--rdma_rc_skip_client_copy")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertGreater(int(result(r.stdout, "run")["key_ops"]), 0)

    def test_empty_gid_index_is_refused_with_its_reason(self):
        """rxe's GID table has many slots and two entries: an empty one used to be accepted, and
        a QP addressed with it never connects (the lab found this)."""
        with self.assertRaises(errors.DeviceUnavailable) as cm:
            _ps.Server(transport="rdma", host="127.0.0.1", port=0, shard=0, num_shards=1,
                       index_type="DRAM_PET_HASH", value_size=64, capacity=100, num_threads=1,
                       extra=";".join(x for x in (fabric_options(), "gid_index=250") if x))
        self.assertIn("gid_index 250", str(cm.exception))

    def test_profile_lines_and_device_line(self):
        with server() as srv:
            r = run_bench(srv.ports[0], "--rdma_rc_profile_interval_ms", "100")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            tot = profile_totals(srv, {"handled_get": 1})
            for field in ("handled_get", "get_rows", "scan_rounds"):
                self.assertIn(field, tot)
            self.assertIn("component=rdma_rc_client_profile", r.stdout + r.stderr)

    def test_oversubscribed_clients_block_on_completion_events(self):
        """Eight client threads on the guest's two vCPUs and one poller: waits that keep ending
        in naps make the clients ask for immediates (RS_RC_FLAG_NOTIFY), and they block on their
        QPs' completion channels until the server's WRITE WITH IMM arrives. Every row verified,
        no timeout, and the server counts the immediates it sent."""
        with server("DRAM_PET_HASH", "--thread_num", "1") as srv:
            r = run_bench(srv.ports[0], "--thread_num", "8", "--running_seconds", "2",
                          "--verify_deterministic_values=true", "--rdma_wait_timeout_ms", "30000",
                          "--rdma_rc_profile_interval_ms", "100")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            self.assertNotIn("PS_BENCHMARK_VERIFY_FAILED", r.stdout)
            self.assertNotIn("wait timeout", r.stderr)
            run = result(r.stdout, "run")
            self.assertEqual((run["threads"], run["keys_missing"]), ("8", "0"))
            self.assertGreater(int(run["key_ops"]), 0)
            cl = line_totals((r.stdout + r.stderr).splitlines(), "rdma_rc_client_profile")
            self.assertGreater(cl.get("notify_requests", 0), 0, cl)
            self.assertGreater(cl.get("wait_blocks", 0), 0, cl)
            st = profile_totals(srv, {"client_wakes": 1}, component="rdma_rc_transport_profile")
            self.assertGreater(st.get("client_wakes", 0), 0, st)
            self.assertLessEqual(st["client_wakes"], st["response_status_writes"])

    def test_notify_without_receives_breaks_only_that_clients_qp(self):
        """A client that sets RS_RC_FLAG_NOTIFY without posting receives (busy poll mode posts
        none): the server's WRITE WITH IMM is refused by its NIC (RNR), so it never gets an
        answer and times out, while the server lives on and another client is served throughout
        and after. (Only that client's QP is stalled; the finite rnr_retry of
        rc_fabric_verbs.c then puts it in error rather than retrying forever.)"""
        with server() as srv:
            keys = np.arange(1, 201, dtype=np.uint64)
            with recbench.PSClient(srv.uri, transport_options=client_options()) as ps:
                ps.put(keys, rows_for(keys, 16))
                # the bad descriptor is refused (bad magic) in a response written with the IMM
                junk = bytearray([0xAB]) * 256
                junk[80:84] = (1 << 2).to_bytes(4, "little")  # flags: RS_RC_FLAG_NOTIFY
                with self.assertRaisesRegex(errors.Timeout, "no status"):
                    _ps.rc_debug_inject("rdma", "127.0.0.1", srv.ports[0], bytes(junk),
                                        timeout_ms=3000,
                                        extra=client_options("poll_mode=busy"))
                for _ in range(20):
                    np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
            with recbench.PSClient(srv.uri, transport_options=client_options()) as fresh:
                np.testing.assert_array_equal(fresh.get(keys), rows_for(keys, 16))

    def _one_poller_server(self, *extra: str) -> _ps.Server:
        return _ps.Server(transport="rdma", host="127.0.0.1", port=0, shard=0, num_shards=1,
                          index_type="DRAM_PET_HASH", value_size=64, capacity=1000, num_threads=1,
                          max_keys_per_request=MAX_KEYS,
                          extra=";".join(x for x in (fabric_options(), *extra) if x))

    def _gets_in_turn(self, srv: _ps.Server, options: str) -> dict:
        """One client's 100 GETs of 100 keys in turn (each answer checked); the server's stats
        while it is still attached."""
        keys = np.arange(1, 101, dtype=np.uint64)
        with recbench.PSClient(f"rdma://127.0.0.1:{srv.port}", transport_options=options) as ps:
            ps.put(keys, rows_for(keys, 16))
            for _ in range(100):
                np.testing.assert_array_equal(ps.get(keys), rows_for(keys, 16))
            return srv.stats()

    def test_idle_poller_blocks_on_the_completion_events_of_ringing_lanes(self):
        """An adaptive client offers to ring (RS_RC_CAP_RING) and the server's lanes accept: every
        commit word comes as a WRITE WITH IMM, so the poller, all of whose lanes ring, sleeps on
        their completion channel between requests instead of napping, and each request's
        completion event wakes it. Every answer stays right."""
        srv = self._one_poller_server()
        try:
            st = self._gets_in_turn(srv, client_options())
            self.assertEqual(st["lanes_ringing"], 2, st)  # both QPs of the client
            self.assertGreater(st["poller_blocks"], 0, st)
            self.assertGreater(st["poller_doorbell_wakes"], 0, st)
            self.assertEqual(st["poller_naps"], 0, st)  # it never had a lane it could not sleep on
            self.assertEqual(srv.stats()["lanes_ringing"], 0)  # the client detached
        finally:
            srv.stop()

    def test_get_workers_answer_ringing_lanes(self):
        """With GET workers the poller hands GETs on and still takes each ringing lane's
        completions when it finds a request, so the lane never runs out of receives (a client
        whose request met no receive would stall on RNR) and the poller still sleeps between
        requests."""
        srv = self._one_poller_server("server_get_workers=2")
        try:
            st = self._gets_in_turn(srv, client_options())
            self.assertEqual(st["lanes_ringing"], 2, st)
            self.assertGreater(st["poller_doorbell_wakes"], 0, st)
            self.assertGreaterEqual(st["handled_get"], 100, st)
        finally:
            srv.stop()

    def test_napping_pollers_spin_less_once_idle_stretches_end_in_naps(self):
        """A lane of more than 64 slots does not ring (the server would keep too many receives
        posted), and a poller with a lane that does not ring cannot block (the NIC places a
        request without telling it), so it naps. Once 4 idle stretches in a row ended in naps,
        the next ones spin 1/16 as long and do not yield, as on shm. One client's requests in
        turn leave such gaps under emulation; every answer stays right."""
        srv = self._one_poller_server()
        try:
            many_slots = ("qps_per_client_per_shard=2;slots_per_qp=65;request_slot_bytes=16384;"
                          "response_slot_bytes=16384")
            st = self._gets_in_turn(srv, ";".join(x for x in (fabric_options(), many_slots) if x))
            self.assertEqual((st["lanes_ringing"], st["poller_blocks"]), (0, 0), st)
            self.assertGreater(st["poller_naps"], 0, st)
            self.assertGreater(st["poller_quick_idles"], 0, st)
        finally:
            srv.stop()


class RcProtocolOverVerbsTest(test_rc_shm.RcEndToEndCases, unittest.TestCase):
    """test_rc_shm's end-to-end cases, the same code, over the verbs fabric: two shards with many
    clients, every response mode verified with both indexes (this file's own verify case was the
    same check, so it went), descriptor injection, a killed client. The device is
    the first with an ACTIVE port (the RECBENCH_RDMA_* selection applies to the cases above)."""

    transport = "rdma"
    bench_seconds = "2"  # under emulation a GET batch can take 100 ms and more

    @classmethod
    def setUpClass(cls):
        require_device(None)


if __name__ == "__main__":
    unittest.main()
