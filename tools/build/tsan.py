"""`make tsan`: build the C core with ThreadSanitizer and run the C unit tests under it.

The concurrent ones are what this is for: KV readers against writers and splits
(test_kv_*: no_torn_reads, reads_during_splits), brpc server worker threads with pipelined client
connections (test_ps_*), and whatever concurrent C tests other parts add (all csrc/tests/test_*.c
run). Usage: python3 tools/build/tsan.py [test_name ...] — the same as
`python3 tools/build/ctest.py --build-type TSan [test_name ...]`, which sets TSAN_OPTIONS (the
suppressions in tools/build/tsan.supp among them).
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    cmd = [sys.executable, str(ROOT / "tools" / "build" / "ctest.py"), "--build-type", "TSan"] + \
        sys.argv[1:]
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
