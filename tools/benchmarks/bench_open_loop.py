#!/usr/bin/env python3
"""Open-loop latency–throughput curve and knee per PS transport on this host.

    .venv/bin/python tools/benchmarks/bench_open_loop.py [--transports brpc,grpc,shm] \
        [--fractions 0.1,0.25,0.5,0.75,0.9,1.0,1.1,1.2] [--slo_p99_us 1000]

Thin wrapper over recbench.bench.open_loop (see its docstring for what is measured and how).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recbench.bench.open_loop import main

if __name__ == "__main__":
    sys.exit(main())
