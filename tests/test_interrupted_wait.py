"""A Ctrl-C while the program waits for autoprof (issue 45, item 1; found by the loaded runs of the README's test
command): ``flush()`` waited in ``queue.Queue.join()``, a ``threading.Condition`` on the lock the analysis thread
takes for each job. A KeyboardInterrupt landing where ``Condition.wait`` takes that lock back left the lock released
by the main thread while the analysis thread held it: the analysis thread died on "release unlocked lock" and every
later ``flush()`` hung (seen once in a Ctrl-C storm beside two busy processes: 300 s, then killed).

The interrupt is injected at each line the main thread runs inside the call in turn (a trace function that raises
KeyboardInterrupt at its n-th line event), so the test needs no storm and no race."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import autoprof
from autoprof.live.session import SESSION, SIGNALS_HELD, _SignalsHeld

#: Where a real SIGINT is held back (autoprof's held sections note it and deliver it at their end): the interrupt is
#: raised at the first line after, as Python would deliver it.
_HOLDING = {f.__code__ for f in (_SignalsHeld.__enter__, _SignalsHeld.__exit__, _SignalsHeld._restore, _SignalsHeld._note)}


def _interrupt_at(n: int, call: Callable[[], Any]) -> bool:
    """Run ``call`` with a KeyboardInterrupt raised at the main thread's ``n``-th line event inside it (any frame: the
    standard library's too), or at the first line after that where signals are not held. True when it was raised
    (the call ran that far)."""
    seen = [0]
    raised = [False]

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and not raised[0]:
            seen[0] += 1
            if seen[0] >= n and not SIGNALS_HELD.depth and frame.f_code not in _HOLDING:
                raised[0] = True
                raise KeyboardInterrupt
        return tracer

    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return raised[0]


def _slow_job(done: list[int]) -> Callable[[], None]:
    def job() -> None:
        time.sleep(0.005)
        done.append(1)

    return job


def _whole(n: int) -> None:
    """After an interrupt at line ``n``: the session's lock is not left held (a later thread that takes it would hang:
    an interrupt where ``with self.lock:`` calls the lock's ``__exit__`` in flush's path did that), the analysis thread
    runs, and it drains."""
    assert not SESSION.lock._is_owned(), f"the session's lock was left held (interrupt at line {n})"  # type: ignore[attr-defined]
    assert SESSION._worker is not None and SESSION._worker.is_alive(), (
        f"the analysis thread died or reads as stopped (interrupt at line {n})"
    )
    assert SESSION.flush(timeout=10.0), f"flush() never drained after an interrupt at line {n}"


def _sweep(done: list[int], call: Callable[[], Any]) -> int:
    """Interrupt ``call`` at its first line, its second, ... each time with a slow job queued first (the analysis thread
    busy, flush() with a job to wait for), until the n-th line is past the call's end; checks :func:`_whole` after each.
    Returns that n."""
    n = 1
    while True:
        SESSION._submit(_slow_job(done))
        if not _interrupt_at(n, call):
            return n
        _whole(n)
        n += 1


def test_a_ctrl_c_anywhere_in_flush_leaves_the_analysis_running() -> None:
    autoprof.configure(background=True)
    done: list[int] = []
    n = _sweep(done, SESSION.flush)
    assert n > 5 and len(done) == n  # every job ran, each interrupted flush's too
    assert all(t.name != "autoprof-analysis" or t is SESSION._worker for t in threading.enumerate())


def test_a_ctrl_c_anywhere_in_handing_a_window_to_the_analysis_leaves_it_running() -> None:
    autoprof.configure(background=True)
    done: list[int] = []
    n = _sweep(done, lambda: SESSION._submit(_slow_job(done)))
    assert n > 3


def test_holding_signals_raises_nothing_the_program_could_see() -> None:
    # signal.signal and signal.getsignal hand back the old handler as a signal.Handlers by raising and catching a
    # KeyError in Enum.__new__ for any handler other than SIG_DFL and SIG_IGN (Python's own SIGINT handler is one). The
    # sweeps above raise their KeyboardInterrupt at a line in any frame: there, inside that except clause, which left
    # the KeyError as the handled exception of the main thread, and a later test's AssertionError in the same process
    # came chained onto a dozen of them ("During handling of the above exception"). A held section calls the C
    # functions: no Python frame runs in it but its own, and nothing is raised.
    raised: list[str] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception":
            raised.append(f"{arg[0].__name__} in {frame.f_code.co_name} ({frame.f_code.co_filename})")
        return tracer

    assert threading.current_thread() is threading.main_thread()
    sys.settrace(tracer)
    try:
        with SIGNALS_HELD, SIGNALS_HELD:  # nested: held once
            pass
    finally:
        sys.settrace(None)
    assert not raised, raised
    assert not SIGNALS_HELD.depth and not SIGNALS_HELD.saved
    import signal

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
