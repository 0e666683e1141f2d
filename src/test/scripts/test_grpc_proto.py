"""The PS service definition ships inside the package, identical to the one the C core is built
from, and grpcio-tools can compile it (so any gRPC client can call the server)."""

import importlib.resources
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def shipped_proto() -> bytes:
    return (importlib.resources.files("recbench") / "proto" / "ps.proto").read_bytes()


class ShippedProtoTest(unittest.TestCase):
    def test_shipped_proto_is_the_one_the_server_is_built_from(self):
        # recbench/proto/ps.proto is a symlink to csrc/proto/ps.proto (one source, shipped in the
        # package); a wheel build copies the file's content
        source = (ROOT / "csrc" / "proto" / "ps.proto").read_bytes()
        self.assertEqual(shipped_proto(), source)

    def test_shipped_proto_declares_the_service(self):
        text = shipped_proto().decode()
        self.assertIn("package recstore;", text)
        for method in ("Get", "Put", "Update", "Command"):
            self.assertIn(f"rpc {method}(PSRequest) returns (PSResponse);", text)

    def test_grpcio_tools_compiles_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            proto = Path(tmp) / "ps.proto"
            proto.write_bytes(shipped_proto())
            r = subprocess.run(
                [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--python_out={tmp}",
                 f"--grpc_python_out={tmp}", str(proto)],
                capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            stubs = (Path(tmp) / "ps_pb2_grpc.py").read_text()
            self.assertIn("/recstore.PSService/Get", stubs)
            self.assertIn("class PSServiceStub", stubs)


if __name__ == "__main__":
    unittest.main()
