"""Catch the slow step: a target's running baseline of step times and the trigger that asks for a window when a step
is slower than the run's own normal. Pure Python, no torch, no clock: it is fed step numbers and step times (the
wrapper measures each idle step's period, from its start to the next call's start), so its logic is tested on
synthetic times.

The baseline is the median and the MAD (median absolute deviation) of the last ``trigger_history`` unprofiled steps,
refreshed every 100 steps (every 200, 400, ... up to 1,000 while it holds) and before any step over the limit is
judged (never on every call: the idle path compares one integer, :attr:`Watch.limit`). A step is *slow* when it is
at once ``trigger_factor`` times the median, ``trigger_mads`` MADs above it and ``trigger_floor_ms`` above it (the
factor says it matters, the MADs that it is not the run's usual noise, the floor that a window can show it). A slow
step alone asks for nothing (a preemption, a GC pause: gone before any window could record, since the past cannot be
profiled); a window is asked for when

- two steps in a row are slow (``persistent``): the window records the next steps, or
- the last three slow steps are evenly spaced, ``k`` steps apart (``recurring``, period ``k``): the window is aimed
  so that its active steps include the next occurrence, the last slow step + ``k``.

A step's time is its *own* time: its wall time less the time its thread waited, runnable, for a CPU that other work
held (the run-queue wait of ``/proc/thread-self/schedstat``, read by the wrappers at ticks only and handed to
:meth:`Watch.tick`, see :func:`own_times`; the trainers' driver reads it at each step): a step slow
in wall time but not in its own is the machine, not the program, and neither asks for a window nor widens the
baseline. Where the wait cannot be read (not Linux) the own time is the wall time.

A slowdown is *held* from its first slow step until a window judged it: while held, the baseline learns nothing (a
slowdown that the interval, the budget or another window holds off cannot become the run's normal before its window
opens). After a triggered window, the first step the trigger times says what the window was: still slow, the slowdown
lasts (the window judged it: the baseline may learn it, the interval holds, and it asks for no other window while
it lasts); back to normal, and none of the window's own steps slow either (a recurring slowdown's window records its
occurrence), the window fired on noise or a slowdown now gone, and it holds no later window off (its interval is
given back; its steps still count against the budget).

Then the budget: at least ``trigger_min_steps`` steps of history, ``trigger_interval`` steps since the last
triggered window, and the profiled steps of triggered windows (warmup and active) at most ``trigger_budget`` of the
steps seen, this window's included. Whether the window can open at all (one profiler at a time) is the session's
call, which tells :meth:`Watch.fired` when it did.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Slow steps remembered (their step numbers), enough to see three evenly spaced ones.
SLOW_KEEP = 4
#: The quick-reject limit is refreshed every this many steps once the baseline stands (every ``REFRESH_EARLY`` before):
#: the idle path compares one integer per call instead of computing a median (~4 µs for 50 steps). A step over the
#: limit is judged against a baseline refreshed then, from the last ``trigger_history`` steps exactly: a stale limit
#: can only let a slowdown wait (at most ``REFRESH_MAX`` steps) when steps got faster, never call a step slow wrongly.
REFRESH_EVERY = 100
REFRESH_EARLY = 8
#: While the baseline holds (a refresh finds the median within ``STABLE`` of the last), the refresh interval doubles,
#: up to this many steps: a steady run pays for a median every 1,000 steps, not every 100 (~40 ns a call at 100). Any
#: refresh that finds the median moved starts again at ``REFRESH_EVERY``.
REFRESH_MAX = 1000
STABLE = 0.1
NEVER = sys.maxsize  # a limit no step reaches: no baseline yet
#: The wrapper's starts are judged at a *tick*: the first call that starts later than ``limit`` after the last tick (at
#: most ``TICK_MAX`` ns after it). Between two ticks every period is at most that long, so only the period that ends at
#: a tick can be slow: each slow step is still judged at the call that ends it, and the calls between pay one clock
#: read, one append and one comparison (their count is the growth of :attr:`Watch.starts`, settled at ticks). A fast
#: step ticks once a ``trigger_floor_ms`` or so, a slow one every few calls.
TICK_MAX = 10_000_000
#: At a tick, a refresh that is due by its step count waits until this long after the last one (once the baseline
#: stands): a fast step (thousands of calls between ticks) pays for a median 10 times a second, not at every tick.
REFRESH_MIN_NS = 100_000_000
#: The wrappers' clock reads seconds as a float (``time.perf_counter``): a float comparison is one the interpreter
#: specializes, an int of perf_counter_ns (two digits) is not. A double holds ``perf_counter`` to a few ns after a
#: year of uptime; periods are converted to integer ns at ticks (rounded), where the baseline and the judge read them.
NS = 1e9

#: A step start in the future (~146 years of perf_counter_ns): the next period measured from it is negative, no
#: step's (the first step's, one across a profiled step). The trainers' driver appends it without a test; the
#: baseline and the judge skip it.
FUTURE = 1 << 62


@dataclass(frozen=True, slots=True)
class Settings:
    """A target's trigger options (validated values, see :mod:`autoprof.config`)."""

    factor: float
    mads: float
    history: int
    min_steps: int
    budget: float
    interval: int
    floor_ns: int

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Settings:
        """From a mapping with the trigger keys of the config (``trigger_factor``, ...; ``trigger`` itself not needed)."""
        return cls(
            factor=float(values["trigger_factor"]),
            mads=float(values["trigger_mads"]),
            history=int(values["trigger_history"]),
            min_steps=int(values["trigger_min_steps"]),
            budget=float(values["trigger_budget"]),
            interval=int(values["trigger_interval"]),
            floor_ns=int(round(float(values["trigger_floor_ms"]) * 1e6)),
        )


@dataclass(frozen=True, slots=True)
class Trigger:
    """Why a triggered window opened: the slow step that asked for it and the baseline it was judged against."""

    step: int  # the slow step's number
    wall_ns: int  # its own time (its wall time less its run-queue wait; the wall time where that is unknown)
    median_ns: int  # the baseline's median
    mad_ns: int  # and MAD
    limit_ns: int  # the own time above which a step was slow
    kind: str  # "persistent" (two slow steps in a row) or "recurring" (evenly spaced)
    period: int | None  # recurring: steps between occurrences
    aimed_at: int | None  # recurring: the occurrence the window's active steps include
    slow_steps: tuple[int, ...]  # the last slow steps' numbers
    suppressed: int  # windows asked for and not opened since the last triggered one (budget, interval, another window)
    waited_ns: int = 0  # its wall time less its own: the time it waited, runnable, for a CPU

    @property
    def ratio(self) -> float:
        return self.wall_ns / self.median_ns if self.median_ns else 0.0

    def record(self, steps: list[int], walls: list[int]) -> dict[str, Any]:
        """The window record's ``trigger`` object, with what the window's recorded ``steps`` (their ``walls``) showed:
        ``transient`` when none of them was slow (the slowness was gone by the time the window recorded). A recorded
        step is slow when it is over the limit and at least halfway from the median to the slow step's time: the
        profiler's own cost on a step of a few ms can take it over the limit alone, never that far above it for a
        slowdown well over the limit."""
        still = max(self.limit_ns, (self.median_ns + self.wall_ns) // 2)
        slow = [s for s, w in zip(steps, walls, strict=False) if w > still]
        transient = not slow
        what = (
            "two slow steps in a row"
            if self.kind == "persistent"
            else f"a slowdown every {self.period} steps (the window aimed at step {self.aimed_at})"
        )
        took = f"step {self.step} took {self.wall_ns / 1e6:.3f} ms"
        if self.waited_ns > 0:
            took += f" of its own ({(self.wall_ns + self.waited_ns) / 1e6:.3f} ms, {self.waited_ns / 1e6:.3f} ms of it waiting for a CPU)"
        base = f"{took}, {self.ratio:.1f}x the run's median of {self.median_ns / 1e6:.3f} ms ({what})"
        if transient:
            message = f"{base}; the slowness was gone when this window recorded (a transient): none of its steps was slow"
        else:
            message = f"{base}; this window recorded {len(slow)} slow step(s): {', '.join(map(str, slow))}"
        return {
            "kind": self.kind,
            "step": self.step,
            "step_ms": round(self.wall_ns / 1e6, 4),
            "waited_ms": round(self.waited_ns / 1e6, 4),
            "median_ms": round(self.median_ns / 1e6, 4),
            "mad_ms": round(self.mad_ns / 1e6, 4),
            "limit_ms": round(self.limit_ns / 1e6, 4),
            "ratio": round(self.ratio, 3),
            "period": self.period,
            "aimed_at": self.aimed_at,
            "slow_steps": list(self.slow_steps),
            "suppressed": self.suppressed,
            "transient": transient,
            "slow_steps_recorded": slow,
            "message": message,
        }


def aim(trigger: Trigger, warmup: int) -> int:
    """The wait (unprofiled steps) before the warmup of a window asked for by ``trigger`` at its step, so that the
    window's active steps hold the next occurrence of a recurring slowdown (0 for a persistent one). A step's time
    is its period, from its start to the next step's start (:mod:`autoprof.live.instrument`): a slow period that ends at
    step ``s`` is step ``s - 1`` or what ran between it and ``s`` (a batch loading, a checkpoint), so the window's
    first active step is ``aimed_at - 1`` and the gap before ``aimed_at`` is between two active steps."""
    if trigger.period is None:
        return 0
    return max(0, trigger.period - 2 - warmup)


def baseline(times: list[int]) -> tuple[int, int]:
    """The median and MAD of ``times`` (ns; sorted in C, the midpoint of the middle two for an even count)."""
    ordered = sorted(times)
    med = _middle(ordered)
    return med, _middle(sorted([abs(t - med) for t in ordered]))


def _middle(ordered: list[int]) -> int:
    n = len(ordered)
    half = n // 2
    return ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) // 2


def level(walls: list[int], waited: int) -> int:
    """The level ``L`` at which ``walls`` less ``waited`` in all, taken from the longest first, stand:
    ``sum(max(w - L, 0)) == waited``. A run-queue wait read over several periods is the most likely the longest's
    (a preempted step is long): each period's own time is ``min(w, L)``, which never makes a period slower nor the
    spread wider than its walls say."""
    if waited <= 0:
        return max(walls, default=0)
    ordered = sorted(walls, reverse=True)
    left = waited
    for i, w in enumerate(ordered):
        below = ordered[i + 1] if i + 1 < len(ordered) else 0
        room = (w - below) * (i + 1)  # the top i+1 periods brought down to the next one
        if room >= left:
            return w - left // (i + 1)
        left -= room
    return 0


def own_times(starts: list[float], reads: Mapping[float, int]) -> list[int]:
    """The periods between ``starts`` (perf_counter seconds; -1.0: a break), each its own time (ns): between two
    readings of the run-queue wait (``reads``: a tick's start to the wait read there), the wait read is taken from the
    longest periods (:func:`level`); a period outside two readings, or across a break, is its wall time."""
    out: list[int] = []
    run: list[int] = []  # the periods since the last reading (none across a break)
    at = -1  # the wait at that reading (-1: none, or a break since)
    for a, b in zip(starts, starts[1:], strict=False):
        if a < 0 or b < 0:
            out += run
            run = []
            at = -1
            continue
        if not run and at < 0:
            at = reads.get(a, -1)
        run.append(round((b - a) * NS))
        here = reads.get(b, -1)
        if here >= 0:
            if at >= 0:
                top = level(run, here - at)
                out += [min(w, top) for w in run]
            else:
                out += run
            run = []
            at = here
    return out + run


def period_of(slow: list[int]) -> int | None:
    """The period of a recurring slowdown: the gap of the last three slow steps when it is constant and > 1 (a gap of
    1 is a persistent slowdown), else None."""
    if len(slow) < 3:
        return None
    a, b, c = slow[-3:]
    return b - a if b - a == c - b and b - a > 1 else None


class Watch:
    """One target's baseline and trigger state. The wrappers append every idle call's start to :attr:`starts` and call
    :meth:`tick` when one starts after :attr:`next`; a pause (a profiled call) breaks the periods. The trainers' driver
    feeds step periods instead (:attr:`times`, then :meth:`check` only for a step slower than :attr:`limit` or when
    :attr:`due`), as the tests do."""

    __slots__ = (
        "breaks",
        "busy",
        "due",
        "earlier",
        "every",
        "holding",
        "judged",
        "last_read",
        "last_window",
        "limit",
        "mad",
        "mark",
        "median",
        "n",
        "next",
        "prev",
        "probing",
        "profiled",
        "reads",
        "refreshed",
        "rq",
        "saw",
        "seen",
        "settings",
        "settling",
        "slow",
        "start",
        "starts",
        "suppressed",
        "ticking",
        "times",
        "verdict",
    )

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.times: deque[int] = deque(maxlen=settings.history)
        #: The wrappers' idle call starts (perf_counter seconds; -1.0: a break, no call): since the last tick, and the
        #: ``trigger_history`` + 1 before it, all the baseline reads. Bounded: each tick keeps only those (between two
        #: ticks come the calls of at most ``TICK_MAX``).
        self.starts: list[float] = []
        self.n = 0  # the wrappers' idle calls counted at the last tick (the target's own count leaves them out: pending)
        self.mark = 0  # len(starts) then: the calls since are its growth, less the breaks appended since
        self.breaks = 0
        self.settling = threading.RLock()  # the owner thread's tick and another thread's (see settle)
        self.busy = False  # a settle under way (a signal handler's call of the target on its thread: see settle)
        self.ticking = False  # the owner thread's tick under way (the same, see tick)
        self.next = -1.0  # a start after this (perf_counter seconds) is a tick (-1: the first call ticks)
        #: The next calls that are probes (see instrument._tick): the first two, then the one right after each tick.
        self.probing = 2
        #: The run-queue wait (ns) read at each tick, by the tick's start: as many as the starts hold, and one before.
        self.reads: dict[float, int] = {}
        self.last_read = (-1.0, -1)  # the last tick's start and the wait read there (-1: none)
        self.rq = -1  # the trainers' driver: the wait read at the last step's start (-1: none)
        self.holding = False  # a slowdown not yet judged: the baseline learns nothing (see the module)
        self.earlier: int | None = None  # last_window before the last triggered window (given back, see the module)
        self.verdict = False  # a triggered window closed: the next step timed says whether its slowdown lasts
        self.judged = False  # the slow steps now are a slowdown a window judged: not held
        self.saw = False  # the last triggered window recorded a slow step of its own
        self.refreshed = 0.0  # the tick's t0 of the last refresh at a tick
        self.start = FUTURE  # the perf_counter_ns of the last idle step's start (FUTURE: none: the next begins a period)
        self.prev = 0  # that step's number (its period ends at the next step's start; the trainers' driver keeps it)
        self.limit = NEVER  # no step is slow before the baseline stands
        self.due = 0  # the step number at which the baseline is next refreshed
        self.every = REFRESH_EVERY  # steps between refreshes while the baseline holds (doubles up to REFRESH_MAX)
        self.seen = 0  # steps of history taken (its first refresh counts them)
        self.median = 0
        self.mad = 0
        self.slow: deque[int] = deque(maxlen=SLOW_KEEP)
        self.last_window: int | None = None  # the step of the last triggered window's trigger
        self.profiled = 0  # steps recorded (warmup and active) by triggered windows so far
        self.suppressed = 0

    def observe(self, step: int, wall_ns: int, steps_so_far: int, cost: int, waited: int = 0) -> Trigger | None:
        """Take one unprofiled step (the call the hot path inlines, then :meth:`check`): its wall time, and the time
        it waited, runnable, for a CPU (``waited``; its own time is the difference)."""
        own = max(wall_ns - waited, 0) if waited > 0 else wall_ns
        self.times.append(own)
        if own > self.limit or step >= self.due:
            return self.check(step, own, steps_so_far, cost, wall_ns)
        return None

    def pending(self) -> int:
        """The wrappers' idle calls, which the target's own count leaves out: the idle path counts nothing, each call
        is one start more in :attr:`starts` (a break is none)."""
        return self.n + len(self.starts) - self.mark - self.breaks

    def pause(self) -> None:
        """A profiled call is next: the period from the last idle start to the next one is no step's."""
        starts = self.starts
        if starts and starts[-1] >= 0:
            starts.append(-1.0)  # a break is no call: not counted
            self.breaks += 1

    def settle(self) -> None:
        """Count the calls appended since the last tick and keep the last ``trigger_history`` + 1 starts. The wrappers
        append only the owner thread's calls (another thread's call is no step: neither timed nor counted); settling
        takes a lock and reads the length once all the same, so a call appended meanwhile stays pending, counted at the
        next. A signal handler that calls the target while its thread settles (Python runs it between two bytecodes
        of this very method) leaves the settle to it: the lock is re-entrant (a plain one hung the program), and the
        handler's call stays pending."""
        with self.settling:
            if self.busy:
                return
            self.busy = True
            try:
                self._settle()
            finally:
                self.busy = False

    def _settle(self) -> None:
        starts = self.starts
        size = len(starts)
        self.n += size - self.mark - self.breaks
        self.breaks = 0
        drop = size - self.settings.history - 1
        if drop > 0:
            del starts[:drop]
            size -= drop
            reads = self.reads
            first = next((t for t in starts if t >= 0), None)
            if len(reads) > 2 * size and first is not None:  # now and then: a tick pays one dict insert
                for t in [t for t in reads if t < first]:
                    del reads[t]
        self.mark = size

    def tick(self, t0: float, calls: int, cost: int, waited: int = -1) -> Trigger | None:
        """The call that started at ``t0`` (perf_counter seconds, the last of :attr:`starts`) came after :attr:`next`:
        judge the period that it ends (the previous call's; only it can be slow, see ``TICK_MAX``) and refresh the
        baseline when due. ``calls``: the target's calls so far, this one's included; ``cost`` as :meth:`check`'s;
        ``waited``: the thread's run-queue wait so far (ns, read by the wrapper at this tick; -1: unknown). A call
        of the target by a signal handler while this thread is inside a tick (Python runs handlers between two
        bytecodes) is no tick: it judges nothing and leaves the state to the tick under way (it changed the starts'
        read times while the tick iterated them: "dictionary changed size during iteration", the trigger given up)."""
        if self.ticking:
            return None
        self.ticking = True
        try:
            return self._tick(t0, calls, cost, waited)
        finally:
            self.ticking = False

    def _tick(self, t0: float, calls: int, cost: int, waited: int) -> Trigger | None:
        self.settle()
        starts = self.starts
        reads = self.reads
        before, at = self.last_read
        if waited >= 0 and starts and starts[-1] == t0:
            reads[t0] = waited
            self.last_read = (t0, waited)
        found = None
        step = calls - 2  # the previous call's number: its period ends at this call's start
        period = round((starts[-1] - starts[-2]) * NS) if len(starts) >= 2 and starts[-2] >= 0 and starts[-1] >= 0 else -1
        due = step >= self.due and (self.limit == NEVER or (t0 - self.refreshed) * NS >= REFRESH_MIN_NS)
        own = period
        if period > self.limit and waited >= at >= 0 and 0 <= before <= starts[-2]:
            # the wait since the tick before, all of it the slow period's: each period between the two ticks is
            # under the limit (none of them ticked), so own_times would take the wait from this one first, and say
            # it is slow exactly when this says so (O(1): a fast step holds thousands of calls between two ticks)
            own = max(period - (waited - at), 0)
        if own <= self.limit and not self.verdict:
            self.holding = self.judged = False  # a step of the run's normal (however long the machine kept it)
        if own > self.limit or due or (self.verdict and period >= 0):
            self.refreshed = t0
            if not self.holding:
                self.times.clear()
                self.times.extend(own_times(list(starts), reads))
            found = self.check(step, own, calls, cost, period)
        # The next call ticks too, a probe: the wrappers ask whether it is nested in a plain call (a recursion first
        # made after the windows would time its nested calls as steps); then ticks are a limit apart again.
        probing = self.probing
        self.probing = probing - 1 if probing else 1
        self.next = -1.0 if self.probing else self._after(t0)  # -1.0: whatever its start
        return found

    def passed(self, t0: float) -> None:
        """A call of another thread than the owner started at ``t0``, past :attr:`next`: only the owner judges, but
        the starts stay bounded (:meth:`settle`) and the next tick is a limit on (not at each call while the owner's
        next call is awaited as a probe, nor forever when the owner makes none)."""
        self.settle()
        self.next = self._after(t0)

    def _after(self, t0: float) -> float:
        """When the tick after one at ``t0`` is due: a limit later (at most ``TICK_MAX``), in perf_counter seconds."""
        return t0 + min(self.limit, TICK_MAX) / NS

    def unstart(self, t0: float) -> None:
        """The call that started at ``t0`` is no step (nested, see instrument._tick): its start is taken back."""
        starts = self.starts
        if starts and starts[-1] == t0:
            starts.pop()
        else:
            try:
                starts.remove(t0)  # another thread's call came after it
            except ValueError:
                pass

    def refresh(self, step: int) -> None:
        """The baseline from the history now (it is the run's own normal: a slowdown that lasts becomes normal)."""
        times = [t for t in self.times if t >= 0]  # a negative period is no step's (see FUTURE)
        self.seen = max(self.seen, step + 1)
        if len(times) < min(self.settings.min_steps, self.settings.history) or self.seen < self.settings.min_steps:
            self.limit = NEVER
            self.due = step + REFRESH_EARLY
            return
        s = self.settings
        last = self.median if self.limit != NEVER else 0
        self.median, self.mad = baseline(times)
        held = last > 0 and abs(self.median - last) <= STABLE * last
        self.every = min(2 * self.every, REFRESH_MAX) if held else REFRESH_EVERY
        self.due = step + self.every
        self.limit = int(max(self.median * s.factor, self.median + s.mads * self.mad, self.median + s.floor_ns))

    def check(self, step: int, wall_ns: int, steps_so_far: int, cost: int, wall: int = -1) -> Trigger | None:
        """``step`` (its own time ``wall_ns`` already in :attr:`times`; ``wall``: its wall time, -1: the same): refresh
        the baseline when due, unless a slowdown is held; a slow step is remembered (and held), and a
        :class:`Trigger` returned when it asks for a window the budget allows. ``steps_so_far``: the target's steps
        counted so far (this one's included); ``cost``: the profiled steps such a window takes."""
        if (step >= self.due or wall_ns > self.limit) and not self.holding:
            self.refresh(step)  # a step over the quick limit is judged against the baseline of now
        if self.verdict:
            if wall_ns < 0:  # no step's period (across the window): the next step says
                self.due = min(self.due, step + 1)
            else:
                self.verdict = False
                if wall_ns <= self.limit and not self.saw:
                    self.last_window = self.earlier  # it saw nothing, and nothing lasted: it holds no later one off
                else:
                    self.judged = True  # the slowdown lasts and a window judged it: the baseline may learn it
        if wall_ns <= self.limit:
            self.holding = self.judged = False
            return None
        self.holding = not self.judged  # held until a window judges it, or a step is back to normal
        slow = self.slow
        persistent = bool(slow) and slow[-1] == step - 1
        slow.append(step)
        if self.judged and persistent:
            return None  # the slowdown a window judged, still there: it has its window
        period = None if persistent else period_of(list(slow))
        if not persistent and period is None:
            return None
        s = self.settings
        if self.last_window is not None and step - self.last_window < s.interval:
            self.suppressed += 1
            return None
        if self.profiled + cost > s.budget * steps_so_far:
            self.suppressed += 1
            return None
        return Trigger(
            step=step,
            wall_ns=wall_ns,
            median_ns=self.median,
            mad_ns=self.mad,
            limit_ns=self.limit,
            kind="persistent" if persistent else "recurring",
            period=period,
            aimed_at=None if period is None else step + period,
            slow_steps=tuple(slow),
            suppressed=self.suppressed,
            waited_ns=max(wall - wall_ns, 0) if wall >= 0 else 0,
        )

    def break_period(self) -> None:
        """The trainers' driver: the next step's period is no step's (a profiled step, or another stage's steps ran
        meanwhile): it is measured from the future, negative, and skipped by the baseline and the judge."""
        self.start = FUTURE

    def period(self, t0: int, step: int, waited: int) -> tuple[int, int, int] | None:
        """The trainers' driver: step ``step`` begins at ``t0`` (perf_counter_ns; ``waited``: its thread's run-queue
        wait now, -1: unknown). The period since the last step's start is that step's: its own time (less the wait
        meanwhile) goes into :attr:`times`; returns (that step, its own time, its wall time) when the trigger must look
        at it (:meth:`check`: over the limit, or the baseline due), else None."""
        dt = t0 - self.start
        rq, self.rq = self.rq, waited
        own = dt - (waited - rq) if dt > 0 and rq >= 0 and waited >= rq else dt
        prev, self.start, self.prev = self.prev, t0, step
        self.times.append(own)  # negative after a profiled step: no step's period (the judge skips it)
        if own > self.limit or prev >= self.due:
            return prev, own, dt
        return None

    def spent(self, cost: int) -> None:
        """Another try of the triggered window opened (the first was counted when it fired): ``cost`` more steps."""
        self.profiled += cost

    def fired(self, trigger: Trigger, cost: int) -> None:
        """The session opened the window ``trigger`` asked for: it counts against the budget and the interval."""
        self.earlier, self.last_window = self.last_window, trigger.step
        self.profiled += cost
        self.suppressed = 0

    def refused(self) -> None:
        """The session could not open it (another window, the target's own schedule): counted."""
        self.suppressed += 1

    def recorded(self, slow: list[int]) -> None:
        """Slow steps a triggered window recorded (not fed to the baseline): remembered, so a recurring slowdown's
        period is still seen across the window. The next step timed judges the window (see the module)."""
        for step in slow:
            if not self.slow or step > self.slow[-1]:
                self.slow.append(step)
        self.saw = bool(slow)
        self.holding = False
        self.verdict = True
        self.due = 0
