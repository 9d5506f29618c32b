"""The one profiler per process: per-target schedules, step counting, the foreign-profiler guard, and
closing a window (extract → analyse → emit).

Threads: each target's schedule is driven by the thread that made its first outermost call (its *owner*).
Calls of the same target from other threads run normally and are annotated while a window records, but do
not count as steps, so concurrent callers can never corrupt the step count.

Closing a window: the owner thread only stops the profiler (``stop_trace``); reading the raw kineto
events, the analysis, the optional trace file and the records run on one background worker thread, which
``atexit`` drains. With ``configure(background=False)`` everything runs on the calling thread.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.autograd.profiler as _autograd_profiler

from autoprof import emit as _emit
from autoprof._files import keep_gzipped, safe_name
from autoprof._pace import PACER, lower_thread_priority
from autoprof.config import SWITCH, Config
from autoprof.findings import record_level
from autoprof.rules import ranks
from autoprof.rules.sections import section_times
from autoprof.trace.model import gc_paused

WAIT, WARMUP, ACTIVE, DONE = 0, 1, 2, 3
#: Names of the ``autoprof.section`` blocks entered while a profiler recorded: each window names them in its trace
#: (``autoprof_sections``), so that its section times are read the same live and offline.
SECTIONS_SEEN: set[str] = set()
KINETO_QUIET = "6"  # kineto's log level above its highest (USDT): none of its own lines
_STEADY_KEEP = 16  # wall times of recent steady calls kept per target (bounded memory)


def profiler_recording() -> bool:
    """True while any torch profiler records (autoprof's own or the user's)."""
    return bool(_autograd_profiler._is_profiler_enabled)


class Target:
    """Schedule and step state of one outermost decorated callable."""

    __slots__ = (
        "active",
        "calls",
        "current",
        "done",
        "first_call_ns",
        "lock",
        "name",
        "owner",
        "pos",
        "recent_ns",
        "repeat",
        "rewind",
        "skip_first",
        "wait",
        "warmup",
        "warned_foreign",
        "warned_yield",
        "window",
    )

    def __init__(self, name: str, schedule: dict[str, int]) -> None:
        self.name = name
        self.skip_first = schedule["skip_first"]
        self.wait = schedule["wait"]
        self.warmup = schedule["warmup"]
        self.active = schedule["active"]
        self.repeat = schedule["repeat"]
        self.calls = 0  # outermost calls by the owner thread
        self.pos = 0  # position in the schedule; stays put while a window cannot open (deferred)
        self.done = False
        self.owner: int | None = None
        self.window = 0  # index of the next window
        self.first_call_ns: int | None = None
        self.recent_ns: list[int] = []
        self.current: Any = None  # the owner's step in progress (instrument._Step), None between steps
        self.rewind = False  # this cycle's window was dropped: its next step starts the cycle's warmup again
        self.warned_foreign = False
        self.warned_yield = False
        self.lock = threading.Lock()

    def phase(self, pos: int) -> tuple[int, bool, bool]:
        """(phase, first of its phase in this cycle, last active step of this cycle)."""
        if pos < self.skip_first:
            return WAIT, False, False
        c = pos - self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat and c // cycle >= self.repeat:
            return DONE, False, False
        k = c % cycle
        if k < self.wait:
            return WAIT, False, False
        if k < self.wait + self.warmup:
            return WARMUP, k == self.wait, False
        return ACTIVE, k == self.wait + self.warmup, k == cycle - 1

    def warmup_start(self, pos: int) -> int:
        """The position where the warmup of ``pos``'s cycle starts (a window is all of its steps or nothing)."""
        if pos < self.skip_first:
            return pos
        cycle = self.wait + self.warmup + self.active
        return self.skip_first + (pos - self.skip_first) // cycle * cycle + self.wait


class Window:
    """One recording window of one target: its profiler and the steps it recorded."""

    __slots__ = ("cpu_peak", "dropped", "prof", "started", "steps", "target", "walls")

    def __init__(self, target: Target, prof: Any, cpu_peak: tuple[float, float] | None) -> None:
        self.target = target
        self.prof = prof
        self.cpu_peak = cpu_peak
        self.started = False
        self.dropped = False  # given up before its end (a user's profiler started, an interrupted step)
        self.steps: list[int] = []
        self.walls: list[int] = []


class Session:
    """Process-wide: at most one autoprof window at a time."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.window: Window | None = None
        self.targets: dict[str, Target] = {}
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._live: Any = None  # the profiler autoprof prepared or started and has not stopped yet
        self._own = threading.local()  # .active: autoprof itself is starting its profiler on this thread

    # -- targets ---------------------------------------------------------------------------------
    def target(self, name: str, schedule: dict[str, int]) -> Target:
        with self.lock:
            t = self.targets.get(name)
            if t is None:
                t = self.targets[name] = Target(name, schedule)
                chosen = SWITCH.config.ranks
                if chosen is not None and _emit.dist_info()[0] not in chosen:
                    t.done = True  # a rank not chosen: only the idle path, never a window
            return t

    # -- window lifecycle (owner thread) -----------------------------------------------------------
    def open(self, t: Target, cfg: Config) -> Window | None:
        """Open a window for ``t`` (prepare the profiler), or find it open; None: deferred (another target's
        window, or a foreign profiler records)."""
        with self.lock:
            if self.window is not None:
                return self.window if self.window.target is t else None
            self._heal()
            if profiler_recording():
                self._foreign(t)
                return None
            from torch.profiler import ProfilerActivity, profile

            from autoprof import engine  # noqa: F401  # imported here, not in the background analysis (GIL)

            _guard_foreign_profilers(self)
            # Kineto prints two "USDT ... profiler_start/stop" lines per window on stderr, in the middle of the JSON
            # records: quiet them unless the user chose a level. Kineto reads the variable once, when the first
            # profiler of the process starts (so it also quiets the user's later profilers, as their own setting
            # would).
            os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
            activities = [ProfilerActivity.CPU]
            cuda = torch.cuda.is_available()
            if cuda:
                activities.append(ProfilerActivity.CUDA)
            cpu_peak = None if cuda else _cpu_peaks()
            prof = profile(activities=activities, record_shapes=cfg.record_shapes)
            self._own.active = True
            try:
                self._live = prof
                prof.prepare_trace()
                # The first record_function of a process resolves its ops (~1 ms here): pay that now, outside
                # the recorded steps, so it does not show up as the first step's host overhead.
                with _autograd_profiler.record_function("autoprof.warmup"):
                    pass
            finally:
                self._own.active = False
            w = self.window = Window(t, prof, cpu_peak)
            return w

    def start(self, t: Target) -> Window | None:
        """Start recording (first active step); the window. None when a foreign profiler took over meanwhile."""
        with self.lock:
            w = self.window
            if w is None or w.target is not t:
                return None
            if w.started:
                return w
            if profiler_recording():
                self._abandon(t)
                return None
            w.started = True  # first: a stop is owed from here on, even if an interrupt lands inside start_trace
            self._own.active = True
            try:
                w.prof.start_trace()
            finally:
                self._own.active = False
            try:  # name the target inside the trace, so the offline analysis reads it as the live one did
                w.prof.add_metadata_json("autoprof_target", json.dumps(t.name))
                if w.cpu_peak:
                    w.prof.add_metadata_json("autoprof_cpu_peak_flops", json.dumps(w.cpu_peak[0]))
                    w.prof.add_metadata_json("autoprof_cpu_peak_bytes_per_s", json.dumps(w.cpu_peak[1]))
                    if _PEAK_SPREAD:
                        w.prof.add_metadata_json("autoprof_cpu_peak_spread_ratio", json.dumps(round(_PEAK_SPREAD[0], 4)))
            except Exception:
                pass
            return w

    def close(self, t: Target, cfg: Config) -> None:
        """Stop the profiler at the end of the window's last step and hand it to the worker."""
        with self.lock:
            w = self.window
            if w is None or w.target is not t:
                return
            self.window = None  # over, stopped or not
            t0 = time.perf_counter_ns()
            sections = sorted(SECTIONS_SEEN)
            try:
                if sections:
                    w.prof.add_metadata_json("autoprof_sections", json.dumps(sections))
            except Exception:
                pass
            try:
                w.prof.stop_trace()
            except Exception as e:
                self._heal()
                _emit.emit("autoprof.error", "error", target=t.name, window=t.window,
                           message=f"profiler stop failed: {e}", reason="profiler", error_type=type(e).__name__)
                return
            except BaseException:  # interrupted: if it still records, stop it before the interrupt goes on
                self._heal()
                raise
            self._live = None
        window = t.window
        t.window += 1
        # The raw events are built here, on the training thread: kineto holds the GIL while it builds them (~2 µs
        # an event), so in the background it would stall the next steps anyway, at an unpredictable place; here it
        # is one known cost, reported as stall_ms. The paced background analysis then only reads Python objects.
        try:
            events = w.prof.profiler.kineto_results.events()
        except Exception as e:
            _emit.emit("autoprof.error", "error", target=t.name, window=window, message=f"reading the window failed: {e}",
                       reason="profiler", error_type=type(e).__name__)
            return
        stall = time.perf_counter_ns() - t0  # what the calling thread pays when work runs in the background
        job = _WindowJob(t.name, window, w.steps, w.walls, w.prof, cfg, t.first_call_ns, _median(t.recent_ns),
                         t.calls, stall, w.cpu_peak, sections, events)
        if cfg.background:
            self._submit(job.run)
        else:
            job.run()

    def drop(self, t: Target) -> None:
        """Discard ``t``'s window without analysing it (an internal failure, an interrupted step, a user's
        profiler): no profiler left running."""
        with self.lock:
            w = self.window
            if w is None or w.target is not t:
                return
            self._discard(w)

    def _discard(self, w: Window) -> None:
        w.dropped = True
        self.window = None
        _stop_quietly(w.prof)
        self._live = None

    def _heal(self) -> None:
        """A profiler autoprof started but no window holds (an interrupt landed between the two): stop it."""
        live = self._live
        if live is not None and (self.window is None or self.window.prof is not live):
            self._live = None
            _stop_quietly(live)

    def before_foreign_start(self) -> None:
        """Called when any profiler starts (see :func:`_guard_foreign_profilers`). If it is not autoprof's own
        and an autoprof window is open, autoprof gives its window up first: two profilers cannot record at
        once (the second silently empties the first), and the user's profiler wins."""
        if getattr(self._own, "active", False):
            return
        with self.lock:
            w = self.window
            if w is None:
                return
            self._discard(w)
            t = w.target
            if t.current is None:  # between steps: this cycle starts again at its warmup (in a step: its finish)
                t.pos = t.warmup_start(t.pos)
            if not t.warned_yield:
                t.warned_yield = True
                t.warned_foreign = True  # one warning for this: the deferrals while your profiler records say nothing
                _emit.emit(
                    "autoprof.warning", "warning", target=t.name, window=t.window,
                    message="a torch.profiler of yours started while autoprof's window recorded: autoprof ended and "
                    "dropped its window so that your profile keeps its events, and records this cycle again once "
                    "your profiler is done",
                    reason="foreign_profiler",
                )

    def _foreign(self, t: Target) -> None:
        if not t.warned_foreign:
            t.warned_foreign = True
            _emit.emit(
                "autoprof.warning", "warning", target=t.name, window=t.window,
                message="another torch.profiler is recording: autoprof does not start its own window (a second "
                "profiler would silently wipe the first); its annotations land in your profile",
                reason="foreign_profiler",
            )

    def _abandon(self, t: Target) -> None:
        w = self.window
        if w is not None:
            self._discard(w)
        self._foreign(t)

    # -- worker ------------------------------------------------------------------------------------
    def _submit(self, fn: Callable[[], None]) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="autoprof-analysis", daemon=True)
            self._worker.start()
        self._queue.put(fn)

    def _work(self) -> None:
        lower_thread_priority()
        while True:
            fn = self._queue.get()
            try:
                if fn is None:
                    return
                PACER.start()  # this job's analysis yields to the training thread (see autoprof._pace)
                fn()
            except Exception:
                pass  # jobs report their own failures
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every closed window has been analysed and emitted. True when drained. The caller waits, so
        the analysis runs at full speed meanwhile."""
        if self._worker is None or not self._worker.is_alive():
            return True
        with PACER:
            if timeout is None:
                self._queue.join()
                return True
            deadline = time.monotonic() + timeout
            while self._queue.unfinished_tasks:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)
            return True

    def shutdown(self) -> None:
        """At exit: stop a window still recording (no profiler left running) and drain the worker."""
        with self.lock:
            w = self.window
            if w is not None:
                self._discard(w)
            self._heal()
        self.flush(timeout=30.0)


def _stop_quietly(prof: Any) -> None:
    """Stop ``prof`` if it records, never raising. Only a profiler that really started is stopped: stopping one
    that never did would disable whichever profiler records now (a user's)."""
    try:
        if _runs(prof):
            prof.stop_trace()
    except Exception:
        pass


def _runs(prof: Any) -> bool:
    """Whether ``prof`` (a torch.profiler.profile) started recording and has not stopped: torch's profiler
    stamps its start once it is enabled and its end when it stops."""
    inner = getattr(prof, "profiler", None)
    started = getattr(inner, "profiling_start_time_ns", None)
    if started is None:  # a torch without these stamps: trust the global flag
        return inner is not None and profiler_recording()
    return bool(started) and not getattr(inner, "profiling_end_time_ns", 0)


def _guard_foreign_profilers(session: Session) -> None:
    """Let ``session`` hear of every profiler that starts, before it starts: torch's profilers call the
    module-level ``_prepare_profiler`` (kineto's ``torch.profiler.profile``, ``torch.autograd.profiler.profile``)
    or ``_run_on_profiler_start`` (``emit_nvtx``, ``emit_itt``) of ``torch.autograd.profiler`` by name. Each is
    replaced once by a pass-through that first calls :meth:`Session.before_foreign_start` (which never
    raises into the caller)."""
    mod = _autograd_profiler
    for attr in ("_prepare_profiler", "_run_on_profiler_start"):
        orig = getattr(mod, attr, None)
        if orig is None or getattr(orig, "_autoprof_guard", False):
            continue

        def guard(*args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
            try:
                session.before_foreign_start()
            except Exception:
                pass
            return __orig(*args, **kwargs)

        guard._autoprof_guard = True  # type: ignore[attr-defined]
        guard.__wrapped__ = orig  # type: ignore[attr-defined]
        setattr(mod, attr, guard)


_PEAK: list[tuple[float, float]] = []


_MATMUL_SIZES = (512, 1024)
_MATMUL_RUNS = 5
_COPY_RUNS = 7
_COPY_FLOATS = 1 << 23  # 32 MB
#: Timings measured so far, kept across attempts: a calibration interrupted (a Ctrl-C, a SIGINT storm) resumes
#: where it stopped instead of starting over, so it completes even when no attempt could run it whole.
_CALIBRATION: dict[str, list[float]] = {}


def _cpu_peaks() -> tuple[float, float] | None:
    """Calibrated CPU peaks (matmul FLOP/s, copy bytes/s), once per process, on the calling thread when the
    first window opens (~0.1 s here), on the thread count the program uses (torch's), so no training work
    competes with it: the best of 5 timed runs (after a warm-up) of float32 matmuls at 512 and 1024, and of 7
    copies of 32 MB (~1.3 ms each). The spread of the best shape's runs goes with them (``_PEAK_SPREAD``). The
    figures are written into the window's trace, so an offline analysis of a kept trace reads them too. The
    regime verdict only uses them to cost each op's work (an op call is work when that takes longer than a call's
    fixed cost), so a peak measured low or high by half moves no verdict of the shipped scenarios."""
    if not _PEAK:
        try:
            for n in _MATMUL_SIZES:
                rates = _CALIBRATION.setdefault(f"mm{n}", [])
                if len(rates) < _MATMUL_RUNS:
                    a = torch.full((n, n), 0.5)  # values do not matter to the timing; filling is cheaper than randn
                    b = torch.full((n, n), 0.5)
                    torch.mm(a, b)
                    while len(rates) < _MATMUL_RUNS:
                        t0 = time.perf_counter()
                        torch.mm(a, b)
                        rates.append(2 * n**3 / (time.perf_counter() - t0))
            copies = _CALIBRATION.setdefault("copy", [])
            if len(copies) < _COPY_RUNS:
                src = torch.empty(_COPY_FLOATS)
                dst = torch.empty_like(src)
                dst.copy_(src)
                while len(copies) < _COPY_RUNS:
                    t0 = time.perf_counter()
                    dst.copy_(src)
                    copies.append(2 * _COPY_FLOATS * 4 / (time.perf_counter() - t0))
            runs = max((_CALIBRATION[f"mm{n}"] for n in _MATMUL_SIZES), key=max)
            best_rate = max(runs)
            _PEAK.append((best_rate, max(copies)))
            _PEAK_SPREAD.append(1.0 - statistics.median(runs) / best_rate if best_rate else 0.0)
        except Exception:
            _PEAK.append((0.0, 0.0))
    f, bw = _PEAK[0]
    return (f, bw) if f and bw else None


_PEAK_SPREAD: list[float] = []


def _median(v: list[int]) -> int | None:
    return int(statistics.median(v)) if v else None


class _WindowJob:
    """Everything after ``stop_trace``: read events, keep the trace file, analyse, emit."""

    def __init__(self, target: str, window: int, steps: list[int], walls: list[int], prof: Any, cfg: Config,
                 first_call_ns: int | None, steady_ns: int | None, calls: int, stall_ns: int,
                 cpu_peak: tuple[float, float] | None, sections: list[str], events: Any) -> None:
        self.target, self.window, self.steps, self.walls = target, window, steps, walls
        self.prof, self.cfg = prof, cfg
        self.first_call_ns, self.steady_ns, self.calls = first_call_ns, steady_ns, calls
        self.stall_ns = stall_ns
        self.cpu_peak = cpu_peak
        self.sections = sections
        self.events = events

    def run(self) -> None:
        t0 = time.perf_counter_ns()
        ctx = {"target": self.target, "window": self.window}
        try:
            from autoprof import engine

            rank, _local, world = _emit.dist_info()
            meta: dict[str, Any] = {"live": True, "sections": self.sections}
            if self.cpu_peak:
                meta["cpu_peak_flops"], meta["cpu_peak_bytes_per_s"] = self.cpu_peak
                if _PEAK_SPREAD:
                    meta["cpu_peak_spread_ratio"] = _PEAK_SPREAD[0]
            if self.first_call_ns is not None and self.steady_ns:
                meta["first_call_ns"] = self.first_call_ns
                meta["steady_call_ns"] = self.steady_ns
            path = self._keep_trace(rank)
            tick = PACER.tick if PACER.active() else None
            cpu0 = time.thread_time_ns()
            with gc_paused():  # one pause for reading and analysing (each pause's end costs a collection)
                trace = engine.window_trace(self.events, tick=tick, target=self.target, rank=rank, world_size=world,
                                            metadata=meta)
                self.events = None  # free the raw events before the rules run
                findings, failures = engine.analyze_trace(trace, self.cfg, tick)
            analysis_cpu = time.thread_time_ns() - cpu0
            overhead = time.perf_counter_ns() - t0 + self.stall_ns
            _emit.emit(
                "autoprof.window", "info", **ctx, source="live",
                steps=self.steps,
                step_wall_ms=[round(w / 1e6, 4) for w in self.walls],
                top_ops=engine.top_ops(trace, self.cfg.top_ops),
                sections=section_times(trace),
                event_count=trace.n_events,
                autoprof_overhead_ms=round(overhead / 1e6, 3),
                analysis_cpu_ms=round(analysis_cpu / 1e6, 3),
                profiled_step_extra_ms=self._profiled_extra_ms(),
                stall_ms=round(self.stall_ns / 1e6, 3),
                calls_total=self.calls,
                first_call_ms=round(self.first_call_ns / 1e6, 4) if self.first_call_ns is not None else None,
                trace_path=path,
            )
            for f in findings:
                _emit.emit("autoprof.finding", record_level(f), **ctx, source="live",
                           **f.to_record())
            for name, err in failures:
                _emit.emit("autoprof.error", "error", **ctx, message=f"rule {name} failed: {err}", reason="rule",
                           error_type=type(err).__name__)
            if world > 1:
                _cross_rank(self.target, self.window, rank, world, ranks.summary_from(rank, self.walls, findings),
                            self.cfg)
        except Exception as e:
            _emit.emit("autoprof.error", "error", **ctx, message=f"window analysis failed: {e}", reason="analysis",
                       error_type=type(e).__name__)
        except BaseException as e:  # a Ctrl-C during an analysis on the calling thread: say so, then let it go on
            _emit.emit("autoprof.error", "error", **ctx, message="window analysis interrupted: the window is dropped",
                       reason="interrupted", error_type=type(e).__name__)
            raise
        finally:
            self.prof = None
            self.events = None

    def _profiled_extra_ms(self) -> float | None:
        """What recording cost the recorded steps: their wall time beyond as many steady unprofiled calls."""
        if not self.steady_ns or not self.walls:
            return None
        return round(max(sum(self.walls) - self.steady_ns * len(self.walls), 0) / 1e6, 3)

    def _keep_trace(self, rank: int) -> str | None:
        d = self.cfg.trace_dir
        if not d:
            return None
        try:
            name = f"{safe_name(self.target)}.window{self.window}.rank{rank}.pt.trace.json.gz"
            return keep_gzipped(os.fspath(d), name, self.prof.export_chrome_trace)
        except Exception as e:
            _emit.emit("autoprof.error", "error", target=self.target, window=self.window,
                       message=f"could not keep the trace in {d}: {e}", reason="trace_dir", error_type=type(e).__name__)
            return None


def _cross_rank(target: str, window: int, rank: int, world: int, summary: ranks.RankSummary | None,
                cfg: Config) -> None:
    """Compare this window across ranks through the default process group's key-value store.

    Every profiled rank writes one small summary (median step time, regime) under
    ``autoprof/<target>/<window>/<rank>``; the lowest profiled rank waits, on this background thread and at
    most ``cross_rank_timeout_s``, for the others, then emits the straggler / regime findings. No collective
    is issued, so ranks that are at different windows, excluded, or gone can never hang the job: the
    comparison is skipped with one warning record. Cost: one store write per rank per window, plus one
    wait and world_size reads on the comparing rank.
    """
    ctx = {"target": target, "window": window}
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return  # no process group: no cross-rank comparison
    chosen = sorted(cfg.ranks) if cfg.ranks is not None else list(range(world))
    chosen = [r for r in chosen if r < world]
    if rank not in chosen:
        return
    if len(chosen) < 2:
        _emit.emit("autoprof.warning", "warning", **ctx, reason="cross_rank_skipped",
                   message=f"cross-rank comparison skipped: only rank(s) {chosen} of {world} are profiled")
        return
    if summary is None:
        return
    prefix = f"autoprof/{target}/{window}/"
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        store = _get_default_store()
        store.set(prefix + str(rank), json.dumps(summary.to_json()))
        if rank != chosen[0]:
            return
        keys = [prefix + str(r) for r in chosen]
        try:
            store.wait(keys, timedelta(seconds=cfg.cross_rank_timeout_s))
        except Exception:
            missing = [r for r, k in zip(chosen, keys) if not _has(store, k)]
            _emit.emit("autoprof.warning", "warning", **ctx, reason="cross_rank_skipped",
                       message=f"cross-rank comparison skipped: rank(s) {missing} did not report window {window} of "
                       f"{target} within {cfg.cross_rank_timeout_s:g} s (excluded, at another window, or gone)")
            return
        got = [ranks.RankSummary.from_json(json.loads(store.get(k))) for k in keys]
        for k in keys:
            try:
                store.delete_key(k)
            except Exception:
                pass
        for f in ranks.check(got):
            _emit.emit("autoprof.finding", record_level(f), **ctx, source="live",
                       **f.to_record())
    except Exception as e:
        _emit.emit("autoprof.warning", "warning", **ctx, reason="cross_rank_skipped",
                   message=f"cross-rank comparison skipped: {type(e).__name__}: {e}")


def _has(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


SESSION = Session()
atexit.register(SESSION.shutdown)

