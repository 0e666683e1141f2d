"""`make tsan`: build the C core with ThreadSanitizer and run the C unit tests under it.

The concurrent ones are what this is for: KV readers against writers and splits
(test_kv_*: no_torn_reads, reads_during_splits), brpc server worker threads with pipelined client
connections (test_ps_*), and whatever concurrent C tests other parts add (all csrc/tests/test_*.c
run). Usage: python3 tools/build/tsan.py [test_name ...]

TSAN_OPTIONS: halt_on_error=0 so one run lists every report, exitcode=66 makes a test with any
report fail, history_size=7 so both stacks of a report can be restored (needed for the
suppressions, tools/build/tsan.supp, to match the reader's frame; each entry says why it is safe).
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    env = dict(os.environ)
    supp = ROOT / "tools" / "build" / "tsan.supp"
    env["TSAN_OPTIONS"] = " ".join(filter(None, [
        f"suppressions={supp}", "history_size=7", "halt_on_error=0", "exitcode=66",
        "second_deadlock_stack=1", env.get("TSAN_OPTIONS", "")]))
    cmd = [sys.executable, str(ROOT / "tools" / "build" / "ctest.py"), "--build-type", "TSan"] + \
        sys.argv[1:]
    print(f"[tsan] TSAN_OPTIONS={env['TSAN_OPTIONS']}", flush=True)
    return subprocess.run(cmd, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
