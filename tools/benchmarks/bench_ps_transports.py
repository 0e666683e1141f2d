#!/usr/bin/env python3
"""PS transports (brpc, grpc, shm when built) side by side with Redis MGET on this host.

    .venv/bin/python tools/benchmarks/bench_ps_transports.py [--transports brpc,grpc] [--repeat 3]
    .venv/bin/python tools/benchmarks/bench_ps_transports.py --no_redis \\
        --transports brpc,recstore+brpc,grpc,recstore+grpc   # RecStore wire vs native

Thin wrapper over recbench.bench.ps_transports (see its docstring for what is measured and how).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recbench.bench.ps_transports import main

if __name__ == "__main__":
    sys.exit(main())
