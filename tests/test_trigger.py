"""Catch the slow step (issue 35): the baseline, the trigger, the period and the budget on synthetic step times
(fast), the options, then live runs: a slowdown at step 200, a steady run, a slowdown every 50th step, a run slow
half the time, and a loop driven by ``Steps`` (what the trainer integrations use)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
import torch
from conftest import Records
from fake_time import fake_time

import autoprof
from autoprof.config import Config, ConfigError, from_env
from autoprof.live.instrument import Steps
from autoprof.live.schedule import Phase, Schedule
from autoprof.live.trigger import NEVER, Settings, Trigger, Watch, aim, baseline, period_of

torch.set_num_threads(1)
MS = 1_000_000
DEFAULTS = Settings.of({f.name: getattr(Config(), f.name) for f in Config.__dataclass_fields__.values()})


def feed(times: list[int], settings: Settings = DEFAULTS, cost: int = 4) -> list[Trigger]:
    """Each step through a Watch as the session feeds it; every trigger is taken (the window opens)."""
    watch, fired = Watch(settings), []
    for step, wall in enumerate(times):
        found = watch.observe(step, wall, step + 1, cost)
        if found is not None:
            watch.fired(found, cost)
            fired.append(found)
    return fired


def noisy(n: int, ms: float = 5.0, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [int(ms * MS * rng.uniform(0.95, 1.05)) for _ in range(n)]


# -- the logic, on synthetic step times ------------------------------------------------------------------------------


def test_baseline_is_the_median_and_the_mad() -> None:
    assert baseline([1, 2, 3, 4, 100]) == (3, 1)
    assert period_of([10, 60, 110]) == 50 and period_of([60, 110, 170]) is None and period_of([4, 5, 6]) is None
    assert period_of([60, 110]) is None


def test_a_steady_run_never_triggers() -> None:
    assert feed(noisy(5000)) == []


def test_a_lone_slow_step_is_remembered_not_a_window() -> None:
    times = noisy(400)
    times[200] = 50 * MS
    assert feed(times) == []


def test_a_slowdown_asks_for_a_window_at_its_second_slow_step() -> None:
    times = noisy(200) + noisy(100, ms=50.0, seed=1)
    (first, *rest) = feed(times)
    assert first.kind == "persistent" and first.step == 201 and first.slow_steps == (200, 201)
    assert 4.5 * MS < first.median_ns < 5.5 * MS and first.ratio > 8 and first.period is None
    assert first.limit_ns == int(max(first.median_ns * 2.0, first.median_ns + 6 * first.mad_ns, first.median_ns + MS))
    assert rest == []  # the interval (200 steps): then the slowdown is the run's normal


def test_no_trigger_before_the_minimum_history() -> None:
    times = noisy(10) + [50 * MS] * 5 + noisy(100)
    assert feed(times) == []


def test_a_recurring_slowdown_is_named_with_its_period_and_aimed_at() -> None:
    times = noisy(600)
    for k in range(100, 600, 50):
        times[k] = 45 * MS
    first, *_ = feed(times)
    assert first.kind == "recurring" and first.period == 50 and first.step == 200 and first.aimed_at == 250
    # the window's schedule: its first active step is the next occurrence. A step's period is judged when the next
    # step starts (step 201's call arms the window), so the window's schedule begins at step 202
    wait = aim(first, warmup=1)
    sched = Schedule(skip_first=0, wait=wait, warmup=1, active=3, repeat=1)
    active = [first.step + 2 + pos for pos in range(sched.cycle) if sched.place(pos).phase == Phase.ACTIVE]
    assert first.aimed_at in active and active[0] == first.aimed_at
    assert aim(first, warmup=60) == 0  # a warmup longer than the period: as soon as it can


@pytest.mark.parametrize("budget", [0.05, 0.01])
def test_the_budget_holds_under_a_run_slow_half_the_time(budget: float) -> None:
    rng = random.Random(3)
    times = []
    for block in range(200):  # blocks of random length, alternately fast and slow: half the steps are slow
        times += [int((50 if block % 2 else 5) * MS * rng.uniform(0.9, 1.1)) for _ in range(rng.randint(5, 40))]
    settings = Settings.of({**_options(), "trigger_budget": budget, "trigger_interval": 0})
    fired = feed(times, settings, cost=4)
    assert fired  # it did trigger, and often
    assert 4 * len(fired) <= budget * len(times)
    for t in fired:  # at every trigger, the windows so far fit in the budget of the steps so far
        assert 4 * (fired.index(t) + 1) <= budget * (t.step + 1)


def test_the_interval_between_triggered_windows() -> None:
    times = []
    for block in range(40):
        times += [(50 if block % 2 else 5) * MS] * 30
    settings = Settings.of({**_options(), "trigger_interval": 150, "trigger_budget": 1.0})
    steps = [t.step for t in feed(times, settings)]
    assert len(steps) >= 3 and all(b - a >= 150 for a, b in zip(steps, steps[1:], strict=False))


def test_the_window_says_whether_the_slowness_was_still_there() -> None:
    (trigger,) = feed(noisy(200) + noisy(100, ms=50.0, seed=1))
    gone = trigger.record([203, 204, 205], [5 * MS, 5 * MS, 6 * MS])
    assert gone["transient"] is True and gone["slow_steps_recorded"] == [] and "transient" in gone["message"]
    kept = trigger.record([203, 204, 205], [50 * MS, 5 * MS, 51 * MS])
    assert kept["transient"] is False and kept["slow_steps_recorded"] == [203, 205]
    assert kept["step"] == 201 and kept["ratio"] > 8 and kept["median_ms"] == pytest.approx(5, rel=0.1)
    # a recorded step twice the median (the profiler's own cost on a small step) is over the limit, not the slowdown
    profiled = trigger.record([203, 204, 205], [11 * MS, 12 * MS, 45 * MS])
    assert trigger.limit_ns < 11 * MS and profiled["slow_steps_recorded"] == [205] and profiled["transient"] is False


def test_the_limit_is_never_before_the_history() -> None:
    watch = Watch(DEFAULTS)
    for step in range(5):
        watch.observe(step, 5 * MS, step + 1, 4)
    assert watch.limit == NEVER


def _options(**changes: Any) -> dict[str, Any]:
    return {**{f: getattr(Config(), f) for f in Config.__dataclass_fields__ if f.startswith("trigger")}, **changes}


# -- options ------------------------------------------------------------------------------------------------------


def test_trigger_is_off_by_default_with_its_defaults() -> None:
    cfg = Config()
    assert cfg.trigger is False
    assert (cfg.trigger_factor, cfg.trigger_mads, cfg.trigger_history, cfg.trigger_min_steps) == (2.0, 6.0, 50, 20)
    assert (cfg.trigger_budget, cfg.trigger_interval, cfg.trigger_floor_ms) == (0.05, 200, 1.0)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("trigger", 1, "trigger must be True or False, not 1"),
        ("trigger_factor", 0.5, "trigger_factor must be a number from 1 to 1000"),
        ("trigger_factor", float("inf"), "trigger_factor must be a number"),
        ("trigger_mads", -1, "trigger_mads must be a number from 0 to 1000"),
        ("trigger_budget", 1.5, "trigger_budget must be a share of the steps from 0 to 1"),
        ("trigger_budget", "0.1", "trigger_budget must be a share"),
        ("trigger_history", 2, "trigger_history must be an integer from 5 to 10000"),
        ("trigger_min_steps", 2.0, "trigger_min_steps must be an integer from 3"),
        ("trigger_interval", True, "trigger_interval must be an integer from 0"),
        ("trigger_floor_ms", None, "trigger_floor_ms must be a number of milliseconds"),
    ],
)
def test_bad_trigger_options_are_one_line(key: str, value: Any, says: str) -> None:
    for attempt in (lambda: autoprof.configure(**{key: value}), lambda: autoprof.autoprof(**{key: value})):
        with pytest.raises(ConfigError) as e:
            attempt()
        assert says in str(e.value) and "\n" not in str(e.value)
    assert autoprof.configure().trigger is False  # nothing changed


def test_trigger_options_from_the_environment() -> None:
    cfg = from_env({"AUTOPROF_TRIGGER": "true", "AUTOPROF_TRIGGER_FACTOR": "3", "AUTOPROF_TRIGGER_INTERVAL": "10"})
    assert cfg.trigger is True and cfg.trigger_factor == 3.0 and cfg.trigger_interval == 10
    with pytest.warns(RuntimeWarning, match="AUTOPROF_TRIGGER_BUDGET"):
        assert from_env({"AUTOPROF_TRIGGER_BUDGET": "2"}).trigger_budget == 0.05


def test_an_integrations_trigger_options_are_its_targets_own(tmp_path: Any) -> None:
    from autoprof.config import SWITCH
    from autoprof.integrations import split_options
    from autoprof.live.session import SESSION

    own = split_options({"trigger": True, "trigger_budget": 0.1, "warmup": 2, "trace_dir": str(tmp_path)})
    assert own == {"warmup": 2, "trigger": True, "trigger_budget": 0.1}
    assert SWITCH.config.trigger is False and SWITCH.config.trace_dir == str(tmp_path)  # the trigger is not process-wide
    before = SWITCH.config
    for bad, says in (({"trigger_budget": 2}, "trigger_budget must be a share"), ({"trigger": "yes"}, "trigger must be True")):
        with pytest.raises(ConfigError) as e:
            split_options({**bad, "trace_dir": "elsewhere"})  # checked when the integration is built, one line
        assert says in str(e.value) and "\n" not in str(e.value)
    assert SWITCH.config is before  # nothing changed
    steps = Steps("integration_target", framework="lightning", **own)
    with steps.step(0):
        pass
    watching = SESSION.targets["integration_target"].watching
    assert watching is not None and watching.budget == 0.1


# -- live ---------------------------------------------------------------------------------------------------------


class _Batches(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A dataset whose items turn slow when asked (a slow disk, a decoder): what the regime reads as input."""

    slow = False

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> torch.Tensor:
        if _Batches.slow:
            time.sleep(0.045)
        return torch.ones(16)


def _windows(records: Records, target: str) -> list[dict[str, Any]]:
    return records.of("autoprof.window", target=target)


@pytest.mark.slow
@pytest.mark.timing  # the trigger reads wall times: CI runs these alone
def test_a_slowdown_at_step_200_opens_a_window_that_names_the_cause(records: Records) -> None:
    autoprof.configure(trigger=True)
    batches = iter(torch.utils.data.DataLoader(_Batches(), batch_size=1))
    w = torch.ones(16, 16)

    @autoprof.autoprof(name="slow_at_200")
    def step() -> float:
        x = next(batches)  # "load batch": 10x slower from step 200
        time.sleep(0.005)
        return float((x @ w).sum())

    outs = []
    for i in range(212):
        _Batches.slow = i >= 200
        outs.append(step())
    assert outs == [256.0] * 212  # what the function returns is unchanged
    windows = _windows(records, "slow_at_200")
    assert [w["trigger"] is None for w in windows] == [True, False]  # the schedule's, then the triggered one
    triggered = windows[1]
    # step 201's period is judged when step 202 starts: the window warms up at 203, three steps after the slowdown
    assert triggered["steps"] == [204, 205, 206]
    assert triggered["steps"][0] - 1 - 200 <= 3  # the "within three steps": its profiler runs from 203
    t = triggered["trigger"]
    assert t["kind"] == "persistent" and t["step"] == 201 and t["slow_steps"][-2:] == [200, 201]
    assert t["ratio"] > 5 and 4 < t["median_ms"] < 15 and t["transient"] is False
    assert t["slow_steps_recorded"] == [204, 205, 206]
    assert triggered["regime"]["verdict"] == "input-bound"
    assert triggered["rank"] == 0


@pytest.mark.slow
@pytest.mark.timing  # the trigger reads wall times: CI runs these alone
def test_a_slow_loader_outside_the_step_is_caught_by_the_steps_period(records: Records) -> None:
    # the usual loop: the batch is fetched between calls, so a step's time is its period (start to next start)
    autoprof.configure(trigger=True)
    batches = iter(torch.utils.data.DataLoader(_Batches(), batch_size=1))
    w = torch.ones(16, 16)

    @autoprof.autoprof(name="loader_outside")
    def step(x: torch.Tensor) -> float:
        time.sleep(0.005)
        return float((x @ w).sum())

    for i in range(212):
        _Batches.slow = i >= 200
        assert step(next(batches)) == 256.0
    windows = _windows(records, "loader_outside")
    assert [w["trigger"] is None for w in windows] == [True, False]
    triggered = windows[1]
    t = triggered["trigger"]
    # the slow fetch before call 200 is step 199's period: asked for when 201 starts, warmed up at 202
    assert t["kind"] == "persistent" and t["step"] == 200 and t["slow_steps"][-2:] == [199, 200], t
    assert triggered["steps"] == [203, 204, 205] and t["transient"] is False
    assert triggered["regime"]["verdict"] == "input-bound", triggered["regime"]


@pytest.mark.slow
@pytest.mark.timing  # the trigger reads wall times: CI runs these alone
def test_a_steady_run_opens_no_triggered_window(records: Records) -> None:
    autoprof.configure(trigger=True)
    w = torch.randn(16, 16)

    @autoprof.autoprof(name="steady")
    def step(x: torch.Tensor) -> torch.Tensor:
        return x @ w

    x = torch.randn(16, 16)
    from autoprof.live.session import SESSION

    # 2000 calls, and at least 0.2 s of them after the window: the trigger judges at ticks a limit apart (at most
    # TICK_MAX, 10 ms), and on a fast CPU the idle calls of this step take 2 us each: 2000 calls alone can end
    # before the first tick, with no baseline and nothing judged
    calls, until = 0, None
    while calls < 2000 or until is None or time.perf_counter() < until:
        step(x)
        calls += 1
        if until is None and SESSION.targets["steady"].done:
            until = time.perf_counter() + 0.2
    windows = _windows(records, "steady")
    assert len(windows) == 1 and windows[0]["trigger"] is None
    target = SESSION.targets["steady"]
    assert target.calls == calls and target.watch is not None and target.watch.limit != NEVER


@pytest.mark.slow
@pytest.mark.timing  # the trigger reads wall times: CI runs these alone
def test_a_slowdown_every_50th_step_is_found_with_its_period_and_caught(records: Records) -> None:
    autoprof.configure(trigger=True)

    @autoprof.autoprof(name="every_50")
    def step(i: int) -> int:
        time.sleep(0.045 if i % 50 == 0 and i else 0.005)  # steps of 5 ms: a hiccup stays below 2x
        return i

    for i in range(260):  # 50, 100 and 150 ask for the window, aimed at 200
        assert step(i) == i
    triggered = [w for w in _windows(records, "every_50") if w["trigger"] is not None]
    assert triggered, "no triggered window"
    t = triggered[0]["trigger"]
    assert t["kind"] == "recurring" and t["period"] == 50 and t["aimed_at"] == t["step"] + 50
    assert t["aimed_at"] in triggered[0]["steps"] and t["slow_steps_recorded"] == [t["aimed_at"]]
    assert t["transient"] is False


@pytest.mark.slow
@pytest.mark.timing  # the trigger reads wall times: CI runs these alone
def test_the_budget_holds_live_under_a_run_slow_half_the_time(records: Records) -> None:
    autoprof.configure(trigger=True, trigger_interval=0, trigger_budget=0.05, trigger_min_steps=10)

    @autoprof.autoprof(name="half_slow")
    def step(slow: bool) -> None:
        if slow:
            time.sleep(0.002)

    n = 0
    for block in range(20):
        for _ in range(30):
            step(block % 2 == 1)
            n += 1
    triggered = [w for w in _windows(records, "half_slow") if w["trigger"] is not None]
    assert triggered
    assert 4 * len(triggered) <= 0.05 * n  # warmup + active steps of the triggered windows, within the budget
    for k, w in enumerate(triggered, 1):  # and when each one opened, of the steps seen then: a step's period is
        # judged when the next call starts, so steps 0 to the slow step + 1 had been called
        assert 4 * k <= 0.05 * (w["trigger"]["step"] + 2), (k, w["trigger"])


@pytest.mark.timing
def test_a_loop_driven_by_steps_triggers_too(records: Records) -> None:
    autoprof.configure(trigger=True, trigger_min_steps=10)
    steps = Steps("driven", framework="lightning")
    for i in range(110):  # the budget: 4 profiled steps are 5% of 80 steps
        with steps.step(1000 + i):
            time.sleep(0.05 if i >= 100 else 0.005)  # steps of 5 ms: a shared machine's hiccups stay below 2x
    triggered = [w for w in _windows(records, "driven") if w["trigger"] is not None]
    assert len(triggered) == 1
    # step 1101's period is judged when step 1102 begins: the window warms up at 1103 and records 1104-1106
    assert triggered[0]["trigger"]["step"] == 1101 and triggered[0]["steps"] == [1104, 1105, 1106]
    assert triggered[0]["framework"] == "lightning"


@pytest.mark.timing
def test_an_async_target_triggers_too(records: Records) -> None:
    # the async wrapper times its calls as the plain one does; a generous budget and no interval, so that a hiccup
    # of a shared machine's that asks for a window first cannot keep the slowdown's from opening
    autoprof.configure(trigger=True, trigger_min_steps=10, trigger_budget=0.5, trigger_interval=0)

    @autoprof.autoprof(name="async_step")
    async def step(i: int) -> int:
        await asyncio.sleep(0.04 if i >= 100 else 0.004)
        return i

    async def loop() -> list[int]:
        return [await step(i) for i in range(110)]

    assert asyncio.run(loop()) == list(range(110))  # what the coroutine returns is unchanged
    triggered = {w["trigger"]["step"]: w for w in _windows(records, "async_step") if w["trigger"] is not None}
    # as a plain function's: step 101's period is judged when step 102 starts; warmed up at 103, recorded 104-106
    assert 101 in triggered, {s: w["trigger"]["message"] for s, w in triggered.items()}
    window = triggered[101]
    t = window["trigger"]
    assert t["kind"] == "persistent" and t["slow_steps"][-2:] == [100, 101] and t["ratio"] > 5, t
    assert window["steps"] == [104, 105, 106] and t["slow_steps_recorded"] == [104, 105, 106]


def test_trigger_off_leaves_the_idle_path_untimed(records: Records) -> None:
    @autoprof.autoprof(name="off")
    def step() -> None:
        pass

    for _ in range(50):
        step()
    from autoprof.live.session import SESSION

    target = SESSION.targets["off"]
    assert target.watch is None and target.calls == 7  # counted only until its schedule was over


def test_a_trigger_while_another_window_is_held_is_refused(records: Records) -> None:
    # On the fake clock (tests/fake_time.py): slept for real (0.2 ms steps, then 10 ms), this read one run in a
    # loaded machine's suite with no refused ask (0.2 ms steps are all noise there), another with three.
    autoprof.configure(trigger=True, trigger_min_steps=10)
    from autoprof.live.session import SESSION

    with fake_time() as clock:

        @autoprof.autoprof(name="held_out")
        def step(slow: bool) -> None:
            clock.run(ms=10.0 if slow else 0.2)

        for _ in range(100):  # past the budget's first window (4 profiled steps are 5% of 80)
            step(False)
        target = SESSION.targets["held_out"]
        SESSION.window = object()  # type: ignore[assignment]  # another target's window holds the profiler
        try:
            step(True)
            step(True)
            step(True)  # a step's period is judged when the next one starts: the second slow step asks, refused
            assert target.saved is None and target.watch is not None and target.watch.suppressed >= 1
        finally:
            SESSION.window = None
        step(True)  # the third slow step's period: asked again, and now it opens
        assert target.saved is not None
