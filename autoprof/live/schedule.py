"""A target's schedule: which of its calls wait, warm the profiler up, or record. Pure arithmetic, no state.

A schedule is ``skip_first`` calls, then cycles of ``wait`` + ``warmup`` + ``active`` calls, ``repeat`` times
(0: forever). A *position* counts the owner's outermost calls the schedule has taken (a deferred window keeps
its position where it was). This module is the one place that arithmetic is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from autoprof.config import SCHEDULE_KEYS


class Phase(IntEnum):
    """What a call at some position of the schedule does."""

    WAIT = 0  # runs unprofiled (skip_first, or the wait part of a cycle)
    WARMUP = 1  # the profiler is prepared and runs, its events are discarded
    ACTIVE = 2  # recorded: a step of the window
    DONE = 3  # after the last cycle: only the idle path


class Place(NamedTuple):
    """A position's phase, whether it is the first of its phase in its cycle, and whether it is the cycle's
    last active step (the window closes after it)."""

    phase: Phase
    first: bool
    last: bool


_WAITING = Place(Phase.WAIT, False, False)
_OVER = Place(Phase.DONE, False, False)


@dataclass(frozen=True, slots=True)
class Schedule:
    """One target's schedule (validated values: the counts are >= 0, ``active`` >= 1)."""

    skip_first: int
    wait: int
    warmup: int
    active: int
    repeat: int

    @classmethod
    def of(cls, values: dict[str, int]) -> Schedule:
        """From a mapping with every key of :data:`autoprof.config.SCHEDULE_KEYS`."""
        return cls(**{k: values[k] for k in SCHEDULE_KEYS})

    @property
    def cycle(self) -> int:
        """Calls in one cycle."""
        return self.wait + self.warmup + self.active

    def place(self, pos: int) -> Place:
        """Where the call at position ``pos`` falls."""
        if pos < self.skip_first:
            return _WAITING
        into = pos - self.skip_first
        if self.repeat and into // self.cycle >= self.repeat:
            return _OVER
        k = into % self.cycle
        if k < self.wait:
            return _WAITING
        if k < self.wait + self.warmup:
            return Place(Phase.WARMUP, k == self.wait, False)
        return Place(Phase.ACTIVE, k == self.wait + self.warmup, k == self.cycle - 1)

    def warmup_start(self, pos: int) -> int:
        """The position where the warmup of ``pos``'s cycle starts: a window is all of its steps or nothing, so
        a window that cannot open, or was dropped, is tried again from there."""
        if pos < self.skip_first:
            return pos
        return self.skip_first + (pos - self.skip_first) // self.cycle * self.cycle + self.wait

    def next_cycle(self, pos: int) -> int:
        """The position where the cycle after ``pos``'s starts (its wait): a window skipped whole moves there."""
        if pos < self.skip_first:
            return self.skip_first
        return self.skip_first + ((pos - self.skip_first) // self.cycle + 1) * self.cycle
