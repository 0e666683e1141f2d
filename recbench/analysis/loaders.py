"""Loaders of recbench's result files into typed pandas DataFrames (the file shapes are in
recbench.analysis's package docstring), and the one DataFrame CSV writer."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from recbench.runner import results

# the producer's schema (recbench.runner.results writes these files): one list, read here
PS_RECSTORE_COLUMNS = list(results.RECSTORE_COLUMNS)
PS_EXTRA_COLUMNS = list(results.NEW_COLUMNS)
PS_COLUMNS = PS_RECSTORE_COLUMNS + PS_EXTRA_COLUMNS
FAIRNESS_COLUMNS = list(results.FAIRNESS_COLUMNS)
FAIRNESS_PICKS = results.FAIRNESS_PICKS
PS_STATUSES = list(results.STATUSES)
PS_INT_COLUMNS = ["client_index", "repeat_index", "server_shards", "client_processes", "record_count",
                  "value_size", "batch_keys", "client_threads_per_process"]
PS_FLOAT_COLUMNS = ["runtime_seconds", "ops_per_sec", "key_ops_per_sec", "payload_gbps", "mean_us",
                    "p50_us", "p95_us", "p99_us", "p999_us", "max_us", "client_cpu_s", "server_cpu_s",
                    "keys_per_cpu_sec", "measured_seconds", "target_rate", "achieved_rate",
                    "late_sends", "service_p50_us", "service_p99_us", "service_p999_us",
                    "host_steal_pct", *FAIRNESS_COLUMNS]
PS_LIST_COLUMNS = ["server_shard_ips", "client_ips", "log_path"]
PS_CATEGORY_COLUMNS = ["transport", "phase", "distribution", "mode", "build_type", "index_type",
                       "row_kind", "client_rows", "tcp_congestion"]

KV_SEED_COLUMNS = [
    "workload", "engine", "db", "repeat", "record_count", "operation_count", "threads", "phase",
    "exit_code", "load_runtime_sec", "load_operations", "load_throughput_ops_sec", "run_runtime_sec",
    "run_operations", "run_throughput_ops_sec", "data_path", "log_path", "error_tail",
]
KV_EXTRA_COLUMNS = ["read_mode", "batch_keys", "run_p50_us", "run_p99_us", "cpu_user_s", "cpu_sys_s"]
KV_COLUMNS = KV_SEED_COLUMNS + KV_EXTRA_COLUMNS
KV_INT_COLUMNS = ["repeat", "record_count", "operation_count", "threads", "exit_code",
                  "load_operations", "run_operations", "batch_keys"]
KV_FLOAT_COLUMNS = ["load_runtime_sec", "load_throughput_ops_sec", "run_runtime_sec",
                    "run_throughput_ops_sec", "run_p50_us", "run_p99_us", "cpu_user_s", "cpu_sys_s"]
KV_CATEGORY_COLUMNS = ["workload", "engine", "db", "phase", "read_mode"]
KV_STATUSES = ["success", "failure"]

TOTALS_INT_COLUMNS = ["repeat_index", "repeats", "clients_ok", "clients_failed", "server_shards",
                      "client_processes", "batch_keys", "value_size"]
TOTALS_FLOAT_SUFFIXES = ("_sec", "_us", "_s", "_gbps", "_seconds", "_pct", "_std", "_stdev",
                         "_mean", "_min", "_max", "_share")
TOTALS_EXTRA_STATUSES = ["no_success"]

# metric -> True when higher is better
PS_METRICS = {"key_ops_per_sec": True, "ops_per_sec": True, "payload_gbps": True, "mean_us": False,
              "p50_us": False, "p95_us": False, "p99_us": False, "p999_us": False,
              "keys_per_cpu_sec": True,
              # the slowest client thread's share of the mean: a trainer waits for its stragglers
              "slowest_thread_share": True}
KV_METRICS = {"run_throughput_ops_sec": True, "load_throughput_ops_sec": True, "run_p50_us": False,
              "run_p99_us": False}
PS_CASE_COLUMNS = ["transport", "phase", "mode", "distribution", "batch_keys", "value_size",
                   "server_shards", "client_processes", "client_threads_per_process", "row_kind"]
KV_CASE_COLUMNS = ["workload", "engine", "read_mode", "batch_keys", "threads", "record_count",
                   "operation_count"]
LATENCY_COLUMNS = ["mean_us", "p50_us", "p95_us", "p99_us", "p999_us"]

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_NOISE_K = 2.0


class SummaryFormatError(ValueError):
    """A result file that does not have the expected shape; the message names file, line, column."""


# ---------------------------------------------------------------------------------------------
# loading


def _read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.exists():
        raise SummaryFormatError(f"{path}: file does not exist")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise SummaryFormatError(f"{path}: empty file, expected a CSV header line")
    header = [c.strip() for c in rows[0]]
    body = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row:
            continue  # a blank line
        if len(row) != len(header):
            col = header[len(row)] if len(row) < len(header) else f"(extra field {len(row)})"
            what = "missing fields from column" if len(row) < len(header) else "has too many fields at"
            raise SummaryFormatError(
                f"{path}: line {lineno} has {len(row)} fields, the header has {len(header)} "
                f"({what} '{col}'); the file is truncated or malformed")
        body.append(row)
    return header, body


def _check_order(path: Path, header: list[str], expected: list[str], what: str) -> None:
    for i, name in enumerate(expected):
        if i >= len(header):
            raise SummaryFormatError(f"{path}: column '{name}' (#{i + 1} of {what}) is missing")
        if header[i] != name:
            raise SummaryFormatError(
                f"{path}: column #{i + 1} is '{header[i]}', expected '{name}' ({what} order)")


def _to_numbers(path: Path, df: pd.DataFrame, cols: Iterable[str], integer: bool) -> None:
    for col in cols:
        if col not in df.columns:
            continue
        raw = df[col].str.strip()
        num = pd.to_numeric(raw.where(raw != ""), errors="coerce")
        bad = num.isna() & (raw != "")
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise SummaryFormatError(
                f"{path}: line {i + 2}, column '{col}': '{raw.iloc[i]}' is not a number")
        if integer:
            frac = num.notna() & (num != num.round())
            if frac.any():
                i = int(frac.to_numpy().nonzero()[0][0])
                raise SummaryFormatError(
                    f"{path}: line {i + 2}, column '{col}': '{raw.iloc[i]}' is not an integer")
            df[col] = num.astype("Int64")
        else:
            df[col] = num.astype("float64")


def _split_lists(df: pd.DataFrame, cols: Iterable[str]) -> None:
    for col in cols:
        if col in df.columns:
            df[col] = df[col].map(lambda s: [x.strip() for x in s.split(";") if x.strip()])


def _categories(df: pd.DataFrame, cols: Iterable[str]) -> None:
    for col in cols:
        if col in df.columns:
            df[col] = df[col].str.strip().replace("", pd.NA).astype("category")


def _status(path: Path, df: pd.DataFrame, allowed: list[str]) -> None:
    raw = df["status"].str.strip()
    bad = ~raw.isin(allowed)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise SummaryFormatError(f"{path}: line {i + 2}, column 'status': '{raw.iloc[i]}' is not one "
                                 f"of {', '.join(allowed)}")
    df["status"] = pd.Categorical(raw, categories=allowed)


def load_ps_summary(path) -> pd.DataFrame:
    """Load a PS runner summary.csv (a file, or a run directory holding one)."""
    path = _resolve(path, "summary.csv")
    header, body = _read_rows(path)
    expected = list(PS_RECSTORE_COLUMNS)
    if "payload_gbps" not in header[:19]:
        expected.remove("payload_gbps")  # RecStore's 24-column layout
    _check_order(path, header, expected, "RecStore's PS summary.csv")
    extra = header[len(expected):]
    for i, name in enumerate(extra):
        if i < len(PS_EXTRA_COLUMNS) and name != PS_EXTRA_COLUMNS[i] and name in PS_EXTRA_COLUMNS:
            raise SummaryFormatError(f"{path}: column #{len(expected) + i + 1} is '{name}', expected "
                                     f"'{PS_EXTRA_COLUMNS[i]}' (recbench's appended columns)")
    df = pd.DataFrame(body, columns=header, dtype=object).astype(str)
    for col in PS_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    _status(path, df, PS_STATUSES)
    _to_numbers(path, df, PS_INT_COLUMNS, integer=True)
    _to_numbers(path, df, PS_FLOAT_COLUMNS, integer=False)
    _split_lists(df, PS_LIST_COLUMNS)
    _categories(df, PS_CATEGORY_COLUMNS)
    df["message"] = df["message"].fillna("")
    df.attrs["path"] = str(path)
    df.attrs["kind"] = "ps"
    return df[PS_COLUMNS + [c for c in header if c not in PS_COLUMNS]]


def load_ps_totals(path) -> pd.DataFrame:
    """Load a PS runner summary_totals.csv (a file, or a run directory holding one).

    Rows with ``repeat_index == "mean"`` are the runner's mean-and-spread rows over repeats: they
    get ``row_type == "mean"`` and an empty repeat_index; the others ``row_type == "repeat"``."""
    path = _resolve(path, "summary_totals.csv")
    header, body = _read_rows(path)
    for name in ("transport", "phase"):
        if name not in header:
            raise SummaryFormatError(f"{path}: column '{name}' is missing (summary_totals.csv needs "
                                     "transport and phase)")
    df = pd.DataFrame(body, columns=header, dtype=object).astype(str)
    if "repeat_index" in df.columns:
        is_mean = df["repeat_index"].str.strip() == "mean"
        df["row_type"] = ["mean" if m else "repeat" for m in is_mean]
        df.loc[is_mean, "repeat_index"] = ""
    if "status" in df.columns:
        raw = df["status"].str.strip()
        allowed = PS_STATUSES + TOTALS_EXTRA_STATUSES
        bad = ~raw.isin(allowed + [""])
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise SummaryFormatError(f"{path}: line {i + 2}, column 'status': '{raw.iloc[i]}' is not "
                                     f"one of {', '.join(allowed)}")
        df["status"] = pd.Categorical(raw.where(raw != ""), categories=allowed)
    ints = [c for c in header if c in TOTALS_INT_COLUMNS]
    floats = [c for c in header if c not in ints and c.endswith(TOTALS_FLOAT_SUFFIXES)]
    _to_numbers(path, df, ints, integer=True)
    _to_numbers(path, df, floats, integer=False)
    _split_lists(df, [c for c in PS_LIST_COLUMNS if c in header])
    _categories(df, [c for c in ("transport", "phase", "row_kind") if c in header])
    df.attrs["path"] = str(path)
    df.attrs["kind"] = "ps_totals"
    return df


def load_kv_summary(path) -> pd.DataFrame:
    """Load a KV compare summary.csv (a file, or a run directory holding one)."""
    path = _resolve(path, "summary.csv")
    header, body = _read_rows(path)
    _check_order(path, header, KV_SEED_COLUMNS, "the KV compare summary.csv")
    for i, name in enumerate(header[len(KV_SEED_COLUMNS):]):
        if i < len(KV_EXTRA_COLUMNS) and name != KV_EXTRA_COLUMNS[i] and name in KV_EXTRA_COLUMNS:
            raise SummaryFormatError(f"{path}: column #{len(KV_SEED_COLUMNS) + i + 1} is '{name}', "
                                     f"expected '{KV_EXTRA_COLUMNS[i]}' (recbench's appended columns)")
    df = pd.DataFrame(body, columns=header, dtype=object).astype(str)
    for col in KV_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    _to_numbers(path, df, KV_INT_COLUMNS, integer=True)
    _to_numbers(path, df, KV_FLOAT_COLUMNS, integer=False)
    missing_exit = df["exit_code"].isna()
    if missing_exit.any():
        i = int(missing_exit.to_numpy().nonzero()[0][0])
        raise SummaryFormatError(f"{path}: line {i + 2}, column 'exit_code' is empty")
    df["status"] = pd.Categorical(["success" if c == 0 else "failure" for c in df["exit_code"]],
                                  categories=KV_STATUSES)
    _split_lists(df, ["log_path"])
    _categories(df, KV_CATEGORY_COLUMNS)
    df.attrs["path"] = str(path)
    df.attrs["kind"] = "kv"
    return df[KV_COLUMNS + ["status"] + [c for c in header if c not in KV_COLUMNS]]


def _resolve(path, name: str) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / name
    return p


def detect_kind(path) -> str:
    """'ps', 'ps_totals' or 'kv' from a summary file's header (or a run directory's summary.csv)."""
    p = _resolve(path, "summary.csv")
    header, _ = _read_rows(p)
    if header[:2] == ["workload", "engine"]:
        return "kv"
    if header[:1] == ["transport"]:
        return "ps" if "client_index" in header else "ps_totals"
    raise SummaryFormatError(f"{p}: header starts with '{','.join(header[:3])}', which is neither a "
                             "PS summary (transport,status,...) nor a KV summary (workload,engine,...)")


def load_summary(path) -> pd.DataFrame:
    """Load any summary file, detecting its kind from the header."""
    kind = detect_kind(path)
    return {"ps": load_ps_summary, "kv": load_kv_summary, "ps_totals": load_ps_totals}[kind](path)


# ---------------------------------------------------------------------------------------------
# sweep files


SWEEP_COLUMNS = ["param", "value", "transport", "status", "repeats", "key_ops_per_sec",
                 "key_ops_per_sec_std", "p99_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
                 "summary_csv", "host_steal_pct", *FAIRNESS_COLUMNS]
# the first 12 are every sweep.csv's; host_steal_pct came on 2026-12-02, the thread shares on
# 2026-12-03: older sweeps load with those empty
SWEEP_LATER_COLUMNS = SWEEP_COLUMNS[12:]


def load_sweep(path) -> pd.DataFrame:
    """Load a sweep.csv written by tools/benchmarks/sweep_ps.py."""
    path = _resolve(path, "sweep.csv")
    header, body = _read_rows(path)
    _check_order(path, header, SWEEP_COLUMNS[:12] + [c for c in SWEEP_LATER_COLUMNS if c in header],
                 "sweep.csv")
    df = pd.DataFrame(body, columns=header, dtype=object).astype(str)
    for col in SWEEP_LATER_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    _to_numbers(path, df, ["repeats"], integer=True)
    _to_numbers(path, df, SWEEP_COLUMNS[5:11] + SWEEP_LATER_COLUMNS, integer=False)
    df["value_num"] = pd.to_numeric(df["value"], errors="coerce")
    df.attrs["path"] = str(path)
    df.attrs["kind"] = "sweep"
    return df


EVENTUAL_COLUMNS = ["num_waiters", "test_duration_sec", "interval_msec", "ops_per_sec", "cpu_time_sec"]


def load_eventual_dat(path) -> pd.DataFrame:
    """Load a .dat of the wait-primitive benchmark: '#' header lines, then whitespace-separated
    rows ``num_waiters duration_s interval_ms ops/s cpu_s``."""
    path = Path(path)
    if not path.exists():
        raise SummaryFormatError(f"{path}: file does not exist")
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != len(EVENTUAL_COLUMNS):
            raise SummaryFormatError(f"{path}: line {lineno} has {len(parts)} fields, expected "
                                     f"{len(EVENTUAL_COLUMNS)} ({' '.join(EVENTUAL_COLUMNS)})")
        try:
            rows.append([float(x) for x in parts])
        except ValueError:
            raise SummaryFormatError(f"{path}: line {lineno}: '{line.strip()}' is not all numbers") from None
    if not rows:
        raise SummaryFormatError(f"{path}: no data rows")
    df = pd.DataFrame(rows, columns=EVENTUAL_COLUMNS)
    df["num_waiters"] = df["num_waiters"].astype(int)
    df.attrs["path"] = str(path)
    return df


def write_csv(df: pd.DataFrame, path) -> Path:
    """Write a DataFrame as CSV, joining list cells with ';' (the runners' convention)."""
    out = df.copy()
    for col in out.columns:
        if any(isinstance(v, list) for v in out[col]):
            out[col] = out[col].map(lambda v: ";".join(v) if isinstance(v, list) else v)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False, float_format="%.6g")
    return path
