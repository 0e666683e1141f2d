"""Result lines, summary.csv and summary_totals.csv of the PS runner.

summary.csv keeps RecStore's 25 columns in RecStore's order, then appends recbench's columns
(SUMMARY_COLUMNS). Each client gives one row per phase (load, run); a case that fails or is skipped
gives rows with empty metrics. Cells that hold lists (server_shard_ips, client_ips, log_path) are
joined with ';' so that no cell contains a comma: `awk -F, 'NR>1 && $3=="run" {s+=$18}'` sums
key_ops_per_sec correctly.

summary_totals.csv has one row per transport x repeat x phase over the clients of the case (their
run phases share one window because the runner releases them together through the `go` barrier),
and one `mean` row per transport x phase over the repeats with the spread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recbench import latency_hist, records

RECSTORE_COLUMNS = [
    "transport", "status", "phase", "client_index", "repeat_index", "server_shards",
    "client_processes", "server_shard_ips", "client_ips", "record_count", "value_size",
    "batch_keys", "client_threads_per_process", "runtime_seconds", "distribution", "mode",
    "ops_per_sec", "key_ops_per_sec", "payload_gbps", "mean_us", "p50_us", "p95_us", "p99_us",
    "log_path", "message",
]
NEW_COLUMNS = ["p999_us", "max_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
               "build_type", "index_type", "row_kind", "measured_seconds", "wire"]
# open loop (--target-rate; empty in closed-loop rows): p50_us..max_us are then measured from the
# scheduled send time, these service_* from the actual send (docs/open-loop.md)
OPEN_LOOP_COLUMNS = ["target_rate", "achieved_rate", "late_sends", "service_p50_us",
                     "service_p99_us", "service_p999_us"]
NEW_COLUMNS += OPEN_LOOP_COLUMNS
# runtime_seconds is the configured --runtime-seconds (RecStore's meaning); measured_seconds is
# the window the client measured (its runtime_s), which rates are computed over. wire: native or
# recstore (--wire, the protocol the clients spoke).
# where a row ran and how its GETs were served (docs/lab.md, docs/rdma-shm.md): the verbs device
# kind or shm/tcp, tcg/kvm on lab guests (else native), ps_bench's get_path
LAB_COLUMNS = ["fabric", "accelerator", "get_path"]
NEW_COLUMNS += LAB_COLUMNS
# what served the row: recbench (its ps_server), external (--server-endpoints, a deployment the
# runner did not start) or a --server-binary's file name
NEW_COLUMNS += ["server_impl"]
# the largest share of CPU time the hypervisor took (steal, /proc/stat) on any host of the case
# during the run window, in percent: run rows only, empty where /proc/stat could not be read
NEW_COLUMNS += ["host_steal_pct"]
# fairness over the client threads of a process (ps_bench's thread_batches_min/max): the batches of
# its slowest and of its fastest thread over the mean per thread (1.0 = an even share); in
# summary_totals.csv the slowest and the fastest over the case's clients. Empty where the result
# line has no thread counts (a --benchmark-binary, or ps_bench from before them).
FAIRNESS_COLUMNS = ["slowest_thread_share", "fastest_thread_share"]
NEW_COLUMNS += FAIRNESS_COLUMNS
# how a share is carried over several clients or repeats: the slowest of the slowest, the fastest
# of the fastest
FAIRNESS_PICKS = (("slowest_thread_share", min), ("fastest_thread_share", max))
# how the client's GET rows reached its buffers (ps_bench's client_rows): copy, in_place (row
# buffers, --rdma-rc-rows-in-slots), skipped (--rdma-rc-skip-client-copy) or none (no GETs: load
# rows, --mode insert); empty where the result line does not say (a --benchmark-binary, or
# ps_bench from before 2026-12-06)
NEW_COLUMNS += ["client_rows"]
# the TCP congestion control of the servers' listening sockets, which their connections inherit,
# as their ready lines name it (brpc and gRPC, option tcp_congestion: cubic instead of a BBR on
# loopback by default; docs/parameter-server.md); ';'-joined when servers differ, empty where no
# ready line names one (shm, rdma, a --server-binary, external servers)
NEW_COLUMNS += ["tcp_congestion"]
SUMMARY_COLUMNS = RECSTORE_COLUMNS + NEW_COLUMNS

TOTALS_COLUMNS = [
    "transport", "repeat_index", "phase", "row_kind", "status", "clients_ok", "clients_failed",
    "window_seconds", "ops_per_sec", "key_ops_per_sec", "payload_gbps", "mean_us", "p50_us",
    "p95_us", "p99_us", "p999_us", "max_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
    "repeats", "key_ops_per_sec_stdev", "key_ops_per_sec_min", "key_ops_per_sec_max",
    "latency_merge", "host_steal_pct", *FAIRNESS_COLUMNS,
]

STATUSES = ("success", "skipped", "timeout", "startup_failure", "client_failure",
            "preflight_failure")
FAILURE_STATUSES = ("timeout", "startup_failure", "client_failure", "preflight_failure")
RESULT_PREFIX = "PS_BENCHMARK_RESULT"
INT_FIELDS = ("threads", "batch_size", "records", "batches", "key_ops", "value_size",
              "late_sends", "thread_batches_min", "thread_batches_max")
FLOAT_FIELDS = ("zipfian_alpha", "runtime_s", "throughput_batches_sec", "throughput_keys_sec",
                "mean_us", "p50_us", "p95_us", "p99_us", "p999_us", "max_us", "cpu_user_s",
                "cpu_sys_s", "payload_gbps", "target_rate", "achieved_rate", "service_p50_us",
                "service_p95_us", "service_p99_us", "service_p999_us", "service_max_us")


def parse_result_line(line: str) -> dict[str, Any] | None:
    """One `PS_BENCHMARK_RESULT k=v ...` line -> dict with typed numbers, or None."""
    line = line.strip()
    if not line.startswith(RESULT_PREFIX):
        return None
    fields: dict[str, Any] = dict(records.parse_kv(line[len(RESULT_PREFIX):]))
    for k in INT_FIELDS:
        if k in fields:
            try:
                fields[k] = int(fields[k])
            except ValueError:
                fields[k] = int(float(fields[k]))
    for k in FLOAT_FIELDS:
        if k in fields:
            fields[k] = float(fields[k])
    return fields


def collect_ps_result_rows(text: str) -> list[dict[str, Any]]:
    """Every result line of a client's stdout, in order (load before run)."""
    rows = []
    for line in text.splitlines():
        parsed = parse_result_line(line)
        if parsed is not None:
            rows.append(parsed)
    return rows


def collect_summary_rows(text: str) -> list[dict[str, Any]]:
    """RecStore's `micro` summary lines (`transport=X op=Y phase=Z summary ...`): keep
    phase=measure (warmup is dropped), typed. A --benchmark-binary that prints them gets the run
    row's mean/p50/p95/p99 from its `op=get` line (apply_get_summary)."""
    rows = []
    for line in text.splitlines():
        if " summary " not in f" {line} " or "phase=" not in line:
            continue
        fields: dict[str, Any] = dict(records.parse_kv(line))
        if fields.get("phase") != "measure":
            continue
        for k, v in list(fields.items()):
            if k in ("transport", "op", "phase"):
                continue
            try:
                fields[k] = float(v) if "." in v or "e" in v.lower() else int(v)
            except ValueError:
                pass
        rows.append(fields)
    return rows


# RecStore's op=get summary fields -> summary.csv latency columns
GET_SUMMARY_LATENCY = {"mean_us": "elapsed_us_mean", "p50_us": "elapsed_us_p50",
                       "p95_us": "elapsed_us_p95", "p99_us": "elapsed_us_p99"}


def apply_get_summary(rows: list[dict[str, Any]], text: str) -> bool:
    """RecStore's `op=get phase=measure summary` line of a client's output, if it printed one,
    gives the run rows' mean/p50/p95/p99 (the last such line wins; p999/max are left as the
    result line had them). Returns True when a line was applied: the client's latency histogram,
    if any, no longer describes those columns."""
    gets = [r for r in collect_summary_rows(text) if r.get("op") == "get"]
    if not gets:
        return False
    get = gets[-1]
    for row in rows:
        if row.get("phase") == "run" and row.get("status") == "success":
            for col, key in GET_SUMMARY_LATENCY.items():
                if key in get:
                    row[col] = float(get[key])
    return True


def payload_gbps(key_ops_per_sec: float, value_size: int) -> float:
    """Value bytes only (no keys, no headers), in GB/s (1e9)."""
    return key_ops_per_sec * value_size / 1e9


def fmt(value: object, digits: int = 3) -> str:
    """CSV cell text: '' for None, integers as is, floats with fixed digits."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ""
        return f"{value:.{digits}f}"
    return str(value)


def join_cell(values: object) -> str:
    """List-valued cells are ';'-joined so awk -F, column numbers stay fixed."""
    if isinstance(values, (list, tuple)):
        return ";".join(str(v) for v in values)
    return str(values).replace(",", ";")


def result_row(base: dict[str, Any], parsed: dict[str, Any],
               server_cpu_s: float | None = None) -> dict[str, Any]:
    """summary.csv row for one parsed result line. `base` holds the case columns; the line's own
    value_size and payload_gbps win (a --benchmark-binary may report them; older lines without
    payload_gbps get it from keys/s x value_size)."""
    row = dict(base)
    key_ops = parsed.get("throughput_keys_sec", 0.0)
    value_size = int(parsed.get("value_size") or base["value_size"])
    payload = parsed.get("payload_gbps")
    cpu = None
    if "cpu_user_s" in parsed or "cpu_sys_s" in parsed:
        cpu = parsed.get("cpu_user_s", 0.0) + parsed.get("cpu_sys_s", 0.0)
    row.update({
        "status": "success",
        "phase": parsed.get("phase", ""),
        "ops_per_sec": round(parsed.get("throughput_batches_sec", 0.0), 3),
        "key_ops_per_sec": round(key_ops, 3),
        "value_size": value_size,
        "payload_gbps": round(payload if payload is not None else payload_gbps(key_ops, value_size),
                              6),
        "mean_us": parsed.get("mean_us"), "p50_us": parsed.get("p50_us"),
        "p95_us": parsed.get("p95_us"), "p99_us": parsed.get("p99_us"),
        "p999_us": parsed.get("p999_us"), "max_us": parsed.get("max_us"),
        "client_cpu_s": cpu,
        "server_cpu_s": server_cpu_s if parsed.get("phase") == "run" else None,
        "measured_seconds": parsed.get("runtime_s"),
        "get_path": parsed.get("get_path", ""),
        "client_rows": parsed.get("client_rows", ""),
        "_batches": parsed.get("batches"), "_key_ops": parsed.get("key_ops"),
    })
    row.update({col: parsed[col] for col in OPEN_LOOP_COLUMNS if col in parsed})
    row.update(thread_shares(parsed))
    if cpu and cpu > 0 and parsed.get("key_ops"):
        row["keys_per_cpu_sec"] = round(parsed["key_ops"] / cpu, 3)
    return row


def servers_tcp_congestion(ready_lines: Iterable[str]) -> str:
    """summary.csv's tcp_congestion from the servers' ready lines (column comment above)."""
    names = {records.parse_kv(line).get("tcp_congestion", "") for line in ready_lines}
    return ";".join(sorted(n for n in names if n))


def thread_shares(parsed: dict[str, Any]) -> dict[str, float]:
    """slowest_thread_share / fastest_thread_share of one result line: its slowest and fastest
    thread's batches over the mean per thread (batches / threads); {} when the line does not say."""
    threads, batches = parsed.get("threads") or 0, parsed.get("batches") or 0
    lo, hi = parsed.get("thread_batches_min"), parsed.get("thread_batches_max")
    if threads < 1 or batches < 1 or lo is None or not hi:
        return {}
    mean = batches / threads
    return {"slowest_thread_share": round(lo / mean, 4), "fastest_thread_share": round(hi / mean, 4)}


def share_range(lo: Any, hi: Any) -> str:
    """The slowest and the fastest thread share as printed, `0.59-1.22`; '-' when either is
    missing."""
    lo, hi = _num(lo), _num(hi)
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "-"
    return f"{lo:.2f}-{hi:.2f}"


def failure_row(base: dict[str, Any], status: str, message: str, phase: str = "", client_index: int = -1,
                log_paths: Iterable[str | None] = ()) -> dict[str, Any]:
    assert status in STATUSES, status
    row = dict(base)
    row.update({"status": status, "phase": phase, "client_index": client_index,
                "message": message, "log_path": join_cell(list(log_paths))})
    return row


def _cell(col: str, value: object) -> str:
    if col in ("server_shard_ips", "client_ips", "log_path"):
        return join_cell(value) if value not in (None, "") else ""
    if col in ("ops_per_sec", "key_ops_per_sec", "keys_per_cpu_sec"):
        return fmt(value, 3)
    if col == "payload_gbps":
        return fmt(value, 6)
    if col == "message":
        return "" if value is None else str(value).replace("\n", " ").replace(",", ";")
    return fmt(value, 3)


def write_summary_csv(path: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    records.write_csv(path, SUMMARY_COLUMNS, rows, _cell)


def read_summary_csv(path: str | Path) -> list[dict[str, str]]:
    return records.read_csv(path)


def _num(value: Any) -> float | None:
    if value in (None, ""):
        return None
    return float(value)


def _window(row: dict[str, Any]) -> float:
    """The seconds a row's rates were measured over (the configured runtime when the line did
    not say)."""
    return _num(row.get("measured_seconds")) or _num(row.get("runtime_seconds")) or 0.0


def case_totals(rows: Sequence[dict[str, Any]], transport: str, repeat_index: int | str, phase: str,
                server_cpu_s: float | None = None, case_status: str = "") -> dict[str, Any]:
    """Total of one transport x repeat x phase over its clients' rows (the run total equals the
    awk sum of summary.csv's column 18). Latency: mean_us is the batch-weighted mean (exact). A
    row's `_hist` is the client's latency_hist.Hist (its PS_BENCHMARK_HIST line): when every
    successful client has one, p50..p999 and max_us come from their merged histogram
    (latency_merge=exact); otherwise p50..p999 are the maximum over clients, a bound
    (latency_merge=worst_client), and max_us is exact either way."""
    mine = [r for r in rows if r["transport"] == transport and str(r["repeat_index"]) ==
            str(repeat_index) and r["phase"] == phase]
    ok = [r for r in mine if r["status"] == "success"]
    failed = [r for r in mine if r["status"] in FAILURE_STATUSES]
    out: dict[str, Any] = {"transport": transport, "repeat_index": repeat_index, "phase": phase,
           "row_kind": mine[0].get("row_kind", "") if mine else "",
           "clients_ok": len(ok), "clients_failed": len(failed),
           "status": "success" if ok and not failed else (failed[0]["status"] if failed else
                                                          (mine[0]["status"] if mine else
                                                           case_status)),
           "repeats": 1}
    if not ok:
        return out
    key_ops = sum(_num(r["key_ops_per_sec"]) or 0.0 for r in ok)
    out["key_ops_per_sec"] = key_ops
    out["ops_per_sec"] = sum(_num(r["ops_per_sec"]) or 0.0 for r in ok)
    out["payload_gbps"] = sum(_num(r["payload_gbps"]) or 0.0 for r in ok)
    windows = [_window(r) for r in ok]
    out["window_seconds"] = min(windows)
    weights = [(_num(r["ops_per_sec"]) or 0.0) * w for r, w in zip(ok, windows)]
    means = [m for m in (_num(r["mean_us"]) for r in ok) if m is not None]
    if len(means) == len(ok) and sum(weights) > 0:
        out["mean_us"] = sum(m * w for m, w in zip(means, weights)) / sum(weights)
    mine_hists = [r.get("_hist") for r in ok]
    if mine_hists and all(h is not None and h.count for h in mine_hists):
        merged = latency_hist.Hist()
        for h in mine_hists:
            if h is not None:
                merged.merge(h)
        for col, p in (("p50_us", 50), ("p95_us", 95), ("p99_us", 99), ("p999_us", 99.9)):
            out[col] = merged.percentile_ns(p) / 1e3
        out["max_us"] = merged.max_ns / 1e3
        out["latency_merge"] = "exact"
    else:
        for col in ("p50_us", "p95_us", "p99_us", "p999_us", "max_us"):
            vals = [v for v in (_num(r[col]) for r in ok) if v is not None]
            if vals:
                out[col] = max(vals)
        out["latency_merge"] = "worst_client"
    cpus = [_num(r["client_cpu_s"]) for r in ok if _num(r["client_cpu_s"]) is not None]
    if cpus:
        out["client_cpu_s"] = sum(cpus)
    if server_cpu_s is not None and phase == "run":
        out["server_cpu_s"] = server_cpu_s
    total_cpu = (out.get("client_cpu_s") or 0.0) + (out.get("server_cpu_s") or 0.0)
    if total_cpu > 0 and out["window_seconds"]:
        out["keys_per_cpu_sec"] = key_ops * out["window_seconds"] / total_cpu
    steals = [v for v in (_num(r.get("host_steal_pct")) for r in ok) if v is not None]
    if steals:
        out["host_steal_pct"] = max(steals)
    _extreme_shares(out, ok)
    return out


def _extreme_shares(out: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    """The slowest and the fastest thread share over rows (clients, or repeats), when every row
    has them: a share missing from one row would hide that row's stragglers."""
    for col, pick in FAIRNESS_PICKS:
        vals = [_num(r.get(col)) for r in rows]
        if vals and all(v is not None for v in vals):
            out[col] = pick(v for v in vals if v is not None)


def mean_row(case_rows: Sequence[dict[str, Any]], transport: str, phase: str) -> dict[str, Any]:
    """Mean and spread of key_ops_per_sec over the repeats of one transport x phase."""
    vals = [r for r in case_rows if r["transport"] == transport and r["phase"] == phase
            and r.get("key_ops_per_sec") is not None and r["status"] == "success"]
    out: dict[str, Any] = {"transport": transport, "repeat_index": "mean", "phase": phase,
           "row_kind": vals[0]["row_kind"] if vals else "", "repeats": len(vals),
           "status": "success" if vals else "no_success"}
    if not vals:
        return out
    ks = [v["key_ops_per_sec"] for v in vals]
    out["key_ops_per_sec"] = statistics.mean(ks)
    out["key_ops_per_sec_stdev"] = statistics.stdev(ks) if len(ks) > 1 else 0.0
    out["key_ops_per_sec_min"] = min(ks)
    out["key_ops_per_sec_max"] = max(ks)
    for col in ("ops_per_sec", "payload_gbps", "mean_us", "p50_us", "p95_us", "p99_us",
                "p999_us", "max_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
                "window_seconds"):
        xs = [v[col] for v in vals if v.get(col) is not None]
        if xs:
            out[col] = statistics.mean(xs)
    steals = [v["host_steal_pct"] for v in vals if v.get("host_steal_pct") is not None]
    if steals:
        out["host_steal_pct"] = max(steals)  # the worst repeat
    _extreme_shares(out, vals)  # the worst repeat's
    out["clients_ok"] = sum(v["clients_ok"] for v in vals)
    out["clients_failed"] = sum(v["clients_failed"] for v in vals)
    out["latency_merge"] = ("exact" if all(v.get("latency_merge") == "exact" for v in vals)
                            else "worst_client")
    return out


def build_totals(rows: Sequence[dict[str, Any]],
                 cases: Iterable[tuple[str, int, float | None, str]]) -> list[dict[str, Any]]:
    """All totals rows. `rows` are the summary rows (with their `_hist`); `cases` is a list of
    (transport, repeat_index, server_cpu_s, case_status)."""
    out: list[dict[str, Any]] = []
    transports: list[str] = []
    for transport, repeat_index, server_cpu, status in cases:
        if transport not in transports:
            transports.append(transport)
        for phase in ("load", "run"):
            out.append(case_totals(rows, transport, repeat_index, phase, server_cpu, status))
    for transport in transports:
        for phase in ("load", "run"):
            out.append(mean_row([r for r in out if r["repeat_index"] != "mean"], transport, phase))
    return out


def write_totals_csv(path: str | Path, totals: Sequence[dict[str, Any]]) -> None:
    records.write_csv(path, TOTALS_COLUMNS, totals,
                      lambda col, v: fmt(v, 6 if col == "payload_gbps" else 3))
