"""Typed loaders, totals, baseline comparison and plots for recbench's result files.

Files read here:

- PS runner ``summary.csv``: RecStore's 25 columns in RecStore's order (RecStore's older 24-column
  layout without ``payload_gbps`` loads too), then recbench's appended columns
  ``p999_us,max_us,client_cpu_s,server_cpu_s,keys_per_cpu_sec,build_type,index_type,row_kind``
  (absent ones read as missing, so RecStore's own files load). One row per client and phase.
- PS runner ``summary_totals.csv``: one row per transport x repeat x phase, plus summary rows.
  Only ``transport`` and ``phase`` are required; known metric columns are typed.
- KV compare ``summary.csv``: the 18 columns of RecStore's compare runner, then
  ``read_mode,batch_keys,run_p50_us,run_p99_us,cpu_user_s,cpu_sys_s``. A derived ``status``
  column (``success`` when ``exit_code == 0``, else ``failure``) is added for uniform handling.

Every loader returns a pandas DataFrame with status as a categorical, counts as nullable
integers, metrics as floats and ``;``-joined cells split into lists. A malformed or truncated
file raises :class:`SummaryFormatError` naming the file, the line and the column.

Comparison rule (:func:`compare`): rows are grouped into cases (same transport/engine, phase or
workload and configuration); each repeat gives one value per metric (PS: client rows of a repeat
summed for rates, key-weighted mean for latencies). For a metric,
``change % = (mean(candidate) - mean(baseline)) / mean(baseline) * 100`` and the noise band is
``max(threshold %, k * pooled relative spread * 100)``, where the relative spread of a side is the
sample standard deviation of its repeats divided by their mean (0 with one repeat) and the pooled
spread is ``sqrt((s_base^2 + s_cand^2) / 2)``. ``|change| <= band`` is "within noise"; beyond it
the metric's direction (higher rates are better, lower latencies are better) decides "improved"
or "regressed". A case with successful baseline rows whose candidate rows all failed is
"failed"; a case present on one side only is "missing".
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

PS_RECSTORE_COLUMNS = [
    "transport", "status", "phase", "client_index", "repeat_index", "server_shards",
    "client_processes", "server_shard_ips", "client_ips", "record_count", "value_size", "batch_keys",
    "client_threads_per_process", "runtime_seconds", "distribution", "mode", "ops_per_sec",
    "key_ops_per_sec", "payload_gbps", "mean_us", "p50_us", "p95_us", "p99_us", "log_path", "message",
]
PS_EXTRA_COLUMNS = ["p999_us", "max_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
                    "build_type", "index_type", "row_kind"]
PS_COLUMNS = PS_RECSTORE_COLUMNS + PS_EXTRA_COLUMNS
PS_STATUSES = ["success", "skipped", "timeout", "startup_failure", "client_failure",
               "preflight_failure"]
PS_INT_COLUMNS = ["client_index", "repeat_index", "server_shards", "client_processes", "record_count",
                  "value_size", "batch_keys", "client_threads_per_process"]
PS_FLOAT_COLUMNS = ["runtime_seconds", "ops_per_sec", "key_ops_per_sec", "payload_gbps", "mean_us",
                    "p50_us", "p95_us", "p99_us", "p999_us", "max_us", "client_cpu_s", "server_cpu_s",
                    "keys_per_cpu_sec"]
PS_LIST_COLUMNS = ["server_shard_ips", "client_ips", "log_path"]
PS_CATEGORY_COLUMNS = ["transport", "phase", "distribution", "mode", "build_type", "index_type",
                       "row_kind"]

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
                         "_mean", "_min", "_max")
TOTALS_EXTRA_STATUSES = ["no_success"]

# metric -> True when higher is better
PS_METRICS = {"key_ops_per_sec": True, "ops_per_sec": True, "payload_gbps": True, "mean_us": False,
              "p50_us": False, "p95_us": False, "p99_us": False, "p999_us": False,
              "keys_per_cpu_sec": True}
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
# totals


def _case_columns(df: pd.DataFrame) -> list[str]:
    cols = PS_CASE_COLUMNS if df.attrs.get("kind") == "ps" else KV_CASE_COLUMNS
    # the first two (transport, phase / workload, engine) always; the rest where filled
    return cols[:2] + [c for c in cols[2:] if c in df.columns and df[c].notna().any()]


def _repeat_column(df: pd.DataFrame) -> str:
    return "repeat_index" if df.attrs.get("kind") == "ps" else "repeat"


def _weighted(values: pd.Series, weights: pd.Series) -> float:
    ok = values.notna() & weights.notna() & (weights > 0)
    if ok.any():
        return float((values[ok] * weights[ok]).sum() / weights[ok].sum())
    ok = values.notna()
    return float(values[ok].mean()) if ok.any() else math.nan


def per_repeat(df: pd.DataFrame) -> pd.DataFrame:
    """One row per case x repeat over successful rows.

    PS (the same arithmetic as the runner's summary_totals.csv): rates (ops/s, keys/s, GB/s) and
    client CPU seconds are summed over the repeat's client rows, as RecStore's guidance sums column
    18; the window is the shortest client runtime; mean_us is the batch-weighted mean of the
    clients' means; p50..p99.9 and max are the largest client value (an upper bound: clients do not
    export histograms); server CPU is the case's (every run row carries the same value), and
    keys_per_cpu_sec = keys/s x window / (client + server CPU seconds).
    A repeat in which any row of the same transport did not succeed (a failed client, a timeout)
    is left out, since its sums would be too low.
    KV: one row already is one repeat; cpu_s = cpu_user_s + cpu_sys_s is added."""
    kind = df.attrs.get("kind")
    ok = df[df["status"] == "success"]
    cases = _case_columns(df)
    rep = _repeat_column(df)
    if kind == "kv":
        out = ok.copy()
        out["cpu_s"] = out["cpu_user_s"] + out["cpu_sys_s"]
        out = out.reset_index(drop=True)
        out.attrs.update(df.attrs)
        return out
    # a repeat in which any row of the transport failed is incomplete: its sums would be too low
    bad = df[df["status"] != "success"]
    incomplete = {(str(t), r) for t, r in zip(bad["transport"], bad[rep])}
    keep = pd.Series([(str(t), r) not in incomplete for t, r in zip(ok["transport"], ok[rep])],
                     index=ok.index, dtype=bool)
    ok = ok[keep]
    records = []
    for key, g in ok.groupby(cases + [rep], observed=True, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        r = dict(zip(cases + [rep], key))
        r["clients"] = len(g)
        for col in ("ops_per_sec", "key_ops_per_sec", "payload_gbps", "client_cpu_s"):
            r[col] = float(g[col].sum(min_count=1))
        r["runtime_seconds"] = float(g["runtime_seconds"].min())  # the common window
        batches = g["ops_per_sec"] * g["runtime_seconds"]
        r["mean_us"] = _weighted(g["mean_us"], batches)
        for col in ("p50_us", "p95_us", "p99_us", "p999_us", "max_us"):
            r[col] = float(g[col].max())  # a bound: clients do not export their histograms
        r["server_cpu_s"] = float(g["server_cpu_s"].max())
        cpu = (0.0 if math.isnan(r["client_cpu_s"]) else r["client_cpu_s"]) + \
            (0.0 if math.isnan(r["server_cpu_s"]) else r["server_cpu_s"])
        keys = r["key_ops_per_sec"] * r["runtime_seconds"]
        r["keys_per_cpu_sec"] = keys / cpu if cpu > 0 and not math.isnan(keys) else math.nan
        records.append(r)
    out = pd.DataFrame.from_records(records, columns=cases + [rep, "clients", "ops_per_sec",
                                                               "key_ops_per_sec", "payload_gbps",
                                                               "client_cpu_s", "runtime_seconds",
                                                               *LATENCY_COLUMNS, "max_us",
                                                               "server_cpu_s", "keys_per_cpu_sec"])
    out.attrs.update(df.attrs)
    return out


def totals(df: pd.DataFrame) -> pd.DataFrame:
    """Per case: number of repeats, and mean and sample standard deviation over repeats of each
    metric (columns ``<metric>_mean`` and ``<metric>_std``), plus counts of rows by status."""
    kind = df.attrs.get("kind")
    reps = per_repeat(df)
    cases = _case_columns(df)
    metrics = list(PS_METRICS) + ["client_cpu_s", "server_cpu_s"] if kind == "ps" else \
        list(KV_METRICS) + ["cpu_s"]
    rows = []
    for key, g in reps.groupby(cases, observed=True, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        r = dict(zip(cases, key))
        r["repeats"] = len(g)
        for m in metrics:
            vals = g[m].dropna()
            r[f"{m}_mean"] = float(vals.mean()) if len(vals) else math.nan
            r[f"{m}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else (0.0 if len(vals) else math.nan)
        rows.append(r)
    out = pd.DataFrame(rows, columns=cases + ["repeats"] +
                       [f"{m}_{s}" for m in metrics for s in ("mean", "std")])
    failed = df[df["status"] != "success"]
    out.attrs.update(df.attrs)
    out.attrs["failed_rows"] = len(failed)
    return out


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per status for each transport (PS) or engine (KV)."""
    who = "transport" if df.attrs.get("kind") == "ps" else "engine"
    return df.groupby([who, "status"], observed=False).size().unstack(fill_value=0)


# ---------------------------------------------------------------------------------------------
# comparison


def _rel_spread(vals: pd.Series) -> float:
    vals = vals.dropna()
    if len(vals) < 2 or vals.mean() == 0:
        return 0.0
    return float(vals.std(ddof=1) / abs(vals.mean()))


def compare(baseline: pd.DataFrame, candidate: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            k: float = DEFAULT_NOISE_K) -> pd.DataFrame:
    """Compare two loaded summaries of the same kind (rule in the module docstring).

    Returns one row per case and metric: case columns, metric, higher_is_better, baseline and
    candidate means, their repeat counts and relative spreads (%), change_pct, noise_pct (the
    band) and verdict (improved / regressed / within noise / failed / missing)."""
    kind = baseline.attrs.get("kind")
    if kind != candidate.attrs.get("kind"):
        raise ValueError(f"cannot compare a {kind} summary ({baseline.attrs.get('path')}) with a "
                         f"{candidate.attrs.get('kind')} summary ({candidate.attrs.get('path')})")
    if threshold_pct < 0 or k < 0:
        raise ValueError(f"threshold_pct ({threshold_pct}) and k ({k}) must not be negative")
    metrics = PS_METRICS if kind == "ps" else KV_METRICS
    cases = [c for c in (PS_CASE_COLUMNS if kind == "ps" else KV_CASE_COLUMNS)
             if c in baseline.columns and (baseline[c].notna().any() or candidate[c].notna().any())]
    rb, rc = per_repeat(baseline), per_repeat(candidate)

    def groups(reps):
        return {(k if isinstance(k, tuple) else (k,)): g
                for k, g in reps.groupby(cases, observed=True, dropna=False, sort=True)}

    primary = ["transport"] if kind == "ps" else ["workload", "engine"]

    def failing(df):  # primary keys (transport / workload+engine) that have non-success rows
        bad = df[df["status"] != "success"]
        return {tuple(str(x) for x in r) for r in bad[primary].itertuples(index=False)}

    gb, gc = groups(rb), groups(rc)
    base_bad, cand_bad = failing(baseline), failing(candidate)
    keys = sorted(set(gb) | set(gc), key=lambda t: tuple(str(x) for x in t))
    rows = []
    for key in keys:
        b, c = gb.get(key), gc.get(key)
        if b is None or c is None:
            if b is not None:
                pk = tuple(str(x) for x in key[:len(primary)])
                verdict, note = ("failed", "candidate rows failed") if pk in cand_bad else \
                    ("missing", "case not in candidate")
            else:
                pk = tuple(str(x) for x in key[:len(primary)])
                verdict, note = ("missing", "baseline rows failed") if pk in base_bad else \
                    ("missing", "case not in baseline")
            row = dict(zip(cases, key))
            row.update(metric="*", higher_is_better=None, verdict=verdict, note=note,
                       baseline_repeats=0 if b is None else len(b),
                       candidate_repeats=0 if c is None else len(c))
            rows.append(row)
            continue
        for metric, higher in metrics.items():
            bv, cv = b[metric].dropna(), c[metric].dropna()
            if not len(bv) and not len(cv):
                continue  # reported by neither side (e.g. latency columns of a load phase)
            row = dict(zip(cases, key))
            row.update(metric=metric, higher_is_better=higher,
                       baseline=float(bv.mean()) if len(bv) else math.nan,
                       candidate=float(cv.mean()) if len(cv) else math.nan,
                       baseline_repeats=len(bv), candidate_repeats=len(cv),
                       baseline_spread_pct=_rel_spread(bv) * 100,
                       candidate_spread_pct=_rel_spread(cv) * 100)
            if not len(bv) or not len(cv):
                row.update(verdict="missing", note="metric not reported by the " +
                           ("baseline" if not len(bv) else "candidate"))
                rows.append(row)
                continue
            pooled = math.sqrt((_rel_spread(bv) ** 2 + _rel_spread(cv) ** 2) / 2)
            band = max(threshold_pct, k * pooled * 100)
            base = row["baseline"]
            if base != 0:
                change = (row["candidate"] - base) / abs(base) * 100
            else:
                change = 0.0 if row["candidate"] == 0 else math.copysign(math.inf, row["candidate"])
            if abs(change) <= band:
                verdict = "within noise"
            elif (change > 0) == higher:
                verdict = "improved"
            else:
                verdict = "regressed"
            note = "one repeat on a side: band is the threshold" if min(len(bv), len(cv)) < 2 and \
                band == threshold_pct else ""
            row.update(change_pct=change, noise_pct=band, verdict=verdict, note=note)
            rows.append(row)
    out = pd.DataFrame(rows, columns=cases + ["metric", "higher_is_better", "baseline", "candidate",
                                              "baseline_repeats", "candidate_repeats",
                                              "baseline_spread_pct", "candidate_spread_pct",
                                              "change_pct", "noise_pct", "verdict", "note"])
    out.attrs.update(kind=kind, threshold_pct=threshold_pct, k=k,
                     baseline_path=baseline.attrs.get("path"), candidate_path=candidate.attrs.get("path"))
    return out


def regressions(cmp: pd.DataFrame) -> pd.DataFrame:
    """Rows of a comparison that gate CI: regressed metrics and cases that failed in the candidate."""
    return cmp[cmp["verdict"].isin(["regressed", "failed"])]


# ---------------------------------------------------------------------------------------------
# sweep files


SWEEP_COLUMNS = ["param", "value", "transport", "status", "repeats", "key_ops_per_sec",
                 "key_ops_per_sec_std", "p99_us", "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec",
                 "summary_csv"]


def sweep_rows(param: str, value: str, summary) -> list[dict]:
    """Rows of sweep.csv for one sweep point: one per transport in that point's PS summary.csv.

    keys/s is the mean over repeats of the run phase's summed client rates; p99 and the CPU
    columns are means over repeats of the per-repeat values of :func:`per_repeat`. A transport
    without successful run rows gets its first non-success status and empty metrics."""
    df = load_ps_summary(summary)
    reps = per_repeat(df)
    reps = reps[reps["phase"] == "run"] if "phase" in reps.columns else reps
    rows = []
    for transport in sorted(set(df["transport"].dropna().astype(str))):
        g = reps[reps["transport"].astype(str) == transport]
        if len(g) == 0:
            st = df[(df["transport"].astype(str) == transport) & (df["status"] != "success")]["status"]
            rows.append(dict(param=param, value=value, transport=transport,
                             status=str(st.iloc[0]) if len(st) else "no_run_rows", repeats=0,
                             summary_csv=str(df.attrs["path"])))
            continue
        rows.append(dict(
            param=param, value=value, transport=transport, status="success", repeats=len(g),
            key_ops_per_sec=float(g["key_ops_per_sec"].mean()),
            key_ops_per_sec_std=float(g["key_ops_per_sec"].std(ddof=1)) if len(g) > 1 else 0.0,
            p99_us=float(g["p99_us"].mean()), client_cpu_s=float(g["client_cpu_s"].mean()),
            server_cpu_s=float(g["server_cpu_s"].mean()),
            keys_per_cpu_sec=float(g["keys_per_cpu_sec"].mean()), summary_csv=str(df.attrs["path"])))
    return rows


def load_sweep(path) -> pd.DataFrame:
    """Load a sweep.csv written by tools/benchmarks/sweep_ps.py."""
    path = _resolve(path, "sweep.csv")
    header, body = _read_rows(path)
    _check_order(path, header, SWEEP_COLUMNS, "sweep.csv")
    df = pd.DataFrame(body, columns=header, dtype=object).astype(str)
    _to_numbers(path, df, ["repeats"], integer=True)
    _to_numbers(path, df, SWEEP_COLUMNS[5:11], integer=False)
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


# ---------------------------------------------------------------------------------------------
# plots (matplotlib Figure objects with the Agg canvas: no pyplot state, no display needed)


def _figure(width=7.0, height=4.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _require_rows(df: pd.DataFrame, what: str) -> None:
    if len(df) == 0:
        raise ValueError(f"nothing to plot: {what} ({df.attrs.get('path', 'no file')})")


def plot_ps_throughput(df: pd.DataFrame, path, phase: str = "run") -> Path:
    """Bar per transport: mean over repeats of the summed client key rate (M keys/s), error bars
    one standard deviation over repeats."""
    t = totals(df)
    t = t[t["phase"] == phase]
    _require_rows(t, f"no successful {phase} rows")
    t = t.groupby("transport", observed=True)[["key_ops_per_sec_mean", "key_ops_per_sec_std"]].mean()
    fig, ax = _figure()
    ax.bar(t.index.astype(str), t["key_ops_per_sec_mean"] / 1e6, yerr=t["key_ops_per_sec_std"] / 1e6,
           capsize=4, color="tab:blue")
    ax.set_ylabel("M keys/s (sum over clients)")
    ax.set_title(f"PS throughput per transport ({phase} phase, mean ± sd over repeats)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_ps_latency(df: pd.DataFrame, path, phase: str = "run") -> Path:
    """Grouped bars per transport: p50, p95, p99, p99.9 latency (µs), means over repeats."""
    reps = per_repeat(df)
    reps = reps[reps["phase"] == phase]
    _require_rows(reps, f"no successful {phase} rows")
    cols = [c for c in ("p50_us", "p95_us", "p99_us", "p999_us") if reps[c].notna().any()]
    if not cols:
        raise ValueError(f"nothing to plot: no latency columns filled ({df.attrs.get('path')})")
    lat = reps.groupby("transport", observed=True)[cols].mean()
    fig, ax = _figure()
    width = 0.8 / len(cols)
    for i, col in enumerate(cols):
        xs = [x + i * width for x in range(len(lat))]
        ax.bar(xs, lat[col], width=width, label=col.replace("_us", "").replace("p999", "p99.9"))
    ax.set_xticks([x + width * (len(cols) - 1) / 2 for x in range(len(lat))])
    ax.set_xticklabels(lat.index.astype(str))
    merge = set(reps["latency_merge"].astype(str)) if "latency_merge" in reps.columns else set()
    how = "all clients merged" if merge == {"exact"} else "worst client"
    ax.set_ylabel(f"latency per request (µs, {how})")
    ax.set_yscale("log")
    ax.set_title(f"PS latency percentiles ({phase} phase)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_kv_engines(df: pd.DataFrame, path, metric: str = "run_throughput_ops_sec") -> Path:
    """Grouped bars: workloads on the x axis, one bar per engine (mean over repeats, sd error bars)."""
    reps = per_repeat(df)
    _require_rows(reps, "no successful rows")
    g = reps.groupby(["workload", "engine"], observed=True)[metric].agg(["mean", "std"]).fillna(0)
    workloads = sorted(set(g.index.get_level_values(0).astype(str)))
    engines = sorted(set(g.index.get_level_values(1).astype(str)))
    fig, ax = _figure(8, 4.5)
    width = 0.8 / len(engines)
    for i, eng in enumerate(engines):
        ys, es = [], []
        for w in workloads:
            if (w, eng) in g.index:
                ys.append(g.loc[(w, eng), "mean"])
                es.append(g.loc[(w, eng), "std"])
            else:
                ys.append(0.0)
                es.append(0.0)
        ax.bar([x + i * width for x in range(len(workloads))], ys, yerr=es, width=width, capsize=3,
               label=eng)
    ax.set_xticks([x + width * (len(engines) - 1) / 2 for x in range(len(workloads))])
    ax.set_xticklabels(workloads)
    ax.set_ylabel(metric)
    ax.set_yscale("log")
    ax.set_title("KV engines per workload")
    ax.legend(fontsize="small", ncol=2)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_sweep(sweep: pd.DataFrame, rate_path, cpu_path) -> tuple[Path, Path]:
    """Two line plots over the swept value, one line per transport: keys/s (with sd error bars),
    and client and server CPU seconds."""
    ok = sweep[sweep["status"] == "success"]
    _require_rows(ok, "no successful sweep points")
    param = str(ok["param"].iloc[0])
    numeric = ok["value_num"].notna().all()
    fig, ax = _figure()
    fig2, ax2 = _figure()
    for transport, g in ok.groupby("transport", sort=True):
        g = g.sort_values("value_num" if numeric else "value")
        xs = g["value_num"] if numeric else g["value"]
        ax.errorbar(xs, g["key_ops_per_sec"] / 1e6, yerr=g["key_ops_per_sec_std"].fillna(0) / 1e6,
                    marker="o", capsize=3, label=transport)
        line = ax2.plot(xs, g["client_cpu_s"], marker="o", label=f"{transport} client")[0]
        ax2.plot(xs, g["server_cpu_s"], marker="s", linestyle="--", color=line.get_color(),
                 label=f"{transport} server")
    ax.set_xlabel(param)
    ax.set_ylabel("M keys/s (run phase)")
    ax.set_title(f"PS throughput vs {param}")
    ax.legend()
    ax.grid(alpha=0.3)
    ax2.set_xlabel(param)
    ax2.set_ylabel("CPU seconds per run (user + sys)")
    ax2.set_title(f"PS CPU time vs {param}")
    ax2.legend(fontsize="small")
    ax2.grid(alpha=0.3)
    return _save(fig, rate_path), _save(fig2, cpu_path)


def plot_eventual(dats: dict, rate_path, cpu_path) -> tuple[Path, Path]:
    """Rate and CPU plots of wait-primitive sweeps; dats maps a label (e.g. 'block') to the
    DataFrame of :func:`load_eventual_dat`. The rate plot shows the ideal rate as a dotted line."""
    if not dats:
        raise ValueError("nothing to plot: no .dat data")
    fig, ax = _figure()
    fig2, ax2 = _figure()
    ideal_drawn = False
    for label, d in dats.items():
        d = d.sort_values("num_waiters")
        ax.plot(d["num_waiters"], d["ops_per_sec"], marker="o", label=label)
        ax2.plot(d["num_waiters"], d["cpu_time_sec"], marker="o", label=label)
        if not ideal_drawn and (d["interval_msec"] > 0).all():
            ax.plot(d["num_waiters"], d["num_waiters"] * 1000.0 / d["interval_msec"], linestyle=":",
                    color="gray", label="ideal (waiters × 1000 / interval_ms)")
            ideal_drawn = True
    ax.set_xlabel("concurrent waiters")
    ax.set_ylabel("eventual create/wait/set/destroy ops/s")
    ax.set_title("eventual rate")
    ax.legend()
    ax.grid(alpha=0.3)
    ax2.set_xlabel("concurrent waiters")
    ax2.set_ylabel("process CPU seconds (user + sys)")
    ax2.set_title("eventual CPU time")
    ax2.legend()
    ax2.grid(alpha=0.3)
    return _save(fig, rate_path), _save(fig2, cpu_path)


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


__all__ = [
    "SummaryFormatError",
    "compare",
    "detect_kind",
    "load_eventual_dat",
    "load_kv_summary",
    "load_ps_summary",
    "load_ps_totals",
    "load_summary",
    "load_sweep",
    "per_repeat",
    "plot_eventual",
    "plot_kv_engines",
    "plot_ps_latency",
    "plot_ps_throughput",
    "plot_sweep",
    "regressions",
    "status_counts",
    "sweep_rows",
    "totals",
    "write_csv",
]
