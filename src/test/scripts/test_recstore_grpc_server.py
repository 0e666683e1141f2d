"""recbench's gRPC server speaking RecStore's recstoreps.ParameterService, called by a grpcio
client generated from the shipped recbench/proto/recstore_ps.proto (as RecStore's own clients
would call it): Put/Get with misses as dim-0 items, SGD updates checked against w - lr*g, table
tags, wrong dims, zero keys, malformed blocks, a 16 MiB block, commands, concurrent clients, and
the native recstore.PSService on the same port seeing the same rows. Every error must leave the
server serving."""

import json
import os
import struct
import subprocess
import sys
import threading
import unittest

import numpy as np
from ps_testlib import NoLeftoverServers, PSServerProcess, python_env, require_transport, rows_for
from recstore_wire_py import adagrad_reference, decode_block, encode_block, keys_bytes, stubs

import recbench

VS = 512
DIM = VS // 4
LR = np.float32(0.01)


class RecStoreGrpcServerTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "grpc")
        import grpc

        cls.grpc = grpc
        cls.pb, cls.pb_grpc = stubs("recstore_ps")
        cls.server = PSServerProcess("grpc", value_size=VS, capacity=200000).start()
        cls.target = f"127.0.0.1:{cls.server.ports[0]}"
        cls.channel = grpc.insecure_channel(cls.target, options=[
            ("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
        cls.stub = cls.pb_grpc.ParameterServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def setUp(self):
        super().setUp()
        self.stub.Command(self.pb.CommandRequest(command=self.pb.CLEAR_PS), timeout=15)

    # ---- helpers -------------------------------------------------------------------------------
    def put(self, keys, rows):
        return self.stub.PutParameter(self.pb.PutParameterRequest(
            parameter_value=encode_block(zip(keys, rows))), timeout=30)

    def get(self, keys):
        resp = self.stub.GetParameter(self.pb.GetParameterRequest(keys=keys_bytes(keys)),
                                      timeout=30)
        return decode_block(resp.parameter_value)

    def init_table(self, name, dim=DIM, num=1000, table_id=0):
        cfg = json.dumps({"embedding_dim": dim, "num_embeddings": num, "table_id": table_id},
                         separators=(",", ":"), sort_keys=True)
        return self.stub.InitEmbeddingTable(self.pb.InitEmbeddingTableRequest(
            table_name=name, config_payload=cfg.encode()), timeout=15)

    def update(self, table, keys, grads):
        return self.stub.UpdateParameter(self.pb.UpdateParameterRequest(
            table_name=table, gradients=encode_block(zip(keys, grads))), timeout=15)

    def assert_status(self, call, code, *fragments):
        with self.assertRaises(self.grpc.RpcError) as cm:
            call()
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        for f in fragments:
            self.assertIn(f, cm.exception.details())
        return cm.exception.details()

    def assert_still_serving(self):
        self.put([424242], rows_for([424242], DIM, modulus=1009))
        [(key, row)] = self.get([424242])
        self.assertEqual(key, 424242)
        np.testing.assert_array_equal(row, rows_for([424242], DIM, modulus=1009)[0])

    # ---- tests ---------------------------------------------------------------------------------
    def test_put_get_misses_order_and_duplicates(self):
        keys = np.arange(1, 301, dtype=np.uint64) * 7
        self.assertEqual(self.put(keys, rows_for(keys, DIM, modulus=1009)).ByteSize(), 0)  # empty response
        ask = [keys[5], 999999, keys[0], keys[5], 1]
        got = self.get(ask)
        self.assertEqual([k for k, _ in got], [int(k) for k in ask])
        np.testing.assert_array_equal(got[0][1], rows_for([keys[5]], DIM, modulus=1009)[0])
        self.assertIsNone(got[1][1])  # a miss is a dim-0 item
        np.testing.assert_array_equal(got[2][1], rows_for([keys[0]], DIM, modulus=1009)[0])
        np.testing.assert_array_equal(got[3][1], got[0][1])
        self.assertIsNone(got[4][1])

    def test_worked_example_bytes(self):
        # the server stores DIM-float rows; keys 1 (present) and 7 (missing) in one reply
        self.put([1], rows_for([1], DIM, modulus=1009))
        raw = self.stub.GetParameter(self.pb.GetParameterRequest(keys=keys_bytes([1, 7])),
                                     timeout=10).parameter_value
        item0 = 12 + 4 * DIM
        self.assertEqual(raw[:12], struct.pack("<iii", 2, item0, item0 + 12))
        self.assertEqual(raw[12:24], struct.pack("<Qi", 1, DIM))
        self.assertEqual(raw[12 + item0:], struct.pack("<Qi", 7, 0))

    def test_sgd_update_against_w_minus_lr_g(self):
        self.assertTrue(self.init_table("emb").success)
        keys = [10, 11, 12]
        self.put(keys[:2], rows_for(keys[:2], DIM, modulus=1009))  # 12 is missing: created as -lr*g
        grads = (np.arange(3 * DIM, dtype=np.float32).reshape(3, DIM) - 40) / 16
        resp = self.update("emb", keys, grads)
        self.assertTrue(resp.HasField("success") and resp.success)
        got = dict(self.get(keys))
        w = rows_for(keys[:2], DIM, modulus=1009)
        np.testing.assert_array_equal(got[10], w[0] - LR * grads[0])
        np.testing.assert_array_equal(got[11], w[1] - LR * grads[1])
        np.testing.assert_array_equal(got[12], -(LR * grads[2]))
        resp = self.update("emb", keys, grads)  # twice: two steps
        got2 = dict(self.get(keys))
        np.testing.assert_array_equal(got2[10], got[10] - LR * grads[0])

    def test_update_unknown_table_and_tags(self):
        keys = [5, 6]
        grads = np.ones((2, DIM), dtype=np.float32)
        resp = self.update("nope", keys, grads)
        self.assertTrue(resp.HasField("success"))  # false is serialised too
        self.assertFalse(resp.success)
        init = self.init_table("second", table_id=3)
        self.assertTrue(init.success)
        self.assertEqual(init.tag, 3)
        self.assertEqual(self.init_table("second", table_id=3).tag, 3)  # same config, same tag
        self.assertFalse(self.update("second", keys, grads).success)  # keys lack tag 3
        tagged = [(3 << 56) | k for k in keys]
        self.assertTrue(self.update("second", tagged, grads).success)
        got = dict(self.get(tagged))
        np.testing.assert_array_equal(got[tagged[0]], -(LR * grads[0]))
        self.assertEqual([row for _, row in self.get(keys)], [None, None])  # untagged: untouched
        changed = self.init_table("second", table_id=3, num=5)
        self.assertFalse(changed.success)
        self.assertEqual(changed.tag, -1)
        self.assertFalse(self.init_table("bad_dim", dim=DIM + 1, table_id=4).success)
        self.assertFalse(self.init_table("big_id", table_id=300).success)
        bad = self.stub.InitEmbeddingTable(self.pb.InitEmbeddingTableRequest(
            table_name="bad_json", config_payload=b"{not json"), timeout=10)
        self.assertFalse(bad.success)
        missing = self.stub.InitEmbeddingTable(self.pb.InitEmbeddingTableRequest(
            table_name="no_payload"), timeout=10)
        self.assertFalse(missing.success)
        self.server.wait_stderr("update_refused")
        self.assert_still_serving()

    def test_wrong_dims_zero_keys_malformed_blocks(self):
        sc = self.grpc.StatusCode
        self.assert_status(lambda: self.put([1], [np.ones(DIM + 1, np.float32)]),
                           sc.INVALID_ARGUMENT, f"dim {DIM + 1}", "PutParameter")
        self.assert_status(lambda: self.get([]), sc.INVALID_ARGUMENT, "0 keys")
        self.assert_status(lambda: self.stub.GetParameter(
            self.pb.GetParameterRequest(keys=b"\x01" * 12), timeout=10),
            sc.INVALID_ARGUMENT, "12 bytes")
        block = bytearray(encode_block(zip([1, 2], rows_for([1, 2], DIM, modulus=1009))))
        struct.pack_into("<i", block, 4, 7)  # end[0] = 7 < an item head
        self.assert_status(lambda: self.stub.PutParameter(
            self.pb.PutParameterRequest(parameter_value=bytes(block)), timeout=10),
            sc.INVALID_ARGUMENT, "byte offset 4")
        self.assert_status(lambda: self.stub.PutParameter(
            self.pb.PutParameterRequest(parameter_value=b"\x05\x00"), timeout=10),
            sc.INVALID_ARGUMENT, "row block")
        self.assert_status(lambda: self.stub.PutParameter(self.pb.PutParameterRequest(),
                                                          timeout=10),
                           sc.INVALID_ARGUMENT, "without a row block")
        self.init_table("t")
        bad_update = self.stub.UpdateParameter(self.pb.UpdateParameterRequest(
            table_name="t", gradients=bytes(block)), timeout=10)
        self.assertFalse(bad_update.success)
        self.assert_status(lambda: self.channel.unary_unary(
            "/recstoreps.ParameterService/GetParameter")(b"\x0a\x05ab", timeout=10),
            sc.INVALID_ARGUMENT, "keys")  # truncated protobuf
        self.assert_still_serving()

    def test_16_mib_block(self):
        n = 32768  # 32768 items of 524 bytes: 17 MB in one PutParameter and one GetParameter
        keys = np.arange(1, n + 1, dtype=np.uint64) + 10**6
        rows = rows_for(keys, DIM, modulus=1009)
        block = encode_block(zip(keys.tolist(), rows))
        self.assertGreater(len(block), 16 << 20)
        self.stub.PutParameter(self.pb.PutParameterRequest(parameter_value=block), timeout=120)
        got = self.get(keys)
        self.assertEqual(len(got), n)
        np.testing.assert_array_equal(np.stack([r for _, r in got]), rows)

    def test_commands(self):
        sc = self.grpc.StatusCode
        self.put([3], rows_for([3], DIM, modulus=1009))
        n = struct.pack("<q", 100)
        fake = self.stub.Command(self.pb.CommandRequest(command=self.pb.LOAD_FAKE_DATA,
                                                        arg1=[n]), timeout=15)
        self.assertEqual(fake.reply, b"\xab" * 100)
        dump = self.stub.Command(self.pb.CommandRequest(command=self.pb.DUMP_FAKE_DATA,
                                                        arg1=[n]), timeout=15)
        self.assertEqual(dump.reply, b"ok")
        self.assert_status(lambda: self.stub.Command(self.pb.CommandRequest(
            command=self.pb.LOAD_FAKE_DATA, arg1=[struct.pack("<q", 17 << 20)]), timeout=15),
            sc.INVALID_ARGUMENT, "LOAD_FAKE_DATA")
        self.assert_status(lambda: self.stub.Command(self.pb.CommandRequest(
            command=self.pb.RELOAD_PS), timeout=15), sc.INVALID_ARGUMENT, "RELOAD_PS")
        self.assert_status(lambda: self.stub.Command(self.pb.CommandRequest(
            command=self.pb.RELOAD_PS, arg1=[b"cfg"], arg2=[b"ckpt"]), timeout=15),
            sc.UNIMPLEMENTED, "RELOAD_PS", "no checkpoints")
        self.assert_status(lambda: self.stub.Command(self.pb.CommandRequest(
            command=self.pb.SAVE_CHECKPOINT, arg1=[b"/tmp/x"]), timeout=15),
            sc.UNIMPLEMENTED, "SAVE_CHECKPOINT")
        self.assert_status(lambda: self.stub.Command(self.pb.CommandRequest(command=9),
                                                     timeout=15),
                           sc.INVALID_ARGUMENT, "unknown PSCommand 9")
        self.assertIsNotNone(self.get([3])[0][1])
        self.stub.Command(self.pb.CommandRequest(command=self.pb.CLEAR_PS), timeout=15)
        self.assertIsNone(self.get([3])[0][1])

    def test_concurrent_clients(self):
        errors = []

        def worker(t):
            try:
                import grpc
                with grpc.insecure_channel(self.target) as ch:
                    stub = self.pb_grpc.ParameterServiceStub(ch)
                    for r in range(20):
                        keys = np.arange(50, dtype=np.uint64) + 10**5 * (t + 1) + 50 * r
                        stub.PutParameter(self.pb.PutParameterRequest(
                            parameter_value=encode_block(zip(keys.tolist(), rows_for(keys, DIM, modulus=1009)))),
                            timeout=30)
                        got = decode_block(stub.GetParameter(self.pb.GetParameterRequest(
                            keys=keys_bytes(keys)), timeout=30).parameter_value)
                        np.testing.assert_array_equal(np.stack([g for _, g in got]),
                                                      rows_for(keys, DIM, modulus=1009))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"client {t}: {e!r}")

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        self.assertEqual(errors, [])

    def test_native_service_on_the_same_port_sees_the_rows(self):
        keys = np.array([77, 78, 79], dtype=np.uint64)
        self.put(keys, rows_for(keys, DIM, modulus=1009))
        with recbench.PSClient(self.server.uri, value_size=VS) as client:
            np.testing.assert_array_equal(client.get(keys), rows_for(keys, DIM, modulus=1009))
            client.put(np.array([80], dtype=np.uint64), rows_for([80], DIM, modulus=1009))
        np.testing.assert_array_equal(self.get([80])[0][1], rows_for([80], DIM, modulus=1009)[0])


class RecStoreAdagradTest(NoLeftoverServers, unittest.TestCase):
    """`--transport_options optimizer=AdaGrad|RowWiseAdaGrad;learning_rate=;epsilon=`: every
    UpdateParameter checked against a float32 reference of RecStore's rule, the accumulator rows
    under tag + 1 (read back through GetParameter), missing rows and accumulators starting from
    zero, a key sent twice in one block stepped twice, tags table_id x 2, and concurrent
    updaters of the same keys losing no step."""

    LR, EPS = 0.05, 1e-8

    def _run(self, kind):
        require_transport(self, "grpc")
        import grpc
        opts = f"optimizer={kind};learning_rate={self.LR};epsilon={self.EPS}"
        with PSServerProcess("grpc", value_size=VS,
                             extra_args=["--transport_options", opts]) as srv, \
                grpc.insecure_channel(f"127.0.0.1:{srv.ports[0]}") as ch:
            pb, pb_grpc = stubs("recstore_ps")
            self._steps(kind, pb, pb_grpc.ParameterServiceStub(ch))

    def _steps(self, kind, pb, stub):
        def init(name, table_id):
            cfg = json.dumps({"embedding_dim": DIM, "num_embeddings": 100, "table_id": table_id})
            return stub.InitEmbeddingTable(pb.InitEmbeddingTableRequest(
                table_name=name, config_payload=cfg.encode()), timeout=15)

        def get(keys):
            return dict(decode_block(stub.GetParameter(
                pb.GetParameterRequest(keys=keys_bytes(keys)), timeout=15).parameter_value))

        r = init("emb", 3)
        self.assertTrue(r.success)
        self.assertEqual(r.tag, 6)                       # table_id x 2 tensors per table
        self.assertFalse(init("big", 128).success)       # 256, 257: outside 0..255
        tag = 6 << 56
        keys = [tag | 10, tag | 11, tag | 12, tag | 10]  # 10 twice: two steps on one row
        stub.PutParameter(pb.PutParameterRequest(parameter_value=encode_block(
            zip(keys[:2], rows_for(keys[:2], DIM, modulus=1009)))), timeout=15)   # 12 is missing: starts at 0
        rng = np.random.default_rng(7)
        w = {k: v for k, v in zip(keys[:2], rows_for(keys[:2], DIM, modulus=1009))}
        w[keys[2]] = np.zeros(DIM, np.float32)
        acc = {k: np.zeros(DIM, np.float32) for k in keys[:3]}
        for _ in range(3):
            grads = rng.standard_normal((4, DIM)).astype(np.float32)
            resp = stub.UpdateParameter(pb.UpdateParameterRequest(
                table_name="emb", gradients=encode_block(zip(keys, grads))), timeout=15)
            self.assertTrue(resp.success)
            for k, g in zip(keys, grads):
                w[k], acc[k] = adagrad_reference(kind, w[k], acc[k], g, self.LR, self.EPS)
            got = get(keys[:3])
            for k in keys[:3]:
                np.testing.assert_allclose(got[k], w[k], rtol=2e-6, atol=1e-7)
            acc_keys = [(k & ((1 << 56) - 1)) | (7 << 56) for k in keys[:3]]
            got_acc = get(acc_keys)
            for k, ak in zip(keys[:3], acc_keys):
                want = acc[k] if kind == "AdaGrad" else np.r_[acc[k][:1], np.zeros(DIM - 1)]
                np.testing.assert_allclose(got_acc[ak], want, rtol=2e-6, atol=1e-7)
        # a key of the accumulator's tag is not the table's: refused
        resp = stub.UpdateParameter(pb.UpdateParameterRequest(
            table_name="emb", gradients=encode_block([(7 << 56 | 1, np.ones(DIM, np.float32))])),
            timeout=15)
        self.assertFalse(resp.success)
        # concurrent updaters of the same keys: every step lands (the updates are serialised)
        ck = [tag | k for k in range(100, 140)]
        g = np.full((len(ck), DIM), 0.25, np.float32)
        blk = encode_block(zip(ck, g))

        def worker():
            for _ in range(10):
                self.assertTrue(stub.UpdateParameter(pb.UpdateParameterRequest(
                    table_name="emb", gradients=blk), timeout=30).success)

        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wr, ar = np.zeros(DIM, np.float32), np.zeros(DIM, np.float32)
        for _ in range(40):
            wr, ar = adagrad_reference(kind, wr, ar, g[0], self.LR, self.EPS)
        got = get(ck)
        for k in ck:
            np.testing.assert_allclose(got[k], wr, rtol=2e-5, atol=1e-6)

    def test_rowwise_adagrad(self):
        self._run("RowWiseAdaGrad")

    def test_adagrad(self):
        self._run("AdaGrad")

    def test_optimizer_from_recstore_config(self):
        """cache_ps.optimizer in RecStore's config JSON sets the optimizer (RecStore's spelling
        RowWiseAdagrad); a non-number learning rate or a transport without the RecStore wire is
        refused naming the file and field."""
        import tempfile

        require_transport(self, "grpc")
        import grpc
        with tempfile.TemporaryDirectory() as d:
            cfg_path = os.path.join(d, "ps.json")
            doc = {"cache_ps": {"optimizer": {"type": "RowWiseAdagrad", "learning_rate": 0.2,
                                              "epsilon": 1e-6}}}
            with open(cfg_path, "w") as f:
                json.dump(doc, f)
            with PSServerProcess("grpc", value_size=VS,
                                 extra_args=["--config_path", cfg_path]) as srv, \
                    grpc.insecure_channel(f"127.0.0.1:{srv.ports[0]}") as ch:
                pb, pb_grpc = stubs("recstore_ps")
                stub = pb_grpc.ParameterServiceStub(ch)
                cfg = json.dumps({"embedding_dim": DIM, "num_embeddings": 10, "table_id": 1})
                r = stub.InitEmbeddingTable(pb.InitEmbeddingTableRequest(
                    table_name="t", config_payload=cfg.encode()), timeout=15)
                self.assertEqual(r.tag, 2)
                g = np.linspace(-1, 1, DIM, dtype=np.float32)
                key = (2 << 56) | 5
                self.assertTrue(stub.UpdateParameter(pb.UpdateParameterRequest(
                    table_name="t", gradients=encode_block([(key, g)])), timeout=15).success)
                got = dict(decode_block(stub.GetParameter(pb.GetParameterRequest(
                    keys=keys_bytes([key])), timeout=15).parameter_value))
                w, _ = adagrad_reference("RowWiseAdaGrad", np.zeros(DIM), np.zeros(DIM), g,
                                         0.2, 1e-6)
                np.testing.assert_allclose(got[key], w, rtol=2e-6, atol=1e-7)
            for opt, transport, words in (({"learning_rate": "fast"}, "grpc",
                                           "cache_ps.optimizer.learning_rate must be a number"),
                                          ({"type": "SGD"}, "shm", "does not serve")):
                with open(cfg_path, "w") as f:
                    json.dump({"cache_ps": {"optimizer": opt}}, f)
                p = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport",
                                    transport, "--port", "0", "--config_path", cfg_path],
                                   capture_output=True, text=True, env=python_env(), timeout=60)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(cfg_path, p.stderr)
                self.assertIn(words, p.stderr)

    def test_adamw_refused_by_name(self):
        p = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport", "grpc",
                            "--host", "127.0.0.1", "--port", "0", "--transport_options",
                            "optimizer=AdamW"], capture_output=True, text=True, env=python_env(),
                           timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("optimizer=AdamW", p.stderr)
        self.assertIn("no AdamW", p.stderr)


if __name__ == "__main__":
    unittest.main()
