"""``autoprof report`` and ``autoprof.report``: one self-contained HTML page per run, from the same engine and findings as ``analyze``.

Two halves. :func:`file_report` reads one analyzed trace into a :class:`FileReport`: plain numbers and strings
(picklable, small whatever the trace's size): the findings, the roofline's ops and roofs, each step's time by
where it went, the device's busy spans per step with the largest gaps labelled, the top ops and kernels.
:func:`render` draws those with plotly (the optional extra ``autoprof[report]``) into one HTML file with
plotly.js embedded: no CDN, no request, it opens from disk in any browser.
"""

from __future__ import annotations

import bisect
import contextlib
import html
import json
import os
import re
import secrets
import statistics
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from autoprof.analysis import engine, ranks
from autoprof.analysis.sections import section_tree
from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules import memory, regime, roofline
from autoprof.rules._common import merge, total, view
from autoprof.rules._peaks import CPU_PEAK_NAME
from autoprof.trace import chrome, remote
from autoprof.trace.chrome import TraceError
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
HOLDERS_LABELLED = 3  # ops named beside the peak (all the finding's holders in its hover text)
#: What one name (an op, a kernel, its shapes) may cost on the page: longer ones end in an ellipsis, in the tables,
#: the hover text and the labels alike (a trace's names are untrusted: one of 100k characters would weigh 100 KB
#: wherever it appears).
NAME_CAP = 200
#: What one free text (a finding's message or advice, an error) may cost: each word at most ``NAME_CAP``.
TEXT_CAP = 2000
SEVERITY_ORDER = ("critical", "error", "warning", "info")
#: Where a step's time goes, in the stack's order (bottom first).
PARTS = ("input", "sync", "communication", "compute-bound ops", "memory-bound ops", "other op work", "host overhead")


@dataclass
class FileReport:
    """What the page shows of one trace file (or why it shows nothing)."""

    path: str
    rank: int = 0
    world_size: int = 1
    error: str | None = None  # one line naming the file
    problem: str | None = None  # the error, without the file's name
    device: str | None = None  # the device (or CPU) the roofline's peak is for
    on_device: bool = False
    findings: list[dict[str, Any]] = field(default_factory=list)  # Finding.to_record()s
    roofline: dict[str, Any] | None = None  # peak (flops per dtype, bytes/s) and ops
    roofline_missing: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)  # number, wall_ms, parts_ms
    strip: list[dict[str, Any]] = field(default_factory=list)  # number, busy [[start, end] ms], gaps
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)  # sections.section_tree(): depth-first, with depth
    step_ns: list[int] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)  # per device: the peak step's allocated memory over time
    rank_summary: ranks.RankSummary | None = None  # what the cross-rank comparison reads of this rank (per-rank bars)
    failures: list[str] = field(default_factory=list)  # "rule X failed: ..." for each rule that raised on this trace


def short(text: Any, cap: int = NAME_CAP) -> str:
    """``text`` (a name) as the page shows it: at most ``cap`` characters, the last an ellipsis when cut."""
    shown = str(text)
    return shown if len(shown) <= cap else shown[: cap - 1] + "…"


_LONG_WORD = re.compile(rf"\S{{{NAME_CAP + 1},}}")


def clipped(text: Any) -> str:
    """A free text (a message naming ops, an error) as the page shows it: each word as :func:`short` cuts a name,
    the whole at most ``TEXT_CAP`` characters."""
    return short(_LONG_WORD.sub(lambda m: short(m.group()), str(text)), TEXT_CAP)


def file_report(trace: Trace, findings: Sequence[Finding], config: Config | None = None) -> FileReport:
    """One analyzed trace, read for the page."""
    rep = FileReport(trace.source or "", trace.rank, trace.world_size)
    rep.findings = [f.to_record() for f in findings]  # free text: cut where the page shows it (clipped)
    win = view(trace)
    rep.on_device = bool(win.device_busy)
    rep.step_ns = [s.dur_ns for s in trace.steps]
    rep.rank_summary = ranks.summary_from(trace.rank, rep.step_ns, list(findings))
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
    rep.steps = _breakdown(trace, roof)
    rep.strip = _strip(trace) if rep.on_device else []
    start, end = trace.span_ns()  # the window's wall time (the steps', or the whole trace's without steps)
    wall_us = (end - start) / 1e3
    rep.top_ops = [
        {**o, "name": short(o["name"]), "share": round(o["self_cpu_us"] / wall_us, 4) if wall_us > 0 else None}
        for o in engine.top_ops(trace, MAX_ROWS)
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
    """Each step's wall time split as the regime reads a window: waiting (input, sync, communication, each counted
    once in that order), the ops' own time by their roofline bound, other op work, and the host's overhead (the
    rest). On a device the op parts are device time, which can run past the host's step (the device runs behind)."""
    if not trace.steps:
        return []
    win = view(trace)
    waits = regime.wait_spans(trace)
    own: dict[int, int] = {}
    if win.device_busy:  # the device's work per step
        for k, d, c in zip(win.device_step, trace.d_dur, trace.d_cat):
            if k >= 0 and c in DEVICE_WORK_CODES:
                own[k] = own.get(k, 0) + d
    else:  # the host ops' self time per step
        for k, c, t in zip(win.host_step, trace.h_cat, trace.h_self):
            if k >= 0 and c == CPU_OP_CODE:
                own[k] = own.get(k, 0) + t
    rows = []
    for k, step in enumerate(trace.steps[:MAX_STEPS]):
        lo, hi = step.start_ns, step.end_ns
        parts: dict[str, float] = {}
        counted: list[tuple[int, int]] = []
        for name in ("input", "sync", "communication"):
            spans = [(max(a, lo), min(b, hi)) for a, b in waits[name] if a < hi and b > lo]
            grown = merge(counted + spans)
            parts[name] = total(grown) - total(counted)  # only what the parts before have not counted
            counted = grown
        compute, memory = roof.by_step.get(k, [0, 0]) if roof is not None else [0, 0]
        parts["compute-bound ops"] = compute
        parts["memory-bound ops"] = memory
        parts["other op work"] = max(own.get(k, 0) - compute - memory, 0)
        used = sum(parts.values())
        parts["host overhead"] = max(step.dur_ns - used, 0)
        rows.append({"number": step.number, "wall_ms": step.dur_ns / 1e6, "parts_ms": {p: parts[p] / 1e6 for p in PARTS}})
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


# -- the runs ------------------------------------------------------------------------------------------


def reports(
    paths: Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    workers: int | None = None,
    jobs: int | None = 1,
    executor: Executor | None = None,
) -> list[FileReport]:
    """Every trace file under ``paths`` read for the page (a file that cannot be read: its one-line error), with
    the cross-rank comparison of per-rank traces attached to the lowest rank, as ``analyze`` does: each file's
    :class:`autoprof.analysis.engine.Analysis` (``workers``, ``jobs``, ``executor`` as :func:`write`), its page
    read by :func:`file_report` where the trace was loaded."""
    analyses = engine.analyze_files(paths, config, workers=workers, jobs=jobs, executor=executor, views=engine.Views(page=file_report))
    return [page_of(analysis) for analysis in analyses]


def page_of(analysis: engine.Analysis) -> FileReport:
    """What the page shows of one :class:`~autoprof.analysis.engine.Analysis`: its page, with the findings as the cross-rank
    comparison left them and the rules that failed; or the error that stopped the file."""
    if analysis.error is not None or not isinstance(analysis.page, FileReport):
        problem = analysis.exc.problem if analysis.exc is not None else None
        return FileReport(analysis.path, error=analysis.error or f"{analysis.path}: not read for the page", problem=problem)
    rep = analysis.page
    rep.findings = [f.to_record() for f in analysis.findings]  # free text: cut where the page shows it (clipped)
    rep.failures = analysis.failure_lines
    return rep


class NoReadableInputError(TraceError):
    """No input is a readable trace, so no page: ``errors`` holds every input's one-line error (the message is the
    first one's, with how many more)."""

    def __init__(self, path: str | os.PathLike[str], problem: str, errors: Sequence[str] = ()) -> None:
        super().__init__(path, problem)
        self.errors = list(errors) or [str(self)]


class OutputError(ValueError):
    """The page cannot be written where asked (one line naming the path); nothing is left behind."""


def write(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    config: Config | None = None,
    workers: int | None = None,
    jobs: int | None = 1,
    executor: Executor | None = None,
) -> list[FileReport]:
    """Read ``paths`` and write the page to ``out``; returns what it shows. ``workers``, ``jobs``, ``executor``: as
    :func:`autoprof.analyze`, but ``jobs`` defaults to 1: the files are read in this process, one after another (the
    end-of-run report of a training program starts no process; ``None``: the usable CPUs, the CLI's default).
    Raises :class:`OutputError` (before reading anything) when ``out`` is empty, a directory, or one of the inputs
    (the same file, or one found in an input directory); :class:`NoReadableInputError` (a :class:`TraceError`) when
    no input is a readable trace (the unreadable ones are listed on the page otherwise); ``ImportError`` (one line,
    naming the extra) without plotly; ``OSError`` (one line) when the page cannot be written. No temporary file is
    left behind in any case; ``ValueError`` (one line, before anything) on an option of the wrong type or out of range
    (``workers="2"``), as :func:`autoprof.analyze`."""
    engine.check_call(config=config, workers=workers, jobs=jobs, executor=executor)
    _plotly()  # missing: say so before reading any trace
    check_output(out, paths)
    reps = reports(paths, config, workers, jobs, executor)
    if not reps:
        raise NoReadableInputError(", ".join(map(str, paths)) or "(no input)", "no trace files")
    bad = [r for r in reps if r.error is not None]
    if len(bad) == len(reps):
        more = f" (and {len(bad) - 1} more inputs that cannot be read)" if len(bad) > 1 else ""
        raise NoReadableInputError(bad[0].path, (bad[0].problem or "cannot be read") + more, [r.error or r.path for r in bad])
    save(render(reps), out)
    return reps


def check_output(out: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]]) -> None:
    """Raise :class:`OutputError` when ``out`` cannot be the page: empty, a directory, in a directory that does not
    exist, or an input trace (``os.path.samefile``: a link or another name of it, also a file found inside an input
    directory), which the page would overwrite."""
    text = os.fspath(out)
    if not text:
        raise OutputError("the output path is empty: name the page's file (-o report.html)")
    if os.path.isdir(text):
        raise OutputError(f"{text}: is a directory: name the page's file (-o {os.path.join(text, 'autoprof-report.html')})")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise OutputError(f"{text}: cannot write the page there: {parent} is not a directory")
    if not os.path.exists(text):
        return  # a new file is no input
    for trace_file in _local_inputs(paths):
        try:
            same = os.path.samefile(text, trace_file) or os.path.realpath(text) == os.path.realpath(trace_file)
        except OSError:
            continue
        if same:
            named = "" if os.fspath(trace_file) == text else f" ({trace_file})"
            raise OutputError(f"{text}: is one of the input traces{named}: the page would overwrite it; name another output file")


def _local_inputs(paths: Sequence[str | os.PathLike[str]]) -> Iterator[str | os.PathLike[str]]:
    """The local trace files the inputs name (as the report will read them; URLs of other file systems skipped)."""
    for path in paths:
        if remote.names_nothing(path) is not None or remote.is_url(path):
            continue
        for f in chrome.iter_trace_inputs(remote.local_path(path)):
            if not isinstance(f, TraceError):
                yield f


def save(page: str, out: str | os.PathLike[str]) -> None:
    """Write ``page`` to ``out`` whole or not at all: a new temporary file beside it (created exclusively, so no
    existing path or link is followed; as readable as the user's other files), renamed over ``out``; whatever
    fails, the temporary file is removed. Raises ``OSError`` (one line naming ``out``)."""
    text = os.fspath(out)
    tmp = os.path.join(os.path.dirname(os.path.abspath(text)), f".autoprof-report-{secrets.token_hex(8)}.part")
    try:
        f = open(tmp, "x", encoding="utf-8")  # noqa: SIM115 - closed below, before the rename
    except OSError as e:
        raise OSError(f"{text}: cannot write the page: {e.strerror or e}") from None
    try:
        with f:
            f.write(page)
        os.replace(tmp, text)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OSError(f"{text}: cannot write the page: {e.strerror or e}") from None
        raise


# -- the page ------------------------------------------------------------------------------------------


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        import plotly.offline as po
    except ImportError:
        raise ImportError("autoprof report needs plotly, which is not installed: pip install 'autoprof[report]'") from None
    return go, pio, po


_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "svg"}}
_COLORS = {
    "input": "#8c564b",
    "sync": "#d62728",
    "communication": "#9467bd",
    "compute-bound ops": "#1f77b4",
    "memory-bound ops": "#ff7f0e",
    "other op work": "#7f7f7f",
    "host overhead": "#bcbd22",
}


def render(reps: Sequence[FileReport]) -> str:
    """The whole page (a string of HTML)."""
    go, pio, po = _plotly()
    body: list[str] = [_summary(reps)]
    rank_fig = _ranks_figure(go, reps)
    if rank_fig is not None:
        body.append("<h2>Ranks</h2>" + _fig(pio, rank_fig, "ranks"))
    elif len(reps) > 1:
        body.append('<p class="note">No per-rank chart: these files are not one job\'s per-rank traces.</p>')
    for n, rep in enumerate(reps):
        body.append(_file_section(go, pio, rep, n))
    script = po.get_plotlyjs()
    return _PAGE.format(title="autoprof report", plotlyjs=script, css=_CSS, body="\n".join(body), js=_SORT_JS)


def _fig(pio: Any, fig: Any, div: str) -> str:
    return str(pio.to_html(fig, include_plotlyjs=False, full_html=False, config=_CONFIG, div_id=div))


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _say(x: Any) -> str:
    """A free text (a message, advice, an error) escaped, as :func:`clipped` cuts it."""
    return html.escape(clipped(x))


def _error(rep: FileReport) -> str:
    """A file's error line: its path whole, its problem as :func:`clipped` cuts it."""
    return f"{_esc(rep.path)}: {_say(rep.problem)}" if rep.problem is not None else _say(rep.error)


def _summary(reps: Sequence[FileReport]) -> str:
    rows = []
    for n, rep in enumerate(reps):
        if rep.error is not None:
            rows.append(f'<tr><td><a href="#file{n}">{_esc(rep.path)}</a></td><td colspan="3" class="error">{_error(rep)}</td></tr>')
            continue
        reg = next((f for f in rep.findings if f["rule"] == regime.RULE), None)
        median = f"{statistics.median(rep.step_ns) / 1e6:.2f}" if rep.step_ns else "–"
        counts = {s: sum(1 for f in rep.findings if f["severity"] == s) for s in SEVERITY_ORDER}
        failed = [f"{len(rep.failures)} rule(s) failed"] if rep.failures else []
        shown = ", ".join([*(f"{c} {s}" for s, c in counts.items() if c), *failed])
        rows.append(
            f'<tr><td><a href="#file{n}">{_esc(rep.path)}</a></td><td>{rep.rank}</td>'
            f'<td class="verdict">{_say(reg["verdict"]) if reg else "–"}</td><td>{median}</td><td>{_esc(shown)}</td></tr>'
        )
    return (
        "<h1>autoprof report</h1><h2>Verdicts</h2>"
        '<table class="summary"><thead><tr><th>trace</th><th>rank</th><th>regime</th><th>median step (ms)</th>'
        "<th>findings</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _file_section(go: Any, pio: Any, rep: FileReport, n: int) -> str:
    out = [f'<section id="file{n}"><h2>{_esc(rep.path)}</h2>']
    if rep.error is not None:
        out.append(f'<p class="error">{_error(rep)}</p></section>')
        return "".join(out)
    out.append(_findings_html(rep))
    if rep.sections:
        out.append(_sections_html(rep))
    for failure in rep.failures:  # as analyze: the rule's error, on the page too (its findings are missing)
        out.append(f'<p class="error rule-failure">error: {_say(failure)} (its findings are missing from this page)</p>')
    out.append("<h3>Roofline</h3>")
    if rep.roofline is not None and rep.roofline["ops"]:
        out.append(_fig(pio, _roofline_figure(go, rep), f"roofline{n}"))
        out.extend(f'<p class="note roofline-note">{_esc(line)}</p>' for line in roofline_notes(rep))
    else:
        out.append(f'<p class="note">{_esc(rep.roofline_missing)}</p>')
    out.append("<h3>Where each step's time goes</h3>")
    if rep.steps:
        out.append(_fig(pio, _steps_figure(go, rep), f"steps{n}"))
        if rep.on_device:
            out.append('<p class="note">On a device the op parts are the device\'s time: a step can show more than its host wall time.</p>')
    else:
        out.append('<p class="note">No steps in this trace (no ProfilerStep#N spans): no per-step breakdown.</p>')
    out.append("<h3>Device activity per step</h3>")
    if rep.strip:
        out.append(_fig(pio, _strip_figure(go, rep), f"strip{n}"))
    else:
        out.append('<p class="note">No device activity strip: this trace has no device work inside its steps (a CPU-only trace).</p>')
    if rep.memory:  # a trace recorded with profile_memory; without memory events, no heading and no chart
        out.append("<h3>Memory over the step that holds the peak</h3>")
        out.extend(_fig(pio, _memory_figure(go, m), f"memory{n}_{j}") for j, m in enumerate(rep.memory))
        out.append(
            '<p class="note">Allocated memory above what was held at the window\'s start (what was allocated before it '
            "is not seen), over the step with each device's peak; the ops named at the peak are those whose allocations "
            "were alive then, largest first (memory_peak's holders).</p>"
        )
    out.append("<h3>Top ops and kernels</h3>")
    out.append(
        _table(
            "ops",
            ["op", "self CPU (µs)", "% of window", "calls"],
            [[o["name"], o["self_cpu_us"], _percent(o["share"]), o["calls"]] for o in rep.top_ops],
        )
    )
    if rep.kernels:
        out.append(
            _table(
                "kernels",
                ["kernel", "time (µs)", "% of window", "calls", "mean (µs)"],
                [[k["name"], k["time_us"], _percent(k["share"]), k["calls"], k["mean_us"]] for k in rep.kernels],
            )
        )
    out.append(
        "<p class=\"note\">% of window: an op's self CPU time as a share of the window's wall time (ops on several "
        "threads can add up to more than 100%), a kernel's time as a share of the window on the device.</p>"
    )
    out.append("</section>")
    return "".join(out)


def _findings_html(rep: FileReport) -> str:
    items = sorted(rep.findings, key=lambda f: (SEVERITY_ORDER.index(f["severity"]) if f["severity"] in SEVERITY_ORDER else 9, f["rule"]))
    reg = next((f for f in items if f["rule"] == regime.RULE), None)
    out = []
    if reg is not None:
        out.append(
            f'<div class="regime"><div class="verdict big">{_say(reg["verdict"])}</div><div>{_say(reg["message"])}</div>'
            f'<div class="advice">{_say(reg["advice"])}</div>{_evidence_html(reg["evidence"])}</div>'
        )
    rows = "".join(
        f'<tr class="{_esc(f["severity"])}"><td>{_esc(f["severity"])}</td><td>{_say(f["rule"])}</td><td>{_say(f["verdict"])}</td>'
        f"<td>{_say(f['message'])}</td><td>{_say(f['advice'])}</td></tr>"
        for f in items
    )
    out.append(
        '<table class="findings"><thead><tr><th>severity</th><th>rule</th><th>verdict</th><th>what</th><th>advice</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
    return "".join(out)


#: The regime's evidence the card shows first, each with its label (the raw key stays in its title and in the raw
#: evidence below the card). Any other key is labelled by :func:`evidence_label`.
EVIDENCE_LABELS = {
    "reading": "Reading",
    "device": "Device",
    "window_us": "Window",
    "step_count": "Steps",
    "input_share": "Input",
    "blocked_share": "Blocked in syncs",
    "comm_share": "Communication",
    "work_share": "Work",
    "overhead_share": "Host overhead",
    "device_busy_share": "Device busy",
    "device_idle_share": "Device idle",
    "host_active_share": "Host active",
    "self_cpu_total_us": "Self CPU total",
    "self_device_total_us": "Self device total",
    "cpu_to_device_ratio": "CPU time / device time",
    "peak_flops_per_s": "Peak",
    "achieved_flops_per_s": "Achieved",
}
EVIDENCE_SHOWN = 10  # labelled items on the card
_UNIT_SUFFIXES = ("_flops_per_s", "_bytes_per_s", "_us", "_ns", "_ms", "_share")  # said by the value, not the label


def evidence_label(key: str) -> str:
    """A human label for an evidence key: the table's, else the key without its unit suffix, in words."""
    if key in EVIDENCE_LABELS:
        return EVIDENCE_LABELS[key]
    words = key
    for suffix in _UNIT_SUFFIXES:
        if words.endswith(suffix) and len(words) > len(suffix):
            words = words[: -len(suffix)]
            break
    words = words.replace("_", " ").strip()
    return (words[:1].upper() + words[1:]) if words else key


def _duration_ms(ms: float) -> str:
    if abs(ms) >= 1000:
        return f"{ms / 1000:.4g} s"
    if abs(ms) >= 1:
        return f"{ms:.4g} ms"
    return f"{ms * 1000:.4g} µs"


def evidence_value(key: str, value: Any) -> str:
    """An evidence value in the unit its key names: ``_us``/``_ns``/``_ms`` as a duration, ``_share`` as a percent,
    ``_flops_per_s`` in GFLOP/s, ``_bytes_per_s`` in GB/s, ``_ratio`` as a factor; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    v = float(value)
    if key.endswith("_us"):
        return _duration_ms(v / 1e3)
    if key.endswith("_ns"):
        return _duration_ms(v / 1e6)
    if key.endswith("_ms"):
        return _duration_ms(v)
    if key.endswith("_share"):
        return f"{v:.1%}"
    if key.endswith("_flops_per_s"):
        return f"{v / 1e9:.4g} GFLOP/s"
    if key.endswith("_bytes_per_s"):
        return f"{v / 1e9:.4g} GB/s"
    if key.endswith("_ratio"):
        return f"{v:.3g}×"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _evidence_html(evidence: dict[str, Any]) -> str:
    """The regime card's evidence: the telling figures labelled and in units (the raw key in each one's title),
    then every raw key and value in a closed <details>."""
    scalars = {k: v for k, v in evidence.items() if v is not None and (isinstance(v, (int, float, str)) and not isinstance(v, bool))}
    order = [k for k in EVIDENCE_LABELS if k in scalars] + [k for k in scalars if k not in EVIDENCE_LABELS]
    shown = "; ".join(
        f'<span class="item" title="{_esc(k)}">{_esc(evidence_label(k))} {_say(evidence_value(k, scalars[k]))}</span>'
        for k in order[:EVIDENCE_SHOWN]
    )
    raw = "".join(
        f"<tr><td>{_esc(short(k))}</td><td>{_say(v if isinstance(v, str) else json.dumps(v, default=str))}</td></tr>"
        for k, v in evidence.items()
    )
    return (
        f'<div class="evidence">{shown}</div><details class="raw-evidence"><summary>raw evidence</summary>'
        f'<table class="evidence-raw"><tbody>{raw}</tbody></table></details>'
    )


def _sections_html(rep: FileReport) -> str:
    """The sections (``autoprof.section`` spans, a trainer's named spans) as a tree: a nested one indented under
    the section it runs inside, the figures :func:`autoprof.analysis.sections.section_times` gives ``analyze``."""
    per_step = bool(rep.step_ns)
    of = "of the steps" if per_step else "of the window"
    rows = []
    for r in rep.sections:
        depth = int(r["depth"])
        mark = "└ " if depth else ""
        per = f"{r['per_step_ms']:.3f}" if r["per_step_ms"] is not None else "–"
        rows.append(
            f'<tr class="depth{min(depth, 9)}" data-depth="{depth}"><td class="name" style="padding-left:{0.5 + 1.5 * depth:.1f}em">'
            f"{mark}{_esc(r['name'])}</td><td>{r['step_share']:.1%}</td><td>{per}</td><td>{r['calls']}</td></tr>"
        )
    return (
        f'<h3>Sections</h3><table class="sections"><thead><tr><th>section</th><th>share {of}</th>'
        f"<th>time per step (ms)</th><th>calls</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _percent(share: float | None) -> str:
    return "–" if share is None else f"{share:.1%}"


def _table(kind: str, head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(short(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="sortable {kind}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


#: A dtype's roof is drawn when its ops hold at least this share of the plotted ops' time (the leading dtype's
#: always): an fp32 model's few fp64 scalars draw no fp64 roof.
ROOF_SHARE = 0.05


def roof_dtypes(ops: Sequence[dict[str, Any]]) -> list[tuple[str, float]]:
    """The dtypes whose roofs the chart draws, with their share of the plotted ops' time: each that holds at least
    ``ROOF_SHARE`` of it, and the leading one always; the most time first."""
    time: dict[str, float] = {}
    for o in ops:
        time[o["dtype"]] = time.get(o["dtype"], 0.0) + float(o["time_us"])
    whole = sum(time.values())
    ranked = sorted(time.items(), key=lambda item: (-item[1], item[0]))
    return [(d, t / whole if whole > 0 else 1.0) for j, (d, t) in enumerate(ranked) if j == 0 or (whole > 0 and t / whole >= ROOF_SHARE)]


def roofline_notes(rep: FileReport) -> list[str]:
    """The lines under the roofline chart: the ops whose dtype has no roof drawn, and the ops that plot above
    their roof (what that says of the peak it is measured against)."""
    roof = rep.roofline
    if roof is None or not roof["ops"]:
        return []
    ops = roof["ops"]
    notes = []
    drawn = {d for d, _ in roof_dtypes(ops)}
    rest = sorted({o["dtype"] for o in ops} - drawn)
    if rest:
        n = sum(1 for o in ops if o["dtype"] not in drawn)
        notes.append(f"{n} op(s) in {', '.join(rest)} are plotted without their roof (under {ROOF_SHARE:.0%} of the op time each).")
    above = sum(1 for o in ops if o.get("above_peak"))
    if above:
        if roof["peak"] == CPU_PEAK_NAME:
            why = (
                f"the calibration underestimates this CPU's peak for them ({roof['source']}, at startup; "
                "cache-resident data, or a machine busier while it measured than during the run, read above it)"
            )
            which = "the calibrated roof"
        elif roof["peak"] == "configured":
            why, which = "the configured peaks are below what these ops reached", "the configured roof"
        else:
            why, which = "their data sat in caches the datasheet's memory bandwidth does not see", "the roof"
        notes.append(f"{above} op(s) plot above {which}: {why}. Their fraction of the roofline is shown as 100%.")
    return notes


def _roofline_figure(go: Any, rep: FileReport) -> Any:
    roof = rep.roofline
    assert roof is not None
    ops = roof["ops"]
    fig = go.Figure()
    xs = [o["intensity_flops_per_byte"] for o in ops if o["intensity_flops_per_byte"] > 0]
    lo, hi = (min(xs) / 4, max(xs) * 4) if xs else (0.01, 1000.0)
    bw = roof["bytes_per_s"]
    for dtype, part in roof_dtypes(ops):
        pf = roof["flops"].get(dtype) or (roof["flops"].get("fp16") if dtype == "bf16" else None)
        if not pf:
            continue
        ridge = pf / bw
        grid = sorted({lo, hi, min(max(ridge, lo), hi)})
        fig.add_trace(
            go.Scatter(
                x=grid, y=[min(pf, x * bw) for x in grid], mode="lines", name=f"roof {dtype} ({part:.0%} of op time)", line={"dash": "dot"}
            )
        )
    longest = max((o["time_us"] for o in ops), default=1.0) or 1.0
    for bound, color in (("compute", "#1f77b4"), ("memory", "#ff7f0e")):
        chosen = [o for o in ops if o["bound"] == bound and o["intensity_flops_per_byte"] > 0 and o["achieved_flops_per_s"] > 0]
        if not chosen:
            continue
        fig.add_trace(
            go.Scatter(
                x=[o["intensity_flops_per_byte"] for o in chosen],
                y=[o["achieved_flops_per_s"] for o in chosen],
                mode="markers",
                name=f"{bound}-bound ops",
                marker={"size": [6 + 34 * (o["time_us"] / longest) ** 0.5 for o in chosen], "color": color, "opacity": 0.7},
                text=[
                    f"{short(o['name'])} {short(o['input_shapes'])} {o['dtype']}<br>{o['calls_count']} calls, {o['time_us']:.1f} µs"
                    f"<br>{o['achieved_flops_per_s'] / 1e9:.2f} GFLOP/s at {o['intensity_flops_per_byte']:.2f} FLOP/B"
                    + (f"<br>{o['roofline_fraction_ratio']:.0%} of its roofline" if o["roofline_fraction_ratio"] is not None else "")
                    for o in chosen
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"Roofline: {roof['peak']} (points sized by time)",
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "achieved FLOP/s"},
        height=480,
        margin={"t": 50, "l": 70, "r": 20, "b": 60},
    )
    return fig


def _steps_figure(go: Any, rep: FileReport) -> Any:
    numbers = [f"step {s['number']}" for s in rep.steps]
    fig = go.Figure()
    for part in PARTS:
        values = [s["parts_ms"][part] for s in rep.steps]
        if any(values):
            fig.add_trace(
                go.Bar(x=numbers, y=values, name=part, marker_color=_COLORS[part], hovertemplate="%{y:.3f} ms<extra>" + part + "</extra>")
            )
    fig.add_trace(
        go.Scatter(
            x=numbers,
            y=[s["wall_ms"] for s in rep.steps],
            mode="markers",
            name="step wall time",
            marker={"symbol": "line-ew-open", "size": 24},
        )
    )
    fig.update_layout(barmode="stack", yaxis={"title": "ms"}, height=420, margin={"t": 30, "l": 60, "r": 20, "b": 40})
    return fig


def _strip_figure(go: Any, rep: FileReport) -> Any:
    fig = go.Figure()
    ys, bases, widths = [], [], []
    for row_index, row in enumerate(rep.strip):  # rows by index (short numbers in the page), labelled by step
        for a, b in row["busy"]:
            ys.append(row_index)
            bases.append(a)
            widths.append(round(max(b - a, 1e-6), 4))
    fig.add_trace(
        go.Bar(
            y=ys,
            x=widths,
            base=bases,
            orientation="h",
            name="device busy",
            marker_color="#2ca02c",
            hovertemplate="%{base:.3f} ms +%{x:.3f} ms<extra>busy</extra>",
        )
    )
    gx, gy, gt = [], [], []
    for row_index, row in enumerate(rep.strip):
        for gap in row["gaps"]:
            gx.append(round(gap["start_ms"] + gap["ms"] / 2, 4))
            gy.append(row_index)
            gt.append(f"step {row['number']}: idle {gap['ms']:.3f} ms; host: {short(gap['host'])}")
    if gx:
        fig.add_trace(
            go.Scatter(
                x=gx,
                y=gy,
                mode="markers",
                name="largest gaps",
                marker={"symbol": "x", "color": "#d62728", "size": 9},
                text=gt,
                hovertemplate="%{text}<extra></extra>",
            )
        )
    labels = [f"step {row['number']}" for row in rep.strip]
    fig.update_layout(
        xaxis={"title": "ms from the step's start"},
        yaxis={"autorange": "reversed", "tickvals": list(range(len(labels))), "ticktext": labels},
        height=max(200, 40 * len(rep.strip) + 100),
        margin={"t": 30, "l": 80, "r": 20, "b": 40},
        barmode="overlay",
    )
    return fig


def _memory_figure(go: Any, m: dict[str, Any]) -> Any:
    mib = 1 << 20
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=m["ms"],
            y=[b / mib for b in m["bytes"]],
            mode="lines",
            line={"shape": "hv", "color": "#1f77b4"},
            fill="tozeroy",
            name="allocated",
            hovertemplate="%{x:.3f} ms: %{y:.2f} MiB<extra></extra>",
        )
    )
    holders = m["holders"]
    alive = "<br>".join(html.escape(f"{short(h['op'])} {memory.size(h['bytes'])}") for h in holders)
    fig.add_trace(
        go.Scatter(
            x=[m["peak_ms"]],
            y=[m["peak_bytes"] / mib],
            mode="markers",
            name="peak",
            marker={"symbol": "triangle-down", "color": "#d62728", "size": 12},
            text=[f"peak {memory.size(m['peak_bytes'])}" + (f"<br>alive, largest first:<br>{alive}" if alive else "")],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    named = ", ".join(f"{short(h['op'])} {memory.size(h['bytes'])}" for h in holders[:HOLDERS_LABELLED])
    fig.add_annotation(
        x=m["peak_ms"],
        y=m["peak_bytes"] / mib,
        text=html.escape(f"peak {memory.size(m['peak_bytes'])}" + (f": {named}" if named else "")),
        showarrow=True,
        arrowhead=2,
        ax=0,
        ay=-30,
        name="holders",
    )
    for x in (0.0, m["step_ms"]):  # the step's boundaries
        fig.add_vline(x=x, line={"dash": "dot", "color": "#999"})
    fig.update_layout(
        title=f"{m['device']}: step {m['step']}, peak {memory.size(m['peak_bytes'])}",
        xaxis={"title": "ms from the step's start"},
        yaxis={"title": "allocated (MiB above the window's start)", "rangemode": "tozero"},
        height=360,
        margin={"t": 60, "l": 70, "r": 20, "b": 50},
        showlegend=False,
    )
    return fig


def _ranks_figure(go: Any, reps: Sequence[FileReport]) -> Any:
    by_rank = engine.one_job(reps)
    if by_rank is None:
        return None
    summaries = {rank: rep.rank_summary for rank, rep in by_rank.items() if rep.rank_summary is not None}
    stragglers: set[int] = set()
    for rep in by_rank.values():
        for f in rep.findings:
            if f["rule"] == ranks.RULE_STRAGGLER:
                stragglers.update(f["evidence"].get("straggler_ranks", []))
    labels = [f"rank {r}" + (" (straggler)" if r in stragglers else "") for r in summaries]
    colors = ["#d62728" if r in stragglers else "#1f77b4" for r in summaries]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[s.step_ms for s in summaries.values()], name="median step (ms)", marker_color=colors))
    waits = [s.wait_ms for s in summaries.values()]
    if any(w is not None for w in waits):
        fig.add_trace(go.Bar(x=labels, y=[w or 0 for w in waits], name="collective wait per step (ms)", marker_color="#9467bd"))
    fig.update_layout(barmode="group", yaxis={"title": "ms"}, height=380, margin={"t": 30, "l": 60, "r": 20, "b": 40})
    return fig


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{margin-top:0}section{border-top:2px solid #ddd;margin-top:32px;padding-top:8px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}table.sortable th{cursor:pointer}table.sortable th:after{content:" \\2195";color:#aaa}
.regime{border-left:6px solid #1f77b4;padding:8px 12px;background:#f7fafd;margin:8px 0}
.verdict{font-weight:600}.big{font-size:20px}.advice{color:#2a6f2a;margin-top:4px}.evidence{color:#666;font-size:12px;margin-top:4px}
tr.critical td:first-child,tr.error td:first-child{color:#b00;font-weight:600}tr.warning td:first-child{color:#b60}
.note{color:#666;font-style:italic}.error{color:#b00}
.raw-evidence{font-size:12px;color:#666;margin-top:4px}.raw-evidence summary{cursor:pointer}
table.sections td:not(.name){text-align:right}
"""

_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){
 var table=th.closest('table'),body=table.tBodies[0],col=Array.prototype.indexOf.call(th.parentNode.children,th);
 var asc=th.dataset.order!=='asc';th.dataset.order=asc?'asc':'desc';
 var rows=Array.prototype.slice.call(body.rows);
 rows.sort(function(a,b){var x=a.cells[col].textContent,y=b.cells[col].textContent,nx=parseFloat(x),ny=parseFloat(y);
  var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
 rows.forEach(function(r){body.appendChild(r);});});});
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="generator" content="autoprof">
<style>{css}</style>
<script>{plotlyjs}</script>
</head><body>
{body}
<script>{js}</script>
</body></html>
"""

__all__ = [
    "FileReport",
    "NoReadableInputError",
    "OutputError",
    "check_output",
    "clipped",
    "file_report",
    "render",
    "reports",
    "save",
    "short",
    "write",
]
