"""Cross-rank verdicts: stragglers and ranks whose regime differs from the rest.

Input is one small summary per rank (median step time and regime verdict), gathered live through the
process group's store or read from per-rank trace files. Pure; no torch.

A straggler is a rank whose median step time exceeds the median of all ranks' medians by more than
``STRAGGLER_MARGIN`` (20 %) and by at least 1 ms: in synchronous data-parallel training every rank then
waits for it at the next collective.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from autoprof.findings import Finding
from autoprof.rules._common import duration

RULE_STRAGGLER = "straggler_ranks"
RULE_REGIME = "rank_regime_mismatch"
RULE_REGIME_SOURCE = "bound_regime"  # the per-rank verdict compared across ranks
STRAGGLERS = "stragglers"
BALANCED = "balanced"
REGIME_DIFFERS = "regime-differs"
VERDICTS = {RULE_STRAGGLER: (STRAGGLERS, BALANCED), RULE_REGIME: (REGIME_DIFFERS,)}
STRAGGLER_MARGIN = 0.20
MIN_EXTRA_MS = 1.0


@dataclass(frozen=True)
class RankSummary:
    rank: int
    step_ms: float
    verdict: str | None

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "step_ms": self.step_ms, "verdict": self.verdict}

    @staticmethod
    def from_json(d: dict[str, Any]) -> RankSummary:
        return RankSummary(int(d["rank"]), float(d["step_ms"]), d.get("verdict"))


def check(summaries: list[RankSummary]) -> list[Finding]:
    if len(summaries) < 2:
        return []
    summaries = sorted(summaries, key=lambda s: s.rank)
    med = statistics.median(s.step_ms for s in summaries)
    findings: list[Finding] = []
    slow = [s for s in summaries if s.step_ms > med * (1 + STRAGGLER_MARGIN) and s.step_ms - med >= MIN_EXTRA_MS]
    evidence: dict[str, Any] = {
        "median_step_ms": round(med, 3),
        "step_ms_by_rank": {str(s.rank): round(s.step_ms, 3) for s in summaries},
        "rank_count": len(summaries),
        "margin_ratio": STRAGGLER_MARGIN,
    }
    if slow:
        worst = max(slow, key=lambda s: s.step_ms)
        findings.append(
            Finding(
                RULE_STRAGGLER,
                STRAGGLERS,
                "warning",
                f"straggler rank(s) {', '.join(str(s.rank) for s in slow)}: step time up to "
                f"{duration(worst.step_ms * 1e6)} against a median of {duration(med * 1e6)} across {len(summaries)} ranks",
                "Every rank waits for the slowest at the next collective: look at that rank's own findings "
                "(data loading, host overhead, a slower or throttled device, uneven work).",
                {**evidence, "straggler_ranks": [s.rank for s in slow],
                 "worst_ratio": round(worst.step_ms / med, 3) if med else None},
                tuple(f"rank {s.rank}" for s in slow),
            )
        )
    else:  # compared and found balanced: say so, so that "balanced" never looks like "never compared"
        spread = max(s.step_ms for s in summaries) / med - 1 if med else 0.0
        findings.append(
            Finding(
                RULE_STRAGGLER,
                BALANCED,
                "info",
                f"{len(summaries)} ranks compared: balanced (step times within {spread:.0%} of the median "
                f"{duration(med * 1e6)})",
                "Nothing to do about stragglers.",
                {**evidence, "straggler_ranks": [], "worst_ratio": round(1 + spread, 3)},
                (),
            )
        )
    verdicts = Counter(s.verdict for s in summaries if s.verdict)
    if len(verdicts) > 1:
        common, n = verdicts.most_common(1)[0]
        voted = sum(verdicts.values())
        if n * 2 > voted:
            odd = [s for s in summaries if s.verdict and s.verdict != common]
            msg = (f"rank(s) {', '.join(str(s.rank) for s in odd)} are "
                   f"{'/'.join(sorted({s.verdict or '' for s in odd}))} while most ranks are {common}")
        else:  # no majority: name every rank's verdict rather than guess which is odd
            odd = [s for s in summaries if s.verdict]
            common = None  # type: ignore[assignment]
            msg = "ranks disagree on the regime: " + ", ".join(f"rank {s.rank} {s.verdict}" for s in odd)
        findings.append(
            Finding(
                RULE_REGIME,
                REGIME_DIFFERS,
                "warning",
                msg,
                "Ranks should do the same work: an odd regime points at that rank's data, placement or device.",
                {"verdict_by_rank": {str(s.rank): s.verdict for s in summaries}, "majority_verdict": common},
                tuple(f"rank {s.rank}" for s in odd),
            )
        )
    return findings


def summary_of(rank: int, step_ns: list[int], verdict: str | None) -> RankSummary | None:
    if not step_ns:
        return None
    return RankSummary(rank, statistics.median(step_ns) / 1e6, verdict)
