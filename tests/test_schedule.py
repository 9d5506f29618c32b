"""The schedule arithmetic (autoprof.live.schedule), against a schedule written out call by call."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoprof.live.schedule import Phase, Place, Schedule

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)


def spelled_out(s: Schedule, calls: int) -> list[tuple[Phase, int]]:
    """The phase and cycle of each of the first ``calls`` calls, listed the slow way (cycle -1: outside any)."""
    cycle = [Phase.WAIT] * s.wait + [Phase.WARMUP] * s.warmup + [Phase.ACTIVE] * s.active
    out = [(Phase.WAIT, -1)] * s.skip_first
    cycles = 0
    while len(out) < calls and (not s.repeat or cycles < s.repeat):
        out += [(phase, cycles) for phase in cycle]
        cycles += 1
    out += [(Phase.DONE, -1)] * max(calls - len(out), 0)
    return out[:calls]


schedules = st.builds(
    Schedule,
    skip_first=st.integers(0, 5),
    wait=st.integers(0, 4),
    warmup=st.integers(0, 4),
    active=st.integers(1, 5),
    repeat=st.integers(0, 3),
)


@given(schedules)
def test_each_call_falls_where_the_spelled_out_schedule_puts_it(s: Schedule) -> None:
    calls = spelled_out(s, 61)
    for pos in range(60):
        want = calls[pos]
        place = s.place(pos)
        assert place.phase == want[0], (s, pos)
        first_of_run = pos == 0 or calls[pos - 1] != want
        assert place.first == (want[0] in (Phase.WARMUP, Phase.ACTIVE) and first_of_run), (s, pos)
        assert place.last == (want[0] == Phase.ACTIVE and calls[pos + 1] != want), (s, pos)


@given(schedules, st.integers(0, 80))
def test_a_window_restarts_at_its_cycles_warmup(s: Schedule, pos: int) -> None:
    start = s.warmup_start(pos)
    if pos < s.skip_first:
        assert start == pos
        return
    assert start <= pos + s.wait  # never later than this cycle's warmup
    assert (start - s.skip_first) % s.cycle == s.wait
    assert (start - s.skip_first) // s.cycle == (pos - s.skip_first) // s.cycle  # the same cycle
    phase = s.place(start).phase
    assert phase in (Phase.WARMUP, Phase.ACTIVE, Phase.DONE)  # its first profiled call (or past the last cycle)


def test_the_default_schedule_records_steps_3_to_5() -> None:
    s = Schedule(skip_first=1, wait=1, warmup=1, active=3, repeat=1)
    assert [s.place(p).phase for p in range(8)] == [
        Phase.WAIT,
        Phase.WAIT,
        Phase.WARMUP,
        Phase.ACTIVE,
        Phase.ACTIVE,
        Phase.ACTIVE,
        Phase.DONE,
        Phase.DONE,
    ]
    assert s.place(3) == Place(Phase.ACTIVE, True, False)
    assert s.place(5) == Place(Phase.ACTIVE, False, True)
    assert s.warmup_start(4) == 2


def test_of_reads_every_schedule_key_and_nothing_else() -> None:
    s = Schedule.of({"skip_first": 0, "wait": 2, "warmup": 1, "active": 1, "repeat": 0, "other": 9})
    assert s == Schedule(0, 2, 1, 1, 0) and s.cycle == 4
    with pytest.raises(KeyError):
        Schedule.of({"wait": 1})


def test_next_cycle_is_where_the_cycle_after_a_position_starts() -> None:
    s = Schedule(skip_first=2, wait=1, warmup=1, active=3, repeat=0)  # cycles of 5 from position 2
    assert [s.next_cycle(p) for p in (0, 1, 2, 3, 6, 7, 12)] == [2, 2, 7, 7, 7, 12, 17]
    assert s.place(s.next_cycle(3)).phase == Phase.WAIT and s.warmup_start(s.next_cycle(3)) == 8
