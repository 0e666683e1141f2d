"""Parameter sweep over the PS runner: run tools/benchmarks/run_benchmark_ps.py once per value of
one runner flag and collect rate, latency and CPU time per transport.

`tools/benchmarks/sweep_ps.py --param NAME --values a,b,c [--rounds N] [--out-dir DIR] [runner
flags ...]` runs `run_benchmark_ps.py [runner flags] --NAME v --output-dir DIR/NAME_v` for each
value v, in order, then writes DIR/sweep.csv (columns in recbench.analysis.SWEEP_COLUMNS: value,
transport, keys/s (median over repeats) and its spread, p99, client and server CPU seconds, keys
per CPU-second, and the summary.csv it came from), DIR/sweep.rate.png and DIR/sweep.cpu.png.

--rounds N (default 1) runs the whole list of values N times, a, b, c, a, b, c, ..., each run into
DIR/NAME_v/round_R, and pools each value's repeats over its rounds. On a shared machine the speed
drifts over minutes; back-to-back repeats of one value (the runner's --repeat) all land in the
same minute and carry its drift into that value alone, while rounds spread every minute's drift
over all values, so the curve's shape is the parameter's and not the clock's.

sweep.csv is rewritten after every runner run, so an interrupted sweep keeps what it measured. A
run that left no summary.csv is logged and counted: a value with no summary at all is recorded
with status `runner_failed`, and the sweep goes on; the exit code is 1 then, 0 otherwise (rows the
runner itself marked failed or skipped are reported in sweep.csv and do not fail the sweep).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time
from pathlib import Path

from recbench import analysis, records
from recbench.launch import SOURCE_ROOT

log = logging.getLogger("recbench.bench.sweep_ps")

ROOT = SOURCE_ROOT
DEFAULT_RUNNER = ROOT / "tools" / "benchmarks" / "run_benchmark_ps.py"
RESERVED = ("--output-dir",)


def flag_name(param: str) -> str:
    """'batch_keys', 'batch-keys' or '--batch-keys' -> '--batch-keys' (the runner's spelling)."""
    name = param.strip().lstrip("-").replace("_", "-")
    if not name or not all(c.isalnum() or c == "-" for c in name):
        raise ValueError(f"--param '{param}' is not a runner flag name (e.g. batch-keys)")
    return "--" + name


def parse_values(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values:
        raise ValueError(f"--values '{text}' holds no value (give a comma list, e.g. 64,256,1024)")
    if len(set(values)) != len(values):
        raise ValueError(f"--values '{text}' repeats a value")
    for v in values:
        if "/" in v or v in (".", ".."):
            raise ValueError(f"--values: '{v}' cannot name an output directory")
    return values


def check_passthrough(flag: str, runner_args: list[str]) -> None:
    for a in runner_args:
        name = a.split("=", 1)[0]
        if name == flag or name.replace("_", "-") == flag:
            raise ValueError(f"runner flag {name} is the swept parameter; give it with --values only")
        if name in RESERVED:
            raise ValueError(f"runner flag {name} is set per point by the sweep; use --out-dir")


def check_rounds(rounds: int) -> None:
    if rounds < 1:
        raise ValueError(f"--rounds {rounds}: give 1 or more")


def write_sweep_csv(rows: list[dict], path: Path) -> None:
    records.write_csv(path, analysis.SWEEP_COLUMNS, rows,
                      lambda _c, v: f"{v:.6g}" if isinstance(v, float) else ("" if v is None else str(v)))


def run_sweep(param: str, values: list[str], out_dir: Path, runner_args: list[str],
              runner: Path = DEFAULT_RUNNER, python: str = sys.executable,
              rounds: int = 1) -> tuple[list[dict], int]:
    """Run every point `rounds` times, round by round; returns (sweep rows, number of runner runs
    that left no summary.csv)."""
    flag = flag_name(param)
    name = flag[2:]
    check_passthrough(flag, runner_args)
    check_rounds(rounds)
    if not runner.exists():
        raise FileNotFoundError(f"PS runner {runner} does not exist (give --runner PATH)")
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, list[Path]] = {v: [] for v in values}
    exits: dict[str, list[int]] = {v: [] for v in values}
    by_value: dict[str, list[dict]] = {}  # each value's rows, redone when one of its runs ends
    failed, total, done = 0, rounds * len(values), 0
    for rnd in range(1, rounds + 1):
        for v in values:
            done += 1
            point = out_dir / f"{name}_{v}"
            log_path = out_dir / f"{name}_{v}.runner.log"
            if rounds > 1:
                point, log_path = point / f"round_{rnd}", out_dir / f"{name}_{v}.round_{rnd}.runner.log"
            cmd = [python, str(runner), *runner_args, flag, v, "--output-dir", str(point)]
            log.info("[%d/%d] %s=%s%s: %s", done, total, name, v,
                     f" (round {rnd}/{rounds})" if rounds > 1 else "", " ".join(cmd))
            t0 = time.monotonic()
            with open(log_path, "w") as lf:
                rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    check=False).returncode
            log.info("[%d/%d] runner exit %d after %.1fs", done, total, rc, time.monotonic() - t0)
            if (point / "summary.csv").exists():
                summaries[v].append(point / "summary.csv")
            else:
                failed += 1
                exits[v].append(rc)
                log.error("runner left no %s; its output is in %s", point / "summary.csv", log_path)
            by_value[v] = point_rows(name, v, summaries[v], exits[v])
            write_sweep_csv([r for u in values for r in by_value.get(u, [])], out_dir / "sweep.csv")
    return [r for u in values for r in by_value.get(u, [])], failed


def point_rows(name: str, value: str, summaries: list[Path], exits: list[int]) -> list[dict]:
    """sweep.csv rows of one value from the summaries its runs left (and the exit codes of those
    that left none)."""
    if not summaries:
        return [dict(param=name, value=value, transport="", status=f"runner_failed (exit {exits[-1]})",
                      repeats=0, summary_csv="")]
    try:
        return analysis.sweep_rows(name, value, summaries)
    except analysis.SummaryFormatError as e:
        log.error("%s", e)
        return [dict(param=name, value=value, transport="", status="bad_summary", repeats=0,
                     summary_csv=";".join(str(s) for s in summaries))]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sweep_ps.py", allow_abbrev=False,
        description="Run the PS runner once per value of one flag; write sweep.csv and rate/CPU plots. "
                    "Flags not listed here are passed to run_benchmark_ps.py unchanged.")
    ap.add_argument("--param", required=True, help="runner flag to sweep, e.g. batch-keys or "
                    "client-threads-per-process")
    ap.add_argument("--values", required=True, help="comma list of values, e.g. 64,256,1024")
    ap.add_argument("--out-dir", type=Path, default=None,
                    help="sweep directory (default results/sweep_<param>_MMDDHHMM)")
    ap.add_argument("--runner", type=Path, default=DEFAULT_RUNNER, help="path of run_benchmark_ps.py")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the list of values this many times, round by round, and pool each "
                         "value's repeats (spreads the machine's drift over all values)")
    return ap


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="[sweep] %(message)s")
    ap = build_parser()
    args, runner_args = ap.parse_known_args(argv)
    if runner_args[:1] == ["--"]:
        runner_args = runner_args[1:]
    try:
        flag = flag_name(args.param)
        values = parse_values(args.values)
        check_passthrough(flag, runner_args)
        check_rounds(args.rounds)
    except ValueError as e:
        ap.error(str(e))
    out_dir = args.out_dir or records.new_result_dir(ROOT / "results", f"sweep_{flag[2:]}_")
    try:
        _rows, failed = run_sweep(args.param, values, out_dir, runner_args, runner=args.runner,
                                  rounds=args.rounds)
    except FileNotFoundError as e:
        print(f"sweep_ps.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sweep_ps.py: interrupted; points measured so far are in {out_dir / 'sweep.csv'}",
              file=sys.stderr)
        return 130
    sweep = analysis.load_sweep(out_dir / "sweep.csv")
    print(f"[output] sweep_csv={out_dir / 'sweep.csv'}")
    if (sweep["status"] == "success").any():
        rate, cpu = analysis.plot_sweep(sweep, out_dir / "sweep.rate.png", out_dir / "sweep.cpu.png")
        print(f"[output] rate_png={rate}\n[output] cpu_png={cpu}")
    else:
        log.error("no sweep point has successful run rows; no plots drawn")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
