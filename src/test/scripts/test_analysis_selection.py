"""recbench.analysis.selection: the spread of a sweep's rounds, the held-out fraction of the best
point, and the Monte Carlo pass rate of a flat curve, on hand-computed cases."""

import math
import unittest

from recbench import analysis


class RoundSpreadTest(unittest.TestCase):
    def test_pooled_over_points(self):
        e = math.exp
        rates = {1: {1: e(0.1), 2: e(-0.1)},              # residuals +-0.1: 0.02, 1 dof
                 2: {1: e(0.2), 2: e(0.0), 3: e(-0.2)},   # +-0.2 and 0: 0.08, 2 dof
                 4: {1: 5.0}}                              # one round: no dof
        self.assertAlmostEqual(analysis.round_spread(rates), math.sqrt(0.10 / 3), places=12)

    def test_scale_free_and_none_without_a_repeat(self):
        a = {1: {1: 10.0, 2: 12.0}, 2: {1: 7.0, 2: 6.0}}
        b = {p: {r: v * 1e6 for r, v in by.items()} for p, by in a.items()}
        self.assertAlmostEqual(analysis.round_spread(a), analysis.round_spread(b), places=12)
        self.assertIsNone(analysis.round_spread({1: {1: 10.0}, 2: {2: 5.0}}))
        self.assertIsNone(analysis.round_spread({}))


class HeldOutTest(unittest.TestCase):
    # three points measured in three rounds; point 2's spread lifts its median to the in-sample
    # best (medians 10, 11, 10: the target's fraction 10 / 11 = 0.91), but the rounds that pick
    # it are not the rounds it is measured against
    def test_each_round_measured_against_the_others_pick(self):
        rates = {1: {1: 10.0, 2: 10.0, 3: 10.0},
                 2: {1: 12.0, 2: 11.0, 3: 9.0},
                 16: {1: 10.0, 2: 10.0, 3: 10.0}}
        held = analysis.held_out_fractions(rates, 16)
        # round 1: rounds 2 and 3 give medians 10, 10, 10 -> the first point, 1; round 2: rounds 1
        # and 3 give 10, 10.5, 10 -> point 2 (11 in round 2); round 3: 10, 11.5, 10 -> point 2 (9)
        self.assertEqual([(h.round, h.best_point) for h in held], [(1, 1), (2, 2), (3, 2)])
        self.assertEqual([round(h.ratio, 4) for h in held], [1.0, round(10 / 11, 4), round(10 / 9, 4)])

    def test_rounds_a_point_missed_and_a_single_round(self):
        rates = {1: {1: 10.0, 2: 10.0}, 4: {1: 20.0}, 16: {1: 9.0, 2: 9.0}}
        # round 1: point 4 has no other round, so it cannot be picked; round 2: it was not measured
        held = analysis.held_out_fractions(rates, 16)
        self.assertEqual([(h.round, h.best_point, h.ratio) for h in held], [(1, 1, 0.9), (2, 1, 0.9)])
        self.assertEqual(analysis.held_out_fractions({1: {1: 5.0}, 16: {1: 4.0}}, 16), [])
        self.assertEqual(analysis.held_out_fractions(rates, 8), [])


class PassRatesTest(unittest.TestCase):
    def test_no_noise_passes_what_is_at_the_goal(self):
        self.assertEqual(analysis.pass_rates(0.0, 5, 3, 0.9, trials=200), (1.0, 1.0))
        self.assertEqual(analysis.pass_rates(0.0, 5, 3, 0.9, level=0.89, trials=200), (0.0, 0.0))

    def test_the_in_sample_best_reads_high(self):
        # a flat curve of five points: the in-sample statistic fails more often as the spread
        # grows, and more often than the held-out one at the same spread
        low = analysis.pass_rates(0.05, 5, 3, 0.9)
        high = analysis.pass_rates(0.15, 5, 3, 0.9)
        self.assertGreater(low[0], high[0])
        self.assertLess(high[0], high[1])
        self.assertLess(high[0], 0.75)
        self.assertEqual(high, analysis.pass_rates(0.15, 5, 3, 0.9))  # seeded
        # a target truly at 0.8 passes less often than a flat one, by either statistic
        down = analysis.pass_rates(0.15, 5, 3, 0.9, level=0.8)
        self.assertLess(down[0], high[0])
        self.assertLess(down[1], high[1])

    def test_one_round_and_bad_arguments(self):
        in_sample, held = analysis.pass_rates(0.1, 5, 1, 0.9, trials=100)
        self.assertTrue(0.0 <= in_sample <= 1.0)
        self.assertTrue(math.isnan(held))
        for args in ((0.1, 1, 3, 0.9), (0.1, 5, 0, 0.9), (-0.1, 5, 3, 0.9), (0.1, 5, 3, 0.9, 0.0)):
            with self.assertRaisesRegex(ValueError, "pass_rates"):
                analysis.pass_rates(*args)


if __name__ == "__main__":
    unittest.main()
