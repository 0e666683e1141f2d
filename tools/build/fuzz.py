"""Build and run the libFuzzer targets (csrc/fuzz/fuzz_<parser>.c) against the C core.

Usage:
  python3 tools/build/fuzz.py build [TARGET ...]
  python3 tools/build/fuzz.py run   [--seconds N] [TARGET ...]   # `make fuzz` (FUZZ_SECONDS each)
  python3 tools/build/fuzz.py smoke [--seconds N] [TARGET ...]   # `make fuzz-smoke` (part of make test)
  python3 tools/build/fuzz.py list
  python3 tools/build/fuzz.py seeds                              # (re)write the seed-* inputs

The C core is compiled with Debian's clang into build/fuzz/core with
-fsanitize=fuzzer-no-link,address,undefined (same sources, defines and optional libraries as every
other build, from rsbuild.py); each target is linked with -fsanitize=fuzzer,address,undefined.

Python targets: tools/build/fuzz_<name>.py run under atheris (coverage-guided, libFuzzer flags);
today fuzz_topology (the runner's plan strings). Without atheris they are skipped with that
reason (the bounded grammar-based unittest src/test/scripts/test_fuzz_topology.py still runs).

Corpora: csrc/fuzz/corpus/<target>/ is committed and holds the seeds and every regression input
(files named crash-*/regress-* are inputs that once crashed a target). `smoke` replays every
committed input once, then fuzzes each target for a few seconds into a throw-away directory.
`run` fuzzes into build/fuzz/work/<target>/ (kept between runs, seeded from the committed corpus).
When a target crashes, its input is copied into csrc/fuzz/corpus/<target>/ as crash-<sha1> so it
becomes a regression case once the bug is fixed; the command exits non-zero.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rsbuild

FUZZ_SRC = rsbuild.ROOT / "csrc" / "fuzz"
CORPUS = FUZZ_SRC / "corpus"
OUT = rsbuild.ROOT / "build" / "fuzz"
BUILD_TYPE = "Fuzz"
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
FUZZ_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=fuzzer-no-link"] + SAN + \
    ["-Wno-unknown-warning-option"]
# libFuzzer options for every run: bounded memory and per-input time, no leak check at exit of
# a run (leaks are still reported per input by ASan's LeakSanitizer during fuzzing).
RUN_OPTS = ["-rss_limit_mb=2048", "-timeout=20", "-print_final_stats=0"]


def _clang() -> str:
    for name in ("clang", "clang-14"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("[fuzz] clang not found: install Debian's clang and libclang-rt-14-dev (make deps)")


PY_TARGETS = {"fuzz_topology": rsbuild.ROOT / "tools" / "build" / "fuzz_topology.py"}


def targets() -> list[str]:
    return sorted([p.stem for p in FUZZ_SRC.glob("fuzz_*.c")] + list(PY_TARGETS))


def _atheris_missing() -> str | None:
    r = subprocess.run([sys.executable, "-c", "import atheris"], capture_output=True, text=True, check=False)
    return None if r.returncode == 0 else "atheris is not installed (pip install atheris)"


def _target_needs(src: Path) -> list[str]:
    """Features a target needs, from a `// fuzz-requires: a,b` line (skipped when absent)."""
    for line in src.read_text().splitlines()[:40]:
        if "fuzz-requires:" in line:
            return [x.strip() for x in line.split("fuzz-requires:", 1)[1].split(",") if x.strip()]
    return []


def _cmd(exe: Path) -> list[str]:
    return [sys.executable, str(exe)] if exe.suffix == ".py" else [str(exe)]


def build(names: list[str], verbose: bool = False) -> dict[str, Path]:
    """Build the core and the named targets; returns target -> executable (missing features are
    reported and skipped)."""
    os.environ["CC"] = _clang()
    rsbuild.BUILD_FLAGS[BUILD_TYPE] = FUZZ_FLAGS
    features = rsbuild.detect_features()
    lib = rsbuild.build_core_lib(BUILD_TYPE, features, OUT / "core", pic=False, verbose=verbose)
    flags = rsbuild.COMMON_CFLAGS + ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=fuzzer"] + \
        SAN + ["-Wno-unknown-warning-option"] + rsbuild.compile_defines(BUILD_TYPE, features)
    inc = [f"-I{rsbuild.INCLUDE}", f"-I{rsbuild.ROOT / 'csrc'}", f"-I{rsbuild.PROTO_GEN}"]
    for f in features.values():
        inc += f["cflags"]
    exes = {}
    for name in names:
        if name in PY_TARGETS:
            why = _atheris_missing()
            if why:
                print(f"[fuzz] {name}: skipped: {why}", flush=True)
            else:
                exes[name] = PY_TARGETS[name]
            continue
        src = FUZZ_SRC / f"{name}.c"
        missing = [f for f in _target_needs(src) if f not in features]
        if missing:
            print(f"[fuzz] {name}: skipped: built without {', '.join(missing)} "
                  f"({', '.join(rsbuild.FEATURES[m]['deb'] for m in missing)})", flush=True)
            continue
        exe = OUT / name
        # targets may #include core .c files (to reach static functions): any csrc change rebuilds
        deps = [src, lib] + [p for p in (rsbuild.ROOT / "csrc").rglob("*")
                             if p.suffix in (".c", ".h") and "tests" not in p.parts]
        if not exe.exists() or any(d.stat().st_mtime > exe.stat().st_mtime for d in deps):
            cmd = [os.environ["CC"]] + flags + inc + [str(src), str(lib), "-o", str(exe)] + \
                rsbuild.all_libs(features)
            if verbose:
                print(" ".join(cmd), file=sys.stderr)
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                               check=False)
            if r.returncode != 0:
                raise RuntimeError(f"building {name} failed:\n{r.stderr}")
        exes[name] = exe
    return exes


def _keep_crash(name: str, artifacts: Path) -> list[Path]:
    kept = []
    for a in sorted(artifacts.glob("*")):
        if not a.is_file():
            continue
        dest = CORPUS / name / f"crash-{hashlib.sha1(a.read_bytes()).hexdigest()}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(a, dest)
        kept.append(dest)
    return kept


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:allocator_may_return_null=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


def replay(name: str, exe: Path) -> bool:
    """Run every committed input of a target once."""
    inputs = sorted(p for p in (CORPUS / name).glob("*") if p.is_file())
    if not inputs:
        print(f"[fuzz] {name}: no committed inputs to replay", flush=True)
        return True
    ok = True
    for i in range(0, len(inputs), 200):  # keep command lines short
        chunk = inputs[i:i + 200]
        r = subprocess.run(_cmd(exe) + RUN_OPTS + [str(p) for p in chunk], capture_output=True,
                           text=True, errors="replace", env=_env(), check=False)
        if r.returncode != 0:
            print(f"[fuzz] {name}: replay FAILED (exit {r.returncode})\n{r.stderr[-6000:]}", flush=True)
            ok = False
    print(f"[fuzz] {name}: replayed {len(inputs)} committed inputs — {'ok' if ok else 'FAILED'}",
          flush=True)
    return ok


def fuzz(name: str, exe: Path, seconds: int, workdir: Path) -> bool:
    workdir.mkdir(parents=True, exist_ok=True)
    artifacts = OUT / "artifacts" / name
    if artifacts.exists():
        shutil.rmtree(artifacts)
    artifacts.mkdir(parents=True)
    seeds = CORPUS / name
    seeds.mkdir(parents=True, exist_ok=True)
    cmd = _cmd(exe) + RUN_OPTS + [f"-max_total_time={seconds}", f"-artifact_prefix={artifacts}/",
                                   str(workdir), str(seeds)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=_env(),
                       check=False)
    stats = [ln for ln in r.stderr.splitlines() if ln.startswith("#") and ("DONE" in ln or "pulse" in ln)]
    last = stats[-1] if stats else (r.stderr.strip().splitlines() or ["(no output)"])[-1]
    if r.returncode != 0:
        kept = _keep_crash(name, artifacts)
        print(f"[fuzz] {name}: CRASH (exit {r.returncode}) after fuzzing; input kept as "
              f"{', '.join(str(k.relative_to(rsbuild.ROOT)) for k in kept) or '(none written)'}\n"
              f"{r.stderr[-8000:]}", flush=True)
        return False
    print(f"[fuzz] {name}: {seconds}s ok — {last.strip()}", flush=True)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["build", "run", "smoke", "list", "seeds"])
    ap.add_argument("names", nargs="*", help="targets (fuzz_<parser>); default all")
    ap.add_argument("--seconds", type=int, default=None,
                    help="fuzzing time per target (run: $FUZZ_SECONDS or 60; smoke: 3)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_intermixed_args()
    known = targets()
    if args.command == "list":
        print("\n".join(known))
        return 0
    if args.command == "seeds":
        import fuzz_seeds
        for path in fuzz_seeds.write_all(CORPUS):
            print(f"[fuzz] seed {path.relative_to(rsbuild.ROOT)}")
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(known)}")
    names = args.names or known
    try:
        exes = build(names, args.verbose)
    except RuntimeError as e:
        print(f"[fuzz] {e}", flush=True)
        return 1
    if args.command == "build":
        for n, exe in exes.items():
            print(f"[fuzz] {'ready' if exe.suffix == '.py' else 'built'} "
                  f"{exe.relative_to(rsbuild.ROOT)}")
        return 0
    ok = True
    if args.command == "smoke":
        seconds = args.seconds if args.seconds is not None else 3
        for n, exe in exes.items():
            ok &= replay(n, exe)
            with tempfile.TemporaryDirectory(prefix=f"rs-{n}-") as tmp:
                ok &= fuzz(n, exe, seconds, Path(tmp))
    else:
        seconds = args.seconds if args.seconds is not None else int(os.environ.get("FUZZ_SECONDS", "60"))
        for n, exe in exes.items():
            ok &= replay(n, exe)
            ok &= fuzz(n, exe, seconds, OUT / "work" / n)
    print(f"[fuzz] {len(exes)} targets: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
