"""The same kernel running at different speeds across steps: per-step time of each kernel, and its
coefficient of variation (clocks, thermals, contention, or data-dependent work)."""

from __future__ import annotations

import statistics

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.kernels import short_kernel_name
from autoprof.measure.runtime import is_collective_kernel
from autoprof.measure.views import view
from autoprof.trace.model import KERNEL_CODE, Trace

RULE = "kernel_time_variation"
UNSTABLE = "unstable-kernel-time"
VERDICTS = {RULE: (UNSTABLE,)}
CV_THRESHOLD = 0.15
MIN_SHARE = 0.01


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    if len(trace.steps) < 3:
        return []
    per_step, counts, total = _kernel_time_per_step(trace)
    varied: list[tuple[float, str, float, float]] = []  # (CV, kernel, min µs, max µs)
    for nid, times in per_step.items():
        runs = counts[nid]
        # Only a kernel that runs the same number of times in every step can be compared across steps.
        if min(runs) == 0 or len(set(runs)) != 1 or sum(times) < MIN_SHARE * total:
            continue
        mean = statistics.fmean(times)
        cv = statistics.pstdev(times) / mean if mean else 0.0
        if cv >= CV_THRESHOLD:
            varied.append((cv, short_kernel_name(trace.names[nid]), min(times) / 1000, max(times) / 1000))
    if not varied:
        return []
    varied.sort(reverse=True)
    top = varied[:5]
    return [
        Finding(
            RULE,
            UNSTABLE,
            "info",
            f"{len(varied)} kernels vary across steps by a coefficient of variation ≥ {CV_THRESHOLD:.0%}; "
            f"most: {top[0][1]} (CV {top[0][0]:.0%}, {top[0][2]:.0f}–{top[0][3]:.0f} µs per step)",
            "Same work, different time: check GPU clocks and temperature (nvidia-smi -q -d CLOCK,PERFORMANCE), "
            "other processes on the device, and data-dependent shapes.",
            {
                "varied_kernel_count": len(varied),
                "max_cv_ratio": round(top[0][0], 4),
                "kernels_cv_ratio": {name: round(cv, 4) for cv, name, _, _ in top},
            },
            tuple(name for _, name, _, _ in top),
        )
    ]


def _kernel_time_per_step(trace: Trace) -> tuple[dict[int, list[int]], dict[int, list[int]], int]:
    """Per kernel name: its time in each step and its runs in each step; and all kernels' time. Collectives are
    left out: their time is set by the slowest peer, not by this device's clocks."""
    n_steps = len(trace.steps)
    per_step: dict[int, list[int]] = {}
    counts: dict[int, list[int]] = {}
    total = 0
    nccl = {nid for nid, n in enumerate(trace.names) if is_collective_kernel(n)}
    for step, nid, cat, dur in zip(view(trace).device_step, trace.d_name, trace.d_cat, trace.d_dur):
        if step < 0 or cat != KERNEL_CODE or nid in nccl:
            continue
        times = per_step.get(nid)
        if times is None:
            times = per_step[nid] = [0] * n_steps
            counts[nid] = [0] * n_steps
        times[step] += dur
        counts[nid][step] += 1
        total += dur
    return per_step, counts, total
