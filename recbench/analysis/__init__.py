"""recbench.analysis: typed loaders (.loaders), totals and baseline comparison (.compare), plots
(.plots) for recbench's result files and the best point of a sweep run in rounds (.selection), all
re-exported here under one name each.

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

from recbench.analysis.compare import (
    compare,
    per_repeat,
    regressions,
    status_counts,
    sweep_rows,
    totals,
)
from recbench.analysis.loaders import (
    DEFAULT_NOISE_K,
    DEFAULT_THRESHOLD_PCT,
    KV_COLUMNS,
    PS_COLUMNS,
    PS_STATUSES,
    SWEEP_COLUMNS,
    SummaryFormatError,
    detect_kind,
    load_eventual_dat,
    load_kv_summary,
    load_ps_summary,
    load_ps_totals,
    load_summary,
    load_sweep,
    write_csv,
)
from recbench.analysis.plots import (
    plot_eventual,
    plot_kv_engines,
    plot_latency_vs_rate,
    plot_ps_latency,
    plot_ps_throughput,
    plot_sweep,
)
from recbench.analysis.selection import (
    HeldOut,
    held_out_fractions,
    pass_rates,
    round_spread,
)

__all__ = [
    "DEFAULT_NOISE_K",
    "DEFAULT_THRESHOLD_PCT",
    "KV_COLUMNS",
    "PS_COLUMNS",
    "PS_STATUSES",
    "SWEEP_COLUMNS",
    "HeldOut",
    "SummaryFormatError",
    "compare",
    "detect_kind",
    "held_out_fractions",
    "load_eventual_dat",
    "load_kv_summary",
    "load_ps_summary",
    "load_ps_totals",
    "load_summary",
    "load_sweep",
    "pass_rates",
    "per_repeat",
    "plot_eventual",
    "plot_kv_engines",
    "plot_latency_vs_rate",
    "plot_ps_latency",
    "plot_ps_throughput",
    "plot_sweep",
    "regressions",
    "round_spread",
    "status_counts",
    "sweep_rows",
    "totals",
    "write_csv",
]
