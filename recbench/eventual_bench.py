"""The wait-primitive benchmark: `recbench-eventual-bench -d SECONDS -i INTERVAL_MS -n WAITERS
[--wait-mode spin|block]` (also `python -m recbench.eventual_bench`).

N concurrent waiter threads each create an rs_eventual (the completion PS client threads wait on),
hand it to one timer thread that sets it after the interval (standing in for a network reply),
wait for it, destroy it and repeat (csrc/common/eventual_bench.c). Prints the header
`#<num_waiters> <test_duration_sec> <interval_msec> <ops/s> <cpu_time_sec>` and one row;
cpu_time_sec is the process's user + system CPU seconds over the run. `--verbose` adds the
user/sys split and wake lateness percentiles on stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

from recbench.cli_flags import positive_int

HEADER = "#<num_waiters>\t<test_duration_sec>\t<interval_msec>\t<ops/s>\t<cpu_time_sec>"

log = logging.getLogger("recbench.eventual_bench")


def run(num_waiters: int, duration_s: float, interval_ms: float, wait_mode: str = "block") -> dict:
    """Run the benchmark in C (GIL released) and return its result dict: ops, ops_per_sec,
    cpu_user_s, cpu_sys_s, cpu_time_s, wall_s, late_p50_us, late_p99_us, late_max_us, and the
    arguments."""
    from recbench import _kv

    return _kv.eventual_bench(num_waiters, duration_s, interval_ms, wait_mode)


def format_row(r: dict) -> str:
    """The seed's data row: waiters, duration, interval, ops/s, CPU seconds."""
    return (f"{r['num_waiters']}\t{r['duration_s']:g}\t{r['interval_ms']:g}\t"
            f"{r['ops_per_sec']:f}\t{r['cpu_time_s']:f}")


def _positive_float(s: str) -> float:
    v = float(s)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{s} is not > 0")
    return v


def _nonneg_float(s: str) -> float:
    v = float(s)
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"{s} is not >= 0")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="recbench-eventual-bench", description=__doc__.splitlines()[0])
    ap.add_argument("-d", "--duration", type=_positive_float, required=True, metavar="SECONDS",
                    help="length of the measured window")
    ap.add_argument("-i", "--interval", type=_nonneg_float, required=True, metavar="INTERVAL_MS",
                    help="milliseconds between handing an eventual to the setter and its set")
    ap.add_argument("-n", "--num-waiters", type=positive_int, required=True, metavar="WAITERS",
                    help="concurrent waiter threads")
    ap.add_argument("--wait-mode", choices=["block", "spin"], default="block",
                    help="block: futex sleep; spin: busy poll (default block)")
    ap.add_argument("-v", "--verbose", action="store_true", help="details on stderr")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="[eventual-bench] %(message)s")
    try:
        r = run(args.num_waiters, args.duration, args.interval, args.wait_mode)
    except (ValueError, MemoryError, OSError) as e:
        print(f"recbench-eventual-bench: {e}", file=sys.stderr)
        return 2
    print(HEADER)
    print(format_row(r), flush=True)
    log.info("mode=%s ops=%d cpu_user_s=%.3f cpu_sys_s=%.3f wall_s=%.3f wake lateness p50=%.1fus "
             "p99=%.1fus max=%.1fus", args.wait_mode, r["ops"], r["cpu_user_s"], r["cpu_sys_s"],
             r["wall_s"], r["late_p50_us"], r["late_p99_us"], r["late_max_us"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
