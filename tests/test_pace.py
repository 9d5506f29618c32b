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
