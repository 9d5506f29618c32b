"""The background analysis's pacing, with the clock and sleep replaced (no timing in tests)."""

from __future__ import annotations

from typing import Any

import pytest

from autoprof.live import _pace

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    class Clock:
        def __init__(self) -> None:
            self.now = 0.0
            self.slept: list[float] = []

        def perf_counter(self) -> float:
            return self.now

        def sleep(self, s: float) -> None:
            self.slept.append(s)
            self.now += s

    c = Clock()
    monkeypatch.setattr(_pace.time, "perf_counter", c.perf_counter)
    monkeypatch.setattr(_pace.time, "sleep", c.sleep)
    return c


def test_slices_of_work_then_pauses_and_never_beyond_the_cap(clock: Any) -> None:
    p = _pace.Pacer()
    p.tick()
    assert clock.slept == []  # not started on this thread: no pacing
    p.start()
    clock.now += 0.0002
    p.tick()
    assert clock.slept == []  # within a slice
    clock.now += 0.0004
    p.tick()
    assert clock.slept == [_pace.PAUSE_S]
    clock.now += _pace.MAX_PACED_S
    p.tick()
    assert clock.slept == [_pace.PAUSE_S]  # a long job finishes at full speed


def test_full_speed_while_someone_waits(clock: Any) -> None:
    p = _pace.Pacer()
    p.start()
    with p:
        clock.now += 0.001
        p.tick()
    assert clock.slept == []
    clock.now += 0.001
    p.tick()
    assert clock.slept == [_pace.PAUSE_S]
    p.stop()
    clock.now += 0.001
    p.tick()
    assert len(clock.slept) == 1


def test_the_paced_analysis_waits_while_a_window_closes_and_that_wait_is_not_its_paced_time(clock: Any) -> None:
    p = _pace.Pacer()
    windows = {"closing": 5}  # the closing() answers left that say a window closes

    def closing() -> bool:
        windows["closing"] -= 1
        return windows["closing"] >= 0

    p.closing = closing
    p.start()
    clock.now += 0.001
    p.tick()  # its slice is over: one pause, then it waits while the window closes (5 answers: 5 polls)
    assert clock.slept == [_pace.PAUSE_S] + [_pace.CLOSE_POLL_S] * 5
    # the wait (5 polls) is not counted as the analysis's own paced time (its slice and one pause): paced
    # still, where counting the wait would have put it past MAX_PACED_S
    clock.now += _pace.MAX_PACED_S - 0.0105 - 0.002
    p.tick()
    assert len(clock.slept) == 7


def test_the_wait_for_a_window_is_bounded_and_ends_when_someone_waits(clock: Any) -> None:
    p = _pace.Pacer()
    p.closing = lambda: True  # a close that never ends (a stop that hangs)
    p.start()
    clock.now += 0.001
    p.tick()
    waited = sum(clock.slept)
    assert _pace.MAX_HELD_S <= waited <= _pace.MAX_HELD_S + _pace.PAUSE_S + _pace.CLOSE_POLL_S
    clock.slept.clear()
    clock.now += 0.001
    p.tick()  # its wait for windows is spent: paced as without a window
    assert clock.slept == [_pace.PAUSE_S]
    clock.slept.clear()
    with p:  # autoprof.flush(): nothing waits
        assert p.unclosed() == 0.0
    assert clock.slept == []


def test_the_training_thread_never_waits_for_a_window(clock: Any) -> None:
    p = _pace.Pacer()
    p.closing = lambda: True
    p.hold()  # not a paced thread (an analysis on the training thread, inline): no wait
    assert clock.slept == []
