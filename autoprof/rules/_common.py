"""Shared, cached views of a trace that several rules read. Pure; no torch, no I/O."""

from __future__ import annotations

import dataclasses
import re
import statistics
from array import array
from dataclasses import dataclass
from typing import Any

from autoprof.config import Config
from autoprof.rules._runtime import BLOCKING_CALLS, DEVICE_SYNC_CALLS
from autoprof.trace.model import (
    CPU_OP_CODE,
    DEVICE_CODE,
    DEVICE_WORK_CODES,
    GPU_USER_ANNOTATION,
    LAUNCH_CODES,
    Trace,
)

DATALOADER_PREFIX = "enumerate(DataLoader)"
#: Preparing data inside the step, by the name of its annotation or Python function (a ``with_stack`` trace names
#: ``path/file.py(line): function``): a pipeline's ``preprocess``, a collate or tokenizer called by hand, a dataset's
#: ``__getitem__`` (:data:`DATASET_ITEM`), decoding or reading images, video or audio. Whole words only: ``Transformer`` is no transform,
#: an LLM's ``decode`` step is no input.
INPUT_NAME = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:pre_?process(?:ing|or)?|collate(?:_fn)?|default_collate|tokeniz(?:e|er|ation)\w*|"
    r"_next_data|(?:decode|read|load)_(?:video|image|images|audio|frames?)|video_reader|imread|imdecode|torchvision[/.]transforms)"
    r"(?:$|[^A-Za-z0-9])",
    re.IGNORECASE,
)


#: A dataset's ``__getitem__`` in a ``with_stack`` trace (``arrow_dataset.py(2800): __getitem__``): any other
#: ``__getitem__`` (``typing``'s, a ModuleList's) is indexing, not input.
DATASET_ITEM = re.compile(r"dataset\w*\.py\(\d+\): __getitem__", re.IGNORECASE)


def is_input_name(name: str) -> bool:
    """A host event whose time is preparing data: the DataLoader's iteration, or a name :data:`INPUT_NAME` or
    :data:`DATASET_ITEM` knows."""
    return name.startswith(DATALOADER_PREFIX) or INPUT_NAME.search(name) is not None or DATASET_ITEM.search(name) is not None


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
    out = [iv[0]]
    for s, e in iv[1:]:
        ls, le = out[-1]
        if s <= le:
            if e > le:
                out[-1] = (ls, e)
        else:
            out.append((s, e))
    return out


def total(iv: Intervals) -> int:
    return sum(e - s for s, e in iv)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` minus ``b`` (both merged)."""
    out: Intervals = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def us(ns: float) -> float:
    """ns → µs, rounded for records."""
    return round(ns / 1000.0, 3)


def ms(ns: float) -> float:
    return round(ns / 1e6, 3)


def duration(ns: float) -> str:
    """A time for a message, with the digits it is worth: "22 µs", "1.5 ms", "158 ms", "2.31 s" (never "0.0 ms"
    for a real figure)."""
    if ns < 1e6:
        v, unit = ns / 1e3, "µs"
    elif ns < 1e9:
        v, unit = ns / 1e6, "ms"
    else:
        v, unit = ns / 1e9, "s"
    text = f"{v:.3g}"
    if "e" in text:  # 3 significant digits of a number >= 1000 (over 999 s)
        text = f"{v:.0f}"
    return f"{text} {unit}"


def percent(part: float, whole: float) -> str:
    """A share for a message: whole percents, and "<1%" rather than "0%" for a share that is not zero."""
    if whole <= 0:
        return "0%"
    ratio = part / whole
    return "<1%" if 0 < ratio < 0.005 else f"{ratio:.0%}"


def steps_ns(trace: Trace, win: View) -> int:
    """The steps' typical time, the median step times their number (what a share "of the steps" is of; one step
    slowed by a collector pause or a preemption does not sway it); the host window without steps."""
    if trace.steps:
        typical = int(statistics.median(step.dur_ns for step in trace.steps)) * len(trace.steps)
        if typical > 0:
            return typical
    return int(win.host_window_ns)


def noise_floor(config: Config | None) -> float:
    """The share of the window below which a finding about a share of it is not emitted (``Config.noise_floor``)."""
    return DEFAULT_NOISE_FLOOR if config is None else config.noise_floor


DEFAULT_NOISE_FLOOR = 0.01


def share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole > 0 else 0.0


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
    is simply not recorded (``cuGraphLaunch``'s kernels) has a later id and keeps its place by time."""
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
    """Host ns spent in each blocking runtime or driver call (:data:`autoprof.rules._runtime.BLOCKING_CALLS`, CUDA
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
    """Per step, its time: the longer of the host's span and the device's (:func:`device_step_ns`)."""
    return [max(step.dur_ns, dev or 0) for step, dev in zip(trace.steps, device_step_ns(trace))]


_CUTLASS = re.compile(r"(?:void )?cutlass::Kernel[0-9]*<")


def short_kernel_name(name: str) -> str:
    """A readable kernel name: no return type, template arguments or parameter list."""
    match = _CUTLASS.match(name)
    if match:  # cutlass::Kernel<...> and cutlass::Kernel2<...>: the kernel is the template argument
        return name[match.end() :].split(">", 1)[0].split("(", 1)[0]
    depth = 0
    out: list[str] = []  # characters at template depth 0, up to the parameter list
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    text = "".join(out).strip()
    tokens = text.split()
    short = tokens[-1] if tokens else ""
    return short or name[:60]
