"""The window's view of a trace, computed once and read by the rules, the analysis and the renderers: which host
and device events are the window's (:class:`View`), the profiler's flush, launches by their host call, the op
tree's ancestors, the ops' self time, the waits in blocking calls, an op's recorded shapes; interval arithmetic.
Pure; no torch, no I/O."""

from __future__ import annotations

import dataclasses
from array import array
from dataclasses import dataclass
from typing import Any

from autoprof.measure.runtime import BLOCKING_CALLS, DEVICE_SYNC_CALLS
from autoprof.trace import _columns
from autoprof.trace.model import (
    CPU_OP_CODE,
    DEVICE_WORK_CODES,
    LAUNCH_CODES,
    Trace,
)

# Host events of torch.compile's per-call wrapper (some are recorded as cpu_op, but are not op math).
COMPILE_WRAPPER_PREFIXES = (
    "TorchDynamo",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher",
    "## Call CompiledFxGraph",
    "CompiledFunction",
)

Intervals = list[tuple[int, int]]


def clip(iv: Intervals, lo: int, hi: int) -> Intervals:
    """The parts of ``iv`` inside [lo, hi] (an event that runs past the window counts only inside it)."""
    return [(max(s, lo), min(e, hi)) for s, e in iv if s < hi and e > lo]


def merge(iv: Intervals) -> Intervals:
    """Sorted, disjoint union of intervals."""
    if not iv:
        return []
    iv = sorted(iv)
    out: Intervals = []
    append = out.append
    cs, ce = iv[0]  # the interval being grown, in locals (no tuple rebuilt per extension)
    for s, e in iv:
        if s <= ce:
            if e > ce:
                ce = e
        else:
            append((cs, ce))
            cs, ce = s, e
    append((cs, ce))
    return out


def total(iv: Intervals) -> int:
    return sum(e - s for s, e in iv)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` minus ``b`` (both merged)."""
    out: Intervals = []
    append = out.append
    j = 0
    nb = len(b)
    for s, e in a:
        cur = s
        while j < nb and b[j][1] <= cur:
            j += 1
        k = j
        while k < nb:
            bs, be = b[k]
            if bs >= e:
                break
            if bs > cur:
                append((cur, bs))
            if be > cur:
                cur = be
            k += 1
        if cur < e:
            append((cur, e))
    return out


@dataclass
class View:
    """Per-trace derived facts, computed once and shared by the rules.

    The window: with steps, host events inside the steps' spans; device work launched from them (by
    correlation), and device work with no recorded launch placed by time in the step it starts in, unless its
    correlation id is below the window's first runtime call's (it was launched before the window, in the
    profiler's warmup or before it started, and its launch is not in the trace). The device's time on work that is
    not the window's (queued before it, or launched between steps) is ``device_foreign``: neither the window's
    work nor its idle time, it is left out of the window's length on the device (:attr:`device_window_ns`)."""

    host_step: array[int]  # host event -> step index or -1
    device_step: array[int]  # device event -> step index or -1 (by launch correlation)
    host_in: list[bool]  # host event inside the analyzed window
    device_in: list[bool]  # device event of the window (launched from inside it)
    start_ns: int
    end_ns: int  # the host window's end
    device_end_ns: int  # last end of window device work (the GPU lane runs behind)
    device_busy: Intervals  # merged intervals of kernels, memcpys and memsets of the window
    device_foreign: Intervals = dataclasses.field(default_factory=list)  # device work in the window's span, not its own

    @property
    def host_window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def window_ns(self) -> int:
        """Host window extended to the end of the device work it launched."""
        return max(self.end_ns, self.device_end_ns) - self.start_ns

    def clip(self, iv: Intervals) -> Intervals:
        """The parts of host spans ``iv`` inside the window [start, start + :attr:`window_ns`]."""
        return clip(iv, self.start_ns, self.start_ns + self.window_ns)

    @property
    def device_window_ns(self) -> int:
        """:attr:`window_ns` less the device's time on work that is not the window's (``device_foreign``)."""
        return self.window_ns - total(self.device_foreign)


def view(trace: Trace) -> View:
    """The trace's :class:`View` (computed once per trace: ``trace.derived``)."""
    return trace.derive(_view_of)


def _view_of(trace: Trace) -> View:
    hs = trace.step_of_host()
    ds = trace.step_of_device(hs)
    start, end = trace.span_ns()
    if trace.steps:
        _drop_queued_before(trace, hs, ds)
        np = _columns.numpy(len(hs) + len(ds))
        if np is not None:  # the same lists (see autoprof.trace._columns)
            host_in, device_in = _columns.at_least(np, hs, 0), _columns.at_least(np, ds, 0)
        else:
            host_in = [k >= 0 for k in hs]
            device_in = [k >= 0 for k in ds]
    else:
        host_in = [True] * trace.n_host
        device_in = [True] * trace.n_device
        flush = profiler_flush_index(trace)
        if flush >= 0:  # the profiler's wait, not the window's: the window ends where it begins (as at a last step)
            host_in[flush] = False
            ts, dur = trace.h_ts, trace.h_dur
            end = max([ts[flush]] + [ts[i] + dur[i] for i in range(trace.n_host) if i != flush])
    busy: Intervals = []
    other: Intervals = []
    for t, d, c, inside in zip(trace.d_ts, trace.d_dur, trace.d_cat, device_in):
        if c in DEVICE_WORK_CODES:
            (busy if inside else other).append((t, t + d))
    busy = merge(busy)
    dev_end = max((e for _, e in busy), default=0)
    hi = max(end, dev_end)
    foreign = subtract(merge(clip(other, start, hi)), busy)
    return View(hs, ds, host_in, device_in, start, end, dev_end, busy, foreign)


def _drop_queued_before(trace: Trace, host_step: array[int], device_step: array[int]) -> None:
    """Device work with no recorded launch whose correlation id is below that of every runtime call of the window
    was launched before the window (the ids count the runtime calls in order): out of its steps. Work whose launch
    is simply not recorded (``cuGraphLaunch``'s kernels) has a later id and keeps its place by time. Where no runtime
    call of the window launched recorded device work, the ids order nothing (one unrelated call with a high id would
    make every step's work queued-before): all keeps its place by time."""
    if not any(h >= 0 and host_step[h] >= 0 for h in trace.d_launch_host):
        return
    np = _columns.numpy(len(host_step))
    if np is not None:  # the same id (see autoprof.trace._columns)
        first = _columns.first_launch_id(np, trace.h_corr, host_step, trace.h_cat, LAUNCH_CODES)
    else:
        first = min((c for c, k, cat in zip(trace.h_corr, host_step, trace.h_cat) if k >= 0 and c > 0 and cat in LAUNCH_CODES), default=0)
    if first <= 0:
        return
    for d, (k, h, c) in enumerate(zip(device_step, trace.d_launch_host, trace.d_corr)):
        if k >= 0 and h < 0 and 0 < c < first:
            device_step[d] = -1


def profiler_flush_index(trace: Trace) -> int:
    """The profiler's flush: the host event of the last device synchronization of the trace (``cudaDeviceSynchronize``,
    ``hipDeviceSynchronize``: the runtime table's ``DEVICE_SYNC_CALLS``), outside the steps and with no device work
    launched after it (torch's ``stop_trace`` waits there for the queued work); -1 when there is none. It is no part of
    the window: a window without steps ends where it begins. Computed once per trace."""
    return trace.derive(_flush_index)


def _flush_index(trace: Trace) -> int:
    syncs = [nid for nid in map(trace.name_id, sorted(DEVICE_SYNC_CALLS)) if nid >= 0]
    if not syncs:
        return -1
    last = max(trace.host_named(syncs), key=trace.h_ts.__getitem__, default=-1)
    last_launch = max((trace.h_ts[h] for h in trace.d_launch_host if h >= 0), default=-1)
    if last < 0 or trace.h_ts[last] <= last_launch or (trace.steps and trace.step_of_host()[last] >= 0):
        return -1
    return last


def launches_by_host(trace: Trace) -> dict[int, list[int]]:
    """Host runtime/driver call -> the device events it launched (by correlation). Computed once per trace."""
    return trace.derive(_launches_of)


def _launches_of(trace: Trace) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d, h in enumerate(trace.d_launch_host):
        if h >= 0:
            out.setdefault(h, []).append(d)
    return out


def descendants(trace: Trace, i: int) -> range:
    """Host events nested in ``i``: they follow it on the same thread and start within its span."""
    end = trace.h_ts[i] + trace.h_dur[i]
    tids, ts, n = trace.h_tid, trace.h_ts, trace.n_host
    tid = tids[i]
    j = i + 1
    while j < n and tids[j] == tid and ts[j] < end:
        j += 1
    return range(i + 1, j)


def has_ancestor(trace: Trace, i: int, name_ids: set[int] | frozenset[int], skip: set[int] | frozenset[int] = frozenset()) -> bool:
    """Whether any enclosing host event of ``i`` has one of these interned names (events in ``skip`` aside: the
    convolutions the roofline cannot cost, which it looks through)."""
    parent, names = trace.h_parent, trace.h_name
    p = parent[i]
    while p >= 0:
        if names[p] in name_ids and p not in skip:
            return True
        p = parent[p]
    return False


def ancestor_flags(trace: Trace, name_ids: set[int] | frozenset[int], skip: set[int] | frozenset[int] = frozenset()) -> list[bool]:
    """:func:`has_ancestor` of every host event at once, in one pass: an event's answer is its parent's own name
    (outside ``skip``) or its parent's answer (a parent comes before its children in a trace's order; one that
    does not is asked the long way)."""
    parent, names = trace.h_parent, trace.h_name
    flags = [False] * trace.n_host
    for i, p in enumerate(parent):
        if p < 0:
            continue
        if p < i:
            flags[i] = (names[p] in name_ids and p not in skip) or flags[p]
        else:
            flags[i] = has_ancestor(trace, i, name_ids, skip)
    return flags


def launched_under(trace: Trace, i: int, by_host: dict[int, list[int]]) -> list[int]:
    """Device events launched by host event ``i`` or by anything nested in it."""
    found = list(by_host.get(i, ()))
    for j in descendants(trace, i):
        if j in by_host:
            found.extend(by_host[j])
    return found


def blocked_by_call(trace: Trace) -> dict[str, int]:
    """Host ns spent in each blocking runtime or driver call (:data:`autoprof.measure.runtime.BLOCKING_CALLS`, CUDA
    and HIP) within the window (in order of first occurrence): a copy of the value computed once per trace."""
    return dict(trace.derive(_blocked_by_call))


def _blocked_by_call(trace: Trace) -> dict[str, int]:
    win = view(trace)
    idx = trace.host_by_name()
    cat, dur, host_in = trace.h_cat, trace.h_dur, win.host_in
    found: list[tuple[int, str, int]] = []
    for name in BLOCKING_CALLS:
        hits = [i for i in idx.get(trace.name_id(name), ()) if cat[i] in LAUNCH_CODES and host_in[i]]
        if hits:
            found.append((hits[0], name, sum(dur[i] for i in hits)))
    return {name: t for _, name, t in sorted(found)}


def op_self_ns(trace: Trace, win: View) -> int:
    """Self time of the ops in the window: where op math runs (compile wrappers excluded). Computed once per trace
    for its own view (the regime and the roofline both ask)."""
    if win is view(trace):
        return trace.derive(_op_self_of_view)
    return _op_self_ns(trace, win)


def _op_self_of_view(trace: Trace) -> int:
    return _op_self_ns(trace, view(trace))


def _op_self_ns(trace: Trace, win: View) -> int:
    wrappers = {nid for nid, name in enumerate(trace.names) if name.startswith(COMPILE_WRAPPER_PREFIXES)}
    lo, hi = win.start_ns, win.start_ns + win.window_ns
    spent = 0
    for self_ns, code, inside, nid, t, d in zip(trace.h_self, trace.h_cat, win.host_in, trace.h_name, trace.h_ts, trace.h_dur):
        if code != CPU_OP_CODE or not inside or nid in wrappers:
            continue
        if t < lo or t + d > hi:  # an op that runs past the window: at most its part in it
            d = max(min(t + d, hi) - max(t, lo), 0)
        spent += self_ns if self_ns < d else d
    return spent


def shape_of(trace: Trace, i: int) -> tuple[list[Any], list[Any]]:
    shapes = trace.shapes.get(i)
    if not shapes:
        return [], []
    dims, types = shapes[0], shapes[1]  # (attention ops carry a third element: whether causal)
    return (dims if isinstance(dims, list) else []), (types if isinstance(types, list) else [])
