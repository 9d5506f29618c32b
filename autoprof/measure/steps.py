"""Step times: each step's time on the host and on the device, the steps' typical time, how many processes'
windows a trace holds. Computed once per trace. Pure; no torch."""

from __future__ import annotations

import statistics
from typing import Any

from autoprof.measure.views import Intervals, View, merge, total, view
from autoprof.trace.model import DEVICE_CODE, DEVICE_WORK_CODES, GPU_USER_ANNOTATION, Trace, step_cpu_of


def step_readings(trace: Trace) -> dict[str, list[int]] | None:
    """A live window's per-step readings (:func:`step_cpu_of` of its metadata's ``step_cpu``: each recorded step's
    wall time, thread CPU time, run-queue wait and, where read, minor faults), or None where the trace has none or
    they are malformed. Computed once per trace; the lists are shared: read them, never change them."""
    return trace.derive(_step_readings)


def _step_readings(trace: Trace) -> dict[str, list[int]] | None:
    return step_cpu_of(trace.metadata.get("step_cpu"))


def host_step_ns(trace: Trace) -> list[int]:
    """Per step, its time on the host: its span, or in a live window whose readings hold one wall time per step
    (:func:`step_readings`), the shorter of the span and the user's call as the wrapper timed it. The span also holds
    autoprof's own bookkeeping around the call (entering the annotations, reading the CPU clocks: ~15-40 µs), and
    whatever stalled the thread there: on a loaded machine the first step of a window stalled 2.6-5.4 ms after its
    annotations were entered, outside the call, off the CPU and not waiting in the run queue (issue 49). Computed
    once per trace."""
    return trace.derive(_host_step_ns)


def _host_step_ns(trace: Trace) -> list[int]:
    spans = [step.dur_ns for step in trace.steps]
    got = step_readings(trace)
    if got is None or len(got["wall_ns"]) != len(spans):
        return spans
    return [min(span, wall) if wall > 0 else span for span, wall in zip(spans, got["wall_ns"])]


def steps_ns(trace: Trace, win: View) -> int:
    """The steps' typical time, the median step times their number (what a share "of the steps" is of; one step
    slowed by a collector pause or a preemption does not sway it); each step's time as :func:`host_step_ns` reads
    it; the host window without steps."""
    if trace.steps:
        typical = int(statistics.median(host_step_ns(trace))) * len(trace.steps)
        if typical > 0:
            return typical
    return int(win.host_window_ns)


def merged_processes(trace: Trace) -> int:
    """How many processes' windows the trace holds: the most processes (pids) that recorded the same
    ``ProfilerStep#N`` (a file merged from several ranks, as TraceLens's TraceFuse writes them, repeats each step
    once per rank; two threads of one process are one process). 1 for a trace of one process."""
    pids: dict[int, set[Any]] = {}
    for s in trace.steps:
        if s.host_index >= 0:
            pids.setdefault(s.number, set()).add(trace.threads[s.tid][0])
    return max((len(p) for p in pids.values()), default=1)


def device_step_ns(trace: Trace) -> list[int | None]:
    """Per step of ``trace.steps``, the device's time for it (ns, on the device's clock): the step's own span on
    the device lane (the ``ProfilerStep#N`` annotation torch puts there) where the trace has one and it holds the
    step's device work, else from the first start to the last end of the device work the step launched; None for
    a step with neither. An annotation shorter than the time the step's own work keeps the device busy is not the
    step's span (an MI300X DDP trace's is 18 µs for ~19 ms of work): the work's span stands instead. A host step
    only enqueues work: on a device its call can return in 0.3 ms while its kernels run 14 ms. Computed once per
    trace."""
    return trace.derive(_device_step_ns)


def _device_step_ns(trace: Trace) -> list[int | None]:
    steps = trace.steps
    out: list[int | None] = [None] * len(steps)
    if not steps or not trace.n_device:
        return out
    annotation = DEVICE_CODE[GPU_USER_ANNOTATION]
    by_name = {trace.name_id(f"ProfilerStep#{s.number}"): k for k, s in enumerate(steps)}
    by_name.pop(-1, None)
    work: list[Intervals] = [[] for _ in steps]
    device_step = view(trace).device_step
    for d, (nid, cat) in enumerate(zip(trace.d_name, trace.d_cat)):
        if cat == annotation:
            k = by_name.get(nid, -1)
            if k >= 0:
                out[k] = max(out[k] or 0, trace.d_dur[d])
        elif cat in DEVICE_WORK_CODES:
            k = device_step[d]
            if k >= 0:
                work[k].append((trace.d_ts[d], trace.d_ts[d] + trace.d_dur[d]))
    for k, spans in enumerate(work):
        if spans and (out[k] is None or (out[k] or 0) < total(merge(spans))):
            out[k] = max(e for _, e in spans) - min(s for s, _ in spans)
    return out


def step_times_ns(trace: Trace) -> list[int]:
    """Per step, its time: the longer of the host's (:func:`host_step_ns`) and the device's (:func:`device_step_ns`)."""
    return [max(host, dev or 0) for host, dev in zip(host_step_ns(trace), device_step_ns(trace))]
