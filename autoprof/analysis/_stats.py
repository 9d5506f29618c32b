"""The noise model of a comparison: how far one sample of times moved from another, with a confidence interval.
Pure Python (no numpy), deterministic (no random draws), shared by ``autoprof diff`` (:mod:`autoprof.analysis.compare`)
and the live ``window_drift`` (:mod:`autoprof.analysis.drift`).

The shift is the Hodges–Lehmann estimate: the median of every difference ``new[j] - base[i]``. Its interval is
the Mann–Whitney (Wilcoxon rank-sum) one: the ``k``-th smallest and largest of those differences, ``k`` read
from the rank-sum statistic's exact distribution (small samples) or its normal approximation (large ones). It
assumes nothing about the times' distribution (step times are skewed, with outliers), needs no seed, and on log
times it is a ratio: the change in percent of the base.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

#: Above this many pairs (``m * n``) each sample is thinned to evenly spaced order statistics first.
MAX_PAIRS = 160_000
#: Up to this many pairs the rank-sum statistic's exact distribution gives ``k``; above it, the normal one.
EXACT_PAIRS = 2_500


@dataclass(frozen=True)
class Shift:
    """How far ``new`` moved from ``base``: the estimate and its interval at ``confidence`` (``lo``/``hi`` None
    when the samples are too small for that confidence: no pair of order statistics covers it)."""

    estimate: float
    lo: float | None
    hi: float | None
    confidence: float
    base_n: int
    new_n: int

    @property
    def decided(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def within_noise(self) -> bool:
        """The interval includes no change (or there is none)."""
        return not self.decided or (self.lo is not None and self.hi is not None and self.lo <= 0 <= self.hi)


def _thin(xs: list[float], n: int) -> list[float]:
    """``n`` evenly spaced order statistics of sorted ``xs`` (both ends kept)."""
    if len(xs) <= n:
        return xs
    step = (len(xs) - 1) / (n - 1)
    return [xs[round(i * step)] for i in range(n)]


@lru_cache(maxsize=256)  # every op of a diff asks for the same (m, n): once each
def _exact_k(m: int, n: int, alpha: float) -> int:
    """The largest ``k`` with P(U < k) <= alpha / 2 under the null (0: none), from U's exact counts."""
    size = m * n
    counts = [0] * (size + 1)
    counts[0] = 1
    # the generating function of U: prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i)
    for i in range(1, m + 1):
        for u in range(size, n + i - 1, -1):  # times (1 - q^(n+i))
            counts[u] -= counts[u - n - i]
        for u in range(i, size + 1):  # divided by (1 - q^i)
            counts[u] += counts[u - i]
    total = math.comb(m + n, m)
    k, below = 0, 0
    while k <= size and (below + counts[k]) / total <= alpha / 2:
        below += counts[k]
        k += 1
    return k


def shift(base: Sequence[float], new: Sequence[float], confidence: float = 0.95) -> Shift | None:
    """The Hodges–Lehmann shift of ``new`` against ``base`` and its Mann–Whitney interval; None for an empty side."""
    if not base or not new:
        return None
    b, n = sorted(base), sorted(new)
    m0, n0 = len(b), len(n)
    if m0 * n0 > MAX_PAIRS:
        side = max(2, math.isqrt(MAX_PAIRS))
        b, n = _thin(b, side), _thin(n, side)
    m, k_n = len(b), len(n)
    diffs = sorted(y - x for x in b for y in n)
    size = len(diffs)
    mid = size // 2
    estimate = diffs[mid] if size % 2 else (diffs[mid - 1] + diffs[mid]) / 2
    alpha = 1 - confidence
    if size <= EXACT_PAIRS:
        k = _exact_k(m, k_n, alpha)
    else:
        z = NormalDist().inv_cdf(1 - alpha / 2)
        k = math.floor(size / 2 - z * math.sqrt(size * (m + k_n + 1) / 12))
    if k < 1:
        return Shift(estimate, None, None, confidence, m0, n0)
    return Shift(estimate, diffs[k - 1], diffs[size - k], confidence, m0, n0)


def ratio_shift(base: Sequence[float], new: Sequence[float], confidence: float = 0.95) -> Shift | None:
    """:func:`shift` on log times, as a change in percent of the base (positive: ``new`` is slower). Times of 0 or
    less are left out (no step takes no time)."""
    lb = [math.log(x) for x in base if x > 0]
    ln = [math.log(x) for x in new if x > 0]
    s = shift(lb, ln, confidence)
    if s is None:
        return None

    def pct(v: float | None) -> float | None:
        return None if v is None else (math.exp(v) - 1) * 100

    return Shift(pct(s.estimate) or 0.0, pct(s.lo), pct(s.hi), confidence, s.base_n, s.new_n)
