"""A stand-alone grpcio server of recstore.PSService, run in its own process by test_grpc_stream.

It stands for a third-party or older server, so recbench's gRPC client can be tested against what
it does not control:
  --mode unary   Get, Put and Command only: Stream is not implemented (UNIMPLEMENTED).
  --mode stall   also Stream, which answers Get and Command but never a Put: from a Put on, it
                 reads on and answers nothing more.
Rows live in a dict. Command "stats" answers "streams=N unary=M": Stream calls opened and unary
calls served. Prints "port=P" once serving; stops on SIGTERM or when stdin closes.
Nothing here imports recbench.
"""

import argparse
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

from grpcio_ps_client import generate_stubs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proto", required=True, type=Path)
    ap.add_argument("--gen-dir", required=True, type=Path)
    ap.add_argument("--mode", required=True, choices=("unary", "stall"))
    ap.add_argument("--value-size", required=True, type=int)
    args = ap.parse_args()

    generate_stubs(args.proto, args.gen_dir)
    sys.path.insert(0, str(args.gen_dir))
    import grpc
    import ps_pb2

    vs = args.value_size
    rows: dict[bytes, bytes] = {}
    counts = {"streams": 0, "unary": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def answer(req, method: int):
        keys = [req.keys[i:i + 8] for i in range(0, len(req.keys), 8)]
        if method == 2:  # Put
            for i, k in enumerate(keys):
                rows[k] = req.rows[i * vs:(i + 1) * vs]
            return ps_pb2.PSResponse(value_size=vs)
        if method == 1:  # Get
            got = [rows.get(k) for k in keys]
            return ps_pb2.PSResponse(value_size=vs, num_found=sum(g is not None for g in got),
                                     rows=b"".join(g or bytes(vs) for g in got))
        reply = "pong"
        if req.command == "stats":
            reply = f"streams={counts['streams']} unary={counts['unary']}"
        return ps_pb2.PSResponse(value_size=vs, reply=reply)

    def unary(method: int):
        def handle(req, context):
            with lock:
                counts["unary"] += 1
                return answer(req, method)
        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=ps_pb2.PSRequest.FromString,
            response_serializer=ps_pb2.PSResponse.SerializeToString)

    def stream(requests, context):
        with lock:
            counts["streams"] += 1
        stalled = False
        for req in requests:
            stalled = stalled or req.method == 2
            if not stalled:
                with lock:
                    yield answer(req, req.method)
            if stop.is_set():
                return

    handlers = {"Get": unary(1), "Put": unary(2), "Command": unary(4)}
    if args.mode == "stall":
        handlers["Stream"] = grpc.stream_stream_rpc_method_handler(
            stream, request_deserializer=ps_pb2.PSRequest.FromString,
            response_serializer=ps_pb2.PSResponse.SerializeToString)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("recstore.PSService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"port={port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop(grace=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
