"""The trigger on a busy machine (issue 49, item 2), on a fake clock (tests/fake_time.py): a step slow in wall time
because its thread waited for a CPU is the machine, not the program (no window, no wider baseline); a lasting
slowdown is caught however noisy the run was before it, and a window that fired on noise holds off no later one; the
budget still holds. No sleeping: the wall, CPU and run-queue times are the test's."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fake_time import Driver, FakeClock, fake_time

import autoprof
from autoprof.config import Config
from autoprof.live.session import SESSION
from autoprof.live.trigger import Settings, Watch, level, own_times

MS = 1_000_000
DEFAULTS = Settings.of({f.name: getattr(Config(), f.name) for f in Config.__dataclass_fields__.values()})


def _settings(**over: Any) -> Settings:
    values = {f.name: getattr(Config(), f.name) for f in Config.__dataclass_fields__.values()}
    return Settings.of({**values, **{f"trigger_{k}": v for k, v in over.items()}})


def _noisy(driver: Driver, n: int, rng: random.Random, share: float = 0.3, pairs: bool = True) -> None:
    """``n`` steps of 2 ms of the program's own (±5%), a ``share`` of them preempted for 2-8 ms, often two in a row."""
    i = 0
    while i < n:
        own = 2.0 * rng.uniform(0.95, 1.05)
        if rng.random() < share:
            driver.step(own, rng.uniform(2.0, 8.0))
            if pairs and rng.random() < 0.5 and i + 1 < n:
                i += 1
                driver.step(2.0 * rng.uniform(0.95, 1.05), rng.uniform(2.0, 8.0))
        else:
            driver.step(own)
        i += 1


# -- the own time of a period --------------------------------------------------------------------------------------


def test_a_wait_read_over_several_periods_is_taken_from_the_longest_first() -> None:
    assert level([2, 2, 7], 5) == 2  # the long one was the preempted one: back to its peers
    assert level([2, 2, 7], 3) == 4
    assert level([2, 3, 7], 6) == 2 and level([4, 4], 2) == 3 and level([4], 0) == 4 and level([4], 9) == 0
    s = [1.000, 1.002, 1.004, 1.011, -1.0, 1.100, 1.102]  # seconds; -1.0: a break
    reads = {1.000: 0, 1.004: 0, 1.011: 5 * MS, 1.100: 0, 1.102: 0}
    assert own_times(s, reads) == [2 * MS, 2 * MS, 2 * MS, 2 * MS]  # the 7 ms period waited 5 ms of it
    assert own_times(s, {}) == [2 * MS, 2 * MS, 7 * MS, 2 * MS]  # no reading: wall times


# -- preemption is the machine ---------------------------------------------------------------------------------------


def test_preemption_alone_fires_nothing_and_leaves_the_baseline_as_narrow_as_a_quiet_runs() -> None:
    baselines = []
    for share in (0.0, 0.3):
        with fake_time(FakeClock()) as clock:
            driver = Driver(Watch(DEFAULTS), clock)
            _noisy(driver, 3000, random.Random(1), share=share)
            assert driver.found == [], [(t.step, t.wall_ns, t.limit_ns) for t in driver.found]
            watch = driver.watch
            baselines.append((watch.median, watch.mad, watch.limit))
    (quiet_median, quiet_mad, quiet_limit), (median, mad, limit) = baselines
    assert median == pytest.approx(quiet_median, rel=0.05) and median == pytest.approx(2 * MS, rel=0.06)
    assert mad <= 1.5 * quiet_mad + 0.02 * MS, (mad, quiet_mad)  # preemption does not widen it
    assert limit == pytest.approx(quiet_limit, rel=0.05)


def test_a_step_slow_in_its_own_time_still_counts_on_the_trainers_path() -> None:
    """``observe`` (the trainers' driver): a step's wait for a CPU is not its own time."""
    watch, rng = Watch(DEFAULTS), random.Random(2)
    fired = []
    for step in range(400):
        wall = int(2 * MS * rng.uniform(0.95, 1.05))
        waited = int(rng.uniform(2, 8) * MS) if rng.random() < 0.3 else 0
        if step >= 300:
            wall = 6 * MS
        found = watch.observe(step, wall + waited, step + 1, 4, waited)
        if found is not None:
            watch.fired(found, 4)
            fired.append(found)
    assert [t.step for t in fired] == [301] and fired[0].ratio > 2.5


# -- a lasting slowdown is caught ----------------------------------------------------------------------------------


def test_a_3x_slowdown_after_96_noisy_pairs_fires() -> None:
    with fake_time(FakeClock()) as clock:
        driver, rng = Driver(Watch(DEFAULTS), clock), random.Random(3)
        pairs = 0
        for _ in range(1200):  # preempted pairs among normal steps: each pair is two wall-slow steps in a row
            if pairs < 96 and rng.random() < 0.15:
                driver.step(2.0, rng.uniform(3.0, 8.0))
                driver.step(2.0, rng.uniform(3.0, 8.0))
                pairs += 1
            else:
                driver.step(2.0 * rng.uniform(0.95, 1.05))
        assert pairs == 96 and driver.found == []
        onset = driver.calls
        for _ in range(100):  # 3x slower from here, and preempted as before
            driver.step(6.0, rng.uniform(3.0, 8.0) if rng.random() < 0.15 else 0.0)
        (trigger,) = driver.fired
        assert onset <= trigger.step <= onset + 3, (onset, trigger.step)
        assert trigger.ratio > 2.5 and trigger.kind == "persistent"


def test_a_window_fired_on_noise_holds_off_no_real_slowdown() -> None:
    """Two steps slow in their own time (a GC pause, a one-off) fire a window that finds nothing; a lasting slowdown
    30 steps later, well within ``trigger_interval`` (200), is caught at once, not when the baseline took it."""
    with fake_time(FakeClock()) as clock:
        driver = Driver(Watch(DEFAULTS), clock)
        for _ in range(300):
            driver.step(2.0)
        driver.step(8.0)
        driver.step(8.0)
        driver.step(2.0)
        (noise,) = driver.fired
        for _ in range(30):
            driver.step(2.0)
        onset = driver.calls
        for _ in range(300):
            driver.step(6.0)
        assert len(driver.fired) == 2, [t.step for t in driver.fired]
        real = driver.fired[1]
        assert onset <= real.step <= onset + 3 and real.step - noise.step < DEFAULTS.interval
        assert real.median_ns == pytest.approx(2 * MS, rel=0.05)


def test_a_slowdown_the_interval_holds_off_is_held_until_its_window_not_learned() -> None:
    """A real slowdown judged by its window (the interval then holds), over, then another that starts within the
    interval: the baseline learns nothing while it is held off, so it is caught when the interval is over."""
    with fake_time(FakeClock()) as clock:
        driver = Driver(Watch(DEFAULTS), clock)
        for _ in range(300):
            driver.step(2.0)
        for _ in range(40):  # a first slowdown: caught, still slow after its window (the window judged it)
            driver.step(6.0)
        (first,) = driver.fired
        for _ in range(120):  # back to normal (the baseline too, at its next refresh)
            driver.step(2.0)
        onset = driver.calls
        for _ in range(400):  # a second one, within the interval of the first window: held off, then caught
            driver.step(6.0)
        assert len(driver.fired) == 2, [t.step for t in driver.fired]
        second = driver.fired[1]
        assert second.step >= onset and second.step - first.step >= DEFAULTS.interval
        assert second.step <= first.step + DEFAULTS.interval + 3
        assert second.median_ns == pytest.approx(2 * MS, rel=0.05)  # judged against the run's normal before it
        assert driver.found[-1] is second  # once its window judged it, the slowdown is the run's normal: no more


def test_a_lasting_slowdown_becomes_the_baseline_once_its_window_judged_it() -> None:
    with fake_time(FakeClock()) as clock:
        driver = Driver(Watch(_settings(interval=0)), clock)
        for _ in range(300):
            driver.step(2.0)
        for _ in range(600):
            driver.step(6.0)
        assert len(driver.fired) == 1  # one window, then its slowdown is the run's normal: none every 80 steps
        assert driver.watch.median == pytest.approx(6 * MS, rel=0.05)


# -- the budget --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0.05, 0.01])
def test_the_budget_holds_when_noise_windows_give_their_interval_back(budget: float) -> None:
    with fake_time(FakeClock()) as clock:
        driver, rng = Driver(Watch(_settings(budget=budget)), clock), random.Random(4)
        for _ in range(4000):  # two slow steps of its own every so often: each asks for a window, none lasts
            if rng.random() < 0.05:
                driver.step(9.0)
                driver.step(9.0)
            else:
                driver.step(2.0, rng.uniform(3, 8) if rng.random() < 0.2 else 0.0)
        fired = driver.fired
        assert len(fired) >= 3
        for k, t in enumerate(fired):  # at every trigger, the windows so far fit in the budget of the steps so far
            assert 4 * (k + 1) <= budget * (t.step + 2 + 4 * k), (k, t.step)
        assert 4 * len(fired) <= budget * driver.calls


# -- live, through the wrappers --------------------------------------------------------------------------------------


def test_through_the_wrapper_preemption_opens_no_window_and_a_3x_slowdown_does(records: Any) -> None:
    autoprof.configure(trigger=True)
    rng = random.Random(5)
    with fake_time() as clock:
        step = autoprof(name="loaded_step", skip_first=0, wait=0, warmup=1, active=1)(lambda i: i)
        for i in range(600):
            clock.run(ms=2.0)
            if rng.random() < 0.3:
                clock.wait(ms=rng.uniform(2, 8))
            step(i)
        autoprof.flush()
        assert not [w for w in records.of("autoprof.window", target="loaded_step") if w.get("trigger")]
        for i in range(600, 700):
            clock.run(ms=6.0)
            step(i)
    autoprof.flush()
    (window,) = [w for w in records.of("autoprof.window", target="loaded_step") if w.get("trigger")]
    assert 600 <= window["trigger"]["step"] <= 603 and window["trigger"]["ratio"] > 2.5
    assert SESSION.targets["loaded_step"].watch is not None and not records.of("autoprof.error")


def test_a_trainers_steps_preempted_open_no_window_and_a_3x_slowdown_does(records: Any) -> None:
    """``Steps`` (the trainers' driver) reads the wait at each step's begin: the same verdicts as the wrappers'."""
    from autoprof.live.instrument import Steps

    autoprof.configure(trigger=True)
    rng = random.Random(6)
    with fake_time() as clock:
        steps = Steps("loaded_trainer", framework="lightning")
        for i in range(500):
            with steps.step(i):
                clock.run(ms=6.0 if i >= 400 else 2.0)
                if i < 400 and rng.random() < 0.3:
                    clock.wait(ms=rng.uniform(2, 8))
    autoprof.flush()
    triggered = [w["trigger"] for w in records.of("autoprof.window", target="loaded_trainer") if w.get("trigger")]
    assert [t["step"] for t in triggered] == [401], triggered


def test_the_slow_steps_record_says_how_long_it_waited_for_a_cpu() -> None:
    watch = Watch(DEFAULTS)
    found = None
    for step in range(302):
        slow = step >= 300
        found = watch.observe(step, (9 if slow else 2) * MS, step + 1, 4, 3 * MS if slow else 0)
    assert found is not None and found.wall_ns == 6 * MS and found.waited_ns == 3 * MS
    record = found.record([303], [6 * MS])
    assert record["step_ms"] == 6.0 and record["waited_ms"] == 3.0 and record["ratio"] == 3.0
    assert "6.000 ms of its own (9.000 ms, 3.000 ms of it waiting for a CPU)" in record["message"]


def test_the_kept_run_queue_reader_reads_its_own_threads_wait() -> None:
    import os
    import threading

    from autoprof.live import _cpu

    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("no /proc/thread-self/schedstat on this platform: the wait is unknown (-1) here")
    got: list[tuple[int, int, int]] = []

    def read() -> None:
        kept = _cpu._runqueue_kept_ns()
        fresh = _cpu._runqueue_ns()
        got.append((kept, fresh, _cpu._runqueue_kept_ns()))

    main = _cpu._runqueue_kept_ns()
    t = threading.Thread(target=read)
    t.start()
    t.join()
    ((kept, fresh, again),) = got
    assert 0 <= kept <= fresh <= again  # monotonic, one thread's: the kept file is the reading thread's own
    assert main <= _cpu._runqueue_ns()


def test_a_recurring_slowdowns_window_that_saw_its_occurrence_keeps_its_interval() -> None:
    """A checkpoint every 50 steps: its window records the occurrence it was aimed at, then the steps are back to
    normal, as between any two occurrences: the window judged it, and the next one waits ``trigger_interval``."""
    watch, fired = Watch(DEFAULTS), []
    for step in range(1500):
        found = watch.observe(step, (45 if step >= 100 and step % 50 == 0 else 5) * MS, step + 1, 4)
        if found is not None:
            watch.fired(found, 4)
            fired.append(found)
            assert found.kind == "recurring" and found.period == 50
            watch.recorded([found.aimed_at] if found.aimed_at is not None else [])
    assert len(fired) >= 3
    assert all(b.step - a.step >= DEFAULTS.interval for a, b in zip(fired, fired[1:], strict=False)), [t.step for t in fired]
