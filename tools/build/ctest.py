"""Build and run the C unit tests (csrc/tests/test_*.c) against the core built with ASan+UBSan.
Every test binary also gets the shared test sources, csrc/tests/support/*.c (checks that several
tests run the same way, e.g. ps_conn_checks.c).

Usage: python3 tools/build/ctest.py [--build-type ASan|TSan|Debug] [NAME ...]
Each test binary prints "N passed, N failed"; this script prints the total the same way and exits
non-zero if any binary failed or crashed.

TSan runs get TSAN_OPTIONS (added to any the caller set): the suppressions in
tools/build/tsan.supp (each entry says why it is safe), history_size=7 so both stacks of a report
can be restored (needed for the suppressions to match the reader's frame), halt_on_error=0 so one
run lists every report, and exitcode=66, which makes a test with any report fail.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rsbuild


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-type", default="ASan", choices=["ASan", "TSan", "Debug"])
    ap.add_argument("names", nargs="*", help="test names (test_foo) to run; default all")
    args = ap.parse_args()
    features = rsbuild.detect_features()
    out = rsbuild.ROOT / "build" / f"ctest-{args.build_type.lower()}"
    lib = rsbuild.build_core_lib(args.build_type, features, out / "core", pic=False)
    flags = rsbuild.COMMON_CFLAGS + rsbuild.BUILD_FLAGS[args.build_type] + \
        rsbuild.compile_defines(args.build_type, features)
    inc = [f"-I{rsbuild.INCLUDE}", f"-I{rsbuild.ROOT / 'csrc'}", f"-I{rsbuild.PROTO_GEN}",
           f"-I{rsbuild.ROOT / 'csrc' / 'tests'}"]
    for f in features.values():
        inc += f["cflags"]
    tests = sorted((rsbuild.ROOT / "csrc" / "tests").glob("test_*.c"))
    support = [str(s) for s in sorted((rsbuild.ROOT / "csrc" / "tests" / "support").glob("*.c"))]
    if args.names:
        tests = [t for t in tests if t.stem in args.names]
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    if args.build_type == "TSan":
        supp = rsbuild.ROOT / "tools" / "build" / "tsan.supp"
        env["TSAN_OPTIONS"] = " ".join(filter(None, [
            f"suppressions={supp}", "history_size=7", "halt_on_error=0", "exitcode=66",
            "second_deadlock_stack=1", env.get("TSAN_OPTIONS", "")]))
        print(f"[ctest] TSAN_OPTIONS={env['TSAN_OPTIONS']}", flush=True)
    passed = failed = 0
    for t in tests:
        exe = out / t.stem
        cmd = [rsbuild.cc()] + flags + inc + [str(t), *support, str(lib), "-o", str(exe)] + \
            rsbuild.all_libs(features)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(f"[ctest] {t.stem}: build failed\n{r.stderr}", flush=True)
            failed += 1
            continue
        r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, cwd=out, check=False)
        tail = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
        status = "ok" if r.returncode == 0 else f"FAILED (exit {r.returncode})"
        print(f"[ctest] {t.stem}: {tail} — {status}", flush=True)
        if r.returncode != 0:
            sys.stdout.write(r.stdout[-4000:])
            sys.stdout.write(r.stderr[-8000:])
            failed += 1
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
