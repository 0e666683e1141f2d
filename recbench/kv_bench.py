"""benchmark_kv_engine: `python3 -m recbench.kv_bench` (console script `recbench-kv-bench`).

RecStore's storage-only benchmark, re-implemented: load `record_count` keys into a KV engine,
then run workload a/b/c for `running_seconds` (or `operation_count` operations) on `threads`
pthreads, and print RecStore's two result lines with latency percentiles and CPU time appended:

    YCSB_LOAD_RESULT records= threads= seconds= ops= throughput_ops_sec= p50_us= ... cpu_sys_s=
    YCSB_RESULT workload= distribution= zipfian_alpha= read_mode= threads= records= runtime_s= ops=
        throughput_ops_sec= read_ops= update_ops= index_type= value_size= ... cpu_sys_s=

In the batch read modes a read is one batch of `batch_keys` random keys and `ops` and
`throughput_ops_sec` count keys, as RecStore does; latencies are then per batch call.
`--read_mode=ceiling` runs the same loop gathering rows from a flat array with no index: the
memory-system limit for this access pattern, printed in the same format.

The loops are C (csrc/kv/kv_bench.c); this module parses flags, runs them, formats the lines, and
compares indexes side by side (compare_indexes, used by tools/benchmarks/bench_kv_indexes.py).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
from typing import Any

from recbench import _kv, procfs
from recbench.cli_flags import add_bool_flag, parse_bool, positive_int
from recbench.cpuinfo import binary_size, cpu_model

log = logging.getLogger("recbench.kv_bench")

INDEX_TYPES = ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH", "SSD_EXTENDIBLE_HASH")
HUGE_PAGES = ("auto", "explicit", "thp", "off")
ROW_KERNELS = ("auto", "plain", "avx2", "avx512")
READ_MODES = ("get", "batch_get_flat", "ceiling")
PERCENTILES = ("p50_us", "p95_us", "p99_us", "p999_us", "max_us")


def _workload(text: str) -> str:
    t = text.strip().lower()
    t = t.removeprefix("workload")
    if t not in ("a", "b", "c"):
        raise argparse.ArgumentTypeError(f"workload must be a, b or c (or workloada..c), got {text!r}")
    return t


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="recbench-kv-bench",
        description="Storage-only KV engine benchmark (RecStore's benchmark_kv_engine flags).",
        allow_abbrev=False)
    p.add_argument("--engine", default="dram", choices=("dram", "cceh"),
                   help="dram: DRAM index types; cceh: SSD_EXTENDIBLE_HASH in files under --ssd_path")
    p.add_argument("--index_type", default=None,
                   help="DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH (alias DRAM) or SSD_EXTENDIBLE_HASH "
                        "(aliases SSD, CCEH); default DRAM_EXTENDIBLE_HASH, or SSD_EXTENDIBLE_HASH "
                        "with --engine=cceh")
    p.add_argument("--record_count", type=positive_int, default=1_000_000)
    p.add_argument("--operation_count", type=int, default=None,
                   help="run this many operations (keys in batch modes) instead of a timed run")
    p.add_argument("--running_seconds", type=float, default=None,
                   help="timed run length (default 5 unless --operation_count is given)")
    p.add_argument("--value_size", type=positive_int, default=128)
    p.add_argument("--threads", "--thread_num", dest="threads", type=positive_int, default=1)
    p.add_argument("--load_thread_num", type=int, default=0, help="load threads (0 = --threads)")
    p.add_argument("--workload", type=_workload, default="c",
                   help="a: 50/50 read/update, b: 95/5, c: reads only")
    p.add_argument("--distribution", default="uniform", choices=("uniform", "zipfian"))
    p.add_argument("--zipfian_alpha", type=float, default=0.9,
                   help="theta of YCSB's scrambled zipfian, in (0, 1)")
    p.add_argument("--read_mode", default="get", choices=READ_MODES)
    p.add_argument("--batch_keys", type=positive_int, default=500)
    p.add_argument("--seed", type=int, default=1, help="run thread i seeds its rng with seed+i")
    p.add_argument("--ssd_path", default="",
                   help="directory for SSD_EXTENDIBLE_HASH files (default: a temporary directory, "
                        "removed afterwards)")
    p.add_argument("--load", type=parse_bool, default=True, help="run the load phase (true/false)")
    p.add_argument("--run", type=parse_bool, default=True, help="run the run phase (true/false)")
    p.add_argument("--bind_core", type=parse_bool, default=False,
                   help="pin run thread i to CPU i mod online CPUs (as RecStore does)")
    p.add_argument("--huge_pages", default="auto", choices=HUGE_PAGES,
                   help="pages of the PET line array, the value slab and the ceiling array: auto "
                        "(explicit 2 MiB pages if the hugetlb pool has room, else transparent huge "
                        "pages advised), explicit (or fail), thp, off (4 KiB pages)")
    p.add_argument("--row_kernel", default="auto", choices=ROW_KERNELS,
                   help="build of the batch-read row loops: auto (the best this CPU runs), plain "
                        "(SSE2), avx2 or avx512 — to measure what a CPU without AVX-512 runs")
    p.add_argument("--ceiling_index_lines", type=int, default=0, choices=(0, 1, 2),
                   help="ceiling mode: first touch this many lines of a random 128-byte chunk per "
                        "key in an array the size of DRAM_PET_HASH's lines (what bounds an index "
                        "reading that many lines per key)")
    p.add_argument("--ceiling_index_bytes", type=int, default=0,
                   help="with --ceiling_index_lines: that array's size in bytes instead, a power of "
                        "two >= 128 (0: DRAM_PET_HASH's for --record_count): how the index's size, "
                        "in cache or not, moves the bound")
    add_bool_flag(p, "--paired_ceiling",
                  help="batch_get_flat or ceiling: follow every batch with a plain ceiling batch "
                       "over the same rows, timed apart, and report the ratio of the two "
                       "(pct_of_paired_ceiling): measured in alternation, immune to a machine "
                       "whose speed drifts between runs (the plain ceiling paired with itself "
                       "checks the method: about 100)")
    p.add_argument("--out_buffers", type=positive_int, default=1,
                   help="batch_get_flat or ceiling: write each thread's batches into this many "
                        "output buffers in turn (default 1, always warm); a PS with T client "
                        "threads x D requests in flight writes each reply into one of T x D "
                        "buffers, so --out_buffers T*D measures the gather with that footprint "
                        "of replies and no transport (docs/scale.md)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def config_from_args(args: argparse.Namespace) -> dict:
    """Validate parsed flags into the keyword arguments of recbench._kv.kv_bench."""
    index_type = args.index_type
    if args.engine == "cceh":
        index_type = index_type or "SSD_EXTENDIBLE_HASH"
        if index_type.upper() not in ("SSD_EXTENDIBLE_HASH", "SSD", "CCEH"):
            raise ValueError(f"--engine=cceh needs --index_type=SSD_EXTENDIBLE_HASH, got {index_type}")
    index_type = index_type or "DRAM_EXTENDIBLE_HASH"
    if args.running_seconds is not None and args.running_seconds <= 0:
        raise ValueError(f"--running_seconds must be > 0, got {args.running_seconds}")
    if args.operation_count is not None and args.operation_count < 0:
        raise ValueError(f"--operation_count must be >= 0, got {args.operation_count}")
    if args.running_seconds is None and args.operation_count:
        running_seconds, operation_count = 0.0, args.operation_count
    else:
        running_seconds, operation_count = args.running_seconds or 5.0, 0
    if not 0.0 < args.zipfian_alpha < 1.0:
        raise ValueError(f"--zipfian_alpha must be in (0, 1), got {args.zipfian_alpha}")
    if args.ceiling_index_lines and args.read_mode != "ceiling":
        raise ValueError("--ceiling_index_lines needs --read_mode=ceiling")
    if args.ceiling_index_bytes and not args.ceiling_index_lines:
        raise ValueError("--ceiling_index_bytes needs --ceiling_index_lines 1 or 2")
    if args.paired_ceiling and args.read_mode == "get":
        raise ValueError("--paired_ceiling needs --read_mode=batch_get_flat or ceiling")
    if args.out_buffers > 1 and args.read_mode == "get":
        raise ValueError("--out_buffers needs --read_mode=batch_get_flat or ceiling")
    if args.load_thread_num < 0:
        raise ValueError(f"--load_thread_num must be >= 0, got {args.load_thread_num}")
    if not args.load and args.run and args.read_mode != "ceiling" and \
            index_type.upper() not in ("SSD_EXTENDIBLE_HASH", "SSD", "CCEH"):
        raise ValueError("--load=false leaves a DRAM engine empty: the run would only miss")
    return dict(index_type=index_type, value_size=args.value_size, record_count=args.record_count,
                threads=args.threads, load_threads=args.load_thread_num, workload=args.workload,
                distribution=args.distribution, zipfian_alpha=args.zipfian_alpha,
                read_mode=args.read_mode, batch_keys=args.batch_keys,
                running_seconds=running_seconds, operation_count=operation_count, seed=args.seed,
                bind_core=args.bind_core, path=args.ssd_path or None, load=args.load, run=args.run,
                huge_pages=args.huge_pages, row_kernel=args.row_kernel,
                ceiling_index_lines=args.ceiling_index_lines,
                ceiling_index_bytes=args.ceiling_index_bytes, paired_ceiling=args.paired_ceiling,
                out_buffers=args.out_buffers)


def run(config: dict) -> dict:
    """Run recbench._kv.kv_bench(**config); a CCEH engine without a path gets a temporary
    directory that is removed afterwards. Returns {'load': phase|None, 'run': phase|None}."""
    cfg = dict(config)
    tmp = None
    is_cceh = cfg["index_type"].upper() in ("SSD_EXTENDIBLE_HASH", "SSD", "CCEH")
    if is_cceh and cfg["read_mode"] != "ceiling" and not cfg.get("path"):
        tmp = tempfile.mkdtemp(prefix="recbench_cceh_")
        cfg["path"] = tmp
    try:
        return _kv.kv_bench(**cfg)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1e6 else f"{v:.0f}"
    return str(v)


def _line(tag: str, fields: list[tuple[str, object]]) -> str:
    return tag + " " + " ".join(f"{k}={_fmt(v)}" for k, v in fields)


def _cpu_fields(ph: dict) -> list[tuple[str, object]]:
    cpu = ph["cpu_user_s"] + ph["cpu_sys_s"]
    return [("cpu_user_s", ph["cpu_user_s"]), ("cpu_sys_s", ph["cpu_sys_s"]),
            ("ops_per_cpu_sec", ph["ops"] / cpu if cpu > 0 else 0.0)]


def paired_pct(run: dict) -> tuple[float, float] | None:
    """A paired_ceiling run's speed as a share of its paired ceiling batches: (by mean batch time,
    by p50 batch time), in percent; None for a run without pairing."""
    rd, pc = run["read"], run["paired"]
    if not pc["count"] or not rd["count"] or rd["mean_us"] <= 0 or rd["p50_us"] <= 0:
        return None
    return 100.0 * pc["mean_us"] / rd["mean_us"], 100.0 * pc["p50_us"] / rd["p50_us"]


def _own_time_share(run: dict) -> float:
    """The share of a run's batch time spent in its own batches (1.0 without pairing)."""
    rd, pc = run["read"], run["paired"]
    own, other = rd["mean_us"] * rd["count"], pc["mean_us"] * pc["count"]
    return own / (own + other) if other > 0 and own > 0 else 1.0


def format_lines(config: dict, result: dict) -> list[str]:
    """RecStore's YCSB_LOAD_RESULT / YCSB_RESULT lines (their keys first, in their order), then
    the new keys: latency percentiles per operation type and CPU time."""
    lines = []
    ceiling = config["read_mode"] == "ceiling"
    index = "none" if ceiling else config["index_type"]
    ld = result.get("load")
    if ld:
        f = [("records", config["record_count"]), ("threads", config["load_threads"] or config["threads"]),
             ("seconds", ld["seconds"]), ("ops", ld["ops"]), ("throughput_ops_sec", ld["throughput_ops_sec"]),
             ("index_type", index), ("value_size", config["value_size"])]
        f += [(k, ld["update"][k]) for k in ("mean_us",) + PERCENTILES]
        f += _cpu_fields(ld)
        lines.append(_line("YCSB_LOAD_RESULT", f))
    rn = result.get("run")
    if rn:
        f = [("workload", config["workload"]), ("distribution", config["distribution"]),
             ("zipfian_alpha", config["zipfian_alpha"]), ("read_mode", config["read_mode"]),
             ("threads", config["threads"]), ("records", config["record_count"]),
             ("runtime_s", rn["seconds"]), ("ops", rn["ops"]),
             ("throughput_ops_sec", rn["throughput_ops_sec"]), ("read_ops", rn["read_ops"]),
             ("update_ops", rn["update_ops"]),
             ("index_type", index), ("value_size", config["value_size"]),
             ("batch_keys", config["batch_keys"] if config["read_mode"] != "get" else 1),
             ("batches", rn["batches"]), ("not_found", rn["not_found"]),
             ("latency_per", "batch" if config["read_mode"] != "get" else "op")]
        f += [(k, rn["all"][k]) for k in ("mean_us",) + PERCENTILES]
        for kind in ("read", "update"):
            if rn[kind]["count"]:
                f += [(f"{kind}_{k}", rn[kind][k]) for k in ("mean_us",) + PERCENTILES]
        if config.get("out_buffers", 1) > 1:
            f += [("out_buffers", config["out_buffers"]), ("out_bytes", rn["out_bytes"])]
        if ceiling and config.get("ceiling_index_lines"):
            f += [("ceiling_index_lines", config["ceiling_index_lines"])]
        pct = paired_pct(rn)
        if pct:
            f += [("paired_batches", rn["paired"]["count"]),
                  ("paired_ceiling_mean_us", rn["paired"]["mean_us"]),
                  ("paired_ceiling_p50_us", rn["paired"]["p50_us"]),
                  ("pct_of_paired_ceiling", pct[0]), ("pct_of_paired_ceiling_p50", pct[1])]
        f += _cpu_fields(rn)
        f += _memory_fields(result.get("memory"))
        if result.get("row_kernel"):
            f += [("row_kernel", result["row_kernel"])]
        if result.get("rows_huge_share", -1) >= 0:
            f += [("rows_huge_pct", round(100.0 * result["rows_huge_share"], 1))]
        lines.append(_line("YCSB_RESULT", f))
    return lines


def _memory_fields(mem: dict | None) -> list[tuple[str, object]]:
    """Bytes per key at capacity (index + slab), its overhead over the raw row, and the pages."""
    if not mem:
        return []
    return [("capacity", mem["capacity"]), ("index_bytes", mem["index_bytes"]),
            ("slab_bytes", mem["slab_bytes_at_capacity"]),
            ("bytes_per_key", round(mem["bytes_per_key"], 2)),
            ("overhead_per_key", round(mem["overhead_per_key"], 2)),
            ("index_pages", mem["index_pages"]), ("slab_pages", mem["slab_pages"])]


def compare_indexes(record_count=1_000_000, value_size=512, batch_keys=500, threads=1,
                    running_seconds=3.0, repeats=3, seed=1,
                    index_types=("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH"),
                    huge_pages=("auto",), row_kernel="auto", index_lines=(),
                    index_sizes=(), paired=False) -> dict:
    """Run the ceiling and each index in batch_get_flat mode, for each huge_pages mode, interleaved
    `repeats` times (the machine's noise hits all of them alike), and return per-case medians and
    ratios. With one mode the cases are named 'ceiling', 'DRAM_PET_HASH', ...; with several,
    'ceiling/thp', 'DRAM_PET_HASH/off', ... and each is compared with the ceiling of its mode.
    index_lines (1, 2) adds 'ceiling+1 line', 'ceiling+2 lines': the ceiling that first touches
    that many lines of a random chunk per key (ceiling_index_lines), the bound of an index reading
    that many lines per key. index_sizes (bytes, powers of two) adds 'ceiling+1 line, 4 MiB' and
    so on: the same bound with an array of that size, in cache or not (ceiling_index_bytes).
    pct_of_ceiling_p50 compares batch p50 latencies, which time slices
    lost to other processes on a shared machine do not move.
    paired runs every case with paired_ceiling: its percentages of the ceiling are then the
    medians over repeats of each run's own ratio to the ceiling batches alternated with its own
    (by mean batch time; the p50 and CPU columns likewise; the plain ceiling's is its ratio to
    itself, the method's check, about 100 %), and its keys/s and keys per CPU-second count only
    the share of the run's time spent in its own batches."""
    several = len(huge_pages) > 1
    cases = []
    for hp in huge_pages:
        sfx = f"/{hp}" if several else ""
        cases += [(f"ceiling{sfx}", "ceiling", "DRAM_PET_HASH", hp, 0, 0)]
        cases += [(f"ceiling+{n} line{'s' if n > 1 else ''}{sfx}", "ceiling", "DRAM_PET_HASH", hp, n,
                   0) for n in index_lines]
        cases += [(f"ceiling+1 line, {binary_size(b)}{sfx}", "ceiling", "DRAM_PET_HASH", hp, 1, b)
                  for b in index_sizes]
        cases += [(f"{it}{sfx}", "batch_get_flat", it, hp, 0, 0) for it in index_types]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in cases}
    pages = {}
    kernel = row_kernel
    for rep in range(repeats):
        for name, mode, it, hp, lines, size in cases:
            cfg = dict(index_type=it, value_size=value_size,
                       record_count=record_count, threads=threads, load_threads=0, workload="c",
                       distribution="uniform", zipfian_alpha=0.99, read_mode=mode,
                       batch_keys=batch_keys, running_seconds=running_seconds, operation_count=0,
                       seed=seed + rep, bind_core=False, path=None, load=True, run=True,
                       huge_pages=hp, row_kernel=row_kernel, ceiling_index_lines=lines,
                       ceiling_index_bytes=size,
                       paired_ceiling=paired)
            ticks = procfs.local_cpu_ticks()
            res = run(cfg)
            steal = procfs.steal_pct(ticks, procfs.local_cpu_ticks())
            kernel = res["row_kernel"]
            r, mem = res["run"], res["memory"]
            pages[name] = {k: mem[k] for k in ("index_pages", "slab_pages", "bytes_per_key",
                                                "overhead_per_key")}
            cpu = r["cpu_user_s"] + r["cpu_sys_s"]
            own = _own_time_share(r)
            pct = paired_pct(r)
            samples[name].append({"keys_per_sec": r["throughput_ops_sec"] / own,
                                  "keys_per_cpu_sec": r["ops"] / (cpu * own) if cpu > 0 else 0.0,
                                  "paired_pct": pct[0] if pct else -1.0,
                                  "paired_pct_p50": pct[1] if pct else -1.0,
                                  "batch_p50_us": r["read"]["p50_us"],
                                  "batch_p99_us": r["read"]["p99_us"],
                                  "not_found": r["not_found"],
                                  "rows_huge_pct": 100.0 * res.get("rows_huge_share", -1.0),
                                  "steal_pct": -1.0 if steal is None else steal})
            log.info("repeat %d %s: %.2f M keys/s, %.2f M keys per CPU-second (pages %s/%s, rows "
                     "%.0f %% on huge pages)", rep, name, samples[name][-1]["keys_per_sec"] / 1e6,
                     samples[name][-1]["keys_per_cpu_sec"] / 1e6, mem["index_pages"],
                     mem["slab_pages"], samples[name][-1]["rows_huge_pct"])
    med = {name: {k: statistics.median(s[k] for s in runs) for k in runs[0]}
           for name, runs in samples.items()}
    for name, _mode, _it, hp, _lines, _size in cases:
        m, ceil = med[name], med[f"ceiling/{hp}" if several else "ceiling"]
        if m["paired_pct"] >= 0:
            m["pct_of_ceiling"] = m["pct_of_ceiling_cpu"] = m["paired_pct"]
            m["pct_of_ceiling_p50"] = m["paired_pct_p50"]
        else:
            m["pct_of_ceiling"] = 100.0 * m["keys_per_sec"] / ceil["keys_per_sec"]
            m["pct_of_ceiling_cpu"] = 100.0 * m["keys_per_cpu_sec"] / ceil["keys_per_cpu_sec"]
            m["pct_of_ceiling_p50"] = 100.0 * ceil["batch_p50_us"] / m["batch_p50_us"]
        m.update(pages[name])
        m["steal_pct_max"] = max(s["steal_pct"] for s in samples[name])  # the worst repeat
    from recbench.build import build_info
    info = build_info()
    out = {"params": dict(record_count=record_count, value_size=value_size, batch_keys=batch_keys,
                          threads=threads, running_seconds=running_seconds, repeats=repeats,
                          row_kernel=kernel, huge_pages=list(huge_pages),
                          index_lines=list(index_lines), index_sizes=list(index_sizes),
                          paired=paired,
                          system_huge_pages=info.get("huge_pages"), cpu=cpu_model()),
           "median": med, "samples": samples}
    if "DRAM_PET_HASH" in med and "DRAM_EXTENDIBLE_HASH" in med:
        pet, eh = med["DRAM_PET_HASH"], med["DRAM_EXTENDIBLE_HASH"]
        out["pet_over_eh"] = pet["keys_per_sec"] / eh["keys_per_sec"]
        out["pet_over_eh_cpu"] = pet["keys_per_cpu_sec"] / eh["keys_per_cpu_sec"]
    return out


def format_comparison(res: dict) -> str:
    p = res["params"]
    rows = [(f"batch_get_flat, batch_keys={p['batch_keys']}, value_size={p['value_size']}, "
             f"record_count={p['record_count']}, threads={p['threads']}, uniform keys, "
             f"{p['running_seconds']:g} s per run, median of {p['repeats']} interleaved repeats, "
             f"row kernel {p.get('row_kernel', '?')}, CPU {p.get('cpu', '?')}"),
            "",
            *([("paired: every case alternated its batches with ceiling batches over the same rows "
                "in one run; its % of ceiling is the median of those runs' own ratios (the "
                "ceiling's own, about 100 %, checks the method), and its keys/s counts only its "
                "own batches' share of the time"), ""] if p.get("paired") else []),
            (f"| {'case':<32} | {'M keys/s':>9} | {'% of ceiling':>12} | {'M keys/CPU-s':>12} | "
             f"{'% of ceiling (CPU)':>18} | {'batch p50 us':>12} | {'% of ceiling (p50)':>18} | "
             f"{'batch p99 us':>12} | {'B/key':>7} | {'pages (index/slab)':>18} | "
             f"{'rows on huge pages':>18} | {'steal % (max)':>13} |"),
            (f"|{'-' * 34}|{'-' * 11}|{'-' * 14}|{'-' * 14}|{'-' * 20}|{'-' * 14}|{'-' * 20}|"
             f"{'-' * 14}|{'-' * 9}|{'-' * 20}|{'-' * 20}|{'-' * 15}|")]
    for name, m in res["median"].items():
        pg = f"{m.get('index_pages', '?')}/{m.get('slab_pages', '?')}"
        huge = m.get("rows_huge_pct", -100.0)
        hp = f"{huge:.0f} %" if huge >= 0 else "?"
        st = m.get("steal_pct_max", -1.0)
        steal = f"{st:.1f} %" if st >= 0 else "?"
        rows.append(f"| {name:<32} | {m['keys_per_sec'] / 1e6:>9.2f} | {m['pct_of_ceiling']:>11.1f}% | "
                    f"{m['keys_per_cpu_sec'] / 1e6:>12.2f} | {m['pct_of_ceiling_cpu']:>17.1f}% | "
                    f"{m['batch_p50_us']:>12.1f} | {m['pct_of_ceiling_p50']:>17.1f}% | "
                    f"{m['batch_p99_us']:>12.1f} | "
                    f"{m.get('bytes_per_key', 0):>7.1f} | {pg:>18} | {hp:>18} | {steal:>13} |")
    if p.get("system_huge_pages"):
        rows += ["", f"system huge pages: {p['system_huge_pages']}"]
    worst = max((m.get("steal_pct_max", -1.0) for m in res["median"].values()), default=-1.0)
    if worst >= procfs.STEAL_WARN_PCT:
        rows += ["", (f"warning: host steal reached {worst:.1f} % in a run (the hypervisor ran "
                      "other work on these CPUs): the ratios between cases are still comparable "
                      "only if every case saw about the same, see the steal column")]
    if "pet_over_eh" in res:
        rows += ["", (f"PET/EH: {res['pet_over_eh']:.2f}x keys/s, {res['pet_over_eh_cpu']:.2f}x keys per "
                      f"CPU-second (RecStore publishes 51.96 / 19.45 = 2.67x, 16 threads, 300k records)")]
    return "\n".join(rows)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(name)s: %(message)s")
    try:
        config = config_from_args(args)
    except ValueError as e:
        print(f"recbench-kv-bench: error: {e}", file=sys.stderr)
        return 2
    log.info("config %s", config)
    try:
        result = run(config)
    except (ValueError, TypeError) as e:
        print(f"recbench-kv-bench: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 — engine errors (capacity, I/O) end the run with a clear line
        print(f"recbench-kv-bench: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    for line in format_lines(config, result):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
