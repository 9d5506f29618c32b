"""Pacing for the background analysis, so that it yields to the training thread.

The analysis is Python: while it runs, it takes the GIL (and a core) from the training loop, and the steps right
after a window got slower by about the analysis time (88 ms against 32 ms in one trial). So the analysis thread
works in short slices and sleeps between them (about 5 % of the time, with the lowest CPU priority its thread can
have), unless nobody waits on the other side: ``autoprof.flush()`` and the exit drain run at full speed.

While a window closes (its profiler's ``stop_trace``, tens of milliseconds) the background does not work at all: its
slices took the GIL from the stop (a second window's stop took 39 ms against 34 with the first window's analysis
over before it opened, and 33 for torch.profiler alone: issue 50). It waits at most ``MAX_HELD_S`` a job. (Waiting
through a window's whole recorded steps was tried and left: back-to-back windows then starved the analysis into
skipping windows, and its pause of the cyclic GC lasted through the next window.)

No torch import here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

#: Work at most this long ...
SLICE_S = 0.0005
#: ... then sleep this long (a 5 % duty cycle while the program trains) ...
PAUSE_S = 0.0095
#: ... for at most this long per job: a very large window then finishes at full speed, well within the time the
#: comparing rank waits for the others' summaries (``cross_rank_timeout_s``, 30 s by default).
MAX_PACED_S = 10.0
#: The longest a job waits, all in all, for windows that close (then it runs paced as it would otherwise: a stop that
#: hangs); the wait is not counted in ``MAX_PACED_S``.
MAX_HELD_S = 30.0
#: How often a waiting thread asks whether the close is over (a close takes tens of milliseconds: the read that waits
#: for it should start right after it, in the steps between two windows).
CLOSE_POLL_S = 0.001


def _never() -> bool:
    return False


class Pacer:
    """``tick()`` at regular points of the analysis: after each slice of work it sleeps, unless someone waits for
    the analysis (:meth:`wait_begin`)."""

    def __init__(self) -> None:
        self._waiters = 0  # callers waiting for the analysis (flush, exit): full speed while any waits
        self._lock = threading.Lock()
        self._local = threading.local()
        #: Whether a window closes now (set by the session: autoprof.live.session)
        self.closing: Callable[[], bool] = _never

    def __enter__(self) -> Pacer:
        """``with PACER:`` around a wait for the analysis (:meth:`wait_begin`, then :meth:`wait_end`)."""
        self.wait_begin()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait_end()

    def wait_begin(self) -> None:
        """A caller starts waiting for the analysis: it runs at full speed until :meth:`wait_end` (``autoprof.flush()``
        holds signals around each, so a Ctrl-C cannot leave the count one high: the analysis unpaced for the run)."""
        with self._lock:
            self._waiters += 1

    def wait_end(self) -> None:
        with self._lock:
            self._waiters -= 1

    def active(self) -> bool:
        return bool(getattr(self._local, "on", False))

    def start(self) -> None:
        """Pace the calling thread from now on (the analysis worker, at the start of each job)."""
        self._local.on = True
        self._local.mark = self._local.began = time.perf_counter()
        self._local.held = 0.0

    def stop(self) -> None:
        self._local.on = False

    def tick(self) -> None:
        if not getattr(self._local, "on", False):
            return
        now = time.perf_counter()
        if now - self._local.mark >= SLICE_S:
            if not self._waiters and now - self._local.began < MAX_PACED_S:
                time.sleep(PAUSE_S)
                self.hold()
            self._local.mark = time.perf_counter()

    def hold(self) -> None:
        """On a paced thread: wait while a window closes (:meth:`unclosed`), at most ``MAX_HELD_S`` a job in all.
        Elsewhere (an analysis on the training thread itself): nothing."""
        local = self._local
        if not getattr(local, "on", False):
            return
        waited = self.unclosed(MAX_HELD_S - local.held)
        if waited:
            local.held += waited
            local.began += waited  # the paced budget is of the analysis's own time

    def unclosed(self, most: float = MAX_HELD_S) -> float:
        """Wait while a window closes, unless someone waits for the analysis, at most ``most`` seconds; the seconds
        waited. For autoprof's own threads only (the reader's too): never the training thread, which closes them."""
        started = time.perf_counter()
        waited = 0.0
        while waited < most and not self._waiters and self.closing():
            time.sleep(CLOSE_POLL_S)
            waited = time.perf_counter() - started
        return waited


PACER = Pacer()


def lower_thread_priority() -> None:
    """Give the calling thread the lowest CPU priority (Linux: a thread's own nice value); nothing elsewhere."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _after_fork_in_child() -> None:
    """A forked child: a fresh lock (another thread of the parent may have held it at the fork) and no waiters."""
    PACER._lock = threading.Lock()
    PACER._waiters = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
