"""Per-repeat totals and the baseline/candidate comparison (the rule is in recbench.analysis's
package docstring); sweep.csv rows from a PS summary.csv."""

from __future__ import annotations

import math

import pandas as pd

from recbench.analysis.loaders import (
    DEFAULT_NOISE_K,
    DEFAULT_THRESHOLD_PCT,
    FAIRNESS_COLUMNS,
    FAIRNESS_PICKS,
    KV_CASE_COLUMNS,
    KV_METRICS,
    LATENCY_COLUMNS,
    PS_CASE_COLUMNS,
    PS_METRICS,
    load_ps_summary,
)

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
        # the common window: what the clients measured (older files: the configured runtime)
        window = (g["measured_seconds"].fillna(g["runtime_seconds"])
                  if "measured_seconds" in g.columns else g["runtime_seconds"])
        r["runtime_seconds"] = float(window.min())
        batches = g["ops_per_sec"] * window
        r["mean_us"] = _weighted(g["mean_us"], batches)
        for col in ("p50_us", "p95_us", "p99_us", "p999_us", "max_us"):
            r[col] = float(g[col].max())  # a bound: clients do not export their histograms
        r["server_cpu_s"] = float(g["server_cpu_s"].max())
        # the case's (every run row carries the same); NaN in files from before the column
        r["host_steal_pct"] = (float(g["host_steal_pct"].max()) if "host_steal_pct" in g.columns
                               else math.nan)
        # the slowest and the fastest client thread of the repeat (NaN where a client's line
        # had no thread counts)
        for col, pick in FAIRNESS_PICKS:
            r[col] = (float(pick(g[col])) if col in g.columns and g[col].notna().all()
                      else math.nan)
        cpu = (0.0 if math.isnan(r["client_cpu_s"]) else r["client_cpu_s"]) + \
            (0.0 if math.isnan(r["server_cpu_s"]) else r["server_cpu_s"])
        keys = r["key_ops_per_sec"] * r["runtime_seconds"]
        r["keys_per_cpu_sec"] = keys / cpu if cpu > 0 and not math.isnan(keys) else math.nan
        records.append(r)
    out = pd.DataFrame.from_records(records, columns=cases + [rep, "clients", "ops_per_sec",
                                                               "key_ops_per_sec", "payload_gbps",
                                                               "client_cpu_s", "runtime_seconds",
                                                               *LATENCY_COLUMNS, "max_us",
                                                               "server_cpu_s", "keys_per_cpu_sec",
                                                               "host_steal_pct",
                                                               *FAIRNESS_COLUMNS])
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


def sweep_rows(param: str, value: str, summary) -> list[dict]:
    """Rows of sweep.csv for one sweep point: one per transport in that point's PS summary.csv,
    or in several (a list: the point's rounds, each a runner run of its own; their repeats are
    pooled and summary_csv lists them, separated by ';').

    keys/s is the median over repeats of the run phase's summed client rates (with 2 repeats, their
    mean), its std the spread; p99 and the CPU columns are means over repeats of the per-repeat
    values of :func:`per_repeat`, and so are the slowest and fastest thread shares. A
    transport without successful run rows gets its first non-success status and empty metrics."""
    paths = list(summary) if isinstance(summary, (list, tuple)) else [summary]
    if not paths:
        raise ValueError(f"sweep point {param}={value}: no summary.csv given")
    frames = [load_ps_summary(p) for p in paths]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    where = ";".join(str(f.attrs["path"]) for f in frames)
    reps = pd.concat([per_repeat(f) for f in frames], ignore_index=True)
    reps = reps[reps["phase"] == "run"] if "phase" in reps.columns else reps
    rows = []
    for transport in sorted(set(df["transport"].dropna().astype(str))):
        g = reps[reps["transport"].astype(str) == transport]
        if len(g) == 0:
            st = df[(df["transport"].astype(str) == transport) & (df["status"] != "success")]["status"]
            rows.append(dict(param=param, value=value, transport=transport,
                             status=str(st.iloc[0]) if len(st) else "no_run_rows", repeats=0,
                             summary_csv=where))
            continue
        rows.append(dict(
            param=param, value=value, transport=transport, status="success", repeats=len(g),
            key_ops_per_sec=float(g["key_ops_per_sec"].median()),
            key_ops_per_sec_std=float(g["key_ops_per_sec"].std(ddof=1)) if len(g) > 1 else 0.0,
            p99_us=float(g["p99_us"].mean()), client_cpu_s=float(g["client_cpu_s"].mean()),
            server_cpu_s=float(g["server_cpu_s"].mean()),
            keys_per_cpu_sec=float(g["keys_per_cpu_sec"].mean()), summary_csv=where,
            host_steal_pct=None if g["host_steal_pct"].isna().all()
            else float(g["host_steal_pct"].max()),  # the worst repeat
            **{col: None if g[col].isna().all() else float(g[col].mean())
               for col in FAIRNESS_COLUMNS}))
    return rows
