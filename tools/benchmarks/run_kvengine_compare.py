#!/usr/bin/env python3
"""Compare KV engines with the YCSB driver; all logic lives in recbench.bench.kvengine_compare.

Example:
    python3 tools/benchmarks/run_kvengine_compare.py --engines kvdb rocksdb lmdb \
        --workloads workloada workloadc --record-count 100000 --operation-count 100000 \
        --threads 2 --output-dir results/kv_compare
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recbench.bench.kvengine_compare import main

if __name__ == "__main__":
    sys.exit(main())
