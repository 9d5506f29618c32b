"""The page's part of an :class:`~autoprof.analysis.engine.Analysis` (``parts={"page"}``): what ``autoprof report`` draws of
one trace beyond the Analysis's own fields, read where the trace is loaded (a worker reads it and returns it with the
Analysis). :class:`Page` holds plain numbers and strings, small and picklable whatever the trace's size: the roofline's
ops and roofs, each step's period by where it went (the breakdown), the device's busy spans per step with the largest
gaps labelled (the strip), each device's allocated memory over the step of its peak, the top ops and kernels, the
sections as a tree. :mod:`autoprof.render.htmlreport` draws it; it measures nothing itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from autoprof.analysis import ranks
from autoprof.analysis.sections import section_tree
from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.views import clip, merge, subtract, total, view
from autoprof.rules import memory, regime, roofline
from autoprof.trace.model import CPU_OP_CODE, DEVICE_WORK_CODES, KERNEL_CODE, Trace

#: What a report keeps per trace, whatever its size (the page stays small: plotly.js is most of it).
MAX_OPS = 120  # roofline points
MAX_ROWS = 50  # rows of the ops and kernels tables
MAX_STEPS = 64  # steps in the breakdown
MAX_SPANS = 150  # busy spans per step in the activity strip (closer ones are joined)
MAX_STRIP_STEPS = 16  # steps in the activity strip: spread over the window, first and last included
GAPS_LABELLED = 3  # per step
MAX_MEMORY_POINTS = 2000  # per device in the memory chart (each bucket keeps its highest and lowest level)
MAX_MEMORY_DEVICES = 8
#: What one name (an op, a kernel, its shapes) may cost on the page: longer ones end in an ellipsis, in the tables,
#: the hover text and the labels alike (a trace's names are untrusted: one of 100k characters would weigh 100 KB
#: wherever it appears).
NAME_CAP = 200
#: Where a step's period goes (its start to the next step's start), in the stack's order (bottom first): the
#: waits (also between the steps: a trainer fetches the next batch there), the ops' work, the rest of the step (the
#: host's overhead), and the rest of the time between the steps.
PARTS = (
    "input",
    "sync",
    "communication",
    "compute-bound ops",
    "memory-bound ops",
    "other op work",
    "host overhead",
    "loop between steps",
)


@dataclass
class Page:
    """What the page draws of one trace beyond its :class:`~autoprof.analysis.engine.Analysis`'s own fields (path,
    rank, findings, failures, step times): built only when asked (``parts={"page"}``), by :func:`build` (``engine.page_of``)."""

    on_device: bool = False
    device: str | None = None  # the device (or CPU) the roofline's peak is for
    roofline: dict[str, Any] | None = None  # peak (flops per dtype, bytes/s) and ops
    roofline_missing: str | None = None
    breakdown: list[dict[str, Any]] = field(default_factory=list)  # per step: number, wall_ms, period_ms, parts_ms
    strip: list[dict[str, Any]] = field(default_factory=list)  # per step: number, busy [[start, end] ms], gaps
    top_ops: list[dict[str, Any]] = field(default_factory=list)  # the page's (MAX_ROWS, names cut, share of the window)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)  # sections.section_tree(): depth-first, with depth
    period_ms: list[float] = field(default_factory=list)  # each step's period (start to next start; the last has none)
    memory: list[dict[str, Any]] = field(default_factory=list)  # per device: the peak step's allocated memory over time
    rank_summary: ranks.RankSummary | None = None  # what the cross-rank comparison reads of this rank (per-rank bars)


def short(text: Any, cap: int = NAME_CAP) -> str:
    """``text`` (a name) as the page shows it: at most ``cap`` characters, the last an ellipsis when cut."""
    shown = str(text)
    return shown if len(shown) <= cap else shown[: cap - 1] + "…"


def build(
    trace: Trace,
    findings: Sequence[Finding],
    config: Config | None,
    top_ops: Sequence[dict[str, Any]],
    periods_ms: Sequence[float | None] | None,
) -> Page:
    """One analyzed trace (``findings``: the rules' on it, before the cross-rank comparison), read for the page:
    ``top_ops``, the ops with the most self time (at most :data:`MAX_ROWS`, as ``engine.top_ops`` lists them), and
    ``periods_ms``, each step's period (``engine.step_periods_ms``), as the engine read them."""
    rep = Page()
    win = view(trace)
    rep.on_device = bool(win.device_busy)
    rep.period_ms = [p for p in periods_ms or [] if p is not None]
    rep.rank_summary = ranks.summary_from(trace.rank, [s.dur_ns for s in trace.steps], list(findings))
    roof = roofline.analyze(trace, config)
    if roof is None:
        rep.roofline_missing = "no roofline: no peak is known for this trace's device (autoprof.configure(peaks=...) gives one)"
    else:
        rep.device = roof.peak.name
        ops = sorted(roof.ops.values(), key=lambda s: -s.time_ns)[:MAX_OPS]
        rep.roofline = {
            "peak": roof.peak.name,
            "flops": dict(roof.peak.flops),
            "bytes_per_s": roof.peak.bytes_per_s,
            "source": roof.peak.source,
            "ops": [_point(s.record(roof.peak, roof.peak.flops_for(s.dtype) or 0.0)) for s in ops],
        }
        if not ops:
            rep.roofline_missing = "no roofline points: no op in this trace has shapes the cost models read"
    rep.breakdown = _breakdown(trace, roof)
    rep.strip = _strip(trace) if rep.on_device else []
    start, end = trace.span_ns()  # the window's wall time (the steps', or the whole trace's without steps)
    wall_us = (end - start) / 1e3
    rep.top_ops = [
        {**o, "name": short(o["name"]), "share": round(o["self_cpu_us"] / wall_us, 4) if wall_us > 0 else None} for o in top_ops[:MAX_ROWS]
    ]
    rep.kernels = _kernels(trace)
    rep.sections = [{**r, "name": short(r["name"])} for r in section_tree(trace)]
    rep.memory = _memory(trace, findings)
    return rep


def _memory(trace: Trace, findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Per device with allocator events (``profile_memory``): allocated memory (above the window's start, as
    ``memory_peak`` counts it) over the step that holds the device's peak, ms from the step's start, and the ops
    alive at the peak (``memory_peak``'s holders; none where the peak was too small for a finding)."""
    peaks = memory.step_peaks(trace)
    if not peaks:
        return []
    mem = memory.memory_of(trace)
    found = {f.evidence.get("device"): f for f in findings if f.rule == memory.RULE_PEAK}
    out = []
    for dev in mem.devices[:MAX_MEMORY_DEVICES]:
        series = [p or 0 for p in peaks.get(dev.name, [])]
        if not series:
            continue
        top = max(range(len(series)), key=series.__getitem__)
        step = trace.steps[top]
        dts = [mem.ts[k] for k in dev.events]
        points = [(0.0, dev.level_before(dts, step.start_ns))]
        points += [((mem.ts[k] - step.start_ns) / 1e6, dev.levels[pos]) for pos, k in enumerate(dev.events) if mem.step_of[k] == top]
        points.append((step.dur_ns / 1e6, dev.level_before(dts, step.end_ns)))
        peak_ms = points[max(range(len(points)), key=lambda j: points[j][1])][0]  # the first moment at the peak
        points = _thinned(points, MAX_MEMORY_POINTS)
        f = found.get(dev.name)
        holders = [{"op": short(h["op"]), "bytes": h["bytes"]} for h in (f.evidence.get("holders") or [])] if f is not None else []
        out.append(
            {
                "device": dev.name,
                "step": step.number,
                "step_ms": step.dur_ns / 1e6,
                "peak_bytes": series[top],
                "peak_ms": round(peak_ms, 4),
                "ms": [round(t, 4) for t, _ in points],
                "bytes": [b for _, b in points],
                "holders": holders,
            }
        )
    return out


def _thinned(points: list[tuple[float, int]], most: int) -> list[tuple[float, int]]:
    """At most ``most`` points (about): each of ``most // 2`` buckets keeps its lowest and highest level, in time order
    (the peak is always kept, and the first and last point)."""
    if len(points) <= most:
        return points
    buckets = most // 2
    size_ = len(points) / buckets
    keep = {0, len(points) - 1}
    for j in range(buckets):
        lo, hi = int(j * size_), min(int((j + 1) * size_), len(points))
        if lo >= hi:
            continue
        chunk = range(lo, hi)
        keep.add(max(chunk, key=lambda i: points[i][1]))
        keep.add(min(chunk, key=lambda i: points[i][1]))
    return [points[i] for i in sorted(keep)]


_POINT_KEYS = (
    "name",
    "input_shapes",
    "dtype",
    "calls_count",
    "time_us",
    "intensity_flops_per_byte",
    "achieved_flops_per_s",
    "roofline_fraction_ratio",
    "above_peak",
    "bound",
)


def _point(record: dict[str, Any]) -> dict[str, Any]:
    """What the chart shows of an op's roofline record (not its advice, the same for every op of a bound)."""
    point = {k: record[k] for k in _POINT_KEYS}
    point["name"], point["input_shapes"] = short(point["name"]), short(point["input_shapes"])
    return point


def _breakdown(trace: Trace, roof: roofline.Roofline | None) -> list[dict[str, Any]]:
    """Each step's period (its start to the next step's start; the last step's: its wall time) split as the regime
    reads a window: waiting (input, sync, communication, each counted once in that order, in the step and between
    it and the next: a trainer fetches the next batch there), the ops' own time by their roofline bound, other op
    work, the host's overhead (the rest of the step), and the loop's other time between the steps. On a device the
    op parts are device time, which can run past the host's step (the device runs behind), and input counts only
    while the device idles, as the verdict counts it."""
    if not trace.steps:
        return []
    win = view(trace)
    waits = regime.wait_spans(trace)
    if win.device_busy:  # data loading while the device runs stalls nothing (the verdict's input)
        waits["input"] = subtract(waits["input"], merge(win.device_busy + win.device_foreign))
    own: dict[int, int] = {}
    if win.device_busy:  # the device's work per step
        for k, d, c in zip(win.device_step, trace.d_dur, trace.d_cat):
            if k >= 0 and c in DEVICE_WORK_CODES:
                own[k] = own.get(k, 0) + d
    else:  # the host ops' self time per step
        for k, c, t in zip(win.host_step, trace.h_cat, trace.h_self):
            if k >= 0 and c == CPU_OP_CODE:
                own[k] = own.get(k, 0) + t
    starts = sorted(s.start_ns for s in trace.steps)
    rows = []
    for k, step in enumerate(trace.steps[:MAX_STEPS]):
        lo, hi = step.start_ns, step.end_ns
        j = bisect.bisect_right(starts, lo)
        nxt = starts[j] if j < len(starts) else None
        end = max(hi, nxt) if nxt is not None else hi
        parts: dict[str, float] = {}
        counted: list[tuple[int, int]] = []
        for name in ("input", "sync", "communication"):
            grown = merge(counted + clip(waits[name], lo, end))
            parts[name] = total(grown) - total(counted)  # only what the parts before have not counted
            counted = grown
        in_step = total(clip(counted, lo, hi))
        compute, memory = roof.by_step.get(k, [0, 0]) if roof is not None else [0, 0]
        parts["compute-bound ops"] = compute
        parts["memory-bound ops"] = memory
        parts["other op work"] = max(own.get(k, 0) - compute - memory, 0)
        parts["host overhead"] = max(step.dur_ns - in_step - compute - memory - parts["other op work"], 0)
        parts["loop between steps"] = max((end - hi) - (total(counted) - in_step), 0)
        rows.append(
            {
                "number": step.number,
                "wall_ms": step.dur_ns / 1e6,
                "period_ms": (nxt - lo) / 1e6 if nxt is not None else None,
                "parts_ms": {p: parts[p] / 1e6 for p in PARTS},
            }
        )
    return rows


def _strip(trace: Trace) -> list[dict[str, Any]]:
    """Per step: the device's busy spans (ms from the step's start) and its largest idle gaps, each labelled with
    the outermost host op on the step's thread that ran through most of the gap."""
    win = view(trace)
    per_step: dict[int, list[tuple[int, int]]] = {}
    for k, t, d, c in zip(win.device_step, trace.d_ts, trace.d_dur, trace.d_cat):
        if k >= 0 and c in DEVICE_WORK_CODES:
            per_step.setdefault(k, []).append((t, t + d))
    rows = []
    n = len(trace.steps)
    chosen = sorted({round(j * (n - 1) / (MAX_STRIP_STEPS - 1)) for j in range(MAX_STRIP_STEPS)}) if n > MAX_STRIP_STEPS else range(n)
    for k in chosen:
        step = trace.steps[k]
        busy = merge(per_step.get(k, []))
        if not busy:
            continue
        gaps = sorted(((b[0] - a[1], a[1], b[0]) for a, b in zip(busy, busy[1:])), reverse=True)[:GAPS_LABELLED]
        busy = _joined(busy, MAX_SPANS)
        origin = step.start_ns
        rows.append(
            {
                "number": step.number,
                "busy": [[round((a - origin) / 1e6, 4), round((b - origin) / 1e6, 4)] for a, b in busy],
                "gaps": [
                    {"start_ms": (a - origin) / 1e6, "ms": g / 1e6, "host": _host_at(trace, step.tid, a, b)} for g, a, b in gaps if g > 0
                ],
            }
        )
    return rows


def _joined(spans: list[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """At most ``most`` spans: the smallest gaps closed (each span then covers its neighbours across them)."""
    if len(spans) <= most:
        return spans
    gaps = sorted(range(len(spans) - 1), key=lambda j: spans[j + 1][0] - spans[j][1])
    closed = set(gaps[: len(spans) - most])
    out = [spans[0]]
    for j in range(1, len(spans)):
        if j - 1 in closed:
            out[-1] = (out[-1][0], spans[j][1])
        else:
            out.append(spans[j])
    return out


def _host_at(trace: Trace, tid: int, a: int, b: int) -> str:
    """What the host did during the gap [a, b]: the outermost op on thread ``tid`` that covers most of it (``no op
    on the host`` when none: Python code, or waiting outside any op)."""
    lo, hi = bisect.bisect_left(trace.h_tid, tid), bisect.bisect_right(trace.h_tid, tid)
    best, most = -1, 0
    ts, dur, cat, parent = trace.h_ts, trace.h_dur, trace.h_cat, trace.h_parent
    for i in range(lo, hi):
        if cat[i] != CPU_OP_CODE or (parent[i] >= 0 and cat[parent[i]] == CPU_OP_CODE):
            continue
        overlap = min(ts[i] + dur[i], b) - max(ts[i], a)
        if overlap > most:
            best, most = i, overlap
    return short(trace.names[trace.h_name[best]]) if best >= 0 else "no op on the host"


def _kernels(trace: Trace) -> list[dict[str, Any]]:
    win = view(trace)
    time: dict[int, int] = {}
    calls: dict[int, int] = {}
    for nid, c, d, inside in zip(trace.d_name, trace.d_cat, trace.d_dur, win.device_in):
        if c == KERNEL_CODE and inside:
            time[nid] = time.get(nid, 0) + d
            calls[nid] = calls.get(nid, 0) + 1
    top = sorted(time.items(), key=lambda item: -item[1])[:MAX_ROWS]
    whole = win.device_window_ns
    return [
        {
            "name": short(trace.names[n]),
            "time_us": round(t / 1e3, 3),
            "share": round(t / whole, 4) if whole > 0 else None,
            "calls": calls[n],
            "mean_us": round(t / 1e3 / calls[n], 3),
        }
        for n, t in top
    ]


__all__ = ["MAX_ROWS", "PARTS", "Page", "build", "short"]
