"""The one profiler per process: each target's state, the profiler's life (prepare, start, stop, drop), the
foreign-profiler guard, and the background worker that analyzes closed windows.

A target's state is in small parts, each written through its own methods only (:class:`Position`: where it stands in
its schedule; the trigger's :class:`~autoprof.live.trigger.Watch`; :class:`Said`: the warnings it gave; this run's
:class:`Counts`; the drift reference), and a step's bookkeeping is one call into the session at each of its ends: :meth:`Session.begin_step`
(which returns what the instrument does: record, annotate, nothing) and :meth:`Session.end_step`.

Threads: each target's schedule is driven by the thread that made its first outermost call (its *owner*), until
that thread ends (a window of it still open is cut then, on that thread) and the next thread that calls it takes it on.
Calls of the same target from other threads run normally and are annotated while a window records, but do
not count as steps, so concurrent callers can never corrupt the step count.

Closing a window: the owner thread stops the profiler (``stop_trace``) and takes kineto's raw events; the
analysis, the optional trace file and the records (:mod:`autoprof.live.window`) run on one background worker
thread, which ``atexit`` drains (and then writes the end-of-run report, ``configure(report=True)``). With
``configure(background=False)`` everything runs on the calling thread. Next door: the schedule arithmetic
(:mod:`autoprof.live.schedule`), the CPU calibration (:mod:`autoprof.live.calibrate`), a window's job
(:mod:`autoprof.live.window`) and the cross-rank exchange (:mod:`autoprof.live.exchange`).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import statistics
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.autograd.profiler as _autograd_profiler

from autoprof import _guard
from autoprof.config import SWITCH, Config
from autoprof.live import _exiting, calibrate
from autoprof.live import window as _window
from autoprof.live._pace import PACER, lower_thread_priority
from autoprof.live.calibrate import CpuPeaks
from autoprof.live.schedule import Phase, Place, Schedule
from autoprof.live.trigger import Settings, Trigger, Watch, aim
from autoprof.render import emit as _emit

#: Names of the ``autoprof.section`` blocks entered while a profiler recorded: each window names them in its trace
#: (``autoprof_sections``), so that its section times are read the same live and offline.
SECTIONS_SEEN: set[str] = set()
KINETO_QUIET = "6"  # kineto's log level above its highest (USDT): none of its own lines
STEADY_KEEP = 16  # wall times of recent steady calls kept per target (bounded memory)
#: A window whose target makes no call while other targets are turned away this many times is given up: a
#: target called a few times and never again (a warm-up pass, a one-off evaluation) would hold the one window
#: slot for the rest of the process. Counted in calls, not seconds: deterministic, and a long step of the
#: holder is never cut (it is in a step, not absent).
ABANDON_AFTER = 16
#: Closed windows waiting for the background analysis, at most: past it a window is skipped (counted, and said
#: in the next window's record), never queued without limit (repeat=0 on a fast step closes windows faster than
#: a paced analysis reads them).
MAX_PENDING = 4
#: A scheduled window cut this many times in a row by a step that raised (an exception, a cancelled task; not a Ctrl-C)
#: is given up: each cut sends the cycle back to its warmup, so a step that fails one call in four kept the profiler
#: recording for most of the run and never wrote a window. A whole window starts the count over, and so does a new run.
MAX_CUT_TRIES = 3
#: At exit, how long the main thread waits for another thread's window to be cut by that thread (see Session.exit).
EXIT_WAIT_S = 0.5


#: The signal module's C functions (``_guard.SIGNAL_C``). ``signal.signal`` and ``signal.getsignal`` convert the handler
#: they return to ``signal.Handlers`` by raising and catching a KeyError in ``Enum.__new__`` for any handler that is not
#: SIG_DFL or SIG_IGN: ~10 µs a swap and back here against ~0.8 µs. A KeyboardInterrupt raised inside that except clause
#: (the Ctrl-C sweep test raises one at every line) left the KeyError as the main thread's handled exception, and CI's
#: next failing assertion came chained onto a dozen of them. These raise nothing.
_signal = _guard.SIGNAL_C


class _SignalsHeld:
    """Python's signal handlers held back while autoprof changes the profiler's state (prepare, start, stop, tear down)
    and its own record of it: a Ctrl-C is delivered as soon as the change is whole, never inside it.

    torch's profiler calls are Python code around C++ calls (``_start_trace``: set the module's flag, enable kineto,
    stamp the start; ``__exit__``: disable kineto, stamp the end, clear the flag). A KeyboardInterrupt raised between
    two of those lines tore them: a profiler enabled with no start stamp (never stopped: left recording, a foreign
    profiler for every later window, a crash at exit) or disabled with no end stamp (stopped again: kineto's "disableProfiler
    called but no active profiling session found", "Requested callback is not found", then exit -11). Inside a held
    section every Python-level handler (SIGINT's, and any other signal's the program installed) is replaced by one that
    only notes the signal; at the end of the outermost section the program's handlers are put back and each noted
    signal is handed to its handler, in the order it came (the first that raises ends the delivery, as Python's own
    does). Only the main thread runs Python's signal handlers: elsewhere this holds nothing and is not needed. Nested
    sections hold once. A handler left held by an interrupted restore is put back by the next section."""

    __slots__ = ("depth", "pending", "saved")

    def __init__(self) -> None:
        self.depth = 0
        self.saved: dict[int, Any] = {}  # signal -> the program's handler, while held
        self.pending: list[tuple[int, Any]] = []  # (signal, frame) noted while held, in order

    def _note(self, signum: int, frame: Any) -> None:
        self.pending.append((signum, frame))

    def __enter__(self) -> None:
        # (not threading.current_thread(): on a thread Python has already forgotten, as its end frees its targets, it
        # made a _DummyThread that stayed in threading.enumerate(), and the usual join-every-thread loop raised)
        if threading.get_ident() != threading.main_thread().ident:
            return
        if self.depth == 0:
            note = self._note
            try:
                for signum in _HANDLED_SIGNALS:
                    handler = _signal.getsignal(signum)
                    if callable(handler) and handler != note:
                        self.saved[signum] = handler  # kept before it is replaced: an interrupt between the two loses nothing
                        _guard.note_handler(handler)
                        _signal.signal(signum, note)
            except (ValueError, OSError, TypeError) as e:
                if _guard.from_signal_handler(e):  # the program's handler raised it, before its signal was held
                    self._restore()
                    raise
                # not the main interpreter's main thread (a subinterpreter): nothing held, as on another thread
            except BaseException:
                self._restore()
                raise
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        if threading.get_ident() != threading.main_thread().ident or self.depth == 0:
            return
        self.depth -= 1
        if self.depth:
            return
        handlers = dict(self.saved)
        self._restore()
        pending, self.pending = self.pending, []
        for signum, frame in pending:
            handler = handlers.get(signum)
            if callable(handler):
                _guard.deliver(handler, signum, frame)  # SIGINT's default raises KeyboardInterrupt here: the change is whole

    def _restore(self) -> None:
        """Put the program's handlers back (SIGINT's last: a Ctrl-C cannot cut the loop before the others are back). A
        handler stays in ``saved`` until it is back, so a restore cut short is finished by the next section."""
        for signum in sorted(self.saved, key=lambda s: s == signal.SIGINT):
            try:
                if _signal.getsignal(signum) == self._note:
                    _signal.signal(signum, self.saved[signum])
            except (ValueError, OSError, TypeError) as e:
                if _guard.from_signal_handler(e):
                    raise  # the program's handler raised it: the next section finishes this restore
            del self.saved[signum]

    def after_fork_in_child(self) -> None:
        """A child forked while another thread held the handlers: put them back (the child's main thread is the one
        that forked; it is in no section)."""
        self.depth = 0
        self.pending = []
        if self.saved:
            self._restore()


#: The signals whose Python-level handler a held section replaces (see :data:`autoprof._guard.HANDLED_SIGNALS`).
_HANDLED_SIGNALS = _guard.HANDLED_SIGNALS
#: ``with SIGNALS_HELD:`` holds signals back across a change of the profiler's state (see :class:`_SignalsHeld`).
SIGNALS_HELD = _SignalsHeld()


def profiler_recording() -> bool:
    """True while any torch profiler records (autoprof's own or the user's)."""
    return bool(_autograd_profiler._is_profiler_enabled)


class Position:
    """A target's place in its schedule, one part of its :class:`Target`, written through these methods only: the schedule
    that runs (the target's own, or a triggered window's in its place, the own kept in :attr:`saved` to come back to), the
    position in it (it stays put while a window cannot open: deferred), whether this cycle's window was dropped (its next
    step starts the cycle's warmup again), and the triggered window in progress (why it opened, its tries)."""

    __slots__ = ("pos", "rewind", "saved", "schedule", "tries", "trigger")

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.pos = 0
        self.rewind = False
        self.saved: tuple[Schedule, int, bool] | None = None  # the own schedule, position and done while triggered
        self.trigger: Trigger | None = None
        self.tries = 0  # windows opened for the triggered window in progress (a try cut short is tried again)

    def own(self) -> Schedule:
        """The target's own schedule (the one kept while a triggered window's runs)."""
        return self.saved[0] if self.saved is not None else self.schedule

    def place(self) -> Place:
        return self.schedule.place(self.pos)

    def advance(self) -> None:
        """A step of the schedule was taken."""
        self.pos += 1

    def to_warmup(self) -> None:
        """Back to this cycle's warmup: a window is all of its steps or nothing."""
        self.pos = self.schedule.warmup_start(self.pos)

    def redo(self) -> None:
        """This cycle's window was dropped: the next step starts its warmup again."""
        self.rewind = True

    def take_rewind(self) -> None:
        """At a step's start: a cycle whose window was dropped starts its warmup again."""
        if self.rewind:
            self.rewind = False
            self.to_warmup()

    def next_cycle(self) -> None:
        """This cycle's window is skipped whole: on to the next cycle's wait."""
        self.pos = self.schedule.next_cycle(self.pos)

    def tried(self) -> int:
        """A window opened for the triggered window in progress: the tries before this one."""
        tries = self.tries
        self.tries = tries + 1
        return tries

    def swap_in(self, schedule: Schedule, trigger: Trigger, done: bool) -> None:
        """Run ``schedule`` (a triggered window's, for ``trigger``) from its start, the own one kept with its position."""
        self.saved = (self.schedule, self.pos, done)
        self.schedule = schedule
        self.pos = 0
        self.trigger = trigger
        self.rewind = False
        self.tries = 0

    def swap_back(self) -> bool | None:
        """Back to the own schedule where it was; the ``done`` it had then (None: no triggered window ran)."""
        saved, self.saved = self.saved, None
        self.trigger = None
        if saved is None:
            return None
        self.schedule, self.pos, done = saved
        self.rewind = False
        return done


class Counts:
    """A target's counts in this run, one part of its :class:`Target` (a new run starts new ones), written through these
    methods only: its outermost calls (the owner thread's; the trigger's watch holds the idle calls it timed and not yet
    settled, which :attr:`Target.calls` adds), the first call's wall time and recent steady ones (bounded), the
    scheduled windows cut in a row by a step that raised (see :data:`MAX_CUT_TRIES`), the calls whose window could not
    open or start because the profiler was taken (another target's window, a profiler of the user's: each sent its cycle
    back to its warmup), the cycles skipped whole because the background analysis was :data:`MAX_PENDING` windows
    behind, and its windows that closed then and were skipped unread (all said at exit if it never recorded)."""

    __slots__ = ("calls", "cut_tries", "deferred", "first_call_ns", "recent_ns", "skipped_behind", "skipped_closed")

    def __init__(self) -> None:
        self.calls = 0
        self.first_call_ns: int | None = None
        self.recent_ns: list[int] = []
        self.cut_tries = 0
        self.deferred = 0
        self.skipped_behind = 0
        self.skipped_closed = 0

    def settle(self, calls: int) -> None:
        """The owner's count is ``calls`` (the watch's pending calls taken in, or left out)."""
        self.calls = calls

    def took(self, wall_ns: int, first: bool, steady: bool) -> None:
        """A call that ran took ``wall_ns``: counted, and its time kept if it is the ``first`` call's, or a ``steady``
        one's (among the recent)."""
        self.calls += 1
        if first:
            self.first_call_ns = wall_ns
        elif steady:
            recent = self.recent_ns
            recent.append(wall_ns)
            if len(recent) > STEADY_KEEP:
                del recent[0]

    def cut(self) -> int:
        """A scheduled window cut by a step that raised: the cuts in a row so far."""
        self.cut_tries += 1
        return self.cut_tries

    def whole(self) -> None:
        """A window closed whole: the cuts in a row start over."""
        self.cut_tries = 0

    def defer(self) -> None:
        self.deferred += 1

    def skip(self) -> None:
        self.skipped_behind += 1

    def skip_closed(self) -> None:
        self.skipped_closed += 1


class Said:
    """The warnings a target already gave, one part of its :class:`Target`: each kind is said once (a process; a run for
    ``incomplete``, forgotten when a run starts over). Kinds: ``foreign`` (a profiler of the user's found running),
    ``yield`` (autoprof's window given up to one), ``abandoned``, ``incomplete`` (a window cut short)."""

    __slots__ = ("kinds",)

    def __init__(self) -> None:
        self.kinds: set[str] = set()

    def __contains__(self, kind: str) -> bool:
        return kind in self.kinds

    def once(self, kind: str, *also: str) -> bool:
        """Whether ``kind`` is to be said now (not said before): from here it is said, and so is each of ``also``."""
        if kind in self.kinds:
            return False
        self.note(kind, *also)
        return True

    def note(self, *kinds: str) -> None:
        """``kinds`` count as said (another warning said them)."""
        self.kinds.update(kinds)

    def forget(self, kind: str) -> None:
        self.kinds.discard(kind)


class Step:
    """The bookkeeping of one step of a target's schedule on its owner thread (the instrument's step extends it with the
    annotations it entered): written by the session as it learns it (:meth:`Session.begin_step`), read back when the step
    ends (:meth:`Session.end_step`). ``window`` is set the moment the window is opened or found, so that an interrupt
    anywhere after still drops it."""

    __slots__ = ("advance", "annotations", "cpu0", "faults0", "last", "number", "recording", "target", "window")

    def __init__(self, target: Target, number: int) -> None:
        self.target = target
        self.annotations: list[Any] = []  # the annotations the instrument entered for it (exited at its end)
        self.cpu0: tuple[int, int] | None = None  # a recorded step's thread CPU time and run-queue wait at its start
        self.faults0 = -1  # a recorded step's thread minor page faults at its start (-1: not known)
        self.number = number  # the step's number (the trainer's own, else the target's calls so far)
        self.window: Window | None = None  # the window it belongs to (opened, or found open)
        self.advance = True  # whether it takes a step of the schedule (not when its window is deferred or skipped)
        self.last = False  # the last active step of its window: the window closes after it
        self.recording = False  # its window records it

    def close_annotations(self) -> None:
        """Exit the step's own annotations (its profiler is about to stop): the instrument's step has some."""

    def finish(self, wall_ns: int, raised: bool = False) -> None:
        """After the call (see the instrument's step); here: only the bookkeeping."""
        SESSION.end_step(self, wall_ns, raised)


#: What the instrument does at a step's start (:meth:`Session.begin_step`): nothing, annotate the call while a profiler
#: records, or record the step (its ``ProfilerStep#`` and the target's annotations, its CPU reading).
BARE, ANNOTATE, RECORD = 0, 1, 2
_OVER = Place(Phase.DONE, False, False)


class _Plain:
    """Whether any target's calls ever took the plain idle path (``done`` and ``plain``: see :attr:`Target.idle`),
    which marks no depth, not even a count, so that every idle call pays for its checks only. Once true, a decorated
    call (or a trainer loop's step) that finds its thread's depth at 0 looks up its own stack for a plain idle call
    holding it (autoprof.live.instrument's ``_held``): exact, and paid by the calls that are not idle only. Never
    false again in a process: a plain call may still be in flight when its target leaves the idle path (a tick that
    arms a triggered window, a holder found)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False


PLAIN = _Plain()


class Target:
    """One outermost decorated callable: its name and options, its owner thread and driving run, and its state in small
    parts, each written through its own methods only: its :class:`Position` in the schedule, the trigger's
    :class:`~autoprof.live.trigger.Watch`, the warnings it already gave (:class:`Said`), this run's :class:`Counts`, and
    the drift reference (its first window's summary, a list the window's analysis fills). Its windows' index and the
    triggered ones go on across runs. ``idle``, ``done``, ``plain``, ``watch`` and ``owner`` are
    plain slots the idle path reads; ``done`` and ``plain`` are written through :meth:`_state` only, which keeps
    ``idle`` (both) true to them and sets :data:`PLAIN` before ``idle`` is first true."""

    __slots__ = (
        "counts",
        "current",
        "done",
        "driver",
        "framework",
        "idle",
        "lock",
        "name",
        "owner",
        "plain",
        "position",
        "profile_memory",
        "reference",
        "said",
        "triggered",
        "watch",
        "watching",
        "window",
    )

    def __init__(self, name: str, schedule: Schedule) -> None:
        self.name = name
        self.position = Position(schedule)
        self.owner: int | None = None
        # the run that drives it now: a weak reference to the Steps (a trainer integration's) whose run began last; a
        # stale one (an earlier trainer's, stopped by its garbage collection) cuts nothing of this run's
        self.driver: Any = None
        self.window = 0  # index of the next window
        self.framework: str | None = None  # the trainer integration that drives it (its records say so)
        self.profile_memory: bool | None = None  # its decorator's profile_memory (None: configure()'s)
        self.said = Said()
        self.lock = threading.Lock()
        #: The trigger's settings for this target (None: no trigger), set by its first call's wrapper before the call.
        self.watching: Settings | None = None
        self.triggered = 0  # triggered windows so far (the cross-rank exchange counts only the scheduled ones)
        #: No call of it was seen to hold a decorated call (or a trainer's step) nor to be held by one: its idle path
        #: marks no thread-local depth (autoprof.live.instrument). Learned from the stack, by the first such call.
        self.plain = True
        self.restart(done=False)  # done, and idle (done and plain: the one slot the wrappers' idle path tests)

    def restart(self, done: bool) -> None:
        """Start the schedule over, as on a first call (its creation, a trainer's new run, a forked child): its first
        call is cold again, its windows count from the next index. ``done``: a rank that is not chosen stays on the
        idle path."""
        # a triggered window's schedule ran: the target's own is the one to start over
        self.position = Position(self.position.own())
        self.counts = Counts()  # this run's calls, cuts, deferrals and skipped cycles
        self._state(done, self.plain)
        # its first window's summary, filled by that window's analysis (drift); a new list: a window of the previous
        # run still being analysed keeps its own
        self.reference: list[Any] = []
        self.current: Any = None  # the owner's step in progress (a Step), None between steps
        self.said.forget("incomplete")  # a window cut short is said once a run
        # the trigger: the baseline of step times (None: off, or a rank not chosen)
        self.watch: Watch | None = Watch(self.watching) if self.watching is not None and not done else None

    def after_fork(self, done: bool) -> None:
        """In a forked child: no owner yet, a fresh lock (one held by another of the parent's threads is never
        released), the schedule over."""
        self.lock = threading.Lock()
        self.owner = None
        self.restart(done)

    # -- read-only views of the position (the tests' and the records' words) ----------------------------------------
    @property
    def schedule(self) -> Schedule:
        return self.position.schedule

    @property
    def pos(self) -> int:
        return self.position.pos

    @property
    def saved(self) -> tuple[Schedule, int, bool] | None:
        """The own schedule, position and done while a triggered window's schedule runs in its place; else None."""
        return self.position.saved

    @property
    def trigger(self) -> Trigger | None:
        return self.position.trigger

    @property
    def calls(self) -> int:
        """Outermost calls so far (the owner thread's, and every idle call the trigger timed: the idle path counts
        nothing itself, its watch's starts do)."""
        watch = self.watch
        return self.counts.calls + (watch.pending() if watch is not None else 0)

    # -- who calls it, and how -------------------------------------------------------------------------------------
    def claim(self, me: int) -> bool:
        """Whether thread ``me`` owns the target (the first thread that makes an outermost call of it does)."""
        if self.owner is None:
            with self.lock:
                if self.owner is None:
                    self.owner = me
                    _at_thread_end(self)
        return self.owner == me

    def release(self) -> None:
        """Its owner thread ended: the next thread that calls it claims it (:meth:`claim`)."""
        with self.lock:
            self.owner = None

    def nests(self) -> None:
        """One of its calls holds a decorated call or is held by one: its idle path marks the depth from now."""
        self._state(self.done, False)

    def _state(self, done: bool, plain: bool) -> None:
        """Set ``done`` and ``plain``, and with them ``idle`` (:data:`PLAIN` first: a call that a plain idle call
        holds looks for it on the stack from then on)."""
        self.done = done
        self.plain = plain
        if done and plain:
            PLAIN.seen = True
        self.idle = done and plain

    def options(self, profile_memory: bool | None, trigger: Settings | None) -> None:
        """Its decorator's options, read at its first call: ``profile_memory`` (None: configure()'s), and the trigger's
        settings (None: no trigger; a watch already on stays)."""
        if profile_memory is not None:
            self.profile_memory = profile_memory
        if trigger is not None and self.watching is None:
            self.watch_with(trigger)

    def drive(self, driver: Any) -> None:
        """The run of ``driver`` (a weak reference to a Steps) drives it from now."""
        self.driver = driver

    def run_by(self, framework: str | None) -> None:
        """The trainer integration whose steps it takes (its records say so)."""
        self.framework = framework

    def retire(self) -> None:
        """No window of its own any more (its schedule is over, its windows were given up, or autoprof gave it up): the
        idle path from its next call."""
        self._state(True, self.plain)

    def give_up(self) -> Any:
        """autoprof gives the target up (its own failure): the idle path from now; the step in progress, if any, left
        for the caller to undo."""
        self._state(True, self.plain)
        step, self.current = self.current, None
        return step

    # -- a step ----------------------------------------------------------------------------------------------------
    def enter(self, step: Step) -> None:
        """``step`` is the owner's step in progress from now, before anything else changes; one whose end an interrupt
        skipped (it landed as a function was entered) is finished first (its annotations exited, its window dropped)."""
        stale, self.current = self.current, step
        if stale is not None:
            stale.finish(-1)

    def leave(self, wall_ns: int) -> Any:
        """The owner's step ends (``wall_ns`` < 0: the call never ran): no step in progress from now; the step, to be
        finished by the caller. A call that ran is counted."""
        step, self.current = self.current, None
        if wall_ns >= 0:
            self.counts.took(wall_ns, self.calls == 0, not self.done)  # as account() counts it
        return step

    def account(self, wall_ns: int) -> None:
        """Count an outermost call that ran, keeping its wall time (the first call's, then recent steady
        ones: bounded memory)."""
        self.counts.took(wall_ns, self.calls == 0, not self.done)

    def _count(self, calls: int) -> None:
        watch = self.watch
        self.counts.settle(calls - (watch.pending() if watch is not None else 0))

    def deferred_call(self) -> None:
        """A call whose window could not open or start: counted, and its cycle back to its warmup."""
        self.counts.defer()
        self.position.to_warmup()

    def skip_cycle(self) -> None:
        """This cycle's window skipped whole (the analysis is behind): counted."""
        self.position.next_cycle()
        self.counts.skip()

    def closed_window(self) -> int:
        """A window of it closed whole: its index (the next one counts from here); a triggered one is counted as such,
        and the target goes back to its own schedule from its next step."""
        index = self.window
        self.window = index + 1
        self.counts.whole()
        if self.position.saved is not None:
            self.triggered += 1
            self.end_triggered()
        return index

    def cut_try(self) -> int:
        """A scheduled window cut by a step that raised: the cuts in a row so far."""
        return self.counts.cut()

    # -- the trigger -----------------------------------------------------------------------------------------------
    def watch_with(self, settings: Settings | None) -> None:
        """Turn the trigger on (``settings``) or off for this target, with a fresh baseline."""
        self.watching = settings
        self.counts.settle(self.calls)  # the old watch's pending calls are counted
        self.watch = Watch(settings) if settings is not None and not self.done else None

    def drop_watch(self) -> None:
        """The trigger is given up for this target (its calls go on, still counted)."""
        watch, self.watch = self.watch, None  # gone first: whatever happens next, the idle path times no more
        if watch is not None:
            self.counts.settle(self.counts.calls + watch.pending())  # the watch's pending calls, counted as it goes

    def driven(self, t0: int, number: int | None, waited: int) -> tuple[int, int, int] | None:
        """A trainer's step begins at ``t0`` on the idle path (``number``: the trainer's own, else the calls so far;
        ``waited``: the thread's run-queue wait now): counted, and its period since the last one's start timed by the
        watch; the (step, own, wall) time of the period that ends here when the trigger must look at it."""
        watch = self.watch
        if watch is None:
            return None
        calls = self.calls
        self._count(calls + 1)
        return watch.period(t0, calls if number is None else number, waited)

    def run_triggered(self, trigger: Trigger) -> int:
        """Put a triggered window's schedule in place of the target's own (kept, to come back to): ``wait`` steps
        (aimed at a recurring slowdown's next occurrence), the target's ``warmup`` and ``active``, once. Returns the
        profiled steps it takes."""
        own = self.position.schedule
        triggered = Schedule(skip_first=0, wait=aim(trigger, own.warmup), warmup=own.warmup, active=own.active, repeat=1)
        self.position.swap_in(triggered, trigger, self.done)
        self._state(False, self.plain)
        return own.warmup + own.active

    def end_triggered(self) -> None:
        """Back to the target's own schedule where it was, after a triggered window (closed, or over)."""
        done = self.position.swap_back()
        if done is not None:
            self._state(done, self.plain)

    def cost(self) -> int:
        """The profiled steps (warmup and active) of one triggered window of this target."""
        own = self.position.own()
        return own.warmup + own.active

    def steady_ns(self) -> int | None:
        """The median wall time of recent calls (None before any)."""
        recent = self.counts.recent_ns
        return int(statistics.median(recent)) if recent else None


class Window:
    """One recording window of one target: its profiler and the steps it recorded."""

    __slots__ = (
        "cpu_peaks",
        "cpus",
        "devices",
        "dropped",
        "faults",
        "host_memory",
        "others",
        "prof",
        "started",
        "steps",
        "target",
        "walls",
    )

    def __init__(self, target: Target, prof: Any, cpu_peaks: CpuPeaks | None) -> None:
        self.target = target
        self.prof = prof
        self.cpu_peaks = cpu_peaks
        self.devices: list[dict[str, Any]] = []  # the CUDA devices' properties (the roofline's peaks by name)
        self.started = False
        self.dropped = False  # given up before its end (a user's profiler started, an interrupted step)
        self.others = 0  # calls of other targets turned away since this window's target last stepped
        self.steps: list[int] = []
        self.walls: list[int] = []
        self.cpus: list[tuple[int, int]] = []  # each step's thread CPU time and run-queue wait (ns; -1: unknown)
        self.faults: list[int] = []  # each step's thread minor page faults (-1: unknown)
        self.host_memory: tuple[int | None, int | None] = (None, None)  # the machine's memory, and available, at the start

    def took(self, step: int, wall_ns: int, cpu: tuple[int, int], faults: int = -1) -> None:
        """A step recorded whole: its number, wall time, thread CPU reading and minor page faults."""
        self.steps.append(step)
        self.walls.append(wall_ns)
        self.cpus.append(cpu)
        self.faults.append(faults)


class Session:
    """Process-wide: at most one autoprof window at a time."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.window: Window | None = None
        self.targets: dict[str, Target] = {}
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._live: Any = None  # the profiler autoprof prepared or started and has not stopped yet
        self._closing = False  # a window's close is stopping its profiler now (see :meth:`closing`)
        self.skipped = 0  # closed windows skipped since the last one queued (the analysis was MAX_PENDING behind)
        self.skipped_total = 0
        self._own = threading.local()  # .active: autoprof itself is starting its profiler on this thread
        #: A profiler of the user's that is prepared and not stopped yet (a scheduled one in its warmup: it does not
        #: record, so ``profiler_recording()`` is False, but kineto holds its configuration): a weak reference to it,
        #: or to a stand-in when torch's frame did not show it. Cleared when a profiler that is not autoprof's stops.
        self._foreign_prepared: Callable[[], object] | None = None
        #: Threads whose window a profiler of the user's on another thread stopped: torch keeps that thread's profiler
        #: state enabled (a profiler stops only on its own thread), so autoprof opens no window there again.
        self._broken_threads: set[int] = set()
        self._at_exit = False  # the process exits (exit(): atexit)

    # -- targets ---------------------------------------------------------------------------------
    def target(self, name: str, schedule: Schedule) -> Target:
        """The target called ``name`` (created with ``schedule`` on its first call)."""
        with self.lock:
            target = self.targets.get(name)
            if target is None:
                target = self.targets[name] = Target(name, schedule)
                if not rank_chosen():  # a rank not chosen: only the idle path, never a window
                    target.retire()
            return target

    # -- the trigger ---------------------------------------------------------------------------------
    def tick(self, target: Target, t0: float, waited: int = -1) -> None:
        """A wrapper's idle call that started at ``t0``, past its watch's next tick (:meth:`Watch.tick`; ``waited``:
        its thread's run-queue wait so far, ns, -1: unknown). Only the
        owner thread's calls are timed (the wrappers time no other thread's call: those are no steps), so only they
        tick; a call of another thread here (none is expected) only keeps the starts bounded."""
        watch = target.watch
        if watch is None:
            return
        if target.owner != threading.get_ident():
            watch.passed(t0)
            return
        found = watch.tick(t0, target.calls, target.cost(), waited)
        if found is not None and target.saved is None:
            self.arm(target, found)

    def check_slow(self, target: Target, step: int, own_ns: int, wall_ns: int) -> None:
        """The idle path's slow step, or one whose baseline is due (its own time already in the history; ``wall_ns``
        its wall time). Only the owner thread's steps arm a window (the idle path does not ask which thread calls)."""
        watch = target.watch
        if watch is None or target.saved is not None or target.owner != threading.get_ident():
            return
        found = watch.check(step, own_ns, target.calls, target.cost(), wall_ns)
        if found is not None:
            self.arm(target, found)

    def new_period(self, name: str) -> None:
        """The next step of target ``name`` begins a new period: its time since its last step is no step's (a trainer
        ran another stage's steps meanwhile, timed as their own target's). Nothing when it has no trigger."""
        target = self.targets.get(name)
        watch = target.watch if target is not None else None
        if watch is not None:
            watch.break_period()  # the trainers' driver: the next period, measured from the future, is negative
            watch.pause()  # the wrappers' starts: a break

    def arm(self, target: Target, trigger: Trigger) -> bool:
        """Open a triggered window for ``trigger`` from ``target``'s next step, if one can open: not while any window
        is held or a profiler of the user's records (one profiler at a time), nor while the target's own schedule is
        in a window's warmup or active steps. Refused: counted in the next triggered window's ``suppressed``."""
        watch = target.watch
        if watch is None:
            return False
        with self.lock:
            own = Phase.DONE if target.done else target.position.place().phase  # done: given up too
            busy = self.window is not None or profiler_recording() or self.foreign_prepared()
            if target.saved is not None or busy or own in (Phase.WARMUP, Phase.ACTIVE) or target.current is not None:
                watch.refused()
                return False
            cost = target.run_triggered(trigger)
            watch.fired(trigger, cost)
            return True

    def holds(self, target: Target) -> bool:
        """Whether ``target``'s window is open (prepared or recording)."""
        window = self.window
        return window is not None and window.target is target

    # -- a step of a target's schedule (owner thread): one call at its start, one at its end ------------------------
    def begin_step(self, step: Step) -> int:
        """A step of its target's schedule begins on the owner thread: ``step`` becomes the target's step in progress
        before anything else changes (a stale one is finished first, see :meth:`Target.enter`), its place in the
        schedule is found, and the window is opened (or found open) for a warmup or active step and started at the
        first active one, else deferred to the cycle's warmup; outside a window none is left open. ``step`` learns its
        window, whether it records, is its window's last and takes a step of the schedule as each is known. Returns
        what the instrument does: :data:`RECORD`, :data:`ANNOTATE` (the call, while a profiler records) or :data:`BARE`."""
        target = step.target
        if self._live is not None and self.window is None:  # a profiler no window holds (a stop cut short): stopped now,
            with self.lock:  # at any target's next step, not only at the next window's open
                self._heal()
        target.enter(step)
        place = self._place(target)
        if place.phase in (Phase.DONE, Phase.WAIT):
            if place.phase == Phase.DONE:
                target.retire()
            window = self.window
            if window is not None and window.target is target:  # a window whose close an interrupt skipped: none is open now
                self.drop(target)
            return ANNOTATE
        cfg = SWITCH.config
        if place.first and place.phase == Phase.WARMUP and self.window is None and self.behind(cfg):
            self.skip_cycle(target)  # bounded memory: no window while the analysis is this far behind
            step.advance = False
            return BARE
        held = self.window
        window = step.window = self.open(target, cfg)
        if window is not None and window is not held and target.saved is not None:
            self.opened_triggered(target)  # a try of a triggered window: counted against its budget
        if window is not None and place.phase == Phase.ACTIVE:
            if self.start(target) is not None:
                step.last = place.last
                step.recording = True
                return RECORD
            step.window = window = None
        if window is None:  # back to the start of this cycle's warmup: a window is all of its steps or nothing
            target.deferred_call()
            step.advance = False
        return ANNOTATE

    def _place(self, target: Target) -> Place:
        """Where ``target``'s step now falls: a dropped cycle starts its warmup again; a triggered window's schedule that
        is over, or whose retry the budget refuses, gives way to the target's own; a target given up has no window."""
        position = target.position
        if position.rewind:
            position.take_rewind()
        place = position.schedule.place(position.pos)
        if place.phase == Phase.DONE and position.saved is not None:  # a triggered window's schedule is over
            target.end_triggered()
            place = position.place()
        elif (
            position.tries
            and position.saved is not None
            and place.phase != Phase.WAIT
            and not self.holds(target)
            and not self.retry_triggered(target)  # tried again after a try was cut: only within its budget
        ):
            place = position.place()  # given up: the target's own schedule
        if target.done and position.saved is None:  # given up (its windows, or by autoprof): no window of its own
            return _OVER
        return place

    def end_step(self, step: Step, wall_ns: int, raised: bool, cpu: tuple[int, int] = (-1, -1), faults: int = -1) -> None:
        """``step`` ended (its annotations exited): ``wall_ns`` < 0: the user's function never ran (autoprof was
        interrupted first); ``raised``: it ran and raised (a step that failed is never a step of a recorded window);
        ``cpu``: a recorded step's thread CPU time and run-queue wait. A window cut or dropped meanwhile sends the cycle
        back to its warmup; a recorded step is kept in its window, the schedule steps on, and the window's last step
        closes it."""
        target = step.target
        window = step.window
        if window is not None and raised and wall_ns >= 0 and not window.dropped:
            # The step raised (an exception, Ctrl-C, a cancelled task): its window is cut, said once a run, and this
            # cycle recorded again from its warmup.
            target.position.redo()
            self.cut(target, "a step raised")
            self.failed_try(target, sys.exc_info()[1])  # the exception in flight (None: not an exception)
        elif window is not None and (wall_ns < 0 or window.dropped):
            # An interrupted step of a window, or a window given up meanwhile (a user's profiler started): drop the
            # window, and record this cycle again from its warmup.
            target.position.redo()
            self.drop(target)
        elif wall_ns < 0:
            pass  # interrupted before the call ran, outside any window: it is not a step
        else:
            if step.recording and window is not None:
                window.took(step.number, wall_ns, cpu, faults)
            if step.advance:
                target.position.advance()
            if step.last:
                self.close(target, SWITCH.config)
        if self._at_exit and window is not None and self.window is window:
            # the process exits while this thread's steps go on (a daemon's): its window is cut here, on its own
            # thread, where torch stops a profiler (see exit())
            self.cut(target, "the process exited")

    def retry_triggered(self, target: Target) -> bool:
        """A triggered window whose last try was cut (a step raised, a profiler of the user's, an interrupt) is about to
        open again: only while ``trigger_budget`` allows another window's steps (each try records up to its warmup and
        active steps, counted against the budget as a new window is). Otherwise it is given up: the target goes back to
        its own schedule, and the refusal is counted in the next triggered window's ``suppressed``. Without this a step
        that raised in every try kept the profiler recording for half of a run."""
        watch = target.watch
        if watch is not None and watch.profiled + target.cost() <= watch.settings.budget * target.calls:
            return True
        target.end_triggered()
        if watch is not None:
            watch.refused()
        return False

    def opened_triggered(self, target: Target) -> None:
        """A window opened for ``target``'s triggered window: its first try was counted when the trigger fired, each
        later one counts against the budget now."""
        watch = target.watch
        if target.position.tried() and watch is not None:
            watch.spent(target.cost())

    def cut(self, target: Target, reason: str, hint: str = "A shorter window (active, warmup) fits a run this short") -> bool:
        """End ``target``'s window before its last step (its run ended: a trainer returned, stopped early or
        raised): the profiler stops, the window is dropped (a window is all of its steps or none, never mixed with
        the next run's), one warning per target says so; the cycle starts again from its warmup. False when
        ``target`` had no window open."""
        with self.lock:
            window = self.window
            if window is None or window.target is not target:
                return False
            recorded = len(window.steps)
            self._discard(window)
            target.position.to_warmup()
            if target.said.once("incomplete"):
                _emit.warning(
                    f"{target.name}'s window ended before its last step ({reason}): it recorded {recorded} of its "
                    f"{target.schedule.active} active steps; autoprof stopped its profiler and dropped the window (a "
                    f"window is all of its steps or none). {hint}",
                    "window_incomplete",
                    target=target.name,
                    window=target.window,
                    steps_recorded=recorded,
                    steps_needed=target.schedule.active,
                )
            return True

    def owner_ended(self, targets: list[Target], ident: int) -> None:
        """Thread ``ident``, the owner of ``targets``, ends (called on it, while Python clears its state: see
        :func:`_at_thread_end`). A window of one of them still open is cut here: torch keeps a profiler's state per
        thread, so one left recording died with its thread (torch 2.13 warned at the next profiler's start; before it,
        no profiler could start in the process again, a user's neither). Each target is free for the next thread that
        calls it; one whose windows keep being cut this way (a thread a call: ``asyncio.to_thread`` under a new event
        loop each time) is given up after :data:`MAX_CUT_TRIES`, said once."""
        self._broken_threads.discard(ident)  # torch's state of that thread, enabled or not, ends with it
        for target in targets:
            if target.owner != ident:
                continue
            current = target.current
            if current is not None:  # a call of the thread's left inside its step (an async one its closed loop left
                # suspended, finalized later on whatever thread): its annotations are this thread's, exited here; the
                # step is over, uncounted, and never finished on another thread
                with _guard.quiet("live.close_annotations"):
                    current.close_annotations()
                target.leave(-1)
            cut = self.cut(target, "the thread that called it ended", "A window's steps are the calls of one thread")
            if cut and target.saved is None and not target.done:
                tries = target.cut_try()
                if tries >= MAX_CUT_TRIES:
                    target.retire()
                    _emit.warning(
                        f"{target.name}'s window was cut {tries} times in a row because the thread that called it "
                        "ended before the window's last step: torch's profiler records the calls of the thread that "
                        "started it, so a window's steps are one thread's calls. autoprof gave up its windows (call it "
                        "from a thread that lives for the run, e.g. one worker rather than a new thread a call)",
                        "window_given_up",
                        target=target.name,
                        window=target.window,
                        tries=tries,
                        error=None,
                    )
            watch = target.watch
            if watch is not None:
                watch.pause()  # the period across the threads is no step's: the next owner's first call starts anew
            target.release()

    def failed_try(self, target: Target, error: BaseException | None) -> None:
        """``target``'s scheduled window was just cut by a step that raised ``error``: after :data:`MAX_CUT_TRIES` such
        cuts in a row its windows are given up (the idle path from now; a trigger's windows, which have a budget of
        their own, still open), said once. A Ctrl-C (``KeyboardInterrupt``) is not counted: it comes from outside the
        program, and the windows are recorded again after it; a cancelled task is (a timeout that cuts the same step
        every few calls kept the profiler recording as an exception did)."""
        if target.saved is not None or target.done or error is None or isinstance(error, KeyboardInterrupt):
            return
        tries = target.cut_try()
        if tries < MAX_CUT_TRIES:
            return
        target.retire()
        _emit.warning(
            f"{target.name}'s window was cut {tries} times in a row by a step that raised "
            f"({type(error).__name__}): each try recorded again from its warmup, so autoprof gave up its windows "
            "(no profiler records for it any more; a new run starts its schedule over)",
            "window_given_up",
            target=target.name,
            window=target.window,
            tries=tries,
            error=type(error).__name__,
        )

    # -- window lifecycle (owner thread) -----------------------------------------------------------
    def open(self, target: Target, cfg: Config) -> Window | None:
        """Open a window for ``t`` (prepare the profiler), or find it open; None: deferred (another target's
        window, or a foreign profiler records)."""
        with self.lock:
            held = self.window
            if held is not None:
                if held.target is target:
                    held.others = 0
                    return held
                held.others += 1
                if held.others < ABANDON_AFTER or held.target.current is not None:
                    return None
                self._abandon_stale(held)
            self._heal()
            if threading.get_ident() in self._broken_threads or self._at_exit:
                return None  # said once, when it broke; at exit (a daemon thread's steps go on): no window after it
            if profiler_recording() or self.foreign_prepared() or _FORKED_PREPARED:
                self._foreign(target)
                return None
            from torch.profiler import ProfilerActivity, profile

            from autoprof.analysis import engine  # noqa: F401  # imported here, not in the background analysis (GIL)

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
            cpu_peaks = None if cuda else calibrate.cpu_peaks(SIGNALS_HELD)  # each timed run whole
            memory = cfg.profile_memory if target.profile_memory is None else target.profile_memory
            prof = profile(activities=activities, record_shapes=cfg.record_shapes, profile_memory=memory)
            with self._owning():  # signals held: a Ctrl-C comes once the window holds its prepared profiler
                self._live = prof
                prof.prepare_trace()
                # The first record_function of a process resolves its ops (~1 ms here): pay that now, outside
                # the recorded steps, so it does not show up as the first step's host overhead.
                with _autograd_profiler.record_function("autoprof.warmup"):
                    pass
                window = self.window = Window(target, prof, cpu_peaks)
                window.devices = device_properties() if cuda else []
            _exiting.note()  # a fork waits for this thread's native exit if it is under way then (see _exiting)
            if cfg.background and not in_pool_worker():  # a pool worker reads and analyzes on the calling thread
                with SIGNALS_HELD:  # (see _worker_alive)
                    _window.READER.ensure()  # started here, by the training thread (its priority), never at a close
            return window

    @contextmanager
    def _owning(self) -> Iterator[None]:
        """autoprof's own call into torch's profiler: signals are held until it is whole (see :class:`_SignalsHeld`),
        the foreign-profiler guard lets it pass, and torch's warnings about it never reach the user's stderr as plain
        lines (see :func:`_torch_warnings`)."""
        with SIGNALS_HELD:
            self._own.active = True
            try:
                with _torch_warnings():
                    yield
            finally:
                self._own.active = False

    def start(self, target: Target) -> Window | None:
        """Start recording (first active step); the window. None when a foreign profiler took over meanwhile."""
        with self.lock:
            window = self.window
            if window is None or window.target is not target:
                return None
            if window.started:
                return window
            if profiler_recording() or self.foreign_prepared():
                self._abandon(target)
                return None
            with self._owning():  # signals held: the start is whole (enabled and stamped) or not begun
                window.started = True  # a stop is owed from here on
                window.prof._autoprof_thread = threading.get_ident()  # torch's state is this thread's (_stopped_in_torch)
                window.prof.start_trace()
            with _guard.quiet("live.trace_metadata"):  # name the target inside the trace, as the live analysis did
                window.prof.add_metadata_json("autoprof_target", json.dumps(target.name))
                peaks = window.cpu_peaks
                if peaks:
                    window.prof.add_metadata_json("autoprof_cpu_peak_flops", json.dumps(peaks.flops))
                    window.prof.add_metadata_json("autoprof_cpu_peak_bytes_per_s", json.dumps(peaks.bytes_per_s))
                    window.prof.add_metadata_json("autoprof_cpu_peak_spread_ratio", json.dumps(round(peaks.spread, 4)))
                window.host_memory = (_window.host_memory_bytes(), _window.host_memory_available_bytes())
                for key, value in zip(("autoprof_host_memory_bytes", "autoprof_host_memory_available_bytes"), window.host_memory):
                    if value:
                        window.prof.add_metadata_json(key, json.dumps(value))
            return window

    def close(self, target: Target, cfg: Config) -> None:
        """Stop the profiler at the end of the window's last step and hand the window to the worker. Signals are held
        until the window is handed over (a Ctrl-C meanwhile comes after: the window is kept); an analysis on this
        thread (``background`` off, a pool worker) runs after, interruptible."""
        started = time.perf_counter_ns()
        job = None
        try:
            with SIGNALS_HELD:
                job = self._close(target, cfg, started)
        except BaseException as e:  # a Ctrl-C held meanwhile, delivered now: a window left to this thread is dropped
            if job is not None:
                _emit.error("window analysis interrupted: the window is dropped", "interrupted", e, target=job.target, window=job.window)
                _window.release(job.prof)
            raise
        if job is not None:  # on this thread, as it closes: the training thread pays the analysis too (its stall_ms says so)
            _window.run(job, inline=True)

    def _close(self, target: Target, cfg: Config, started: int) -> _window.ClosedWindow | None:
        """:meth:`close`'s bookkeeping; the job to analyze on this thread, if any."""
        with self.lock:
            window = self.window
            if window is None or window.target is not target:
                return None
            self.window = None  # over, stopped or not
            sections = sorted(SECTIONS_SEEN)
            if not self._stop(window, target, sections):
                return None
        stopped = time.perf_counter_ns()
        trigger = target.trigger if target.saved is not None else None
        index = target.closed_window()  # a triggered window's: the target's own schedule from its next step
        if trigger is not None:
            watch = target.watch
            if watch is not None:
                owns = [w - c[1] if c[1] > 0 else w for w, c in zip(window.walls, window.cpus, strict=False)]  # less the wait
                watch.recorded([s for s, w in zip(window.steps, owns + window.walls[len(owns) :], strict=False) if w > trigger.limit_ns])
        # The raw events are not read here: kineto's results stay complete once the profiler stopped, and any thread
        # may read them (``events()``): a thread of their own reads them (see :class:`autoprof.live.window.Reader`),
        # which the background job waits for. The training thread keeps only what torch requires of it: ``stop_trace``
        # (a profiler stops on its own thread).
        read = False
        with _guard.call(_unread, target.name, index):
            results = window.prof.profiler.kineto_results
            read = True
        if not read:
            return None
        job = _window.ClosedWindow(
            target=target.name,
            window=index,
            framework=target.framework,
            config=cfg,
            steps=window.steps,
            walls=window.walls,
            cpus=window.cpus,
            faults=window.faults,
            calls=target.calls,
            first_call_ns=target.counts.first_call_ns,
            steady_ns=target.steady_ns(),
            stall_ns=time.perf_counter_ns() - started,  # what the calling thread pays when work runs in the background
            stop_ns=stopped - started,
            cpu_peaks=window.cpu_peaks,
            host_memory=window.host_memory,
            devices=window.devices,
            reference=target.reference,
            sections=sections,
            prof=window.prof,
            events=None,
            results=results,
            trigger=trigger,
            peer_window=None if trigger is not None else index - target.triggered,
        )
        if cfg.background and not in_pool_worker():
            if self._queue.unfinished_tasks >= MAX_PENDING:
                target.counts.skip_closed()  # no record of it will come: said at exit if the target wrote none
                self._skip(target, index)
                return None
            with self.lock:  # the reader and the worker take the windows in the same order
                job.skipped_before, self.skipped = self.skipped, 0
                _window.READER.submit(job, now=self._queue.unfinished_tasks == 0)
                job.stall_ns = time.perf_counter_ns() - started
                self._submit(lambda: _window.run(job))
            return None
        return job

    def closing(self) -> bool:
        """Whether a window's close is stopping its profiler now (the background's pacer asks, from its own
        thread)."""
        return self._closing

    def behind(self, cfg: Config) -> bool:
        """Whether the background analysis is ``MAX_PENDING`` windows behind: a window opened now would only be
        skipped when it closes."""
        return cfg.background and self._queue.unfinished_tasks >= MAX_PENDING and not in_pool_worker()

    def skip_cycle(self, target: Target) -> None:
        """Skip ``target``'s window of this cycle whole (the analysis is behind): no profiler starts for it; it is
        counted as a skipped window."""
        target.skip_cycle()
        self._skip(target, target.window)

    def _skip(self, target: Target, index: int) -> None:
        """The analysis is ``MAX_PENDING`` windows behind: this one is dropped unread, counted (the next window's
        record says how many), and said once per process."""
        with self.lock:
            self.skipped += 1
            self.skipped_total += 1
        if self.skipped_total == 1:
            _emit.warning(
                f"the background analysis is {MAX_PENDING} windows behind: autoprof skips the windows that close "
                "meanwhile (counted in the next window record's windows_skipped) instead of queueing them without "
                "limit; fewer windows (repeat, wait) or flush() keep up",
                "analysis_behind",
                target=target.name,
                window=index,
            )

    def _stop(self, window: Window, target: Target, sections: list[str]) -> bool:
        """Name the sections seen in ``w``'s trace and stop its profiler; False (reported) if it would not stop."""
        with _guard.quiet("live.trace_metadata"):
            if sections:
                window.prof.add_metadata_json("autoprof_sections", json.dumps(sections))
            # the steps' CPU readings: a kept trace's gate reads them
            step_cpu = _window.step_cpu_of(window.walls, window.cpus, window.faults)
            if step_cpu is not None:
                window.prof.add_metadata_json("autoprof_step_cpu", json.dumps(step_cpu))
        try:
            with _guard.call(self._unstopped, target):  # failed: healed and said, below
                with self._owning():
                    self._closing = True  # the background's work waits meanwhile (autoprof.live._pace)
                    try:
                        _stop(window.prof)
                    finally:
                        self._closing = False
                    self._live = None
                return True
        except BaseException:  # interrupted: if it still records, stop it before the interrupt goes on
            self._heal()
            raise
        return False

    def _unstopped(self, target: Target, e: Exception) -> None:
        """A profiler's stop failed: if it still records, it is stopped, and one error record says so."""
        self._heal()
        _emit.error(f"profiler stop failed: {e}", "profiler", e, target=target.name, window=target.window)

    def drop(self, target: Target) -> None:
        """Discard ``t``'s window without analyzing it (an internal failure, an interrupted step, a user's
        profiler): no profiler left running."""
        with self.lock:
            window = self.window
            if window is None or window.target is not target:
                return
            self._discard(window)

    def _discard(self, window: Window) -> None:
        with self._owning():  # signals held: the window is gone and its profiler stopped, or neither
            window.dropped = True
            self.window = None
            if self._at_exit and window.target.owner not in (None, threading.get_ident()):
                # at exit, a window of another thread that lives on (a daemon's): torch stops a profiler only on its
                # own thread (from here 2.13 printed "disableProfiler called but no active profiling session found"
                # and 2.4 raised); it ends with the process
                self._live = None
                return
            _stop_quietly(window.prof)
            self._live = None
            if not _runs(window.prof) and not _prepared(window.prof):  # stopped: its unread results freed now
                _window.release(window.prof)

    def _heal(self) -> None:
        """A profiler autoprof prepared or started but no window holds (an interrupt landed between the two):
        stop it, or tear it down."""
        live = self._live
        if live is not None and (self.window is None or self.window.prof is not live):
            with self._owning():
                _stop_quietly(live)
                self._live = None  # only once torn down: an interrupt inside leaves it for the next heal

    def foreign_prepared(self) -> bool:
        """Whether a profiler of the user's is prepared and not stopped (its warmup): autoprof may not prepare or
        start its own then. Preparing a second profiler replaces the first one's configuration in kineto, and
        tearing autoprof's down (an empty start and stop) would consume it: the user's ``stop_trace`` then crashed
        the process (exit 139) on torch 2.4-2.13."""
        ref = self._foreign_prepared
        if ref is None:
            return False
        if ref() is None:  # the user dropped it unstopped
            self._foreign_prepared = None
            return False
        return True

    def after_foreign_stop(self) -> None:
        """Called after any profiler stops (see :func:`_guard_foreign_profilers`): one that is not autoprof's
        ends the user's prepared profiler too."""
        if not getattr(self._own, "active", False):
            self._foreign_prepared = None

    def before_foreign_start(self, prepared: object = None) -> None:
        """Called when any profiler is prepared or starts (see :func:`_guard_foreign_profilers`); ``prepared``: the
        profiler being prepared, when it is one. If it is not autoprof's own and an autoprof window is open,
        autoprof gives its window up first: two profilers cannot record at once (the second silently empties the
        first), and the user's profiler wins."""
        if getattr(self._own, "active", False):
            return
        if prepared is not None:
            try:
                self._foreign_prepared = weakref.ref(prepared)
            except TypeError:
                self._foreign_prepared = lambda: prepared
        with self.lock:
            window = self.window
            if window is None:
                self._heal()  # a profiler of autoprof's that no window holds (an interrupt inside its open)
                return
            target = window.target
            owner = target.owner
            if owner is not None and owner != threading.get_ident():
                self._yield_across_threads(window, owner)
                return
            current = target.current
            if current is not None:  # in a step: exit its annotations before its profiler stops (else torch warns)
                with _guard.quiet("live.close_annotations"):
                    current.close_annotations()
            self._discard(window)
            if target.current is None:  # between steps: this cycle starts again at its warmup (in a step: its finish)
                target.position.to_warmup()
            # one warning for this: the deferrals while your profiler records say nothing
            if target.said.once("yield", "foreign"):
                _emit.warning(
                    "a torch.profiler of yours started while autoprof's window recorded: autoprof ended and dropped "
                    "its window so that your profile keeps its events, and records this cycle again once your "
                    "profiler is done",
                    "foreign_profiler",
                    target=target.name,
                    window=target.window,
                )

    def _yield_across_threads(self, window: Window, owner: int) -> None:
        """A profiler of the user's starts on another thread than the one autoprof's window records on. torch can run
        only one profiler and stops one only on its own thread: left running, autoprof's crashed the process when it
        stopped later (exit 139); stopped from here, it leaves the training thread's profiler state enabled in torch.
        autoprof stops it from here (your profile keeps its events, nothing crashes), opens no window on that thread
        again, and says so once."""
        target = window.target
        self._discard(window)
        self._broken_threads.add(owner)
        for other in list(self.targets.values()):
            if other.owner == owner:
                other.retire()  # the idle path from now on
        target.said.note("yield", "foreign")
        _emit.warning(
            "a torch.profiler of yours started on another thread while autoprof's window recorded on the training "
            "thread: torch runs one profiler at a time and stops one only on its own thread, so autoprof stopped its "
            "window from your thread; torch keeps the training thread's profiler state enabled after that, so autoprof "
            "records no more windows on that thread (start your profiler on the training thread, or between windows)",
            "foreign_profiler_thread",
            target=target.name,
            window=target.window,
        )

    def _foreign(self, target: Target) -> None:
        if target.said.once("foreign", "yield"):  # one warning per target for the user's profilers, whichever comes first
            if (_FORKED_RECORDING and profiler_recording()) or _FORKED_PREPARED:  # the parent's state came along
                state = "recorded" if _FORKED_RECORDING and profiler_recording() else "was prepared (its warmup step)"
                _emit.warning(
                    f"this process was forked while autoprof's window {state} in its parent: torch's profiler state "
                    "came along, and torch does not support profiling in a forked child, so autoprof opens no window "
                    "here (fork before or after a window, or use the spawn or forkserver start method)",
                    "forked_in_window",
                    target=target.name,
                    window=target.window,
                )
                return
            _emit.warning(
                "another torch.profiler is recording (or prepared, in its warmup): autoprof does not start its own window "
                "(a second profiler would silently wipe the first); its annotations land in your profile",
                "foreign_profiler",
                target=target.name,
                window=target.window,
            )

    def _abandon_stale(self, window: Window) -> None:
        """Give up the window of a target that stopped being called (see ``ABANDON_AFTER``): torn down, its
        target starts its cycle again from the warmup if it is called again; said once per target."""
        holder = window.target
        self._discard(window)
        holder.position.to_warmup()
        if holder.said.once("abandoned"):
            _emit.warning(
                f"{holder.name} stopped being called before its window ended: autoprof gave that window up after "
                f"{ABANDON_AFTER} calls of other targets, so that they can be profiled; {holder.name} records its "
                "cycle again from the warmup if it is called again",
                "abandoned_window",
                target=holder.name,
                window=holder.window,
            )

    def _abandon(self, target: Target) -> None:
        window = self.window
        if window is not None:
            self._discard(window)
        self._foreign(target)

    # -- worker ------------------------------------------------------------------------------------
    def _submit(self, fn: Callable[[], None]) -> None:
        # Signals held: the queue's lock and count, and the new thread's start, are shared with the analysis thread. A
        # KeyboardInterrupt between their lines (a Ctrl-C held down) left the count one short or the start's event torn,
        # and the analysis thread died; it is delivered once the hand-over is whole.
        with SIGNALS_HELD:
            if not self._worker_alive():
                self._worker = threading.Thread(target=self._work, name="autoprof-analysis", daemon=True)
                self._worker.start()
            self._queue.put(fn)

    def _worker_alive(self) -> bool:
        """Whether the analysis thread runs. Signals held: ``Thread.is_alive()`` interrupted by a KeyboardInterrupt in
        its ``_wait_for_tstate_lock`` releases the running thread's own lock and marks it stopped (CPython's bpo-45274
        clean-up, meant for a lock it had just taken): a second analysis thread would start on the same queue and
        flush() return before the windows are written."""
        with SIGNALS_HELD:
            return self._worker is not None and self._worker.is_alive()

    def _work(self) -> None:
        lower_thread_priority()
        while True:
            fn = self._queue.get()
            try:
                if fn is None:
                    return
                with _guard.quiet("live.job"):  # jobs report their own failures
                    PACER.start()  # this job's analysis yields to the training thread (see autoprof.live._pace)
                    fn()
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every closed window has been analyzed and emitted. True when drained. The caller waits, so
        the analysis runs at full speed meanwhile. Windows skipped since the last window record are then said (see
        :meth:`say_skipped`)."""
        if not self._worker_alive():
            self.say_skipped()
            return True
        # The wait polls the queue's count and sleeps: it never waits on a lock the analysis thread takes. In
        # ``Queue.join()`` (a Condition on the queue's lock) a KeyboardInterrupt where the wait takes the lock back
        # made the main thread release the lock the analysis thread held: that thread died on "release unlocked
        # lock", and every later flush() hung. A Ctrl-C here now only interrupts the caller's wait.
        waiting = False
        try:
            with SIGNALS_HELD:  # the pacer's count of waiters, whole (a Ctrl-C is delivered after it)
                PACER.wait_begin()
                waiting = True
            deadline = None if timeout is None else time.monotonic() + timeout
            pause = 0.0002
            while self._queue.unfinished_tasks:
                if deadline is not None and time.monotonic() > deadline:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 0.005)
        finally:
            if waiting:
                with SIGNALS_HELD:
                    PACER.wait_end()
        self.say_skipped()
        return True

    def say_skipped(self) -> None:
        """The windows skipped since the last one queued (the analysis was ``MAX_PENDING`` behind), once every queued
        window is written (a flush, the exit): no later window record would count them (the run's last burst), so one
        ``autoprof.warning`` (``reason: "windows_skipped"``) does, and they are counted nowhere else. Every skipped
        window is counted once: in a window record's ``windows_skipped`` or in such a record.

        Signals are held around the lock: ``with`` calls a lock's ``__exit__`` after the block's guard is gone
        (CPython's bpo-29988), and a KeyboardInterrupt delivered right there (a line-by-line injection on flush's
        path found it) kept the session's lock held by the main thread for good: the next thread to take it hung."""
        skipped = 0
        with SIGNALS_HELD, self.lock:
            if self.skipped and not self._queue.unfinished_tasks:
                skipped, self.skipped = self.skipped, 0
        if not skipped:
            return
        _emit.warning(
            f"{skipped} window(s) closed after the last window record were skipped unread: the background analysis was "
            f"{MAX_PENDING} windows behind when they closed ({self.skipped_total} skipped in this process so far); fewer "
            "windows (repeat, wait) or flush() keep up",
            "windows_skipped",
            target=None,
            window=None,
            windows_skipped=skipped,
        )

    def _never_recorded(self) -> None:
        """At exit: one warning for each target whose schedule never reached the end of a window (a script that
        ends before it: 4 calls for a 5-call schedule), saying how many calls it made and how many one needed. A
        window that closed and was skipped unread (the analysis was behind) is no record: a target whose windows all
        were is said too."""
        for target in list(self.targets.values()):
            before, unread = target.counts.skipped_behind, target.counts.skipped_closed
            if target.window > unread or target.calls == 0 or (target.done and not before and not unread):
                continue  # (a schedule over with no window: its windows were skipped, said here too)
            schedule = target.schedule
            needed = schedule.skip_first + schedule.cycle
            target.said.note("incomplete")
            calls = target.calls
            deferred, skipped = target.counts.deferred, before + unread
            why = ""
            if deferred and (_FORKED_RECORDING or _FORKED_PREPARED):
                state = "recorded" if _FORKED_RECORDING else "was prepared"
                why = (
                    f"; {deferred} of its calls found the profiler taken: this process was forked while its "
                    f"parent's window {state}, and torch's profiler state came along"
                )
            elif deferred:
                why = (
                    f"; {deferred} of its calls found the profiler taken (another target's window, or a profiler "
                    "of the user's: one records at a time in a process), each sending its cycle back to its warmup"
                )
            if skipped:
                if not unread:
                    which = f"{before} of its windows were skipped before they opened"
                elif not before:
                    which = f"{unread} of its windows closed and were skipped unread"
                else:
                    which = f"{skipped} of its windows were skipped ({before} before they opened, {unread} closed, unread)"
                why += (
                    f"; {which}: the background analysis was {MAX_PENDING} windows behind (fewer windows, repeat or "
                    "wait, or flush() keep up)"
                )
            # A schedule that ended (its windows skipped) counts no more calls: the idle path counts nothing. Its
            # calls were enough to reach its windows, whatever the count says: the run was not short.
            over = target.done
            _emit.warning(
                f"{target.name} was called {'at least ' if over else ''}{calls} time(s) and never recorded a window: "
                f"its schedule needs {needed} calls for the first (skip_first {schedule.skip_first} + wait "
                f"{schedule.wait} + warmup {schedule.warmup} + active {schedule.active})"
                + (why if calls >= needed or over else f"{why}; a shorter schedule fits a run this short"),
                "no_window",
                target=target.name,
                window=None,
                calls=calls,
                calls_needed=needed,
                calls_deferred=deferred,
                windows_skipped=skipped,
            )

    def exit(self) -> None:
        """The process exits (``atexit``, a multiprocessing child's end): no window opens from now (a daemon thread's
        steps go on meanwhile). A window of another thread still open is cut by that thread at its next step's end,
        waited for :data:`EXIT_WAIT_S` at most: torch stops a profiler only on its own thread (left running while that
        thread's ops went on, torch 2.13 crashed at exit, exit 139; stopped from here, it printed "disableProfiler
        called but no active profiling session found"). One still open after that (a thread asleep, or inside a long
        step) is dropped, not stopped (see :meth:`_discard`), and ends with the process. Then :meth:`shutdown`."""
        self._at_exit = True
        window = self.window
        if window is not None and window.target.owner not in (None, threading.get_ident()):
            deadline = time.monotonic() + EXIT_WAIT_S
            with _guard.quiet("live.exit_wait", catches=BaseException):  # a Ctrl-C ends the wait, not the exit
                while self.window is window and time.monotonic() < deadline:
                    time.sleep(0.002)
        self.shutdown()

    def shutdown(self) -> None:
        """At exit: stop a window still recording (no profiler left running) and drain the worker. A Ctrl-C
        meanwhile ends the drain quietly, with one record saying how many windows were left unwritten (no
        "Exception ignored in atexit callback" traceback)."""
        try:
            with self.lock:
                window = self.window
                if window is not None:
                    if window.target.window:  # it recorded before: this window was cut short
                        self.cut(window.target, "the process exited")
                    else:  # its first: said below, with its calls
                        self._discard(window)
                self._heal()
                self._never_recorded()
            self.flush(timeout=30.0)
            write_report()
        except KeyboardInterrupt:
            left = self._queue.unfinished_tasks
            with _guard.quiet("live.interrupted_at_exit", catches=BaseException):
                _emit.warning(
                    f"interrupted while autoprof wrote its last windows at exit: {left} window(s) left unwritten",
                    "interrupted_at_exit",
                    target=None,
                    window=None,
                )


def rank_chosen() -> bool:
    """Whether this process's rank is one that ``configure(ranks=...)`` chose (all are, by default)."""
    chosen = SWITCH.config.ranks
    return chosen is None or _emit.dist_info()[0] in chosen


def write_report() -> str | None:
    """With ``configure(report=True)`` and a ``trace_dir``: the HTML report of the traces this process kept, next to
    them (``autoprof-report.rank<R>.html``); its path, or None. A failure (no plotly, a full disk) is one record."""
    cfg = SWITCH.config
    kept = [p for p in _window.KEPT if os.path.exists(p)]
    if not (cfg.report and cfg.trace_dir and kept):
        return None
    # a child's page is its own (its parent writes the same rank's at its own exit)
    out = os.path.join(os.fspath(cfg.trace_dir), f"autoprof-report.rank{_emit.dist_info()[0]}{_window.child_tag()}.html")
    with _guard.call(_unwritten, out):
        from autoprof.render import write_page

        write_page(kept, out, cfg)
        return out
    return None


def _unwritten(out: str, e: Exception) -> None:
    _emit.error(f"could not write the report {out}: {e}", "report", e, target=None, window=None)


def _unread(target: str, window: int, e: Exception) -> None:
    _emit.error(f"reading the window failed: {e}", "profiler", e, target=target, window=window)


def _stop_quietly(prof: Any) -> None:
    """Stop ``prof`` if it records, or tear it down if it was only prepared; never raising. Only a profiler
    that really started is stopped: stopping one that never did would disable whichever profiler records now
    (a user's). One that was prepared and never started is started and stopped at once (an empty cycle): before
    torch 2.13 a prepared profiler that is dropped leaves kineto prepared, and every later ``prepare_trace()``
    in the process, a user's profiler's too, raises "Can't disable Kineto profiler when it's not running"."""
    with _guard.quiet("live.stop_quietly"):
        if _runs(prof):
            if not _stopped_in_torch(prof):
                _stop(prof)
            else:  # its stop was cut after torch disabled it (an exception from outside): never stopped twice
                _autograd_profiler._run_on_profiler_stop()  # type: ignore[no-untyped-call]  # torch's flag, which that stop left set
        elif _prepared(prof) and not profiler_recording():
            prof.start_trace()
            _stop(prof)


def _stopped_in_torch(prof: Any) -> bool:
    """Whether torch's C++ side says that ``prof``, which autoprof started on this thread and whose end is not
    stamped, is not enabled: a stop cut between torch's disable and its stamp (the module's ``_is_profiler_enabled``
    flag and the stamps are set by Python code around the C++ call). Asked only on the thread that started it: torch
    keeps a profiler's state per thread. False when it cannot say."""
    if getattr(prof, "_autoprof_thread", None) != threading.get_ident():
        return False
    with _guard.quiet("live.profiler_enabled"):
        return not torch._C._autograd._profiler_enabled()
    return False


def _prepared(prof: Any) -> bool:
    """Whether ``prof`` was prepared (kineto holds its configuration) and never started."""
    inner = getattr(prof, "profiler", None)
    return inner is not None and not getattr(inner, "profiling_start_time_ns", 0)


#: 2.4 builds a FunctionEvent per event inside ``stop_trace`` (6–7 s per 100k events, on the
#: training thread); 2.11 and later build them only when asked (``_ensure_function_events``). autoprof never asks.
_EAGER_PARSE = not hasattr(_autograd_profiler.profile, "_ensure_function_events")


def _stop(prof: Any) -> None:
    """``prof.stop_trace()``, without the eager parse of releases that have one: autoprof reads the raw events
    (``kineto_results``), which the stop keeps, and never the FunctionEvents."""
    inner = getattr(prof, "profiler", None)
    if _EAGER_PARSE and inner is not None and hasattr(inner, "_parse_kineto_results"):
        inner._parse_kineto_results = _no_function_events
    prof.stop_trace()


def _no_function_events(*_args: Any, **_kwargs: Any) -> list[Any]:
    return []


#: torch warnings that autoprof's own profiler calls raise and that say nothing to the user (2.11:
#: "Profiler clears events at the end of each cycle...", about the accumulation option autoprof does not use).
_QUIET_TORCH_WARNINGS = ("Profiler clears events at the end of each cycle",)
_TORCH_WARNED: set[str] = set()


@contextmanager
def _torch_warnings() -> Iterator[None]:
    """Catch the Python warnings torch raises while autoprof drives its profiler: each distinct one becomes one
    ``autoprof.warning`` record (``reason: "torch_warning"``) for the process, never a plain line on stderr;
    the ones that only concern autoprof's own use are dropped."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        text = str(w.message)
        if any(quiet in text for quiet in _QUIET_TORCH_WARNINGS):
            _forget_torch_warned(text)
            continue
        if text in _TORCH_WARNED:
            continue
        _TORCH_WARNED.add(text)
        _emit.warning(f"torch warned while autoprof drove its profiler: {text}", "torch_warning", target=None, window=None)


def _forget_torch_warned(text: str) -> None:
    """torch 2.10-2.11 says its quiet warning once per process (``_warn_once``: a set of the texts shown); caught here,
    during autoprof's own call, it was shown to nobody: taken out of that set, so that a profiler of the user's still
    shows it to them as torch alone would."""
    shown = getattr(sys.modules.get("torch.profiler.profiler"), "_WARNINGS_SHOWN", None)
    if isinstance(shown, set):
        shown.discard(text)


_POOL_WORKER: bool | None = None


def in_pool_worker() -> bool:
    """Whether this process is a ``multiprocessing.Pool`` worker. Such a pool terminates its workers when its
    ``with`` block ends (SIGTERM: no ``atexit``), so a window left queued for the background analysis would be
    lost without a word: in a pool worker a window is analyzed and written on the calling thread when it closes,
    before the task returns (its ``stall_ms`` includes the analysis)."""
    global _POOL_WORKER
    if _POOL_WORKER is None:
        import sys

        mp = sys.modules.get("multiprocessing")
        worker = False
        with _guard.quiet("live.pool_worker"):
            worker = mp is not None and "PoolWorker" in mp.current_process().name
        _POOL_WORKER = worker
    return _POOL_WORKER


_DEVICES: list[dict[str, Any]] | None = None


def device_properties() -> list[dict[str, Any]]:
    """The CUDA devices' properties as torch's chrome export writes them (``deviceProperties``): the roofline
    finds the device's peaks by ``name``. Read once per process."""
    global _DEVICES
    if _DEVICES is None:
        found = []
        with _guard.quiet("live.device_properties"):
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                found.append(
                    {
                        "id": i,
                        "name": p.name,
                        "totalGlobalMem": int(p.total_memory),
                        "computeMajor": int(p.major),
                        "computeMinor": int(p.minor),
                        "numSms": int(p.multi_processor_count),
                    }
                )
        _DEVICES = found
    return _DEVICES


def _runs(prof: Any) -> bool:
    """Whether ``prof`` (a torch.profiler.profile) started recording and has not stopped: torch's profiler
    stamps its start once it is enabled and its end when it stops."""
    inner = getattr(prof, "profiler", None)
    started = getattr(inner, "profiling_start_time_ns", None)
    if started is None:  # a torch without these stamps: trust the global flag
        return inner is not None and profiler_recording()
    return bool(started) and not getattr(inner, "profiling_end_time_ns", 0)


class _ThreadEnd:
    """Kept in a thread-local of a thread that owns targets: dropped when Python clears that thread's state as it
    ends, on that thread (as the standard library's own dummy threads are forgotten, 3.12+), and then the session
    frees its targets (:meth:`Session.owner_ended`). In a forked child, or for the main thread at interpreter exit
    (where ``atexit`` already stopped any window), it does nothing."""

    __slots__ = ("ident", "pid", "targets")

    def __init__(self) -> None:
        self.ident = threading.get_ident()
        self.pid = os.getpid()
        self.targets: list[Target] = []

    def __del__(self) -> None:
        if self.ident != threading.get_ident() or self.pid != os.getpid() or sys.is_finalizing():
            return
        with _guard.quiet("live.thread_end", catches=BaseException):  # nothing escapes a thread's end ("Exception ignored")
            SESSION.owner_ended(self.targets, self.ident)


_THREAD_ENDS = threading.local()


def _at_thread_end(target: Target) -> None:
    """``target`` was just claimed by this thread: free it when the thread ends (see :class:`_ThreadEnd`). Only for a
    thread that Python started (``threading``, the main thread): a thread started in C that calls into Python (a
    ctypes or pybind11 callback) gets a Python state for each call and loses it after, so its thread-local ends with
    every call while the thread lives on (each call was taken for the thread's end: every window cut, then given up).
    Such a thread keeps its targets, as before."""
    thread = getattr(threading, "_active", {}).get(threading.get_ident())  # looked up: current_thread() makes one
    if thread is None or isinstance(thread, threading._DummyThread):
        return
    end = getattr(_THREAD_ENDS, "end", None)
    if end is None or end.pid != os.getpid():  # a forked child's own (the parent's is inert here)
        end = _THREAD_ENDS.end = _ThreadEnd()
    if target not in end.targets:
        end.targets.append(target)


def _guard_foreign_profilers(session: Session) -> None:
    """Let ``session`` hear of every profiler that starts, before it starts: torch's profilers call the
    module-level ``_prepare_profiler`` (kineto's ``torch.profiler.profile``, ``torch.autograd.profiler.profile``)
    or ``_run_on_profiler_start`` (``emit_nvtx``, ``emit_itt``) of ``torch.autograd.profiler`` by name. Each is
    replaced once by a pass-through that first calls :meth:`Session.before_foreign_start` (which never
    raises into the caller)."""
    mod = _autograd_profiler
    for attr in ("_prepare_profiler", "_run_on_profiler_start", "_disable_profiler"):
        orig = getattr(mod, attr, None)
        if orig is None or getattr(orig, "_autoprof_guard", False):
            continue
        guard = _stop_guard(session, orig) if attr == "_disable_profiler" else _start_guard(session, orig, attr == "_prepare_profiler")
        guard._autoprof_guard = True
        guard.__wrapped__ = orig
        setattr(mod, attr, guard)


# Every profiler's start and stop pass through these (a user's too): each boundary made once.
_FOREIGN_START = _guard.quiet("live.foreign_start")
_FOREIGN_STOP = _guard.quiet("live.foreign_stop")


def _start_guard(session: Session, orig: Any, prepare: bool) -> Any:
    def guard(*args: Any, **kwargs: Any) -> Any:
        with _FOREIGN_START:
            session.before_foreign_start(_preparing() if prepare else None)
        return orig(*args, **kwargs)

    return guard


def _stop_guard(session: Session, orig: Any) -> Any:
    def guard(*args: Any, **kwargs: Any) -> Any:
        try:
            return orig(*args, **kwargs)
        finally:
            with _FOREIGN_STOP:
                session.after_foreign_stop()

    return guard


_UNKNOWN_PROFILER = object()  # a prepared profiler whose object torch's frame did not show (kept until a stop)


def _preparing() -> object:
    """The profiler object whose ``_prepare_trace`` calls ``_prepare_profiler`` (the frame above the guard), else a
    stand-in that lives until the next stop."""
    found = None
    with _guard.quiet("live.preparing_frame"):
        import sys

        found = sys._getframe(2).f_locals.get("self")
    return found if found is not None else _UNKNOWN_PROFILER


def _after_fork_in_child() -> None:
    """A forked child starts with autoprof's state as it is, not as the parent's: no window (the parent's
    profiler is not the child's), no queue of the parent's windows (their analysis thread did not come along),
    fresh locks (a lock held by another of the parent's threads at the fork would never be released). The
    child's own targets start their schedules over."""
    global _POOL_WORKER, _FORKED_RECORDING, _FORKED_PREPARED
    _POOL_WORKER = None  # a fork-context pool worker: asked again in the child
    window = SESSION.window
    # (kept in a grandchild: the state came along again, and this process never opened a window of its own to fork in)
    _FORKED_RECORDING = _FORKED_RECORDING or (window is not None and window.started and profiler_recording())
    _FORKED_PREPARED = _FORKED_PREPARED or (window is not None and not window.started and _prepared(window.prof))
    _window.KEPT.clear()  # the parent's kept traces are its own page's
    _window.CHILD = "forked"  # its kept traces' and page's names carry its pid: its windows are numbered as its parent's
    SIGNALS_HELD.after_fork_in_child()
    session = SESSION
    session.lock = threading.RLock()
    session.window = None
    session._live = None
    session._queue = queue.Queue()
    session._worker = None
    session.skipped = session.skipped_total = 0
    session._broken_threads = set()
    session._at_exit = False
    done = not rank_chosen()
    for target in session.targets.values():
        target.after_fork(done)
    import sys

    util = sys.modules.get("multiprocessing.util")
    if util is not None:  # a child multiprocessing starts: it clears the finalizers, then runs its after-fork hooks
        try:
            util.register_after_fork(session, _in_multiprocessing_child)
        except (AttributeError, TypeError):  # a multiprocessing of another shape: its children drain as before
            pass


#: This process was forked while its parent's autoprof window recorded: torch's profiler state came along (enabled,
#: with no profiler of this process's behind it), so its targets find the profiler taken; said as that, not as a
#: profiler of the user's.
_FORKED_RECORDING = False
#: This process (or one it was forked from) was forked while its parent's autoprof window was prepared (its warmup
#: step): kineto's prepared state came along, and a profiler prepared here then raised "Can't disable Kineto profiler
#: when it's not running" (torch 2.4; autoprof gave the target up with an error record) or printed torch's
#: "disableProfiler called but no active profiling session found" on stderr (2.13): its targets open no window, as
#: where the parent's window recorded.
_FORKED_PREPARED = False


def _in_multiprocessing_child(session: Session) -> None:
    """In a child that ``multiprocessing`` started (a ``Process``, a ``ProcessPoolExecutor``'s worker; forked, or
    by ``spawn`` or ``forkserver``, which import autoprof afresh): a forked or forkserver child leaves through
    ``os._exit``, so ``atexit`` never runs and the windows queued for the background analysis (their records, kept
    traces and page) were dropped without a word. ``multiprocessing`` runs its finalizers before that exit
    (``Process._bootstrap``: ``util._exit_function``): the drain is one of them (run once however often it was asked
    for: the at-fork handler and the import both ask)."""
    _window.CHILD = _window.CHILD or "started"  # its kept traces and page carry its pid (a spawned child's were its parent's)
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.Finalize(None, _child_exit, exitpriority=100)  # first: before the child's queues and pools are torn down


def _for_multiprocessing_children() -> None:
    """At import: a child that ``multiprocessing`` starts by ``spawn`` or ``forkserver`` imports autoprof afresh (its
    main module, or its task's), so no at-fork handler of a parent's ran there. Imported while such a child inherits its
    parent's main module and task (``_inheriting``, as ``multiprocessing.spawn`` tells it), or inside a running child,
    it is said a child now (:func:`_in_multiprocessing_child`); a bootstrap after that which clears the finalizers
    (a forkserver's child) runs it again, as an after-fork hook."""
    mp = sys.modules.get("multiprocessing")
    util = sys.modules.get("multiprocessing.util")
    if mp is None or util is None:
        return  # no multiprocessing child: a process that starts one later is its parent
    with _guard.quiet("live.multiprocessing_child"):
        inheriting = getattr(mp.current_process(), "_inheriting", False)
        if mp.parent_process() is not None or inheriting:
            _in_multiprocessing_child(SESSION)
        if inheriting:
            util.register_after_fork(SESSION, _in_multiprocessing_child)


#: The process whose exit drain ran (:func:`_child_exit`): once a process, however often it was registered.
_EXITED_PID: int | None = None


def _child_exit() -> None:
    global _EXITED_PID
    if os.getpid() == _EXITED_PID:
        return
    _EXITED_PID = os.getpid()
    atexit.unregister(SESSION.exit)  # once, if this child also ran its atexit handlers
    SESSION.exit()


SESSION = Session()
atexit.register(SESSION.exit)
PACER.closing = SESSION.closing  # the background's work waits while a window closes
_guard_foreign_profilers(SESSION)  # from the start: a user's profiler prepared before autoprof's first window counts
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_for_multiprocessing_children()
