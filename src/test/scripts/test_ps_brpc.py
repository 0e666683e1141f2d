"""The parameter server over brpc (baidu_std): real ps_server processes on loopback, PSClient and
ps_bench against them, malformed baidu_std traffic, shutdown with clients connected."""

import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

import numpy as np
from baidu_std_wire import lfield, read_frame, request_frame, varint
from ps_testlib import (
    NoLeftoverServers,
    PSServerProcess,
    python_env,
    require_transport,
    result_lines,
    rows_for,
    run_ps_bench,
)

import recbench
from recbench import _ps, errors, records

VS = 64
DIM = VS // 4


# ---- a minimal baidu_std encoder for hand-made frames -----------------------------------------

def baidu_frame(service, method, cid, message=b"", attachment=b""):
    return request_frame(cid, method.encode(), message, attachment, service.encode())


def connected_sock(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def server_closes(port, data):
    """Send data on a fresh connection; True when the server then closes it."""
    with connected_sock(port) as s:
        s.sendall(data)
        try:
            return s.recv(64) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


class BrpcServerTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "brpc")

    def test_transports_lists_brpc(self):
        t = _ps.transports()
        self.assertIsNone(t["brpc"])
        for name in ("grpc", "shm", "rdma"):
            self.assertIn(name, t)

    def test_round_trip_one_shard(self):
        with PSServerProcess("brpc", num_shards=1, value_size=VS) as srv, \
                recbench.PSClient(srv.uri) as ps:
                self.assertEqual(ps.value_size, VS)
                keys = np.arange(1, 201, dtype=np.uint64)
                ps.put(keys, rows_for(keys, DIM))
                got = ps.get(keys)
                self.assertEqual(got.shape, (200, DIM))
                np.testing.assert_array_equal(got, rows_for(keys, DIM))
                # a missing key reads as zeros; any buffer works for keys
                got = ps.get(np.array([5, 10_000], dtype=np.uint64).tobytes())
                np.testing.assert_array_equal(got[0], rows_for([5], DIM)[0])
                self.assertFalse(got[1].any())
                ps.update(keys[:3], np.full((3, DIM), 0.5, dtype=np.float32))
                np.testing.assert_array_equal(ps.get(keys[:3]), rows_for(keys[:3], DIM) + 0.5)
                st = ps.stats()
                self.assertEqual(st[0]["keys"], 200)
                self.assertEqual(st[0]["handled_update"], 1)
                self.assertEqual(ps.command("ping"), "pong")
        self.assertEqual(srv.returncode, 0)
        final = srv.final_lines[0]
        self.assertEqual(int(final["handled_put"]), 1)
        self.assertGreaterEqual(int(final["handled_get"]), 3)
        self.assertIn("cpu_user_s", final)

    def test_two_shards_restore_order(self):
        with PSServerProcess("brpc", num_shards=2, value_size=VS) as srv:
            self.assertEqual(len(srv.ports), 2)
            with recbench.PSClient(srv.uri) as ps:
                keys = np.arange(1000, 1500, dtype=np.uint64)
                ps.put(keys, rows_for(keys, DIM))
                shuffled = np.random.default_rng(1).permutation(keys)
                np.testing.assert_array_equal(ps.get(shuffled), rows_for(shuffled, DIM))
                st = ps.stats()
                self.assertEqual(st[0]["keys"] + st[1]["keys"], 500)
                self.assertGreater(st[0]["keys"], 150)
                self.assertGreater(st[1]["keys"], 150)
                ps.clear()
                self.assertFalse(ps.get(keys[:10]).any())

    def test_server_errors_are_exceptions_naming_the_cause(self):
        with PSServerProcess("brpc", value_size=VS, max_keys_per_request=100, capacity=64) as srv:
            with recbench.PSClient(srv.uri) as ps:
                ps.get(np.arange(1, 1002, dtype=np.uint64))  # split at max_keys_per_request
                with self.assertRaises(errors.ServerError) as cm:
                    keys = np.arange(1, 1002, dtype=np.uint64)
                    ps.put(keys, rows_for(keys, DIM))
                self.assertIn("capacity reached", str(cm.exception))
                self.assertIn(f"127.0.0.1:{srv.ports[0]}", str(cm.exception))
                with self.assertRaises(ValueError):
                    ps.put(np.arange(3, dtype=np.uint64), np.zeros((2, DIM), np.float32))
                with self.assertRaises(TypeError):
                    ps.get(np.array([1.5]))
                with self.assertRaises(ValueError):
                    ps.get([-1])
                self.assertEqual(ps.get([]).shape, (0, DIM))
                self.assertEqual(ps.get([1]).shape, (1, DIM))  # still usable
            with self.assertRaises(errors.InvalidArgument) as cm:
                recbench.PSClient(srv.uri, value_size=VS * 2)
            self.assertIn(f"{VS}-byte", str(cm.exception))
            # an unknown method gets an error response, not a dropped connection
            with connected_sock(srv.ports[0]) as s:
                s.sendall(baidu_frame("recstore.PSService", "Delete", 5))
                meta, _ = read_frame(s)
                self.assertIn(b"unknown method", meta)
                s.sendall(baidu_frame("other.Service", "Get", 6))
                meta, _ = read_frame(s)
                self.assertIn(b"unknown service", meta)

    def test_refused_connection_names_the_server(self):
        with PSServerProcess("brpc", value_size=VS) as srv:
            port = srv.ports[0]
        with self.assertRaises(errors.ConnectionFailed) as cm:
            recbench.PSClient(f"brpc://127.0.0.1:{port}")
        self.assertIn(f"127.0.0.1:{port}", str(cm.exception))
        with self.assertRaises(ValueError):
            recbench.PSClient("brpc:/127.0.0.1")

    def test_malformed_traffic_does_not_disturb_other_clients(self):
        with PSServerProcess("brpc", value_size=VS, num_threads=2) as srv:
            port = srv.ports[0]
            keys = np.arange(1, 101, dtype=np.uint64)
            good = recbench.PSClient(srv.uri)
            good.put(keys, rows_for(keys, DIM))
            failures = []
            stop = threading.Event()

            def keep_reading():
                with recbench.PSClient(srv.uri) as c:
                    while not stop.is_set():
                        if not np.array_equal(c.get(keys), rows_for(keys, DIM)):
                            failures.append("wrong rows")

            reader = threading.Thread(target=keep_reading)
            reader.start()
            try:
                staller = connected_sock(port)
                staller.sendall(baidu_frame("recstore.PSService", "Get", 1)[:20])  # half a frame
                cases = {
                    "bad magic": b"GET / HTTP/1.1\r\n\r\n",
                    "huge body": b"PRPC" + struct.pack(">II", 0xFFFFFFF0, 4),
                    "meta > body": b"PRPC" + struct.pack(">II", 4, 9) + b"abcd",
                    "garbage meta": b"PRPC" + struct.pack(">II", 4, 4) + b"\xff\xff\xff\xff",
                }
                for name, data in cases.items():
                    self.assertTrue(server_closes(port, data), name)
                    np.testing.assert_array_equal(good.get(keys), rows_for(keys, DIM))
                # truncated header / truncated meta, then the peer goes away
                for data in (b"PRPC\x00\x00", b"PRPC" + struct.pack(">II", 40, 30) + b"\x0a\x05"):
                    with connected_sock(port) as s:
                        s.sendall(data)
                    np.testing.assert_array_equal(good.get(keys), rows_for(keys, DIM))
                # a well-framed request with a garbage PSRequest: error response, conn stays up
                with connected_sock(port) as s:
                    s.sendall(baidu_frame("recstore.PSService", "Get", 9, message=b"\x1a\x50\x01"))
                    meta, _ = read_frame(s)
                    self.assertIn(b"PSRequest", meta)
                    s.sendall(baidu_frame("recstore.PSService", "Command", 10,
                                          message=lfield(5, b"ping")))
                    meta, body = read_frame(s)
                    self.assertIn(b"pong", body)
                np.testing.assert_array_equal(good.get(keys), rows_for(keys, DIM))
                staller.close()
            finally:
                stop.set()
                reader.join(30)
            self.assertFalse(reader.is_alive())
            self.assertEqual(failures, [])
            good.close()
        self.assertGreaterEqual(int(srv.final_lines[0]["bad_frames"]), 4)

    def test_pipelined_requests_while_the_client_does_not_read(self):
        # 140 GETs of 1000 keys x 512 B (~72 MB of replies) sent before reading anything: the
        # server queues replies, stops reading at its output limit, and resumes as they drain
        n_req, n_keys, vs = 140, 1000, 512
        with PSServerProcess("brpc", value_size=vs, max_keys_per_request=n_keys) as srv:
            keys = np.arange(1, n_keys + 1, dtype=np.uint64).tobytes()
            msg = varint(6 << 3) + varint(n_keys)  # PSRequest{num_keys}
            with connected_sock(srv.ports[0]) as s:
                s.settimeout(60)
                frames = b"".join(baidu_frame("recstore.PSService", "Get", cid, msg, keys)
                                  for cid in range(1, n_req + 1))
                sender = threading.Thread(target=s.sendall, args=(frames,))
                sender.start()
                sender.join()  # the bytes fit in the socket buffers while replies pile up
                for cid in range(1, n_req + 1):
                    meta, body = read_frame(s)
                    self.assertIn(varint(4 << 3) + varint(cid), meta)  # correlation_id, in order
                    self.assertGreaterEqual(len(body), n_keys * vs)

    def _sixteen_clients(self, transport_options: "str | None") -> dict:
        srv = _ps.Server(transport="brpc", host="127.0.0.1", port=0, shard=0, num_shards=1,
                         index_type="DRAM_PET_HASH", value_size=VS, capacity=1000, num_threads=2,
                         max_keys_per_request=500, extra="")
        clients = []
        try:
            keys = np.arange(1, 11, dtype=np.uint64)
            for _ in range(16):  # an answered request proves its connection was adopted
                clients.append(recbench.PSClient(f"brpc://127.0.0.1:{srv.port}",
                                                 transport_options=transport_options))
                clients[-1].put(keys, rows_for(keys, DIM))
            for ps in clients:  # every client is served, wherever its connection went
                np.testing.assert_array_equal(ps.get(keys), rows_for(keys, DIM))
            return srv.stats()
        finally:
            for ps in clients:
                ps.close()
            srv.stop()

    def test_connections_are_spread_over_the_workers(self):
        # Each connection is owned by one worker for its life. They used to stay with the worker
        # that accepted them, and one idle worker took every connect (16 clients on 2 workers:
        # 16/0, and the other worker did nothing); now the worker owning the fewest gets it.
        st = self._sixteen_clients("share=off")  # a socket per client
        self.assertEqual(st["connections_open"], 16, st)
        self.assertEqual((st["worker_connections_max"], st["worker_connections_min"]), (8, 8), st)

    def test_clients_of_a_process_share_a_socket_per_server_thread(self):
        # By default the process's clients of one server share as many sockets as the server has
        # threads (its stats say server_threads=2): one per worker.
        st = self._sixteen_clients(None)
        self.assertEqual(st["connections_open"], 2, st)
        self.assertEqual((st["worker_connections_max"], st["worker_connections_min"]), (1, 1), st)

    def test_shutdown_with_clients_connected(self):
        srv = PSServerProcess("brpc", value_size=VS, num_threads=2).start()
        try:
            clients = [recbench.PSClient(srv.uri) for _ in range(3)]
            clients[0].put([1, 2], np.ones((2, DIM), np.float32))
            staller = connected_sock(srv.ports[0])
            staller.sendall(b"PRPC")
            rc = srv.stop(timeout=5)  # SIGKILL after 5 s would show as -9
            self.assertEqual(rc, 0)
            self.assertEqual(len(srv.final_lines), 1)
            for c in clients:
                with self.assertRaises(errors.ConnectionFailed) as cm:
                    c.get([1, 2])
                self.assertIn(f"127.0.0.1:{srv.ports[0]}", str(cm.exception))
                c.close()
            staller.close()
        finally:
            srv.stop()

    def test_binds_only_the_given_address(self):
        with PSServerProcess("brpc", value_size=VS) as srv:
            # 127.0.0.2 is loopback too, but the server bound 127.0.0.1 only
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.2", srv.ports[0]), timeout=5).close()
            with recbench.PSClient(srv.uri) as ps:
                self.assertEqual(ps.command("ready"), "ready")

    def test_sigint_stops_the_server(self):
        srv = PSServerProcess("brpc", value_size=VS).start()
        try:
            client = recbench.PSClient(srv.uri)
            srv.proc.send_signal(signal.SIGINT)
            srv.proc.wait(10)
            self.assertEqual(srv.stop(), 0)
            # the client's stats, and its socket's first (how many threads serve connections)
            self.assertEqual(int(srv.final_lines[0]["handled_command"]), 2)
            with self.assertRaises(errors.ConnectionFailed):
                client.get([1])
            client.close()
        finally:
            srv.stop()

    def test_timeout_names_the_server(self):
        # a listener that never answers: the handshake completes in the kernel's backlog
        with socket.socket() as lsock:
            lsock.bind(("127.0.0.1", 0))
            lsock.listen(8)
            port = lsock.getsockname()[1]
            with self.assertRaises(errors.Timeout) as cm:
                recbench.PSClient(f"brpc://127.0.0.1:{port}", timeout_ms=300)
            self.assertIn(f"127.0.0.1:{port}", str(cm.exception))
            self.assertIn("300 ms", str(cm.exception))

    def test_server_rejects_bad_flags(self):
        r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--value_size", "30"],
                           capture_output=True, text=True, timeout=30, env=python_env(), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("value_size 30", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            bad = f"{d}/cfg.json"
            Path(bad).write_text('{"cache_ps": {"num_shards": "two"}}')
            r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--config_path", bad],
                               capture_output=True, text=True, timeout=30, env=python_env(), check=False)
            self.assertEqual(r.returncode, 2)
            self.assertIn("cache_ps.num_shards", r.stderr)

    def test_transport_options_are_applied_or_refused(self):
        # max_pending_bytes is the server's per-connection bound on unsent replies
        with PSServerProcess("brpc", value_size=VS,
                             extra_args=["--transport_options", "max_pending_bytes=65536"]) as srv:
            with recbench.PSClient(srv.uri) as ps:
                keys = np.arange(1, 1001, dtype=np.uint64)
                ps.put(keys, rows_for(keys, DIM))
                np.testing.assert_array_equal(ps.get(keys), rows_for(keys, DIM))
            # a server's option given to the client is an error, not silently dropped, as is a
            # bad value of the client's one option
            with self.assertRaises(errors.InvalidArgument) as cm:
                recbench.PSClient(srv.uri, transport_options="max_pending_bytes=65536")
            self.assertIn("brpc client option 'max_pending_bytes=65536' is unknown",
                          str(cm.exception))
            for bad in ("spin_us=fast", "spin_us=1000001"):
                with self.assertRaises(errors.InvalidArgument) as cm:
                    recbench.PSClient(srv.uri, transport_options=bad)
                self.assertIn(bad, str(cm.exception))
            with recbench.PSClient(srv.uri, transport_options="spin_us=0") as ps:
                np.testing.assert_array_equal(ps.get(keys), rows_for(keys, DIM))
        for bad, why in (("window=3", "unknown brpc server option 'window'"),
                         ("max_pending_bytes=12", "max_pending_bytes=12: want an integer")):
            r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport", "brpc",
                                "--host", "127.0.0.1", "--port", "0", "--transport_options", bad],
                               capture_output=True, text=True, timeout=30, env=python_env(),
                               check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(why, r.stderr)

    def test_server_from_recstore_config(self):
        import json

        from recbench.ps_config import build_config
        with tempfile.TemporaryDirectory() as d:
            cfg = build_config("brpc", [("127.0.0.1", 0), ("127.0.0.1", 0)], value_size=32,
                               capacity=5000)
            path = f"{d}/cfg.json"
            Path(path).write_text(json.dumps(cfg))
            srv = PSServerProcess("brpc", num_shards=1, value_size=32)
            srv.args = [sys.executable, "-m", "recbench.ps_server", "--config_path", path,
                        "--local_shard_id", "1"]
            with srv:
                self.assertEqual(srv.ready_lines[0]["shard"], "1")
                self.assertEqual(srv.ready_lines[0]["value_size"], "32")
                self.assertEqual(srv.ready_lines[0]["num_shards"], "2")


class PsBenchBrpcTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "brpc")

    def test_verify_two_shards_with_misses(self):
        with PSServerProcess("brpc", num_shards=2, value_size=VS) as srv, \
                tempfile.TemporaryDirectory() as d:
            r = run_ps_bench(srv.bench_args(d) + [
                "--record_count", "3000", "--batch_keys", "100", "--thread_num", "2",
                "--prefetch_depth", "4", "--running_seconds", "0.5", "--warmup_seconds", "0.1",
                "--fetch_key_space", "4000", "--verify_deterministic_values=true",
                "--no_barrier", "--transaction_profile"])
            self.assertEqual(r.returncode, 0, r.stderr)
            res = result_lines(r.stdout)
            self.assertEqual(res["load"]["key_ops"], "3000")
            run = res["run"]
            for key in ("transport", "mode", "distribution", "zipfian_alpha", "threads",
                        "batch_size", "records", "runtime_s", "batches", "key_ops",
                        "throughput_batches_sec", "throughput_keys_sec", "mean_us", "p50_us",
                        "p95_us", "p99_us", "p999_us", "max_us", "cpu_user_s", "cpu_sys_s",
                        "payload_gbps"):
                self.assertIn(key, run)
            self.assertGreater(int(run["key_ops"]), 0)
            self.assertEqual(run["keys_missing"], "0")
            self.assertLessEqual(float(run["p50_us"]), float(run["p99_us"]))
            # the slowest and the fastest of the 2 threads bracket their mean
            lo, hi = int(run["thread_batches_min"]), int(run["thread_batches_max"])
            self.assertTrue(0 < lo <= int(run["batches"]) / 2 <= hi, run)
            self.assertEqual(lo + hi, int(run["batches"]), run)
            # every wait of the threads for an answer ended spun or blocked, and is counted
            waits = {k: int(run[k]) for k in ("wait_spun", "wait_blocked", "wait_quick",
                                                "wait_unspun")}
            self.assertGreater(waits["wait_spun"] + waits["wait_blocked"], 0, run)
            self.assertLessEqual(waits["wait_quick"] + waits["wait_unspun"],
                                 waits["wait_spun"] + waits["wait_blocked"], run)
            self.assertIn("PS_BENCHMARK_LOADED", r.stdout)
            prof = [line for line in r.stdout.splitlines()
                    if line.startswith("PS_BENCHMARK_PROFILE phase=run")]
            self.assertEqual(len(prof), 1)
            self.assertGreater(float(records.parse_kv(prof[0])["wait_plus_result_avg_ns"]), 0)

    def test_barrier_waits_for_go(self):
        with PSServerProcess("brpc", value_size=VS) as srv, tempfile.TemporaryDirectory() as d:
            p = subprocess.Popen([sys.executable, "-m", "recbench.ps_bench"] + srv.bench_args(d) + [
                "--record_count", "500", "--batch_keys", "50", "--running_seconds", "0.2",
                "--mode", "mixed", "--read_ratio", "50"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=python_env())
            try:
                seen = []
                for line in p.stdout:
                    seen.append(line)
                    if line.startswith("PS_BENCHMARK_LOADED"):
                        break
                self.assertTrue(any(x.startswith("PS_BENCHMARK_RESULT phase=load") for x in seen))
                self.assertIsNone(p.poll())  # waiting for go, not running
                p.stdin.write("go\n")
                p.stdin.flush()
                out, err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.assertEqual(p.returncode, 0, err)
            run = result_lines(out)["run"]
            self.assertEqual(run["mode"], "mixed")

    def test_verify_reports_first_bad_key(self):
        with PSServerProcess("brpc", value_size=VS) as srv, tempfile.TemporaryDirectory() as d:
            args = srv.bench_args(d) + ["--record_count", "50", "--batch_keys", "10",
                                        "--running_seconds", "0.2", "--no_barrier",
                                        "--verify_deterministic_values"]
            r = run_ps_bench(args)
            self.assertEqual(r.returncode, 0, r.stderr)
            with recbench.PSClient(srv.uri) as ps:
                ps.put([7], np.full((1, DIM), 3.0, np.float32))
            r = run_ps_bench(args + ["--skip_load"])
            self.assertEqual(r.returncode, 1)
            self.assertIn("first_bad_key=7", r.stdout)
            self.assertIn("key 7", r.stderr)

    def test_refused_server_fails_cleanly(self):
        with PSServerProcess("brpc", value_size=VS) as srv:
            port = srv.ports[0]
        r = run_ps_bench(["--port", str(port), "--record_count", "10", "--running_seconds",
                          "0.1", "--no_barrier", "--value_size", str(VS)])
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"127.0.0.1:{port}", r.stderr)


if __name__ == "__main__":
    unittest.main()
