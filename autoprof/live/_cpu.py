"""Whether a step's thread ran (issue 49): its CPU time and the time it waited, runnable, for a CPU (preempted by
other work on the machine), read at a recorded step's start and end (never on the idle path).

A step's wall time less its thread's CPU time is time the thread was off the CPU: waiting by its own doing (a sync, a
sleep, a lock, data, torch's intra-op workers) or runnable and waiting for a CPU that other work held. Linux says the
second apart: ``/proc/thread-self/schedstat``'s run-queue wait (the scheduler's own count, ~9 µs to read). Where it
cannot be read, only the CPU time is known. The thread's minor page faults (``getrusage(RUSAGE_THREAD)``, Linux)
say how much of its CPU time went to mapping pages it touched: a profiled step's faults depend on where the
profiler's own allocations left the heap, and differ from one window to the next (issue 49). The readers are module
attributes so that tests inject their own clocks.
"""

from __future__ import annotations

import os
import threading
import time

from autoprof import _guard

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment,unused-ignore]

#: The calling thread's CPU time (ns).
thread_ns = time.thread_time_ns


def _runqueue_ns() -> int:
    """How long the calling thread has waited, runnable, for a CPU (ns); -1 where the platform does not say."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it (a watchdog's TimeoutError is an OSError)
        return -1


class _Kept:
    """A thread's open schedstat file (its descriptor closed with it, when the thread's locals go)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


_local = threading.local()


def _runqueue_kept_ns() -> int:
    """:func:`_runqueue_ns` from a file each thread keeps open (``pread``: ~0.6 µs, against ~5 µs to open it each
    time; the trigger reads it at each tick). A file that cannot be opened is not tried again on that thread; a fork's
    child opens its own (the parent's file names the parent's thread)."""
    try:
        f = _local.f
    except AttributeError:
        try:
            f = _local.f = _Kept(os.open("/proc/thread-self/schedstat", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
        except OSError:
            f = _local.f = None
    if f is None:
        return -1
    try:
        return int(os.pread(f.fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it (a watchdog's TimeoutError is an OSError)
        return -1


def _forget() -> None:
    global _local
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

#: The calling thread's run-queue wait so far (ns; -1: not known here).
runqueue_ns = _runqueue_kept_ns if hasattr(os, "pread") else _runqueue_ns


def _minor_faults() -> int:
    """The calling thread's minor page faults so far (a page it touched that the kernel had to map, most often a fresh
    one it zero-fills: ~1-2 µs each, in the thread's CPU time); -1 where the platform does not say."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError, ValueError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it
        return -1


#: The calling thread's minor page faults so far (-1: not known here).
minor_faults = _minor_faults


def read() -> tuple[int, int]:
    """Now: (the thread's CPU time, its run-queue wait; ns, the second -1 where not known)."""
    return thread_ns(), runqueue_ns()


def since(start: tuple[int, int]) -> tuple[int, int]:
    """Since ``start`` (:func:`read`): (CPU time, run-queue wait; ns, the second -1 where not known)."""
    cpu, waited = read()
    return max(cpu - start[0], 0), (max(waited - start[1], 0) if waited >= 0 and start[1] >= 0 else -1)
