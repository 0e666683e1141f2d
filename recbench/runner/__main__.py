"""`python -m recbench.runner [flags]`: the PS benchmark runner (same as run_benchmark_ps.py)."""

from recbench.runner.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
