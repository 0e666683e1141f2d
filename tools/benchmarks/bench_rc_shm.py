"""Side-by-side GET throughput: storage-only batch_get_flat vs the shm RC transport (busy and
adaptive polling) vs brpc, same index, row size, record count and batch, one server poll thread,
one client thread. Thin wrapper: the work is recbench.bench.rc_shm.

    python3 tools/benchmarks/bench_rc_shm.py --record_count 1000000 --running_seconds 5 --repeats 3
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench.rc_shm import main

if __name__ == "__main__":
    sys.exit(main())
