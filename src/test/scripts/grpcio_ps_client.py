"""A stand-alone grpcio client of recstore.PSService, run in its own process by test_grpc_interop.

It generates Python stubs from the .proto it is given (grpcio-tools, into --gen-dir), then calls a
server exactly as any third-party gRPC user would: Put(keys, rows), Get(keys), Command("ping").
Keys and rows come from files (raw little-endian u64 / row bytes); the rows that Get returned are
written to --got, so the test compares them byte for byte. It also sends a Put with short rows,
keys that are not a multiple of 8 bytes and an unknown method, then the same requests again on one
Stream call (each naming its method, plus one naming none and one naming method 9). Prints one
JSON line with what it saw.
Nothing here imports recbench.
"""

import argparse
import json
import sys
from pathlib import Path


def generate_stubs(proto: Path, gen_dir: Path) -> None:
    from grpc_tools import protoc

    gen_dir.mkdir(parents=True, exist_ok=True)
    rc = protoc.main(["grpc_tools.protoc", f"-I{proto.parent}", f"--python_out={gen_dir}",
                      f"--grpc_python_out={gen_dir}", str(proto)])
    if rc != 0:
        raise SystemExit(f"protoc failed on {proto} (exit {rc})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proto", required=True, type=Path)
    ap.add_argument("--gen-dir", required=True, type=Path)
    ap.add_argument("--target", required=True, help="host:port of the PS server")
    ap.add_argument("--keys", required=True, type=Path)
    ap.add_argument("--rows", required=True, type=Path)
    ap.add_argument("--value-size", required=True, type=int)
    ap.add_argument("--got", required=True, type=Path)
    args = ap.parse_args()

    generate_stubs(args.proto, args.gen_dir)
    sys.path.insert(0, str(args.gen_dir))
    import grpc
    import ps_pb2
    import ps_pb2_grpc

    keys = args.keys.read_bytes()
    rows = args.rows.read_bytes()
    with grpc.insecure_channel(args.target) as channel:
        stub = ps_pb2_grpc.PSServiceStub(channel)
        ping = stub.Command(ps_pb2.PSRequest(command="ping"), timeout=10)
        put = stub.Put(ps_pb2.PSRequest(value_size=args.value_size, keys=keys, rows=rows),
                       timeout=10)
        get = stub.Get(ps_pb2.PSRequest(keys=keys), timeout=10)
        bad = stub.Put(ps_pb2.PSRequest(value_size=args.value_size, keys=keys, rows=rows[:-4]),
                       timeout=10)
        odd = stub.Get(ps_pb2.PSRequest(keys=keys[:-3]), timeout=10)
        try:
            unknown = channel.unary_unary("/recstore.PSService/Delete")(b"", timeout=10)
            unknown_code = "OK"
        except grpc.RpcError as e:
            unknown_code = e.code().name
            unknown = e.details()
        # the four methods on one bidi stream: replies come back one per request, in order
        P = ps_pb2.PSRequest
        stream_reqs = [
            P(method=4, command="ping"),
            P(method=2, value_size=args.value_size, keys=keys, rows=rows),
            P(method=1, keys=keys),
            P(keys=keys),  # no method
            P(method=9, keys=keys),
            P(method=2, value_size=args.value_size, keys=keys, rows=rows[:-4]),
            P(method=4, command="stats"),
        ]
        stream = list(stub.Stream(iter(stream_reqs), timeout=30))
    args.got.write_bytes(get.rows)
    args.got.with_suffix(".stream").write_bytes(stream[2].rows)
    print(json.dumps({
        "ping_status": ping.status, "ping_reply": ping.reply,
        "put_status": put.status, "put_error": put.error,
        "get_status": get.status, "get_value_size": get.value_size,
        "get_num_found": get.num_found, "get_rows_len": len(get.rows),
        "bad_put_status": bad.status, "bad_put_error": bad.error,
        "odd_keys_status": odd.status, "odd_keys_error": odd.error,
        "unknown_code": unknown_code, "unknown_details": unknown,
        "stream": [{"status": m.status, "error": m.error, "reply": m.reply,
                    "num_found": m.num_found, "rows_len": len(m.rows)} for m in stream],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
