"""KV engine comparison (`tools/benchmarks/run_kvengine_compare.py`): the YCSB driver per
engine × workload × repeat, each run in a fresh data directory, one summary.csv.

Engines: kvdb, cceh, basic (built in) and rocksdb, leveldb, lmdb, sqlite, wiredtiger. Each run is
`python3 -m recbench.ycsb -load -run -db <db> -threads N -P <workload> -p ...` with the engine's
path property pointing at `<output>/data/<workload>_<engine>_r<i>`; with
`--read-mode batch_get_flat`, kvdb runs `python3 -m recbench.kv_bench --read_mode=batch_get_flat`
(recbench's benchmark_kv_engine) and the other engines run the YCSB driver with batched reads
(`ycsb.batch=true ycsb.batch_size=<batch-keys>`: RocksDB multi-get, one LMDB/SQLite/WiredTiger
read transaction or LevelDB snapshot per batch).

Outputs under --output-dir: summary.csv (RecStore's 18 columns in order, then read_mode,
batch_keys, run_p50_us, run_p99_us, cpu_user_s, cpu_sys_s; rewritten after every run),
run_config.json, logs/<run>.log (command, full output, wall time). A failing run gets its
exit code and the tail of its output; the other runs go on; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from recbench import records, workloads
from recbench.launch import SOURCE_ROOT
from recbench.ycsb_report import parse_report

log = logging.getLogger("recbench.bench.kvengine_compare")

ENGINES = ("kvdb", "cceh", "basic", "rocksdb", "leveldb", "lmdb", "sqlite", "wiredtiger")
# engine -> (path property, path below the run's data directory ("" = the directory itself))
PATH_PROPS = {
    "kvdb": ("hybridkv.path", ""),
    "cceh": ("cceh.path", ""),
    "rocksdb": ("rocksdb.dbname", ""),
    "leveldb": ("leveldb.dbname", ""),
    "lmdb": ("lmdb.dbpath", ""),
    "sqlite": ("sqlite.dbpath", "ycsb.sqlite3"),
    "wiredtiger": ("wiredtiger.home", ""),
}
ENGINE_DEFAULTS = {
    "kvdb": ["hybridkv.mode=perf", "hybridkv.read_return=none"],
    "basic": ["basic.silent=true"],
}
COLUMNS = [
    "workload", "engine", "db", "repeat", "record_count", "operation_count", "threads", "phase",
    "exit_code", "load_runtime_sec", "load_operations", "load_throughput_ops_sec",
    "run_runtime_sec", "run_operations", "run_throughput_ops_sec", "data_path", "log_path",
    "error_tail",
    # recbench additions, after RecStore's columns
    "read_mode", "batch_keys", "run_p50_us", "run_p99_us", "cpu_user_s", "cpu_sys_s",
]


@dataclass
class RunSpec:
    workload: str
    workload_path: str
    engine: str
    repeat: int
    data_path: Path
    log_path: Path
    cmd: list[str]
    db: str
    program: str  # "ycsb" or "kv_bench"
    extra: dict = field(default_factory=dict)


def _kv_pair(text: str, what: str) -> str:
    if "=" not in text or text.startswith("="):
        raise argparse.ArgumentTypeError(f"{what} '{text}': expected KEY=VALUE")
    return text


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="run_kvengine_compare.py", allow_abbrev=False,
        description="Compare KV engines with the YCSB driver (one fresh data directory per run).")
    ap.add_argument("--build", action="store_true", help="run `make build` in the source tree first")
    ap.add_argument("--engines", nargs="+", default=["kvdb", "cceh"], metavar="ENGINE",
                    help=f"engines to run (default kvdb cceh); any of: {' '.join(ENGINES)}")
    ap.add_argument("--workloads", nargs="+", default=["workloada"], metavar="WORKLOAD",
                    help="shipped workload names (workloada..workloadf, or a..f) or property files")
    ap.add_argument("--record-count", type=int, default=1000)
    ap.add_argument("--operation-count", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--output-dir", default=None,
                    help="default results/ycsb_compare_<MMDDHHMM> under the current directory")
    ap.add_argument("--keep-data", action="store_true",
                    help="keep an existing data directory of the same run instead of removing it")
    ap.add_argument("--extra-prop", action="append", default=[], metavar="KEY=VALUE",
                    type=lambda s: _kv_pair(s, "--extra-prop"), help="YCSB property for every engine")
    ap.add_argument("--engine-prop", action="append", default=[], metavar="ENGINE:KEY=VALUE",
                    help="YCSB property for one engine")
    ap.add_argument("--read-mode", choices=["get", "batch_get_flat"], default="get",
                    help="get: YCSB single-key reads; batch_get_flat: kvdb through recbench.kv_bench "
                         "batch_get_flat, the others with YCSB batched reads")
    ap.add_argument("--batch-keys", type=int, default=500, help="keys per batch (batch_get_flat)")
    ap.add_argument("--index-type", default="DRAM_PET_HASH",
                    help="kvdb index (hybridkv.index_type / kv_bench --index_type)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return ap


def _validate(ap: argparse.ArgumentParser, args) -> dict[str, list[str]]:
    for e in args.engines:
        if e not in ENGINES:
            ap.error(f"--engines: unknown engine '{e}' (known: {', '.join(ENGINES)})")
    for name, v in (("--record-count", args.record_count), ("--operation-count", args.operation_count),
                    ("--threads", args.threads), ("--repeat", args.repeat),
                    ("--batch-keys", args.batch_keys)):
        if v < 1:
            ap.error(f"{name} {v}: must be >= 1")
    per_engine: dict[str, list[str]] = {}
    for item in args.engine_prop:
        eng, sep, kv = item.partition(":")
        if not sep or "=" not in kv or kv.startswith("="):
            ap.error(f"--engine-prop '{item}': expected ENGINE:KEY=VALUE")
        if eng not in ENGINES:
            ap.error(f"--engine-prop '{item}': unknown engine '{eng}' (known: {', '.join(ENGINES)})")
        if eng not in args.engines:
            ap.error(f"--engine-prop '{item}': engine '{eng}' is not in --engines")
        per_engine.setdefault(eng, []).append(kv)
    return per_engine


def _workload_file_props(path: str) -> dict[str, str]:
    props = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, _, v = line.partition(sep)
                props[k.strip()] = v.strip()
                break
    return props


def _kv_bench_cmd(args, workload_path: str, data: Path, engine_props: list[str]) -> list[str]:
    """kvdb under --read-mode batch_get_flat: recbench.kv_bench (RecStore's benchmark_kv_engine
    flags), counted run of operation_count keys. Rows are the size a YCSB record would have in
    kvdb's perf mode (fieldcount * fieldlength, or hybridkv.synthetic_bytes), rounded up to whole
    float32; the workload letter (a, b or c; reads only for the others) and the request
    distribution (zipfian with YCSB's constant 0.99, else uniform) come from the workload file."""
    wl = _workload_file_props(workload_path)
    all_props = dict(p.split("=", 1) for p in args.extra_prop + engine_props)
    wl.update(all_props)
    fieldcount = int(wl.get("fieldcount", 10))
    fieldlength = int(wl.get("fieldlength", 100))
    value_size = int(all_props.get("hybridkv.synthetic_bytes", 0)) or fieldcount * fieldlength
    value_size = (value_size + 3) // 4 * 4
    letter = Path(workload_path).name.replace("workload", "")
    workload = letter if letter in ("a", "b", "c") else "c"
    zipfian = wl.get("requestdistribution", "uniform") == "zipfian"
    index_type = all_props.get("hybridkv.index_type", args.index_type)
    cmd = [sys.executable, "-m", "recbench.kv_bench"]
    if index_type.upper() in ("SSD_EXTENDIBLE_HASH", "SSD", "CCEH"):
        cmd += ["--engine=cceh", f"--ssd_path={data}"]
    cmd += [f"--index_type={index_type}",
            f"--record_count={args.record_count}", f"--operation_count={args.operation_count}",
            f"--threads={args.threads}", f"--value_size={value_size}", f"--workload={workload}",
            f"--distribution={'zipfian' if zipfian else 'uniform'}"]
    if zipfian:
        cmd.append(f"--zipfian_alpha={wl.get('zipfianconstant', '0.99')}")
    cmd += ["--read_mode=batch_get_flat", f"--batch_keys={args.batch_keys}"]
    return cmd


def plan(args, per_engine: dict[str, list[str]], out: Path) -> list[RunSpec]:
    specs = []
    for repeat in range(args.repeat):
        for wl in args.workloads:
            wpath = workloads.resolve(wl)
            wname = Path(wpath).name
            for engine in args.engines:
                run = f"{wname}_{engine}_r{repeat}"
                data = out / "data" / run
                logp = out / "logs" / f"{run}.log"
                eprops = per_engine.get(engine, [])
                if args.read_mode == "batch_get_flat" and engine == "kvdb":
                    cmd = _kv_bench_cmd(args, wpath, data, eprops)
                    specs.append(RunSpec(wname, wpath, engine, repeat, data, logp, cmd, "kv_bench",
                                         "kv_bench"))
                    continue
                props = [f"recordcount={args.record_count}", f"operationcount={args.operation_count}",
                         "measurementtype=hdrhistogram"]
                props += ENGINE_DEFAULTS.get(engine, [])
                if engine == "kvdb":
                    props.append(f"hybridkv.index_type={args.index_type}")
                if args.read_mode == "batch_get_flat":
                    props += ["ycsb.batch=true", f"ycsb.batch_size={args.batch_keys}"]
                if engine in PATH_PROPS:
                    key, sub = PATH_PROPS[engine]
                    props.append(f"{key}={data / sub if sub else data}")
                props += args.extra_prop + eprops
                cmd = [sys.executable, "-m", "recbench.ycsb", "-load", "-run", "-db", engine,
                       "-threads", str(args.threads), "-P", wpath]
                for p in props:
                    cmd += ["-p", p]
                specs.append(RunSpec(wname, wpath, engine, repeat, data, logp, cmd, engine, "ycsb"))
    return specs


def parse_kv_bench(text: str) -> dict:
    """`YCSB_LOAD_RESULT k=v ...` and `YCSB_RESULT k=v ...` lines (the last of each) from
    recbench.kv_bench, in the shape of parse_report()."""
    out: dict = {}
    for line in text.splitlines():
        for tag, phase in (("YCSB_LOAD_RESULT", "load"), ("YCSB_RESULT", "run")):
            if line.startswith(tag + " "):
                kv = records.parse_kv(line)
                out[phase] = kv
    res: dict = {}
    for phase, kv in out.items():
        def num(*keys, kv=kv):
            for k in keys:
                if k in kv and kv[k] not in ("", "nan"):
                    try:
                        return float(kv[k])
                    except ValueError:
                        return None
            return None
        res[phase] = {
            "runtime_s": num("runtime_s", "seconds"),
            "operations": num("ops"),
            "throughput": num("throughput_ops_sec"),
            "p50_us": num("p50_us"),
            "p99_us": num("p99_us"),
            "cpu_user_s": num("cpu_user_s"),
            "cpu_sys_s": num("cpu_sys_s"),
        }
    return res


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6f}".rstrip("0").rstrip(".")
    return str(v)


def error_tail(text: str) -> str:
    """Last 5 non-empty lines joined by " | ", at most 1000 characters; commas become ';' so the
    cell never needs CSV quoting and `awk -F,` / `column -s,` column numbers stay right."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-5:])[:1000].replace(",", ";")


def row_for(spec: RunSpec, args, rc: int, text: str) -> dict:
    row = {c: "" for c in COLUMNS}
    row.update(workload=spec.workload, engine=spec.engine, db=spec.db, repeat=spec.repeat,
               record_count=args.record_count, operation_count=args.operation_count,
               threads=args.threads, phase="load-run", exit_code=rc, data_path=str(spec.data_path),
               log_path=str(spec.log_path), read_mode=args.read_mode,
               batch_keys=args.batch_keys if args.read_mode == "batch_get_flat" else "")
    if spec.program == "ycsb":
        rep = parse_report(text)
        load, run = rep.get("load", {}), rep.get("run", {})
        all_ops = run.get("ops", {}).get("ALL", {})
        row.update(load_runtime_sec=_fmt(load.get("runtime_s")),
                   load_operations=_fmt(load.get("operations")),
                   load_throughput_ops_sec=_fmt(load.get("throughput")),
                   run_runtime_sec=_fmt(run.get("runtime_s")),
                   run_operations=_fmt(run.get("operations")),
                   run_throughput_ops_sec=_fmt(run.get("throughput")),
                   run_p50_us=_fmt(all_ops.get("p50_us")), run_p99_us=_fmt(all_ops.get("p99_us")),
                   cpu_user_s=_fmt(run.get("cpu_user_s")), cpu_sys_s=_fmt(run.get("cpu_sys_s")))
    else:
        rep = parse_kv_bench(text)
        load, run = rep.get("load", {}), rep.get("run", {})
        ops = lambda v: _fmt(int(v)) if v is not None else ""
        row.update(load_runtime_sec=_fmt(load.get("runtime_s")), load_operations=ops(load.get("operations")),
                   load_throughput_ops_sec=_fmt(load.get("throughput")),
                   run_runtime_sec=_fmt(run.get("runtime_s")), run_operations=ops(run.get("operations")),
                   run_throughput_ops_sec=_fmt(run.get("throughput")),
                   run_p50_us=_fmt(run.get("p50_us")), run_p99_us=_fmt(run.get("p99_us")),
                   cpu_user_s=_fmt(run.get("cpu_user_s")), cpu_sys_s=_fmt(run.get("cpu_sys_s")))
    if rc == 0 and not row["run_throughput_ops_sec"]:
        row["exit_code"] = rc = 1
        text += "\nkv_compare: the run printed no result lines"
    if rc != 0:
        row["error_tail"] = error_tail(text)
    return row


def write_summary(path: Path, rows: list[dict]) -> None:
    records.write_csv(path, COLUMNS, rows)


def execute(spec: RunSpec, keep_data: bool) -> tuple[int, str]:
    if spec.data_path.exists() and not keep_data:
        shutil.rmtree(spec.data_path)
    spec.data_path.mkdir(parents=True, exist_ok=True)
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(spec.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", check=False)
        rc, text = p.returncode, p.stdout
    except OSError as e:
        rc, text = 127, f"kv_compare: cannot start {spec.cmd[0]}: {e}"
    wall = time.monotonic() - t0
    with open(spec.log_path, "w") as f:
        f.write(f"command: {shlex.join(spec.cmd)}\n")
        f.write(text)
        if not text.endswith("\n"):
            f.write("\n")
        f.write(f"exit_code={rc}\nwall_runtime_sec={wall:.3f}\n")
    return rc, text


def console_table(rows: list[dict]) -> str:
    head = ["workload", "engine", "read_mode", "exit", "load ops/s", "run ops/s", "run p50 us",
            "run p99 us"]
    body = []
    for r in rows:
        def n(v):
            try:
                return f"{float(v):,.0f}"
            except (TypeError, ValueError):
                return "-"

        def u(v):
            try:
                return f"{float(v):.2f}"
            except (TypeError, ValueError):
                return "-"
        body.append([r["workload"], r["engine"], r["read_mode"], str(r["exit_code"]),
                     n(r["load_throughput_ops_sec"]), n(r["run_throughput_ops_sec"]),
                     u(r["run_p50_us"]), u(r["run_p99_us"])])
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i >= 3 else c.ljust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def _build() -> None:
    root = SOURCE_ROOT
    if not (root / "Makefile").exists():
        raise SystemExit(f"--build: no Makefile at {root} (recbench is not a source checkout)")
    log.info("building: make -C %s build", root)
    r = subprocess.run(["make", "-C", str(root), "build"], check=False)
    if r.returncode != 0:
        raise SystemExit(f"--build: make build failed with exit code {r.returncode}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[kv_compare] %(message)s")
    ap = build_parser()
    args = ap.parse_args(argv)
    per_engine = _validate(ap, args)
    out = Path(args.output_dir).resolve() if args.output_dir else \
        records.new_result_dir(Path("results").resolve(), "ycsb_compare_", create=not args.dry_run)
    try:
        specs = plan(args, per_engine, out)
    except FileNotFoundError as e:
        ap.error(str(e))
    if args.dry_run:
        for s in specs:
            print(shlex.join(s.cmd))
        return 0
    if args.build:
        _build()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write_probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        ap.error(f"--output-dir {out}: not writable: {e.strerror or e}")
    (out / "run_config.json").write_text(json.dumps({
        "argv": sys.argv if argv is None else argv, "args": vars(args),
        "python": sys.executable, "cwd": os.getcwd(),
        "runs": [{"run": s.log_path.stem, "cmd": s.cmd} for s in specs]}, indent=2, default=str))
    rows: list[dict] = []
    summary = out / "summary.csv"
    for i, spec in enumerate(specs, 1):
        log.info("[%d/%d] %s %s r%d", i, len(specs), spec.workload, spec.engine, spec.repeat)
        rc, text = execute(spec, args.keep_data)
        row = row_for(spec, args, rc, text)
        if row["exit_code"] != 0:
            log.warning("%s %s r%d failed (exit %s): %s", spec.workload, spec.engine, spec.repeat,
                        row["exit_code"], row["error_tail"])
        rows.append(row)
        write_summary(summary, rows)
    print(console_table(rows))
    print(f"summary: {summary}")
    failed = [r for r in rows if r["exit_code"] != 0]
    if failed:
        print(f"{len(failed)} of {len(rows)} runs failed; logs: {out / 'logs'}", file=sys.stderr)
    return 1 if failed else 0
