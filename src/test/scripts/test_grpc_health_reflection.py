"""grpc.health.v1.Health and server reflection on recbench's gRPC server, through grpcio's own
client packages (grpcio-health-checking, grpcio-reflection), as a Kubernetes-style probe or
grpcurl would use them: Check and Watch (SERVING while up, NOT_SERVING while the server stops,
SERVICE_UNKNOWN / NOT_FOUND for other names), and reflection v1alpha (the descriptor-database
client) and v1 (same messages on the v1 path) listing services and resolving symbols to files."""

import queue
import threading
import unittest

from ps_testlib import NoLeftoverServers, PSServerProcess, require_transport

SERVICES = {"recstore.PSService", "recstoreps.ParameterService", "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}


class HealthTest(NoLeftoverServers, unittest.TestCase):
    def setUp(self):
        super().setUp()
        require_transport(self, "grpc")
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        self.grpc, self.hpb = grpc, health_pb2
        self.server = PSServerProcess("grpc", value_size=64).start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.ports[0]}")
        self.stub = health_pb2_grpc.HealthStub(self.channel)

    def tearDown(self):
        self.channel.close()
        self.server.stop()
        super().tearDown()

    def test_check(self):
        serving = self.hpb.HealthCheckResponse.SERVING
        for name in ("", "recstore.PSService", "recstoreps.ParameterService",
                     "grpc.health.v1.Health"):
            resp = self.stub.Check(self.hpb.HealthCheckRequest(service=name), timeout=10)
            self.assertEqual(resp.status, serving, name)
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.stub.Check(self.hpb.HealthCheckRequest(service="no.Such"), timeout=10)
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.NOT_FOUND)
        self.assertIn("no.Such", cm.exception.details())

    def test_watch_serving_then_not_serving_while_stopping(self):
        got: queue.Queue = queue.Queue()
        stream = self.stub.Watch(self.hpb.HealthCheckRequest(service=""), timeout=60)
        unknown = self.stub.Watch(self.hpb.HealthCheckRequest(service="no.Such"), timeout=60)

        def read(it, tag):
            try:
                for resp in it:
                    got.put((tag, resp.status))
            except self.grpc.RpcError as e:
                got.put((tag, e.code()))

        threads = [threading.Thread(target=read, args=(stream, "all"), daemon=True),
                   threading.Thread(target=read, args=(unknown, "unknown"), daemon=True)]
        for t in threads:
            t.start()
        first = {got.get(timeout=10), got.get(timeout=10)}
        self.assertEqual(first, {("all", self.hpb.HealthCheckResponse.SERVING),
                                 ("unknown", self.hpb.HealthCheckResponse.SERVICE_UNKNOWN)})
        self.server.stop()  # SIGTERM: the server says NOT_SERVING before it goes
        seen = []
        while True:
            tag, status = got.get(timeout=20)
            seen.append((tag, status))
            if tag == "all":
                break
        self.assertEqual(seen[-1], ("all", self.hpb.HealthCheckResponse.NOT_SERVING), seen)
        for t in threads:
            t.join(20)


class ReflectionTest(NoLeftoverServers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_transport(None, "grpc")
        import grpc

        cls.grpc = grpc
        cls.server = PSServerProcess("grpc", value_size=64).start()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.ports[0]}")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def test_v1alpha_descriptor_database(self):
        from google.protobuf.descriptor_pool import DescriptorPool
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
            ProtoReflectionDescriptorDatabase,
        )

        db = ProtoReflectionDescriptorDatabase(self.channel)
        self.assertEqual(set(db.get_services()), SERVICES)
        pool = DescriptorPool(db)
        svc = pool.FindServiceByName("recstoreps.ParameterService")
        self.assertEqual({m.name for m in svc.methods},
                         {"GetParameter", "PutParameter", "UpdateParameter",
                          "InitEmbeddingTable", "Command"})
        get = pool.FindMessageTypeByName("recstoreps.GetParameterRequest")
        self.assertEqual(get.fields_by_name["keys"].number, 1)
        put = pool.FindMessageTypeByName("recstoreps.PutParameterRequest")
        self.assertEqual(put.fields_by_name["parameter_value"].number, 2)
        native = pool.FindServiceByName("recstore.PSService")
        self.assertEqual({m.name for m in native.methods},
                         {"Get", "Put", "Update", "Command", "Stream"})
        self.assertEqual(pool.FindMethodByName("recstore.PSService.Get").input_type.full_name,
                         "recstore.PSRequest")
        health = pool.FindServiceByName("grpc.health.v1.Health")
        self.assertTrue(health.methods_by_name["Watch"].server_streaming)
        status = pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
        self.assertIn("ServingStatus", status.enum_types_by_name)
        with self.assertRaises(KeyError):
            pool.FindServiceByName("no.Such")

    def _v1(self, requests):
        from grpc_reflection.v1alpha import reflection_pb2 as pb  # same messages as v1

        call = self.channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=pb.ServerReflectionRequest.SerializeToString,
            response_deserializer=pb.ServerReflectionResponse.FromString)
        return list(call(iter([pb.ServerReflectionRequest(host="h", **r) for r in requests]),
                         timeout=20))

    def test_v1_path(self):
        from google.protobuf.descriptor_pb2 import FileDescriptorProto

        list_resp, sym, missing, byname, ext = self._v1([
            {"list_services": ""},
            {"file_containing_symbol": "recstoreps.ParameterService.GetParameter"},
            {"file_containing_symbol": "recstoreps.Nope"},
            {"file_by_filename": "grpc_health_v1.proto"},
            {"all_extension_numbers_of_type": "recstoreps.GetParameterRequest"},
        ])
        self.assertEqual(list_resp.valid_host, "h")
        self.assertEqual(list_resp.original_request.list_services, "")
        self.assertEqual({s.name for s in list_resp.list_services_response.service}, SERVICES)
        fd = FileDescriptorProto.FromString(sym.file_descriptor_response.file_descriptor_proto[0])
        self.assertEqual(fd.package, "recstoreps")
        self.assertIn("ParameterService", [s.name for s in fd.service])
        self.assertEqual(missing.error_response.error_code, self.grpc.StatusCode.NOT_FOUND.value[0])
        self.assertIn("recstoreps.Nope", missing.error_response.error_message)
        fd = FileDescriptorProto.FromString(
            byname.file_descriptor_response.file_descriptor_proto[0])
        self.assertEqual(fd.package, "grpc.health.v1")
        self.assertEqual(ext.all_extension_numbers_response.base_type_name,
                         "recstoreps.GetParameterRequest")
        self.assertEqual(list(ext.all_extension_numbers_response.extension_number), [])


if __name__ == "__main__":
    unittest.main()
