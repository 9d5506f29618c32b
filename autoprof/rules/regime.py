"""Bound regime: is the window limited by the host (overhead), the device (compute), communication, input or syncs?

The window (``View``, measure/views.py): host events inside the steps; device work launched from them (by
correlation), or, with no recorded launch, placed by time unless its correlation id precedes the window's first
runtime call (launched before the window: the profiler's warmup). The device's time on work that is not the
window's (queued before it, launched between steps) is neither its work nor its idle time: the window on the
device (``device_window_us``) is the window extended to the end of its device work, less that time
(``device_outside_us``). Device windows (kernels present) compare:

- ``device_busy_share``: union of the window's kernels, memcpys and memsets, of the window on the device;
- ``comm_share``: exposed communication, the time collective kernels (NCCL/RCCL) run with no compute kernel
  beside them (the ``exposed_communication`` rule's computation, :func:`autoprof.rules.comm.exposure`);
  ``work_share`` is the busy share less it: the device's own work;
- ``input_share``: host time in ``enumerate(DataLoader)``, in the steps and between them on the steps' thread (a
  trainer fetches the next batch before its step begins);
- ``blocked_share``: host time waiting in synchronizing calls (``runtime.BLOCKING_CALLS``, CUDA and HIP), reported
  apart;
- ``host_active_share``: union of op dispatch (``cpu_op``), runtime and driver calls and the host's own work (long
  events that launch nothing, ``_host_own_work``), less blocked and input time; the Python frames of a
  ``with_stack`` trace around launches are no activity of their own;
- ``idle_host_wait_share``: of the device's idle time, the part in which it waits for the host (a gap whose next
  work was launched only after it opened, and the gaps before the first and after the last work).

Verdicts, first match wins: input-bound (input ≥ 25 %); communication-bound when exposed communication is at
least ``COMM_SHARE_MIN`` (40 %) of the window on the device and more than both the device's own work and its
idle time; device-bound when the device's own work is ≥ 90 %, or ≥ 60 % and at least as long as the host is
active or the host has queued the work ahead (less than ``HOST_WAIT_SHARE`` of the device's idle time waits for
the host: the host is not the limit); overhead-bound when the host is active for longer than the device is busy
and the device waits for the host (on its launches, or on the host's own work: long host events that launch
nothing, ``_host_own_work``, said apart with their own advice); sync-bound (blocked ≥ 30 %); otherwise ``mixed``.
A device-bound window is named by where the device's time goes by the roofline (:func:`work_verdict`, the rule
both readings share): compute-bound or memory-bound when that share leads the others by ``MARGIN``, ``mixed``
when none does or when time the roofline cannot cost leads.

CPU-only windows are read in one order, each second once: waiting for input, in blocking calls, in
collectives on the step's thread, then op work the roofline explains (an op call whose work at the calibrated
peak takes at least a call's fixed cost, ``CALL_FLOOR_NS``: its time past that cost; compute or memory by its
intensity), and the rest is overhead. The largest share names the verdict when it leads clearly (``LEADS``, ``MARGIN``), else
``mixed``. See docs/rules.md ("Reading a CPU window") for the why and worked examples.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import ge
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure import families
from autoprof.measure.kernels import COMPUTE, op_family
from autoprof.measure.runtime import BLOCKING_CALLS, COLLECTIVE_CALL_PREFIXES, LAUNCH_CALLS
from autoprof.measure.steps import host_step_ns, merged_processes, step_readings
from autoprof.measure.units import duration, percent, share, us
from autoprof.measure.views import (
    COMPILE_WRAPPER_PREFIXES,
    View,
    ancestor_flags,
    blocked_by_call,
    clip,
    merge,
    op_self_ns,
    subtract,
    total,
    view,
)
from autoprof.measure.work import CALL_FLOOR_NS as CALL_FLOOR_NS
from autoprof.measure.work import WORK_CREDIT as WORK_CREDIT
from autoprof.measure.work import credited_ns, is_roofline_op
from autoprof.rules import comm, roofline
from autoprof.rules._common import DATALOADER_PREFIX, is_input_name
from autoprof.rules._common import runqueue_share as runqueue_share
from autoprof.trace import _columns
from autoprof.trace.model import (
    CPU_OP_CODE,
    DEVICE_WORK_CODES,
    LAUNCH_CODES,
    PYTHON_FUNCTION_CODE,
    USER_ANNOTATION_CODE,
    Trace,
    split_processes,
)

RULE = "bound_regime"
INPUT_BOUND = "input-bound"
SYNC_BOUND = "sync-bound"
COMMUNICATION_BOUND = "communication-bound"
OVERHEAD_BOUND = "overhead-bound"
COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
MIXED = "mixed"
VERDICTS = {RULE: (INPUT_BOUND, SYNC_BOUND, COMMUNICATION_BOUND, OVERHEAD_BOUND, COMPUTE_BOUND, MEMORY_BOUND, MIXED)}

DEVICE_BUSY_COMPUTE = 0.60
DEVICE_SATURATED = 0.90  # busy this much of the window, the device is the bottleneck whatever the host does
INPUT_SHARE_MIN = 0.25
SYNC_SHARE_MIN = 0.30
#: A device window where the host works less than this share of it and the device is busy less than this share is
#: mostly unrecorded time (a sleep, Python that runs no op, a wait on another process): no side of it is the limit.
RECORDED_MIN = 0.10
#: A host op that launches no device work (no runtime or driver call under it) and runs at least this long is the
#: host's own work (decoding, preprocessing, math on CPU tensors), not the cost of launching: dispatching an op
#: that launches takes a few to a few tens of µs.
HOST_WORK_OP_NS = 50_000
#: A Python function or user annotation that launches nothing for this long is the host's own work too (Python code
#: between two launches takes microseconds; decoding a video or tokenizing a batch takes milliseconds).
HOST_WORK_SPAN_NS = 1_000_000
#: An overhead-bound window whose host's own work is at least this share of the host's active time is read as the
#: host busy with its own work, not as launch overhead.
HOST_WORK_LEADS = 0.5

_ADVICE = {
    COMPUTE_BOUND: "The device is the bottleneck: reduce or speed up its work (mixed precision, fused "
    "kernels, better shapes); host-side tuning will not help.",
    OVERHEAD_BOUND: "The host cannot feed the device: batch more work per op (bigger tensors, fewer small "
    "ops), fuse ops (torch.compile), or capture with CUDA graphs.",
    INPUT_BOUND: "Data loading stalls the step: use DataLoader(num_workers>0, pin_memory=True, "
    "prefetch_factor) or move preprocessing off the training loop.",
    SYNC_BOUND: "The host waits in synchronizing calls: remove .item()/.cpu()/print of device tensors "
    "from the step, use non_blocking copies from pinned memory.",
    COMMUNICATION_BOUND: "The device waits in collectives: look at the slowest rank first (a straggler makes the "
    "others wait), then overlap communication with compute (DDP bucket_cap_mb, FSDP prefetching) or send less.",
    MIXED: "No single limit dominates: look at the other findings for this window.",
}
_UNRECORDED_ADVICE = (
    "Most of the step runs nothing the profiler records (Python that calls no op, sleeps, waits on other processes): "
    "wrap the step's parts in autoprof.section, or profile it with torch.profiler's with_stack=True, to see where it goes."
)
_HELD_ADVICE = (
    "The ops run far slower than their work explains: compare torch.get_num_threads() with the cores free for this "
    "process (intra-op threads spin against other work on a busy machine), look for other processes and for "
    "allocation in the step, and profile again on a quiet machine before changing the model."
)
_HOST_WORK_ADVICE = (
    "The host's own CPU work (ops that launch nothing on the device: decoding, preprocessing, math on CPU tensors) "
    "leaves the device idle: move it off the step's path (into DataLoader workers, num_workers>0, or a separate "
    "process), onto the device, or overlap it with the device's work; fewer launches or CUDA graphs will not help."
)
_CPU_ADVICE = {
    COMPUTE_BOUND: "The ops' own math dominates the step: larger gains need less work (smaller dtype, "
    "better algorithms, larger batches per GEMM) or faster hardware, not less Python.",
    MEMORY_BOUND: "The ops move more data than they compute on: fuse elementwise chains (torch.compile), "
    "avoid materialising intermediates, keep data in lower precision.",
    OVERHEAD_BOUND: "Most of the step is framework overhead around ops too small to matter: batch work into "
    "fewer, larger ops, or try torch.compile.",
    INPUT_BOUND: "Data loading stalls the step: use DataLoader(num_workers>0, persistent_workers=True, "
    "prefetch_factor) or move preprocessing off the training loop.",
    SYNC_BOUND: "The step waits in synchronizing calls: remove them from the step or make them asynchronous.",
    COMMUNICATION_BOUND: "The step waits in collectives: look at the slowest rank first (a straggler makes "
    "the others wait), then overlap communication with compute and tune bucket sizes.",
    MIXED: "No single share of the step leads: look at the evidence and the other findings.",
}


def _self_totals(trace: Trace, win: View) -> tuple[int, int]:
    """Self time of the program's own host events (a collective's span on the backend's thread is waiting, not the
    program's CPU time) and the device time of the window. The Python frames of a ``with_stack`` trace are not
    events of their own here: the self times are those of the tree without them, as the profiler's table gives."""
    host_in, cat = win.host_in, trace.h_cat
    np = _columns.numpy(len(cat))
    if PYTHON_FUNCTION_CODE in cat:
        host = _self_without_frames(trace, host_in)
    else:  # (numpy's sum where it cannot pass int64: the same total)
        host = _columns.total_of(np, trace.h_self, host_in) if np is not None else sum(compress(trace.h_self, host_in))
    host -= sum(trace.h_self[i] for i in trace.host_named(_collective_ids(trace)) if host_in[i] and cat[i] != PYTHON_FUNCTION_CODE)
    return host, _columns.total_of(np, trace.d_dur, win.device_in) if np is not None else sum(compress(trace.d_dur, win.device_in))


def _self_without_frames(trace: Trace, host_in: list[bool]) -> int:
    """The sum of the self times of the window's host events in their tree without Python frames: the time of
    the outermost ones (every other's lies inside its nearest enclosing event, which loses it from its self time)."""
    cat, parent, dur = trace.h_cat, trace.h_parent, trace.h_dur
    under = [False] * trace.n_host  # inside an event that is not a Python frame (parents precede their children)
    out = 0
    for i in range(trace.n_host):
        p = parent[i]
        under[i] = p >= 0 and (under[p] or cat[p] != PYTHON_FUNCTION_CODE)
        if host_in[i] and cat[i] != PYTHON_FUNCTION_CODE and not under[i]:
            out += dur[i]
    return out


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    """The window's regime (computed once per trace: other rules ask for it too, the occupancy rule among them)."""
    return list(trace.derive(lambda t: _check(t, config), key=check))


def _check(trace: Trace, config: Config | None = None) -> list[Finding]:
    win = view(trace)
    if win.host_window_ns <= 0:
        return []
    self_cpu, self_dev = _self_totals(trace, win)
    evidence: dict[str, Any] = {
        "self_cpu_total_us": us(self_cpu),
        "self_device_total_us": us(self_dev),
        "cpu_to_device_ratio": round(self_cpu / self_dev, 3) if self_dev else None,
        "step_count": len(trace.steps),
    }
    merged = merged_processes(trace)
    if merged > 1:
        return [_merged_verdict(trace, evidence, merged, config)]
    if win.device_busy:
        return [_device_verdict(trace, win, evidence, config)]
    launches = 0 if len(trace.d_dur) else _kernel_launches(trace, win)
    if launches:  # kernels launched, none recorded: the host's side alone, and it says so
        return [_launches_only_verdict(trace, win, evidence, launches)]
    return [_cpu_verdict(trace, win, evidence, config)]


def _merged_verdict(trace: Trace, evidence: dict[str, Any], processes: int, config: Config | None) -> Finding:
    """A file merged from several ranks' windows: one reading would add their device time and host time together
    (a device 88% busy that is 65% busy on rank 0), so each process is read apart (``split_processes``: its host
    threads, the device work it launched) and the verdict is theirs where they agree, else ``mixed``."""
    pids = sorted(
        {trace.threads[s.tid][0] for s in trace.steps if s.host_index >= 0},
        key=lambda p: (not isinstance(p, int), p if isinstance(p, int) else 0, str(p)),
    )
    readings = []
    for pid, part in zip(pids, split_processes(trace, pids), strict=True):
        found = _check(part, config) if part.steps else []
        if found:
            readings.append({"pid": pid, "verdict": found[0].verdict, "message": found[0].message})
    verdicts = {r["verdict"] for r in readings}
    evidence.update(reading="merged", merged_processes=processes, processes=readings)
    each = "; ".join(f"process {k + 1} (pid {r['pid']}): {r['verdict']}" for k, r in enumerate(readings))
    head = f"this file merges the windows of {processes} processes (each ProfilerStep is recorded {processes} times), read apart"
    advice = "Each process was read apart; `autoprof analyze` on each rank's own trace file gives every rule per rank."
    if len(verdicts) == 1 and len(readings) == len(pids):
        (verdict,) = verdicts
        severity = "info" if verdict in (COMPUTE_BOUND, MEMORY_BOUND, MIXED) else "warning"
        return Finding(RULE, verdict, severity, f"{verdict}: {head}, all read {verdict} ({each})", advice, evidence)
    return Finding(RULE, MIXED, "warning", f"mixed: {head}, and they differ ({each or 'none could be read'})", advice, evidence)


def _kernel_launches(trace: Trace, win: View) -> int:
    """The window's kernel launches (runtime or driver calls that enqueue a kernel or a graph)."""
    ids = {nid for nid, n in enumerate(trace.names) if n in LAUNCH_CALLS}
    inside = win.host_in
    return sum(1 for i in trace.host_named(ids) if inside[i]) if ids else 0


#: What a host-only reading of a trace whose kernels were not recorded can still name: waits the host sees.
_HOST_VISIBLE = (INPUT_BOUND, SYNC_BOUND, COMMUNICATION_BOUND)


def _launches_only_verdict(trace: Trace, win: View, evidence: dict[str, Any], launches: int) -> Finding:
    """A window that launches kernels but holds no device events (recorded without ``ProfilerActivity.CUDA``, or
    its device lane lost): never a CPU roofline of CUDA ops' host time. Input, sync and collective waits are the
    host's to see and are named; anything else is ``mixed``, saying that the device's side is missing."""
    reading, _ = _host_reading(trace, win)
    sh = reading.shares()
    evidence.update(
        reading="host_only",
        kernels_missing=True,
        kernel_launch_count=launches,
        window_us=us(reading.window_ns),
        input_share=share(reading.input_ns, reading.window_ns),
        blocked_share=share(reading.blocked_ns, reading.window_ns),
        comm_share=share(reading.comm_ns, reading.window_ns),
    )
    missing = (
        f"the trace launches {launches:,} kernels but records no device events (no kernels, copies or memsets): "
        "the device's side cannot be read"
    )
    ranked = sorted(((k, v) for k, v in sh.items() if k in ("input", "sync", "communication")), key=lambda item: -item[1])
    lead, top = ranked[0]
    verdict = {"input": INPUT_BOUND, "sync": SYNC_BOUND, "communication": COMMUNICATION_BOUND}[lead]
    if top >= LEADS:
        return Finding(
            RULE, verdict, "warning", f"{verdict}: the host waits {top:.0%} of the window ({lead}); {missing}", _ADVICE[verdict], evidence
        )
    return Finding(
        RULE,
        MIXED,
        "warning",
        f"mixed: {missing}",
        "Record the device too: torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) "
        "(autoprof's own windows do).",
        evidence,
    )


def _wait_ids(trace: Trace) -> tuple[set[int], set[int]]:
    """Name ids of data loading (``enumerate(DataLoader)``) and of blocking runtime calls (CUDA and HIP)."""
    names = trace.names
    return (
        {nid for nid, n in enumerate(names) if is_input_name(n)},
        {nid for nid, n in enumerate(names) if n in BLOCKING_CALLS},
    )


def _wait_spans(trace: Trace, win: View, loading: set[int], blocking: set[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Merged spans of blocking runtime calls and of data loading in the window (both readings use these).

    Data loading counts on the steps' own threads (a loader on a helper thread prefetches: the step does not wait
    for it), inside the steps and between them: a trainer (Hugging Face, Lightning's callbacks) fetches the next
    batch before its step begins, so its wait for data lies between the steps, not in them. Without steps, any
    data loading in the window counts."""
    ts, dur, cat, host_in = trace.h_ts, trace.h_dur, trace.h_cat, win.host_in
    blocked = [(ts[i], ts[i] + dur[i]) for i in trace.host_named(blocking) if cat[i] in LAUNCH_CODES and host_in[i]]
    threads, tid = {s.tid for s in trace.steps}, trace.h_tid
    inp = [(ts[i], ts[i] + dur[i]) for i in trace.host_named(loading) if (host_in[i] and not threads) or tid[i] in threads]
    return merge(win.clip(blocked)), merge(clip(inp, win.start_ns, win.end_ns))  # data loading: within the host's window


def input_calls(trace: Trace, win: View) -> dict[str, float]:
    """Where the step prepares data outside the DataLoader: the outermost input events by name (``is_input_name``:
    a ``preprocess`` annotation, a tokenizer or collate called by hand, a video decode), µs in the window, the 3
    largest; empty when all input is the DataLoader's."""
    loading, _ = _wait_ids(trace)
    threads, tid, parent, names = {s.tid for s in trace.steps}, trace.h_tid, trace.h_parent, trace.h_name
    found: dict[str, int] = {}
    for i in trace.host_named(loading):
        if not win.host_in[i] or (threads and tid[i] not in threads):
            continue
        p = parent[i]
        while p >= 0 and names[p] not in loading:
            p = parent[p]
        if p >= 0:
            continue  # inside another input event: counted there
        name = trace.host_name(i)
        found[name] = found.get(name, 0) + trace.h_dur[i]
    if all(n.startswith(DATALOADER_PREFIX) for n in found):
        return {}
    return {n: us(t) for n, t in sorted(found.items(), key=lambda item: -item[1])[:3]}


def _input_note(trace: Trace, win: View, evidence: dict[str, Any]) -> str:
    """The input-bound message's note on where the step prepares data, when it is not only in the DataLoader."""
    calls = input_calls(trace, win)
    if not calls:
        return ""
    evidence["input_by_call_us"] = calls
    return f" (most in {next(iter(calls))})"


def between_steps(trace: Trace, spans: list[tuple[int, int]]) -> int:
    """The part of merged ``spans`` that lies between the window's steps (outside every step's span)."""
    if not trace.steps:
        return 0
    first, last = min(s.start_ns for s in trace.steps), max(s.end_ns for s in trace.steps)
    return total(subtract(clip(spans, first, last), merge([(s.start_ns, s.end_ns) for s in trace.steps])))


def in_periods(trace: Trace, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The part of merged ``spans`` within the steps' periods (the first step's start to the last's: each step and
    what the loop did before the next began, as the window record's ``step_period_ms``) and those periods' length,
    ns; None with fewer than two steps (no period)."""
    if len(trace.steps) < 2:
        return None
    first, last = min(s.start_ns for s in trace.steps), max(s.start_ns for s in trace.steps)
    return (total(clip(spans, first, last)), last - first) if last > first else None


def input_of(input_ns: int, window_ns: int, period: tuple[int, int] | None) -> str:
    """What an input message says the input takes: its share of the step period (the fetch a step waits for lies
    in its period; a window of N steps holds only N - 1 fetches between them), and of the window beside it."""
    if period is None or period[1] <= 0:
        return f"{percent(input_ns, window_ns)} of the window"
    return f"{percent(*period)} of the step period, {percent(input_ns, window_ns)} of the window"


def _host_spans(trace: Trace, win: View) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]:
    """Merged spans of blocking runtime calls, of data loading, and of host activity: op dispatch (``cpu_op``) and
    runtime and driver calls. The Python frames a ``with_stack`` trace records (``python_function``) enclose them
    and span the whole step: they are not activity of their own. Only top-level activity spans are kept: a child
    lies inside its parent."""
    blocked, inp = _wait_spans(trace, win, *_wait_ids(trace))
    active_cats = {CPU_OP_CODE, *LAUNCH_CODES}
    ts, dur, parent, cat, host_in = trace.h_ts, trace.h_dur, trace.h_parent, trace.h_cat, win.host_in
    np = _columns.numpy(len(ts))
    active = _columns.top_level_spans(np, ts, dur, cat, parent, host_in, active_cats) if np is not None else None
    if active is None:  # (the same spans, see autoprof.trace._columns)
        active = [
            (t, t + d)
            for t, d, c, p, inside in zip(ts, dur, cat, parent, host_in)
            if inside and c in active_cats and (p < 0 or cat[p] not in active_cats)
        ]
    return blocked, inp, merge(win.clip(active))


def wait_spans(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """The window's merged spans of waiting as the regime reads them: ``input`` (data loading), ``sync`` (blocking
    runtime calls), ``communication`` (collectives in flight while the steps' threads run no op of their own)."""
    win = view(trace)
    blocked, inp, _active = _host_spans(trace, win)
    return {"input": inp, "sync": blocked, "communication": _collective_spans(trace, win)}


def _busy_in_window(trace: Trace, win: View) -> int:
    """The device's time on the window's own work: kernels, copies and memsets launched from its steps (work
    launched before the window or between its steps is not the window's: ``View.device_foreign``)."""
    return total(win.device_busy)


@dataclass
class DeviceReading:
    """Where a device window's time goes, in ns: the host's shares are of the window (``window_ns``), the device's
    of the window on the device (``device_window_ns``: less its time on work that is not the window's)."""

    window_ns: int
    device_window_ns: int
    busy_ns: int  # the window's device work, collectives included
    exposed_comm_ns: int  # collective kernels with no compute kernel beside them
    active_ns: int  # host: op dispatch, runtime calls and own work, less blocked, input and collective time
    blocked_ns: int
    input_ns: int
    idle_ns: int  # the device runs nothing of the window's (nor anything else)
    host_wait_ns: int  # idle time in which the device waits for the host's next launch
    between_ns: int = 0  # the part of input_ns between the steps (a trainer's prefetch)
    input_period: tuple[int, int] | None = None  # input_ns within the steps' periods, and their length (in_periods)
    input_hidden_ns: int = 0  # data loading while the device runs (not in input_ns: it stalls nothing)
    host_comm_ns: int = 0  # the steps' threads waiting in collective calls (gloo, a barrier), with no op of their own
    host_own_ns: int = 0  # host work that launches nothing (``_host_own_work``)
    host_own_ops: dict[str, float] = field(default_factory=dict)  # its outermost events with the most of it, µs
    #: The time the machine kept the steps' thread waiting for a CPU (a live window's ``step_cpu``), its part in the
    #: host's activity already taken out of ``active_ns`` and ``host_own_ns``; -1 where not recorded.
    descheduled_ns: int = -1

    @property
    def own_ns(self) -> int:
        """The device's own work: busy time less exposed communication (the device waits for its peers there)."""
        return max(self.busy_ns - self.exposed_comm_ns, 0)

    @property
    def queued_ahead(self) -> bool:
        """The host has queued the device's work ahead of it: most of the device's idle time passes with its next
        work already launched (waiting on another stream, an event, a peer), not waiting for the host."""
        return self.idle_ns > 0 and self.host_wait_ns < HOST_WAIT_SHARE * self.idle_ns


#: Exposed communication names the verdict when it holds at least this much of the window on the device, and more
#: than the device's own work and than its idle time (the largest part of the device's time).
COMM_SHARE_MIN = 0.40
#: The device waits for the host when at least this share of its idle time passes before its next work is launched;
#: below it the host has queued the work ahead and is not the limit.
HOST_WAIT_SHARE = 0.5


def _host_wait_ns(trace: Trace, win: View, lo: int, hi: int) -> int:
    """Idle time of the device in [lo, hi] spent waiting for the host: each gap between the window's device work
    (and work not of the window, which is no idle time) whose next work was launched only after the gap opened,
    and the gaps before the first and after the last work (nothing was queued)."""
    occupied = merge(win.device_busy + win.device_foreign)
    launch_at: dict[int, int] = {}  # start of own device work -> earliest launch of work starting then
    h_ts = trace.h_ts
    for t, c, inside, h in zip(trace.d_ts, trace.d_cat, win.device_in, trace.d_launch_host):
        if inside and c in DEVICE_WORK_CODES:
            when = h_ts[h] if h >= 0 else -1  # no recorded launch: queued by the driver, not waiting for the host
            launch_at[t] = min(launch_at.get(t, when), when)
    if not occupied:
        return hi - lo
    wait = max(occupied[0][0] - lo, 0) + max(hi - occupied[-1][1], 0)
    for (_, g0), (g1, _) in zip(occupied, occupied[1:]):
        if launch_at.get(g1, -1) >= g0:
            wait += g1 - g0
    return wait


def _device_reading(trace: Trace, win: View) -> DeviceReading:
    """The device reading's figures (the host's time in collectives apart, ``host_comm_ns``: on a device the
    collective's time is its kernels')."""
    lo, hi = win.start_ns, win.start_ns + win.window_ns
    blocked_iv, input_iv, active_iv = _host_spans(trace, win)
    waits = merge(blocked_iv + input_iv)
    # The host's own work is activity too, also where it runs in Python frames with no op under them (a video
    # decoded in Python): a frame that launches nothing is the host's work, not a frame around launches. Time in
    # collective calls is waiting for peers, not own work.
    coll_ids = _collective_ids(trace)
    flights = merge(win.clip([(trace.h_ts[i], trace.h_ts[i] + trace.h_dur[i]) for i in trace.host_named(coll_ids)]))
    own_iv, own_ops = _host_own_work(trace, win, merge(waits + flights))
    # The steps' threads waiting in collective calls (a gloo all-reduce, a barrier) wait for peers: no activity.
    coll_iv = subtract(subtract(_collective_spans(trace, win, coll_ids), input_iv), blocked_iv)
    active = total(subtract(merge(active_iv + own_iv), merge(waits + coll_iv)))
    # Data loading while the device runs is a prefetch behind the device's work: only the part with the device
    # idle stalls it (the device's time on work queued before the window is no idle time either).
    occupied = merge(win.device_busy + win.device_foreign)
    stalled_iv = subtract(input_iv, occupied)
    busy = _busy_in_window(trace, win)
    exposed = comm.exposure(trace).exposed_ns
    own = total(own_iv)
    waited = runqueue_share(trace)
    descheduled = None if waited is None else int(waited * win.window_ns)  # the steps' share of it, of the window
    if waited is not None:
        # The thread was as likely preempted while it worked as while it waited: its activity loses its part of it.
        active, own = int(active * (1 - waited)), int(own * (1 - waited))
    return DeviceReading(
        host_comm_ns=total(coll_iv),
        window_ns=win.window_ns,
        device_window_ns=win.device_window_ns,
        busy_ns=busy,
        exposed_comm_ns=exposed,
        active_ns=active,
        blocked_ns=total(blocked_iv),
        input_ns=total(stalled_iv),
        idle_ns=max(win.device_window_ns - busy, 0),
        host_wait_ns=_host_wait_ns(trace, win, lo, hi),
        between_ns=between_steps(trace, stalled_iv),
        input_period=in_periods(trace, stalled_iv),
        input_hidden_ns=total(input_iv) - total(stalled_iv),
        host_own_ns=own,
        host_own_ops=own_ops,
        descheduled_ns=-1 if descheduled is None else descheduled,
    )


def _device_verdict(trace: Trace, win: View, evidence: dict[str, Any], config: Config | None = None) -> Finding:
    reading = _device_reading(trace, win)
    window, busy, on_device = reading.window_ns, reading.busy_ns, reading.device_window_ns
    by_call = blocked_by_call(trace)
    evidence.update(
        window_us=us(window),
        device_window_us=us(on_device),
        device_outside_us=us(total(win.device_foreign)),
        device_busy_us=us(busy),
        device_busy_share=share(busy, on_device),
        host_active_us=us(reading.active_ns),
        host_active_share=share(reading.active_ns, window),
        blocked_us=us(reading.blocked_ns),
        blocked_share=share(reading.blocked_ns, window),
        blocked_by_call_us={k: us(n) for k, n in sorted(by_call.items(), key=lambda item: -item[1])},
        input_us=us(reading.input_ns),
        input_share=share(reading.input_ns, window),
        input_between_steps_us=us(reading.between_ns),
        input_period_share=share(*reading.input_period) if reading.input_period else None,
        input_hidden_us=us(reading.input_hidden_ns),
        device_idle_share=share(reading.idle_ns, on_device),
        idle_host_wait_share=share(reading.host_wait_ns, reading.idle_ns),
    )
    # The keys every reading carries (the CPU reading's names): communication is the collective kernels' exposed
    # time (the exposed_communication rule's), work the device's own busy time, overhead the host's active time;
    # the host's time in collective calls is reported apart.
    evidence.update(
        comm_us=us(reading.exposed_comm_ns),
        comm_share=share(reading.exposed_comm_ns, on_device),
        host_comm_us=us(reading.host_comm_ns),
        host_comm_share=share(reading.host_comm_ns, window),
        work_share=share(reading.own_ns, on_device),
        overhead_share=share(reading.active_ns, window),
    )
    evidence["reading"] = "device"
    if reading.descheduled_ns >= 0:  # a live window: the host's shares above are of its own time on the CPU
        evidence.update(descheduled_us=us(reading.descheduled_ns), descheduled_share=share(reading.descheduled_ns, window))
    own, active = reading.host_own_ns, reading.active_ns
    evidence.update(host_own_work_us=us(own), host_own_work_share=share(own, window), host_own_work_ops=reading.host_own_ops)
    verdict, msg = _device_judge(reading, by_call)
    advice = _ADVICE.get(verdict, "")
    if verdict == MIXED and _unrecorded(reading):
        advice = _UNRECORDED_ADVICE
    if verdict == INPUT_BOUND:
        msg += _input_note(trace, win, evidence)
    if verdict == OVERHEAD_BOUND and own >= HOST_WORK_LEADS * active:
        top = next(iter(reading.host_own_ops), "host code")
        msg = (
            f"overhead-bound: the host is busy with its own work, not launching: {percent(own, window)} of the window "
            f"in host code that launches no device work (most in {top}), launching takes {percent(max(active - own, 0), window)}; "
            f"the device is busy only {percent(busy, on_device)}"
        )
        advice = _HOST_WORK_ADVICE
    if verdict == DEVICE_BOUND:
        verdict, msg, advice = _device_work(trace, config, evidence, reading.own_ns, on_device)
    severity = "info" if verdict in (COMPUTE_BOUND, MEMORY_BOUND, MIXED) else "warning"
    return Finding(RULE, verdict, severity, msg, advice, evidence)


def _own_rows(trace: Trace, host_in: list[bool], floor: dict[int, int]) -> list[int]:
    """The rows of the host's own work (:func:`_host_own_work`), in row order."""
    cat, parent, ts, dur, tid = trace.h_cat, trace.h_parent, trace.h_ts, trace.h_dur, trace.h_tid
    n = trace.n_host
    launch_rows = list(compress(range(n), map(LAUNCH_CODES.__contains__, cat)))  # (one pass in C, not in Python)
    launches = [False] * n
    for i in launch_rows:
        p = parent[i]
        while p >= 0 and not launches[p]:
            launches[p] = True
            p = parent[p]
    threads = {s.tid for s in trace.steps}
    if not threads:  # no steps (a trace of annotations, or with_stack and no schedule): the threads that launch
        threads = {tid[i] for i in launch_rows}  # (an idle helper thread's long Python frame is no work of the host's)
    steps = {s.host_index for s in trace.steps}
    # Launches from other threads (autograd's device threads run a CUDA backward): an event of the step's thread
    # during which another thread launches is that thread's wait (``loss.backward()``), not work of its own.
    elsewhere = sorted(ts[i] for i in launch_rows if tid[i] not in threads) if threads else []
    return [
        i
        for i in compress(range(n), map(ge, dur, repeat(min(floor.values()))))  # the long events only (in C)
        if (c := cat[i]) in floor
        and dur[i] >= floor[c]
        and host_in[i]
        and not launches[i]
        and i not in steps
        and (not threads or tid[i] in threads)
        and bisect.bisect_left(elsewhere, ts[i]) == bisect.bisect_right(elsewhere, ts[i] + dur[i])
    ]


def _own_rows_numpy(np: Any, trace: Trace, host_in: list[bool], floor: dict[int, int]) -> list[int] | None:
    """:func:`_own_rows` over the columns' buffers (the same rows); None where an end could pass int64."""
    cats, ts, dur, tid = (_columns.view(np, c) for c in (trace.h_cat, trace.h_ts, trace.h_dur, trace.h_tid))
    launch_rows = np.flatnonzero(np.isin(cats, sorted(LAUNCH_CODES)))
    launches = _columns.ancestors_mask(np, trace.h_parent, launch_rows)
    threads = sorted({s.tid for s in trace.steps}) or np.unique(tid[launch_rows]).tolist()
    least = np.full(len(cats), -1, dtype=np.int64)  # each row's floor (-1: a category that is no own work)
    for code, ns in floor.items():
        least[cats == code] = ns
    rows = (least >= 0) & (dur >= least) & np.frombuffer(bytes(host_in), dtype=bool) & ~launches
    steps = [s.host_index for s in trace.steps if s.host_index >= 0]
    rows[steps] = False
    if threads:
        rows &= np.isin(tid, threads)
        elsewhere = np.sort(ts[launch_rows][~np.isin(tid[launch_rows], threads)])
        if len(elsewhere):
            start, span = ts[rows], dur[rows]
            if not _columns.ends_fit(start, span):
                return None
            picked = np.flatnonzero(rows)
            alone = np.searchsorted(elsewhere, start, "left") == np.searchsorted(elsewhere, start + span, "right")
            return picked[alone].tolist()  # type: ignore[no-any-return]
    return np.flatnonzero(rows).tolist()  # type: ignore[no-any-return]


def _host_own_work(trace: Trace, win: View, waits: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], dict[str, float]]:
    """The host's own work on the steps' threads: host events with no runtime or driver call under them (they
    launch nothing, nor does another thread while they run) that run long, CPU ops of at least ``HOST_WORK_OP_NS``
    and Python functions or user annotations of at least ``HOST_WORK_SPAN_NS`` (a ``decode_video`` frame, a
    ``preprocess`` annotation), less waits (``waits``, merged). Its merged spans, and the outermost such events'
    names with the most of it (µs, at most 3)."""
    parent, ts, dur, host_in = trace.h_parent, trace.h_ts, trace.h_dur, win.host_in
    n = trace.n_host
    floor = {CPU_OP_CODE: HOST_WORK_OP_NS, PYTHON_FUNCTION_CODE: HOST_WORK_SPAN_NS, USER_ANNOTATION_CODE: HOST_WORK_SPAN_NS}
    np = _columns.numpy(n)
    found = _own_rows_numpy(np, trace, host_in, floor) if np is not None else None
    own = found if found is not None else _own_rows(trace, host_in, floor)
    chosen = set(own)
    by_name: dict[str, int] = {}
    spans: list[tuple[int, int]] = []
    for i in own:
        p = parent[i]
        while p >= 0 and p not in chosen:
            p = parent[p]
        if p >= 0:
            continue  # inside another event of the host's own work: counted there
        part = subtract([(ts[i], ts[i] + dur[i])], waits)
        spans.extend(part)
        name = trace.host_name(i)
        by_name[name] = by_name.get(name, 0) + total(part)
    top = sorted(((n, t) for n, t in by_name.items() if t > 0), key=lambda item: -item[1])[:3]
    return merge(win.clip(spans)), {name: us(ns) for name, ns in top}


DEVICE_BOUND = "device"  # the judge's word for a device-bound window, before the roofline names its verdict


def _between_note(between: int, inp: int) -> str:
    """What an input-bound message adds when some of the wait lies between the steps (a trainer's prefetch)."""
    if between <= 0:
        return ""
    return f" ({percent(between, inp)} of it between the steps: the loop fetches each batch before its step begins)"


def _machine_took(r: DeviceReading) -> bool:
    """Whether the machine kept the steps' thread waiting for a CPU over ``1 - OWN_TIME_MIN`` of the window, the host
    not waiting in synchronizing calls (``SYNC_SHARE_MIN``) meanwhile."""
    return r.descheduled_ns > (1 - OWN_TIME_MIN) * r.window_ns and r.blocked_ns < SYNC_SHARE_MIN * r.window_ns


def _unrecorded(r: DeviceReading) -> bool:
    """Whether the window is mostly time the profiler did not record: the host works less than ``RECORDED_MIN`` of
    it and the device is busy less than that (its time goes where the profiler does not look), neither waits in
    synchronizing calls nor the machine's taking the thread explaining it."""
    return (
        r.active_ns < RECORDED_MIN * r.window_ns
        and r.busy_ns < RECORDED_MIN * r.device_window_ns
        and r.blocked_ns < SYNC_SHARE_MIN * r.window_ns
        and not _machine_took(r)
    )


def _device_judge(r: DeviceReading, by_call: dict[str, int]) -> tuple[str, str]:
    """The device reading's verdict and message: input first, then exposed communication leading the device's
    time, then a busy device (``DEVICE_BOUND``, named by the roofline next), host work above device work while
    the device waits for the host (unless the host waits in blocking calls for longer still), blocking calls; else
    mixed. The device's figures are shares of the window on
    the device, the host's of the window."""
    window, on_device, busy, own, active, comm_ns = r.window_ns, r.device_window_ns, r.busy_ns, r.own_ns, r.active_ns, r.exposed_comm_ns
    if r.input_ns >= INPUT_SHARE_MIN * window:
        between = _between_note(r.between_ns, r.input_ns)
        return INPUT_BOUND, f"input-bound: data loading takes {input_of(r.input_ns, window, r.input_period)}" + between
    if comm_ns >= COMM_SHARE_MIN * on_device and comm_ns > own and comm_ns > r.idle_ns:
        return COMMUNICATION_BOUND, (
            f"communication-bound: collective kernels run with no compute beside them {percent(comm_ns, on_device)} "
            f"of the window; the device's own work takes {percent(own, on_device)}, it idles {percent(r.idle_ns, on_device)}"
        )
    host_comm = r.host_comm_ns  # collectives the host waits in (gloo's on CPU tensors, barriers): no kernel shows them
    if host_comm >= COMM_SHARE_MIN * window and host_comm > active and host_comm > own:
        return COMMUNICATION_BOUND, (
            f"communication-bound: the host waits {percent(host_comm, window)} of the window in collective calls; the "
            f"device is busy {percent(busy, on_device)}, the host works {percent(active, window)}"
        )
    if own >= DEVICE_SATURATED * on_device or (own >= DEVICE_BUSY_COMPUTE * on_device and (own >= active or r.queued_ahead)):
        return DEVICE_BOUND, f"the device is busy {percent(own, on_device)} of the window, the host {percent(active, window)}"
    # The host's larger share names it: waiting in synchronizing calls longer than it works is sync-bound.
    synced = r.blocked_ns >= SYNC_SHARE_MIN * window
    if _machine_took(r):  # the machine took the host's side
        return MIXED, (
            f"mixed: the machine was busy: the steps' thread waited for a CPU {percent(r.descheduled_ns, window)} of the "
            f"window; the device is busy {percent(busy, on_device)}, the host works {percent(active, window)} of its own time"
        )
    if _unrecorded(r):  # neither side's recorded work fills the window
        return MIXED, (
            f"mixed: the host works {percent(active, window)} of the window and the device is busy {percent(busy, on_device)}: "
            f"{percent(window - max(active, r.blocked_ns + r.input_ns), window)} of the window is time the profiler did not "
            "record (Python that runs no op, sleeps, waits for other processes or locks)"
        )
    if active > busy and not r.queued_ahead and not (synced and r.blocked_ns >= active):
        return OVERHEAD_BOUND, (
            f"overhead-bound: the host works {percent(active, window)} of the window preparing and "
            f"launching work, the device is busy only {percent(busy, on_device)}"
        )
    if synced:
        top = max(by_call.items(), key=lambda item: item[1])[0] if by_call else "synchronizing calls"
        return SYNC_BOUND, (
            f"sync-bound: the host waits {percent(r.blocked_ns, window)} of the window in synchronizing calls "
            f"(most in {top}) while the device is busy only {percent(busy, on_device)}"
        )
    if active > busy:  # the host works more than the device, yet the device's work was queued ahead of it
        return MIXED, (
            f"mixed: host active {percent(active, window)}, device busy {percent(busy, on_device)}, but the device's "
            f"idle time passes with its next work already queued (waiting for the host {percent(r.host_wait_ns, r.idle_ns)} of it)"
        )
    return MIXED, f"mixed: device busy {percent(busy, on_device)}, host active {percent(active, window)}"


def work_verdict(compute_ns: float, memory_ns: float, uncosted_ns: float) -> tuple[str, str]:
    """The verdict of work that bounds the window, shared by the device and the CPU readings: the roofline's
    compute-bound or memory-bound time when it leads the other two shares by ``MARGIN``; ``mixed`` when none
    does, or when time the roofline cannot cost leads (that is never called compute). Also the bound it names:
    "compute", "memory", "uncosted" or "mixed"."""
    bound = roofline.bound_of(compute_ns, memory_ns, uncosted_ns)  # one rule: the roofline finding names the same
    if bound in ("mixed", "unknown"):
        return MIXED, "uncosted" if bound == "unknown" else "mixed"
    return (COMPUTE_BOUND if bound == "compute" else MEMORY_BOUND), bound


def _device_work(trace: Trace, config: Config | None, evidence: dict[str, Any], busy: int, window_ns: int) -> tuple[str, str, str]:
    """A device-bound window: named by where the device's time goes by the roofline (:func:`work_verdict`)."""
    roof = roofline.analyze(trace, config)
    head = f"the device is busy {percent(busy, window_ns)} of the window"
    if roof is None:
        return _device_families(trace, evidence, busy, window_ns, head)
    evidence["basis"] = families.ROOFLINE
    if roof.total_ns * 2 < busy:  # busy mostly in copies and memsets: the kernels' split is not where its time goes
        return _copies_bound(evidence, head, busy, roof.total_ns)
    compute, memory, uncosted = roof.compute_ns, roof.memory_ns, roof.unknown_ns
    verdict, bound = work_verdict(compute, memory, uncosted)
    _split_evidence(evidence, bound, (compute, memory, uncosted), roof.total_ns, busy, window_ns)
    evidence.update(roofline.by_name_evidence(roof))  # how much of compute and memory the kernels' names gave
    split = roofline.split_text(compute, memory, uncosted, roof.total_ns) + roofline.by_name_text(roof)
    if verdict == COMPUTE_BOUND:
        return verdict, f"compute-bound: {head}; FLOP-bound by the roofline ({split})", _ADVICE[COMPUTE_BOUND]
    if verdict == MEMORY_BOUND:
        return verdict, f"memory-bound: {head}; bandwidth-bound by the roofline ({split})", _DEVICE_MEMORY_ADVICE
    if bound == "uncosted":
        return (
            verdict,
            f"mixed: device-bound ({head}), mostly in work the roofline cannot cost ({split})",
            "The device is the bottleneck: look at the kernels the roofline could not cost (custom or compiled "
            "kernels, ops without recorded shapes).",
        )
    return verdict, f"mixed: device-bound ({head}), with no bound leading ({split})", _ADVICE[MIXED]


def _copies_bound(evidence: dict[str, Any], head: str, busy: int, kernel_ns: int) -> tuple[str, str, str]:
    """A device busy mostly in copies and memsets: the kernels' split is not where its time goes."""
    evidence.update(roofline_bound="unknown", roofline_shares=None, kernel_busy_share=share(kernel_ns, busy))
    return (
        MIXED,
        f"mixed: device-bound ({head}) mostly in copies and memsets ({percent(busy - min(kernel_ns, busy), busy)} "
        "of its busy time), not kernels: data transfers are the limit",
        "Move less data between host and device: keep tensors on the device, copy from pinned memory with "
        "non_blocking=True, overlap copies with compute.",
    )


def _split_evidence(evidence: dict[str, Any], bound: str, split: tuple[float, float, float], whole: int, busy: int, window_ns: int) -> None:
    """The device work's split (compute, memory, uncosted ns of ``whole``), as shares of it and of the window."""
    compute, memory, uncosted = split
    shares = {"compute": share(compute, whole), "memory": share(memory, whole), "uncosted": share(uncosted, whole)}
    evidence.update(
        roofline_bound=bound if bound in ("compute", "memory") else "unknown" if bound == "uncosted" else "mixed",
        roofline_shares=shares,
        compute_bound_share=shares["compute"],
        memory_bound_share=shares["memory"],
        uncosted_share=shares["uncosted"],
        compute_work_share=share(compute * busy / whole, window_ns) if whole else 0.0,
        memory_work_share=share(memory * busy / whole, window_ns) if whole else 0.0,
        unknown_work_share=share(uncosted * busy / whole, window_ns) if whole else 0.0,
    )


def _device_families(trace: Trace, evidence: dict[str, Any], busy: int, window_ns: int, head: str) -> tuple[str, str, str]:
    """A device-bound window on a device with no known peak: named by where the kernels' time goes by their families
    (``families``), with the same margin as the roofline's split."""
    split = families.device_split(trace, view(trace))
    evidence["basis"] = families.KERNEL_FAMILIES
    device = _device_name(trace)
    why = f"no peak known for {device}" if device else "no device named in the trace"
    if split.total_ns * 2 < busy:  # busy mostly in copies and memsets
        return _copies_bound(evidence, head, busy, split.total_ns)
    compute, memory, unknown, whole = split.compute_ns, split.memory_ns, split.unknown_ns, split.total_ns
    verdict, bound = work_verdict(compute, memory, unknown)
    _split_evidence(evidence, bound, (compute, memory, unknown), whole, busy, window_ns)
    evidence["families"] = {name: share(t, whole) for name, t in split.top()}
    split_text = (
        f"{percent(compute, whole)} of its kernel time in GEMM, convolution and attention kernels, "
        f"{percent(memory, whole)} in bandwidth-bound kernels, {percent(unknown, whole)} of no known family; "
        f"{why}, so no roofline"
    )
    if verdict == COMPUTE_BOUND:
        return verdict, f"compute-bound: {head}; FLOP work by kernel family ({split_text})", _ADVICE[COMPUTE_BOUND]
    if verdict == MEMORY_BOUND:
        return verdict, f"memory-bound: {head}; bandwidth work by kernel family ({split_text})", _DEVICE_MEMORY_ADVICE
    if bound == "uncosted":
        return (
            verdict,
            f"mixed: device-bound ({head}), mostly in kernels of no known family ({split_text})",
            "The device is the bottleneck: see the kernels that take its time; name the device's peaks with "
            "autoprof.configure(peaks=...) to have them costed.",
        )
    return verdict, f"mixed: device-bound ({head}), no kernel family leading ({split_text})", _ADVICE[MIXED]


def _device_name(trace: Trace) -> str:
    for props in trace.device_properties:
        name = str(props.get("name") or "").strip()
        if name:
            return name
    return ""


_DEVICE_MEMORY_ADVICE = (
    "Bandwidth, not FLOPs, is the limit: fuse elementwise chains (torch.compile), use bf16/fp16, avoid materialising intermediates."
)


# -- the host (CPU) reading ---------------------------------------------------------------------------------

# ``CALL_FLOOR_NS`` (a call's fixed cost) and ``WORK_CREDIT`` (the most an op is credited as work, in multiples of
# its roofline time) come from ``work``: the compile and fusion rules read the same.
#: The verdict names the largest share when it holds at least this much of the step ...
LEADS = 0.40
#: ... and at least this many times the next share; otherwise ``mixed`` (the roofline's margin, one rule for both).
MARGIN = roofline.MARGIN
#: Ops that move no data: views and metadata (a new shape, stride or offset over the same storage), allocation
#: without a fill, and reading one scalar out. Their time is the call's own (dispatch, the profiler's bookkeeping),
#: never op work, however long a call takes on a loaded machine. (A ``reshape`` that must copy runs a ``clone``
#: inside it, which the roofline costs.)
METADATA_OPS = frozenset(
    "aten::" + name
    for name in (
        "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "as_strided", "slice", "select", "narrow",
        "expand", "expand_as", "t", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "unflatten", "alias",
        "detach", "detach_", "lift_fresh", "split", "split_with_sizes", "chunk", "unbind", "diagonal", "item",
        "_local_scalar_dense", "empty", "empty_like", "empty_strided", "resize_", "set_", "result_type",
    )
) | {"detach"}  # fmt: skip
#: Names of collective calls on the host (gloo, NCCL/RCCL, c10d): time in them is waiting for peers or moving data.
COLLECTIVE_PREFIXES = COLLECTIVE_CALL_PREFIXES


@dataclass
class HostReading:
    """Where a CPU window's step time goes, in ns: waits first, then op work the roofline explains, then the
    rest (overhead)."""

    window_ns: int
    input_ns: int = 0
    input_between_ns: int = 0  # the part of input_ns between the steps (added to window_ns: the loop's period)
    input_period: tuple[int, int] | None = None  # input_ns within the steps' periods, and their length (in_periods)
    blocked_ns: int = 0
    comm_ns: int = 0
    compute_ns: int = 0  # op calls whose work is FLOP-bound at the calibrated peak
    memory_ns: int = 0  # op calls whose work is bandwidth-bound
    unknown_ns: int = 0  # self time beyond the call floor of ops the roofline cannot cost
    op_calls: int = 0
    small_calls: int = 0  # op calls whose work is below the call floor (costed below it, uncosted within it, metadata)
    flops: float = 0.0
    #: Costed op calls' time beyond ``WORK_CREDIT`` times their roofline time, and small calls' beyond ``HELD_CALL_NS``
    #: each (in the overhead: something other than their FLOPs or bytes held them), and the op with the most of it.
    slow_ns: int = 0
    slow_op: str = ""
    ideal_ns: float = 0.0  # time the costed work would take at the peaks
    work_time_ns: int = 0  # measured time of the same work
    comm_step_median_ns: int = 0  # the median step's collective wait
    family_ns: int = 0  # op work read by op family (no peak, or no shapes), in compute_ns or memory_ns
    #: Time the machine kept the steps' thread off the CPU (a live window's preempted steps: ``_descheduled``), taken
    #: out of op work and overhead alike: neither the ops' nor the framework's.
    descheduled_ns: int = 0
    cpu_share: float | None = None  # the steps' thread CPU time over their wall time (a live window)
    preempted_steps: int = 0  # recorded steps that waited for a CPU 1% of their time or more
    basis: str = families.OP_FAMILIES  # how op work was split: "roofline" where a peak was known

    @property
    def work_ns(self) -> int:
        return self.compute_ns + self.memory_ns + self.unknown_ns

    @property
    def overhead_ns(self) -> int:
        return max(self.window_ns - self.input_ns - self.blocked_ns - self.comm_ns - self.work_ns - self.descheduled_ns, 0)

    def shares(self) -> dict[str, float]:
        w = self.window_ns
        shares = {
            "input": self.input_ns / w,
            "sync": self.blocked_ns / w,
            "communication": self.comm_ns / w,
            "overhead": self.overhead_ns / w,
            "work": self.work_ns / w,
        }
        if self.descheduled_ns:
            shares["descheduled"] = self.descheduled_ns / w
        return shares

    def own_shares(self) -> dict[str, float]:
        """The shares of the step's own time: the window less the time the machine kept its thread waiting for a
        CPU (``descheduled_ns``), which is the machine's, not the program's (the shares of the window otherwise)."""
        shares = self.shares()
        d = shares.pop("descheduled", 0.0)
        own = 1 - d
        return {k: v / own for k, v in shares.items()} if own > 0 else shares

    @property
    def held_ns(self) -> int:
        """The overhead that is op calls held past their work (``slow_ns``, less the machine's share of it as the
        rest of the step loses it): not the framework's per-call cost."""
        return min(int(self.slow_ns * (1 - self.busy_machine)), self.overhead_ns)

    @property
    def busy_machine(self) -> float:
        """The share of the window the machine kept the steps' thread waiting for a CPU."""
        return self.descheduled_ns / self.window_ns if self.window_ns else 0.0


def _step_window_ns(trace: Trace, win: View) -> int:
    """The steps' time: the decorated target's own annotation inside each step where there is one (the user's
    code, without the step marker's bookkeeping), else the step spans, else the host window. In a live window that
    timed each call, no step is longer than its call (:func:`host_step_ns`: a stall in autoprof's own bookkeeping
    after the annotations are entered is not the program's overhead)."""
    if not trace.steps:
        return int(win.host_window_ns)
    own = host_step_ns(trace)
    target_id = trace.name_id(trace.target) if trace.target else -1
    step_idx = {s.host_index for s in trace.steps}
    spans = {trace.h_parent[i]: trace.h_dur[i] for i in trace.host_named([target_id]) if trace.h_parent[i] in step_idx}
    if len(spans) != len(trace.steps):
        return sum(own)
    return sum(min(spans[s.host_index], step) for s, step in zip(trace.steps, own))


def _collective_ids(trace: Trace) -> set[int]:
    return {nid for nid, n in enumerate(trace.names) if n.startswith(COLLECTIVE_PREFIXES)}


def _collective_spans(trace: Trace, win: View, ids: set[int] | None = None) -> list[tuple[int, int]]:
    """When the step waits in collectives: a collective is in flight (on any thread: gloo and NCCL run them on
    their own threads, the step's thread then blocks with no op of its own) and the steps' threads are not inside
    an op. A collective that overlaps the step's own compute (DDP's all-reduce during backward) is no wait."""
    if ids is None:
        ids = _collective_ids(trace)
    ts, dur, host_in = trace.h_ts, trace.h_dur, win.host_in
    flight = merge(win.clip([(ts[i], ts[i] + dur[i]) for i in trace.host_named(ids) if host_in[i]]))
    if not flight:
        return []
    step_threads = {s.tid for s in trace.steps}
    if not step_threads:
        return flight
    cat, tid, parent, names = trace.h_cat, trace.h_tid, trace.h_parent, trace.h_name
    busy: list[tuple[int, int]] = []
    np = _columns.numpy(len(ts))
    for t in step_threads:  # host events are sorted by thread: each step thread's events are one run
        lo, hi = bisect.bisect_left(tid, t), bisect.bisect_right(tid, t)
        found = _columns.top_level_spans(np, ts, dur, cat, parent, host_in, {CPU_OP_CODE}, (lo, hi), names, ids) if np is not None else None
        if found is not None:  # the same spans (see autoprof.trace._columns)
            busy.extend(found)
            continue
        busy.extend(
            (ts[i], ts[i] + dur[i])
            for i in range(lo, hi)
            if cat[i] == CPU_OP_CODE and host_in[i] and names[i] not in ids and (parent[i] < 0 or cat[parent[i]] != CPU_OP_CODE)
        )
    return subtract(flight, merge(busy))


def _host_waits(trace: Trace, win: View, reading: HostReading) -> set[int]:
    """Time waiting for input, in blocking calls and in collectives (each counted once, in that order); returns
    the name ids whose events are waits (their nested ops are not op work)."""
    loading, blocking = _wait_ids(trace)
    comm = _collective_ids(trace)
    blocked, inp = _wait_spans(trace, win, loading, blocking)
    blocked = subtract(blocked, inp)
    coll = subtract(subtract(_collective_spans(trace, win, comm), inp), blocked)
    reading.input_ns, reading.blocked_ns, reading.comm_ns = total(inp), total(blocked), total(coll)
    reading.input_between_ns = between_steps(trace, inp)  # outside the steps' time: the window grows by it
    reading.input_period = in_periods(trace, inp)
    reading.window_ns += reading.input_between_ns
    if trace.steps and coll:  # per step, for a comparison across ranks that one preempted step cannot sway
        per_step = [sum(max(min(e, s.end_ns) - max(b, s.start_ns), 0) for b, e in coll) for s in trace.steps]
        reading.comm_step_median_ns = int(statistics.median(per_step))
    return loading | blocking | comm


def _op_work(trace: Trace, win: View, reading: HostReading, waits: set[int], config: Config | None) -> None:
    """Op work the roofline explains: an outermost costed op call counts with its whole time when its work at
    the calibrated peak would take at least a call's fixed cost, as compute or memory by its intensity; below
    that it is overhead. Ops bandwidth-bound by their kind whose bytes the shapes do not give (``aten::index``,
    ``cat``, the optimizers' ``_foreach_*``: the roofline's ``by_kind``) count their time beyond the call floor as
    bandwidth-bound work. Ops the roofline cannot cost count their self time beyond the call floor; metadata ops
    (:data:`METADATA_OPS`) count none. Every op call whose work is below the call floor is a small call, costed or
    not."""
    roof = roofline.analyze(trace, config)
    costed: set[int] = set()
    opaque: frozenset[int] = frozenset()  # convolutions the roofline cannot cost: their time is uncosted work
    if roof is None:  # no peak (a trace from another machine): the outermost ops of a family, by their kind
        costed = {nid for nid, n in enumerate(trace.names) if op_family(n) is not None}
        _family_work(trace, reading, families.host_calls(trace, win, waits))
    else:
        reading.basis = families.ROOFLINE
        # calls the roofline could not cost (recorded without shapes) whose kind is FLOP work are that, by family
        flop_calls = [i for i in roof.uncosted if trace.h_cat[i] == CPU_OP_CODE and op_family(trace.host_name(i)) == COMPUTE]
        _family_work(trace, reading, [(i, COMPUTE) for i in flop_calls])
        costed = {nid for nid, n in enumerate(trace.names) if is_roofline_op(n)}
        opaque = roof.opaque
        slowest: dict[str, int] = {}
        for st in roof.ops.values():
            reading.op_calls += st.calls
            work = credited_ns(st.time_ns, st.ideal_ns, st.calls)
            if work is not None:
                credited = int(work)
                beyond = st.time_ns - st.calls * CALL_FLOOR_NS - credited  # the fixed cost is overhead, never held
                if beyond > 0:
                    reading.slow_ns += beyond
                    slowest[st.name] = slowest.get(st.name, 0) + beyond
                if st.bound == "compute":
                    reading.compute_ns += credited
                else:
                    reading.memory_ns += credited
                reading.flops += st.flops
                reading.ideal_ns += min(st.ideal_ns, st.time_ns)
                reading.work_time_ns += st.time_ns
            else:
                reading.small_calls += st.calls
                beyond = st.time_ns - st.calls * HELD_CALL_NS  # a small call far past a call's fixed cost is held
                if beyond > 0:
                    reading.slow_ns += beyond
                    slowest[st.name] = slowest.get(st.name, 0) + beyond
        reading.slow_op = max(slowest, key=slowest.__getitem__, default="")
        for calls, spent in roof.by_kind.values():  # per name: [calls, time]
            reading.op_calls += calls
            if spent > calls * CALL_FLOOR_NS:
                reading.memory_ns += spent - calls * CALL_FLOOR_NS
            else:
                reading.small_calls += calls
    wrappers = {nid for nid, n in enumerate(trace.names) if n.startswith(COMPILE_WRAPPER_PREFIXES)}
    skip = costed | waits | wrappers
    above = costed | waits
    metadata = {trace.name_id(n) for n in METADATA_OPS} - {-1}
    under = ancestor_flags(trace, above, opaque)
    for i, (c, inside, nid, self_ns, nested) in enumerate(zip(trace.h_cat, win.host_in, trace.h_name, trace.h_self, under)):
        if c != CPU_OP_CODE or not inside or (nid in skip and i not in opaque) or nested:
            continue
        reading.op_calls += 1
        if self_ns <= CALL_FLOOR_NS or nid in metadata:
            reading.small_calls += 1
        else:
            reading.unknown_ns += self_ns - CALL_FLOOR_NS
    # Work measured in ops can exceed the step time where ops overlap (threads): keep the split within it.
    room = max(reading.window_ns - reading.input_ns - reading.blocked_ns - reading.comm_ns, 0)
    if reading.work_ns > room and reading.work_ns:
        scale = room / reading.work_ns
        reading.compute_ns, reading.memory_ns, reading.unknown_ns = (
            int(reading.compute_ns * scale),
            int(reading.memory_ns * scale),
            int(reading.unknown_ns * scale),
        )


def _family_work(trace: Trace, reading: HostReading, calls: list[tuple[int, str]]) -> None:
    """Op calls read by their family (``families``): each one's time beyond the call floor is FLOP or bandwidth
    work by its kind; a call within the floor is a small call."""
    dur = trace.h_dur
    for i, bound in calls:
        reading.op_calls += 1
        t = dur[i] - CALL_FLOOR_NS
        if t <= 0:
            reading.small_calls += 1
            continue
        reading.family_ns += t
        if bound == COMPUTE:
            reading.compute_ns += t
        else:
            reading.memory_ns += t


def _step_cpu(trace: Trace) -> tuple[list[int], list[int], list[int]] | None:
    """A live window's per-step wall time, thread CPU time and run-queue wait (:func:`step_cpu_of` of its metadata's
    ``step_cpu``), or None where not recorded or malformed."""
    got = step_readings(trace)
    return None if got is None else (got["wall_ns"], got["cpu_ns"], got["runqueue_ns"])


def _descheduled(trace: Trace, reading: HostReading) -> None:
    """A live window's descheduled time (its metadata's ``step_cpu``: each recorded step's wall time, thread CPU
    time and run-queue wait, the time the thread was runnable and waited for a CPU other work held), taken out of op
    work and overhead in proportion (the thread was as likely preempted in an op as between ops). Nothing where the
    window did not record it (an offline trace, a platform that does not give the run-queue wait)."""
    got = _step_cpu(trace)
    if got is None:
        return
    walls, cpus, waits = got
    if sum(walls) > 0:
        reading.cpu_share = round(min(sum(cpus) / sum(walls), 1.0), 4)
    if any(w < 0 for w in waits):
        return  # the run-queue wait is not known: off-CPU time cannot be told apart from the program's own waits
    reading.preempted_steps = sum(1 for w, wall in zip(waits, walls) if w > 0.01 * wall)
    busy = reading.work_ns + max(reading.window_ns - reading.input_ns - reading.blocked_ns - reading.comm_ns - reading.work_ns, 0)
    d = min(sum(min(w, wall) for w, wall in zip(waits, walls)), busy)
    if d <= 0 or busy <= 0:
        return
    keep = 1 - d / busy  # op work and overhead each lose their part of it
    reading.compute_ns, reading.memory_ns, reading.unknown_ns = (
        int(reading.compute_ns * keep),
        int(reading.memory_ns * keep),
        int(reading.unknown_ns * keep),
    )
    reading.descheduled_ns = d


#: A small op call (its work below a call's fixed cost) that takes longer than this is held by something other than
#: its work (threads contending for the cores, allocation): its time past it is no per-call framework cost.
HELD_CALL_NS = WORK_CREDIT * CALL_FLOOR_NS
#: Overhead that is at least this much op calls held past their work is no framework overhead: the window is mixed
#: (a 64×64 matmul taking 6 ms a call while torch's intra-op threads fight other work read "overhead-bound: batch
#: work into fewer ops or try torch.compile").
HELD_LEADS = 0.5

#: A CPU window is judged on the step's own time (less what the machine kept its thread waiting for a CPU) when that
#: is at least this share of the step; below it, the machine took the step and the verdict is ``mixed``.
OWN_TIME_MIN = 0.25


def _held(reading: HostReading) -> bool:
    """Whether overhead leads the step's own time and is mostly op calls held past their work (``HELD_LEADS``)."""
    sh = reading.own_shares()
    lead = max(sh, key=sh.__getitem__) if sh else ""
    return lead == "overhead" and reading.overhead_ns > 0 and reading.held_ns >= HELD_LEADS * reading.overhead_ns


def _nothing_recorded(reading: HostReading) -> bool:
    """Whether the steps ran no op call and waited in nothing the profiler records (Python alone, sleeps)."""
    return not reading.op_calls and not (reading.input_ns or reading.blocked_ns or reading.comm_ns)


def _judge(reading: HostReading) -> tuple[str, str | None]:
    """The largest share, when it leads clearly; op work is named by :func:`work_verdict` (the bound it names is
    returned too; None when op work does not lead)."""
    if reading.busy_machine > 1 - OWN_TIME_MIN:  # the machine, not the program, took the step: never overhead-bound
        return MIXED, None
    if _nothing_recorded(reading):  # no op and no wait: no framework whose overhead it could be
        return MIXED, None
    ranked = sorted(reading.own_shares().items(), key=lambda item: -item[1])  # of the step's own time
    (lead, top), (_, second) = ranked[0], ranked[1]
    if top < LEADS or top < MARGIN * second:
        return MIXED, None
    if _held(reading):  # op calls held far past their work: neither the framework's cost nor the ops' math
        return MIXED, None
    if lead != "work":
        return {"input": INPUT_BOUND, "sync": SYNC_BOUND, "communication": COMMUNICATION_BOUND, "overhead": OVERHEAD_BOUND}[lead], None
    return work_verdict(reading.compute_ns, reading.memory_ns, reading.unknown_ns)


def _host_reading(trace: Trace, win: View) -> tuple[HostReading, set[int]]:
    """The host's window (the steps', else the host window) with its waits read: input, blocking calls and
    collectives; and the name ids whose events are waits."""
    reading = HostReading(_step_window_ns(trace, win))
    if reading.window_ns <= 0:
        reading.window_ns = int(win.host_window_ns)
    return reading, _host_waits(trace, win, reading)


def _cpu_verdict(trace: Trace, win: View, evidence: dict[str, Any], config: Config | None = None) -> Finding:
    reading, waits = _host_reading(trace, win)
    _op_work(trace, win, reading, waits, config)
    _descheduled(trace, reading)
    verdict, bound = _judge(reading)
    evidence.update(_cpu_evidence(trace, win, reading))
    severity = "warning" if verdict in (OVERHEAD_BOUND, INPUT_BOUND, SYNC_BOUND, COMMUNICATION_BOUND) else "info"
    work = reading.work_ns
    if work:
        evidence["roofline_shares"] = {
            "compute": share(reading.compute_ns, work),
            "memory": share(reading.memory_ns, work),
            "uncosted": share(reading.unknown_ns, work),
        }
    if bound is not None:  # op work leads the step
        evidence["roofline_bound"] = "unknown" if bound == "uncosted" else bound
    msg = _cpu_message(verdict, reading, bound)
    if verdict == INPUT_BOUND:
        note = _input_note(trace, win, evidence)
        if note:  # data prepared in the step, not only waited for from the DataLoader
            msg = msg.replace("waiting for data (enumerate(DataLoader))", "preparing data") + note
    advice = _CPU_ADVICE[verdict]
    if verdict == MIXED and _nothing_recorded(reading):
        advice = _UNRECORDED_ADVICE
    elif verdict == MIXED and _held(reading):
        advice = _HELD_ADVICE
    return Finding(RULE, verdict, severity, msg, advice, evidence)


def _cpu_evidence(trace: Trace, win: View, reading: HostReading) -> dict[str, Any]:
    """The CPU reading's figures: each share of the step, the op calls, and the calibrated peak it used."""
    w = reading.window_ns
    ops = op_self_ns(trace, win)
    evidence: dict[str, Any] = dict(
        device="cpu",
        reading="cpu",
        method="roofline" if reading.op_calls and (reading.compute_ns or reading.memory_ns or reading.small_calls) else "op_self",
        basis=reading.basis,
        family_work_share=share(reading.family_ns, w),
        window_us=us(w),
        descheduled_us=us(reading.descheduled_ns),
        descheduled_share=share(reading.descheduled_ns, w),
        input_us=us(reading.input_ns),
        input_share=share(reading.input_ns, w),
        input_between_steps_us=us(reading.input_between_ns),
        input_period_share=share(*reading.input_period) if reading.input_period else None,
        blocked_us=us(reading.blocked_ns),
        blocked_share=share(reading.blocked_ns, w),
        comm_us=us(reading.comm_ns),
        comm_share=share(reading.comm_ns, w),
        comm_step_median_us=us(reading.comm_step_median_ns),
        work_us=us(reading.work_ns),
        work_share=share(reading.work_ns, w),
        compute_work_share=share(reading.compute_ns, w),
        memory_work_share=share(reading.memory_ns, w),
        unknown_work_share=share(reading.unknown_ns, w),
        overhead_us=us(reading.overhead_ns),
        overhead_share=share(reading.overhead_ns, w),
        op_self_us=us(ops),
        op_self_share=share(ops, w),
        op_call_count=reading.op_calls,
        small_op_call_count=reading.small_calls,
        call_floor_us=us(CALL_FLOOR_NS),
    )
    peak = trace.metadata.get("cpu_peak_flops")
    if isinstance(peak, (int, float)) and peak > 0:
        evidence["peak_flops_per_s"] = round(float(peak), 1)
        spread = trace.metadata.get("cpu_peak_spread_ratio")
        if isinstance(spread, (int, float)):
            evidence["peak_spread_ratio"] = round(float(spread), 4)
    if reading.work_time_ns:
        evidence["work_roofline_ratio"] = round(reading.ideal_ns / reading.work_time_ns, 4)  # how close the work runs to its roofline
        if reading.flops:
            evidence["achieved_flops_per_s"] = round(reading.flops / (reading.work_time_ns / 1e9), 1)
    if reading.cpu_share is not None:  # a live window: how much of its steps the thread ran
        evidence["cpu_share"] = reading.cpu_share
        evidence["preempted_steps"] = reading.preempted_steps
    return evidence


_NO_CALIBRATION = "; the trace carries no CPU peak calibration, so no roofline"


def _cpu_message(verdict: str, reading: HostReading, bound: str | None = None) -> str:
    busy = reading.busy_machine
    msg = _cpu_text(verdict, reading, bound)
    if busy >= 0.05 and busy <= 1 - OWN_TIME_MIN:  # judged on the step's own time: say so
        msg += f" (of the step's own time: the machine kept its thread waiting for a CPU {busy:.0%} of the step)"
    return msg


def _overhead_text(reading: HostReading, sh: dict[str, float]) -> str:
    """An overhead-bound CPU window's message: what its overhead is made of. Python and dispatch, and the op calls
    whose work is below a call's fixed cost where there are such; the time op calls are held past their work
    (:attr:`HostReading.held_ns`: held by something other than their FLOPs or bytes) where that is a part worth
    naming (a tenth of the overhead)."""
    own = reading.window_ns - reading.descheduled_ns
    overhead = reading.overhead_ns
    slow = reading.held_ns
    parts = []
    if slow >= 0.1 * overhead and reading.slow_op:
        parts.append(
            f"op calls held far past their work (below {1 / WORK_CREDIT:.0%} of their roofline, or small calls over "
            f"{HELD_CALL_NS // 1000} µs) take {percent(slow, own)} (most in {reading.slow_op}: held by something other than "
            "their FLOPs or bytes, such as threads contending for the cores or allocation)"
        )
    if reading.small_calls:
        rest = (
            f"Python, dispatch and {reading.small_calls:,} of the window's {reading.op_calls:,} op calls, whose work would "
            "take less than a call's fixed cost"
        )
        parts.insert(0, rest if not parts else f"{rest}, take {percent(overhead - slow, own)}")
    elif not parts or overhead - slow >= 0.1 * overhead:
        parts.append(f"Python and dispatch between the ops take {percent(overhead - slow, own)}")
    return (
        f"overhead-bound (CPU): {sh['overhead']:.0%} of the step is framework overhead: "
        + "; ".join(parts)
        + (f"; op work takes {sh['work']:.0%}")
    )


def _cpu_text(verdict: str, reading: HostReading, bound: str | None = None) -> str:
    w = reading.window_ns
    sh = reading.own_shares()
    by_family = reading.basis != families.ROOFLINE
    if verdict == MIXED and bound is not None:  # op work leads, no bound within it does
        work = reading.work_ns
        unknown = "of no known family" if by_family else "in ops the roofline cannot cost"
        split = (
            f"{percent(reading.compute_ns, work)} FLOP-bound, {percent(reading.memory_ns, work)} bandwidth-bound, "
            f"{percent(reading.unknown_ns, work)} {unknown}"
        ) + (_NO_CALIBRATION if by_family else "")
        what = f"mostly in ops {unknown}" if bound == "uncosted" else "with no bound leading"
        return f"mixed (CPU): op work takes {sh['work']:.0%} of the step, {what} ({split})"
    if verdict == INPUT_BOUND:
        took = input_of(reading.input_ns, w, reading.input_period)
        return f"input-bound (CPU): waiting for data (enumerate(DataLoader)) takes {took}" + _between_note(
            reading.input_between_ns, reading.input_ns
        )
    if verdict == SYNC_BOUND:
        return f"sync-bound (CPU): the step waits {sh['sync']:.0%} of its time in synchronizing calls"
    if verdict == COMMUNICATION_BOUND:
        return f"communication-bound (CPU): collectives take {sh['communication']:.0%} of the step (waiting for peers or moving data)"
    if verdict == OVERHEAD_BOUND:
        return _overhead_text(reading, sh)
    if verdict in (COMPUTE_BOUND, MEMORY_BOUND):
        kind = "FLOP-bound ops" if verdict == COMPUTE_BOUND else "bandwidth-bound ops"
        eff = f" running at {reading.ideal_ns / reading.work_time_ns:.0%} of their roofline" if reading.work_time_ns else ""
        if by_family:
            lead = reading.compute_ns if verdict == COMPUTE_BOUND else reading.memory_ns
            eff = f" by op family ({percent(lead, reading.work_ns)} of it{_NO_CALIBRATION})"
        return f"{verdict} (CPU): op work takes {sh['work']:.0%} of the step, mostly in {kind}{eff}"
    if reading.busy_machine > 1 - OWN_TIME_MIN:
        window = reading.shares()
        parts = ", ".join(f"{k} {v:.0%}" for k, v in sorted(window.items(), key=lambda item: -item[1]) if v >= 0.05)
        return (
            f"mixed (CPU): the machine was busy: the steps' thread waited for a CPU {reading.busy_machine:.0%} of the step "
            f"({parts}; {duration(w)} of steps): too little of the program's own time to judge"
        )
    if _held(reading):
        sh = reading.own_shares()
        return (
            f"mixed (CPU): op calls take far longer than their work needs: {percent(reading.held_ns, w - reading.descheduled_ns)} "
            f"of the step's own time (most in {reading.slow_op}), held by something other than their FLOPs or bytes "
            f"(threads contending for the cores, allocation): not framework overhead; op work takes {sh['work']:.0%}"
        )
    if _nothing_recorded(reading):
        return (
            f"mixed (CPU): the steps ran no torch op ({duration(w)} of steps): their time is Python, sleeps or waits "
            "the profiler does not break down"
        )
    parts = ", ".join(f"{k} {v:.0%}" for k, v in sorted(sh.items(), key=lambda item: -item[1]) if v >= 0.05)
    return f"mixed (CPU): no share of the step leads ({parts}; {duration(w)} of steps)"
