"""Storage-only KV index table: DRAM_PET_HASH and DRAM_EXTENDIBLE_HASH beside the memory-system
ceiling, batch_get_flat of 500 random keys over 512-byte rows (recbench.kv_bench.compare_indexes).

Usage: python3 tools/benchmarks/bench_kv_indexes.py [--record_count N] [--running_seconds S]
       [--repeats R] [--indexes PET,EH] [--huge_pages auto|thp,off,explicit]
       [--row_kernel auto|plain|avx2|avx512] [--line_bounds] [--bound_index_mib 1,4,16]
       [--paired] [--json FILE]

Several --huge_pages modes run every case once per mode, interleaved, each index compared with the
ceiling of its own mode (explicit needs a hugetlb pool big enough: /proc/sys/vm/nr_hugepages).
--line_bounds adds the ceiling that also touches 1 and 2 random lines of a PET-sized array per key:
what an index reading that many lines per key could reach at best (PET reads 1; its 128-byte chunks
until 2026-12-05 read 2).
--bound_index_mib adds the 1-line bound with an array of each of those sizes (powers of two,
in MiB) instead of PET's: what an index that small, and so more often in cache, could reach.
--paired measures every index and bound against ceiling batches alternated with its own in the
same run (kv_bench --paired_ceiling): the ratios then do not depend on how the machine's speed
drifted between runs, which on a shared VM is often by a third within a minute.
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
    ap.add_argument("--indexes", default="DRAM_PET_HASH,DRAM_EXTENDIBLE_HASH",
                    help="comma-separated index types beside the ceiling")
    ap.add_argument("--huge_pages", default="auto",
                    help=f"comma-separated modes among {', '.join(kv_bench.HUGE_PAGES)}")
    ap.add_argument("--row_kernel", default="auto", choices=kv_bench.ROW_KERNELS,
                    help="row-loop build (plain/avx2 measure a CPU without AVX-512)")
    ap.add_argument("--line_bounds", action="store_true",
                    help="also run the ceiling with 1 and 2 random index lines per key")
    ap.add_argument("--bound_index_mib", default="",
                    help="comma-separated index-array sizes in MiB (powers of two) for more "
                         "1-line bounds")
    ap.add_argument("--paired", action="store_true",
                    help="ratios from ceiling batches alternated with each case's own, in one run")
    ap.add_argument("--json", help="also write the medians and every sample to this file")
    args = ap.parse_args()
    modes = tuple(m.strip() for m in args.huge_pages.split(",") if m.strip())
    bad = [m for m in modes if m not in kv_bench.HUGE_PAGES]
    if bad or not modes:
        ap.error(f"--huge_pages: {bad or args.huge_pages!r} not among {kv_bench.HUGE_PAGES}")
    indexes = tuple(i.strip() for i in args.indexes.split(",") if i.strip())
    try:
        sizes = tuple(int(s) for s in args.bound_index_mib.split(",") if s.strip())
    except ValueError:
        ap.error(f"--bound_index_mib: {args.bound_index_mib!r} is not a list of whole MiB")
    bad = [s for s in sizes if s <= 0 or s & (s - 1)]
    if bad:
        ap.error(f"--bound_index_mib: {bad} not powers of two")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    res = kv_bench.compare_indexes(record_count=args.record_count, value_size=args.value_size,
                                   batch_keys=args.batch_keys, threads=args.threads,
                                   running_seconds=args.running_seconds, repeats=args.repeats,
                                   index_types=indexes, huge_pages=modes,
                                   row_kernel=args.row_kernel,
                                   index_lines=(1, 2) if args.line_bounds else (),
                                   index_sizes=tuple(s << 20 for s in sizes),
                                   paired=args.paired)
    print(kv_bench.format_comparison(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
