"""The PS benchmark runner (`python -m recbench.runner`, `tools/benchmarks/run_benchmark_ps.py`).

Modules, in the order a run goes through them: cli (RecStore's flags, profiles, interactive
prompts), topology (who runs where, ports), config (the RecStore-shaped config and the process
command lines), preflight (facts about every host), execution (local / ssh / docker processes),
session (the cases: start, barrier, collect), results (rows, totals, CSV files) and report
(summary.md from a run directory alone).
"""
