"""Latency–throughput curves of open-loop runs and the knee at a p99 SLO.

A curve point is one open-loop run (ps_bench --target_rate) of one transport: the offered rate
(batches/s the timetable asked for), the achieved rate, the corrected latency percentiles (from
each batch's scheduled send time, so queueing behind a slow server is counted) and the service
percentiles (from the actual send), late sends, and CPU seconds of each side. The knee at an SLO is
the highest achieved rate whose corrected p99 stays at or below it: what an operator sizing a PS
("how many keys/s while p99 <= X us") needs. Used by the PS runner (--target-rates,
--slo-p99-us: summary.md) and by tools/benchmarks/bench_open_loop.py; the plot is
recbench.analysis.plot_latency_vs_rate.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

CURVE_COLUMNS = ["transport", "offered_rate", "achieved_rate", "key_ops_per_sec", "p50_us",
                 "p99_us", "p999_us", "service_p50_us", "service_p99_us", "service_p999_us",
                 "late_sends", "client_cpu_s", "server_cpu_s", "status"]


@dataclass
class CurvePoint:
    """One open-loop run of one transport (rates in batches/s, latencies in us)."""

    transport: str
    offered_rate: float
    achieved_rate: float | None = None
    key_ops_per_sec: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    service_p50_us: float | None = None
    service_p99_us: float | None = None
    service_p999_us: float | None = None
    late_sends: int | None = None
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    status: str = "success"

    @property
    def ok(self) -> bool:
        return self.status == "success" and self.achieved_rate is not None and \
            self.p99_us is not None


def knee(points: list[CurvePoint], slo_p99_us: float) -> CurvePoint | None:
    """The point with the highest achieved rate whose corrected p99 is <= slo_p99_us (None when no
    point meets the SLO)."""
    if not slo_p99_us > 0:
        raise ValueError(f"--slo-p99-us {slo_p99_us} must be > 0")
    meets = [p for p in points if p.ok and (p.p99_us or 0.0) <= slo_p99_us]
    return max(meets, key=lambda p: p.achieved_rate or 0.0) if meets else None


def knees(points: list[CurvePoint], slo_p99_us: float) -> dict[str, CurvePoint | None]:
    """knee() per transport, transports in first-seen order."""
    out: dict[str, CurvePoint | None] = {}
    for t in dict.fromkeys(p.transport for p in points):
        out[t] = knee([p for p in points if p.transport == t], slo_p99_us)
    return out


def write_csv(points: list[CurvePoint], path) -> Path:
    path = Path(path)
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CURVE_COLUMNS)
        for p in points:
            d = asdict(p)
            w.writerow(["" if d[c] is None else (f"{d[c]:.3f}" if isinstance(d[c], float)
                                                 else d[c]) for c in CURVE_COLUMNS])
    return path


def read_csv(path) -> list[CurvePoint]:
    """Points from a curve CSV written by write_csv; a malformed cell raises ValueError naming
    the file, line and column."""
    types = {f.name: f.type for f in fields(CurvePoint)}
    out = []
    with open(path, newline="") as f:
        for lineno, row in enumerate(csv.DictReader(f), start=2):
            kw: dict[str, Any] = {}
            for col, text in row.items():
                if col not in types:
                    continue
                if text in ("", None):
                    kw[col] = None if col not in ("transport", "status") else ""
                    continue
                try:
                    kw[col] = (text if col in ("transport", "status") else
                               int(float(text)) if col == "late_sends" else float(text))
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: column {col}: '{text}' is not a number")
            out.append(CurvePoint(**kw))
    return out


def _f(v, digits=0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def markdown_lines(points: list[CurvePoint], slo_p99_us: float | None, batch_keys: int) -> list[str]:
    """The summary.md section (Chinese, like the rest of the report): the curve table per
    transport and the knee at the SLO."""
    lines = ["## 开环负载：延迟–吞吐曲线", "",
             ("每个点是一次开环运行（`--target-rate`，按时间表发送）：延迟从计划发送时刻算起"
             "（已校正协调遗漏），服务时间从实际发送时刻算起。速率单位为批次/秒"
             f"（每批 {batch_keys} 个键）。"), "",
             ("| 传输 | 目标速率 | 实际速率 | keys/s | p50 µs | p99 µs | p99.9 µs | 服务 p50 µs | "
             "服务 p99 µs | 服务 p99.9 µs | 迟发 | 客户端 CPU s | 服务端 CPU s | 状态 |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for p in sorted(points, key=lambda p: (p.transport, p.offered_rate)):
        lines.append(
            f"| {p.transport} | {_f(p.offered_rate)} | {_f(p.achieved_rate)} | "
            f"{_f(p.key_ops_per_sec)} | {_f(p.p50_us, 1)} | {_f(p.p99_us, 1)} | "
            f"{_f(p.p999_us, 1)} | {_f(p.service_p50_us, 1)} | {_f(p.service_p99_us, 1)} | "
            f"{_f(p.service_p999_us, 1)} | {_f(p.late_sends)} | {_f(p.client_cpu_s, 2)} | "
            f"{_f(p.server_cpu_s, 2)} | {p.status} |")
    lines.append("")
    if slo_p99_us:
        lines += [f"### 拐点（校正后 p99 ≤ {slo_p99_us:g} µs 的最高实际速率）", "",
                  "| 传输 | 实际速率（批次/秒） | keys/s | 校正 p99 µs | 服务 p99 µs |",
                  "|---|---:|---:|---:|---:|"]
        for t, k in knees(points, slo_p99_us).items():
            if k is None:
                lines.append(f"| {t} | 没有一个点满足 SLO | — | — | — |")
            else:
                lines.append(f"| {t} | {_f(k.achieved_rate)} | {_f(k.key_ops_per_sec)} | "
                             f"{_f(k.p99_us, 1)} | {_f(k.service_p99_us, 1)} |")
        lines.append("")
    return lines
