"""Thread scaling of the PS transports on one host: keys/s, CPU seconds and p99 against client
threads (1, 2, 4, 8, 16) and server threads (1, 2, 4), with the issue-16 goals evaluated.

`tools/benchmarks/bench_thread_scaling.py [--transports brpc,grpc,shm] [--out-dir DIR] ...` runs,
for each server thread count S, the parameter sweep of recbench.bench.sweep_ps over
`--client-threads-per-process` (the runner, tools/benchmarks/run_benchmark_ps.py, once per point,
every transport in the same run, with `--server-worker-threads S --server-rdma-threads S`). It
writes DIR/server_threads_S/ (the sweep's points, sweep.csv, sweep.rate.png, sweep.cpu.png),
DIR/thread_scaling.csv (one row per transport, server threads and client threads),
DIR/thread_scaling_rounds.csv (the same points' keys/s in each round) and
DIR/thread_scaling_goals.csv (one row per transport and server threads), and prints the goals.

Goals (issue 16), per transport and server thread count:
* throughput: at the largest client thread count keys/s >= 90 % of the best keys/s over the range;
* p99 within Little's law: a closed loop with N requests in flight completing X requests/s has a
  mean latency of W = N / X (Little's law); requests served in turn all see about W, so a p99 far
  above W means some threads wait while others are served (starvation, the symptom of spinning
  waiters on oversubscribed cores). The goal is p99 <= LITTLE_P99_FACTOR x W at the largest
  client thread count; both numbers are reported.

Beside the goals, each point carries the slowest and the fastest client thread's share of the
mean batches per thread (slowest_thread_share, fastest_thread_share; printed as `threads`): a p99
above the bound with shares near 1.0 is every thread's requests waiting longer now and then; one
with a share far below 1.0 is some threads served less than others. The printed goals end with
a `p99 misses:` line that names each miss one or the other (STRAGGLER_SHARE).

The gather bound (on unless --no-gather-bound): a PS writes every reply into its own buffer, so
with T client threads x D requests in flight the server's row gather writes into T x D buffers in
turn, and the bytes of replies in flight crowd the caches. Before the sweeps, per round and client
thread count, the engine alone (recbench.kv_bench: the runner's index type, one thread,
batch_get_flat, no transport) gathers batches into T x D output buffers (out_buffers);
thread_scaling_gather.csv keeps its keys/s, thread_scaling.csv a column per point, and the goals
file gather_frac_at_max: the gather's keys/s at the largest count's footprint over its keys/s at
the best point's. It is how much of a transport's fraction the memory hierarchy alone takes on
this machine, measured beside it, with no transport to blame.

With --rounds N, the goals file also pairs the points round by round: frac_of_best_by_round
lists, per round, keys/s at the largest count over keys/s at the best point in the same round,
and rounds_at_throughput_goal (`rounds` in the table) counts the rounds at 90 % or more. A
point's median moves with the machine from one quarter of an hour to the next; the paired
ratios show whether a miss (or a pass) holds in every round or is one round's draw.

The best point is the largest of several noisy medians and reads high, so its fractions read
low. With two rounds or more the goals file also has the held-out figures
(recbench.analysis.selection): frac_of_best_held_out, the median over rounds of the largest
count's keys/s over the keys/s, in that round, of the point the other rounds call best
(held_out_best_by_round, held_out_goal_met); round_spread, the sweep's relative spread of one
round; and flat_pass_rate / flat_pass_rate_held_out, how often a curve flat in truth with that
spread would pass the goal by either figure. The goal columns keep the in-sample figure.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import statistics
import sys
from pathlib import Path

from recbench import analysis, kv_bench, procfs, records
from recbench.bench import sweep_ps
from recbench.cpuinfo import cpu_model
from recbench.errors import RecbenchError
from recbench.launch import SOURCE_ROOT
from recbench.runner import cli as runner_cli
from recbench.runner import results

log = logging.getLogger("recbench.bench.thread_scaling")

THROUGHPUT_GOAL = 0.90
LITTLE_P99_FACTOR = 2.0
# a p99 miss whose slowest client thread got less than this share of the mean is called a
# straggler's: some threads were served less than others, not every request waiting longer
STRAGGLER_SHARE = 0.85

SCALING_COLUMNS = ["transport", "server_threads", "client_threads", "status", "key_ops_per_sec",
                   "frac_of_best", "p99_us", "little_us", "p99_over_little", "in_flight_requests",
                   "client_cpu_s", "server_cpu_s", "keys_per_cpu_sec", "summary_csv",
                   "host_steal_pct", "slowest_thread_share", "fastest_thread_share",
                   "gather_key_ops_per_sec"]
GOAL_COLUMNS = ["transport", "server_threads", "best_key_ops_per_sec", "best_client_threads",
                "max_client_threads", "key_ops_per_sec_at_max", "frac_of_best_at_max",
                "throughput_goal_met", "p99_us_at_max", "little_us_at_max", "p99_over_little_at_max",
                "p99_goal_met", "host_steal_pct_at_max", "slowest_thread_share_at_max",
                "fastest_thread_share_at_max", "frac_of_best_by_round", "rounds_at_throughput_goal",
                "gather_frac_at_max", "frac_of_best_held_out", "held_out_best_by_round",
                "held_out_goal_met", "round_spread", "flat_pass_rate", "flat_pass_rate_held_out"]
ROUND_COLUMNS = ["transport", "server_threads", "client_threads", "round", "key_ops_per_sec"]
GATHER_COLUMNS = ["client_threads", "in_flight_requests", "out_buffer_bytes", "index_type",
                  "gather_key_ops_per_sec", "gather_key_ops_per_sec_by_round"]
GATHER_SECONDS = 1.5


def parse_ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{what} '{text}' is not a comma list of integers (e.g. 1,2,4)") from None
    if not vals or any(v < 1 for v in vals) or len(set(vals)) != len(vals):
        raise ValueError(f"{what} '{text}' needs distinct integers >= 1")
    return sorted(vals)


def scaling_rows(sweep_rows: list[dict], server_threads: int, prefetch_depth: int,
                 batch_keys: int) -> list[dict]:
    """thread_scaling.csv rows of one server thread count from its sweep rows (param
    client-threads-per-process): fraction of the transport's best keys/s, Little's-law latency of
    the in-flight count (client threads x prefetch depth requests of batch_keys keys)."""
    best: dict[str, float] = {}
    for r in sweep_rows:
        if r.get("status") == "success":
            best[r["transport"]] = max(best.get(r["transport"], 0.0), r["key_ops_per_sec"])
    out = []
    for r in sweep_rows:
        threads = int(r["value"])
        row = dict(transport=r["transport"], server_threads=server_threads, client_threads=threads,
                   status=r["status"], in_flight_requests=threads * prefetch_depth,
                   summary_csv=r.get("summary_csv", ""))
        if r.get("status") == "success":
            rate = r["key_ops_per_sec"]
            little = row["in_flight_requests"] * batch_keys / rate * 1e6 if rate > 0 else None
            row.update(key_ops_per_sec=rate, frac_of_best=rate / best[r["transport"]],
                       p99_us=r["p99_us"], little_us=little,
                       p99_over_little=r["p99_us"] / little if little else None,
                       client_cpu_s=r["client_cpu_s"], server_cpu_s=r["server_cpu_s"],
                       keys_per_cpu_sec=r["keys_per_cpu_sec"],
                       host_steal_pct=r.get("host_steal_pct"),
                       slowest_thread_share=r.get("slowest_thread_share"),
                       fastest_thread_share=r.get("fastest_thread_share"))
        out.append(row)
    return out


def goal_rows(rows: list[dict]) -> list[dict]:
    """One row per (transport, server threads): the goals at the largest client thread count."""
    out = []
    keys = sorted({(r["transport"], r["server_threads"]) for r in rows})
    for transport, st in keys:
        g = [r for r in rows if r["transport"] == transport and r["server_threads"] == st]
        ok = [r for r in g if r["status"] == "success"]
        top = max(r["client_threads"] for r in g)
        at = [r for r in ok if r["client_threads"] == top]
        row = dict(transport=transport, server_threads=st, max_client_threads=top)
        if ok:
            b = max(ok, key=lambda r: r["key_ops_per_sec"])
            row.update(best_key_ops_per_sec=b["key_ops_per_sec"], best_client_threads=b["client_threads"])
        if at:
            a = at[0]
            row.update(key_ops_per_sec_at_max=a["key_ops_per_sec"], frac_of_best_at_max=a["frac_of_best"],
                       throughput_goal_met=a["frac_of_best"] >= THROUGHPUT_GOAL,
                       p99_us_at_max=a["p99_us"], little_us_at_max=a["little_us"],
                       p99_over_little_at_max=a["p99_over_little"],
                       p99_goal_met=a["p99_over_little"] is not None
                       and a["p99_over_little"] <= LITTLE_P99_FACTOR,
                       host_steal_pct_at_max=a.get("host_steal_pct"),
                       slowest_thread_share_at_max=a.get("slowest_thread_share"),
                       fastest_thread_share_at_max=a.get("fastest_thread_share"))
        else:
            row.update(throughput_goal_met=False, p99_goal_met=False)
        out.append(row)
    return out


def gather_config(index_type: str, huge_pages: str, record_count: int, value_size: int,
                  batch_keys: int, out_buffers: int) -> dict:
    """recbench.kv_bench's configuration of the gather bound's point: one thread reading batches
    of the runner's shape with batch_get_flat into out_buffers buffers in turn."""
    args = kv_bench.build_parser().parse_args([
        f"--index_type={index_type}", f"--huge_pages={huge_pages}", "--read_mode=batch_get_flat",
        f"--record_count={record_count}", f"--value_size={value_size}", f"--batch_keys={batch_keys}",
        f"--running_seconds={GATHER_SECONDS}", "--threads=1", f"--out_buffers={out_buffers}"])
    return kv_bench.config_from_args(args)


def measure_gather(client_threads: list[int], rounds: int, prefetch_depth: int, **shape) -> list[dict]:
    """thread_scaling_gather.csv's rows: per client thread count T, the engine's keys/s gathering
    into T x prefetch_depth buffers, once per round (1, 2, 4, ..., 1, 2, ...), and the median."""
    by_t: dict[int, list[float]] = {t: [] for t in client_threads}
    cfg = {}
    for r in range(rounds):
        for t in client_threads:
            cfg[t] = gather_config(out_buffers=t * prefetch_depth, **shape)
            run = kv_bench.run(cfg[t])["run"]
            by_t[t].append(run["ops"] / run["seconds"])
            log.info("gather bound, round %d: %d client threads x depth %d = %d buffers (%.1f MB): "
                     "%.2f M keys/s", r + 1, t, prefetch_depth, t * prefetch_depth,
                     run["out_bytes"] / 1e6, by_t[t][-1] / 1e6)
    return [dict(client_threads=t, in_flight_requests=t * prefetch_depth,
                 out_buffer_bytes=t * prefetch_depth * shape["batch_keys"] * shape["value_size"],
                 index_type=cfg[t]["index_type"], gather_key_ops_per_sec=statistics.median(v),
                 gather_key_ops_per_sec_by_round=";".join(f"{x:.0f}" for x in v))
            for t, v in by_t.items()]


def add_gather(rows: list[dict], goals: list[dict], gather: list[dict]) -> None:
    """The gather bound beside the transports: its keys/s on every thread_scaling.csv row, and
    gather_frac_at_max on the goal rows (its keys/s at the largest count's footprint over its
    keys/s at the best point's)."""
    rate = {g["client_threads"]: g["gather_key_ops_per_sec"] for g in gather}
    for r in rows:
        r["gather_key_ops_per_sec"] = rate.get(r["client_threads"])
    for g in goals:
        best, top = rate.get(g.get("best_client_threads")), rate.get(g["max_client_threads"])
        if best and top:
            g["gather_frac_at_max"] = top / best


def runner_storage_flags(passthrough: list[str]) -> tuple[str, str]:
    """The index type and huge-page mode the runner's servers get from the passed-through flags,
    read as the runner reads them (its defaults, a --profile's values where no flag is given):
    the gather bound uses the same."""
    parser = runner_cli.build_parser()
    args, _ = parser.parse_known_args(passthrough)
    if args.profile:
        runner_cli.apply_profile(args, runner_cli.explicit_dests(parser, passthrough), args.profile)
    return args.index_type, args.huge_pages


def round_rates(summary_csv: str, transport: str) -> dict[int, float]:
    """A point's keys/s per round (the median over that round's repeats), by round number, from
    the summary.csv paths its sweep row lists (`a;b;c`; a sweep of one round has one, numbered 1)."""
    out: dict[int, float] = {}
    for i, p in enumerate((x for x in summary_csv.split(";") if x), 1):
        path = Path(p)
        m = re.fullmatch(r"round_(\d+)", path.parent.name)
        reps = analysis.per_repeat(analysis.load_ps_summary(path))
        reps = reps[(reps["phase"] == "run") & (reps["transport"].astype(str) == transport)]
        if len(reps):
            out[int(m.group(1)) if m else i] = float(reps["key_ops_per_sec"].median())
    return out


def paired_fractions(best: dict[int, float], at_max: dict[int, float]) -> list[float]:
    """Round by round, keys/s at the largest client thread count over keys/s at the best point
    (the point with the best median), for the rounds both have. The two ran a minute apart in
    the same round, so the machine's drift over the run cancels in each ratio."""
    return [at_max[r] / best[r] for r in sorted(best) if r in at_max and best[r] > 0]


def round_rows(rows: list[dict]) -> list[dict]:
    """thread_scaling_rounds.csv's rows: every successful point's keys/s in each round (the
    median over that round's repeats), from the round summaries its row lists."""
    return [dict(transport=r["transport"], server_threads=r["server_threads"],
                 client_threads=r["client_threads"], round=k, key_ops_per_sec=v)
            for r in rows if r["status"] == "success"
            for k, v in sorted(round_rates(r["summary_csv"], r["transport"]).items())]


def add_round_fractions(goals: list[dict], rounds: list[dict]) -> None:
    """Add to the goal rows, from the points' rates per round (round_rows):
    frac_of_best_by_round and rounds_at_throughput_goal (`k/n`); the held-out fraction
    (frac_of_best_held_out, the median over rounds of the largest count's keys/s over the keys/s,
    in that round, of the point the other rounds call best: held_out_best_by_round;
    held_out_goal_met); the sweep's round_spread; and flat_pass_rate / flat_pass_rate_held_out,
    how often a flat curve with that spread would pass either figure
    (recbench.analysis.selection)."""
    by_config: dict[tuple, dict[int, dict[int, float]]] = {}  # -> client threads -> round -> keys/s
    for x in sorted(rounds, key=lambda x: x["client_threads"]):
        by_config.setdefault((x["transport"], x["server_threads"]), {}).setdefault(
            x["client_threads"], {})[x["round"]] = x["key_ops_per_sec"]
    for g in goals:
        if "key_ops_per_sec_at_max" not in g:
            continue
        rates = by_config.get((g["transport"], g["server_threads"]), {})
        top = g["max_client_threads"]
        fr = paired_fractions(rates.get(g["best_client_threads"], {}), rates.get(top, {}))
        g["frac_of_best_by_round"] = ";".join(f"{f:.3f}" for f in fr)
        g["rounds_at_throughput_goal"] = f"{sum(f >= THROUGHPUT_GOAL for f in fr)}/{len(fr)}"
        g.update(held_out_figures(rates, top))


def held_out_figures(rates: dict[int, dict[int, float]], top: int) -> dict:
    """The goal row's held-out figures from the points' keys/s per round (client threads ->
    round -> keys/s): frac_of_best_held_out, held_out_best_by_round and held_out_goal_met (with
    two rounds or more), round_spread, flat_pass_rate and flat_pass_rate_held_out (with a point
    measured twice or more)."""
    out: dict = {}
    held = analysis.held_out_fractions(rates, top)
    if held:
        out["frac_of_best_held_out"] = statistics.median(h.ratio for h in held)
        out["held_out_best_by_round"] = ";".join(str(h.best_point) for h in held)
        out["held_out_goal_met"] = out["frac_of_best_held_out"] >= THROUGHPUT_GOAL
    spread = analysis.round_spread(rates)
    if spread is not None:
        out["round_spread"] = spread
        out["flat_pass_rate"], out["flat_pass_rate_held_out"] = analysis.pass_rates(
            spread, len(rates), max(len(v) for v in rates.values()), THROUGHPUT_GOAL)
    return out


def _fmt(_col, v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def goals_text(goals: list[dict], cpu: str | None = None, rows: list[dict] | None = None) -> str:
    """The goals table as printed; `rows` (thread_scaling.csv's) add a warning when some point
    ran with the hypervisor's steal at STEAL_WARN_PCT or more."""
    rows = rows or []
    head = (f"goals at the largest client thread count: keys/s >= {THROUGHPUT_GOAL:.0%} of the best; "
            f"p99 <= {LITTLE_P99_FACTOR:g} x Little's-law latency (in-flight requests / request rate); "
            f"rounds: those whose keys/s at the largest count reached {THROUGHPUT_GOAL:.0%} of the best "
            "point's in the same round"
            + ("; gather: the engine alone, gathering into the largest count's in-flight replies' "
               "buffers over into the best point's (the memory hierarchy's own fraction, no "
               "transport)" if any("gather_frac_at_max" in g for g in goals) else "")
            + (f"; CPU {cpu}" if cpu else ""))
    cols = (f"{'transport':<10} {'srv thr':>7} {'best M/s':>9} {'@thr':>5} {'M/s @max':>9} {'frac':>6} "
            f"{'goal':>5} {'rounds':>6} {'gather':>6} {'p99 ms':>8} {'W ms':>8} {'p99/W':>6} {'goal':>5} "
            f"{'steal%':>6} {'threads':>9}")
    lines = [head, cols]
    for g in goals:
        if "key_ops_per_sec_at_max" not in g:
            lines.append(f"{g['transport']:<10} {g['server_threads']:>7} (no successful run at "
                         f"{g['max_client_threads']} client threads)")
            continue
        shares = results.share_range(g.get("slowest_thread_share_at_max"),
                                     g.get("fastest_thread_share_at_max"))
        lines.append(
            f"{g['transport']:<10} {g['server_threads']:>7} {g['best_key_ops_per_sec'] / 1e6:>9.3f} "
            f"{g['best_client_threads']:>5} {g['key_ops_per_sec_at_max'] / 1e6:>9.3f} "
            f"{g['frac_of_best_at_max']:>6.2f} {_fmt(0, g['throughput_goal_met']):>5} "
            f"{g.get('rounds_at_throughput_goal') or '-':>6} "
            f"{_shown(g.get('gather_frac_at_max'), '.2f'):>6} "
            f"{g['p99_us_at_max'] / 1e3:>8.1f} {g['little_us_at_max'] / 1e3:>8.1f} "
            f"{g['p99_over_little_at_max']:>6.2f} {_fmt(0, g['p99_goal_met']):>5} "
            f"{_shown(g.get('host_steal_pct_at_max'), '.1f'):>6} "
            f"{shares:>9}")
    disturbed = [r for r in rows if (r.get("host_steal_pct") or 0.0) >= procfs.STEAL_WARN_PCT]
    if disturbed:
        worst = max(disturbed, key=lambda r: r["host_steal_pct"])
        lines.append(f"warning: host steal reached {procfs.STEAL_WARN_PCT:g} % or more at "
                     f"{len(disturbed)} point(s) (worst {worst['host_steal_pct']:.1f} %: "
                     f"{worst['transport']}, {worst['server_threads']} server / "
                     f"{worst['client_threads']} client threads): the hypervisor ran other work "
                     "on these CPUs, so those points are not the machine's (host_steal_pct in "
                     "thread_scaling.csv)")
    missed = [g for g in goals if "key_ops_per_sec_at_max" in g and not g["p99_goal_met"]]
    if missed:
        def kind(g: dict) -> str:
            lo = g.get("slowest_thread_share_at_max")
            if lo is None or math.isnan(lo):
                return "no thread counts"
            return "stragglers" if lo < STRAGGLER_SHARE else "every thread"
        lines.append("p99 misses: " + "; ".join(
            f"{g['transport']} ({g['server_threads']} server thread"
            f"{'' if g['server_threads'] == 1 else 's'}): {kind(g)}"
            for g in missed) + f" (stragglers: the slowest client thread below "
            f"{STRAGGLER_SHARE:g} of the mean; every thread: all near it, each sometimes waiting long)")
    held = [g for g in goals if "frac_of_best_held_out" in g or "round_spread" in g]
    if held:
        lines.append("the best point is the largest of several noisy medians and reads high; "
                     "held out: per round, the point the other rounds call best, and the median "
                     "over rounds of the largest count's keys/s over its keys/s in that round "
                     "(the two figures bracket the truth); spread: one round's relative spread; "
                     "flat: how often a curve flat in truth, with this spread, passes the goal "
                     "in sample / held out")
        lines.extend(
            f"  {g['transport']:<10} {g['server_threads']:>2} server thread"
            f"{' ' if g['server_threads'] == 1 else 's'}: held out "
            f"{_shown(g.get('frac_of_best_held_out'), '.2f')} "
            f"({_fmt(0, g.get('held_out_goal_met')) or '-'}; best by round "
            f"{g.get('held_out_best_by_round') or '-'}), "
            f"spread {_shown(g.get('round_spread'), '.0%')}, "
            f"flat {_shown(g.get('flat_pass_rate'), '.0%')} / "
            f"{_shown(g.get('flat_pass_rate_held_out'), '.0%')}"
            for g in held)
    return "\n".join(lines)


def _shown(v: float | None, spec: str) -> str:
    """A figure of the printed table, "-" when it is missing (None) or undefined (NaN)."""
    return "-" if v is None or math.isnan(v) else format(v, spec)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bench_thread_scaling.py", allow_abbrev=False,
        description="PS keys/s, CPU seconds and p99 against client and server threads, per transport; "
                    "flags not listed here are passed to run_benchmark_ps.py unchanged.")
    ap.add_argument("--transports", default="brpc,grpc,shm")
    ap.add_argument("--client-threads", default="1,2,4,8,16")
    ap.add_argument("--server-threads", default="1,2,4")
    ap.add_argument("--record-count", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=512)
    ap.add_argument("--batch-keys", type=int, default=500)
    ap.add_argument("--prefetch-depth", type=int, default=4)
    ap.add_argument("--runtime-seconds", type=float, default=4.0)
    ap.add_argument("--warmup-seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runner repeats of each point, back to back")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each server thread count's client-thread points this many times, "
                         "round by round (1, 2, 4, 8, 16, 1, 2, ...), pooling each point's repeats: "
                         "the machine's drift over minutes then falls on every point alike")
    ap.add_argument("--out-dir", type=Path, default=None,
                    help="output directory (default results/thread_scaling_MMDDHHMM)")
    ap.add_argument("--runner", type=Path, default=sweep_ps.DEFAULT_RUNNER)
    ap.add_argument("--gather-bound", action=argparse.BooleanOptionalAction, default=True,
                    help="before the sweeps, measure the engine alone gathering into client "
                         "threads x prefetch depth buffers (thread_scaling_gather.csv; `gather` "
                         "in the goals); --no-gather-bound skips it")
    return ap


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="[thread_scaling] %(message)s")
    ap = build_parser()
    args, passthrough = ap.parse_known_args(argv)
    try:
        client_threads = parse_ints(args.client_threads, "--client-threads")
        server_threads = parse_ints(args.server_threads, "--server-threads")
        sweep_ps.check_rounds(args.rounds)
        if args.repeat < 1:
            raise ValueError(f"--repeat {args.repeat}: give 1 or more")
    except ValueError as e:
        ap.error(str(e))
    for name in ("--client-threads-per-process", "--server-worker-threads", "--server-rdma-threads"):
        if any(a.split("=", 1)[0] == name for a in passthrough):
            ap.error(f"{name} is set per point; give --client-threads / --server-threads")
    common = ["--transports", args.transports, "--record-count", str(args.record_count),
              "--value-size", str(args.value_size), "--batch-keys", str(args.batch_keys),
              "--prefetch-depth", str(args.prefetch_depth),
              "--runtime-seconds", str(args.runtime_seconds),
              "--warmup-seconds", str(args.warmup_seconds), "--repeat", str(args.repeat),
              "--client-load-threads-per-process", "2", *passthrough]
    gather: list[dict] = []
    if args.gather_bound:
        index_type, huge_pages = runner_storage_flags(passthrough)
        try:
            gather = measure_gather(client_threads, args.rounds, args.prefetch_depth,
                                    index_type=index_type, huge_pages=huge_pages,
                                    record_count=args.record_count, value_size=args.value_size,
                                    batch_keys=args.batch_keys)
        except (ValueError, RecbenchError) as e:  # a bad flag, or the engine could not run
            ap.error(f"the gather bound (--index-type {index_type}, --huge-pages {huge_pages}): "
                     f"{e}; --no-gather-bound skips it")
    # created once the bound has run: a run that stops there leaves no empty directory
    out = args.out_dir or records.new_result_dir(SOURCE_ROOT / "results", "thread_scaling_")
    out.mkdir(parents=True, exist_ok=True)
    if gather:
        records.write_csv(out / "thread_scaling_gather.csv", GATHER_COLUMNS, gather, _fmt)
    rows, failed = [], 0
    for st in server_threads:
        d = out / f"server_threads_{st}"
        sweep, bad = sweep_ps.run_sweep(
            "client-threads-per-process", [str(t) for t in client_threads], d,
            common + ["--server-worker-threads", str(st), "--server-rdma-threads", str(st)],
            runner=args.runner, rounds=args.rounds)
        failed += bad
        rows += scaling_rows(sweep, st, args.prefetch_depth, args.batch_keys)
        records.write_csv(out / "thread_scaling.csv", SCALING_COLUMNS, rows, _fmt)
        df = analysis.load_sweep(d / "sweep.csv")
        if (df["status"] == "success").any():
            rate, cpu = analysis.plot_sweep(df, d / "sweep.rate.png", d / "sweep.cpu.png")
            print(f"[output] server_threads={st} rate_png={rate} cpu_png={cpu}")
    goals = goal_rows(rows)
    rounds = round_rows(rows)
    records.write_csv(out / "thread_scaling_rounds.csv", ROUND_COLUMNS, rounds, _fmt)
    add_round_fractions(goals, rounds)
    if gather:
        add_gather(rows, goals, gather)
        records.write_csv(out / "thread_scaling.csv", SCALING_COLUMNS, rows, _fmt)
    records.write_csv(out / "thread_scaling_goals.csv", GOAL_COLUMNS, goals, _fmt)
    autogroup = procfs.sched_autogroup()
    congestion = procfs.tcp_congestion_control()
    host = (cpu_model()
            + ("" if autogroup is None else f"; kernel autogroup {'on' if autogroup else 'off'}")
            + ("" if congestion is None else f"; TCP congestion control {congestion}"))
    print(goals_text(goals, host, rows))
    print(f"[output] thread_scaling_csv={out / 'thread_scaling.csv'}")
    print(f"[output] goals_csv={out / 'thread_scaling_goals.csv'}")
    print(f"[output] rounds_csv={out / 'thread_scaling_rounds.csv'}")
    if gather:
        print(f"[output] gather_csv={out / 'thread_scaling_gather.csv'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
