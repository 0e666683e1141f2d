"""recbench's brpc client (PSClient "brpc://" and "recstore+brpc://") reading responses that
recbench's own server never sends, from a Python baidu_std server (baidu_std_fixture_server.py):
messages compressed with snappy, gzip and zlib (RpcMeta.compress_type 1..3), inflated on both
wires, with rows in the message and in the attachment; and RpcMeta's CRC32C, verified over the
message as sent (and the attachment when checksum_with_attachment is set) — a wrong value or an
unknown checksum type is an error naming the field, never rows read as if they were fine."""

import sys
import unittest
from pathlib import Path

import numpy as np
from ps_testlib import NoLeftoverServers, require_transport, rows_for

import recbench
from recbench import errors
from recbench.launch import LineProcess

HERE = Path(__file__).resolve().parent
VS = 32
DIM = VS // 4
KEYS = np.array([5, 6, 7, 1000], dtype=np.uint64)


class FixtureServer:
    def __init__(self, *args: str):
        self.proc = LineProcess([sys.executable, str(HERE / "baidu_std_fixture_server.py"),
                                 "--value_size", str(VS), *args])
        try:
            line = self.proc.wait_line("listening on", 60)
        except RuntimeError:
            self.proc.stop()
            raise
        self.port = int(line.rsplit(":", 1)[1])

    def uri(self, wire: str) -> str:
        return f"{wire}://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.stop()


class BrpcClientResponsesTest(NoLeftoverServers, unittest.TestCase):
    def setUp(self):
        super().setUp()
        require_transport(self, "brpc")

    def roundtrip(self, uri):
        """Put then get on KEYS[:3] (KEYS[3] is never stored: a miss)."""
        with recbench.PSClient(uri, value_size=VS) as ps:
            ps.put(KEYS[:3], rows_for(KEYS[:3], DIM, modulus=101))
            got = ps.get(KEYS)
        np.testing.assert_array_equal(got[:3], rows_for(KEYS[:3], DIM, modulus=101))
        np.testing.assert_array_equal(got[3], np.zeros(DIM, np.float32))

    def test_compressed_responses_are_inflated(self):
        for ctype in (1, 2, 3):
            for rows_in in ("message", "attachment"):
                server = FixtureServer("--compress", str(ctype), "--rows_in", rows_in)
                try:
                    for wire in ("brpc", "recstore+brpc"):
                        with self.subTest(compress_type=ctype, rows_in=rows_in, wire=wire):
                            self.roundtrip(server.uri(wire))
                finally:
                    server.stop()

    def test_checksummed_responses_are_verified(self):
        for mode in ("crc32c", "crc32c_attachment"):
            server = FixtureServer("--checksum", mode, "--rows_in", "attachment", "--compress", "2")
            try:
                for wire in ("brpc", "recstore+brpc"):
                    with self.subTest(mode=mode, wire=wire):
                        self.roundtrip(server.uri(wire))
            finally:
                server.stop()
        for mode, text in (("wrong", "checksum_value: CRC32C"),
                           ("type2", "checksum_type 2 is not supported")):
            server = FixtureServer("--checksum", mode)
            try:
                for wire in ("brpc", "recstore+brpc"):
                    with self.subTest(mode=mode, wire=wire):
                        with self.assertRaises(errors.ProtocolError) as cm:
                            self.roundtrip(server.uri(wire))
                        self.assertIn(text, str(cm.exception))
            finally:
                server.stop()


if __name__ == "__main__":
    unittest.main()
