"""recbench's client on RecStore's wire: recbench.PSClient("recstore+grpc://...") against
independent RecStore-semantics servers written in Python with grpcio (recstore_fixture_server.py),
and against recbench's own gRPC server. Keys route by CityHash64 of their 8 little-endian bytes
(checked against the published shard table for keys 1..20), requests carry at most 500 keys,
shards are asked in parallel and rows come back in the caller's order, misses read as zero rows,
UPDATE is RecStore's UpdateParameter (SGD on the server) for the table "default"."""

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

import numpy as np
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
from recbench import errors, ps_config

HERE = Path(__file__).resolve().parent
VS = 32
DIM = VS // 4
# CityHash64 shard of keys 1..20 over 2 shards (docs/recstore-wire.md, from the published hash)
SHARD_OF_1_TO_20 = [1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0]


class Fixture:
    """One recstore_fixture_server.py process; calls() returns the calls it logged so far."""

    def __init__(self, shard):
        env = python_env()
        env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "recstore_fixture_server.py"), "--shard", str(shard)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        line = self.lines.get(timeout=60)
        if line is None or "listening on" not in line:
            self.stop()
            raise RuntimeError(f"fixture did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.rsplit(":", 1)[1])
        self.log: list[dict] = []

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def calls(self):
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return self.log
            if line:
                self.log.append(json.loads(line))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


class RecStoreClientFixtureTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "grpc")
        cls.fixtures = [Fixture(0), Fixture(1)]
        cls.uri = "recstore+grpc://" + ",".join(f"127.0.0.1:{f.port}" for f in cls.fixtures)

    @classmethod
    def tearDownClass(cls):
        for f in cls.fixtures:
            f.stop()

    def setUp(self):
        with recbench.PSClient(self.uri, value_size=VS) as c:
            c.clear()  # CLEAR_PS on every shard
        for f in self.fixtures:
            f.calls()
            f.log.clear()

    def test_routing_matches_cityhash_and_order_is_restored(self):
        keys = np.arange(1, 21, dtype=np.uint64)
        with recbench.PSClient(self.uri, value_size=VS) as c:
            c.put(keys, rows_for(keys, DIM, modulus=1013))
            got = c.get(keys[::-1])
        np.testing.assert_array_equal(got, rows_for(keys[::-1], DIM, modulus=1013))
        for shard, f in enumerate(self.fixtures):
            put_keys = [k for call in f.calls() if call["method"] == "PutParameter"
                        for k in call["keys"]]
            want = [k for k, s in zip(range(1, 21), SHARD_OF_1_TO_20) if s == shard]
            self.assertEqual(put_keys, want, f"shard {shard}")

    def test_chunks_of_500_misses_and_found(self):
        keys = np.arange(10**6, 10**6 + 2600, dtype=np.uint64)
        with recbench.PSClient(self.uri, value_size=VS) as c:
            c.put(keys[:2000], rows_for(keys[:2000], DIM, modulus=1013))
            got = c.get(keys)
        np.testing.assert_array_equal(got[:2000], rows_for(keys[:2000], DIM, modulus=1013))
        np.testing.assert_array_equal(got[2000:], np.zeros((600, DIM), np.float32))
        for f in self.fixtures:
            sizes = [len(call["keys"]) for call in f.calls() if call["keys"]]
            self.assertTrue(sizes)
            self.assertLessEqual(max(sizes), 500)
            self.assertIn(500, sizes)  # 2600 keys over 2 shards: full chunks were cut

    def test_rows_of_other_dims_and_malformed_blocks(self):
        """Rows stored at other dims (through grpcio, as any RecStore client may) read cut or
        zero-padded; the all-found reply whose last dim disagrees with its offsets, and a block
        whose end[0] is short, are refused naming the byte offset; the servers keep serving."""
        import grpc
        from recstore_fixture_server import BAD_DIM_KEY, BAD_END_KEY
        from recstore_wire_py import encode_block, stubs

        pb, pb_grpc = stubs("recstore_ps")
        wide = np.arange(DIM + 4, dtype=np.float32) + 0.5
        narrow = np.array([7.0, 8.0, 9.0], np.float32)
        for f in self.fixtures:  # key 3 lives on shard 0, key 2 on shard 1 (SHARD_OF_1_TO_20)
            with grpc.insecure_channel(f"127.0.0.1:{f.port}") as ch:
                pb_grpc.ParameterServiceStub(ch).PutParameter(pb.PutParameterRequest(
                    parameter_value=encode_block([(3, wide), (2, narrow)])))
        keys = np.arange(1, 21, dtype=np.uint64)
        with recbench.PSClient(self.uri, value_size=VS) as c:
            c.put(keys[3:], rows_for(keys[3:], DIM, modulus=1013))  # keys 4..20 at the row's dim
            got = c.get(np.array([3, 2, 1] + list(range(4, 21)), dtype=np.uint64))
            np.testing.assert_array_equal(got[0], wide[:DIM])
            np.testing.assert_array_equal(got[1], np.r_[narrow, np.zeros(DIM - 3, np.float32)])
            np.testing.assert_array_equal(got[2], np.zeros(DIM, np.float32))  # never stored
            np.testing.assert_array_equal(got[3:], rows_for(keys[3:], DIM, modulus=1013))
        for bad, where in ((BAD_DIM_KEY, "item 2 at byte offset 104 has dim 7 but spans 44"),
                           (BAD_END_KEY, "spans 43 bytes (end[0] at byte offset 4)")):
            ks = np.array([bad] * 3, dtype=np.uint64)  # one shard: found rows at the dim
            with recbench.PSClient(self.uri, value_size=VS) as c:
                c.put(ks[:1], np.ones((1, DIM), np.float32))
                with self.assertRaises(errors.ProtocolError) as cm:
                    c.get(ks)  # the connection is then out of step: a new client is needed
            self.assertIn(where, str(cm.exception))
        with recbench.PSClient(self.uri, value_size=VS) as c:
            np.testing.assert_array_equal(c.get(keys[3:]), rows_for(keys[3:], DIM, modulus=1013))

    def test_update_is_recstores_sgd_on_table_default(self):
        keys = np.array([5, 6, 7], dtype=np.uint64)
        g = np.ones((3, DIM), np.float32)
        with recbench.PSClient(self.uri, value_size=VS) as c:
            with self.assertRaises(errors.RecbenchError) as cm:
                c.update(keys, g)  # no table "default" yet: success=false
            self.assertIn("success=false", str(cm.exception))
            import grpc
            from recstore_wire_py import stubs
            pb, pb_grpc = stubs("recstore_ps")
            for f in self.fixtures:
                with grpc.insecure_channel(f"127.0.0.1:{f.port}") as ch:
                    pb_grpc.ParameterServiceStub(ch).InitEmbeddingTable(
                        pb.InitEmbeddingTableRequest(table_name="default",
                                                     config_payload=b'{"embedding_dim":8}'))
            c.put(keys[:1], rows_for(keys[:1], DIM, modulus=1013))
            c.update(keys, g)
            got = c.get(keys)
        np.testing.assert_array_equal(got[0], rows_for(keys[:1], DIM, modulus=1013)[0] - np.float32(0.01) * g[0])
        np.testing.assert_array_equal(got[1:], -(np.float32(0.01) * g[1:]))

    def test_ps_bench_wire_recstore_against_the_fixture(self):
        args = ["--transport", "grpc", "--wire", "recstore", "--record_count", "3000", "--value_size", str(VS), "--batch_keys",
                "500", "--prefetch_depth", "4", "--running_seconds", "0.5", "--no_barrier",
                "--verify_deterministic_values"]
        # the fixtures listen on arbitrary ports: a RecStore config names them
        cfg = {"cache_ps": {"ps_type": "GRPC", "num_shards": 2, "servers": [
            {"host": "127.0.0.1", "port": f.port, "shard": i}
            for i, f in enumerate(self.fixtures)]}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as t:
            json.dump(cfg, t)
        try:
            r = run_ps_bench(args + ["--config_path", t.name], timeout=120)
        finally:
            os.unlink(t.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        run = result_lines(r.stdout)["run"]
        self.assertEqual(run["wire"], "recstore")
        self.assertEqual(run["transport"], "grpc")
        self.assertGreater(int(run["key_ops"]), 0)
        self.assertEqual(run["keys_missing"], "0")
        sizes = [len(c["keys"]) for f in self.fixtures for c in f.calls()
                 if c["method"] == "GetParameter"]
        self.assertTrue(sizes and max(sizes) <= 500)

    def test_simple_mod_routing_from_the_keyword_and_from_a_config(self):
        keys = np.arange(1, 41, dtype=np.uint64)
        with recbench.PSClient(self.uri, value_size=VS, hash_method="simple_mod") as c:
            self.assertEqual(c.hash_method, "simple_mod")
            c.put(keys, rows_for(keys, DIM, modulus=1013))
            np.testing.assert_array_equal(c.get(keys[::-1]), rows_for(keys[::-1], DIM, modulus=1013))
        for shard, f in enumerate(self.fixtures):
            put_keys = [k for call in f.calls() if call["method"] == "PutParameter"
                        for k in call["keys"]]
            self.assertEqual(put_keys, [k for k in range(1, 41) if k % 2 == shard])
            f.log.clear()
        # ps_bench reads distributed_client.hash_method from a RecStore config
        cfg = ps_config.build_config("grpc", [("127.0.0.1", f.port) for f in self.fixtures],
                                     value_size=VS, hash_method="simple_mod")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as t:
            json.dump(cfg, t)
        try:
            self.assertEqual(ps_config.load_config(t.name).hash_method, "simple_mod")
            r = run_ps_bench(["--wire", "recstore", "--config_path", t.name, "--record_count",
                              "600", "--batch_keys", "100", "--running_seconds", "0.3",
                              "--no_barrier", "--verify_deterministic_values"], timeout=120)
        finally:
            os.unlink(t.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        for shard, f in enumerate(self.fixtures):
            got = [k for call in f.calls() for k in call["keys"]]
            self.assertTrue(got)
            self.assertEqual({k % 2 for k in got}, {shard}, f"shard {shard}")
        # CityHash64 would have put keys 1..20 elsewhere: the two really differ
        self.assertNotEqual(SHARD_OF_1_TO_20, [k % 2 for k in range(1, 21)])

    def test_hash_methods_the_wire_cannot_use_are_refused(self):
        grpc_uri = self.uri.replace("recstore+grpc", "grpc")
        with self.assertRaises(errors.InvalidArgument) as cm:
            recbench.PSClient(grpc_uri, value_size=VS, hash_method="simple_mod")
        self.assertIn("rs_mix64", str(cm.exception))
        with self.assertRaises(errors.InvalidArgument) as cm:
            recbench.PSClient(self.uri, value_size=VS, hash_method="murmur")
        self.assertIn("murmur", str(cm.exception))
        r = run_ps_bench(["--wire", "recstore", "--hash_method", "rs_mix64", "--port",
                          str(self.fixtures[0].port), "--no_barrier", "--running_seconds", "0.1"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("hash_method 'rs_mix64'", r.stderr)

    def test_ps_bench_wire_recstore_refuses_rc_transports(self):
        r = run_ps_bench(["--transport", "shm", "--wire", "recstore", "--no_barrier"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--wire recstore needs --transport brpc or grpc", r.stderr)

    def test_value_size_is_required_and_hash_method_checked(self):
        with self.assertRaises(errors.RecbenchError) as cm:
            recbench.PSClient(self.uri)
        self.assertIn("value_size", str(cm.exception))


class RecStoreClientOwnServerTest(NoLeftoverServers, unittest.TestCase):
    def test_recstore_wire_against_recbenchs_servers(self):
        for transport in ("grpc", "brpc"):
            with self.subTest(transport=transport):
                self._own_server(transport)

    def test_recstore_brpc_two_shards_misses_and_errors(self):
        with PSServerProcess("brpc", num_shards=2, value_size=VS) as srv:
            uri = "recstore+brpc://" + ",".join(f"127.0.0.1:{p}" for p in srv.ports)
            keys = np.arange(1, 3001, dtype=np.uint64)
            with recbench.PSClient(uri, value_size=VS, prefetch_depth=4) as c:
                c.put(keys[:2000], rows_for(keys[:2000], DIM, modulus=1013))
                got = c.get(keys[::-1])
                np.testing.assert_array_equal(got[1000:], rows_for(keys[:2000][::-1], DIM, modulus=1013))
                np.testing.assert_array_equal(got[:1000], np.zeros((1000, DIM), np.float32))
                with self.assertRaises(errors.RecbenchError) as cm:
                    c.update(keys[:3], np.ones((3, DIM), np.float32))  # no table "default"
                self.assertIn("success=false", str(cm.exception))
                c.clear()
                np.testing.assert_array_equal(c.get(keys[:5]), np.zeros((5, DIM), np.float32))
            # RecStore routes by CityHash64: each shard holds the keys that hash to it
            with recbench.PSClient(uri, value_size=VS) as c:
                c.put(np.arange(1, 21, dtype=np.uint64), rows_for(np.arange(1, 21), DIM, modulus=1013))
            for shard, port in enumerate(srv.ports):
                with recbench.PSClient(f"recstore+brpc://127.0.0.1:{port}", value_size=VS) as one:
                    got = one.get(np.arange(1, 21, dtype=np.uint64))
                held = [k for k in range(1, 21) if got[k - 1].any()]
                self.assertEqual(held, [k for k, s in zip(range(1, 21), SHARD_OF_1_TO_20)
                                        if s == shard])

    def _own_server(self, transport):
        require_transport(self, transport)
        with PSServerProcess(transport, num_shards=1, value_size=VS) as srv:
            uri = f"recstore+{transport}://127.0.0.1:{srv.ports[0]}"
            keys = np.arange(1, 1201, dtype=np.uint64)
            with recbench.PSClient(uri, value_size=VS) as c, \
                    recbench.PSClient(srv.uri, value_size=VS) as native:
                c.put(keys, rows_for(keys, DIM, modulus=1013))
                np.testing.assert_array_equal(native.get(keys[:900]), rows_for(keys[:900], DIM, modulus=1013))
                np.testing.assert_array_equal(c.get(keys[::-1]), rows_for(keys[::-1], DIM, modulus=1013))


if __name__ == "__main__":
    unittest.main()
