"""YCSB-cpp style result text: format a recbench._ycsb report, and parse such text back.

Format (one block per phase that ran; latencies in microseconds):

    Load runtime(sec): 0.52
    Load operations(ops): 100000
    Load throughput(ops/sec): 192307.69
    Load CPU(sec): user=0.98 sys=0.07
    Load INSERT: Count=100000 Avg(us)=9.8 Min(us)=1.2 Max(us)=830.1 p50(us)=8.1
        p90(us)=14.2 p99(us)=40.3 p99.9(us)=120.5      (one line in the output, folded here)

With measurementtype=basic the per-operation lines carry Count, Avg, Min and Max only.
Operations that did not succeed are separate lines: READ-NOTFOUND, SCAN-NOTSUPPORTED, UPDATE-FAILED.
With -target (open loop) the latency from the intended start time follows as Intended-READ, ...
lines (measurement.interval=intended|both) and one line gives the timetable:

    Run target(ops/sec): 20000 arrival=uniform late_sends=12
"""

from __future__ import annotations

import re

from recbench import records

PHASES = (("load", "Load"), ("run", "Run"))
_PCTS = (("p50", "p50_us"), ("p90", "p90_us"), ("p99", "p99_us"), ("p99.9", "p999_us"))


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def format_report(report: dict) -> list[str]:
    lines = []
    for key, label in PHASES:
        ph = report.get(key)
        if not ph:
            continue
        lines.append(f"{label} runtime(sec): {ph['runtime_s']:.6f}")
        lines.append(f"{label} operations(ops): {ph['operations']}")
        lines.append(f"{label} throughput(ops/sec): {ph['throughput']:.2f}")
        lines.append(f"{label} CPU(sec): user={ph['cpu_user_s']:.3f} sys={ph['cpu_sys_s']:.3f}")
        if report.get("target"):
            lines.append(f"{label} target(ops/sec): {_num(report['target'])} "
                         f"arrival={report['arrival']} late_sends={ph['late_sends']}")
        for op in ph["ops"] + ph.get("intended_ops", []):
            parts = [f"Count={op['count']}", f"Avg(us)={_num(round(op['avg_us'], 3))}",
                     f"Min(us)={_num(op['min_us'])}", f"Max(us)={_num(op['max_us'])}"]
            if report.get("hdr", True):
                parts += [f"{name}(us)={_num(op[k])}" for name, k in _PCTS]
            lines.append(f"{label} {op['name']}: " + " ".join(parts))
        if ph.get("errors"):
            lines.append(f"{label} errors: {ph['errors']} (first: {ph['first_error']})")
    return lines


_TOTAL = re.compile(r"^(Load|Run) (runtime\(sec\)|operations\(ops\)|throughput\(ops/sec\)): (\S+)")
_CPU = re.compile(r"^(Load|Run) CPU\(sec\): user=(\S+) sys=(\S+)")
_OP = re.compile(r"^(Load|Run) ([A-Za-z][A-Za-z-]*): (Count=.*)$")
_TARGET = re.compile(r"^(Load|Run) target\(ops/sec\): (\S+) arrival=(\S+) late_sends=(\d+)")


def parse_report(text: str) -> dict:
    """Parse the lines above (the last occurrence wins) into
    {"load": {...}, "run": {...}} with runtime_s, operations, throughput, cpu_user_s, cpu_sys_s
    and ops {name: {count, avg_us, min_us, max_us, p50_us, ...}} (Intended-* names included);
    with -target also target, arrival and late_sends. Missing phases are absent."""
    out: dict = {}
    names = {"runtime(sec)": "runtime_s", "operations(ops)": "operations",
             "throughput(ops/sec)": "throughput"}
    for line in text.splitlines():
        m = _TOTAL.match(line)
        if m:
            ph = out.setdefault(m.group(1).lower(), {"ops": {}})
            v = float(m.group(3))
            ph[names[m.group(2)]] = int(v) if m.group(2) == "operations(ops)" else v
            continue
        m = _CPU.match(line)
        if m:
            ph = out.setdefault(m.group(1).lower(), {"ops": {}})
            ph["cpu_user_s"], ph["cpu_sys_s"] = float(m.group(2)), float(m.group(3))
            continue
        m = _TARGET.match(line)
        if m:
            ph = out.setdefault(m.group(1).lower(), {"ops": {}})
            ph["target"], ph["arrival"] = float(m.group(2)), m.group(3)
            ph["late_sends"] = int(m.group(4))
            continue
        m = _OP.match(line)
        if m:
            ph = out.setdefault(m.group(1).lower(), {"ops": {}})
            fields = {}
            for k, v in records.parse_kv(m.group(3)).items():
                k = k.replace("(us)", "").lower()
                k = {"count": "count", "p99.9": "p999_us"}.get(k, k if k == "count" else k + "_us")
                fields[k] = int(v) if k == "count" else float(v)
            ph["ops"][m.group(2)] = fields
    return out
