"""Storage-only KV index table: DRAM_PET_HASH and DRAM_EXTENDIBLE_HASH beside the memory-system
ceiling, batch_get_flat of 500 random keys over 512-byte rows (recbench.kv_bench.compare_indexes).

Usage: python3 tools/benchmarks/bench_kv_indexes.py [--record_count N] [--running_seconds S]
       [--repeats R] [--json FILE]
"""

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench import kv_bench


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record_count", type=int, default=1_000_000)
    ap.add_argument("--value_size", type=int, default=512)
    ap.add_argument("--batch_keys", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--running_seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the medians and every sample to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    res = kv_bench.compare_indexes(record_count=args.record_count, value_size=args.value_size,
                                   batch_keys=args.batch_keys, threads=args.threads,
                                   running_seconds=args.running_seconds, repeats=args.repeats)
    print(kv_bench.format_comparison(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
