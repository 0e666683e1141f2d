#!/usr/bin/env python3
"""Thread scaling per PS transport: keys/s, CPU seconds and p99 against client threads 1..16 and
server threads 1, 2, 4, with the issue-16 goals (>= 90 % of the best keys/s at 16 client threads;
p99 within 2x the Little's-law latency of the in-flight count).

    .venv/bin/python tools/benchmarks/bench_thread_scaling.py [--transports brpc,grpc,shm] \\
        [--client-threads 1,2,4,8,16] [--server-threads 1,2,4] [--out-dir DIR] [runner flags ...]

Thin wrapper over recbench.bench.thread_scaling (see its docstring for what is measured).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recbench.bench.thread_scaling import main

if __name__ == "__main__":
    sys.exit(main())
