"""recbench.latency_hist: the PS_BENCHMARK_HIST line round-trips, merges are exact, percentiles
follow the C core's rule, and malformed lines are refused with a reason."""

import math
import random
import unittest

from recbench import latency_hist
from recbench.latency_hist import Hist


def brute_percentile(values, p):
    """The rule of rs_hist_percentile over already-bucketed values (each value is its bucket's
    upper edge): the ceil(p% * n)-th smallest."""
    v = sorted(values)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1]


def hist_of(values):
    h = Hist(len(values), min(values), max(values), float(sum(values)))
    for x in values:
        h.buckets[x] = h.buckets.get(x, 0) + 1
    return h


class LatencyHistTest(unittest.TestCase):
    def test_round_trip(self):
        h = hist_of([1000, 1000, 2047, 70000])
        line = latency_hist.format_line("run", h)
        self.assertTrue(line.startswith("PS_BENCHMARK_HIST phase=run count=4 "))
        phase, back = latency_hist.parse_line(line)
        self.assertEqual(phase, "run")
        self.assertEqual((back.count, back.min_ns, back.max_ns, back.buckets),
                         (4, 1000, 70000, {1000: 2, 2047: 1, 70000: 1}))
        self.assertIsNone(latency_hist.parse_line("PS_BENCHMARK_RESULT phase=run"))

    def test_merge_is_exact(self):
        rng = random.Random(7)
        a = [rng.choice([100, 150, 300, 900, 5000]) for _ in range(997)]
        b = [rng.choice([120, 150, 4000, 90000]) for _ in range(31)]
        merged = hist_of(a).merge(hist_of(b))
        for p in (1, 50, 90, 95, 99, 99.9, 100):
            self.assertEqual(merged.percentile_ns(p), brute_percentile(a + b, p), p)
        self.assertEqual((merged.count, merged.min_ns, merged.max_ns), (1028, 100, 90000))
        # the worst client's p50 is not the merged p50: that was the old bound
        self.assertGreater(max(hist_of(a).percentile_ns(50), hist_of(b).percentile_ns(50)),
                           merged.percentile_ns(50))

    def test_collect_takes_each_phase(self):
        text = "\n".join(["PS_BENCHMARK_RESULT phase=load x=1",
                          latency_hist.format_line("load", hist_of([5])),
                          "PS_BENCHMARK_LOADED",
                          latency_hist.format_line("run", hist_of([7, 9]))])
        got = latency_hist.collect(text)
        self.assertEqual(sorted(got), ["load", "run"])
        self.assertEqual(got["run"].count, 2)

    def test_malformed_lines_name_the_problem(self):
        head = "PS_BENCHMARK_HIST phase=run"
        for line, word in [(f"{head} count=2 min_ns=1 max_ns=2 sum_ns=3 buckets=1:1", "add up"),
                           (f"{head} count=1 min_ns=1 max_ns=2 sum_ns=3 buckets=1-1", "malformed"),
                           ("PS_BENCHMARK_HIST phase=run min_ns=1", "malformed")]:
            with self.assertRaises(ValueError) as cm:
                latency_hist.parse_line(line)
            self.assertIn(word, str(cm.exception))

    def test_empty(self):
        self.assertEqual(Hist().percentile_ns(50), 0)
        self.assertEqual(Hist().merge(Hist()).count, 0)


if __name__ == "__main__":
    unittest.main()
