"""Checkpoint save/load speed against the disk's dd bandwidth in the same directory, and the GET
throughput dip while a checkpoint runs (recbench.bench.checkpoint).

Usage: python3 tools/benchmarks/bench_checkpoint.py [--records N] [--value_size B] [--repeats R]
       [--dir DIR] [--json FILE]
"""

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench import checkpoint as checkpoint_bench


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value_size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num_threads", type=int, default=2, help="server transport threads")
    ap.add_argument("--dir", default=None,
                    help="where the checkpoint and the dd probe go (default: the temp dir)")
    ap.add_argument("--json", help="also write the summary and every repeat to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    res = checkpoint_bench.run(records=args.records, value_size=args.value_size,
                               repeats=args.repeats, directory=args.dir,
                               num_threads=args.num_threads)
    s = checkpoint_bench.summary(res)
    print(checkpoint_bench.format_summary(s))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": s, "result": asdict(res)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
