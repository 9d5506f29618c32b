"""Compile overhead: per compiled-region call, the wrapper's cost against the compute it wraps;
recompilations; compilation work inside the window.

Wrapper per call = ``TorchDynamo Cache Lookup`` before the region + the region's span − the span of
``## Call CompiledFxGraph <hash> ##`` inside it (everything that is not the compiled graph: Pregraph
bytecode, AOTDispatcher Runtime Wrapper Prologue/Epilogue, guards). Without that annotation the
kernel-launching ops inside the region stand for the graph. Compute = device time launched from the
region where there is a device; on a CPU, the op work of the graph's ops as the regime's CPU reading counts it (an
op's time, at most ``WORK_CREDIT`` times its roofline time, and nothing for an op whose work would take less than
a call's fixed cost): an extern op's own call cost, and the time it loses to threads contending on a loaded
machine, are no compute that the wrapper's cost buys back. Without a CPU peak, each op's time beyond the call floor.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.peaks import Peak, peak_for
from autoprof.measure.units import duration, us
from autoprof.measure.views import COMPILE_WRAPPER_PREFIXES, descendants, has_ancestor, launched_under, launches_by_host, view
from autoprof.measure.work import CALL_FLOOR_NS, WorkCache, credited_ns, is_roofline_op
from autoprof.measure.work import WORK_CREDIT as WORK_CREDIT
from autoprof.trace.model import CPU_OP_CODE, Trace

RULE_OVERHEAD = "compile_overhead"
RULE_RECOMPILE = "recompilation"
RULE_COMPILING = "compilation_in_window"
WRAPPER_EXCEEDS_COMPUTE = "wrapper-exceeds-compute"
RECOMPILED = "recompiled"
COMPILING = "compiling"
VERDICTS = {RULE_OVERHEAD: (WRAPPER_EXCEEDS_COMPUTE,), RULE_RECOMPILE: (RECOMPILED,), RULE_COMPILING: (COMPILING,)}

# "Torch-Compiled Region: 0/0" (frame/compile id); on torch 2.4 the region carries no ids (-1/-1 here: no
# recompilation can be read from it).
_REGION = re.compile(r"^Torch-Compiled Region(?:: ([0-9]{1,18})/([0-9]{1,18}))?$")
_LOOKUP = "TorchDynamo Cache Lookup"
_CALL = "## Call CompiledFxGraph"
_COMPILE_WORK = (
    "entire_frame_compile",
    "inductor_compile",
    "backend_compile",
    "compile_fx",
    "create_aot_dispatcher_function",
    "_compile.compile_inner",
    "OutputGraph.call_user_compiler",
)


@dataclass
class _Seen:
    """What the window holds: compiled-region calls (index, frame, compile id), cache lookups per thread, and the
    outermost compilation events."""

    regions: list[tuple[int, int, int]] = field(default_factory=list)
    lookups: dict[int, list[int]] = field(default_factory=dict)
    compile_work: list[int] = field(default_factory=list)


@dataclass
class _Cost:
    """Per compiled call, on average: the wrapper's time and the compute it wraps."""

    calls: int
    wrapper_ns: float
    compute_ns: float
    on_device: bool
    measured_ns: float = 0.0  # on a CPU: the graph's ops' own time per call, of which compute_ns is the work
    reading: str = "device"  # how compute was read: "device", "roofline" (CPU, costed) or "op_time" (CPU, no peak)


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    seen = _gather(trace)
    findings: list[Finding] = []
    if seen.regions:
        cost = _measure(trace, seen, config)
        frames = sorted({f"{f}/{c}" if f >= 0 else "?" for _, f, c in seen.regions})
        if cost.wrapper_ns > cost.compute_ns:
            findings.append(_overhead_finding(cost, frames))
        findings.extend(_recompiled(seen.regions))
    if seen.compile_work:
        findings.append(_compiling(trace, seen.compile_work))
    return findings


def _gather(trace: Trace) -> _Seen:
    """Find the window's compiled regions, cache lookups and compilation work (names matched once per distinct
    name, then interned ids compared per event)."""
    seen = _Seen()
    region_ids: dict[int, tuple[int, int]] = {}
    work_ids: set[int] = set()
    for nid, name in enumerate(trace.names):
        match = _REGION.match(name)
        if match:
            region_ids[nid] = (int(match.group(1)), int(match.group(2))) if match.group(1) else (-1, -1)
        elif name.startswith(_COMPILE_WORK):
            work_ids.add(nid)
    if not region_ids and not work_ids:
        return seen
    lookup_id = trace.name_id(_LOOKUP)
    host_in = view(trace).host_in
    for i in range(trace.n_host):
        nid = trace.h_name[i]
        if not host_in[i]:
            continue
        if nid in region_ids:
            frame, compile_id = region_ids[nid]
            seen.regions.append((i, frame, compile_id))
        elif nid == lookup_id:
            seen.lookups.setdefault(trace.h_tid[i], []).append(i)
        elif nid in work_ids and not has_ancestor(trace, i, work_ids):
            seen.compile_work.append(i)
    return seen


def _measure(trace: Trace, seen: _Seen, config: Config | None = None) -> _Cost:
    """Wrapper = the cache lookup just before the region + the region's span - the compiled graph's span;
    compute = the device time launched from the region, else the op work of the graph's ops (:class:`_HostWork`)."""
    by_device = launches_by_host(trace) if trace.n_device else {}
    lookup_ts = {tid: [trace.h_ts[j] for j in calls] for tid, calls in seen.lookups.items()}
    host = _HostWork(trace, config)
    wrapper_total = compute_total = measured_total = 0.0
    for region, _frame, _compile_id in seen.regions:
        graph, graph_host = _graph_of(trace, region)
        if by_device:
            compute_total += sum(trace.d_dur[d] for d in launched_under(trace, region, by_device))
        else:
            for j in graph:
                if _is_op(trace, j) and not _is_op(trace, trace.h_parent[j]):  # the graph's outermost ops
                    measured_total += trace.h_dur[j]
                    compute_total += host.work_ns(j)
        wrapper_total += _lookup_before(trace, region, seen.lookups, lookup_ts) + max(trace.h_dur[region] - graph_host, 0)
    calls = len(seen.regions)
    reading = "device" if by_device else "roofline" if host.peak is not None else "op_time"
    return _Cost(calls, wrapper_total / calls, compute_total / calls, bool(by_device), measured_total / calls, reading)


class _HostWork:
    """An op call's work on a CPU, as the regime's CPU reading counts it: its time, at most ``WORK_CREDIT`` times
    its roofline time, and none when that roofline time is below a call's fixed cost; an op the roofline cannot
    cost, its time beyond the call floor (also every op's without a calibrated peak)."""

    def __init__(self, trace: Trace, config: Config | None = None) -> None:
        self.trace = trace
        # configured peaks first; a device the trace names but never ran on gives none (a CPU reading)
        self.peak: Peak | None = peak_for(trace.device_properties if len(trace.d_dur) else [], trace.metadata, config)
        self.cache = WorkCache()

    def work_ns(self, i: int) -> float:
        trace = self.trace
        t = trace.h_dur[i]
        name = trace.host_name(i)
        if self.peak is not None and is_roofline_op(name):
            shapes = trace.shapes.get(i)
            dims = shapes[0] if shapes and type(shapes[0]) is list else []
            types = shapes[1] if shapes and type(shapes[1]) is list else []
            work, dtype, _ = self.cache.get(trace.h_name[i], name, dims, types)
            peak_flops = self.peak.flops_for(dtype or "fp32")
            if work is not None and peak_flops:
                ideal = max(work[0] / peak_flops, work[1] / self.peak.bytes_per_s) * 1e9
                credited = credited_ns(t, ideal)
                return 0.0 if credited is None else float(credited)
        return float(max(t - CALL_FLOOR_NS, 0))


def _lookup_before(trace: Trace, region: int, lookups: dict[int, list[int]], lookup_ts: dict[int, list[int]]) -> int:
    """The duration of the cache lookup that ended within 1 ms before ``region`` on its thread (0: none)."""
    tid = trace.h_tid[region]
    on_thread = lookups.get(tid, [])
    k = bisect.bisect_right(lookup_ts[tid], trace.h_ts[region]) if on_thread else 0
    if not k:
        return 0
    j = on_thread[k - 1]
    return trace.h_dur[j] if trace.h_ts[region] - (trace.h_ts[j] + trace.h_dur[j]) < 1_000_000 else 0


def _graph_of(trace: Trace, region: int) -> tuple[range, int]:
    """The events of the compiled graph a region runs, and its host span: the ``## Call CompiledFxGraph`` inside
    it, else the region's own kernel-launching ops (their summed spans)."""
    inside = descendants(trace, region)
    call = next((j for j in inside if trace.host_name(j).startswith(_CALL)), -1)
    if call >= 0:
        return descendants(trace, call), trace.h_dur[call]
    return inside, sum(trace.h_dur[j] for j in inside if trace.h_parent[j] == region and _is_op(trace, j))


def _is_op(trace: Trace, i: int) -> bool:
    """An op of the graph (not one of the compile wrappers)."""
    return i >= 0 and trace.h_cat[i] == CPU_OP_CODE and not trace.host_name(i).startswith(COMPILE_WRAPPER_PREFIXES)


def _overhead_finding(cost: _Cost, frames: list[str]) -> Finding:
    return Finding(
        RULE_OVERHEAD,
        WRAPPER_EXCEEDS_COMPUTE,
        "warning",
        f"compile overhead: each compiled call spends {duration(cost.wrapper_ns)} in the compiled-region "
        f"wrapper (cache lookup, guards, AOT wrappers) against {_compute_text(cost)}",
        "The ops are too small for torch.compile to pay off: compile a larger region (the whole "
        "step or model), batch more work per call, or leave this function eager.",
        {
            "compiled_calls_count": cost.calls,
            "wrapper_per_call_us": us(cost.wrapper_ns),
            "compute_per_call_us": us(cost.compute_ns),
            "wrapper_to_compute_ratio": round(cost.wrapper_ns / cost.compute_ns, 3) if cost.compute_ns else None,
            "compute_side": "device" if cost.on_device else "cpu",
            "compute_reading": cost.reading,
            **({} if cost.on_device else {"op_time_per_call_us": us(cost.measured_ns)}),
            "regions": frames[:10],
        },
        tuple(frames[:5]),
    )


def _compute_text(cost: _Cost) -> str:
    if cost.on_device:
        return f"{duration(cost.compute_ns)} of compute it wraps"
    if cost.compute_ns <= 0:
        return (
            "no op work worth a call: at the calibrated peak each op it wraps would take less than a call's fixed "
            f"cost (their {duration(cost.measured_ns)} is per-call cost, which eager mode pays too)"
        )
    return f"{duration(cost.compute_ns)} of op work it wraps (its ops take {duration(cost.measured_ns)})"


def _recompiled(regions: list[tuple[int, int, int]]) -> list[Finding]:
    """A frame that ran more than one compiled version (or a version after the first)."""
    versions: dict[int, set[int]] = {}
    for _, frame, compile_id in regions:
        if frame >= 0:
            versions.setdefault(frame, set()).add(compile_id)
    many = {f: sorted(cs) for f, cs in versions.items() if len(cs) > 1 or max(cs) > 0}
    if not many:
        return []
    return [
        Finding(
            RULE_RECOMPILE,
            RECOMPILED,
            "warning",
            "recompilation: " + ", ".join(f"frame {f} ran compiled versions {cs}" for f, cs in sorted(many.items())),
            "Find the guard that fails with TORCH_LOGS=recompiles; mark changing sizes dynamic "
            "(torch._dynamo.mark_dynamic) or keep Python values that change out of the graph.",
            {"recompiled_frames_count": len(many), "max_compile_id": max(max(c) for c in many.values())},
            tuple(f"Torch-Compiled Region: {f}/{max(cs)}" for f, cs in sorted(many.items())),
        )
    ]


def _compiling(trace: Trace, compile_work: list[int]) -> Finding:
    spent = sum(trace.h_dur[i] for i in compile_work)
    names = sorted({trace.host_name(i) for i in compile_work})
    return Finding(
        RULE_COMPILING,
        COMPILING,
        "warning",
        f"compilation inside the window: {duration(spent)} in {', '.join(names[:3])}",
        "Warm up compiled code before measuring (more wait/warmup steps), and check for recompiles.",
        {"compile_time_us": us(spent), "compile_events_count": len(compile_work)},
        tuple(names[:5]),
    )
