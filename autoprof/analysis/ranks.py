"""Cross-rank verdicts: stragglers and ranks whose regime differs from the rest.

Input is one small summary per rank (median step time, time a step waits in collectives, regime verdict and
its shares), gathered live through the process group's store or read from per-rank trace files. Pure; no torch.

Stragglers: in synchronous data parallelism (DDP's all-reduce in backward, FSDP's all-gathers in forward) the
fast ranks wait for the slow one inside their own steps, so every rank's step takes as long: the slow rank is
found through the wait it causes, as the rank that waits least in collectives, when the ranks' waits differ by
more than ``STRAGGLER_MARGIN`` (20 %) of the median step and at least ``MIN_EXTRA_MS`` (5 ms), and the least is
at most half the most (``WAIT_RATIO``). The least wait approximates the
transfer itself; the rest of each rank's wait is waiting for the straggler. Where the traces show no collective
inside the steps, a rank whose median step time exceeds the median by 20 % and 5 ms is the straggler.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from autoprof.findings import Finding
from autoprof.measure.units import duration
from autoprof.rules import comm, regime
from autoprof.rules.comm import WAITING_FOR_PEER

RULE_STRAGGLER = "straggler_ranks"
RULE_REGIME = "rank_regime_mismatch"
RULE_REGIME_SOURCE = regime.RULE  # the per-rank verdict compared across ranks
RULE_COMM_SOURCE = comm.RULE  # on a device: a rank's NCCL time not overlapped by compute
STRAGGLERS = "stragglers"
BALANCED = "balanced"
REGIME_DIFFERS = "regime-differs"
VERDICTS = {RULE_STRAGGLER: (STRAGGLERS, BALANCED), RULE_REGIME: (REGIME_DIFFERS,)}
STRAGGLER_MARGIN = 0.20
#: A straggler costs the others at least this much per step: less is what ranks sharing a loaded machine jitter by
#: (balanced DDP on 2 cores: waits 1-3 ms apart in 3-6 ms steps, one window to the next).
MIN_EXTRA_MS = 5.0
WAIT_RATIO = 0.5  # a straggler waits at most this share of what the others wait
#: Regime figures compared across ranks (shares of the step): a rank differs when one of them is this far from the
#: median of the ranks, not when two ranks fall either side of a cut-off.
SHARE_GAP = 0.20
SHARE_KEYS = ("input_share", "blocked_share", "comm_share", "work_share", "overhead_share")


@dataclass(frozen=True)
class RankSummary:
    """What one rank's window says for the comparison: its median step time, how long a step waits in collectives
    (None where the trace shows none), its regime verdict and the shares behind it."""

    rank: int
    step_ms: float
    verdict: str | None
    wait_ms: float | None = None
    shares: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "step_ms": self.step_ms, "verdict": self.verdict, "wait_ms": self.wait_ms, "shares": self.shares}

    @staticmethod
    def from_json(d: dict[str, Any]) -> RankSummary:
        shares = d.get("shares")
        wait = d.get("wait_ms")
        return RankSummary(
            int(d["rank"]),
            float(d["step_ms"]),
            d.get("verdict"),
            float(wait) if isinstance(wait, (int, float)) else None,
            {str(k): float(v) for k, v in shares.items()} if isinstance(shares, dict) else None,
        )


def summary_of(rank: int, step_ns: list[int], regime: Finding | None = None, comm: Finding | None = None) -> RankSummary | None:
    """A rank's summary from its step times and its own ``bound_regime`` (and, on a device,
    ``exposed_communication``) findings. The wait per step: host time blocked in collectives on a CPU window,
    NCCL time not overlapped by compute on a device."""
    if not step_ns:
        return None
    n = len(step_ns)
    wait = None
    shares = None
    if regime is not None:
        ev = regime.evidence
        shares = {k: float(ev[k]) for k in SHARE_KEYS if isinstance(ev.get(k), (int, float))}
        if ev.get("device") == "cpu" and isinstance(ev.get("comm_step_median_us"), (int, float)):
            wait = ev["comm_step_median_us"] / 1000  # the median step's wait: one preempted step cannot sway it
        elif ev.get("device") == "cpu" and isinstance(ev.get("comm_us"), (int, float)):
            wait = ev["comm_us"] / 1000 / n
        elif ev.get("device") != "cpu":
            wait = 0.0  # a device window: its wait is its exposed NCCL time, none when no finding says otherwise
    if comm is not None and isinstance(comm.evidence.get("exposed_comm_us"), (int, float)):
        wait = comm.evidence["exposed_comm_us"] / 1000 / n
    return RankSummary(rank, statistics.median(step_ns) / 1e6, regime.verdict if regime else None, wait, shares)


def summary_from(rank: int, step_ns: list[int], findings: list[Finding]) -> RankSummary | None:
    """A rank's summary from its window's findings (the live window and the offline file read the same)."""
    by_rule = {f.rule: f for f in findings}
    return summary_of(rank, step_ns, by_rule.get(RULE_REGIME_SOURCE), by_rule.get(RULE_COMM_SOURCE))


def check(summaries: list[RankSummary]) -> list[Finding]:
    if len(summaries) < 2:
        return []
    summaries = sorted(summaries, key=lambda summary: summary.rank)
    med = statistics.median(summary.step_ms for summary in summaries)
    findings = _by_waits(summaries, med)
    if findings is None:
        findings = _by_step_time(summaries, med)
    if not any(f.verdict == STRAGGLERS for f in findings):  # a straggler explains why the waiting ranks read apart
        balanced_waits = any(f.verdict == BALANCED and f.evidence.get("method") == "collective_wait" for f in findings)
        findings.extend(_regime_mismatch(summaries, med, balanced_waits))
    return findings


def _by_waits(summaries: list[RankSummary], med: float) -> list[Finding] | None:
    """Synchronous data parallelism evens the step times out (the fast ranks wait inside their step, in the
    collective): the slow rank is the one that waits least. None where the ranks' traces show no collective waits."""
    waits = [summary for summary in summaries if summary.wait_ms is not None]
    if len(waits) != len(summaries) or max(summary.wait_ms or 0.0 for summary in waits) <= 0:
        return None
    lo = min(summary.wait_ms or 0.0 for summary in waits)
    hi = max(summary.wait_ms or 0.0 for summary in waits)
    spread = hi - lo
    evidence: dict[str, Any] = {
        "median_step_ms": round(med, 3),
        "step_ms_by_rank": {str(summary.rank): round(summary.step_ms, 3) for summary in summaries},
        "wait_ms_by_rank": {str(summary.rank): round(summary.wait_ms or 0.0, 3) for summary in summaries},
        "rank_count": len(summaries),
        "method": "collective_wait",
    }
    # Both: the waits differ by a fifth of a step (and 1 ms), and the least wait is at most half the most: ranks
    # that all wait a few ms with a jitter of one or two (a loaded 2-core machine) are balanced.
    if spread < max(STRAGGLER_MARGIN * med, MIN_EXTRA_MS) or lo > WAIT_RATIO * hi:
        return [_balanced(summaries, med, evidence, f"collective waits within {duration(spread * 1e6)} per step")]
    slow = [summary for summary in summaries if (summary.wait_ms or 0.0) <= lo + 0.25 * spread]
    waiting = [summary for summary in summaries if summary not in slow]
    waited = statistics.median((summary.wait_ms or 0.0) - lo for summary in waiting)
    regimes = {str(summary.rank): summary.verdict for summary in slow if summary.verdict}
    own = "; ".join(f"rank {r} is {v}" for r, v in regimes.items())
    return [
        Finding(
            RULE_STRAGGLER,
            STRAGGLERS,
            "warning",
            f"straggler rank(s) {', '.join(str(summary.rank) for summary in slow)}: the other ranks wait for them "
            f"{duration(waited * 1e6)} per step in collectives ({duration(med * 1e6)} steps)" + (f"; {own}" if own else ""),
            "The other ranks' collective time is waiting for these: look at the slow rank's own findings (data "
            "loading, host overhead, a slower or throttled device, uneven work) before tuning communication.",
            {
                **evidence,
                "straggler_ranks": [summary.rank for summary in slow],
                "waiting_ranks": [summary.rank for summary in waiting],
                "wait_for_stragglers_ms": round(waited, 3),
                "transfer_ms": round(lo, 3),
                "straggler_regime_by_rank": regimes,
            },
            tuple(f"rank {summary.rank}" for summary in slow),
        )
    ]


def _by_step_time(summaries: list[RankSummary], med: float) -> list[Finding]:
    """Without collectives inside the steps, a slow rank shows in its own step time."""
    slow = [summary for summary in summaries if summary.step_ms > med * (1 + STRAGGLER_MARGIN) and summary.step_ms - med >= MIN_EXTRA_MS]
    evidence: dict[str, Any] = {
        "median_step_ms": round(med, 3),
        "step_ms_by_rank": {str(summary.rank): round(summary.step_ms, 3) for summary in summaries},
        "rank_count": len(summaries),
        "margin_ratio": STRAGGLER_MARGIN,
        "method": "step_time",
    }
    if not slow:
        spread = max(summary.step_ms for summary in summaries) / med - 1 if med else 0.0
        return [_balanced(summaries, med, evidence, f"step times within {spread:.0%} of the median")]
    worst = max(slow, key=lambda summary: summary.step_ms)
    return [
        Finding(
            RULE_STRAGGLER,
            STRAGGLERS,
            "warning",
            f"straggler rank(s) {', '.join(str(summary.rank) for summary in slow)}: step time up to "
            f"{duration(worst.step_ms * 1e6)} against a median of {duration(med * 1e6)} across {len(summaries)} ranks",
            "Every rank waits for the slowest at the next collective: look at that rank's own findings "
            "(data loading, host overhead, a slower or throttled device, uneven work).",
            {
                **evidence,
                "straggler_ranks": [summary.rank for summary in slow],
                "worst_ratio": round(worst.step_ms / med, 3) if med else None,
            },
            tuple(f"rank {summary.rank}" for summary in slow),
        )
    ]


def _balanced(summaries: list[RankSummary], med: float, evidence: dict[str, Any], how: str) -> Finding:
    """Compared and found balanced: said, so that "balanced" never looks like "never compared"."""
    return Finding(
        RULE_STRAGGLER,
        BALANCED,
        "info",
        f"{len(summaries)} ranks compared: balanced ({how}; median step {duration(med * 1e6)})",
        "Nothing to do about stragglers.",
        {**evidence, "straggler_ranks": []},
        (),
    )


#: Shares that move with how long a rank waits for its peers: on ranks whose waits and steps agree within the
#: machine's noise, these alone differing is jitter, not a regime (balanced DDP at 2-3 ms steps: one rank read
#: overhead-bound, the other communication-bound, in 1 of 3 runs).
WAIT_SHARES = frozenset({"comm_share", "overhead_share", "blocked_share"})


def _regime_mismatch(summaries: list[RankSummary], med: float = 0.0, balanced_waits: bool = False) -> list[Finding]:
    """Ranks whose regime differs from the others' by their figures, not only by their labels: two identical ranks
    either side of a cut-off (19.7 % and 20.2 %) are not a finding, and neither are ranks whose waits were found
    balanced, whose steps agree, and whose shares differ only in the waiting ones (``WAIT_SHARES``)."""
    verdicts = Counter(summary.verdict for summary in summaries if summary.verdict)
    if len(verdicts) < 2:
        return []
    with_shares = [summary for summary in summaries if summary.shares]
    if len(with_shares) == len(summaries):
        keys = set.intersection(*(set(summary.shares or {}) for summary in summaries))
        center = {k: statistics.median((summary.shares or {})[k] for summary in summaries) for k in keys}
        differing = {k for summary in summaries for k in keys if abs((summary.shares or {})[k] - center[k]) >= SHARE_GAP}
        if not differing:
            return []
        steps_agree = med > 0 and all(abs(summary.step_ms - med) <= STRAGGLER_MARGIN * med for summary in summaries)
        if balanced_waits and steps_agree and differing <= WAIT_SHARES:
            return []
    common, n = verdicts.most_common(1)[0]
    voted = sum(verdicts.values())
    if n * 2 > voted:
        odd = [summary for summary in summaries if summary.verdict and summary.verdict != common]
        msg = (
            f"rank(s) {', '.join(str(summary.rank) for summary in odd)} are "
            f"{'/'.join(sorted({summary.verdict or '' for summary in odd}))} while most ranks are {common}"
        )
        majority: str | None = common
    else:  # no majority: name every rank's verdict rather than guess which is odd
        odd = [summary for summary in summaries if summary.verdict]
        majority = None
        msg = "ranks disagree on the regime: " + ", ".join(f"rank {summary.rank} {summary.verdict}" for summary in odd)
    return [
        Finding(
            RULE_REGIME,
            REGIME_DIFFERS,
            "warning",
            msg,
            "Ranks should do the same work: an odd regime points at that rank's data, placement or device.",
            {
                "verdict_by_rank": {str(summary.rank): summary.verdict for summary in summaries},
                "majority_verdict": majority,
                "shares_by_rank": {str(summary.rank): summary.shares for summary in summaries if summary.shares},
            },
            tuple(f"rank {summary.rank}" for summary in odd),
        )
    ]


def as_waiting(comm: Finding, stragglers: Finding) -> Finding:
    """A waiting rank's ``exposed_communication``, read with the cross-rank comparison: its NCCL time is mostly
    waiting for the stragglers, not communication to overlap."""
    slow = stragglers.evidence.get("straggler_ranks", [])
    return Finding(
        comm.rule,
        WAITING_FOR_PEER,
        "info",
        comm.message + f"; most of it is waiting for straggler rank(s) {', '.join(map(str, slow))}",
        "Look at the slow rank first: overlapping communication cannot hide a peer that arrives late.",
        {**comm.evidence, "waiting_for_ranks": list(slow)},
        comm.subjects,
    )
