"""``@autoprof`` and ``autoprof.section``: wrapt wrappers that step each target's schedule and annotate
calls while a window records. Near-free otherwise: outside a recording window a call reads two flags,
a thread-local depth and ``perf_counter_ns`` twice, and never touches ``record_function``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import Any, TypeVar, overload

import torch
import torch.autograd.profiler as _ap
import wrapt

from autoprof import _guard
from autoprof.config import ACCEPTS, CHECKS, SCHEDULE_KEYS, SWITCH, TRIGGER_KEYS, ConfigError, check_schedule_value, user_stacklevel
from autoprof.live import _cpu
from autoprof.live.schedule import Schedule
from autoprof.live.session import ANNOTATE, PLAIN, RECORD, SECTIONS_SEEN, SESSION, Step, Target, rank_chosen
from autoprof.live.trigger import Settings
from autoprof.render import emit as _emit

F = TypeVar("F", bound=Callable[..., Any])

_tls = threading.local()
#: The nesting of ``async def`` targets in the running task (asyncio.gather interleaves tasks on one thread, so a
#: thread's depth cannot say it): 0 outside any, 1 inside one, -1 inside one that runs bare (concurrent with another).
_task_depth: contextvars.ContextVar[int] = contextvars.ContextVar("autoprof_task_depth", default=0)
#: The task whose async target's call runs bare, in that call's context (None outside any, or no asyncio task).
_bare_task: contextvars.ContextVar[object] = contextvars.ContextVar("autoprof_bare_task", default=None)
_get_ident = threading.get_ident
_now = time.perf_counter_ns
#: The trigger's clock on the idle path: float seconds, whose comparison the interpreter specializes (see
#: autoprof.live.trigger.NS).
_clock = time.perf_counter
_record_function = _ap.record_function
# is_dynamo_compiling is a plain ``return False`` that dynamo folds to True while tracing: the cheapest
# way for a wrapper to step aside inside a compiled region without a graph break.
_is_compiling = getattr(torch.compiler, "is_dynamo_compiling", None) or torch.compiler.is_compiling
# torch.jit.trace records what a call does: autoprof steps aside there as it does under dynamo (checked only
# where autoprof would annotate, never on the idle path).
_is_tracing = getattr(torch._C, "_is_tracing", None) or (lambda: False)


#: The :class:`Steps` whose step in progress another thread ended (``end()`` or ``stop()`` from a trainer's callback
#: fired off the step's thread): the step's own thread ends it at its next call into autoprof (see
#: :func:`_end_elsewhere`). The wrappers' nested path tests it (empty: one truth test).
_ENDED_ELSEWHERE: set[Steps] = set()


class _Floor:
    """In a forked child, the frame that called ``fork()``: the stack below it is the parent's (see :func:`_held`)."""

    __slots__ = ("frame",)

    def __init__(self) -> None:
        self.frame: types.FrameType | None = None


_FORK_FLOOR = _Floor()
HELD = 3  # the depth of a call held by a plain idle call: nested, found on the stack (never stored in the thread-local)
# The counted reasons of this module's paths that run often (a nested call's, a tick's): each boundary made once.
_STACK_PROBE = _guard.quiet("live.stack_probe")
_ANNOTATION_EXIT = _guard.quiet("live.annotation_exit")
_DROP_WATCH = _guard.quiet("live.drop_watch")
_DROP_WINDOW = _guard.quiet("live.drop_window")


def _held(skip: int = 2) -> int:
    """:data:`HELD` when a plain idle call of this thread holds its caller (a frame of a wrapper up the stack on its
    plain path, or itself held by one, while the depth is 0), else 0. That call's target is no longer plain: from its
    next call it marks the depth. ``skip``: the frames from here to the wrapper's caller (2: called by the wrapper
    itself). The wrapper's other frames are no holders (a concurrent task's bare call, a step whose depth a forked child
    reset), nor is anything below the fork a forked child runs from (the parent's calls)."""
    with _STACK_PROBE:
        frame: types.FrameType | None = sys._getframe(skip)
        floor = _FORK_FLOOR.frame
        sync, coroutine = _SYNC_CODE, _ASYNC_CODE
        while frame is not None and frame is not floor:
            code = frame.f_code
            if code is sync or code is coroutine:
                here = frame.f_locals
                # past its guards (its target read): on its plain path it has no depth of its own yet (the sync
                # wrapper's ``depth``, the async one's ``here``), a held one says HELD
                if "t" in here and (
                    ("depth" not in here and "here" not in here) or here.get("depth") == HELD or here.get("in_sync") == HELD
                ):
                    held = here["t"]
                    if held is not None:
                        held.nests()
                    return HELD
            frame = frame.f_back
    return 0


class Mode(IntEnum):
    """How an outermost call was entered, so that leaving it undoes exactly that."""

    UNBEGUN = 0  # begin() did not return (interrupted): end() works out what to undo
    OWNER = 2  # the outermost call of a target on its owner thread: a step of its schedule
    FOREIGN = 3  # the outermost call of a target on another thread: not a step, but its nested calls are annotations


UNBEGUN, OWNER, FOREIGN = Mode.UNBEGUN, Mode.OWNER, Mode.FOREIGN  # module constants: the wrappers read them often


def _internal_error(where: str, target: str | None, e: BaseException) -> None:
    _emit.error(f"{where}: {e}", "internal", e, target=target, window=None)


def _close_rf(annotation: Any) -> None:
    """Exit a record_function; never raises an Exception (an annotation that was never entered is skipped)."""
    with _ANNOTATION_EXIT:
        annotation.__exit__(None, None, None)


def _close_all(annotations: list[Any]) -> None:
    """Exit the annotations of a list, innermost (last) first, emptying it."""
    while annotations:
        _close_rf(annotations.pop())


class _Step(Step):
    """What the owner thread does around one outermost call of a target (entered only when not idle): the session's
    bookkeeping of the step (:class:`autoprof.live.session.Step`: one call into the session at its start, from
    :meth:`_Instrument.begin`, and one at its end, from :meth:`finish`) and the annotations it entered.

    It registers itself as the target's current step before it changes anything, so that whatever
    interrupts it (even a KeyboardInterrupt between two of its statements), :meth:`finish` finds it and
    undoes what it did: every annotation it entered is exited, and a window it belongs to is dropped.
    """

    __slots__ = ()

    def record(self) -> None:
        """The step records: its ``ProfilerStep#`` and its target's annotations, and its thread's CPU reading."""
        self.annotate(f"ProfilerStep#{self.number}")
        self.annotate(self.target.name)
        self.cpu0 = _cpu.read()
        self.faults0 = _cpu.minor_faults()

    def annotate(self, name: str) -> None:
        annotation = _record_function(name)
        self.annotations.append(annotation)  # listed before it is entered: an interrupted enter is still exited (or skipped)
        annotation.__enter__()  # type: ignore[no-untyped-call]

    def close_annotations(self) -> None:
        """Exit this step's own annotations now (its profiler is about to stop: a user's profiler wins)."""
        _close_all(self.annotations)

    def finish(self, wall_ns: int, raised: bool = False) -> None:
        """After the call. ``wall_ns`` < 0: the user's function never ran (autoprof was interrupted first);
        ``raised``: it ran and raised (a step that failed is never a step of a recorded window)."""
        try:
            _close_all(self.annotations)
        finally:
            cpu0 = self.cpu0
            cpu, faults = (-1, -1), -1
            try:
                if cpu0 is not None and wall_ns >= 0:  # a recorded step's thread CPU time and run-queue wait
                    cpu = _cpu.since(cpu0)
                    if self.faults0 >= 0:
                        now = _cpu.minor_faults()
                        faults = now - self.faults0 if now >= self.faults0 else -1
            finally:  # the bookkeeping, even if an interrupt lands in the reading
                SESSION.end_step(self, wall_ns, raised, cpu, faults)


class _Instrument:
    """Per-decorated-callable state and the call logic shared by the sync and async wrappers."""

    def __init__(self, name: str, schedule: dict[str, Any]) -> None:
        self.name = name
        self.schedule = schedule
        self.target: Target | None = None

    def get_target(self) -> Target:
        target = self.target
        if target is None:
            target = self.target = SESSION.target(self.name, self._schedule())
            memory = self.schedule.get("profile_memory")
            cfg = SWITCH.config
            options = {k: self.schedule.get(k, getattr(cfg, k)) for k in TRIGGER_KEYS}
            target.options(None if memory is None else bool(memory), Settings.of(options) if options["trigger"] else None)
        return target

    def _schedule(self) -> Schedule:
        """This callable's options over the configured defaults (read when its first call happens)."""
        cfg = SWITCH.config
        return Schedule.of({k: self.schedule.get(k, getattr(cfg, k)) for k in SCHEDULE_KEYS})

    def begin(self, calls: list[Any], label: int | None = None) -> Mode:
        """Enter an outermost call (the thread's nesting depth is 0). Returns the mode; an annotation to exit
        is appended to ``calls``; ``label``: the driving trainer's number for the step (None: the calls so far). Sets
        the depth first: the wrapper's ``finally`` resets it. A failure gives the target up (:meth:`failed`): FOREIGN."""
        _tls.d = 1
        try:
            if _is_tracing():
                # torch.jit.trace runs the call to record it: an annotation (ProfilerStep#3, autoprof.warmup) would
                # be baked into the traced graph, and differ on its check run. Not a step; nothing recorded.
                return FOREIGN
            target = self.target or self.get_target()
            me = _get_ident()
            if target.owner != me and not target.claim(me):
                # another thread's call: not a step, annotated while recording; its nested calls are
                # annotations too (the depth is set), never targets of their own
                if _ap._is_profiler_enabled:
                    annotation = _record_function(self.name)
                    calls.append(annotation)
                    annotation.__enter__()  # type: ignore[no-untyped-call]
                return FOREIGN
            if not (target.done and not _ap._is_profiler_enabled):
                step = _Step(target, target.calls if label is None else label)
                act = SESSION.begin_step(step)  # the step's place, its window (opened, started or deferred)
                if act == RECORD:
                    step.record()
                elif act == ANNOTATE and _ap._is_profiler_enabled:
                    step.annotate(target.name)  # someone else's profiler records: the call lands in that profile
            return OWNER
        except Exception as e:  # outside the guard, for speed: docs/architecture.md
            if _guard.from_signal_handler(e):
                raise  # the program's own signal handler raised it as autoprof handed it a held signal
            self.failed("step start", e)
            return FOREIGN  # exit what was entered, reset the depth

    def failed(self, where: str, e: Exception) -> None:
        """Give this target up (one error record, then only the idle path) rather than fail every call."""
        _internal_error(where, self.name, e)
        if self.target is not None:
            _give_up(self.target)

    def interrupted_mode(self) -> Mode:
        """The mode of a call whose :meth:`begin` was interrupted before it returned: OWNER where it had
        registered a step on this thread (so that :meth:`end` undoes it), else FOREIGN (reset the depth)."""
        target = self.target
        return OWNER if target is not None and target.owner == _get_ident() and target.current is not None else FOREIGN

    def end(self, mode: Mode, calls: list[Any], t0: int, raised: bool = False) -> None:
        """Leave an outermost call entered with :meth:`begin`: ``mode`` is what it returned (UNBEGUN: it was
        interrupted), ``t0`` when the user's function started (< 0: it never ran). Everything happens in
        here, under ``finally`` clauses, so an interrupt at any point still exits the annotations and finishes
        (or drops) the step: the caller evaluates nothing that could fail, and resets the depth in its own
        ``finally`` (an interrupt can land as this method is entered). A failure gives the target up."""
        try:
            wall_ns = -1
            try:
                if t0 >= 0:
                    wall_ns = _now() - t0
            finally:
                self._end(mode, calls, wall_ns, raised)
        except Exception as e:  # outside the guard, for speed: docs/architecture.md
            if _guard.from_signal_handler(e):
                raise  # the program's own signal handler raised it as autoprof handed it a held signal
            self.failed("step end", e)

    def _end(self, mode: Mode, calls: list[Any], wall_ns: int, raised: bool = False) -> None:
        if mode == UNBEGUN:
            mode = self.interrupted_mode()
        try:
            _close_all(calls)
        finally:
            target = self.target
            if mode == OWNER and target is not None:
                step = target.leave(wall_ns)  # no step in progress from here; a call that ran is counted
                if step is not None:
                    step.finish(wall_ns, raised)


def _trigger_failed(e: Exception, target: Target) -> None:
    """The trigger failed for ``target``: one error record, and its trigger is given up (its calls go on)."""
    _internal_error("trigger", target.name, e)
    _drop_watch(target)


@_guard.hook(lambda e, target, t0: _trigger_failed(e, target))
def _tick(target: Target, t0: float) -> None:
    """An idle call past its watch's next tick (see autoprof.live.trigger); never raises an Exception. The call right
    after each tick is a *probe* (:attr:`Watch.probing`): one nested in another call of this thread (a recursion first
    made after the windows, another target's call holding it: a step of its schedule, which marks the depth, or a
    plain call, found on the stack) is no step: its start is taken back and its target, like a plain holder, marks
    the depth from its next call, so the periods are the outermost calls' only."""
    watch = target.watch
    # _held(4): from here, this function, the guard's frame around it (_guard.hook) and the wrapper to its caller
    if watch is not None and watch.probing and (getattr(_tls, "d", 0) or (PLAIN.seen and _held(4))):
        target.nests()
        watch.unstart(t0)
        return
    SESSION.tick(target, t0, _cpu.runqueue_ns())  # the wait for a CPU: read at ticks only, never per call


def _drop_watch(target: Target) -> None:
    """The trigger is given up for this target (its calls go on, still counted); never raises an Exception."""
    with _DROP_WATCH:
        target.drop_watch()


@_guard.hook(lambda e, target, step, own_ns, wall_ns: _trigger_failed(e, target))
def _slow(target: Target, step: int, own_ns: int, wall_ns: int) -> None:
    """An idle step the trigger must look at (slow, or its baseline is due); never raises an Exception."""
    SESSION.check_slow(target, step, own_ns, wall_ns)


def _give_up(target: Target) -> None:
    step = target.give_up()
    if step is not None:  # a step that failed half-way: exit what it entered
        _close_all(step.annotations)
    with _DROP_WINDOW:
        SESSION.drop(target)


@_guard.hook(lambda e, name: _internal_error("annotate", name, e), None)
def _annotation(name: str) -> Any:
    """An entered ``record_function(name)`` for a nested call, or None when entering it failed (reported)."""
    rf = _record_function(name)
    rf.__enter__()  # type: ignore[no-untyped-call]
    return rf


@_guard.hook(lambda e, name: _internal_error("section enter", name, e), None)
def _section(name: str) -> Any:
    """An entered ``record_function(name)`` for a section of a loop's step (its name seen), or None when entering it
    failed (reported)."""
    SECTIONS_SEEN.add(name)
    rf = _record_function(name)
    rf.__enter__()  # type: ignore[no-untyped-call]
    return rf


def _unentered(e: Exception, annotation: Any, stack: list[Any], name: str) -> None:
    stack[-1] = None  # never entered: nothing to exit
    _internal_error("section enter", name, e)


@_guard.hook(_unentered)
def _enter_pushed(annotation: Any, stack: list[Any], name: str) -> None:
    """Enter ``annotation``, already on top of ``stack`` (so that an interrupt exits it): taken off when it fails."""
    annotation.__enter__()


def _make(ins: _Instrument, fn: Any) -> Callable[..., Any]:
    """The wrapper of a function: one factory, the same guards in the same order for a plain function and an
    ``async def`` one (whose step covers the awaited body). Each is one Python frame between the caller and ``fn``
    (recursive decorated functions keep half of the interpreter's recursion limit, the most any wrapper can).

    The guards: disabled, or inside a compiled region: the call as it is (``torch.jit.trace`` is checked where a call
    would be annotated); a nested call (the
    thread is inside a target's call): an annotation while a profiler records, else nothing; the idle fast path (the
    target's windows are over and no profiler records), kept inline (no method calls: it is what every call pays for
    the rest of a training run); else a step of the target's schedule. Every state change sits inside the ``try``
    whose ``finally`` undoes it, so an exception or a KeyboardInterrupt anywhere (the user's function, or autoprof's
    own bookkeeping) leaves autoprof consistent; autoprof's own Exceptions never reach the caller (the function then
    runs unannotated).
    """
    switch = SWITCH
    ap = _ap
    tls = _tls
    is_compiling = _is_compiling
    now = _now
    clock = _clock
    name = ins.name
    task_depth = _task_depth
    plain = PLAIN
    get_ident = _get_ident
    elsewhere = _ENDED_ELSEWHERE

    if inspect.iscoroutinefunction(fn):

        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            if not switch.enabled or is_compiling():
                return await fn(*args, **kwargs)
            t = ins.target
            if t is not None and t.idle and not ap._is_profiler_enabled:
                # the plain idle path, as in the sync wrapper: no task or thread depth to mark (a call that this one
                # holds finds it on the stack; a concurrent task's call is its own: no annotation is held across awaits)
                w = t.watch
                if w is not None and (
                    t.owner == get_ident() or (t.owner is None and t.claim(get_ident()))
                ):  # the trigger's timing, as in the sync wrapper
                    s0 = clock()
                    w.starts.append(s0)
                    if s0 > w.next:
                        _tick(t, s0)
                return await fn(*args, **kwargs)
            here = task_depth.get()  # this task's: concurrent tasks on one thread interleave at every await
            running = getattr(tls, "a", 0)  # outermost async calls in flight on this thread, in any task
            in_sync: int = getattr(tls, "d", 0)
            if in_sync and elsewhere and _end_elsewhere():  # a trainer's step another thread ended: ended now, here
                in_sync = getattr(tls, "d", 0)
            if here == 0 and not running and not in_sync and plain.seen:
                in_sync = _held()  # held by a plain idle call (sync, or an async one of this task)
            if here > 0 or (here == 0 and not running and in_sync):
                if t is not None and t.plain:
                    t.nests()  # this target's calls can be held by another's
                # nested in this task's call (or in a sync call that runs an event loop): an annotation while a
                # profiler records
                if not ap._is_profiler_enabled or _is_tracing():
                    return await fn(*args, **kwargs)
                me = get_ident()
                token = task_depth.set(1)
                rf = None
                try:
                    rf = _annotation(name)
                    return await fn(*args, **kwargs)
                finally:
                    if rf is not None and get_ident() == me:  # (another thread's: a coroutine the GC finalized there)
                        _close_rf(rf)
                    _reset(task_depth, token)
            if here < 0 or running:
                # another task's call is in flight on this thread (asyncio.gather): this one runs bare, neither a step
                # nor an annotation (two record_functions held across the awaits of concurrent tasks end out of order)
                token = task_depth.set(-1)
                bare = _bare_task.set(_running_task())  # whose bare call this is (see the sync wrapper)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    _reset(_bare_task, bare)
                    _reset(task_depth, token)
            me = get_ident()  # a call ends on its own thread, or its bookkeeping is not done at all (see below)
            token = task_depth.set(1)
            tls.a = running + 1
            try:
                if t is not None and t.done and not ap._is_profiler_enabled:
                    w = t.watch
                    if w is not None and (
                        t.owner == get_ident() or (t.owner is None and t.claim(get_ident()))
                    ):  # the trigger's timing, as in the sync wrapper
                        s0 = clock()
                        w.starts.append(s0)
                        if s0 > w.next:
                            _tick(t, s0)
                    tls.d = 1
                    try:
                        return await fn(*args, **kwargs)
                    finally:
                        if get_ident() == me:
                            tls.d = 0
                if t is not None and t.watch is not None:
                    t.watch.pause()
                calls: list[Any] = []
                mode = UNBEGUN
                t0 = -1
                raised = True
                try:
                    mode = ins.begin(calls)
                    t0 = now()
                    out = await fn(*args, **kwargs)
                    raised = False
                    return out
                finally:
                    # a coroutine left suspended when its thread's event loop closed, finalized by the garbage collector
                    # on another thread: its step was that thread's (ended with it: Session.owner_ended), and this
                    # thread's depth and calls in flight are not its own (lowered here, they made every later async
                    # call of this thread run bare)
                    if get_ident() == me:
                        try:
                            ins.end(mode, calls, t0, raised)
                        finally:
                            tls.d = 0
            finally:
                if get_ident() == me:
                    tls.a = getattr(tls, "a", 1) - 1
                _reset(task_depth, token)

        return awrapper

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not switch.enabled or is_compiling():
            return fn(*args, **kwargs)
        t = ins.target
        if t is not None and t.idle and not ap._is_profiler_enabled:
            # the plain idle path (what every call pays for the rest of a run): no thread-local depth to mark, nor any
            # count (a call that this one holds finds it on the stack: see autoprof.live.session.PLAIN)
            w = t.watch
            if w is not None and (t.owner == get_ident() or (t.owner is None and t.claim(get_ident()))):
                # (the owner's calls only; one whose thread ended hands them to the next thread that calls it)
                # the trigger's always-on timing: a clock read, an append, a comparison (see autoprof.live.trigger):
                # a step's time is its period, from its start to the next call's (the step and what runs after it:
                # the next batch's loading, a checkpoint), judged at a tick (a call past the watch's next), which
                # every slow period ends in
                s0 = clock()
                w.starts.append(s0)
                if s0 > w.next:
                    _tick(t, s0)
            return fn(*args, **kwargs)
        try:
            depth = tls.d
        except AttributeError:
            depth = tls.d = 0
        if not depth and task_depth.get() < 0 and _in_own_bare_call():
            # called by an async target's call that runs bare (a concurrent task's, asyncio.gather), after the thread's
            # other calls ended: nested in it, an annotation as in any other call of a target (a sync call holds its
            # annotation across no await), never a step of its own. Only in the bare call's own task: a task it created
            # or a thread it handed work to (asyncio.to_thread) copies its context but not its stack, and is no more
            # nested in it than in the same call on its idle path (which marks nothing; a holder is found on the
            # stack): nested here and a step there, a target's window opened on one path never closed on the other.
            depth = 1
        elif not depth and plain.seen:
            depth = _held()
        elif depth and elsewhere and _end_elsewhere():  # a trainer's step another thread ended: ended now, here
            depth = tls.d
        if depth:
            if t is not None and t.plain:
                t.nests()  # this target's calls can be held by another's: its idle path marks the depth
            if not ap._is_profiler_enabled or _is_tracing():
                return fn(*args, **kwargs)
            rf = None
            try:
                rf = _annotation(name)
                return fn(*args, **kwargs)
            finally:
                if rf is not None:
                    _close_rf(rf)
        if t is not None and t.done and not ap._is_profiler_enabled:
            w = t.watch
            if w is not None and (
                t.owner == get_ident() or (t.owner is None and t.claim(get_ident()))
            ):  # the trigger's timing, as on the plain path
                s0 = clock()
                w.starts.append(s0)
                if s0 > w.next:
                    _tick(t, s0)
            tls.d = 1
            try:
                return fn(*args, **kwargs)
            finally:
                tls.d = 0
        if t is not None and t.watch is not None:
            t.watch.pause()  # a period across a profiled call is no step's
        calls: list[Any] = []
        mode = UNBEGUN
        t0 = -1
        raised = True
        try:
            mode = ins.begin(calls)
            t0 = now()
            out = fn(*args, **kwargs)
            raised = False
            return out
        finally:
            try:
                ins.end(mode, calls, t0, raised)
            finally:  # even if an interrupt lands as end() is entered (the next step heals the rest)
                tls.d = 0

    return wrapper


def _running_task() -> object:
    """The asyncio task running on this thread; None where none runs (a worker thread, another event loop's library, a
    coroutine driven by hand). asyncio is imported by whoever runs the loop: looked up, never imported here."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return None
    try:
        return aio.current_task()
    except RuntimeError:  # no running event loop on this thread
        return None


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    """``var.reset(token)``, or nothing where an async call ends in another context than it began in: a coroutine left
    suspended when its event loop closed, finalized later by the garbage collector on whatever thread runs it (that
    context is not the call's to change; before, Python printed "Exception ignored in: <coroutine ...>
    ValueError: <Token ...> was created in a different Context" on the user's stderr)."""
    try:
        var.reset(token)
    except ValueError:
        pass


def _in_own_bare_call() -> bool:
    """Whether this call runs in the task of the bare async call whose context it sees (see the sync wrapper)."""
    task = _bare_task.get()
    return task is not None and task is _running_task()


def _wrapper_code(name: str) -> types.CodeType:
    return next(c for c in _make.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


#: The wrappers' code, one code object for every decorated function and one for every ``async def`` one (the
#: functions :func:`_make` defines): how :func:`_held` knows their frames, by identity (a code object's own hash reads
#: its whole bytecode: ~0.3 µs a frame).
_SYNC_CODE = _wrapper_code("wrapper")
_ASYNC_CODE = _wrapper_code("awrapper")


_IDLE = -1  # a driven step on the idle path: only the depth to reset at its end


def _end_elsewhere() -> bool:
    """If this thread is inside a driven step that another thread ended, end it here now (it belongs to this thread:
    its annotations, its window's profiler); whether it did."""
    driver = getattr(_tls, "driver", None)
    if driver is None or driver not in _ENDED_ELSEWHERE or driver._thread != _get_ident():
        return False
    driver._complete_elsewhere()
    return True


def _after_fork_in_child() -> None:
    """A child forked inside a decorated call (a ``multiprocessing`` pool started in a step) starts at depth 0: its
    calls are steps of its own targets, not annotations of a call that only runs in the parent."""
    _tls.d = 0
    _tls.a = 0
    # the caller of fork(): its frame and those below it are the parent's calls, which hold nothing here
    _FORK_FLOOR.frame = sys._getframe(1)
    _tls.driver = None
    _tls.sections = []
    _ENDED_ELSEWHERE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@_guard.hook(lambda e, ins, steps, number: _internal_error("step start", ins.name, e), UNBEGUN)
def _begin_driven(ins: _Instrument, steps: Steps, number: int | None) -> Mode:
    """:meth:`Steps.begin`'s step: its target driven by ``steps``' run, and begun (:meth:`_Instrument.begin`)."""
    target = ins.target or ins.get_target()
    target.run_by(steps.framework)
    return ins.begin(steps._calls, number)


class Steps:
    """The steps of a loop that autoprof does not call (a trainer's): :meth:`begin` before each step and :meth:`end`
    after it drive the schedule of the target ``name`` exactly as calls of an ``@autoprof`` function do (or ``with
    steps.step(n):``); between them, :meth:`enter` and :meth:`leave` annotate sections (recorded only while a window
    records), and ``@autoprof`` calls are annotations, not steps of their own. When the loop's run ends, however it
    ends (returned, stopped early, raised), :meth:`stop` ends the step in progress and the target's window; a new run
    calls :meth:`restart`. The trainer integrations are built on it.

    Schedule options as ``@autoprof``'s (a bad one raises :class:`ConfigError` here, once); ``framework`` is
    written into the target's window and finding records. Every call is on the thread of the step's
    :meth:`begin` (a call from another thread changes nothing, and one warning says so); none raises an Exception
    (a failure is one error record, then the target is given up and only the idle path runs).
    """

    __slots__ = (
        "__weakref__",
        "_calls",
        "_elsewhere",
        "_ins",
        "_mode",
        "_new_run",
        "_sections",
        "_t0",
        "_thread",
        "_warned_thread",
        "framework",
    )

    def __init__(self, name: str, *, framework: str | None = None, **schedule: Any) -> None:
        _name, options = _validate({"name": name, **schedule})
        self._ins = _Instrument(name, options)
        self.framework = framework
        self._mode: int | None = None  # None: no step in progress
        self._calls: list[Any] = []
        self._t0 = -1
        self._sections: list[tuple[str, Any]] = []  # (name, its record_function or None), innermost last
        self._thread: int | None = None  # the thread of the step in progress
        self._new_run = True  # the next step is the first of a run: the target's schedule starts over there
        self._warned_thread = False
        #: An end of the step in progress asked from another thread: ("end", when) or ("stop", when, reason, failed)
        self._elsewhere: tuple[Any, ...] | None = None

    @property
    def name(self) -> str:
        return self._ins.name

    @property
    def in_step(self) -> bool:
        """Whether a step has begun and not ended."""
        return self._mode is not None

    def begin(self, step: object = None) -> None:
        """Begin a step; ``step`` is the trainer's own number for it (its records' ``steps``; anything but an int
        from 0 below 2**63, a bool, or a trainer attribute that is missing: the count of steps so far). A step still open (its end
        was missed: the loop raised) is ended first."""
        if self._mode is not None:
            if not self._on_thread("begin"):
                return
            if self._elsewhere is not None:
                self._complete_elsewhere()  # ended by another thread: as it asked, when it asked
            else:
                self.end()
        number = step if type(step) is int and 0 <= step < 1 << 63 else None  # not a bool, nor past the schema's int64
        if _ENDED_ELSEWHERE:
            _end_elsewhere()  # another loop's step on this thread that another thread ended
        depth = getattr(_tls, "d", 0) or (PLAIN.seen and _held())
        if depth:
            driver = getattr(_tls, "driver", None)
            if driver is None or driver is self or not driver.in_step:
                return  # inside an ``@autoprof`` call (a loop around the trainer): not a step
            driver.stop("another loop's step began in this thread", failed=True)  # its loop left it open
        if not SWITCH.enabled or _is_compiling() or not TORCH_SUPPORTED:
            return
        self._thread = _get_ident()
        ins = self._ins
        target = ins.target
        if self._new_run:
            self._new_run = False
            self._restart_target()
        if target is not None and target.done and not _ap._is_profiler_enabled:
            _tls.d = 1
            _tls.driver = self
            self._mode = _IDLE
            watch = target.watch
            if watch is not None:  # the trigger's timing: the period from the last step's begin to this one's
                # counted, and timed less the time the period waited for a CPU (not the step's own)
                found = target.driven(_now(), number, _cpu.runqueue_ns())
                if found is not None:
                    _slow(target, *found)
            return
        if target is not None and target.watch is not None:
            target.watch.break_period()  # a period across a profiled step is no step's
        mode = UNBEGUN
        _tls.driver = self
        try:
            mode = _begin_driven(ins, self, number)
        finally:
            self._mode = mode
            self._t0 = _now()

    def end(self) -> None:
        """End the step in progress (nothing when none is): close its open sections, count it, and close the window
        whose last step it was. From another thread than the step's (a trainer's callback fired off it): the step's own
        thread ends it at its next call into autoprof, its time ending now (see :meth:`_asked_elsewhere`)."""
        if self._asked_elsewhere(("end", _now())):
            return
        self._end(failed=False)

    def _end(self, failed: bool, ended_at: int | None = None) -> None:
        mode = self._mode
        if mode is None or not self._on_thread("end"):
            return
        self._mode = None
        self._elsewhere = None  # the step's own thread ends it: an end asked from another one is moot
        _ENDED_ELSEWHERE.discard(self)
        calls, self._calls = self._calls, []
        try:
            self.leave(None)
            if mode != _IDLE:
                t0 = self._t0
                if ended_at is not None and t0 >= 0:
                    t0 += _now() - ended_at  # its time ends when another thread ended it
                # a failed step is an interrupted one (t0 < 0): its window is dropped, its cycle recorded again
                self._ins.end(Mode(mode), calls, -1 if failed else t0)
        finally:
            _tls.d = 0
            _tls.driver = None

    def _asked_elsewhere(self, request: tuple[Any, ...]) -> bool:
        """An end or a stop called from another thread than the step in progress's: it cannot be done there (a step's
        annotations and its window's profiler belong to its thread), and left undone it kept that thread inside the
        step for good (its later ``@autoprof`` calls annotations, never steps: no window again). So it is asked of the
        step's thread, which does it at its next call into autoprof (its next ``begin()``, an ``@autoprof`` call, any
        call of this object) unless it ends the step itself first; said once (``wrong_thread``). False: no step is in
        progress on another thread (the call is done here)."""
        if self._mode is None or self._thread is None or self._thread == _get_ident():
            return False
        self._elsewhere = request
        _ENDED_ELSEWHERE.add(self)
        self._on_thread(request[0])  # the warning, once
        return True

    def _complete_elsewhere(self) -> None:
        """On the step's own thread: do the end or stop another thread asked for (see :meth:`_asked_elsewhere`)."""
        request, self._elsewhere = self._elsewhere, None
        _ENDED_ELSEWHERE.discard(self)
        if request is None or self._mode is None:
            return
        if request[0] == "end":
            self._end(failed=False, ended_at=request[1])
        else:
            self.stop(request[2], failed=request[3])

    @_guard.hook(lambda e, self, reason="", *, failed=False: _internal_error("stop", self.name, e))
    def stop(self, reason: str = "the run ended", *, failed: bool = False) -> None:
        """The loop's run is over (``failed``: it raised): end the step in progress (a failed one is not counted and
        drops its window) and stop the target's window if one is still open, so that no profiler of autoprof's
        records after the run: that window is dropped (a window is all of its steps or none), never mixed into the
        next run's, and one ``autoprof.warning`` (``reason: "window_incomplete"``) says so. Never raises."""
        target = self._ins.target
        if self._mode is None and target is not None and not self._drives(target):
            return  # a stale run with no step in progress (torn down from any thread, by the GC): nothing of its own
        if self._asked_elsewhere(("stop", _now(), reason, failed)) or not self._on_thread("stop"):
            return
        if target is not None and not self._drives(target):
            # another loop's run (a later trainer's) drives the target now: this one's stop (an earlier trainer
            # torn down by the garbage collector, at whatever step of the new run it runs) ends only its own step
            target = None
        # first: a failed step's window is cut (said), never closed with that step; a loop that goes on after it
        # (``with steps.step(n):`` in a try) tries that cycle again, a bounded number of times
        if failed and target is not None and SESSION.cut(target, reason):
            SESSION.failed_try(target, sys.exc_info()[1])
        try:
            self._end(failed=failed)
        finally:
            if target is not None:
                SESSION.cut(target, reason)

    def restart(self) -> None:
        """A new run of the loop (a trainer's second ``fit``/``train``): a step left open is stopped first (stop never
        raises), and the target's schedule starts over at the next step, as on its first (its first step is cold
        again). A new ``Steps`` starts a run of its own too."""
        if not self._on_thread("restart"):
            return
        self.stop("a new run began", failed=True)
        self._new_run = True

    @_guard.hook(lambda e, self: _internal_error("restart", self.name, e))
    def _restart_target(self) -> None:
        """The first step of a run: a target of an earlier run (this loop's or another's) starts its schedule over;
        a window of it still open (another loop's run that never ended) is cut first."""
        target = self._ins.target or self._ins.get_target()
        target.drive(weakref.ref(self))
        if target.calls and target.current is None:
            SESSION.cut(target, "a new run began")
            target.restart(not rank_chosen())

    def _drives(self, target: Any) -> bool:
        """Whether this loop's run is the one driving ``target`` (the last whose first step began; or none began)."""
        driver = target.driver
        return driver is None or driver() is self

    @contextlib.contextmanager
    def step(self, step: object = None) -> Iterator[None]:
        """``with steps.step(n):`` one step: :meth:`begin` and :meth:`end`, or :meth:`stop` (``failed``) when the block
        raises, so a loop that raises never leaves the step, or a window, open."""
        self.begin(step)
        try:
            yield
        except BaseException:
            self.stop("the step raised", failed=True)
            raise
        self.end()

    def _on_thread(self, what: str) -> bool:
        """Whether this call is on the thread of the step in progress. A call from another thread changes nothing
        (the profiler and the thread's annotations belong to that thread): said once."""
        if self._thread is None or self._thread == _get_ident():
            return True
        if not self._warned_thread:
            self._warned_thread = True
            done = (
                "the step's own thread ends it at its next call into autoprof (its next begin(), an @autoprof call), "
                "unless it ends it itself first"
                if what in ("end", "stop")
                else "autoprof changed nothing"
            )
            _emit.warning(
                f"Steps({self.name!r}).{what}() was called from another thread than the step's begin(): {done} (a step, "
                "its sections and its window belong to the thread that began it)",
                "wrong_thread",
                target=self.name,
                window=None,
            )
        return False

    def enter(self, name: str) -> None:
        """Enter the section ``name`` (annotated while a window records)."""
        if self._thread is not None and self._thread != _get_ident():
            return
        annotation = None
        if _ap._is_profiler_enabled and SWITCH.enabled and not _is_compiling():
            annotation = _section(name)
        self._sections.append((name, annotation))

    def phase(self, name: str) -> None:
        """Go on in section ``name``: every open section is left, then ``name`` entered."""
        self.leave(None)
        self.enter(name)

    def leave(self, name: str | None) -> None:
        """Leave the innermost open section ``name`` and any entered inside it and left open; ``None``: every
        open section. A name that is not open changes nothing."""
        stack = self._sections
        if name is not None and not any(entry[0] == name for entry in stack):
            return
        if self._thread is not None and self._thread != _get_ident():
            return
        while stack:
            entry, annotation = stack.pop()
            if annotation is not None:
                _close_rf(annotation)
            if entry == name:
                return


class _ModuleProxy(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """``autoprof(model)``: a transparent proxy whose calls are steps. Pickling (``torch.save``,
    ``copy.deepcopy``) yields the plain module, without the instrumentation."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)

    def __reduce__(self) -> Any:
        return self.__wrapped__.__reduce__()

    def __copy__(self) -> Any:
        import copy

        return copy.copy(self.__wrapped__)

    def __deepcopy__(self, memo: Any) -> Any:
        import copy

        return copy.deepcopy(self.__wrapped__, memo)


def _qualname(obj: Any) -> str:
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    if isinstance(obj, torch.nn.Module):
        inner = getattr(obj, "_orig_mod", obj)  # a torch.compile'd module
        return type(inner).__qualname__
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__


def _underlying(obj: Any) -> Any:
    return obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj


def _validate(options: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    name = options.pop("name", None)
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError(f"name must be a non-empty string, not {name!r}")
    memory = options.pop("profile_memory", None)
    trigger = {k: options.pop(k) for k in TRIGGER_KEYS if k in options}
    unknown = set(options) - set(SCHEDULE_KEYS)
    if unknown:
        valid = ", ".join(("name", *SCHEDULE_KEYS, "profile_memory", *TRIGGER_KEYS))
        raise ConfigError(f"unknown autoprof option(s): {', '.join(sorted(unknown))} (valid: {valid})")
    checked: dict[str, Any] = {k: check_schedule_value(k, v) for k, v in options.items()}
    for k, v in trigger.items():  # the target's own trigger options over configure()'s (each field's check)
        try:
            checked[k] = CHECKS[k](v)
        except ConfigError:
            raise
        except Exception:
            raise ConfigError(f"{k} must be {ACCEPTS[k]}, not {v!r}") from None
    if memory is not None:  # the target's own choice over configure()'s (a bool: an int to the schedule's dict)
        checked["profile_memory"] = CHECKS["profile_memory"](memory)
    return name, checked


#: The oldest torch release autoprof supports (pyproject says the same; CI tests it).
TORCH_FLOOR = (2, 4)


def torch_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string ("2.11.0+cu130" -> (2, 11)); None when it cannot be read."""
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


_RELEASE = torch_release(torch.__version__)
TORCH_SUPPORTED = _RELEASE is None or _RELEASE >= TORCH_FLOOR
_warned_old_torch = False


def _old_torch(obj: Any) -> bool:
    """On a torch older than the floor, say so once (a warning at the user's decoration) and leave every
    decorated callable as it is: autoprof's live side needs what 2.4 added, its offline side does not."""
    global _warned_old_torch
    if TORCH_SUPPORTED:
        return False
    if not _warned_old_torch:
        _warned_old_torch = True
        floor = ".".join(map(str, TORCH_FLOOR))
        warnings.warn(
            f"autoprof needs torch >= {floor} to profile (this is torch {torch.__version__}): {_qualname(obj)} and every "
            "other decorated callable run unprofiled; `autoprof analyze` on saved traces still works",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return True


def instrument(obj: Any, name: str | None, schedule: dict[str, Any]) -> Any:
    """Wrap ``obj`` (function, method, classmethod/staticmethod, nn.Module instance)."""
    if not SWITCH.enabled or _old_torch(obj):
        return obj  # disabled at decoration time (or a torch below the floor): the original, unchanged
    fn = _underlying(obj)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        warnings.warn(
            f"autoprof: {_qualname(obj)} is a generator function; its calls only create the generator, so "
            "autoprof leaves it unwrapped rather than time that. Decorate the function that consumes it, or use "
            "autoprof.section inside it.",
            UserWarning,
            stacklevel=3,
        )
        return obj
    if not callable(fn):
        raise TypeError(f"autoprof can only decorate callables, not {type(obj).__name__}")
    ins = _Instrument(name or _qualname(obj), schedule)
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        # A plain function wrapper (one frame; functools.wraps keeps name, docstring, signature), re-wrapped
        # in classmethod/staticmethod where it came in one. Methods bind as any function does.
        wrapper = functools.wraps(fn)(_make(ins, fn))
        return type(obj)(wrapper) if isinstance(obj, (classmethod, staticmethod)) else wrapper
    # Objects (a module instance, a callable object) stay themselves behind a transparent wrapt proxy.
    inner = _make(ins, obj)

    def via_proxy(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    if isinstance(obj, torch.nn.Module):
        return _ModuleProxy(obj, via_proxy)
    return wrapt.FunctionWrapper(obj, via_proxy)


@overload
def autoprof(
    func: F,
    /,
    *,
    name: str | None = ...,
    wait: int = ...,
    warmup: int = ...,
    active: int = ...,
    repeat: int = ...,
    skip_first: int = ...,
    profile_memory: bool = ...,
    trigger: bool = ...,
    trigger_factor: float = ...,
    trigger_mads: float = ...,
    trigger_floor_ms: float = ...,
    trigger_history: int = ...,
    trigger_min_steps: int = ...,
    trigger_budget: float = ...,
    trigger_interval: int = ...,
) -> F: ...
@overload
def autoprof(
    func: None = None,
    /,
    *,
    name: str | None = ...,
    wait: int = ...,
    warmup: int = ...,
    active: int = ...,
    repeat: int = ...,
    skip_first: int = ...,
    profile_memory: bool = ...,
    trigger: bool = ...,
    trigger_factor: float = ...,
    trigger_mads: float = ...,
    trigger_floor_ms: float = ...,
    trigger_history: int = ...,
    trigger_min_steps: int = ...,
    trigger_budget: float = ...,
    trigger_interval: int = ...,
) -> Callable[[F], F]: ...
def autoprof(func: Any = None, /, **options: Any) -> Any:
    """Profile calls of ``func``: each outermost call is one step of its own schedule.

    Bare (``@autoprof``) or with keyword-only options (``@autoprof(name=..., wait=..., warmup=...,
    active=..., repeat=..., skip_first=..., profile_memory=..., trigger=..., trigger_factor=...)``: the trigger's
    options over ``configure()``'s), or called on the object with them (``autoprof(model,
    name="encoder")``). Works on functions, methods, classmethods,
    staticmethods, ``async def`` functions, ``nn.Module.forward`` and module instances
    (``autoprof(model)``).
    """
    name, schedule = _validate(dict(options))
    if func is None:
        return functools.partial(instrument, name=name, schedule=schedule)
    return instrument(func, name, schedule)


def section(name: str) -> Section:
    """An annotated block (``with autoprof.section("attn"):``) or function (``@autoprof.section("attn")``).

    Records a ``record_function`` annotation only while a window records; otherwise costs a flag check.
    A function, not a class: inside a compiled region it hands dynamo a ``contextlib.nullcontext()``, which
    every supported release traces (on 2.4, dynamo cannot trace a ``with`` on an object of a user class,
    even one that does nothing: ``Unsupported: BEFORE_WITH`` under ``fullgraph=True``).
    """
    if _is_compiling():
        return contextlib.nullcontext()  # type: ignore[return-value]
    return Section(name)


class Section:
    """What :func:`section` returns: an annotation context manager and decorator."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"section name must be a non-empty string, not {name!r}")
        self.name = name

    def __enter__(self) -> Section:
        if _is_compiling():
            return self  # dynamo ignores record_function; stepping aside adds no graph break
        stack = getattr(_tls, "sections", None)
        if stack is None:
            stack = _tls.sections = []
        stack.append(None)  # pushed first: whatever happens below, __exit__ pops this entry
        try:
            if _ap._is_profiler_enabled and SWITCH.enabled and not _is_tracing():
                SECTIONS_SEEN.add(self.name)
                annotation = stack[-1] = _record_function(self.name)
                _enter_pushed(annotation, stack, self.name)  # not entered: off the stack (reported)
            return self
        except BaseException:  # interrupted: ``with`` will not call __exit__, so undo the push here
            if stack:
                annotation = stack.pop()
                if annotation is not None:
                    _close_rf(annotation)
            raise

    def __exit__(self, *exc: Any) -> None:
        if _is_compiling():
            return
        stack = getattr(_tls, "sections", None)
        annotation = stack.pop() if stack else None
        if annotation is not None:
            _close_rf(annotation)

    def __call__(self, func: F) -> F:
        sec = self

        @wrapt.decorator
        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            if _is_compiling():
                return wrapped(*args, **kwargs)
            with sec:
                return wrapped(*args, **kwargs)

        if inspect.iscoroutinefunction(_underlying(func)):

            @wrapt.decorator
            async def awrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                with sec:
                    return await wrapped(*args, **kwargs)

            return awrapper(func)  # type: ignore[return-value]
        return wrapper(func)  # type: ignore[return-value]
