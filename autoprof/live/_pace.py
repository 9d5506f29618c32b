"""Pacing for the background analysis, so that it yields to the training thread.

The analysis is Python: while it runs, it takes the GIL (and a core) from the training loop, and the steps right
after a window got slower by about the analysis time (88 ms against 32 ms in one trial). So the analysis thread
works in short slices and sleeps between them (about 5 % of the time, with the lowest CPU priority its thread can
have), unless nobody waits on the other side: ``autoprof.flush()`` and the exit drain run at full speed.

No torch import here.
"""

from __future__ import annotations

import os
import threading
import time

#: Work at most this long ...
SLICE_S = 0.0005
#: ... then sleep this long (a 5 % duty cycle while the program trains) ...
PAUSE_S = 0.0095
#: ... for at most this long per job: a very large window then finishes at full speed, well within the time the
#: comparing rank waits for the others' summaries (``cross_rank_timeout_s``, 30 s by default).
MAX_PACED_S = 10.0


class Pacer:
    """``tick()`` at regular points of the analysis: after each slice of work it sleeps, unless someone waits for
    the analysis (:meth:`wait_begin`)."""

    def __init__(self) -> None:
        self._waiters = 0  # callers waiting for the analysis (flush, exit): full speed while any waits
        self._lock = threading.Lock()
        self._local = threading.local()

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

    def stop(self) -> None:
        self._local.on = False

    def tick(self) -> None:
        if not getattr(self._local, "on", False):
            return
        now = time.perf_counter()
        if now - self._local.mark >= SLICE_S:
            if not self._waiters and now - self._local.began < MAX_PACED_S:
                time.sleep(PAUSE_S)
            self._local.mark = time.perf_counter()


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
