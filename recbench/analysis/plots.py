"""Plots of recbench results: matplotlib Figure objects on the Agg canvas (no pyplot state, no
display needed); each function writes one PNG and returns its path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from recbench.analysis.compare import per_repeat, totals
from recbench.latency_curve import CurvePoint

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


def _totals_repeats(df: pd.DataFrame, phase: str) -> pd.DataFrame:
    """The successful per-repeat rows of a summary_totals.csv frame (not the `mean` rows)."""
    reps = df[(df["phase"] == phase) & (df["row_type"] == "repeat") & (df["status"] == "success")]
    reps = reps[reps["key_ops_per_sec"].notna()]
    _require_rows(reps, f"no successful {phase} rows")
    return reps


def plot_ps_throughput(df: pd.DataFrame, path, phase: str = "run") -> Path:
    """Bar per transport: mean over repeats of the summed client key rate (M keys/s), error bars
    one standard deviation over repeats. `df` is a summary.csv or a summary_totals.csv frame."""
    if df.attrs.get("kind") == "ps_totals":
        g = _totals_repeats(df, phase).groupby("transport", observed=True)["key_ops_per_sec"]
        t = pd.DataFrame({"key_ops_per_sec_mean": g.mean(), "key_ops_per_sec_std": g.std(ddof=1)})
        t = t.fillna({"key_ops_per_sec_std": 0.0})
    else:
        t = totals(df)
        t = t[t["phase"] == phase]
        _require_rows(t, f"no successful {phase} rows")
        t = t.groupby("transport", observed=True)[["key_ops_per_sec_mean",
                                                    "key_ops_per_sec_std"]].mean()
    fig, ax = _figure()
    ax.bar(t.index.astype(str), t["key_ops_per_sec_mean"] / 1e6, yerr=t["key_ops_per_sec_std"] / 1e6,
           capsize=4, color="tab:blue")
    ax.set_ylabel("M keys/s (sum over clients)")
    ax.set_title(f"PS throughput per transport ({phase} phase, mean ± sd over repeats)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_ps_latency(df: pd.DataFrame, path, phase: str = "run") -> Path:
    """Grouped bars per transport: p50, p95, p99, p99.9 latency (µs), means over repeats. From a
    summary_totals.csv frame the percentiles are the runner's exact histogram merges (where its
    latency_merge column says so); from a summary.csv frame, the worst client's."""
    if df.attrs.get("kind") == "ps_totals":
        reps = _totals_repeats(df, phase)
    else:
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


def plot_latency_vs_rate(points: list[CurvePoint], path, slo_p99_us: float | None = None) -> Path:
    """plots/latency_vs_rate.png: corrected p99 (solid) and service p99 (dashed) against the
    achieved key rate, one colour per transport, log latency axis, the SLO as a line."""
    ok = [p for p in points if p.ok]
    if not ok:
        raise ValueError("nothing to plot: no successful open-loop point")
    fig, ax = _figure(7.5, 4.5)
    for t in dict.fromkeys(p.transport for p in ok):
        mine = sorted((p for p in ok if p.transport == t), key=lambda p: p.offered_rate)
        xs = [(p.key_ops_per_sec or 0) / 1e6 for p in mine]
        line = ax.plot(xs, [p.p99_us for p in mine], marker="o", label=f"{t} p99 (corrected)")[0]
        if all(p.service_p99_us is not None for p in mine):
            ax.plot(xs, [p.service_p99_us for p in mine], marker="x", linestyle="--",
                    color=line.get_color(), label=f"{t} p99 (service)")
    if slo_p99_us:
        ax.axhline(slo_p99_us, color="grey", linestyle=":", label=f"SLO p99 {slo_p99_us:g} µs")
    ax.set_xlabel("achieved M keys/s")
    ax.set_ylabel("p99 latency per batch (µs)")
    ax.set_yscale("log")
    ax.set_title("Open loop: latency vs throughput")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return _save(fig, path)
