#!/usr/bin/env python3
"""Sweep one PS runner flag: sweep_ps.py --param NAME --values a,b,c [--out-dir DIR] [runner flags ...]

Runs tools/benchmarks/run_benchmark_ps.py once per value and writes sweep.csv, sweep.rate.png and
sweep.cpu.png. The logic lives in recbench.bench.sweep_ps.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench.sweep_ps import main

if __name__ == "__main__":
    sys.exit(main())
