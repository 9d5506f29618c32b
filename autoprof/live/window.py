"""One closed window's job, after ``stop_trace``: keep the trace file, build the :class:`Trace`, run the rules,
write the records, and hand this rank's summary to the cross-rank exchange.

It runs on the session's background thread (paced, see :mod:`autoprof.live._pace`) or, with
``configure(background=False)``, on the calling thread. It reports its own failures as records and never
raises an Exception.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autoprof import _guard
from autoprof.analysis import drift, ranks
from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.live import exchange
from autoprof.live._files import keep_gzipped, safe_name
from autoprof.live._pace import PACER
from autoprof.live.calibrate import CpuPeaks
from autoprof.live.trigger import Trigger
from autoprof.render import emit as _emit
from autoprof.render import records
from autoprof.trace.model import Trace, gc_paused

if TYPE_CHECKING:
    from autoprof.analysis.engine import Analysis


def host_memory_bytes() -> int | None:
    """This machine's physical memory (the host-memory creep's forecast reads it from the window's metadata); None
    where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) or None
    except (AttributeError, ValueError, OSError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it
        return None


def host_memory_available_bytes() -> int | None:
    """The memory this machine has available now (Linux's ``MemAvailable``); None elsewhere."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it
        return None
    return None


@dataclass(slots=True)
class ClosedWindow:
    """What the training thread knew when it closed a window: all a job needs."""

    target: str
    window: int  # the target's window index
    framework: str | None  # the trainer integration that drives the target, if any
    config: Config
    steps: list[int]  # step numbers recorded
    walls: list[int]  # their wall times (ns)
    calls: int  # outermost calls of the target so far
    first_call_ns: int | None  # wall time of the target's first call
    steady_ns: int | None  # median wall time of recent unprofiled calls
    stall_ns: int  # what closing cost the training thread (stop_trace, and what autoprof did around it)
    stop_ns: int  # the part of it in stop_trace
    cpu_peaks: CpuPeaks | None
    devices: list[dict[str, Any]]  # the CUDA devices' properties, as a chrome export's deviceProperties
    sections: list[str]  # section names seen while profilers recorded
    prof: Any = field(repr=False)  # the stopped torch.profiler.profile (for the kept trace file)
    events: Any = field(repr=False)  # kineto's raw events (None: read from ``results`` by the job)
    skipped_before: int = 0  # windows skipped since the previous one was queued (the analysis was behind)
    reference: list[Any] = field(default_factory=list)  # the target's first window's summary (drift), shared
    trigger: Trigger | None = None  # why a triggered window opened (None: the schedule's window)
    #: The window's index among the target's scheduled windows, which every rank records alike (the cross-rank
    #: exchange's key); None for a triggered window: no other rank recorded it.
    peer_window: int | None = None
    #: The stopped profiler's results (``prof.profiler.kineto_results``), whose raw events the job reads when
    #: ``events`` is None: off the training thread when the job runs in the background.
    results: Any = field(default=None, repr=False)
    read_ns: int = 0  # the time reading the raw events from ``results``
    reader: Reader | None = field(default=None, repr=False)  # the thread that reads them (see :class:`Reader`)
    go: threading.Event = field(default_factory=threading.Event, repr=False)  # set: the reader reads now
    read: threading.Event = field(default_factory=threading.Event, repr=False)  # set: the reader is done with it
    read_error: BaseException | None = field(default=None, repr=False)  # why that read failed
    #: The machine's memory and what it had available when the window started (the host-memory creep's forecast).
    host_memory: tuple[int | None, int | None] = (None, None)
    #: Each recorded step's thread CPU time and run-queue wait (ns; -1: not known): how much of the step the machine
    #: kept the thread off the CPU.
    cpus: list[tuple[int, int]] = field(default_factory=list)
    #: Each recorded step's thread minor page faults (-1: not known).
    faults: list[int] = field(default_factory=list)

    def cpu_share(self) -> float | None:
        """The recorded steps' thread CPU time over their wall time (None where not read)."""
        if not self.cpus or len(self.cpus) != len(self.walls) or any(c < 0 for c, _ in self.cpus) or sum(self.walls) <= 0:
            return None
        return round(min(sum(c for c, _ in self.cpus) / sum(self.walls), 1.0), 4)

    def metadata(self) -> dict[str, Any]:
        """The trace metadata of a live window: what an offline analysis reads from a kept trace's file."""
        meta: dict[str, Any] = {"live": True, "sections": self.sections}
        if self.cpu_peaks:
            meta.update(self.cpu_peaks.metadata())
        step_cpu = step_cpu_of(self.walls, self.cpus, self.faults)
        if step_cpu is not None:
            meta["step_cpu"] = step_cpu
        host, available = self.host_memory
        if host:
            meta["host_memory_bytes"] = host
        if available:
            meta["host_memory_available_bytes"] = available
        if self.first_call_ns is not None and self.steady_ns:
            meta["first_call_ns"] = self.first_call_ns
            meta["steady_call_ns"] = self.steady_ns
        return meta

    def profiled_extra_ms(self) -> float | None:
        """What recording cost the recorded steps: their wall time beyond as many steady unprofiled calls (None for a
        triggered window: its steps' excess is the slowdown it opened for, not the profiler's)."""
        if not self.steady_ns or not self.walls or self.trigger is not None:
            return None
        return round(max(sum(self.walls) - self.steady_ns * len(self.walls), 0) / 1e6, 3)


def step_cpu_of(walls: list[int], cpus: list[tuple[int, int]], faults: list[int] | None = None) -> dict[str, list[int]] | None:
    """The trace metadata's ``step_cpu`` of a window's recorded steps (their wall times, and each one's thread CPU time
    and run-queue wait; ``minflt``, their minor page faults, where read for every step): None where the CPU time was not
    read for every step."""
    if not cpus or len(cpus) != len(walls) or any(c < 0 for c, _ in cpus):
        return None
    out = {"wall_ns": list(walls), "cpu_ns": [c for c, _ in cpus], "runqueue_ns": [w for _, w in cpus]}
    if faults is not None and len(faults) == len(walls) and all(f >= 0 for f in faults):
        out["minflt"] = list(faults)
    return out


def run(job: ClosedWindow, inline: bool = False) -> None:
    """Analyze a closed window and write its records; its own failures are records, never exceptions. An interrupt
    (a Ctrl-C while it runs on the calling thread) drops the window with one record and is re-raised: the user's
    program sees its Ctrl-C. ``inline``: on the thread that closed the window, as it closes (``background`` off, a
    pool worker), whose ``stall_ms`` then counts the analysis up to the record too."""
    started = time.perf_counter_ns()
    ctx: dict[str, Any] = {"target": job.target, "window": job.window}
    if job.framework is not None:
        ctx["framework"] = job.framework
    try:
        with _guard.worker(_failed, ctx):
            rank, _local, world = _emit.dist_info()
            path = _keep_trace(job, rank)
            analysis = _analyze(job, rank, world)
            overhead = time.perf_counter_ns() - started + job.stall_ns
            if inline:  # all of it on the closing thread, before its call returns
                job.stall_ns = overhead
            live = _live(job, analysis, path, overhead)
            for event, level, fields in records.window_records(analysis.analysis, ctx, {"source": "live"}, live):
                _emit.emit(event, level, **fields)
            if world > 1 and job.peer_window is not None:
                summary = ranks.summary_from(rank, job.walls, analysis.findings)
                exchange.compare(job.target, job.peer_window, rank, world, summary, job.config)
    except BaseException as e:  # not an Exception (the worker's boundary records those): a Ctrl-C, a SystemExit
        _emit.error("window analysis interrupted: the window is dropped", "interrupted", e, **ctx)
        raise
    finally:
        prof, job.prof = job.prof, None
        release(prof)
        job.events = job.results = job.reader = None
        job.go.set()  # a reader still waiting for this job moves on (it finds no results)


def _failed(ctx: dict[str, Any], e: Exception) -> None:
    """The record of a window whose analysis failed: torch's failure to hand its events over is a ``profiler`` error
    (as a failed stop is), any other an ``analysis`` one."""
    if isinstance(e, _ReadError):
        cause = e.__cause__ or e
        _emit.error(f"reading the window failed: {cause}", "profiler", cause, **ctx)
    else:
        _emit.error(f"window analysis failed: {e}", "analysis", e, **ctx)


def release(prof: Any) -> None:
    """Free a stopped profiler's results (kineto's events, held in C++ by ``prof.profiler``) now: a
    ``torch.profiler.profile`` is in a reference cycle (its action map holds its own bound methods), so dropping the
    last reference to it frees nothing until the cyclic GC's next full pass. Held meanwhile, each window's results kept
    the process larger, and in runs that kept one profile object per window the next ``stop_trace`` was ~25% slower
    than with torch's one reused object (within the noise of the machine it was measured on)."""
    if prof is None:
        return
    try:
        prof.profiler = None
    except AttributeError:  # a profiler object of another shape (a read-only attribute): left to the GC
        pass


@dataclass
class _Analyzed:
    """A window's trace and its :class:`~autoprof.analysis.engine.Analysis` (the one result type, as offline)."""

    trace: Trace
    analysis: Analysis
    cpu_ns: int  # the analysis thread's CPU time building the trace and analyzing it

    @property
    def findings(self) -> list[Finding]:
        found: list[Finding] = self.analysis.findings
        return found


def _analyze(job: ClosedWindow, rank: int, world: int) -> _Analyzed:
    """Build the trace from the raw events (freed as soon as it stands) and analyze it as a file is
    (:func:`~autoprof.analysis.engine.analysis_of`), the rules paced when the session's pacer runs, with the cyclic
    GC paused once for both (each pause's end costs a collection)."""
    from autoprof.analysis import engine

    tick = PACER.tick if PACER.active() else None
    PACER.hold()  # in the background: the read below, where no reader thread does it (one unpaced call), is no close's
    # (see autoprof.live._pace); the release and the build wait again after the read
    cpu0 = time.thread_time_ns()
    with gc_paused():
        reader, job.reader = job.reader, None
        if reader is not None:  # read now, off the training thread
            job.go.set()
            while not job.read.wait(0.5) and reader.alive():
                pass
            if job.read_error is not None:
                raise _ReadError(job.read_error) from job.read_error
        if job.events is None:
            job.events = _read_events(job)
        PACER.hold()  # again: the next window's close may have begun while the reader read (the read ends at its
        # last event; the release and the build's first slice come right after it)
        # Read: kineto's results are freed now, not at the job's end. Held until then, the next window's stop_trace
        # found none of their memory to reuse and faulted in fresh pages (~5,600 for a 6k-event window, measured:
        # issue 50) whenever the analysis was still running at that stop. The kept trace was written before this.
        job.results = None
        prof, job.prof = job.prof, None
        release(prof)
        trace = engine.window_trace(
            job.events,
            tick=tick,
            target=job.target,
            rank=rank,
            world_size=world,
            metadata=job.metadata(),
            device_properties=job.devices,
        )
        job.events = None  # free the raw events before the rules run
        analysis = engine.analysis_of(trace, job.config, job.target, tick=tick, numbers=job.steps)
    return _Analyzed(trace, analysis, time.thread_time_ns() - cpu0)


def _read_events(job: ClosedWindow) -> Any:
    """The window's raw events, read from the stopped profiler's results: one call into torch that copies each event
    into a Python object while it holds the GIL (it cannot be paced). torch allows it on any thread once the
    profiler stopped; the training thread waits for the GIL meanwhile only when it runs Python, not while it waits
    in a call that releases the GIL (a device synchronization, a large op)."""
    started = time.perf_counter_ns()
    try:
        return job.results.events()
    except Exception as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it during the read: its own, never autoprof's read error
        raise _ReadError(e) from e
    finally:
        job.read_ns = time.perf_counter_ns() - started


class Reader:
    """The one thread that reads closed windows' raw events, in the order they close, each when the job gets to it
    (``go``; a queued window holds kineto's results, not their Python copies). It is started by the training thread
    (:meth:`ensure`, when a window opens), so it has that thread's CPU priority, not the analysis thread's lowest
    one: the read holds the GIL throughout, and at the lowest priority a machine whose cores are busy (a
    DataLoader's workers) would deschedule it while holding it, the training thread waiting for the GIL meanwhile.
    Handing it a window (:meth:`submit`) only queues it: the closing call never waits for a thread to start."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[ClosedWindow] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def ensure(self) -> None:
        """Start the thread if this process has none running (its first window, or a forked child)."""
        if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
            return
        self._queue = queue.SimpleQueue()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._serve, name="autoprof-read", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, job: ClosedWindow, now: bool = False) -> None:
        """Queue ``job``'s read; ``now``: read at once, not when the analysis gets to it (no analysis is ahead of it:
        its copies are read in the steps right after the close, where the schedule leaves any before the next
        window's recorded steps)."""
        self.ensure()
        job.reader = self
        if now:
            job.go.set()
        self._queue.put(job)

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            job.go.wait()
            PACER.unclosed()  # the read holds the GIL for milliseconds: never in a window's close (its stall)
            if job.results is not None and job.events is None:  # None: the job ended without its events
                with _guard.worker(_read_failed, job, catches=BaseException):  # never raised on a thread of autoprof's
                    job.events = _read_events(job)
            job.read.set()


def _read_failed(job: ClosedWindow, e: BaseException) -> None:
    """The reader could not read the job's events: the job says why (torch's own exception where it is one)."""
    job.read_error = (e.__cause__ or e) if isinstance(e, _ReadError) else e


READER = Reader()


class _ReadError(Exception):
    """torch could not hand the window's raw events over (said as a ``profiler`` error, as a failed stop is)."""


def _live(job: ClosedWindow, analyzed: _Analyzed, path: str | None, overhead_ns: int) -> records.LiveWindow:
    """What the window's records hold beyond its :class:`~autoprof.analysis.engine.Analysis`
    (:func:`autoprof.render.records.window_records`, as offline): the steps the training thread timed, what the window
    cost it, its own fields, and its drift from the target's first window (judged by :mod:`autoprof.analysis.drift`)."""
    analysis = analyzed.analysis
    trigger = None
    if job.trigger is not None:  # judged on its steps as the trigger judges steps
        trigger = job.trigger.record(job.steps, drift.trigger_step_times(analysis, job.steps, job.walls, job.cpus))
    return records.LiveWindow(
        steps=job.steps,
        walls=job.walls,
        costs={
            "autoprof_overhead_ms": round(overhead_ns / 1e6, 3),
            "analysis_cpu_ms": round(analyzed.cpu_ns / 1e6, 3),
            "profiled_step_extra_ms": job.profiled_extra_ms(),
            "stall_ms": round(job.stall_ns / 1e6, 3),
            "stall_stop_ms": round(job.stop_ns / 1e6, 3),
            "read_ms": round(job.read_ns / 1e6, 3),
            "windows_skipped": job.skipped_before,
        },
        fields={
            "calls_total": job.calls,
            "first_call_ms": round(job.first_call_ns / 1e6, 4) if job.first_call_ns is not None else None,
            "trace_path": path,
            "trigger": trigger,
            "cpu_share": job.cpu_share(),
        },
        drift=drift.judge(job.reference, job.window, analysis, job.walls),
    )


#: The trace files this process kept (in ``trace_dir``), in the order written: the end-of-run report reads them.
KEPT: list[str] = []
#: This process is a child: ``"forked"``, or ``"started"`` by ``multiprocessing`` (spawn, forkserver); else ''. Its
#: targets start over, so its windows are numbered as its parent's and its siblings' are: under one name each write
#: replaced the one before.
CHILD = ""


def child_tag() -> str:
    """``.pid<pid>`` in a child process (:data:`CHILD`), else ''; what its kept traces' and page's names carry after the
    rank. Not in a started child that is a rank of a distributed job of its own (``mp.spawn``'s ranks: its process group
    initialized here, its rank names its files apart); always in a forked one (it shares its parent's rank)."""
    if not CHILD:
        return ""
    if CHILD == "started":
        dist = sys.modules.get("torch.distributed")
        with _guard.quiet("live.child_tag"):
            if dist is not None and dist.is_available() and dist.is_initialized():
                return ""
    return f".pid{os.getpid()}"


def _keep_trace(job: ClosedWindow, rank: int) -> str | None:
    """Write the window's chrome trace into ``trace_dir`` (when set); its path, or None."""
    folder = job.config.trace_dir
    if not folder:
        return None
    with _guard.worker(_not_kept, job, folder):
        name = f"{safe_name(job.target)}.window{job.window}.rank{rank}{child_tag()}.pt.trace.json.gz"
        path = keep_gzipped(os.fspath(folder), name, job.prof.export_chrome_trace)
        KEPT.append(path)
        return path
    return None


def _not_kept(job: ClosedWindow, folder: Any, e: Exception) -> None:
    _emit.error(f"could not keep the trace in {folder}: {e}", "trace_dir", e, target=job.target, window=job.window)
