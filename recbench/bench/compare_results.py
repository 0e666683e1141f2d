"""Baseline vs candidate report for PS or KV summaries: Markdown (zh or en) and CSV.

`python -m recbench.bench.compare_results BASE CANDIDATE [--threshold PCT] [--noise-k K] [--lang zh|en]
[--out-dir DIR]` (tools/benchmarks/compare_results.py is the same entry point). BASE and CANDIDATE
are summary.csv files or run directories holding one; the kind (PS runner or KV compare) is
detected from the header. Exit codes: 0 no regression, 1 a metric regressed beyond the noise band
(or a case failed in the candidate), 2 unreadable input.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path

import pandas as pd

from recbench import analysis

log = logging.getLogger("recbench.compare")

TEXT = {
    "en": {
        "title": "Benchmark comparison",
        "kind": {"ps": "PS runner summary", "kv": "KV compare summary"},
        "baseline": "Baseline", "candidate": "Candidate",
        "rule": ("Verdict rule: change % = (candidate mean − baseline mean) / baseline mean × 100 over "
                 "repeats; noise band = max(threshold {t:g} %, {k:g} × pooled relative standard "
                 "deviation of the repeats); beyond the band the metric's direction decides."),
        "regressions": "Regressions", "none": "No regression beyond the noise band.",
        "all": "All metrics", "case": "case", "metric": "metric", "change": "change %",
        "band": "noise band %", "verdict": "verdict", "reps": "repeats (b/c)", "note": "note",
        "summary": "{r} regressed, {i} improved, {n} within noise, {f} failed, {m} missing.",
        "verdicts": {},
        "common": "Common to every case: ",
    },
    "zh": {
        "title": "基准对比",
        "kind": {"ps": "PS runner summary", "kv": "KV 引擎对比 summary"},
        "baseline": "基线", "candidate": "候选",
        "rule": ("判定规则：变化 % = (候选均值 − 基线均值) / 基线均值 × 100（对各次重复取均值）；"
                 "噪声带 = max(阈值 {t:g} %, {k:g} × 两侧重复的合并相对标准差)；超出噪声带时按指标方向"
                 "判定提升或退化。"),
        "regressions": "退化", "none": "没有超出噪声带的退化。",
        "all": "全部指标", "case": "用例", "metric": "指标", "change": "变化 %",
        "band": "噪声带 %", "verdict": "结论", "reps": "重复次数 (基线/候选)", "note": "备注",
        "summary": "退化 {r} 项，提升 {i} 项，噪声范围内 {n} 项，失败 {f} 项，缺失 {m} 项。",
        "common": "所有用例相同的配置：",
        "verdicts": {"improved": "提升", "regressed": "退化", "within noise": "噪声范围内",
                     "failed": "失败", "missing": "缺失"},
    },
}


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        return f"{x:.4g}"
    return str(x)


def _case_label(row: pd.Series, cases: list[str]) -> str:
    parts = []
    for c in cases:
        v = row[c]
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            continue
        parts.append(str(v) if c in ("transport", "phase", "workload", "engine") else f"{c}={v}")
    return " ".join(parts)


def _table(cmp: pd.DataFrame, cases: list[str], t: dict) -> list[str]:
    lines = [(f"| {t['case']} | {t['metric']} | {t['baseline']} | {t['candidate']} | {t['change']} | "
              f"{t['band']} | {t['reps']} | {t['verdict']} | {t['note']} |"),
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for _, r in cmp.iterrows():
        change = r["change_pct"]
        change_s = "—" if pd.isna(change) else (f"{change:+.1f}" if not math.isinf(change) else _fmt(change))
        band = "—" if pd.isna(r["noise_pct"]) else f"{r['noise_pct']:.1f}"
        verdict = t["verdicts"].get(r["verdict"], r["verdict"])
        lines.append(f"| {_case_label(r, cases)} | {r['metric']} | {_fmt(r['baseline'])} | "
                     f"{_fmt(r['candidate'])} | {change_s} | {band} | "
                     f"{int(r['baseline_repeats'])}/{int(r['candidate_repeats'])} | {verdict} | "
                     f"{r['note'] or ''} |")
    return lines


def render_markdown(cmp: pd.DataFrame, lang: str = "en") -> str:
    """The comparison as Markdown: header, rule, regressions first, then every metric."""
    t = TEXT[lang]
    cases = [c for c in cmp.columns if c not in (
        "metric", "higher_is_better", "baseline", "candidate", "baseline_repeats", "candidate_repeats",
        "baseline_spread_pct", "candidate_spread_pct", "change_pct", "noise_pct", "verdict", "note")]
    # case columns that are the same everywhere go into one line instead of every row
    common = {c: cmp[c].iloc[0] for c in cases if len(cmp) and cmp[c].nunique(dropna=False) == 1
              and c not in ("transport", "workload", "engine")}
    cases = [c for c in cases if c not in common]
    common_text = ", ".join(f"{c}={v}" for c, v in common.items() if not pd.isna(v))
    counts = cmp["verdict"].value_counts()
    out = [f"# {t['title']}: {t['kind'][cmp.attrs['kind']]}", "",
           f"- {t['baseline']}: `{cmp.attrs.get('baseline_path')}`",
           f"- {t['candidate']}: `{cmp.attrs.get('candidate_path')}`", "",
           *([t["common"] + common_text, ""] if common_text else []),
           t["rule"].format(t=cmp.attrs["threshold_pct"], k=cmp.attrs["k"]), "",
           t["summary"].format(r=counts.get("regressed", 0), i=counts.get("improved", 0),
                               n=counts.get("within noise", 0), f=counts.get("failed", 0),
                               m=counts.get("missing", 0)), "",
           f"## {t['regressions']}", ""]
    reg = analysis.regressions(cmp)
    out += _table(reg, cases, t) if len(reg) else [t["none"]]
    out += ["", f"## {t['all']}", ""] + _table(cmp, cases, t) + [""]
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="compare_results.py",
        description="Compare a candidate benchmark run with a baseline (PS runner or KV compare "
                    "summary.csv); exit 1 when a metric regressed beyond the noise band.")
    ap.add_argument("baseline", help="baseline summary.csv or run directory")
    ap.add_argument("candidate", help="candidate summary.csv or run directory")
    ap.add_argument("--threshold", type=float, default=analysis.DEFAULT_THRESHOLD_PCT, metavar="PCT",
                    help="smallest change in percent that can count as a regression or improvement "
                         "(default %(default)s)")
    ap.add_argument("--noise-k", type=float, default=analysis.DEFAULT_NOISE_K, metavar="K",
                    help="noise band = max(threshold, K x pooled relative spread of repeats) "
                         "(default %(default)s)")
    ap.add_argument("--lang", choices=["zh", "en"], default="en", help="language of the Markdown")
    ap.add_argument("--out-dir", type=Path, help="also write compare.md and compare.csv here")
    return ap


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="[compare] %(message)s")
    args = build_parser().parse_args(argv)
    if args.threshold < 0 or args.noise_k < 0:
        print("compare_results: --threshold and --noise-k must not be negative", file=sys.stderr)
        return 2
    try:
        kinds = {analysis.detect_kind(args.baseline), analysis.detect_kind(args.candidate)}
        if len(kinds) != 1 or kinds & {"ps_totals"}:
            raise analysis.SummaryFormatError(
                f"{args.baseline} and {args.candidate} must both be PS runner summary.csv files or "
                f"both KV compare summary.csv files (found {', '.join(sorted(kinds))})")
        base = analysis.load_summary(args.baseline)
        cand = analysis.load_summary(args.candidate)
    except analysis.SummaryFormatError as e:
        print(f"compare_results: {e}", file=sys.stderr)
        return 2
    cmp = analysis.compare(base, cand, threshold_pct=args.threshold, k=args.noise_k)
    md = render_markdown(cmp, args.lang)
    sys.stdout.write(md)
    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "compare.md").write_text(md, encoding="utf-8")
        analysis.write_csv(cmp, args.out_dir / "compare.csv")
        log.info("wrote %s and %s", args.out_dir / "compare.md", args.out_dir / "compare.csv")
    return 1 if len(analysis.regressions(cmp)) else 0


if __name__ == "__main__":
    sys.exit(main())
