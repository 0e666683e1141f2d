"""recbench's brpc server speaking RecStore's recstoreps_brpc.ParameterService over baidu_std,
called with hand-made frames (baidu_std_wire) exactly as RecStore's bRPC client sends them (keys
and row blocks in the attachment, empty messages) and in the protobuf-field form; PS-level
errors as RpcResponseMeta errors (EINVAL 22, EOPNOTSUPP 95) or success=false; requests whose
RpcMeta.compress_type is snappy, gzip or zlib inflated, others refused; RpcMeta's CRC32C
(checksum_type/checksum_value, over the message as sent and, with checksum_with_attachment, the
attachment) verified, mismatches and other checksum types refused naming the field; the native
service on the same port seeing the same rows."""

import gzip
import json
import struct
import unittest
import zlib

import numpy as np
from baidu_std_wire import BaiduStdClient, brpc_crc32c, crc32c, snappy_literals
from ps_testlib import NoLeftoverServers, PSServerProcess, rows_for
from recstore_wire_py import adagrad_reference, decode_block, encode_block, keys_bytes, stubs

import recbench

SVC = "recstoreps_brpc.ParameterService"
VS = 64
DIM = VS // 4


class RecStoreBrpcServerTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pb, _ = stubs("recstore_ps_brpc")
        cls.server = PSServerProcess("brpc", value_size=VS,
                                     extra_args=["--transport_options",
                                                 "learning_rate=0.5"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        super().setUp()
        self.c = BaiduStdClient(self.server.ports[0])
        self.ok(self.c.call(SVC, "Command", self.pb.CommandRequest().SerializeToString()))

    def tearDown(self):
        self.c.close()
        super().tearDown()

    def ok(self, reply):
        self.assertEqual(reply.error_code, 0, reply.error_text)
        return reply

    def test_attachment_form_as_recstores_client_sends_it(self):
        keys = [3, 4, 5]
        r = self.ok(self.c.call(SVC, "PutParameter", b"", encode_block(zip(keys, rows_for(keys, DIM, modulus=997)))))
        self.assertEqual(r.message, b"")
        r = self.ok(self.c.call(SVC, "GetParameter", b"", keys_bytes([4, 99, 3])))
        self.assertEqual(r.message, b"")  # the block is the response attachment
        got = decode_block(r.attachment)
        self.assertEqual([k for k, _ in got], [4, 99, 3])
        np.testing.assert_array_equal(got[0][1], rows_for([4], DIM, modulus=997)[0])
        self.assertIsNone(got[1][1])

    def test_proto_field_form(self):
        keys = [7, 8]
        put = self.pb.PutParameterRequest(parameter_value=encode_block(zip(keys, rows_for(keys, DIM, modulus=997))))
        self.ok(self.c.call(SVC, "PutParameter", put.SerializeToString()))
        get = self.pb.GetParameterRequest(keys=keys_bytes(keys)).SerializeToString()
        got = decode_block(self.ok(self.c.call(SVC, "GetParameter", get)).attachment)
        np.testing.assert_array_equal(np.stack([r for _, r in got]), rows_for(keys, DIM, modulus=997))

    def test_update_init_and_errors(self):
        cfg = json.dumps({"embedding_dim": DIM, "num_embeddings": 10, "table_id": 1})
        init = self.pb.InitEmbeddingTableResponse.FromString(self.ok(self.c.call(
            SVC, "InitEmbeddingTable", self.pb.InitEmbeddingTableRequest(
                table_name="t", config_payload=cfg.encode()).SerializeToString())).message)
        self.assertTrue(init.success)
        self.assertEqual(init.tag, 1)
        key = (1 << 56) | 9
        g = np.full((1, DIM), 2.0, np.float32)
        req = self.pb.UpdateParameterRequest(table_name="t").SerializeToString()
        up = self.pb.UpdateParameterResponse.FromString(self.ok(self.c.call(
            SVC, "UpdateParameter", req, encode_block([(key, g[0])]))).message)
        self.assertTrue(up.success)
        got = decode_block(self.ok(self.c.call(SVC, "GetParameter", b"", keys_bytes([key])))
                           .attachment)
        np.testing.assert_array_equal(got[0][1], -(np.float32(0.5) * g[0]))  # learning_rate=0.5
        bad = self.pb.UpdateParameterResponse.FromString(self.ok(self.c.call(
            SVC, "UpdateParameter", req, encode_block([(9, g[0])]))).message)
        self.assertFalse(bad.success)  # tag missing: success=false, not an RPC error
        r = self.c.call(SVC, "GetParameter", b"", b"")
        self.assertEqual(r.error_code, 22)
        self.assertIn("0 keys", r.error_text)
        block = bytearray(encode_block([(1, rows_for([1], DIM, modulus=997)[0])]))
        struct.pack_into("<i", block, 4, 3)
        r = self.c.call(SVC, "PutParameter", b"", bytes(block))
        self.assertEqual(r.error_code, 22)
        self.assertIn("byte offset 4", r.error_text)
        r = self.c.call(SVC, "Command", self.pb.CommandRequest(
            command=self.pb.RELOAD_PS, arg1=[b"a"], arg2=[b"b"]).SerializeToString())
        self.assertEqual(r.error_code, 95)
        r = self.c.call(SVC, "Command", self.pb.CommandRequest(command=7).SerializeToString())
        self.assertEqual(r.error_code, 22)
        r = self.c.call(SVC, "Nope")
        self.assertEqual(r.error_code, 1002)
        fake = self.pb.CommandResponse.FromString(self.ok(self.c.call(SVC, "Command", self.pb.
                                                  CommandRequest(command=self.pb.LOAD_FAKE_DATA,
                                                                 arg1=[struct.pack("<q", 33)])
                                                  .SerializeToString())).message)
        self.assertEqual(fake.reply, b"\xab" * 33)
        self.test_attachment_form_as_recstores_client_sends_it()  # still serving

    def test_compressed_requests(self):
        keys = [11, 12]
        put = self.pb.PutParameterRequest(
            parameter_value=encode_block(zip(keys, rows_for(keys, DIM, modulus=997)))).SerializeToString()
        for ctype, packed in ((1, snappy_literals(put)), (2, gzip.compress(put)),
                              (3, zlib.compress(put))):
            self.ok(self.c.call(SVC, "Command", self.pb.CommandRequest().SerializeToString()))
            r = self.ok(self.c.call(SVC, "PutParameter", packed, compress_type=ctype))
            self.assertEqual(r.compress_type, 0)  # answered uncompressed
            got = decode_block(self.ok(self.c.call(SVC, "GetParameter", b"", keys_bytes(keys)))
                               .attachment)
            np.testing.assert_array_equal(np.stack([v for _, v in got]), rows_for(keys, DIM, modulus=997), ctype)
        # the native service's messages inflate the same way
        r = self.c.call("recstore.PSService", "Command",
                        zlib.compress(b"\x2a\x04ping"), compress_type=3)
        self.assertEqual(r.error_code, 0, r.error_text)
        self.assertIn(b"pong", r.message)
        r = self.c.call(SVC, "PutParameter", put, compress_type=4)
        self.assertEqual(r.error_code, 1003)
        self.assertIn("compress_type 4 (lz4)", r.error_text)
        r = self.c.call(SVC, "PutParameter", b"\x00garbage", compress_type=3)
        self.assertEqual(r.error_code, 1003)
        self.assertIn("zlib", r.error_text)

    def test_checksummed_requests(self):
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)  # the CRC-32C check value
        keys = [31, 32]
        block = encode_block(zip(keys, rows_for(keys, DIM, modulus=997)))

        def get():
            return decode_block(self.ok(self.c.call(SVC, "GetParameter", b"", keys_bytes(keys)))
                                .attachment)

        # RecStore's form (empty message, block in the attachment), the CRC covering both
        self.ok(self.c.call(SVC, "PutParameter", b"", block,
                            checksum=(1, brpc_crc32c(b"", block, True), True)))
        np.testing.assert_array_equal(np.stack([v for _, v in get()]), rows_for(keys, DIM, modulus=997))
        # a compressed message: the CRC is over the bytes as sent, not the inflated ones
        self.ok(self.c.call(SVC, "Command", self.pb.CommandRequest().SerializeToString()))
        put = self.pb.PutParameterRequest(parameter_value=block).SerializeToString()
        packed = zlib.compress(put)
        self.ok(self.c.call(SVC, "PutParameter", packed, compress_type=3,
                            checksum=(1, brpc_crc32c(packed), False)))
        self.assertEqual(len(get()[0][1]), DIM)
        # refusals name the field, and the request is not applied
        self.ok(self.c.call(SVC, "Command", self.pb.CommandRequest().SerializeToString()))
        wrong = bytearray(brpc_crc32c(b"", block, True))
        wrong[3] ^= 1
        refusals = [
            ((1, bytes(wrong), True), "checksum_value: CRC32C of the message and attachment"),
            # the attachment is covered only when checksum_with_attachment says so
            ((1, brpc_crc32c(b""), True), "checksum_value"),
            ((1, brpc_crc32c(b"", block, True), False), "checksum_value: CRC32C of the message"),
            ((2, brpc_crc32c(b""), False), "checksum_type 2 is not supported"),
            ((1, b"\x01\x02\x03", False), "checksum_value holds 3 bytes"),
        ]
        for checksum, text in refusals:
            r = self.c.call(SVC, "PutParameter", b"", block, checksum=checksum)
            self.assertEqual(r.error_code, 1003, checksum)
            self.assertIn(text, r.error_text)
            self.assertEqual([v for _, v in get()], [None, None], checksum)  # not applied
        r = self.c.call(SVC, "PutParameter", b"", block, content_type=1)
        self.assertEqual(r.error_code, 1003)
        self.assertIn("content_type 1 (json)", r.error_text)
        # type 0 means no checksum, whatever the value; the native service verifies the same way
        self.ok(self.c.call(SVC, "GetParameter", b"", keys_bytes(keys), checksum=(0, b"x", True)))
        ping = b"\x2a\x04ping"
        r = self.ok(self.c.call("recstore.PSService", "Command", ping,
                                checksum=(1, brpc_crc32c(ping), False)))
        self.assertIn(b"pong", r.message)
        r = self.c.call("recstore.PSService", "Command", ping, checksum=(1, bytes(wrong), False))
        self.assertEqual(r.error_code, 1003)
        self.assertIn("checksum_value", r.error_text)

    def test_native_client_on_the_same_port(self):
        keys = np.array([21, 22], dtype=np.uint64)
        self.ok(self.c.call(SVC, "PutParameter", b"", encode_block(zip(keys.tolist(),
                                                                       rows_for(keys, DIM, modulus=997)))))
        with recbench.PSClient(self.server.uri, value_size=VS) as client:
            np.testing.assert_array_equal(client.get(keys), rows_for(keys, DIM, modulus=997))


class RecStoreBrpcRowWiseAdagradTest(NoLeftoverServers, unittest.TestCase):
    """The brpc server takes the same optimizer options: RowWiseAdaGrad steps through
    recstoreps_brpc.UpdateParameter match the float32 reference; tags are table_id x 2."""

    def test_rowwise_adagrad_steps(self):
        pb, _ = stubs("recstore_ps_brpc")
        opts = "optimizer=RowWiseAdaGrad;learning_rate=0.1;epsilon=1e-6"
        with PSServerProcess("brpc", value_size=VS, extra_args=["--transport_options", opts]) \
                as srv:
            c = BaiduStdClient(srv.ports[0])
            try:
                cfg = json.dumps({"embedding_dim": DIM, "num_embeddings": 10, "table_id": 2})
                r = c.call(SVC, "InitEmbeddingTable", pb.InitEmbeddingTableRequest(
                    table_name="t", config_payload=cfg.encode()).SerializeToString())
                init = pb.InitEmbeddingTableResponse.FromString(r.message)
                self.assertTrue(init.success)
                self.assertEqual(init.tag, 4)
                key = (4 << 56) | 9
                w, a = np.zeros(DIM, np.float32), np.zeros(DIM, np.float32)
                req = pb.UpdateParameterRequest(table_name="t").SerializeToString()
                for step in range(3):
                    g = (np.arange(DIM, dtype=np.float32) - step * 3) / 7
                    up = pb.UpdateParameterResponse.FromString(c.call(
                        SVC, "UpdateParameter", req, encode_block([(key, g)])).message)
                    self.assertTrue(up.success)
                    w, a = adagrad_reference("RowWiseAdaGrad", w, a, g, 0.1, 1e-6)
                got = decode_block(c.call(SVC, "GetParameter", b"", keys_bytes([key])).attachment)
                np.testing.assert_allclose(got[0][1], w, rtol=2e-6, atol=1e-7)
            finally:
                c.close()


if __name__ == "__main__":
    unittest.main()
