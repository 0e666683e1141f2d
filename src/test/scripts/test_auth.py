"""Access control through real servers: ps_server --auth_token_file on brpc, grpc and shm (the RC
control plane's attach request); a client
without the token, with a wrong one and with the right one (PSClient and ps_bench); refusals are
authentication errors and are counted; the token appears in no log line, no result line and no
process command line."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from baidu_std_wire import frame, lfield, rpc_meta, vfield
from ps_testlib import PSServerProcess, python_env, require_transport

import recbench
from recbench import errors

TOKEN = "s3cret-Token-7f0c2a91"


def read_frame(s: socket.socket) -> bytes:
    head = b""
    while len(head) < 12:
        chunk = s.recv(12 - len(head))
        if not chunk:
            raise AssertionError("connection closed before a reply")
        head += chunk
    body_len = struct.unpack(">I", head[4:8])[0]
    body = b""
    while len(body) < body_len:
        body += s.recv(body_len - len(body))
    return body


class AuthToken(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_auth_test_")
        self.good = os.path.join(self.tmp, "token")
        self.bad = os.path.join(self.tmp, "wrong")
        for path, tok in ((self.good, TOKEN + "\n"), (self.bad, "not-the-token\n")):
            with open(path, "w") as f:
                f.write(tok)
            os.chmod(path, 0o600)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _transport(self, transport: str):
        require_transport(self, transport)
        srv = PSServerProcess(transport, value_size=64,
                              extra_args=["--auth_token_file", self.good]).start()
        try:
            with open(f"/proc/{srv.proc.pid}/cmdline", "rb") as f:
                self.assertNotIn(TOKEN.encode(), f.read())
            for token_file, words in ((None, "requires a token"), (self.bad, "wrong token")):
                with self.assertRaises(errors.RecbenchError) as cm:
                    recbench.PSClient(srv.uri, auth_token_file=token_file)
                self.assertIn("authentication failed", str(cm.exception))
                self.assertIn(words, str(cm.exception))
                self.assertNotIn(TOKEN, str(cm.exception))
            with recbench.PSClient(srv.uri, auth_token_file=self.good) as ps:
                keys = np.arange(1, 101, dtype=np.uint64)
                rows = np.ones((100, 16), np.float32)
                ps.put(keys, rows)
                np.testing.assert_array_equal(ps.get(keys), rows)
            bench = [sys.executable, "-m", "recbench.ps_bench", "--transport", transport,
                     "--host", "127.0.0.1", "--port", str(srv.ports[0]), "--value_size", "64",
                     "--record_count", "1000", "--batch_keys", "100", "--running_seconds", "0.3",
                     "--no_barrier"]
            ok = subprocess.run(bench + ["--auth_token_file", self.good], capture_output=True,
                                text=True, env=python_env(), timeout=120)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("PS_BENCHMARK_RESULT phase=run", ok.stdout)
            refused = subprocess.run(bench, capture_output=True, text=True, env=python_env(),
                                     timeout=120)
            self.assertNotEqual(refused.returncode, 0)
            self.assertIn("authentication failed", refused.stdout + refused.stderr)
            for out in (ok.stdout, ok.stderr, refused.stdout, refused.stderr):
                self.assertNotIn(TOKEN, out)
            if transport in ("brpc", "grpc"):  # RecStore's wire on the same port: same door
                rs = bench + [
                    "--wire", "recstore"]
                ok = subprocess.run(rs + ["--auth_token_file", self.good], capture_output=True,
                                    text=True, env=python_env(), timeout=120)
                self.assertEqual(ok.returncode, 0, ok.stderr)
                refused = subprocess.run(rs, capture_output=True, text=True, env=python_env(),
                                         timeout=120)
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn("authentication failed", refused.stdout + refused.stderr)
        finally:
            srv.stop()
        final = srv.final_lines[0]
        self.assertGreaterEqual(int(final["auth_failures"]), 3)
        for line in srv.stdout_lines + srv.stderr_lines:
            self.assertNotIn(TOKEN, line)

    def test_brpc(self):
        self._transport("brpc")

    def test_grpc(self):
        self._transport("grpc")

    def test_brpc_closes_after_repeated_failures(self):
        """Raw baidu_std: each refused request is answered with ERPCAUTH (1004); the third closes
        the connection. The right token in RpcMeta.authentication_data is served."""
        srv = PSServerProcess("brpc", value_size=64,
                              extra_args=["--auth_token_file", self.good]).start()
        try:
            def req(cid, token):
                meta = rpc_meta(cid, method=b"Command") + (lfield(7, token) if token else b"")
                return frame(meta, lfield(5, b"ping"))

            with socket.create_connection(("127.0.0.1", srv.ports[0]), timeout=10) as s:
                s.sendall(req(1, TOKEN.encode()))
                self.assertNotIn(vfield(1, 1004), read_frame(s))
                for cid in (2, 3, 4):
                    s.sendall(req(cid, b"wrong" if cid % 2 else None))
                    self.assertIn(vfield(1, 1004), read_frame(s))
                self.assertEqual(s.recv(1), b"")  # closed after the third refusal
        finally:
            srv.stop()
        self.assertEqual(int(srv.final_lines[0]["auth_failures"]), 3)

    def test_grpc_health_needs_no_token_reflection_does(self):
        """With a token, grpc.health.v1.Health (Check and Watch) answers without one (a Kubernetes
        gRPC probe cannot send metadata) and is not counted as a refusal; reflection and the PS
        services still refuse a call without the token."""
        require_transport(self, "grpc")
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection_pb2 as rpb

        srv = PSServerProcess("grpc", value_size=64,
                              extra_args=["--auth_token_file", self.good]).start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{srv.ports[0]}") as ch:
                health = health_pb2_grpc.HealthStub(ch)
                serving = health_pb2.HealthCheckResponse.SERVING
                for md in (None, [("authorization", "Bearer wrong")]):
                    resp = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10,
                                        metadata=md)
                    self.assertEqual(resp.status, serving)
                watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
                self.assertEqual(next(watch).status, serving)
                watch.cancel()
                refl = ch.stream_stream(
                    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                    request_serializer=rpb.ServerReflectionRequest.SerializeToString,
                    response_deserializer=rpb.ServerReflectionResponse.FromString)
                for md in (None, [("authorization", f"Bearer {TOKEN}")]):
                    call = refl(iter([rpb.ServerReflectionRequest(list_services="")]),
                                timeout=10, metadata=md)
                    if md is None:
                        with self.assertRaises(grpc.RpcError) as cm:
                            list(call)
                        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                        self.assertIn("requires a token", cm.exception.details())
                    else:
                        reply = next(iter(call))
                        names = {s.name for s in reply.list_services_response.service}
                        self.assertIn("grpc.health.v1.Health", names)
                ps_command = ch.unary_unary("/recstore.PSService/Command")
                with self.assertRaises(grpc.RpcError) as cm:
                    ps_command(b"", timeout=10)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        finally:
            srv.stop()
        self.assertEqual(int(srv.final_lines[0]["auth_failures"]), 2)  # reflection + Command

    def test_shm(self):
        self._transport("shm")

    def test_bad_token_file_named(self):
        empty = os.path.join(self.tmp, "empty")
        open(empty, "w").close()
        for path, words in ((empty, "must be 1..256 bytes"),
                            (os.path.join(self.tmp, "missing"), "No such file")):
            p = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--port", "0",
                                "--auth_token_file", path], capture_output=True, text=True,
                               env=python_env(), timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(path, p.stderr)
            self.assertIn(words, p.stderr)


if __name__ == "__main__":
    unittest.main()
