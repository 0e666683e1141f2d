#!/usr/bin/env python3
"""Compare a candidate benchmark run with a baseline: Markdown + CSV, exit 1 on a regression.

Usage: compare_results.py BASE CANDIDATE [--threshold PCT] [--noise-k K] [--lang zh|en] [--out-dir DIR]
The logic lives in recbench.bench.compare_results.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench.compare_results import main

if __name__ == "__main__":
    sys.exit(main())
