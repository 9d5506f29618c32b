"""Memory verdicts (issue 36), read from the allocator's ``[memory]`` events of a window that recorded them
(``profile_memory=True``; a trace without them gets no finding from these rules):

- ``memory_peak``: per device, the peak of memory allocated during the window above what was held at its start,
  the step it came in, and the ops that allocated what was alive at that moment, largest first; its share of the
  device's capacity where the trace's device properties give one (``totalGlobalMem``);
- ``allocator_churn``: many short-lived temporaries per step (the allocator and the ops that make them cost host
  time; fusing removes them), or the device allocator growing in step after step (``cudaMalloc`` calls: the
  caching allocator cannot reuse what it holds);
- ``memory_creep``: memory allocated at step boundaries grows across the window's steps (a robust Theil–Sen
  slope, its interval from the pairwise slopes' quantiles), and the step at which it reaches the device's
  capacity at that rate.

What a window cannot see: allocations made before it started (their frees show, as negative bytes, and count
against the window's start), and where a live window records no allocator totals (the raw events carry bytes
only) what was held at its start: levels are counted from the window's first event, the same in a live window and
in its kept trace. Allocations are paired with their frees by address where the trace records it (chrome
exports), else by size, the latest allocation of that size first (a live window): the two can name different
holders of one window's peak, and ``memory_peak`` says which it read (``pairing``, and the message where by size)."""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure import runtime
from autoprof.measure.units import percent
from autoprof.trace.model import CPU_OP_CODE, LAUNCH_CODES, USER_ANNOTATION_CODE, Trace

RULE_PEAK = "memory_peak"
RULE_CHURN = "allocator_churn"
RULE_CREEP = "memory_creep"
PEAK, NEAR_CAPACITY = "peak", "near-capacity"
TEMPORARIES, DEVICE_MALLOCS = "temporaries", "device-mallocs"
CREEP = "creep"
VERDICTS = {RULE_PEAK: (PEAK, NEAR_CAPACITY), RULE_CHURN: (TEMPORARIES, DEVICE_MALLOCS), RULE_CREEP: (CREEP,)}

#: What was allocated and held, over the device's capacity, from which the peak is a warning: under 10% headroom
#: the caching allocator's rounding and fragmentation (often 5-10% of what it reserves) make an out-of-memory
#: error a matter of one larger batch or one longer sequence.
NEAR_CAPACITY_SHARE = 0.90
#: A peak under this gets no finding (its figures stay in the window record's ``step_memory_peak_bytes``): a step
#: that needs less than a MiB above what it holds between steps has no memory question to answer.
PEAK_MIN_BYTES = 1 << 20
#: The ops named as holding the peak (largest first).
MAX_HOLDERS = 8

# Churn. An allocation and its free cost the host ~0.1-1 µs on the CPU allocator and ~1-3 µs in CUDA's caching
# allocator, and each temporary is an op's output, so an op dispatched and (on a device) a kernel launched. A few
# hundred temporaries per step are what a small model's forward and backward make; churn worth a verdict is a step
# made of many small ops whose outputs die at once: at least CHURN_ALLOCS per step (a millisecond or more of
# allocator time alone), at a rate of at least CHURN_RATE_PER_MS per millisecond of step (so that a large model's
# thousands of allocations in a step of hundreds of milliseconds are not called churn), CHURN_TEMPORARY_SHARE of
# them freed within the step they were made in, living under CHURN_LIFETIME_SHARE of the step (median).
CHURN_ALLOCS = 500
CHURN_RATE_PER_MS = 20.0
CHURN_TEMPORARY_SHARE = 0.8
CHURN_LIFETIME_SHARE = 0.05
#: ... and small (median): a large temporary's op does work enough that its allocation is no cost worth a verdict
#: (an inference step's activations, tens of MiB each, are freed as the next layer runs: that is no churn).
CHURN_SMALL_BYTES = 1 << 20
#: Device allocator calls (the caching allocator asking the driver for more): in this many steps of a window or
#: more, the allocator is not reaching a steady state (growing shapes, fragmentation, a creep).
MALLOC_CALLS = runtime.MALLOC_CALLS
MALLOC_STEPS = 2

# Creep: at least CREEP_MIN_STEPS steps (with the window's start, CREEP_MIN_STEPS + 1 boundaries: 3 pairwise slopes
# and more), a median slope of at least CREEP_MIN_BYTES per step (under that, an allocator's rounding and a lazily
# freed buffer move the boundaries), and growth at nearly every pair of boundaries (the pairwise slopes' lower
# quantile CREEP_QUANTILE above 0): a step that frees what the previous one kept is no creep.
CREEP_MIN_STEPS = 3
CREEP_MIN_BYTES = 1 << 20
CREEP_QUANTILE = 0.10

#: c10 DeviceType codes, as the events write them, by the name a device is called in records.
DEVICE_NAMES = {0: "cpu", 1: "cuda", 6: "hip", 9: "xla", 12: "xpu", 13: "mps", 20: "privateuse1"}
#: The device types a trace's ``deviceProperties`` (and their ``totalGlobalMem``) describe.
GPU_KINDS = frozenset({"cuda", "hip"})
#: Ops that only allocate (their caller's output): an allocation is named after the op that called them.
ALLOCATING_OPS = frozenset(
    {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided", "aten::resize_"}
)
OUTSIDE_OPS = "(outside any op)"


@dataclass
class Device:
    """One device's allocator events in the window, in time order (indices into the trace's memory columns)."""

    name: str
    index: int  # device index (-1: the host)
    kind: str = "cpu"  # the device type's name (DEVICE_NAMES)
    events: list[int] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)  # allocated after each event, counted from the window's start
    baseline: int | None = None  # what was held at the window's start, where the trace records totals
    capacity: int | None = None  # bytes, from the device properties
    freed: dict[int, int] = field(default_factory=dict)  # position of an allocation -> position of its free
    # how frees were matched to allocations: "address" (a chrome export records it), "size" (a live window's raw
    # events carry bytes only: the latest allocation of that size), "address and size" (some events had addresses)
    pairing: str = "address"

    def level_before(self, ts: list[int], t: int) -> int:
        """Allocated just before time ``t`` (0 before the first event)."""
        k = bisect.bisect_left(ts, t)
        return self.levels[k - 1] if k else 0


@dataclass
class Memory:
    """The window's allocator events by device, and the step each event is in (-1: none)."""

    devices: list[Device]
    ts: list[int]  # the memory events' times
    step_of: list[int]  # per memory event


def memory_of(trace: Trace) -> Memory:
    """The trace's allocator events, read once per trace (``trace.derive``)."""
    return trace.derive(_memory)


def _memory(trace: Trace) -> Memory:
    ts = list(trace.m_ts)
    by_key: dict[tuple[int, int], Device] = {}
    for k, (dtype, dindex) in enumerate(zip(trace.m_dtype, trace.m_dindex)):
        dev = by_key.get((dtype, dindex))
        if dev is None:
            kind = DEVICE_NAMES.get(dtype, f"device{dtype}")
            name = kind if dtype == 0 or dindex < 0 else f"{kind}:{dindex}"
            dev = by_key[(dtype, dindex)] = Device(name, dindex if dtype != 0 else -1, kind)
        dev.events.append(k)
    for dev in by_key.values():
        _fill(trace, dev)
    starts = [s.start_ns for s in trace.steps]
    step_of = []
    for t in ts:
        s = bisect.bisect_right(starts, t) - 1
        step_of.append(s if s >= 0 and t < trace.steps[s].end_ns else -1)
    devices = sorted(by_key.values(), key=lambda d: (d.name != "cpu", d.name))
    return Memory(devices, ts, step_of)


def _fill(trace: Trace, dev: Device) -> None:
    """Levels, baseline, capacity and the pairing of allocations with their frees."""
    nbytes, addr, total = trace.m_bytes, trace.m_addr, trace.m_total
    level = 0
    live_by_addr: dict[int, int] = {}
    live_by_size: dict[int, list[int]] = {}
    by: set[str] = set()
    for pos, k in enumerate(dev.events):
        b = nbytes[k]
        level += b
        dev.levels.append(level)
        a = addr[k]
        if b > 0:
            if a >= 0:
                live_by_addr[a] = pos
                by.add("address")
            else:
                live_by_size.setdefault(b, []).append(pos)
                by.add("size")
        else:
            made = live_by_addr.pop(a, None) if a >= 0 else None
            if made is None and a < 0:
                stack = live_by_size.get(-b)
                made = stack.pop() if stack else None
            if made is not None:
                dev.freed[made] = pos
    dev.pairing = " and ".join(p for p in ("address", "size") if p in by) or "address"
    first = dev.events[0]
    # the host's totals are the profiler's own count since it started (its warmup included), not what the process
    # holds: a CPU allocator reports no allocation made before profiling (torch warns "allocated before the
    # profiling started"); a device's caching allocator reports its real totals
    if total[first] >= 0 and dev.index >= 0:
        dev.baseline = max(total[first] - nbytes[first], 0)
    if dev.index < 0:  # the host: its capacity is the recording machine's memory, where the trace says it
        host = trace.metadata.get("host_memory_bytes")
        if type(host) is int and host >= max(dev.levels, default=0):
            dev.capacity = host
    elif dev.kind in GPU_KINDS:  # deviceProperties describe the CUDA/HIP devices only
        held = max(dev.levels, default=0) + (dev.baseline or 0)
        for props in trace.device_properties:
            if isinstance(props, dict) and props.get("id") == dev.index:
                cap = props.get("totalGlobalMem")
                if type(cap) is int and cap >= held:  # less than the window held: another device's, or wrong
                    dev.capacity = cap


def has_memory(trace: Trace) -> bool:
    return trace.n_memory > 0 and bool(trace.steps)


# -- the ops that allocated -----------------------------------------------------------------------------------


def _allocator_op(trace: Trace, k: int, runs: dict[int, tuple[int, int]], skip: set[int], skip_ids: frozenset[int]) -> str:
    """The op that made memory event ``k``: the innermost host op (or section) enclosing its time on its thread,
    past ops that only allocate for their caller; :data:`OUTSIDE_OPS` for a step's own code."""
    run = runs.get(trace.m_tid[k])
    if run is None:
        return OUTSIDE_OPS
    t = trace.m_ts[k]
    ts, dur, parent, cat, names = trace.h_ts, trace.h_dur, trace.h_parent, trace.h_cat, trace.h_name
    i = bisect.bisect_right(ts, t, run[0], run[1]) - 1
    while i >= 0 and ts[i] + dur[i] < t:
        i = parent[i]
    while i >= 0 and cat[i] == CPU_OP_CODE and trace.names[names[i]] in ALLOCATING_OPS and parent[i] >= 0 and cat[parent[i]] == CPU_OP_CODE:
        i = parent[i]
    if i < 0 or i in skip or cat[i] not in (CPU_OP_CODE, USER_ANNOTATION_CODE) or names[i] in skip_ids:
        return OUTSIDE_OPS
    return trace.host_name(i)


def skip_names(trace: Trace) -> frozenset[int]:
    """Names that are steps, not ops (the target's own annotation)."""
    return frozenset({trace.name_id(trace.target)} if trace.target else ())


def _thread_runs(trace: Trace) -> dict[int, tuple[int, int]]:
    """Each thread row's run of host events (the host columns are sorted by thread, then time), by the thread rows
    memory events are on: a row of the same pid and tid as written (a 2021 trace writes an op's tid as text, a
    memory event's as a number)."""
    runs: dict[tuple[str, str], tuple[int, int]] = {}
    tids = trace.h_tid
    begin, n = 0, len(tids)
    while begin < n:
        end = bisect.bisect_right(tids, tids[begin], begin)
        pid, tid = trace.threads[tids[begin]]
        runs.setdefault((str(pid), str(tid)), (begin, end))
        begin = end
    out: dict[int, tuple[int, int]] = {}
    for row in set(trace.m_tid):
        pid, tid = trace.threads[row]
        run = runs.get((str(pid), str(tid)))
        if run is not None:
            out[row] = run
    return out


# -- measure ---------------------------------------------------------------------------------------------------


def step_peaks(trace: Trace, numbers: list[int] | None = None) -> dict[str, list[int | None]] | None:
    """Per device, each step's peak allocated (bytes above what was held at the window's start), in the order of
    ``numbers`` (default the trace's steps); None without memory events."""
    if not has_memory(trace):
        return None
    mem = memory_of(trace)
    by_number: dict[str, dict[int, int]] = {}
    for dev in mem.devices:
        peaks = _device_step_peaks(trace, mem, dev)
        by_number[dev.name] = {trace.steps[s].number: p for s, p in enumerate(peaks)}
    wanted = [s.number for s in trace.steps] if numbers is None else list(numbers)
    return {name: [peaks.get(n) for n in wanted] for name, peaks in by_number.items()}


def _device_step_peaks(trace: Trace, mem: Memory, dev: Device) -> list[int]:
    """Each step's peak on ``dev``: the most allocated at any moment in it (its start's level at least)."""
    dts = [mem.ts[k] for k in dev.events]
    peaks = [max(dev.level_before(dts, s.start_ns), 0) for s in trace.steps]
    for pos, k in enumerate(dev.events):
        s = mem.step_of[k]
        if s >= 0 and dev.levels[pos] > peaks[s]:
            peaks[s] = dev.levels[pos]
    return peaks


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    if not has_memory(trace):
        return []
    mem = memory_of(trace)
    found: list[Finding] = []
    for dev in mem.devices:
        for judge in (_peak, _churn, _creep):
            f = judge(trace, mem, dev)
            if f is not None:
                found.append(f)
    mallocs = _mallocs(trace)
    if mallocs is not None:
        found.append(mallocs)
    order = {RULE_PEAK: 0, RULE_CHURN: 1, RULE_CREEP: 2}
    return sorted(found, key=lambda f: order[f.rule])


def size(n: float) -> str:
    """Bytes for a message: "512 B", "3.2 KiB", "48 MiB", "1.50 GiB"."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{sign}{v:.3g} {unit}" if v < 1000 else f"{sign}{v:.0f} {unit}"
    return f"{sign}{n:.0f} B"


# -- memory_peak -----------------------------------------------------------------------------------------------


def _unseen_frees(trace: Trace, mem: Memory, dev: Device) -> int:
    """On the host, what the first step freed that was allocated before the window, which a CPU profiler does not
    report: estimated as what the first step carries into the second (allocated in it, freed in the next: the
    gradients ``zero_grad(set_to_none=True)`` frees, a buffer replaced each step), since the step before the window
    carried as much into it. 0 on a device (its frees of earlier allocations are reported) and with one step."""
    if dev.index >= 0 or len(trace.steps) < 2:
        return 0
    nbytes, step_of, events = trace.m_bytes, mem.step_of, dev.events
    return sum(nbytes[events[a]] for a, f in dev.freed.items() if step_of[events[a]] == 0 and step_of[events[f]] == 1)


def _peak(trace: Trace, mem: Memory, dev: Device) -> Finding | None:
    peaks = _device_step_peaks(trace, mem, dev)
    top = max(range(len(peaks)), key=peaks.__getitem__)
    level = peaks[top]
    unseen = _unseen_frees(trace, mem, dev)
    peak = level - unseen
    if peak < PEAK_MIN_BYTES:
        return None
    # the moment of the peak: the first event in that step at the peak's level, else the step's start (a level
    # reached before the step, by an allocation between steps, and held through it: the last event before it)
    at = next((pos for pos, k in enumerate(dev.events) if mem.step_of[k] == top and dev.levels[pos] == level), -1)
    if at < 0:
        at = bisect.bisect_left([mem.ts[k] for k in dev.events], trace.steps[top].start_ns) - 1
    holders = _holders(trace, dev, at)
    held = (dev.baseline or 0) + peak
    cap_share = round(held / dev.capacity, 4) if dev.capacity else None
    near = cap_share is not None and cap_share >= NEAR_CAPACITY_SHARE
    step = trace.steps[top].number
    named = ", ".join(f"{op} {size(b)}" for op, b in list(holders.items())[:3])
    of_cap = ""
    if dev.capacity:
        before = f"with the {size(dev.baseline)} held before it, " if dev.baseline else ""
        of_cap = f"; {before}{percent(held, dev.capacity)} of the device's {size(dev.capacity)}"
    # which reading of who holds the peak: a live window's events carry no address, its frees are matched by size
    # (the latest allocation of that size), which can name another op than its kept trace read by address
    how = "" if dev.pairing == "address" else f" (allocations matched to their frees by {dev.pairing}: no addresses recorded)"
    unseen_note = (
        f" (less the {size(unseen)} its first step freed unseen: allocated before it, as a CPU profiler does not report)" if unseen else ""
    )
    head = f"{dev.name}: the peak allocated during the window is {size(peak)} above what was held at its start{unseen_note}"
    message = f"{head} (step {step}){of_cap}" + (f"; alive at the peak, largest first{how}: {named}" if named else "")
    advice = (
        "The peak is what a step needs on top of what it holds between steps (weights, optimizer state, allocations "
        "made before the window, which it cannot see): reduce what is alive at the peak (activation checkpointing, "
        "a smaller micro-batch, lower precision, freeing or recomputing the largest holders)."
    )
    if near:
        advice = "Close to the device's capacity: an out-of-memory error is one larger batch away. " + advice
    evidence: dict[str, Any] = {
        "device": dev.name,
        "peak_bytes": peak,
        "unseen_frees_bytes": unseen,
        "peak_step": step,
        "step_peak_bytes": peaks,
        "baseline_bytes": dev.baseline,
        "capacity_bytes": dev.capacity,
        "capacity_share": cap_share,
        # a list, largest first (a record's objects are written with sorted keys)
        "holders": [{"op": op, "bytes": b} for op, b in list(holders.items())[:MAX_HOLDERS]],
        "pairing": dev.pairing,  # how the holders were read: "address", "size" (a live window), "address and size"
    }
    return Finding(RULE_PEAK, NEAR_CAPACITY if near else PEAK, "warning" if near else "info", message, advice, evidence, tuple(holders)[:4])


def _holders(trace: Trace, dev: Device, at: int) -> dict[str, int]:
    """The ops whose allocations of the window were alive at position ``at``, by bytes, largest first."""
    if at < 0:
        return {}
    runs = _thread_runs(trace)
    skip = {s.host_index for s in trace.steps if s.host_index >= 0}
    skip_ids = skip_names(trace)
    by_op: dict[str, int] = {}
    nbytes = trace.m_bytes
    for pos in range(at + 1):
        k = dev.events[pos]
        b = nbytes[k]
        if b <= 0 or dev.freed.get(pos, at + 1) <= at:
            continue
        op = _allocator_op(trace, k, runs, skip, skip_ids)
        by_op[op] = by_op.get(op, 0) + b
    return dict(sorted(by_op.items(), key=lambda item: -item[1]))


# -- allocator_churn -------------------------------------------------------------------------------------------


def _churn(trace: Trace, mem: Memory, dev: Device) -> Finding | None:
    n_steps = len(trace.steps)
    allocs = [0] * n_steps
    frees = [0] * n_steps
    alloc_bytes = [0] * n_steps
    temp = [0] * n_steps
    temp_bytes = [0] * n_steps
    lifetimes: list[int] = []
    temp_sizes: list[int] = []
    nbytes, ts = trace.m_bytes, mem.ts
    for pos, k in enumerate(dev.events):
        s = mem.step_of[k]
        if s < 0:
            continue
        b = nbytes[k]
        if b < 0:
            frees[s] += 1
            continue
        allocs[s] += 1
        alloc_bytes[s] += b
        gone = dev.freed.get(pos)
        if gone is not None and mem.step_of[dev.events[gone]] == s:
            temp[s] += 1
            temp_bytes[s] += b
            lifetimes.append(ts[dev.events[gone]] - ts[k])
            temp_sizes.append(b)
    step_ns = statistics.median(step.dur_ns for step in trace.steps)
    per_step = statistics.median(allocs)
    temporaries = sum(temp)
    temp_share = temporaries / sum(allocs) if sum(allocs) else 0.0
    lifetime = statistics.median(lifetimes) if lifetimes else 0
    temp_size = statistics.median(temp_sizes) if temp_sizes else 0
    rate = per_step / (step_ns / 1e6) if step_ns > 0 else 0.0
    if (
        per_step < CHURN_ALLOCS
        or rate < CHURN_RATE_PER_MS
        or temp_share < CHURN_TEMPORARY_SHARE
        or step_ns <= 0
        or lifetime > CHURN_LIFETIME_SHARE * step_ns
        or temp_size > CHURN_SMALL_BYTES
    ):
        return None
    message = (
        f"{dev.name}: {per_step:.0f} allocations a step ({rate:.0f} per ms of step), {temp_share:.0%} of them "
        f"temporaries freed within the step (median {size(temp_size)}, living {lifetime / 1e3:.3g} µs)"
    )
    advice = (
        "Many short-lived temporaries: each is a small op's output, an allocation and a free. Fuse the chains of "
        "small ops that make them (torch.compile, fused or in-place ops, foreach optimizers), or vectorize a Python "
        "loop over tensors into one op."
    )
    evidence = {
        "device": dev.name,
        "allocs_per_step_count": allocs,
        "frees_per_step_count": frees,
        "alloc_bytes_per_step": alloc_bytes,
        "temporary_per_step_count": temp,
        "temporary_bytes_per_step": temp_bytes,
        "temporary_share": round(temp_share, 4),
        "temporary_lifetime_us": round(lifetime / 1e3, 3),
        "temporary_median_bytes": temp_size,
        "allocs_per_ms": round(rate, 2),
    }
    return Finding(RULE_CHURN, TEMPORARIES, "warning", message, advice, evidence, (dev.name,))


def _mallocs(trace: Trace) -> Finding | None:
    """The device allocator's own calls to the driver, in steps: the caching allocator growing step after step."""
    ids = [trace.name_id(n) for n in sorted(MALLOC_CALLS)]
    calls = [i for i in trace.host_named(n for n in ids if n >= 0) if trace.h_cat[i] in LAUNCH_CODES]
    if not calls:
        return None
    starts = [s.start_ns for s in trace.steps]
    per_step = [0] * len(trace.steps)
    spent = [0] * len(trace.steps)
    for i in calls:
        t = trace.h_ts[i]
        s = bisect.bisect_right(starts, t) - 1
        if s >= 0 and t < trace.steps[s].end_ns:
            per_step[s] += 1
            spent[s] += trace.h_dur[i]
    stepped = sum(1 for n in per_step if n)
    if stepped < MALLOC_STEPS:
        return None
    name = trace.host_name(calls[0])
    message = (
        f"the device allocator calls {name} in {stepped} of the window's {len(per_step)} steps "
        f"({sum(per_step)} calls, {sum(spent) / 1e6:.3g} ms): its cache does not reach a steady state"
    )
    advice = (
        "The caching allocator asks the driver for memory in step after step (growing or varying shapes, "
        "fragmentation, or a creep): set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, preallocate by running "
        "the largest shapes first, pad shapes to a few sizes, and avoid torch.cuda.empty_cache() in the loop."
    )
    evidence = {"malloc_per_step_count": per_step, "malloc_ms": round(sum(spent) / 1e6, 3), "steps_count": stepped}
    return Finding(RULE_CHURN, DEVICE_MALLOCS, "warning", message, advice, evidence, (name,))


# -- memory_creep ----------------------------------------------------------------------------------------------


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values (linear between neighbours)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    x = q * (len(sorted_values) - 1)
    lo = int(x)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (x - lo)


def theil_sen(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """The median of the pairwise slopes, and their ``CREEP_QUANTILE`` and ``1 - CREEP_QUANTILE`` quantiles."""
    slopes = sorted((y2 - y1) / (x2 - x1) for k, (x1, y1) in enumerate(points) for x2, y2 in points[k + 1 :] if x2 != x1)
    if not slopes:
        return 0.0, 0.0, 0.0
    return statistics.median(slopes), quantile(slopes, CREEP_QUANTILE), quantile(slopes, 1 - CREEP_QUANTILE)


def boundaries(trace: Trace, mem: Memory, dev: Device) -> list[int]:
    """Allocated at the window's step boundaries that both ends of a step saw: at the first step's start, then at
    each step's end. On the host, not the first step's start: a CPU profiler reports no free of memory allocated
    before it started, so the first step's frees of what was held (``zero_grad(set_to_none=True)``'s gradients) are
    invisible while what it allocates in their place counts, and the first step would read as growth."""
    dts = [mem.ts[k] for k in dev.events]
    steps = trace.steps
    ends = [dev.level_before(dts, s.end_ns) for s in steps]
    return ends if dev.index < 0 else [dev.level_before(dts, steps[0].start_ns)] + ends


def _creep(trace: Trace, mem: Memory, dev: Device) -> Finding | None:
    if len(trace.steps) < CREEP_MIN_STEPS:
        return None
    levels = boundaries(trace, mem, dev)
    slope, low, high = theil_sen([(float(x), float(y)) for x, y in enumerate(levels)])
    if slope < CREEP_MIN_BYTES or low <= 0:
        return None
    evidence: dict[str, Any] = {
        "device": dev.name,
        "rate_bytes_per_step": round(slope),
        "rate_low_bytes_per_step": round(low),
        "rate_high_bytes_per_step": round(high),
        "boundary_bytes": levels,
        "baseline_bytes": dev.baseline,
        "capacity_bytes": dev.capacity,
        "forecast_steps": None,
        "forecast_steps_low": None,
        "forecast_steps_high": None,
    }
    available = trace.metadata.get("host_memory_available_bytes") if dev.index < 0 else None
    where = "the host's" if dev.index < 0 else "the device's"
    if type(available) is int and available > 0 and dev.capacity:  # the host: what the machine had left at the close
        evidence["available_bytes"] = available
        room = available
        evidence["forecast_steps"] = round(room / slope)
        evidence["forecast_steps_low"] = round(room / high)
        evidence["forecast_steps_high"] = round(room / low)
        forecast = (
            f"; at this rate it uses up the {size(available)} the host had available (of its {size(dev.capacity)}) in about "
            f"{evidence['forecast_steps']} more steps ({evidence['forecast_steps_low']} to {evidence['forecast_steps_high']})"
        )
    elif dev.capacity:
        held = levels[-1] + (dev.baseline or 0)
        room = max(dev.capacity - held, 0)
        evidence["forecast_steps"] = round(room / slope)
        evidence["forecast_steps_low"] = round(room / high)
        evidence["forecast_steps_high"] = round(room / low)
        unknown = "" if dev.baseline is not None else " (what was held before the window is not recorded: a latest estimate)"
        if room < slope:  # under one step's growth left
            forecast = f"; at this rate it reaches {where} {size(dev.capacity)} within the next step{unknown}"
        else:
            forecast = (
                f"; at this rate it reaches {where} {size(dev.capacity)} in about {evidence['forecast_steps']} more "
                f"steps ({evidence['forecast_steps_low']} to {evidence['forecast_steps_high']}){unknown}"
            )
    else:
        forecast = "; no forecast: the trace gives no capacity for this device" + (" (the host's memory)" if dev.index < 0 else "")
    message = (
        f"{dev.name}: memory allocated at step boundaries grows by {size(slope)} a step "
        f"({size(low)} to {size(high)}) across the window's {len(trace.steps)} steps{forecast}"
    )
    advice = (
        "Something allocated in each step outlives it: a tensor kept in a list or a metric that holds its graph "
        "(accumulate loss.item() or loss.detach(), not loss), a cache keyed by step, hooks that store activations. "
        "Find what is appended per step and release or detach it."
    )
    return Finding(RULE_CREEP, CREEP, "warning", message, advice, evidence, (dev.name,))
