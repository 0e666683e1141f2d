"""The parameter server over gRPC: a real `python -m recbench.ps_server --transport=grpc` on
loopback, called (1) by a third-party grpcio client generated at test time from the proto shipped
in the package, running in its own process, and (2) by recbench.PSClient("grpc://...") with one
and two shards. Rows are checked byte for byte; errors must name the server and the cause."""

import importlib.resources
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
from ps_testlib import ROOT, PSServerProcess, python_env, require_transport, rows_for

import recbench
from recbench import errors

VS = 64
DIM = VS // 4
HERE = Path(__file__).resolve().parent


# ---- a minimal HTTP/2 client, enough to open a gRPC call and never take its reply -------------

def h2_frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") \
        + payload


def hpack_literal(headers) -> bytes:
    """HPACK 'literal header field without indexing, new name', no Huffman (names/values < 127)."""
    return b"".join(b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v for n, v in headers)


def read_frame(sock: socket.socket):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return buf
    head = exact(9)
    length = int.from_bytes(head[:3], "big")
    return head[3], head[4], exact(length) if length else b""


def open_stalled_get(port: int, keys: np.ndarray) -> socket.socket:
    """A Get whose reply can never be sent: the client announces a zero flow-control window
    (SETTINGS_INITIAL_WINDOW_SIZE = 0) and never opens it."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(0x4, 0, 0, b"\x00\x04" + bytes(4)))
    while True:  # acknowledge the server's SETTINGS like a well-behaved peer
        ftype, flags, _ = read_frame(s)
        if ftype == 0x4 and not flags & 0x1:
            s.sendall(h2_frame(0x4, 0x1, 0))
            break
    raw = keys.astype("<u8").tobytes()
    msg = b"\x1a" + bytes([len(raw)]) + raw  # PSRequest.keys (field 3), len < 128
    headers = [(b":method", b"POST"), (b":scheme", b"http"),
               (b":path", b"/recstore.PSService/Get"), (b":authority", b"127.0.0.1"),
               (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    s.sendall(h2_frame(0x1, 0x4, 1, hpack_literal(headers))
              + h2_frame(0x0, 0x1, 1, b"\x00" + len(msg).to_bytes(4, "big") + msg))
    return s


class GrpcioClientTest(unittest.TestCase):
    """Any gRPC client can call the server: grpcio stubs generated from recbench/proto/ps.proto."""

    def setUp(self):
        require_transport(self, "grpc")

    def test_grpcio_put_then_get_rows_byte_for_byte(self):
        keys = np.random.default_rng(7).integers(1, 2**62, size=300, dtype=np.uint64)
        rows = rows_for(keys, DIM, modulus=100003)
        with tempfile.TemporaryDirectory() as tmp, \
                importlib.resources.as_file(
                    importlib.resources.files("recbench") / "proto" / "ps.proto") as proto, \
                PSServerProcess("grpc", num_shards=1, value_size=VS) as srv:
            tmp = Path(tmp)
            (tmp / "keys.bin").write_bytes(keys.astype("<u8").tobytes())
            (tmp / "rows.bin").write_bytes(rows.tobytes())
            r = subprocess.run(
                [sys.executable, str(HERE / "grpcio_ps_client.py"), "--proto", str(proto),
                 "--gen-dir", str(tmp / "gen"), "--target", f"127.0.0.1:{srv.ports[0]}",
                 "--keys", str(tmp / "keys.bin"), "--rows", str(tmp / "rows.bin"),
                 "--value-size", str(VS), "--got", str(tmp / "got.bin")],
                capture_output=True, text=True, timeout=120, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            seen = json.loads(r.stdout.strip().splitlines()[-1])
            got = (tmp / "got.bin").read_bytes()
            got_stream = (tmp / "got.stream").read_bytes()
        self.assertEqual(seen["ping_status"], 0)
        self.assertEqual(seen["put_status"], 0, seen["put_error"])
        self.assertEqual(seen["get_status"], 0)
        self.assertEqual(seen["get_value_size"], VS)
        self.assertEqual(seen["get_num_found"], len(keys))
        self.assertEqual(got, rows.tobytes())
        # bad input gets a PS error status naming the problem, not a dropped connection
        self.assertEqual(seen["bad_put_status"], 1)
        self.assertIn("row", seen["bad_put_error"])
        self.assertEqual(seen["odd_keys_status"], 1)
        self.assertTrue(seen["odd_keys_error"])
        self.assertEqual(seen["unknown_code"], "UNIMPLEMENTED")
        self.assertIn("/recstore.PSService/Delete", seen["unknown_details"])
        # Stream: one reply per request, in order; a bad request fails alone, the stream goes on
        st = seen["stream"]
        self.assertEqual(len(st), 7, st)
        self.assertEqual((st[0]["status"], st[0]["reply"]), (0, "pong"))
        self.assertEqual(st[1]["status"], 0, st[1]["error"])
        self.assertEqual((st[2]["status"], st[2]["num_found"]), (0, len(keys)))
        self.assertEqual(got_stream, rows.tobytes())
        self.assertEqual(st[3]["status"], 1)
        self.assertIn("needs its method (field 8", st[3]["error"])
        self.assertEqual(st[4]["status"], 1)
        self.assertIn("method 9 is not", st[4]["error"])
        self.assertEqual(st[5]["status"], 1)
        self.assertIn("row", st[5]["error"])
        self.assertEqual(st[6]["status"], 0)
        self.assertIn("handled_get=", st[6]["reply"])
        self.assertEqual(srv.returncode, 0)


class GrpcPSClientTest(unittest.TestCase):
    """recbench.PSClient over grpc://, one and two shards."""

    def setUp(self):
        require_transport(self, "grpc")

    def _round_trip(self, num_shards):
        keys = np.arange(1, 3001, dtype=np.uint64) * 7919
        rows = rows_for(keys, DIM, modulus=100003)
        with PSServerProcess("grpc", num_shards=num_shards, value_size=VS,
                             max_keys_per_request=5000) as srv:
            self.assertTrue(srv.uri.startswith("grpc://"))
            with recbench.PSClient(srv.uri, prefetch_depth=4) as ps:
                self.assertEqual(ps.value_size, VS)  # asked from the server
                self.assertEqual(ps.num_shards, num_shards)
                ps.put(keys, rows)
                # a batch mixing shards, in a shuffled order, plus keys never written
                order = np.random.default_rng(1).permutation(len(keys))
                missing = np.array([5, 6, 7], dtype=np.uint64)
                ask = np.concatenate([keys[order], missing])
                got = ps.get(ask)
                self.assertEqual(got.shape, (len(ask), DIM))
                self.assertEqual(got[:len(keys)].tobytes(), rows[order].tobytes())
                self.assertFalse(got[len(keys):].any())
                deltas = np.full((len(keys), DIM), 0.5, dtype=np.float32)
                ps.update(keys, deltas)
                np.testing.assert_array_equal(ps.get(keys), rows + deltas)
                stats = ps.stats()
                self.assertEqual(len(stats), num_shards)
                self.assertEqual(sum(s["keys"] for s in stats), len(keys))
        self.assertEqual(srv.returncode, 0)
        final = srv.final_lines
        self.assertEqual(len(final), num_shards)
        self.assertEqual(sum(int(f["handled_put"]) for f in final), num_shards)

    def test_one_shard(self):
        self._round_trip(1)

    def test_two_shards(self):
        self._round_trip(2)

    def test_garbage_connections_do_not_hurt_other_clients(self):
        keys = np.arange(1, 201, dtype=np.uint64)
        with PSServerProcess("grpc", num_shards=1, value_size=VS) as srv, \
                recbench.PSClient(srv.uri) as ps:
            ps.put(keys, rows_for(keys, DIM, modulus=100003))
            # not HTTP/2 at all; an HTTP/2 preface then a frame header claiming 16 MB; a
            # connection that sends half a preface and stalls (left open while we keep working)
            stalled = socket.create_connection(("127.0.0.1", srv.ports[0]))
            stalled.sendall(b"PRI * HTTP/2.0\r\n")
            for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 64,
                         b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff\xff\xff\x00\x00"
                         + b"\x00\x00\x00\x01" + b"\x00" * 100):
                with socket.create_connection(("127.0.0.1", srv.ports[0])) as s:
                    s.sendall(junk)
                    s.settimeout(10)
                    try:
                        while s.recv(65536):
                            pass
                    except (ConnectionResetError, socket.timeout):
                        pass
                self.assertEqual(ps.get(keys).tobytes(), rows_for(keys, DIM, modulus=100003).tobytes())
            stalled.close()
        self.assertEqual(srv.returncode, 0)

    def test_transport_options_reach_both_ends(self):
        keys = np.arange(1, 2001, dtype=np.uint64)
        with PSServerProcess("grpc", num_shards=1, value_size=VS, max_keys_per_request=5000,
                             extra_args=["--transport_options",
                                         "calls_per_method=2;max_frame_size=1048576"]) as srv:
            with recbench.PSClient(srv.uri, transport_options="max_frame_size=65536;"
                                   "malloc_tuning=1", prefetch_depth=2) as ps:
                ps.put(keys, rows_for(keys, DIM, modulus=100003))
                self.assertEqual(ps.get(keys).tobytes(), rows_for(keys, DIM, modulus=100003).tobytes())
            with self.assertRaises(errors.InvalidArgument) as cm:
                recbench.PSClient(srv.uri, transport_options="window=9")
            self.assertIn("window", str(cm.exception))
        with self.assertRaises(RuntimeError) as cm:
            PSServerProcess("grpc", num_shards=1, value_size=VS,
                            extra_args=["--transport_options", "calls_per_method=0"]).start()
        self.assertIn("calls_per_method", str(cm.exception))

    def test_poll_strategy_sets_the_process_poller_once(self):
        """poll_strategy reaches gRPC core (it logs the poller it starts with at DEBUG level), on
        the server and on the client, and a second poller asked for in the same process is
        refused by name, not ignored."""
        with mock.patch.dict(os.environ, {"GRPC_VERBOSITY": "DEBUG"}), \
                PSServerProcess("grpc", num_shards=1, value_size=VS, extra_args=[
                    "--num_threads", "2", "--transport_options", "poll_strategy=poll"]) as srv:
            srv.wait_stderr("Using polling engine: poll")
            client = textwrap.dedent(f"""
                import numpy as np, recbench
                from recbench import errors
                with recbench.PSClient({srv.uri!r}, transport_options="poll_strategy=epoll1") as ps:
                    keys = np.arange(1, 101, dtype=np.uint64)
                    ps.put(keys, np.ones((100, {DIM}), np.float32))
                    assert ps.get(keys).sum() == 100 * {DIM}
                try:
                    recbench.PSClient({srv.uri!r}, transport_options="poll_strategy=poll")
                except errors.InvalidArgument as e:
                    print("refused:", e)
                """)
            r = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True,
                               timeout=120, env=python_env(), cwd=str(ROOT))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Using polling engine: epoll1", r.stderr)
        self.assertRegex(r.stdout, r"refused: .*poll_strategy=poll: gRPC already runs in this "
                                   r"process with poller 'epoll1'")
        # without the option the transport picks poll (gRPC's own default would be epoll1)
        env = {k: v for k, v in os.environ.items() if k != "GRPC_POLL_STRATEGY"}
        with mock.patch.dict(os.environ, dict(env, GRPC_VERBOSITY="DEBUG"), clear=True), \
                PSServerProcess("grpc", num_shards=1, value_size=VS) as srv:
            srv.wait_stderr("Using polling engine: poll")
        with self.assertRaises(RuntimeError) as cm:
            PSServerProcess("grpc", num_shards=1, value_size=VS,
                            extra_args=["--transport_options", "poll_strategy=epollex"]).start()
        self.assertIn("poll_strategy=epollex: expected epoll1 or poll", str(cm.exception))

    def test_client_that_never_takes_its_reply_does_not_block_others(self):
        # one worker with one Get slot: the stalled reply holds it until reply_timeout_ms
        # cancels it; then the well-behaved client's Get (queued by gRPC meanwhile) is served
        keys = np.arange(1, 11, dtype=np.uint64)
        with PSServerProcess("grpc", num_shards=1, value_size=VS,
                             extra_args=["--transport_options",
                                         "calls_per_method=1;reply_timeout_ms=300"]) as srv, \
                recbench.PSClient(srv.uri, value_size=VS, timeout_ms=20000) as ps:
            ps.put(keys, rows_for(keys, DIM, modulus=100003))
            stalled = open_stalled_get(srv.ports[0], keys)
            try:
                # the server cancels the stalled call: it resets the stream (RST_STREAM)
                while True:
                    ftype, _, _ = read_frame(stalled)
                    if ftype == 0x3:
                        break
                self.assertEqual(ps.get(keys).tobytes(), rows_for(keys, DIM, modulus=100003).tobytes())
            finally:
                stalled.close()
        self.assertEqual(srv.returncode, 0)

    def test_refused_names_server(self):
        with PSServerProcess("grpc", num_shards=1, value_size=VS) as srv:
            port = srv.ports[0]
        with self.assertRaises(errors.ConnectionFailed) as cm:
            recbench.PSClient(f"grpc://127.0.0.1:{port}", value_size=VS)
        self.assertIn(f"127.0.0.1:{port}", str(cm.exception))
        self.assertIn("refused", str(cm.exception))

    def test_server_stopped_under_a_connected_client(self):
        srv = PSServerProcess("grpc", num_shards=1, value_size=VS).start()
        try:
            ps = recbench.PSClient(srv.uri, value_size=VS)
            keys = np.arange(1, 101, dtype=np.uint64)
            ps.put(keys, rows_for(keys, DIM, modulus=100003))
            self.assertEqual(srv.stop(), 0)
            with self.assertRaises(errors.ConnectionFailed) as cm:
                ps.get(keys)
            self.assertIn(f"127.0.0.1:{srv.ports[0]}", str(cm.exception))
            ps.close()
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
