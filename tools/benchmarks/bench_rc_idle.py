"""What an idle RC server costs while a client stays attached: lanes that ring (the poller blocks)
against lanes that do not (it naps). Thin wrapper: the work is recbench.bench.rc_idle.

    python3 tools/benchmarks/bench_rc_idle.py --transport rdma --transport_options device=rxe0
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench.bench.rc_idle import main

if __name__ == "__main__":
    sys.exit(main())
