"""Whether a step's thread ran (issue 49): its CPU time and its involuntary context switches over the step, read at a
recorded step's start and end (never on the idle path).

A step's wall time less its thread's CPU time is time the thread was off the CPU: waiting by its own doing (a sync, a
sleep, a lock, data) or preempted by other work on the machine. Involuntary context switches (Linux's
``RUSAGE_THREAD``) say which: none, and the thread only gave the CPU up itself. The readers are module attributes so
that tests inject their own clocks.
"""

from __future__ import annotations

import time

try:
    import resource

    _RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]
    _RUSAGE_THREAD = None

#: The calling thread's CPU time (ns).
thread_ns = time.thread_time_ns


def _switches() -> int:
    """The calling thread's involuntary context switches so far; -1 where the platform does not count them."""
    if _RUSAGE_THREAD is None:
        return -1
    try:
        return int(resource.getrusage(_RUSAGE_THREAD).ru_nivcsw)
    except (OSError, ValueError):
        return -1


#: The calling thread's involuntary context switches (-1: not counted here).
switches = _switches


def read() -> tuple[int, int]:
    """Now: (the thread's CPU time in ns, its involuntary context switches)."""
    return thread_ns(), switches()


def since(start: tuple[int, int]) -> tuple[int, int]:
    """Since ``start`` (:func:`read`): (CPU time in ns, involuntary context switches; -1 where not counted)."""
    cpu, sw = read()
    return max(cpu - start[0], 0), (sw - start[1] if sw >= 0 and start[1] >= 0 else -1)
