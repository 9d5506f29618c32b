"""``autoprof report`` and ``autoprof.report``: one self-contained HTML page per run, from the same engine and findings as ``analyze``.

Each trace is one :class:`~autoprof.analysis.engine.Analysis` from the engine's pipeline, its ``page`` part asked for
(:class:`~autoprof.analysis.page.Page`, read where the trace is loaded: the roofline's ops and roofs, each step's time
by where it went, the device's busy spans per step with the largest gaps labelled, memory, the top ops and kernels).
This module measures nothing: :func:`render` draws the analyses with plotly (the optional extra ``autoprof[report]``)
into one HTML file with plotly.js embedded: no CDN, no request, it opens from disk in any browser.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import secrets
import statistics
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from typing import Any

from autoprof.analysis import engine, ranks
from autoprof.analysis.engine import Analysis, Part
from autoprof.analysis.page import (  # noqa: F401 - the page's limits, also read here by their former names
    GAPS_LABELLED,
    MAX_MEMORY_DEVICES,
    MAX_MEMORY_POINTS,
    MAX_OPS,
    MAX_ROWS,
    MAX_SPANS,
    MAX_STEPS,
    MAX_STRIP_STEPS,
    NAME_CAP,
    PARTS,
    Page,
    short,
)
from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.peaks import CPU_PEAK_NAME
from autoprof.rules import memory, regime
from autoprof.trace import chrome, remote
from autoprof.trace.chrome import TraceError
from autoprof.trace.model import Trace

HOLDERS_LABELLED = 3  # ops named beside the peak (all the finding's holders in its hover text)
#: What one free text (a finding's message or advice, an error) may cost: each word at most ``NAME_CAP``.
TEXT_CAP = 2000
SEVERITY_ORDER = ("critical", "error", "warning", "info")
#: The chart's stack, bottom first: the step's own work and overhead up to about its step time, then the waits, then
#: the rest of the period (a trainer's fetch between the steps sits between the step time and the period).
STACK = (
    "compute-bound ops",
    "memory-bound ops",
    "other op work",
    "host overhead",
    "sync",
    "communication",
    "input",
    "loop between steps",
)
#: Each part as the chart's legend says it, in plain words.
PART_WORDS = {
    "input": "input: waiting for data",
    "sync": "syncs: waiting in synchronizing calls",
    "communication": "collectives: waiting for other ranks",
    "compute-bound ops": "op work: compute-bound ops",
    "memory-bound ops": "op work: memory-bound ops",
    "other op work": "op work: other ops",
    "host overhead": "host overhead: the rest of the step",
    "loop between steps": "between steps: the loop's other code",
}


_LONG_WORD = re.compile(rf"\S{{{NAME_CAP + 1},}}")


def clipped(text: Any) -> str:
    """A free text (a message naming ops, an error) as the page shows it: each word as :func:`short` cuts a name,
    the whole at most ``TEXT_CAP`` characters."""
    return short(_LONG_WORD.sub(lambda m: short(m.group()), str(text)), TEXT_CAP)


# -- the runs ------------------------------------------------------------------------------------------


def reports(
    paths: Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    workers: int | None = None,
    jobs: int | None = 1,
    executor: Executor | None = None,
) -> list[Analysis]:
    """Every trace file under ``paths`` as the page reads it: each file's :class:`~autoprof.analysis.engine.Analysis`
    with its ``page`` part (a file that cannot be read: its one-line error), with the cross-rank comparison of
    per-rank traces attached to the lowest rank, as ``analyze`` does (``workers``, ``jobs``, ``executor`` as
    :func:`write`)."""
    return engine.analyze_files(paths, config, workers=workers, jobs=jobs, executor=executor, parts={Part.PAGE})


def _unread(analysis: Analysis) -> str | None:
    """Why the page shows nothing of ``analysis`` but a line: the error that stopped the file, or its ``page`` part
    missing (not asked for); None when it is drawn."""
    if analysis.error is not None:
        return analysis.error
    return f"{analysis.path}: not read for the page" if analysis.page is None else None


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
) -> list[Analysis]:
    """Read ``paths`` and write the page to ``out``; returns what it shows (each file's
    :class:`~autoprof.analysis.engine.Analysis`, with its ``page`` part). ``workers``, ``jobs``, ``executor``: as
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
    bad = [r for r in reps if _unread(r) is not None]
    if len(bad) == len(reps):
        more = f" (and {len(bad) - 1} more inputs that cannot be read)" if len(bad) > 1 else ""
        raise NoReadableInputError(bad[0].path, (bad[0].problem or "cannot be read") + more, [_unread(r) or r.path for r in bad])
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
    "loop between steps": "#c7c7c7",
}


def render(reps: Sequence[Analysis]) -> str:
    """The whole page (a string of HTML) of the analyses (each drawn from its ``page`` part; one without it, or
    with an error, is a line)."""
    go, pio, po = _plotly()
    body: list[str] = [_summary(reps)]
    rank_fig = _ranks_figure(go, reps)
    if rank_fig is not None:
        body.append("<h2>Ranks</h2>" + _fig(pio, rank_fig, "ranks"))
    elif len(reps) > 1:
        body.append('<p class="note">No per-rank chart: these files are not one job\'s per-rank traces.</p>')
    for n, rep in enumerate(reps):
        body.append(_file_section(go, pio, rep, n))
    body.append(_GLOSSARY)
    script = po.get_plotlyjs()
    return _PAGE.format(title="autoprof report", plotlyjs=script, css=_CSS, body="\n".join(body), js=_SORT_JS)


def _fig(pio: Any, fig: Any, div: str) -> str:
    return str(pio.to_html(fig, include_plotlyjs=False, full_html=False, config=_CONFIG, div_id=div))


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _say(x: Any) -> str:
    """A free text (a message, advice, an error) escaped, as :func:`clipped` cuts it."""
    return html.escape(clipped(x))


def _error(rep: Analysis) -> str:
    """A file's error line: its path whole, its problem as :func:`clipped` cuts it."""
    return f"{_esc(rep.path)}: {_say(rep.problem)}" if rep.problem is not None else _say(_unread(rep))


def _records(rep: Analysis) -> list[dict[str, Any]]:
    """The findings as the page shows them (their records; free text is cut where it is shown: :func:`clipped`)."""
    return [f.to_record() for f in rep.findings]


def _summary(reps: Sequence[Analysis]) -> str:
    rows = []
    for n, rep in enumerate(reps):
        if rep.page is None or rep.error is not None:
            rows.append(f'<tr><td><a href="#file{n}">{_esc(rep.path)}</a></td><td colspan="5" class="error">{_error(rep)}</td></tr>')
            continue
        found = _records(rep)
        reg = next((f for f in found if f["rule"] == regime.RULE), None)
        median = f"{statistics.median(rep.step_ns) / 1e6:.2f}" if rep.step_ns else "–"
        period = f"{statistics.median(rep.page.period_ms):.2f}" if rep.page.period_ms else "–"
        counts = {s: sum(1 for f in found if f["severity"] == s) for s in SEVERITY_ORDER}
        failed = [f"{len(rep.failures)} rule(s) failed"] if rep.failures else []
        shown = ", ".join([*(f"{c} {s}" for s, c in counts.items() if c), *failed])
        rows.append(
            f'<tr><td><a href="#file{n}">{_esc(rep.path)}</a></td><td>{rep.rank}</td>'
            f'<td class="verdict">{_say(reg["verdict"]) if reg else "–"}</td><td>{median}</td><td>{period}</td><td>{_esc(shown)}</td></tr>'
        )
    return (
        "<h1>autoprof report</h1><h2>Verdicts</h2>"
        '<table class="summary"><thead><tr><th>trace</th><th>rank</th><th>regime</th><th>median step time (ms)</th>'
        "<th>median step period (ms)</th><th>findings</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="note">Step time: a step alone (its ProfilerStep span). Step period: a step\'s start to the next '
        "step's start: the step and what the loop did before the next began (a trainer fetches the next batch there). "
        "An input-bound run's period is longer than its step time by the wait for data.</p>"
    )


def _file_section(go: Any, pio: Any, analysis: Analysis, n: int) -> str:
    out = [f'<section id="file{n}"><h2>{_esc(analysis.path)}</h2>']
    rep = analysis.page
    if rep is None or analysis.error is not None:
        out.append(f'<p class="error">{_error(analysis)}</p></section>')
        return "".join(out)
    found = _records(analysis)
    out.append(_findings_html(found))
    reg = next((f for f in found if f["rule"] == regime.RULE), None)
    if reg is not None and verdict_shares(reg["evidence"]):
        out.append(_shares_html(reg["evidence"]))
        out.append(_fig(pio, _shares_figure(go, reg["evidence"]), f"shares{n}"))
    if rep.sections:
        out.append(_sections_html(rep, bool(analysis.step_ns)))
    for failure in analysis.failure_lines:  # as analyze: the rule's error, on the page too (its findings are missing)
        out.append(f'<p class="error rule-failure">error: {_say(failure)} (its findings are missing from this page)</p>')
    out.append("<h3>Roofline</h3>")
    if rep.roofline is not None and rep.roofline["ops"]:
        out.append(_fig(pio, _roofline_figure(go, rep), f"roofline{n}"))
        out.extend(f'<p class="note roofline-note">{_esc(line)}</p>' for line in roofline_notes(rep))
        if rep.roofline["peak"] == CPU_PEAK_NAME:
            out.append(f'<p class="note calibrated">{_esc(calibrated_note(rep.roofline["source"]))}</p>')
    else:
        out.append(f'<p class="note">{_esc(rep.roofline_missing)}</p>')
    out.append("<h3>Where each step's period goes</h3>")
    if rep.breakdown:
        out.append(_fig(pio, _steps_figure(go, rep), f"steps{n}"))
        out.append(
            "<p class=\"note\">Each bar is a step's period, its start to the next step's start (the last step: its own "
            "time): the waits in the step and between it and the next (input, syncs, collectives), the ops' work, the "
            "host's overhead (the rest of the step) and the loop's other code between the steps; the step's own work "
            "at the bottom, the waits above it. The dash marks the step time, the diamond the step period.</p>"
        )
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


def _findings_html(findings: list[dict[str, Any]]) -> str:
    items = sorted(findings, key=lambda f: (SEVERITY_ORDER.index(f["severity"]) if f["severity"] in SEVERITY_ORDER else 9, f["rule"]))
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
    "input_period_share": "Input, of the step period",
    "blocked_share": "Blocked in syncs",
    "comm_share": "Communication",
    "work_share": "Work",
    "overhead_share": "Host overhead",
    "device_busy_share": "Device busy",
    "device_idle_share": "Device idle",
    "host_active_share": "Host active",
    "host_own_work_share": "Host's own work",
    "idle_host_wait_share": "Device idle, waiting for the host",
    "input_between_steps_us": "Input between steps",
    "self_cpu_total_us": "Self CPU total",
    "self_device_total_us": "Self device total",
    "cpu_to_device_ratio": "CPU time / device time",
    "peak_flops_per_s": "Peak",
    "achieved_flops_per_s": "Achieved",
}
EVIDENCE_SHOWN = 12  # labelled items on the card
#: What an evidence key means, in plain words (in each item's hover text and beside each raw key): a person reading
#: the page meets no raw key without it.
EVIDENCE_WORDS = {
    "reading": "which reading gave the verdict: device (the device's work was recorded), cpu (a CPU-only run), host_only",
    "device": "the device the reading is for",
    "window_us": "the window's wall time on the host: its steps (a CPU reading adds the input between them)",
    "step_count": "the steps in the window",
    "device_window_us": "the window on the device: to the end of its device work, less the device's time on work not of the window",
    "device_outside_us": "the device's time on work that is not the window's (queued before it, launched between steps)",
    "device_busy_us": "the device running the window's kernels, copies and memsets",
    "device_busy_share": "the device running the window's kernels, copies and memsets, of the window on the device",
    "device_idle_share": "the device running nothing of the window's, of the window on the device",
    "idle_host_wait_share": "of the device's idle time, the part in which it waits for the host's next launch",
    "host_active_us": "the host dispatching ops, in runtime calls or its own work, less its waits",
    "host_active_share": "the host dispatching ops, in runtime calls or its own work, less its waits, of the window",
    "blocked_us": "the host waiting in synchronizing calls (a device synchronize, .item(), a blocking copy)",
    "blocked_share": "the host waiting in synchronizing calls (a device synchronize, .item(), a blocking copy), of the window",
    "blocked_by_call_us": "the wait in synchronizing calls, by call",
    "input_us": "the steps' thread waiting for data (the DataLoader, preparing data); on a device only while the device idles",
    "input_share": "the wait for data, of the window (a window of N steps holds only N - 1 fetches between them)",
    "input_between_steps_us": "the part of the wait for data between the steps (a trainer fetches the next batch before its step begins)",
    "input_period_share": "the wait for data, of the step period (a step's start to the next one's): what each step waits",
    "input_hidden_us": "data loading while the device ran: hidden behind its work, it stalls nothing",
    "input_by_call_us": "where the step prepares data outside the DataLoader",
    "comm_us": "collectives: on a device the collective kernels with no compute beside them; on a CPU the step waiting in them",
    "comm_share": "collectives: on a device the collective kernels with no compute beside them (of the window on the device); "
    "on a CPU the step waiting in them (of the window)",
    "host_comm_us": "the steps' threads waiting in collective calls on the host (gloo, a barrier)",
    "host_comm_share": "the steps' threads waiting in collective calls on the host (gloo, a barrier), of the window",
    "comm_step_median_us": "the median step's wait in collectives",
    "work_us": "op work: the time the ops' own work takes",
    "work_share": "op work: on a device its busy time less exposed collectives (of the window on the device); on a CPU "
    "the ops' time the roofline explains (of the window)",
    "overhead_us": "host overhead: the rest of the step (Python, dispatch, op calls too small to matter)",
    "overhead_share": "host overhead: on a device the host's active time; on a CPU the rest of the step (Python, dispatch, "
    "op calls too small to matter), of the window",
    "host_own_work_us": "host work that launches nothing on the device (decoding, preprocessing, math on CPU tensors)",
    "host_own_work_share": "host work that launches nothing on the device (decoding, preprocessing, math on CPU tensors), of the window",
    "host_own_work_ops": "the host's events with the most of that work",
    "self_cpu_total_us": "the host events' own (self) time summed over the window, as the profiler's table gives it",
    "self_device_total_us": "the device's time on the window's work, summed",
    "cpu_to_device_ratio": "the host's self time over the device's time",
    "method": "how op work was measured: roofline (each op's work costed from its shapes at the peak) or op_self (its own time)",
    "basis": "how op work was split into compute- and memory-bound: by the roofline where a peak is known, else by op family",
    "family_work_share": "op work read by op family (no peak or no shapes), of the window",
    "compute_work_share": "op work limited by arithmetic (compute-bound ops), of the window",
    "memory_work_share": "op work limited by memory bandwidth (memory-bound ops), of the window",
    "unknown_work_share": "op work the roofline cannot cost (no shapes, an unknown op), of the window",
    "op_self_us": "the ops' own (self) time",
    "op_self_share": "the ops' own (self) time, of the window",
    "op_call_count": "op calls in the window",
    "small_op_call_count": "op calls whose work would take less than a call's fixed cost: overhead, not work",
    "call_floor_us": "a call's fixed cost (dispatch): an op whose work takes less is overhead",
    "peak_flops_per_s": "the peak FLOP/s the roofline compares against (on a CPU calibrated: measured on this machine when "
    "autoprof started)",
    "peak_spread_ratio": "how much the calibration's repeated measurements of the peak varied",
    "work_roofline_ratio": "how close the op work runs to its roofline (1: at the peak)",
    "achieved_flops_per_s": "the FLOP/s the op work reached",
    "roofline_shares": "op work split into compute-bound, memory-bound and uncosted",
    "roofline_bound": "the bound that leads the op work",
    "kernels_missing": "the trace launches kernels but recorded no device events: the device's side cannot be read",
    "kernel_launch_count": "kernel launches in the window",
}


def evidence_meaning(key: str) -> str:
    """What an evidence key means, in plain words: :data:`EVIDENCE_WORDS`, else its label."""
    return EVIDENCE_WORDS.get(key) or evidence_label(key)


#: The shares a verdict weighs (``bound_regime``'s evidence): share key, time key, plain words, and which window the
#: share is of on a device (the host's shares are of the window, the device's of the window on the device).
VERDICT_SHARES = (
    ("input_share", "input_us", "input: waiting for data", "window"),
    ("input_period_share", None, "input, of the step period", "step period"),
    ("blocked_share", "blocked_us", "syncs: waiting in synchronizing calls", "window"),
    ("comm_share", "comm_us", "collectives: waiting for other ranks", "device"),
    ("overhead_share", "overhead_us", "host overhead", "window"),
    ("work_share", "work_us", "op work", "device"),
)


def verdict_shares(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict's shares as the page shows them: plain words, the share, what it is of, its time (ms; the
    evidence's own where it has one, else the share of its window's length)."""
    device = evidence.get("reading") == "device"
    rows = []
    for key, time_key, words, of in VERDICT_SHARES:
        value = evidence.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if of == "device":
            of = "the window on the device" if device else "the window"
        elif of == "window":
            of = "the window"
        else:
            of = "the step period"
        if time_key == "overhead_us" and device:
            time_key = "host_active_us"
        time_us = evidence.get(time_key) if time_key else None
        if not isinstance(time_us, (int, float)) and of != "the step period":
            whole = evidence.get("device_window_us" if of == "the window on the device" else "window_us")
            time_us = float(value) * whole if isinstance(whole, (int, float)) else None
        rows.append({"key": key, "words": words, "share": float(value), "of": of, "ms": None if time_us is None else time_us / 1e3})
    return rows


def _ms(ms: float | None) -> str:
    return "–" if ms is None else f"{ms:.3f}"


def _shares_html(evidence: dict[str, Any]) -> str:
    rows = verdict_shares(evidence)
    body = "".join(
        f'<tr data-key="{_esc(r["key"])}"><td>{_esc(r["words"])}</td><td>{r["share"]:.1%}</td><td>{_esc(r["of"])}</td>'
        f"<td>{_ms(r['ms'])}</td></tr>"
        for r in rows
    )
    device = evidence.get("reading") == "device"
    note = (
        "The host's shares (input, syncs, overhead) are of the window on the host, the device's (collectives, op work) of "
        "the window on the device: they need not add up to 100%."
        if device
        else "Shares of the window: the steps and the input between them; input, syncs, collectives, overhead and op work add up to 100%."
    )
    return (
        "<h3>The verdict's shares</h3>"
        '<table class="shares"><thead><tr><th>where the time went</th><th>share</th><th>of</th><th>time (ms)</th></tr></thead>'
        f'<tbody>{body}</tbody></table><p class="note">{_esc(note)} The step period is a step\'s start to the next '
        "step's start: a window of N steps holds only N - 1 fetches between them, so the input's share of the step "
        "period is what each step waits for data.</p>"
    )


def _shares_figure(go: Any, evidence: dict[str, Any]) -> Any:
    rows = verdict_shares(evidence)
    colors = {
        "input_share": _COLORS["input"],
        "input_period_share": _COLORS["input"],
        "blocked_share": _COLORS["sync"],
        "comm_share": _COLORS["communication"],
        "overhead_share": _COLORS["host overhead"],
        "work_share": _COLORS["compute-bound ops"],
    }
    fig = go.Figure(
        go.Bar(
            y=[f"{r['words']} (of {r['of']})" for r in rows],
            x=[round(r["share"] * 100, 2) for r in rows],
            orientation="h",
            marker_color=[colors[r["key"]] for r in rows],
            text=[f"{r['share']:.1%}" for r in rows],
            textposition="auto",
            hovertext=[f"{r['share']:.1%} of {r['of']}" + ("" if r["ms"] is None else f", {r['ms']:.3f} ms") for r in rows],
            hovertemplate="%{hovertext}<extra></extra>",
            name="share",
        )
    )
    fig.update_layout(
        xaxis={"title": "% (of the window or the step period, as each row says)", "range": [0, 100]},
        yaxis={"autorange": "reversed"},
        height=60 + 36 * len(rows),
        margin={"t": 10, "l": 330, "r": 20, "b": 40},
        showlegend=False,
    )
    return fig


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
        f'<span class="item" title="{_esc(k)}: {_esc(evidence_meaning(k))}">'
        f"{_esc(evidence_label(k))} {_say(evidence_value(k, scalars[k]))}</span>"
        for k in order[:EVIDENCE_SHOWN]
    )
    raw = "".join(
        f"<tr><td>{_esc(short(k))}</td><td>{_say(v if isinstance(v, str) else json.dumps(v, default=str))}</td>"
        f'<td class="meaning">{_esc(evidence_meaning(short(k)))}</td></tr>'
        for k, v in evidence.items()
    )
    return (
        f'<div class="evidence">{shown}</div><details class="raw-evidence"><summary>raw evidence (the record\'s keys, '
        "with what each means)</summary>"
        f'<table class="evidence-raw"><tbody>{raw}</tbody></table></details>'
    )


def _sections_html(rep: Page, per_step: bool) -> str:
    """The sections (``autoprof.section`` spans, a trainer's named spans) as a tree: a nested one indented under
    the section it runs inside, the figures :func:`autoprof.analysis.sections.section_times` gives ``analyze``."""
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


def roofline_notes(rep: Page) -> list[str]:
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


def calibrated_note(source: str) -> str:
    """What "calibrated" means under a CPU's roofline."""
    return (
        "Calibrated: a CPU has no datasheet peak, so autoprof measured this machine's peaks when it started (one matrix "
        f"multiply for FLOP/s, one large copy for memory bandwidth; {source}); the roofline and the CPU verdict compare "
        "the ops against these measured peaks."
    )


def _roofline_figure(go: Any, rep: Page) -> Any:
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


def _steps_figure(go: Any, rep: Page) -> Any:
    """Each step's period stacked by where it went (:func:`_breakdown`), the step's own wall time and its period
    (start to the next step's start) marked beside each bar."""
    numbers = [f"step {s['number']}" for s in rep.breakdown]
    fig = go.Figure()
    for part in STACK:
        values = [s["parts_ms"][part] for s in rep.breakdown]
        if any(values):
            words = PART_WORDS[part]
            fig.add_trace(
                go.Bar(x=numbers, y=values, name=words, marker_color=_COLORS[part], hovertemplate="%{y:.3f} ms<extra>" + words + "</extra>")
            )
    fig.add_trace(
        go.Scatter(
            x=numbers,
            y=[s["wall_ms"] for s in rep.breakdown],
            mode="markers",
            name="step time (the step alone)",
            marker={"symbol": "line-ew-open", "size": 24, "color": "#222"},
            hovertemplate="step time %{y:.3f} ms<extra></extra>",
        )
    )
    if any(s.get("period_ms") is not None for s in rep.breakdown):
        fig.add_trace(
            go.Scatter(
                x=numbers,
                y=[s.get("period_ms") for s in rep.breakdown],
                mode="markers",
                name="step period (start to the next step's start)",
                marker={"symbol": "diamond-wide-open", "size": 14, "color": "#d62728"},
                hovertemplate="step period %{y:.3f} ms<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack", yaxis={"title": "ms"}, height=420, margin={"t": 30, "l": 60, "r": 20, "b": 40})
    return fig


def _strip_figure(go: Any, rep: Page) -> Any:
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


def _ranks_figure(go: Any, reps: Sequence[Analysis]) -> Any:
    by_rank = engine.one_job([r for r in reps if r.page is not None])
    if by_rank is None:
        return None
    summaries = {rank: rep.page.rank_summary for rank, rep in by_rank.items() if rep.page is not None and rep.page.rank_summary is not None}
    stragglers: set[int] = set()
    for rep in by_rank.values():
        for f in rep.findings:
            if f.rule == ranks.RULE_STRAGGLER:
                stragglers.update(f.evidence.get("straggler_ranks", []))
    labels = [f"rank {r}" + (" (straggler)" if r in stragglers else "") for r in summaries]
    colors = ["#d62728" if r in stragglers else "#1f77b4" for r in summaries]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[s.step_ms for s in summaries.values()], name="median step (ms)", marker_color=colors))
    waits = [s.wait_ms for s in summaries.values()]
    if any(w is not None for w in waits):
        fig.add_trace(go.Bar(x=labels, y=[w or 0 for w in waits], name="collective wait per step (ms)", marker_color="#9467bd"))
    fig.update_layout(barmode="group", yaxis={"title": "ms"}, height=380, margin={"t": 30, "l": 60, "r": 20, "b": 40})
    return fig


#: The page's words, explained once at its end (docs/report.md says the same).
WORDS = (
    ("step time", "a step alone: its ProfilerStep span, from the step's start to its end."),
    ("step period", "a step's start to the next step's start: the step and what the loop did before the next began (a "
     "trainer fetches the next batch there). The last step of a window has none."),
    ("window", "the steps the profiler recorded, on the host's clock (a CPU reading adds the input between them); the "
     "window on the device runs to the end of its device work, less the device's time on work not of the window."),
    ("input", "the steps' thread waiting for data (the DataLoader, preparing data), in the steps and between them; on a "
     "device only while the device idles (loading while it runs stalls nothing)."),
    ("syncs", "the host waiting in synchronizing calls: a device synchronize, .item(), .cpu(), a blocking copy."),
    ("collectives", "waiting for other ranks: collective kernels with no compute beside them on a device, the step's "
     "thread waiting in collective calls on a CPU."),
    ("host overhead", "the rest of the step: Python, dispatch, op calls whose work is too small to matter; on a device, "
     "the host's active time."),
    ("op work", "the ops' own work: the device's busy time on a device, the op time the roofline explains on a CPU; "
     "compute-bound when arithmetic limits it, memory-bound when memory bandwidth does."),
    ("roofline", "an op's speed against the device's peaks: its FLOP/s against its arithmetic intensity (FLOP per byte "
     "moved), under the lower of the compute and the bandwidth roof."),
    ("calibrated", "a CPU's peaks measured on the machine when autoprof started (one matrix multiply, one large copy), "
     "not taken from a datasheet."),
)  # fmt: skip
_GLOSSARY = (
    '<section id="words"><h2>Words on this page</h2><dl class="words">'
    + "".join(f"<dt>{html.escape(w)}</dt><dd>{html.escape(d)}</dd>" for w, d in WORDS)
    + "</dl></section>"
)

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
dl.words dt{font-weight:600;margin-top:6px}dl.words dd{margin-left:1.5em;color:#444}td.meaning{color:#444}
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


def page_of(analysis: Analysis) -> Analysis:
    """Deprecated (a ``DeprecationWarning``): the page reads the :class:`~autoprof.analysis.engine.Analysis` itself
    (its ``page`` part); returns ``analysis``."""
    warnings.warn("autoprof.render.htmlreport.page_of is deprecated: the page reads the Analysis itself", DeprecationWarning, stacklevel=2)
    return analysis


def file_report(trace: Trace, findings: Sequence[Finding], config: Config | None = None) -> Page:
    """Deprecated (a ``DeprecationWarning``): the former page reader; the ``page`` part of a loaded trace, as
    :func:`autoprof.analysis.engine.page_of` reads it (ask the engine for ``parts={"page"}`` instead)."""
    warnings.warn(
        "autoprof.render.htmlreport.file_report is deprecated: use autoprof.analysis.engine.page_of (parts={'page'})",
        DeprecationWarning,
        stacklevel=2,
    )
    return engine.page_of(trace, findings, config)


def __getattr__(name: str) -> Any:
    """``FileReport``, a former name (a ``DeprecationWarning``): what the page reads of a trace is its
    :class:`~autoprof.analysis.engine.Analysis` now (the ``page`` part: :class:`~autoprof.analysis.page.Page`)."""
    if name == "FileReport":
        warnings.warn(
            "autoprof.render.htmlreport.FileReport is deprecated: the page reads autoprof.analysis.engine.Analysis (its page part)",
            DeprecationWarning,
            stacklevel=2,
        )
        return Analysis
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NoReadableInputError",
    "OutputError",
    "check_output",
    "clipped",
    "render",
    "reports",
    "save",
    "short",
    "write",
]
