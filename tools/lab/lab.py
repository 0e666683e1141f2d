#!/usr/bin/env python3
"""Thin entry point of the lab: `tools/lab/lab.py up|run|check|down|...` = python -m recbench.lab."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recbench.lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
