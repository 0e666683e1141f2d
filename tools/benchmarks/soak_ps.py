#!/usr/bin/env python3
"""Soak the parameter server: soak_ps.py --minutes N [--transports brpc,grpc,shm] [--output F]

Mixed GET/PUT/UPDATE with verification over every available transport with 2 shards, client
churn and injected client kills; reports requests, errors, server RSS over time and open
descriptors from /proc. The logic lives in recbench.bench.soak_ps.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench.soak_ps import main

if __name__ == "__main__":
    sys.exit(main())
