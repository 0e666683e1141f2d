"""recbench's gRPC client sends a connection's requests as messages of one
/recstore.PSService/Stream call (transport option stream, default on). Against servers it does
not control — a grpcio server in its own process standing for a third-party or older one — it
must fall back to unary calls when Stream is missing, and when a stream stops answering, the
request must fail with the deadline naming the server; stream=0 keeps to unary calls. Against
recbench's own server both ways give the same rows."""

import importlib.resources
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
from ps_testlib import PSServerProcess, python_env, require_transport, rows_for

import recbench
from recbench import errors

VS = 32
HERE = Path(__file__).resolve().parent


class GrpcioServer:
    """grpcio_ps_server.py in its own process; stopped by closing its stdin."""

    def __init__(self, mode: str):
        self.mode = mode

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory()
        self._proto_cm = importlib.resources.as_file(
            importlib.resources.files("recbench") / "proto" / "ps.proto")
        proto = self._proto_cm.__enter__()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "grpcio_ps_server.py"), "--proto", str(proto),
             "--gen-dir", str(Path(self._tmp.name) / "gen"), "--mode", self.mode,
             "--value-size", str(VS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=self._tmp.name,
            env=python_env())
        line = self.proc.stdout.readline()
        if not line.startswith("port="):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"grpcio server did not start: {line!r}")
        self.port = int(line.strip().split("=")[1])
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self._proto_cm.__exit__(*exc)
            self._tmp.cleanup()


def stats(ps) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in ps.command("stats").split())}


class StreamFallbackTest(unittest.TestCase):
    def setUp(self):
        require_transport(self, "grpc")

    def test_server_without_stream_is_served_unary(self):
        keys = np.arange(1, 201, dtype=np.uint64)
        with GrpcioServer("unary") as srv, \
                recbench.PSClient(f"grpc://127.0.0.1:{srv.port}", value_size=VS,
                                  prefetch_depth=4) as ps:
            ps.put(keys, rows_for(keys, VS // 4, modulus=1000))
            got = ps.get(keys[::-1])
            seen = stats(ps)
        np.testing.assert_array_equal(got, rows_for(keys[::-1], VS // 4, modulus=1000))
        self.assertEqual(seen["streams"], 0)  # UNIMPLEMENTED before any handler ran
        self.assertGreaterEqual(seen["unary"], 2)

    def test_stream_that_stops_answering_times_out_naming_the_server(self):
        keys = np.arange(1, 51, dtype=np.uint64)
        with GrpcioServer("stall") as srv:
            # the stream answered the ping at connect, so this Put goes on it: never answered
            with recbench.PSClient(f"grpc://127.0.0.1:{srv.port}", value_size=VS,
                                   timeout_ms=500) as ps, self.assertRaises(errors.Timeout) as cm:
                ps.put(keys, rows_for(keys, VS // 4, modulus=1000))
            msg = str(cm.exception)
            self.assertIn(f"127.0.0.1:{srv.port}", msg)
            self.assertIn("Put: deadline exceeded (timeout 500 ms)", msg)
            # stream=0: unary calls only, which this server answers
            with recbench.PSClient(f"grpc://127.0.0.1:{srv.port}", value_size=VS,
                                   transport_options="stream=0") as ps:
                ps.put(keys, rows_for(keys, VS // 4, modulus=1000))
                got = ps.get(keys)
                seen = stats(ps)
        np.testing.assert_array_equal(got, rows_for(keys, VS // 4, modulus=1000))
        self.assertEqual(seen["streams"], 1)  # the first client's only
        self.assertGreaterEqual(seen["unary"], 2)


class StreamAgainstRecbenchTest(unittest.TestCase):
    def setUp(self):
        require_transport(self, "grpc")

    def test_stream_and_unary_give_the_same_rows(self):
        keys = np.arange(1, 2001, dtype=np.uint64) * 31
        rows = rows_for(keys, VS // 4, modulus=1000)
        with PSServerProcess("grpc", num_shards=2, value_size=VS,
                             max_keys_per_request=300) as srv:
            got = {}
            for opt in ("stream=1", "stream=0", "streams=4"):
                with recbench.PSClient(srv.uri, prefetch_depth=8, transport_options=opt) as ps:
                    ps.put(keys, rows)
                    ps.update(keys[:10], np.ones((10, VS // 4), dtype=np.float32))
                    got[opt] = ps.get(np.concatenate([keys[::-1], [7, 8]]).astype(np.uint64))
        want = np.concatenate([rows[::-1], np.zeros((2, VS // 4), np.float32)])
        want[-12:-2] += 1.0  # keys[:10] reversed sit just before the two missing keys
        np.testing.assert_array_equal(got["stream=1"], want)
        np.testing.assert_array_equal(got["stream=0"], want)
        np.testing.assert_array_equal(got["streams=4"], want)  # replies from 4 streams, in order
        self.assertEqual(srv.returncode, 0)

    def test_server_with_stream_off(self):
        """stream=0 on the server: Stream answers UNIMPLEMENTED naming the option (seen by a
        grpcio client in its own process), and recbench's client, stream on, is served unary."""
        keys = np.arange(1, 301, dtype=np.uint64)
        with PSServerProcess("grpc", num_shards=1, value_size=VS, max_keys_per_request=100,
                             extra_args=["--transport_options", "stream=0"]) as srv:
            with recbench.PSClient(srv.uri, prefetch_depth=4) as ps:
                ps.put(keys, rows_for(keys, VS // 4, modulus=1000))
                got = ps.get(keys[::-1])
            # a ping naming its method (PSRequest.command = 5, method = 8), raw bytes on the wire
            probe = (
                "import grpc, sys\n"
                f"ch = grpc.insecure_channel('127.0.0.1:{srv.ports[0]}')\n"
                "call = ch.stream_stream('/recstore.PSService/Stream')\n"
                "try:\n"
                "    list(call(iter([b'\\x2a\\x04ping\\x40\\x04']), timeout=30))\n"
                "    print('OK')\n"
                "except grpc.RpcError as e:\n"
                "    print(e.code().name, e.details())\n")
            r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                               timeout=60, env=python_env())
        np.testing.assert_array_equal(got, rows_for(keys[::-1], VS // 4, modulus=1000))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("UNIMPLEMENTED", r.stdout)
        self.assertIn("stream=0", r.stdout)
        self.assertEqual(srv.returncode, 0)

    def test_bad_stream_option_is_refused_by_name(self):
        with PSServerProcess("grpc", num_shards=1, value_size=VS) as srv, \
                self.assertRaises(errors.InvalidArgument) as cm:
            recbench.PSClient(srv.uri, transport_options="stream=maybe")
        self.assertIn("stream", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
