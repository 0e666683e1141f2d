"""The best point of a noisy sweep, and a fraction of it.

A sweep's "best" point is the largest of several noisy medians, so it reads high (the winner's
curse), and any point's fraction "of the best" reads low: on a curve that is truly flat, the
largest of five medians stands above their common level by about one standard deviation of a
median. Three tools, for sweeps run in rounds (`--rounds N`: every point measured once per round):

- :func:`round_spread`: the sweep's own noise — the pooled standard deviation of log(rate) of a
  point's rounds about that point's mean (≈ the relative spread of one round's rate).
- :func:`held_out_fractions`: per round, the best point picked on the *other* rounds' medians and
  the target's rate over that point's rate in this round. The pick does not see the round it is
  measured in, so this round's noise cannot lift the best; it may pick a point that is not the
  truly best (then the ratio reads high), so the in-sample fraction and this one bracket the truth.
- :func:`pass_rates`: how often a target whose true level is `level` times the other points'
  (1.0: a flat curve) would pass `target >= goal x best` under either statistic, with that
  spread, that many points and rounds (a Monte Carlo with independent log-normal rounds: this
  VM's rates are often bimodal, so it is a guide, not a law).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

Rates = Mapping[Hashable, Mapping[int, float]]  # point -> round -> rate


@dataclass(frozen=True)
class HeldOut:
    """One round's held-out comparison: the point the other rounds' medians call best, and the
    target's rate over that point's rate in this round."""
    round: int
    best_point: Hashable
    ratio: float


def round_spread(rates: Rates) -> float | None:
    """Pooled standard deviation of log(rate) about each point's mean over its rounds (points
    with two or more positive rates count; degrees of freedom n - 1 per point). None without any
    point measured twice."""
    ss, dof = 0.0, 0
    for by_round in rates.values():
        logs = [math.log(v) for v in by_round.values() if v > 0]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
    return math.sqrt(ss / dof) if dof else None


def held_out_fractions(rates: Rates, target: Hashable) -> list[HeldOut]:
    """Per round the target was measured in: the best point by the medians of the other rounds
    (among the points measured in this round too; ties go to the first in `rates`' order), and
    the target's rate over its rate in this round. Rounds where no point has another round are
    left out, so a sweep of one round gives []."""
    out = []
    for r in sorted(rates.get(target, {})):
        best, best_med = None, -math.inf
        for point, by_round in rates.items():
            others = [v for k, v in by_round.items() if k != r]
            if by_round.get(r, 0) > 0 and others:
                med = statistics.median(others)
                if med > best_med:
                    best, best_med = point, med
        if best is not None:
            out.append(HeldOut(r, best, rates[target][r] / rates[best][r]))
    return out


def pass_rates(sigma: float, points: int, rounds: int, goal: float, level: float = 1.0,
               trials: int = 20000, seed: int = 0) -> tuple[float, float]:
    """For a sweep of `points` points measured in `rounds` rounds, each round's rate log-normal
    with standard deviation `sigma` of its log, and the last point's true level `level` times the
    others' (1.0: a flat curve): the share of trials in which the last point passes `goal` by the
    in-sample statistic (its median over the largest point median) and by the held-out one (the
    median of held_out_fractions' ratios; NaN with one round). Seeded: the same arguments give
    the same figures."""
    if points < 2 or rounds < 1 or sigma < 0 or level <= 0 or trials < 1:
        raise ValueError(f"pass_rates: points {points} (>= 2), rounds {rounds} (>= 1), "
                         f"sigma {sigma} (>= 0), level {level} (> 0), trials {trials} (>= 1)")
    x = np.random.default_rng(seed).lognormal(0.0, sigma, size=(trials, points, rounds))
    x[:, -1, :] *= level
    med = np.median(x, axis=2)
    in_sample = float(np.mean(med[:, -1] / med.max(axis=1) >= goal))
    if rounds < 2:
        return in_sample, math.nan
    idx = np.arange(trials)
    ratios = []
    for r in range(rounds):
        best = np.median(np.delete(x, r, axis=2), axis=2).argmax(axis=1)
        ratios.append(x[idx, -1, r] / x[idx, best, r])
    held_out = float(np.mean(np.median(np.array(ratios), axis=0) >= goal))
    return in_sample, held_out
