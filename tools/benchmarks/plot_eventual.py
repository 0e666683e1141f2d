#!/usr/bin/env python3
"""Plot wait-primitive sweeps: for each FILE.dat draw FILE.dat.rate.png and FILE.dat.cpu.png.

Usage: plot_eventual.py FILE.dat [MORE.dat ...] [--together OUT_PREFIX]
--together also draws OUT_PREFIX.rate.png and OUT_PREFIX.cpu.png with every file as one line
(e.g. a block sweep next to a spin sweep). The logic lives in recbench.analysis.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench import analysis


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dats", nargs="+", type=Path, help=".dat files written by sweep_eventual.sh")
    ap.add_argument("--together", metavar="OUT_PREFIX", help="one pair of plots with every file")
    args = ap.parse_args(argv)
    loaded = {}
    try:
        for dat in args.dats:
            loaded[dat.name] = analysis.load_eventual_dat(dat)
    except analysis.SummaryFormatError as e:
        print(f"plot_eventual.py: {e}", file=sys.stderr)
        return 2
    for dat in args.dats:
        rate, cpu = analysis.plot_eventual({dat.name: loaded[dat.name]}, f"{dat}.rate.png", f"{dat}.cpu.png")
        print(f"[output] {rate}\n[output] {cpu}")
    if args.together:
        rate, cpu = analysis.plot_eventual(loaded, f"{args.together}.rate.png", f"{args.together}.cpu.png")
        print(f"[output] {rate}\n[output] {cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
