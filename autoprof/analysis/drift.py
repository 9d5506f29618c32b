"""Drift between live windows of one target: after its first window, each later one is compared with it (long
trainings whose data, shapes or allocator state drift, with ``repeat`` > 1 or ``repeat=0``). A comparison of two
windows' summaries, like :mod:`autoprof.analysis.ranks` across ranks; not a rule over one trace. Also the step times a
triggered window is judged on (:func:`trigger_step_times`). Both read a window's
:class:`~autoprof.analysis.engine.Analysis` and what the training thread timed; the live window only hands them over."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoprof.analysis._stats import ratio_shift
from autoprof.findings import Finding
from autoprof.measure.units import duration

if TYPE_CHECKING:
    from autoprof.analysis.engine import Analysis

RULE = "window_drift"
DRIFTED = "drifted"
VERDICTS = {RULE: (DRIFTED,)}
#: The median step time moved by at least this share of the first window's, and by at least ``MIN_DRIFT_MS``:
#: less is what a loaded machine jitters by from one window to the next.
DRIFT_MARGIN = 0.20
MIN_DRIFT_MS = 1.0


@dataclass(frozen=True)
class WindowSummary:
    """What a window says for the comparison: its index, median step time (ms, the longer of the host's span and
    the device's time for each step), its regime verdict, and each step's time (ms) for the noise model (the same
    as ``autoprof diff``'s, :mod:`autoprof.analysis._stats`)."""

    window: int
    step_ms: float
    verdict: str | None
    steps_ms: tuple[float, ...] = ()


#: The confidence of the step time's interval.
CONFIDENCE = 0.95


def judge(reference: list[WindowSummary], window: int, analysis: Analysis, walls: Sequence[int]) -> list[Finding]:
    """The ``window_drift`` finding of a target's later window against its first (none for the first, which becomes
    the target's ``reference``, a list its windows share): its steps' times (the trace's, else the training thread's
    ``walls``), their median and the regime's verdict."""
    times = analysis.step_time_ns or list(walls)
    if not times:
        return []
    verdict = (analysis.summary.get("regime") or {}).get("verdict")
    now = WindowSummary(window, statistics.median(times) / 1e6, verdict, tuple(t / 1e6 for t in times))
    if not reference:  # the target's first window: the reference later ones are compared with
        reference.append(now)
        return []
    return check(reference[0], now)


def trigger_step_times(analysis: Analysis, steps: Sequence[int], walls: Sequence[int], cpus: Sequence[tuple[int, int]]) -> list[int]:
    """A triggered window's steps' times (ns) as the trigger judges steps: each step's period (start to the next step's
    start; the last step, whose period the window does not hold, by its wall time), less the time the step waited for
    a CPU (``cpus``: each step's thread CPU time and run-queue wait, where read for every step)."""
    periods = analysis.summary.get("step_period_ms") or [None] * len(steps)
    times = [round(p * 1e6) if p is not None else w for p, w in zip(periods, walls, strict=False)]
    if len(cpus) == len(times):  # each step's own time, as the trigger judges it: its run-queue wait out
        times = [t - q if q > 0 else t for t, (_, q) in zip(times, cpus, strict=False)]
    return times


def check(first: WindowSummary, now: WindowSummary) -> list[Finding]:
    moved = now.step_ms - first.step_ms
    slower = abs(moved) >= max(DRIFT_MARGIN * first.step_ms, MIN_DRIFT_MS)
    # the noise model: with steps enough for an interval, a drift in time is one whose interval excludes no change
    # (windows of too few steps are judged by the margins alone, ``tested`` False)
    s = ratio_shift(first.steps_ms, now.steps_ms, CONFIDENCE)
    tested = s is not None and s.decided
    if tested and s is not None and s.within_noise:
        slower = False
    regime = first.verdict is not None and now.verdict is not None and first.verdict != now.verdict
    if not slower and not regime:
        return []
    parts = []
    if slower:
        parts.append(
            f"the median step {'slowed' if moved > 0 else 'sped up'} from {duration(first.step_ms * 1e6)} to "
            f"{duration(now.step_ms * 1e6)} ({moved / first.step_ms:+.0%})"
        )
    if regime:
        parts.append(f"the regime moved from {first.verdict} to {now.verdict}")
    return [
        Finding(
            RULE,
            DRIFTED,
            "warning" if slower and moved > 0 else "info",
            f"window {now.window} drifted from window {first.window}: " + "; ".join(parts),
            "Something changed during the run: data (sequence lengths, batch shapes), recompilations, allocator "
            "fragmentation, thermal throttling; compare the two windows' findings, or their kept traces with "
            "`autoprof diff`.",
            {
                "first_window": first.window,
                "first_step_ms": round(first.step_ms, 4),
                "step_ms": round(now.step_ms, 4),
                "change_ratio": round(moved / first.step_ms, 4) if first.step_ms else None,
                "first_verdict": first.verdict,
                "verdict": now.verdict,
                "tested": tested,
                "estimate_pct": round(s.estimate, 2) if s is not None else None,
                "interval_pct": [round(s.lo, 2), round(s.hi, 2)] if s is not None and s.lo is not None and s.hi is not None else None,
                "steps": [s.base_n, s.new_n] if s is not None else None,
            },
        )
    ]
