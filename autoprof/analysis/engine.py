"""The analysis engine: one entry for live windows and saved files, so both run the same rules."""

from __future__ import annotations

import dataclasses
import operator
import os
import warnings
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar, cast

from autoprof import _guard
from autoprof.analysis import _fleet, page, ranks
from autoprof.analysis.compare import Diff, OpTime, Profile, check_confidence, compare
from autoprof.analysis.page import Page
from autoprof.analysis.sections import section_times
from autoprof.config import SWITCH, Config, user_stacklevel
from autoprof.findings import Finding, RuleFailureWarning, rule_failed, shown
from autoprof.measure.kernels import short_kernel_name
from autoprof.measure.steps import device_step_ns, step_readings, step_times_ns
from autoprof.measure.views import shape_of, view
from autoprof.rules import Shipped, memory, regime, run_rules, ship
from autoprof.rules.sync import profiler_flush_ns
from autoprof.trace import _columns, chrome, live, remote
from autoprof.trace.chrome import TraceError
from autoprof.trace.model import CPU_OP_CODE, KERNEL_CODE, Trace, gc_paused


def analyze_trace(
    trace: Trace, config: Config | None = None, tick: Callable[[], None] | None = None
) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    with gc_paused():
        return run_rules(trace, config, tick)


def window_trace(events: Any, tick: Callable[[], None] | None = None, **kw: Any) -> Trace:
    """A closed window's Trace, from its raw kineto events (``prof.profiler.kineto_results.events()``; never
    FunctionEvents)."""
    with gc_paused():
        return live.from_kineto_events(events, tick=tick, **kw)


def window_summary(trace: Trace, findings: Sequence[Finding], numbers: Sequence[int] | None = None) -> dict[str, Any]:
    """The window record's reading of a trace, the same live and offline: each step's device time
    (``step_device_ms``, in the order of ``numbers``, default the trace's steps), the profiler's own flush
    (``profiler_flush_ms``), and the regime (verdict, reading, roofline shares)."""
    spans = device_step_ns(trace)
    device_ms: list[float | None] | None = None
    if any(spans):
        by_number = {step.number: span for step, span in zip(trace.steps, spans)}
        wanted = [s.number for s in trace.steps] if numbers is None else numbers
        device_ms = [round(span / 1e6, 4) if (span := by_number.get(n)) is not None else None for n in wanted]
    flush = profiler_flush_ns(trace)
    verdict = next((f for f in findings if f.rule == regime.RULE), None)
    return {
        "step_device_ms": device_ms,
        "step_period_ms": step_periods_ms(trace, numbers),
        "profiler_flush_ms": round(flush / 1e6, 4) if flush else None,
        "step_memory_peak_bytes": memory.step_peaks(trace, list(numbers) if numbers is not None else None),
        "regime": {
            "verdict": verdict.verdict,
            "reading": verdict.evidence.get("reading", "cpu"),
            "roofline_shares": verdict.evidence.get("roofline_shares"),
        }
        if verdict is not None
        else None,
    }


def step_periods_ms(trace: Trace, numbers: Sequence[int] | None = None) -> list[float | None] | None:
    """Each step's period on the host's clock: its start to the next recorded step's start (its own time and what the
    loop does before the next step begins: a trainer fetches the next batch there), in the order of ``numbers``
    (default the trace's steps); None for the last step, and for a window of fewer than two steps."""
    steps = sorted(trace.steps, key=lambda s: s.start_ns)
    if len(steps) < 2:
        return None
    by_number = {s.number: nxt.start_ns - s.start_ns for s, nxt in zip(steps, steps[1:])}
    wanted = [s.number for s in steps] if numbers is None else numbers
    return [round(p / 1e6, 4) if (p := by_number.get(n)) is not None else None for n in wanted]


def profile_of(trace: Trace, findings: Sequence[Finding], path: str) -> Profile:
    """A trace's reading for a comparison (:mod:`autoprof.analysis.compare`): step times, each op's calls and self time
    by (name, input shapes), each kernel's calls and device time under its launching op, the same per step (an
    op by the step its call is in, a kernel by its launch's), the devices, each step's memory peak per device, the
    findings. One pass over the window's events."""
    win = view(trace)
    shapes: dict[int, str] = {}

    def shapes_text(i: int) -> str:
        text = shapes.get(i)
        if text is None:
            dims, _ = shape_of(trace, i)
            text = shapes[i] = str(dims) if dims else ""
        return text

    n_steps = len(trace.steps)
    host_step, device_step = win.host_step, win.device_step

    def count(totals: dict[Any, list[int]], per_step: dict[Any, list[int]], key: Any, ns: int, k: int) -> None:
        """One call of ``key`` taking ``ns``, in step ``k`` (-1: none): into its totals and its step's row."""
        entry = totals.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += ns
        if 0 <= k < n_steps:
            row = per_step.get(key)
            if row is None:
                row = per_step[key] = [0] * n_steps
            row[k] += ns

    ops: dict[tuple[str, str], list[int]] = {}
    op_steps: dict[tuple[str, str], list[int]] = {}
    for i in range(trace.n_host):
        if trace.h_cat[i] == CPU_OP_CODE and win.host_in[i]:
            count(ops, op_steps, (trace.host_name(i), shapes_text(i)), trace.h_self[i], host_step[i] if n_steps else -1)
    kernels: dict[tuple[str, str, str], list[int]] = {}
    kernel_steps: dict[tuple[str, str, str], list[int]] = {}
    parent = trace.h_parent
    for d, (h, c, inside) in enumerate(zip(trace.d_launch_host, trace.d_cat, win.device_in)):
        if c != KERNEL_CODE or not inside:
            continue
        op = h
        while op >= 0 and trace.h_cat[op] != CPU_OP_CODE:
            op = parent[op]
        key = (trace.host_name(op), shapes_text(op)) if op >= 0 else ("", "")
        count(kernels, kernel_steps, (*key, short_kernel_name(trace.device_name(d))), trace.d_dur[d], device_step[d] if n_steps else -1)
    devices = sorted({str(p.get("name")) for p in trace.device_properties if p.get("name")}) if trace.n_device else []
    peaks = memory.step_peaks(trace) or {}  # the window record's step_memory_peak_bytes, in the order of the steps
    return Profile(
        path,
        trace.rank,
        [s.dur_ns for s in trace.steps],
        {k: OpTime(c, t) for k, (c, t) in ops.items()},
        {k: OpTime(c, t) for k, (c, t) in kernels.items()},
        devices,
        list(findings),
        trace.n_events,
        op_steps=op_steps,
        kernel_steps=kernel_steps,
        memory_peaks={device: [p for p in series if p is not None] for device, series in peaks.items()},
        step_cpu=step_cpu(trace),
        step_faults=step_faults(trace),
    )


def step_cpu(trace: Trace) -> list[tuple[int, int]]:
    """Each step's thread CPU time and run-queue wait (ns; the wait -1 where not known), in the order of the trace's
    steps, from a live window's ``step_cpu`` metadata (issue 49); empty where the trace has none, or its readings are
    not one per step."""
    meta = step_readings(trace)
    if meta is None or len(meta["cpu_ns"]) != len(trace.steps):
        return []
    return list(zip(meta["cpu_ns"], meta["runqueue_ns"], strict=True))


def step_faults(trace: Trace) -> list[int]:
    """Each step's thread minor page faults, in the order of the trace's steps, from a live window's ``step_cpu``
    metadata; empty where the trace has none, or its readings are not one per step."""
    meta = step_readings(trace)
    if meta is None or len(meta.get("minflt", ())) != len(trace.steps):
        return []
    return list(meta["minflt"])


def profiles(
    paths: Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    workers: int | None = None,
    jobs: int | None = None,
    executor: Executor | None = None,
) -> list[Profile]:
    """The :class:`Profile` of each trace file under ``paths`` (raises :class:`TraceError` on a bad input): each
    file's :class:`Analysis` (:func:`iter_inputs`, ``jobs``/``executor`` as :func:`iter_files`), read for the diff,
    its rule failures with it."""
    listed: list[tuple[int, str | os.PathLike[str] | TraceError]] = []  # (which run, the input)
    seen: set[str] = set()  # a file named twice (``diff a a b``, a directory and a file in it) is read once
    for run, path in enumerate(paths):
        found = 0
        for f in _inputs(path):
            found += 1
            if not isinstance(f, TraceError):
                name = str(f)
                key = name if "://" in name else os.path.realpath(name)
                if key in seen:
                    continue  # its steps would count twice: a narrower interval than the runs give
                seen.add(key)
            listed.append((run, f))
        if not found:
            listed.append((run, TraceError(str(path) or "(no input)", "no trace files found")))
    out: list[Profile] = []
    analyses = iter_inputs([f for _, f in listed], config, workers=workers, jobs=jobs, executor=executor, parts={Part.PROFILE})
    with closing(analyses):
        for (run, _), analysis in zip(listed, analyses):
            if analysis.exc is not None:
                raise analysis.exc
            profile = analysis.profile
            assert profile is not None  # asked for (Part.PROFILE)
            profile.failures = analysis.failure_lines
            profile.run = run
            out.append(profile)
    if not out:
        raise TraceError(", ".join(map(str, paths)) or "(no input)", "no trace files found")
    return out


def diff(
    base: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    new: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    top: int = 10,
    workers: int | None = None,
    confidence: float = 0.95,
    jobs: int | None = None,
    executor: Executor | None = None,
) -> list[Diff]:
    """Compare two runs (each a trace file, a directory of per-rank traces, or a kept ``trace_dir``; ``base`` may be
    several runs, pooled: a baseline of recent runs): one :class:`autoprof.analysis.compare.Diff` per pair of groups (one
    each; else per rank; else per file name, a kept trace's window left out; the files of a group pooled, see
    :func:`autoprof.analysis.compare.compare`), read by the same engine as ``analyze``, with intervals at ``confidence``.
    The per-rank comparison (stragglers) is not part of a side's verdicts. A rank (or file name) only one side holds,
    where others pair, is a Diff with ``missing`` set (the side without it), compared with nothing: its gate cannot be
    evaluated. Raises :class:`autoprof.TraceError` on a
    bad input (one that names no trace file among them). ``workers``, ``jobs``, ``executor``: as :func:`analyze`. An
    option of the wrong type or out of range (``jobs="2"``, ``top=0``, ``confidence=0.3``) is a ``ValueError`` of
    one line naming it, before any file is read."""
    check_call(config=config, workers=workers, jobs=jobs, executor=executor, top=top, confidence=confidence)
    sides = [[p] if isinstance(p, (str, os.PathLike)) else list(p) for p in (base, new)]
    read = [profiles(side, config, workers, jobs, executor) for side in sides]
    return compare(read[0], read[1], top, confidence)


def top_ops(trace: Trace, n: int = 10) -> list[dict[str, Any]]:
    """The ops with the most self CPU time: name, self_cpu_us, calls."""
    self_ns: dict[int, int] = {}  # op name id -> its calls' self time (the names in the order they first come)
    calls: dict[int, int] = {}
    np = _columns.numpy(trace.n_host)
    found = _columns.totals_by_key(np, trace.h_name, trace.h_cat, CPU_OP_CODE, trace.h_self) if np is not None else None
    if found is not None:  # the same totals (see autoprof.trace._columns)
        for nid, t, k in found:
            self_ns[nid], calls[nid] = t, k
    else:
        cpu = CPU_OP_CODE
        for nid, c, t in zip(trace.h_name, trace.h_cat, trace.h_self):
            if c == cpu:
                self_ns[nid] = self_ns.get(nid, 0) + t
                calls[nid] = calls.get(nid, 0) + 1
    top = sorted(self_ns.items(), key=lambda item: -item[1])[:n]
    return [{"name": trace.names[nid], "self_cpu_us": round(t / 1000, 3), "calls": calls[nid]} for nid, t in top]


class Part(str, Enum):
    """A typed part of an :class:`Analysis` that only some commands read, built only when asked (``parts=``), in the
    process that loads the trace (the trace never travels; the part is small and picklable): ``profile``, what the
    diff compares (:class:`~autoprof.analysis.compare.Profile`); ``page``, what the HTML page draws
    (:class:`~autoprof.analysis.page.Page`). A plain string names one too: ``parts={"page"}``."""

    PROFILE = "profile"
    PAGE = "page"


#: What the report read of a loaded trace, in the process that loaded it, before the page became a part
#: (``Views.page``, deprecated): any module-level function of the trace, its findings and the config.
PageReader = Callable[[Trace, Sequence[Finding], Config], Any]


@dataclass(frozen=True)
class Views:
    """Deprecated (a ``DeprecationWarning``): ask for the parts instead, ``parts={"profile", "page"}`` (:class:`Part`).
    ``diff`` asks for the ``profile`` part; ``page`` for the ``page`` part, as that reader reads it (the former
    ``htmlreport.file_report`` reads the same :class:`~autoprof.analysis.page.Page` as :func:`page_of`)."""

    diff: bool = False
    page: PageReader | None = None

    def __post_init__(self) -> None:
        warnings.warn(
            "autoprof.analysis.engine.Views is deprecated: pass parts={'profile', 'page'} instead",
            DeprecationWarning,
            stacklevel=3,
        )

    @property
    def parts(self) -> frozenset[Part]:
        """The parts these views ask for."""
        return frozenset([Part.PROFILE] * self.diff + [Part.PAGE] * (self.page is not None))


#: What asks for an :class:`Analysis`'s parts: their names (:class:`Part` or plain strings), or the former :class:`Views`.
Parts = Collection[Part | str] | Views


def asked(parts: Parts | None) -> frozenset[Part]:
    """The parts ``parts`` asks for; ``ValueError`` (one line) on a name that is no part."""
    if parts is None:
        return frozenset()
    if isinstance(parts, Views):
        return parts.parts
    if isinstance(parts, str):
        parts = [parts]
    out = set()
    for name in parts:
        try:
            out.add(Part(name))
        except ValueError:
            known = ", ".join(repr(p.value) for p in Part)
            raise ValueError(f"parts: {shown(name)} is not a part of an Analysis (the parts: {known})") from None
    return frozenset(out)


@dataclass
class Analysis:
    """One trace's analysis, the one result every command renders (``analyze``'s table and records, ``diff``,
    ``report``): its findings and the rules that failed on it, its steps, top ops, sections and window summary, or the
    error that stopped it; and its typed parts, each built only when asked (``parts=``, :class:`Part`): what the diff
    compares (``profile``) and what the page draws (``page``). Small and picklable whatever the trace's size: a
    worker process returns it."""

    path: str
    _: KW_ONLY
    rank: int = 0
    world_size: int = 1
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    exc: TraceError | None = None
    failures: list[tuple[str, BaseException]] = field(default_factory=list)
    event_count: int = 0
    steps: list[int] = field(default_factory=list)
    step_ns: list[int] = field(default_factory=list)
    step_time_ns: list[int] = field(default_factory=list)  # each step's time: the longer of its host time (host_step_ns) and device time
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # window_summary(): device step times, flush, regime
    profile: Profile | None = None  # the "profile" part: the comparison's reading (its findings: the file's, before cross_rank)
    page: Page | None = None  # the "page" part: what the HTML page draws beyond these fields

    @property
    def problem(self) -> str | None:
        """The error that stopped the file, without the file's name (None: read, or no such error)."""
        return self.exc.problem if self.exc is not None else None

    @property
    def failure_lines(self) -> list[str]:
        """Each failed rule as every output says it: ``rule NAME failed: TYPE: message``."""
        return [rule_failed(name, e, typed=True) for name, e in self.failures]


#: The former name of :class:`Analysis` (``analyze_files`` returned ``FileResult``s): the same class.
FileResult = Analysis


class RuleFailureError(Exception):
    """A rule's exception as a file's result carries it (across processes too): its type's name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name

    def __reduce__(self) -> tuple[Any, ...]:
        return (RuleFailureError, (self.type_name, str(self)))


def analyze_files(
    paths: Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    progress: Callable[[str], AbstractContextManager[Any]] | None = None,
    workers: int | None = None,
    jobs: int | None = None,
    executor: Executor | None = None,
    parts: Parts | None = None,
    views: Views | None = None,
) -> list[Analysis]:
    """Analyze trace files or directories of them (paths or fsspec URLs). Bad inputs become results with ``error``
    set; the good ones are still analyzed. ``progress(label)`` wraps each file's load when files are read one
    after another (the CLI shows a note on a terminal). ``workers``: helper processes for one large file (see
    :func:`autoprof.trace.chrome.load`; 0 = none); ``jobs``, ``executor``: files in parallel (:func:`iter_files`);
    ``parts``: the typed parts to build of each trace (:class:`Part`; ``views``, deprecated: a :class:`Views`)."""
    results = list(iter_files(paths, config, progress, workers, jobs, executor, views if views is not None else parts))
    cross_rank(results)
    return results


def iter_files(
    paths: Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    progress: Callable[[str], AbstractContextManager[Any]] | None = None,
    workers: int | None = None,
    jobs: int | None = None,
    executor: Executor | None = None,
    parts: Parts | None = None,
    views: Views | None = None,
) -> Iterator[Analysis]:
    """Each file's :class:`Analysis`, in input order (the cross-rank comparison is :func:`cross_rank`'s, once all a job's ranks
    are in).

    Files in parallel: ``executor`` (any ``concurrent.futures.Executor``: a Dask ``client.get_executor()``, ...)
    runs :func:`analyze_one` per file, the worker reading the file itself (this process only lists the inputs);
    else ``jobs`` fresh local processes (default: the usable CPUs; never more than those nor than the files; 1 or a
    single file: one after another, here).
    The two levels share the CPUs: files first (they parallelise perfectly, a file's helpers only its parse), then
    what is left: each file's ``workers`` default to 0 unless every job has two CPUs or more."""
    parts = views if views is not None else parts  # the former keyword (deprecated)
    yield from iter_inputs([f for path in paths for f in _inputs(path)], config, progress, workers, jobs, executor, parts)


def iter_inputs(
    inputs: list[str | os.PathLike[str] | TraceError],
    config: Config | None = None,
    progress: Callable[[str], AbstractContextManager[Any]] | None = None,
    workers: int | None = None,
    jobs: int | None = None,
    executor: Executor | None = None,
    parts: Parts | None = None,
) -> Generator[Analysis, None, None]:
    """:func:`iter_files` on inputs already listed (trace files, and the errors that stopped a path's listing): one
    :class:`Analysis` each, in their order (the one pipeline ``analyze``, ``diff`` and ``report`` read files through)."""
    asked(parts)  # a name that is no part: one line before any file is read
    if config is None:
        config = SWITCH.config  # e.g. peaks set with autoprof.configure(peaks=...)
    good = [f for f in inputs if not isinstance(f, TraceError)]
    cpus = _fleet.usable_cpus()
    n = min(jobs, cpus) if jobs is not None else cpus  # more interpreters than CPUs only compete (and the pool: files)
    # memory:// files live in this process only: another process would find none
    here_only = any(isinstance(f, str) and f.startswith("memory://") for f in good)
    # a user's rule that another process cannot import (made by a factory, a lambda, a script's own): all here
    shipped = ship(config.rules) if config.rules else None
    rules_here = bool(config.rules) and shipped is None
    if (executor is None and (n <= 1 or len(good) <= 1 or here_only)) or rules_here:
        for f in inputs:
            if isinstance(f, TraceError):
                yield Analysis(f.path, error=str(f), exc=f)
                continue
            with progress(str(f)) if progress else nullcontext():
                result = analyze_one(str(f), config, workers, None, parts)
            yield result
        return
    yield from _in_parallel(inputs, good, config, workers, n, executor, shipped, parts)


def _in_parallel(
    inputs: list[str | os.PathLike[str] | TraceError],
    good: Sequence[str | os.PathLike[str] | TraceError],
    config: Config,
    workers: int | None,
    jobs: int,
    executor: Executor | None,
    shipped: Shipped | None = None,
    parts: Parts | None = None,
) -> Iterator[Analysis]:
    """:func:`iter_files` with files analyzed by ``executor`` (or a local :class:`~autoprof.analysis._fleet.FilePool`); the
    user's rules travel as ``shipped`` (by import path, see :func:`autoprof.rules.ship`), not in the config."""
    # a host logger stays here: records are written by this process
    portable = config.replace(logger=None, rules=()) if shipped is not None else config.replace(logger=None)
    if workers is None:
        per_job = _fleet.usable_cpus() // max(jobs, 1)
        workers = 0 if executor is not None or per_job < 2 else min(per_job, 4)
    pool = executor if executor is not None else _fleet.FilePool(min(jobs, len(good)))
    done = False
    try:
        futures = [pool.submit(analyze_one, str(f), portable, workers, shipped, parts) for f in good]
        pending = iter(futures)
        for f in inputs:
            if isinstance(f, TraceError):
                yield Analysis(f.path, error=str(f), exc=f)
                continue
            ok, result = _guard.outcome(next(pending).result)
            if not ok:  # the worker died, or the engine could not run the task: this file only
                problem = (
                    f"could not be analyzed: {result}"
                    if isinstance(result, _fleet.WorkerDiedError)
                    else f"could not be analyzed: {type(result).__name__}: {result}"
                )
                err = TraceError(str(f), problem)
                result = Analysis(str(f), error=str(err), exc=err)
            yield result
        done = True
    finally:
        if executor is None:
            assert isinstance(pool, _fleet.FilePool)
            if done:
                pool.shutdown(wait=True)
            else:  # the consumer stopped early (an interrupt, a closed pipe): stop the workers now
                pool.terminate()


def analyze_one(
    path: str, config: Config, workers: int | None = None, rules: Shipped | None = None, parts: Parts | None = None
) -> Analysis:
    """One trace file (a path or an fsspec URL), loaded and analyzed: the task a worker runs for a file (it reads
    the file itself; the result is small and picklable whatever the trace's size). ``rules``: the user's rules as
    :func:`autoprof.rules.ship` sent them (they replace ``config.rules``); one that cannot be imported here is one
    failure of this file's, not the file's error. ``parts``: the typed parts to build of the trace (:class:`Part`)."""
    unshipped: list[tuple[str, BaseException]] = []
    if rules is not None:
        found, unshipped = rules.resolve()
        config = dataclasses.replace(config, rules=found)  # each is checked again when it runs
    ok, trace = _guard.outcome(_load, path, workers)
    if ok:
        return analysis_of(trace, config, path, unshipped, parts)
    if isinstance(trace, TraceError):
        return Analysis(trace.path, error=str(trace), exc=trace)
    err = chrome.failed_load(path, trace)  # MemoryError (a gzip bomb), a loader's bug: this file's one line, the others go on
    return Analysis(path, error=str(err), exc=err)


def analysis_of(
    trace: Trace,
    config: Config,
    path: str,
    failed_before: Sequence[tuple[str, BaseException]] = (),
    parts: Parts | None = None,
    *,
    tick: Callable[[], None] | None = None,
    numbers: Sequence[int] | None = None,
    views: Views | None = None,
) -> Analysis:
    """A loaded trace's :class:`Analysis`, a file's or a live window's: the rules run (``failed_before``: failures
    that came first, a user's rule that could not be imported; ``tick``: the live pacer's, between rules), then what
    the records and the table read of it, and the typed ``parts`` asked for (``numbers``: a live window's step
    numbers, for its summary's per-step device times)."""
    parts = views if views is not None else parts  # the former keyword (deprecated)
    want = asked(parts)
    findings, failures = analyze_trace(trace, config, tick)
    failures = [*failed_before, *failures]
    return Analysis(
        path,
        rank=trace.rank,
        world_size=trace.world_size,
        findings=findings,
        failures=[(name, e if isinstance(e, RuleFailureError) else RuleFailureError(type(e).__name__, str(e))) for name, e in failures],
        event_count=trace.n_events,
        steps=[s.number for s in trace.steps],
        step_ns=[s.dur_ns for s in trace.steps],
        step_time_ns=step_times_ns(trace),
        top_ops=top_ops(trace, config.top_ops if config is not None else Config().top_ops),
        sections=section_times(trace),
        summary=window_summary(trace, findings, numbers),
        profile=profile_of(trace, findings, path) if Part.PROFILE in want else None,
        page=_page(trace, findings, config, parts) if Part.PAGE in want else None,
    )


def _page(trace: Trace, findings: Sequence[Finding], config: Config, parts: Parts | None) -> Page:
    """The ``page`` part (a former ``Views.page`` reader's own result in its place)."""
    reader = parts.page if isinstance(parts, Views) else None
    return cast(Page, reader(trace, findings, config)) if reader is not None else page_of(trace, findings, config)


def page_of(trace: Trace, findings: Sequence[Finding], config: Config | None = None) -> Page:
    """A trace's ``page`` part (:class:`~autoprof.analysis.page.Page`): what the HTML page draws of it, read while it
    is loaded (``findings``: the rules' on it, before the cross-rank comparison)."""
    return page.build(trace, findings, config, top_ops(trace, page.MAX_ROWS), step_periods_ms(trace))


def _inputs(path: str | os.PathLike[str]) -> Iterator[str | os.PathLike[str] | TraceError]:
    """The trace files a path or URL names (or the errors that stopped parts of it), in order."""
    empty = remote.names_nothing(path)  # '' or file://: never the current directory
    if empty is not None:
        yield empty
    elif remote.is_url(path):
        yield from remote.iter_url_inputs(str(path))
    else:
        yield from chrome.iter_trace_inputs(remote.local_path(path))


def _load(f: str | os.PathLike[str], workers: int | None) -> Trace:
    """One trace file; a URL's through a private local copy (its errors and its ``source`` name the URL)."""
    if not remote.is_url(f):
        return chrome.load(f, workers=workers)
    url = str(f)
    with remote.fetched(url) as local:
        try:
            trace = chrome.load(local, workers=workers)
        except TraceError as e:
            raise TraceError(url, e.problem) from None
    trace.source = url
    return trace


class PerFile(Protocol):
    """What :func:`one_job` reads of a file's result (an :class:`Analysis`)."""

    rank: int
    error: str | None
    step_ns: list[int]


_R = TypeVar("_R", bound=PerFile)


def one_job(results: Sequence[_R]) -> dict[int, _R] | None:
    """The readable results of one job's per-rank traces, by rank in rank order whatever came first; None when they
    are not that (one rank, several files of one rank, or no steps)."""
    good = [r for r in results if r.error is None and r.step_ns]
    by_rank = {r.rank: r for r in sorted(good, key=lambda r: r.rank)}
    return by_rank if len(by_rank) >= 2 and len(by_rank) == len(good) else None


def cross_rank(results: list[Analysis]) -> None:
    """Per-rank traces of one job: the straggler and regime comparison, attached to the lowest rank's result
    (as the lowest profiled rank emits it live)."""
    by_rank = one_job(results)
    if by_rank is None:
        return
    summaries = []
    for rank, result in by_rank.items():
        summary = ranks.summary_from(rank, result.step_ns, result.findings)
        if summary:
            summaries.append(summary)
    cross = ranks.check(summaries)
    by_rank[min(by_rank)].findings.extend(cross)
    stragglers = next(
        (finding for finding in cross if finding.verdict == ranks.STRAGGLERS and finding.evidence.get("method") == "collective_wait"), None
    )
    for rank in stragglers.evidence["waiting_ranks"] if stragglers else ():
        result = by_rank[rank]
        result.findings = [
            ranks.as_waiting(finding, stragglers) if finding.rule == ranks.RULE_COMM_SOURCE and stragglers else finding
            for finding in result.findings
        ]


def check_call(
    *,
    config: Any = None,
    workers: Any = None,
    jobs: Any = None,
    executor: Any = None,
    top: Any = 1,
    confidence: Any = 0.95,
) -> None:
    """The options of :func:`analyze`, :func:`diff` and :func:`autoprof.report`, checked before any work as the
    command line checks its own: ``ValueError`` with one line naming the option (``workers="2"``, a string read from
    the environment, is refused here, not blamed on a trace)."""

    def whole(name: str, value: Any, least: int, what: str, none: bool = True) -> None:
        if value is None and none:
            return
        ok = type(value) is not bool
        try:
            n = operator.index(value) if ok else 0
        except TypeError:
            ok = False
        if not ok or n < least:
            also = " or None" if none else ""
            raise ValueError(f"{name} must be {what}: a whole number >= {least}{also}, not {shown(value)}")

    if config is not None and not isinstance(config, Config):
        raise ValueError(f"config must be an autoprof.Config or None, not {shown(config)}")
    whole("workers", workers, 0, "a number of helper processes")
    whole("jobs", jobs, 1, "a number of files analyzed in parallel")
    whole("top", top, 1, "a number of ops and kernels to list", none=False)
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ValueError(f"executor must be a concurrent.futures.Executor (with submit) or None, not {shown(executor)}")
    if type(confidence) is bool or not isinstance(confidence, (int, float)):
        raise ValueError(f"confidence must be a number between 0.5 and 1 (0.95: 95%), not {shown(confidence)}")
    check_confidence(float(confidence))


def analyze(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    config: Config | None = None,
    workers: int | None = None,
    jobs: int | None = None,
    executor: Executor | None = None,
) -> list[Finding]:
    """Findings of saved chrome traces (a file, several files, or a directory of per-rank traces; paths or fsspec
    URLs such as ``s3://bucket/run/``).

    Raises :class:`autoprof.TraceError` (a ``ValueError`` whose message names the file) when an input cannot
    be read; :func:`analyze_files` keeps the good files' findings when some are bad. ``workers``: helper
    processes that parse a large file's events (default: the usable CPUs, at most 4; 0 = none). ``jobs``: files
    analyzed in parallel in fresh local processes (default and most: the usable CPUs); ``executor``: any
    ``concurrent.futures.Executor`` instead (``client.get_executor()`` of a Dask cluster), whose workers read the
    files themselves.

    A rule that fails on a file (raises, returns what it may not, or is not a rule declared with ``autoprof.rule``)
    costs only its own findings there: each failure is one :class:`autoprof.RuleFailureWarning` (``autoprof: FILE:
    rule ID failed: TYPE: message``, as ``autoprof analyze`` and the report say it), the other findings returned.
    An option of the wrong type or out of range (``workers="2"``, ``jobs=0``) is a ``ValueError`` of one line naming
    it, before any file is read.
    """
    check_call(config=config, workers=workers, jobs=jobs, executor=executor)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Finding] = []
    failed: list[str] = []
    for result in analyze_files(paths, config, workers=workers, jobs=jobs, executor=executor):
        if result.exc is not None:
            raise result.exc
        out.extend(result.findings)
        failed.extend(f"autoprof: {result.path}: {line}" for line in result.failure_lines)
    for line in failed:  # after every file: a warning made an error (simplefilter) stops nothing half-read
        warnings.warn(line, RuleFailureWarning, stacklevel=user_stacklevel())
    return out
