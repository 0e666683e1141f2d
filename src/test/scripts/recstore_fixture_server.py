"""An independent RecStore-semantics gRPC parameter server, written in Python with grpcio from
docs/recstore-wire.md (not from recbench's C code), so recbench's RecStore-wire client is tested
against something other than recbench's own server.

    python recstore_fixture_server.py --port 0 [--shard 0]

Serves recstoreps.ParameterService as RecStore's server does: GetParameter returns one row block
in request order with dim-0 items for misses; PutParameter stores each item's floats; UpdateParameter
applies SGD (w -= 0.01 g, a missing key becomes -0.01 g) for a table registered by
InitEmbeddingTable, else success=false; Command handles CLEAR_PS and the fake-data commands.
Prints "Server shard <k> listening on 127.0.0.1:<port>" when ready, then one JSON line per call
({"method": ..., "keys": [...]}) so tests can see what arrived where. Stops on SIGTERM.

For the client's tests of malformed replies, a GetParameter whose keys include BAD_DIM_KEY is
answered with the right block except that the last item's dim is one less (its offsets still
add up to the layout of every key found), and one including BAD_END_KEY with end[0] one byte short
(the offset at byte 4)."""

import argparse
import json
import signal
import struct
import sys
import threading
from concurrent import futures

import numpy as np
from recstore_wire_py import decode_block, encode_block, stubs

LR = np.float32(0.01)
BAD_DIM_KEY = 0xFFFF_FFFF_FFFF_0001
BAD_END_KEY = 0xFFFF_FFFF_FFFF_0002


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--shard", type=int, default=0)
    args = ap.parse_args()
    import grpc

    pb, pb_grpc = stubs("recstore_ps")
    store: dict[int, np.ndarray] = {}
    tables: dict[str, int] = {}
    lock = threading.Lock()
    out_lock = threading.Lock()

    def log(method, keys):
        with out_lock:
            print(json.dumps({"method": method, "keys": [int(k) for k in keys]}), flush=True)

    class Service(pb_grpc.ParameterServiceServicer):
        def GetParameter(self, request, context):
            keys = np.frombuffer(request.keys, dtype="<u8")
            log("GetParameter", keys)
            with lock:
                items = [(int(k), store.get(int(k))) for k in keys]
            block = bytearray(encode_block(items))
            if BAD_DIM_KEY in keys:  # the last item starts at end[n-2], at byte 4 + 4 (n-2)
                start = struct.unpack_from("<i", block, 4 * (len(keys) - 1))[0] \
                    if len(keys) > 1 else 0
                dim_at = 4 + 4 * len(keys) + start + 8
                (dim,) = struct.unpack_from("<i", block, dim_at)
                struct.pack_into("<i", block, dim_at, dim - 1)
            if BAD_END_KEY in keys:
                (end0,) = struct.unpack_from("<i", block, 4)
                struct.pack_into("<i", block, 4, end0 - 1)
            return pb.GetParameterResponse(parameter_value=bytes(block))

        def PutParameter(self, request, context):
            items = decode_block(request.parameter_value)
            log("PutParameter", [k for k, _ in items])
            with lock:
                for k, row in items:
                    store[k] = np.array(row, dtype=np.float32)
            return pb.PutParameterResponse()

        def UpdateParameter(self, request, context):
            items = decode_block(request.gradients)
            log("UpdateParameter", [k for k, _ in items])
            with lock:
                if request.table_name not in tables:
                    return pb.UpdateParameterResponse(success=False)
                for k, g in items:
                    w = store.get(k)
                    store[k] = (w - LR * g) if w is not None else -(LR * g)
            return pb.UpdateParameterResponse(success=True)

        def InitEmbeddingTable(self, request, context):
            cfg = json.loads(request.config_payload or b"{}")
            with lock:
                tables[request.table_name] = int(cfg.get("table_id", 0))
            return pb.InitEmbeddingTableResponse(success=True, tag=tables[request.table_name])

        def Command(self, request, context):
            log("Command", [])
            if request.command == pb.CLEAR_PS:
                with lock:
                    store.clear()
                return pb.CommandResponse()
            if request.command in (pb.LOAD_FAKE_DATA, pb.DUMP_FAKE_DATA):
                (n,) = struct.unpack("<q", request.arg1[0])
                if request.command == pb.LOAD_FAKE_DATA:
                    return pb.CommandResponse(reply=b"\xab" * n)
                return pb.CommandResponse(reply=b"ok")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"command {request.command}")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[
        ("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
    pb_grpc.add_ParameterServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    print(f"Server shard {args.shard} listening on 127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    stop.wait()
    server.stop(0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
