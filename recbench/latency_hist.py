"""Batch-latency histograms that cross process boundaries, so percentiles over several clients are
exact merges instead of a bound.

recbench-ps-bench prints, after each PS_BENCHMARK_RESULT line, one line with the phase's histogram
(the C core's HDR-style buckets: each value lies within 1/128 of its bucket's upper edge):

    PS_BENCHMARK_HIST phase=run count=N min_ns=... max_ns=... sum_ns=... buckets=HIGH:COUNT,...

where HIGH is a bucket's highest value in ns and only non-empty buckets are listed. A percentile
is computed as the C core does (rs_hist_percentile): the upper edge of the bucket holding the
ceil(p% * count)-th value, clamped to [min, max].
"""

from __future__ import annotations

import math

from recbench import records

HIST_PREFIX = "PS_BENCHMARK_HIST"


class Hist:
    """count, min/max/sum in ns, and {bucket_high_ns: count}."""

    __slots__ = ("buckets", "count", "max_ns", "min_ns", "sum_ns")

    def __init__(self, count=0, min_ns=0, max_ns=0, sum_ns=0.0, buckets=None):
        self.count = count
        self.min_ns = min_ns
        self.max_ns = max_ns
        self.sum_ns = sum_ns
        self.buckets = dict(buckets or {})

    @classmethod
    def from_tuple(cls, t):
        """From recbench._ps's (count, min_ns, max_ns, sum_ns, [(high_ns, count), ...])."""
        count, mn, mx, total, buckets = t
        return cls(count, mn, mx, total, {int(h): int(c) for h, c in buckets})

    def merge(self, other: Hist) -> Hist:
        if other.count:
            self.min_ns = other.min_ns if not self.count else min(self.min_ns, other.min_ns)
            self.max_ns = max(self.max_ns, other.max_ns)
        self.count += other.count
        self.sum_ns += other.sum_ns
        for h, c in other.buckets.items():
            self.buckets[h] = self.buckets.get(h, 0) + c
        return self

    def percentile_ns(self, p: float) -> int:
        if not self.count:
            return 0
        rank = max(1, math.ceil(p / 100.0 * self.count))
        seen = 0
        for high in sorted(self.buckets):
            seen += self.buckets[high]
            if seen >= rank:
                return min(max(high, self.min_ns), self.max_ns)
        return self.max_ns

    def mean_ns(self) -> float:
        return self.sum_ns / self.count if self.count else 0.0


def format_line(phase: str, hist: Hist) -> str:
    buckets = ",".join(f"{h}:{c}" for h, c in sorted(hist.buckets.items()))
    return (f"{HIST_PREFIX} phase={phase} count={hist.count} min_ns={hist.min_ns} "
            f"max_ns={hist.max_ns} sum_ns={hist.sum_ns:.0f} buckets={buckets}")


def parse_line(line: str):
    """(phase, Hist) from one PS_BENCHMARK_HIST line; None for any other line. A malformed line
    raises ValueError naming what is wrong."""
    line = line.strip()
    if not line.startswith(HIST_PREFIX + " "):
        return None
    fields = records.parse_kv(line[len(HIST_PREFIX):])
    try:
        buckets: dict[int, int] = {}
        if fields.get("buckets"):
            for item in fields["buckets"].split(","):
                h, c = item.split(":")
                buckets[int(h)] = buckets.get(int(h), 0) + int(c)
        hist = Hist(int(fields["count"]), int(fields["min_ns"]), int(fields["max_ns"]),
                    float(fields["sum_ns"]), buckets)
    except (KeyError, ValueError) as e:
        raise ValueError(f"malformed {HIST_PREFIX} line ({e}): {line[:120]}") from None
    if sum(buckets.values()) != hist.count:
        raise ValueError(f"{HIST_PREFIX} line: bucket counts add up to {sum(buckets.values())}, "
                         f"count says {hist.count}")
    return fields.get("phase", ""), hist


def collect(text: str) -> dict:
    """{phase: Hist} from a client's stdout (the last line of each phase wins)."""
    out = {}
    for line in text.splitlines():
        got = parse_line(line)
        if got:
            out[got[0]] = got[1]
    return out
