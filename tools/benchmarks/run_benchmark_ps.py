#!/usr/bin/env python3
"""Run recbench PS benchmarks: a thin wrapper around recbench.runner.cli (see docs/ps-runner.md)."""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from recbench.runner.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
