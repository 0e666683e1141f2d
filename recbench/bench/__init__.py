"""Benchmark harnesses other than the PS runner, each named as the tools/benchmarks/ script that
runs it: ps_transports (bench_ps_transports.py), rc_shm (bench_rc_shm.py), soak_ps (soak_ps.py),
sweep_ps (sweep_ps.py), kvengine_compare (run_kvengine_compare.py), compare_results
(compare_results.py), open_loop (bench_open_loop.py)."""
