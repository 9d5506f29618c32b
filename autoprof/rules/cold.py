"""Cold first step: the program's first call (live wall times) or the first step of a trace is much
slower than the steady steps that follow (lazy init, cuDNN autotuning, allocator growth, compilation)."""

from __future__ import annotations

import statistics

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.steps import device_step_ns, step_times_ns
from autoprof.measure.units import ms
from autoprof.trace.model import Trace

RULE = "cold_first_step"
COLD_START = "cold-start"
SLOW_FIRST_RECORDED = "slow-first-recorded-step"
VERDICTS = {RULE: (COLD_START, SLOW_FIRST_RECORDED)}
COLD_RATIO = 1.5
MIN_EXTRA_NS = 1_000_000  # ignore sub-millisecond differences


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    first = trace.metadata.get("first_call_ns")
    steady = trace.metadata.get("steady_call_ns")
    times = step_times_ns(trace)  # a step on a device takes as long as its device work, not its enqueue
    if isinstance(first, int) and isinstance(steady, int) and steady > 0:
        # Live: wall times of every call, measured whether recorded or not. A host call that only enqueues
        # work is not the step's time: on a device the steady step is the recorded steps' device time.
        device = int(statistics.median(times)) if times and any(device_step_ns(trace)) else 0
        clock = "device" if device > steady else "host"
        steady = max(steady, device)
        if first >= COLD_RATIO * steady and first - steady >= MIN_EXTRA_NS:
            return [_finding(first, steady, 0, "the program's first call", live=True, clock=clock, on_device=bool(device))]
        return []
    steps = trace.steps
    if len(steps) < 3:
        return []
    rest = statistics.median(times[1:])
    d = times[0]
    if rest > 0 and d >= COLD_RATIO * rest and d - rest >= MIN_EXTRA_NS:
        where = "the program's first step" if steps[0].number <= 1 else f"the first recorded step (#{steps[0].number})"
        on_device = [dev or 0 for dev in device_step_ns(trace)]
        clock = "device" if statistics.median(on_device) > statistics.median(step.dur_ns for step in steps) else "host"
        return [_finding(d, int(rest), steps[0].number, where, live=False, clock=clock, on_device=any(on_device))]
    return []


def _finding(first: int, steady: int, number: int, where: str, live: bool, clock: str, on_device: bool) -> Finding:
    cold = number <= 1
    init = "lazy CUDA/cuDNN init" if on_device else "lazy initialisation"  # no CUDA on a CPU window
    return Finding(
        RULE,
        COLD_START if cold else SLOW_FIRST_RECORDED,
        "info",
        f"{'cold first step' if cold else 'slow first step'}: {where} took {ms(first):.3f} ms, "
        f"{first / steady:.1f}x the steady {ms(steady):.3f} ms",
        f"Expected once ({init}, allocator growth, compilation): exclude it from measurements and warm up before timing or profiling."
        if cold
        else "The profiler's first active step often carries start-up cost: add a warmup step.",
        {
            "first_step_ms": ms(first),
            "steady_step_ms": ms(steady),
            "ratio": round(first / steady, 3),
            "step_number": number,
            "from_wall_clock": live,
            "steady_clock": clock,  # "device": steps timed by their device work (their host calls only enqueue it)
        },
    )
