"""Threads that opened autoprof's windows, waited for at a fork while their native exit is still under way.

``Thread.join()`` returns once a thread's Python part is over, before its native exit (its thread-local destructors)
is (before Python 3.13; from 3.13 ``join()`` waits for the native exit too, and a thread nobody joined is still there
while it runs), and MKL frees its own per-thread state among those destructors. A fork meanwhile hands the child MKL's
allocator mid-update: the child's first matmul spins in it forever (``mkl_serv_allocate`` →
``mm_account_ptr_by_tid``). A thread that started and stopped torch's profiler takes longer there. Beside two busy
processes (torch 2.13 CPU): three threads of profiled steps, one of them a window's owner, joined, then ``os.fork()``:
9 and 10 of 16 children hung, against 0 of 16 when the window's owner was the main thread and 0 of 16 with this wait
(plain torch: 1 of 24 with threads of one matmul each; on a quiet machine, none in 14).

So before a fork, each thread that opened a window, whose Python part is over and whose native thread still exists
(Linux: ``/proc/self/task/<tid>``, the same thread by its start time), is waited for until it is gone, at most
:data:`MAX_WAIT_S` in all a fork. Nothing is waited for where ``/proc`` does not say, nor for a thread
still running (the main thread, a pool's worker): only exits already under way.

No torch import here.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable

from autoprof import _guard

#: The longest a fork waits for exiting threads, all of them together.
MAX_WAIT_S = 0.5
#: How often the wait looks again.
POLL_S = 0.0005
#: Threads kept at most (the oldest dropped first): a program that opens windows from ever-new threads.
KEEP = 64

_TASKS = "/proc/self/task"

#: native thread id -> (the thread, weakly; its start time in clock ticks, from its stat)
_threads: dict[int, tuple[Callable[[], threading.Thread | None], int]] = {}


def _start_ticks(tid: int) -> int | None:
    """The start time (field 22 of ``/proc/self/task/<tid>/stat``, clock ticks since boot) of the task ``tid``;
    None where it does not exist or cannot be read."""
    try:
        with open(f"{_TASKS}/{tid}/stat", "rb") as f:
            text = f.read()
        # the command name (field 2) is in parentheses and may hold spaces: fields are counted after its end
        return int(text[text.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it
        return None


#: Read by the wait (tests replace them: a fake clock, a fake /proc)
start_ticks: Callable[[int], int | None] = _start_ticks
native_id: Callable[[], int] = threading.get_native_id
monotonic: Callable[[], float] = time.monotonic
sleep: Callable[[float], None] = time.sleep


def note() -> None:
    """The calling thread opens a window: waited for at a fork once its Python part is over (see above). Once per
    window, on the thread that opens it."""
    thread = threading.current_thread()
    tid = native_id()
    known = _threads.get(tid)
    if known is not None and known[0]() is thread:
        return
    ticks = start_ticks(tid)
    if ticks is None:  # no /proc here: nothing to wait on
        return
    if len(_threads) >= KEEP:
        del _threads[next(iter(_threads))]
    _threads[tid] = (weakref.ref(thread), ticks)


def wait_for_exits() -> float:
    """Wait until every noted thread whose Python part is over has left the process, at most :data:`MAX_WAIT_S`;
    the seconds waited. Threads gone (or whose id a new thread took) are forgotten."""
    if not _threads:
        return 0.0
    started = monotonic()
    for tid, (ref, ticks) in list(_threads.items()):
        thread = ref()
        if thread is not None and thread.is_alive():
            continue
        while start_ticks(tid) == ticks:  # its native exit is still under way
            if monotonic() - started >= MAX_WAIT_S:
                return monotonic() - started
            sleep(POLL_S)
        _threads.pop(tid, None)
    return monotonic() - started


def _before_fork() -> None:
    """``os.fork()``'s parent, before it forks: :func:`wait_for_exits`. Never raises into the fork (an at-fork
    handler's exception is printed, not raised); a Ctrl-C meanwhile ends the wait and is raised in the main thread
    right after."""
    try:
        with _guard.quiet("live.fork_wait"):  # a /proc that reads oddly: the fork goes on as it would have
            wait_for_exits()
    except KeyboardInterrupt:
        import _thread

        _thread.interrupt_main()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: nothing to wait for."""
    _threads.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
