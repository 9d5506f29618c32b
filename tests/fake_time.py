"""A fake clock for the live side (issue 49; pyinstrument's ``fake_time_util.py`` is the model): a context manager that
patches every clock the trigger, the schedule and the budget read -- the wrappers' wall clocks
(``instrument._now``, ns, and ``instrument._clock``, seconds), the step thread's CPU time and its run-queue wait
(``_cpu.thread_ns``, ``_cpu.runqueue_ns``) -- so a test drives steps with the wall, CPU and run-queue times it chooses:
no sleeping, no racing, the same verdicts on a quiet machine and a loaded one.

Install it before decorating (the wrappers bind their clocks when they are made)::

    with fake_time() as clock:
        step = autoprof(name="x")(lambda i: i)
        clock.run(ms=2)            # 2 ms of the program's own work: wall and CPU time advance
        clock.wait(ms=3)           # 3 ms preempted: wall time and run-queue wait advance, the CPU time does not
        step(0)

:func:`drive` feeds a :class:`~autoprof.live.trigger.Watch` as the wrappers' idle path does (a start appended, a tick
when it is past ``next``), on the same clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from autoprof.live import _cpu, instrument
from autoprof.live.trigger import Trigger, Watch

MS = 1_000_000


class FakeClock:
    """The fake clocks' state: ``wall`` (ns since an arbitrary origin), ``cpu`` and ``waited`` (ns so far)."""

    def __init__(self, wall: int = 1_000_000_000) -> None:
        self.wall = wall
        self.cpu = 0
        self.waited = 0

    def run(self, ms: float = 0.0, ns: int = 0) -> None:
        """The thread runs: wall and CPU time advance."""
        d = ns + round(ms * MS)
        self.wall += d
        self.cpu += d

    def wait(self, ms: float = 0.0, ns: int = 0) -> None:
        """The thread is runnable and waits for a CPU (preempted): wall time and run-queue wait advance."""
        d = ns + round(ms * MS)
        self.wall += d
        self.waited += d

    def sleep(self, ms: float = 0.0, ns: int = 0) -> None:
        """The thread waits by its own doing (a sync, I/O, data): only the wall time advances."""
        self.wall += ns + round(ms * MS)

    def seconds(self) -> float:
        return self.wall / 1e9


@contextlib.contextmanager
def fake_time(clock: FakeClock | None = None) -> Iterator[FakeClock]:
    """Patch the live side's clocks with ``clock`` (a fresh one by default) for the block."""
    clock = clock or FakeClock()
    saved = (instrument._now, instrument._clock, _cpu.thread_ns, _cpu.runqueue_ns)
    instrument._now = lambda: clock.wall
    instrument._clock = clock.seconds
    _cpu.thread_ns = lambda: clock.cpu
    _cpu.runqueue_ns = lambda: clock.waited
    try:
        yield clock
    finally:
        instrument._now, instrument._clock, _cpu.thread_ns, _cpu.runqueue_ns = saved


class Driver:
    """A :class:`Watch` fed as the wrappers' idle path feeds it, on ``clock`` (inside :func:`fake_time`): each
    :meth:`call` is one idle call's start; a trigger it returns opens a window of ``cost`` profiled steps at once
    (the periods across it are broken, as a profiled call breaks them) unless ``windows`` is False."""

    def __init__(self, watch: Watch, clock: FakeClock, cost: int = 4, windows: bool = True) -> None:
        self.watch = watch
        self.clock = clock
        self.cost = cost
        self.windows = windows
        self.calls = 0
        self.fired: list[Trigger] = []
        self.found: list[Trigger] = []  # every trigger asked for, opened or not

    def call(self) -> Trigger | None:
        """One idle call's start (what the wrapper does before the user's function)."""
        w = self.watch
        t0 = self.clock.seconds()
        self.calls += 1
        w.starts.append(t0)
        found = w.tick(t0, self.calls, self.cost, _cpu.runqueue_ns()) if t0 > w.next else None
        if found is not None:
            self.found.append(found)
        return found

    def step(self, own_ms: float, waited_ms: float = 0.0) -> Trigger | None:
        """One call, a step of ``own_ms`` of the program's own time preempted for ``waited_ms``; then the window, if
        the call's tick asked for one (its steps as long as this one)."""
        found = self.call()
        self.clock.run(ms=own_ms)
        self.clock.wait(ms=waited_ms)
        if found is not None and self.windows:
            w = self.watch
            w.fired(found, self.cost)
            self.fired.append(found)
            w.pause()  # the window's steps are profiled: no period of theirs is timed
            for _ in range(self.cost):
                self.calls += 1
                self.clock.run(ms=own_ms)
            w.recorded([])
        return found
