"""The plain idle path: a target whose calls never held a decorated call (nor were held by one) marks no thread-local
depth once its windows are over. What it must still get right: a decorated call that first runs inside it (found on
the stack), a user's profiler that starts inside it, a trainer's loop inside it, an ``async def`` target run by an
event loop inside it, another thread's calls meanwhile, and the trigger's periods around profiled calls."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

import autoprof
from autoprof.live import _cpu, instrument
from autoprof.live.instrument import Steps
from autoprof.live.session import PLAIN, SESSION

FAST = dict(skip_first=0, wait=0, warmup=1, active=1)


def _idle(fn: Any, *args: Any) -> None:
    """Call ``fn`` until its one window is over (it is then idle)."""
    for _ in range(3):
        fn(*args)


def _names(prof: Any) -> set[str]:
    return {e.name for e in prof.events()}


def test_a_target_that_holds_nothing_takes_the_plain_path(records: Any) -> None:
    outer = autoprof(name="plain_outer", **FAST)(lambda x: x + 1)
    _idle(outer, 1)
    target = SESSION.targets["plain_outer"]
    assert target.done and target.plain and target.idle and PLAIN.seen
    before = instrument._tls.d
    assert outer(1) == 2 and instrument._tls.d == before


def test_a_target_that_holds_a_decorated_call_is_plain_no_more_after_its_first_idle_call(records: Any) -> None:
    inner = autoprof(name="held_inner")(lambda x: x * 2)
    outer = autoprof(name="holding_outer", **FAST)(lambda x: inner(x) + 1)
    _idle(outer, 1)
    assert "held_inner" not in SESSION.targets  # nested in its windows: never a target of its own
    assert outer(3) == 7  # the first plain idle call: its nested call finds it on the stack
    assert not SESSION.targets["holding_outer"].plain and "held_inner" not in SESSION.targets
    assert outer(3) == 7 and instrument._tls.d == 0  # from then on it marks the depth (and resets it)


def test_a_decorated_call_first_made_inside_a_plain_call_is_nested(records: Any) -> None:
    inner = autoprof(name="late_inner", **FAST)(lambda x: x * 2)
    late = {"on": False}

    def body(x: int) -> int:
        return inner(x) + 1 if late["on"] else x + 1

    outer = autoprof(name="late_outer", **FAST)(body)
    _idle(outer, 1)
    assert SESSION.targets["late_outer"].plain
    late["on"] = True
    for _ in range(5):  # as many calls as would have opened the inner's own window, were it outermost
        assert outer(3) == 7
    assert "late_inner" not in SESSION.targets  # found held on the stack: nested, not a target
    assert not SESSION.targets["late_outer"].plain  # from then on its idle path marks the depth
    assert not records.of("autoprof.window", target="late_inner")


def test_a_target_also_called_outermost_is_nested_inside_a_plain_call(records: Any) -> None:
    inner = autoprof(name="both_inner", skip_first=0, wait=5, warmup=1, active=1)(lambda x: x * 2)
    inner(1)  # outermost once: a target of its own, in its schedule's wait
    use = {"on": False}
    outer = autoprof(name="both_outer", **FAST)(lambda x: (inner(x) if use["on"] else x) + 1)
    _idle(outer, 1)
    assert SESSION.targets["both_outer"].plain
    calls = SESSION.targets["both_inner"].calls
    use["on"] = True
    for _ in range(8):
        assert outer(3) == 7
    assert SESSION.targets["both_inner"].calls == calls  # its calls inside a decorated call are not its steps
    assert not records.of("autoprof.window", target="both_inner")


def test_a_users_profiler_started_inside_a_plain_call_sees_the_nested_call(records: Any) -> None:
    inner = autoprof(name="prof_inner")(lambda x: x @ x)
    state: dict[str, Any] = {"prof": None}

    def body(x: torch.Tensor) -> torch.Tensor:
        if state["prof"] is None:
            return x @ x
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            y = inner(x)
        state["prof"] = prof
        return y

    outer = autoprof(name="prof_outer", **FAST)(body)
    x = torch.ones(4, 4)
    _idle(outer, x)
    assert SESSION.targets["prof_outer"].plain
    state["prof"] = "start"
    assert torch.equal(outer(x), x @ x)
    assert "prof_inner" in _names(state["prof"])  # annotated as a nested call in the user's profile
    assert "prof_inner" not in SESSION.targets


def test_a_trainer_loop_inside_a_plain_call_is_not_a_step(records: Any) -> None:
    steps = Steps("loop_inside", **FAST)
    use = {"on": False}

    def body(x: int) -> int:
        if use["on"]:
            for i in range(4):
                steps.begin(i)
                steps.end()
        return x + 1

    outer = autoprof(name="loop_outer", **FAST)(body)
    _idle(outer, 1)
    assert SESSION.targets["loop_outer"].plain
    use["on"] = True
    assert outer(1) == 2
    assert "loop_inside" not in SESSION.targets or SESSION.targets["loop_inside"].calls == 0
    assert not SESSION.targets["loop_outer"].plain
    assert not records.of("autoprof.window", target="loop_inside")


def test_an_async_target_run_inside_a_plain_call_is_nested(records: Any) -> None:
    @autoprof(name="async_inner", **FAST)
    async def inner(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    use = {"on": False}

    def body(x: int) -> int:
        return asyncio.run(inner(x)) + 1 if use["on"] else x + 1

    outer = autoprof(name="async_outer", **FAST)(body)
    _idle(outer, 1)
    use["on"] = True
    for _ in range(4):
        assert outer(3) == 7
    assert "async_inner" not in SESSION.targets
    assert not SESSION.targets["async_outer"].plain


def test_another_threads_call_during_a_plain_call_is_outermost(records: Any) -> None:
    other = autoprof(name="other_thread", **FAST)(lambda x: x - 1)
    go, done = threading.Event(), threading.Event()

    def body(x: int) -> int:
        if go.is_set():
            done.wait(10)  # held while the other thread calls
        return x + 1

    outer = autoprof(name="waiting_outer", **FAST)(body)
    _idle(outer, 1)
    go.set()
    t = threading.Thread(target=outer, args=(1,))
    t.start()
    try:
        for _ in range(4):
            assert other(5) == 4  # outermost in its own thread: its own schedule, its own window
    finally:
        done.set()
        t.join(10)
    assert SESSION.targets["other_thread"].calls >= 3
    assert records.of("autoprof.window", target="other_thread")
    assert SESSION.targets["waiting_outer"].plain  # nothing held it: another thread's call is not nested


def test_a_probe_outermost_in_its_thread_is_a_step_while_another_threads_plain_call_runs(records: Any) -> None:
    """The tick's probe looks for a plain call holding it on its own thread's stack, from the wrapper's caller up (past
    the guard around the tick): another thread's plain call in flight makes no call of this thread nested."""
    autoprof.configure(trigger=True)
    go, inside, done = threading.Event(), threading.Event(), threading.Event()

    def body(x: int) -> int:
        if go.is_set():
            inside.set()
            done.wait(10)  # held while this thread's target is probed
        return x + 1

    outer = autoprof(name="plain_elsewhere", **FAST)(body)
    probed = autoprof(name="probed_outermost", **FAST)(lambda x: x)
    _idle(outer, 1)
    _idle(probed, 1)
    target = SESSION.targets["probed_outermost"]
    watch = target.watch
    assert watch is not None and target.plain
    go.set()
    t = threading.Thread(target=outer, args=(1,))
    t.start()
    try:
        assert inside.wait(10) and SESSION.targets["plain_elsewhere"].idle  # the other thread is in its plain call
        watch.probing, watch.next = 1, -1.0  # this call ticks, as a probe
        assert probed(7) == 7
    finally:
        done.set()
        t.join(10)
    assert target.plain  # not found nested: its own wrapper's frame is not a holder


def test_the_trigger_skips_the_period_across_a_profiled_call(records: Any) -> None:
    autoprof.configure(trigger=True)
    step = autoprof(name="periods", **FAST)(lambda x: x)
    for i in range(6):
        step(i)
    target = SESSION.targets["periods"]
    watch = target.watch
    assert watch is not None
    # three calls through the schedule (warmup, active, the one that finds it over), then three idle ones: their starts
    assert len(watch.starts) == 3 and all(t > 0 for t in watch.starts)
    assert target.calls == 6  # the idle calls count, though the idle path counts nothing itself
    watch.pause()  # a profiled call: a break, no call
    assert watch.starts[-1] == -1 and target.calls == 6
    step(6)
    assert target.calls == 7
    watch.due = 0  # a refresh is due: the tick fills the history
    # the run-queue waits read at the earlier ticks would take a busy machine's wait off the periods (a CI run under
    # coverage beside other jobs read 5.7 us): this test is about the break, so the periods are their wall times
    watch.reads.clear()
    watch.tick(watch.starts[-1], target.calls, target.cost())
    s = watch.starts
    ns = [round((s[1] - s[0]) * 1e9), round((s[2] - s[1]) * 1e9)]
    assert s[3] == -1 and list(watch.times) == ns  # not the period across the break


def test_a_tick_judges_only_the_period_that_ends_it(records: Any) -> None:
    from autoprof.live.trigger import Settings, Watch

    settings = Settings(factor=2.0, mads=6.0, history=50, min_steps=5, budget=1.0, interval=0, floor_ns=0)
    watch = Watch(settings)
    t, calls, found, most = 0, 0, [], 0

    def call(period: int) -> None:
        nonlocal t, calls, most
        t += period
        calls += 1
        watch.starts.append(t / 1e9)  # what the wrapper does: perf_counter seconds
        most = max(most, len(watch.starts))
        if t / 1e9 > watch.next:
            got = watch.tick(t / 1e9, calls, 4)
            if got is not None:
                found.append(got)

    for _ in range(200):
        call(1_000_000)  # 1 ms steps: before the baseline, a tick every TICK_MAX (10 ms); after, every 2 ms
    assert watch.limit == 2_000_000 and not found
    call(50_000_000)  # the period of step 199 (it ends at the start of call 200, numbered from 0) ...
    call(50_000_000)  # ... and of step 200: two slow steps in a row
    assert found and found[0].kind == "persistent" and found[0].step == 200 and found[0].slow_steps[-2:] == (199, 200)
    for _ in range(20_000):
        call(1000)  # fast calls: thousands between two ticks (the limit, 2 ms: 2,000)
    # bounded: the history and the calls since the last tick, kept at each tick; all counted
    assert most <= settings.history + 1 + 2001 and watch.pending() == 200 + 2 + 20_000
    assert calls == 200 + 2 + 20_000


def test_async_plain_calls_run_concurrently_and_hold_nested_ones(records: Any) -> None:
    autoprof.configure(trigger=True)

    @autoprof(name="async_leaf")
    async def leaf(x: int) -> int:
        await asyncio.sleep(0)
        return x + 100

    use = {"on": False}

    @autoprof(name="async_plain", **FAST)
    async def step(x: int) -> int:
        await asyncio.sleep(0)
        return (await leaf(x) if use["on"] else x) * 2

    async def main() -> list[int]:
        for i in range(3):
            await step(i)  # its window: it is idle after
        assert SESSION.targets["async_plain"].plain
        out = list(await asyncio.gather(*(step(i) for i in range(4))))
        use["on"] = True
        out += await asyncio.gather(*(step(i) for i in range(4)))
        return out

    assert asyncio.run(main()) == [0, 2, 4, 6, 200, 202, 204, 206]
    assert "async_leaf" not in SESSION.targets  # held on the stack of its own task's plain call
    target = SESSION.targets["async_plain"]
    assert not target.plain and not target.idle
    assert target.watch is not None and target.calls >= 8  # the trigger timed the idle calls


def _fake_clock(monkeypatch: Any) -> list[int]:
    """The wrappers' clock, driven by the test (decorate after this): deterministic periods on a loaded machine."""
    clock = [1_000_000_000]
    monkeypatch.setattr(instrument, "_now", lambda: clock[0])
    monkeypatch.setattr(instrument, "_clock", lambda: clock[0] / 1e9)  # the trigger's: perf_counter seconds
    monkeypatch.setattr(_cpu, "runqueue_ns", lambda: 0)  # no wait for a CPU (the real one, against fake periods: noise)
    return clock


def _triggered(records: Any, target: str) -> list[dict[str, Any]]:
    autoprof.flush()
    return [w["trigger"] for w in records.of("autoprof.window", target=target) if w.get("trigger")]


def test_on_a_fake_clock_a_slowdown_at_step_200_opens_a_window_within_three_steps(records: Any, monkeypatch: Any) -> None:
    clock = _fake_clock(monkeypatch)
    autoprof.configure(trigger=True)
    step = autoprof(name="fake_slowdown", **FAST)(lambda i: i)
    for i in range(230):
        clock[0] += 5_000_000 if i < 200 else 50_000_000  # call i starts here: the period of call i - 1
        assert step(i) == i
    got = _triggered(records, "fake_slowdown")
    assert got, "no triggered window"
    t = got[0]
    assert t["kind"] == "persistent" and t["step"] == 200 and t["slow_steps"][-2:] == [199, 200]
    assert t["median_ms"] == 5.0 and t["step_ms"] == 50.0 and t["ratio"] == 10.0
    assert SESSION.targets["fake_slowdown"].calls == 230


def test_on_a_fake_clock_a_steady_run_of_2000_steps_triggers_nothing(records: Any, monkeypatch: Any) -> None:
    clock = _fake_clock(monkeypatch)
    autoprof.configure(trigger=True)
    step = autoprof(name="fake_steady", **FAST)(lambda i: i)
    for i in range(2000):
        clock[0] += 5_000_000 + (i * 7919 % 1000) * 1000  # 5-6 ms, spread
        step(i)
    assert not _triggered(records, "fake_steady")
    target = SESSION.targets["fake_steady"]
    assert target.calls == 2000 and target.watch is not None and 5_000_000 <= target.watch.median <= 6_000_000


def test_on_a_fake_clock_a_slowdown_every_50th_step_is_found_with_its_period(records: Any, monkeypatch: Any) -> None:
    clock = _fake_clock(monkeypatch)
    autoprof.configure(trigger=True)
    step = autoprof(name="fake_every_50", **FAST)(lambda i: i)
    for i in range(420):
        clock[0] += 45_000_000 if i % 50 == 1 and i > 1 else 2_000_000  # the period of every 50th call is slow
        step(i)
    got = _triggered(records, "fake_every_50")
    assert got, "no triggered window"
    t = got[0]
    assert t["kind"] == "recurring" and t["period"] == 50 and t["aimed_at"] == t["step"] + 50
    assert t["step"] % 50 == 0


def test_on_a_fake_clock_calls_only_from_another_thread_are_neither_timed_nor_counted(records: Any, monkeypatch: Any) -> None:
    clock = _fake_clock(monkeypatch)
    autoprof.configure(trigger=True)
    step = autoprof(name="fake_other_thread", **FAST)(lambda i: i)
    for i in range(5):
        clock[0] += 1_000_000
        step(i)  # this thread owns the target: its window, then idle calls
    target = SESSION.targets["fake_other_thread"]
    watch = target.watch
    assert watch is not None and target.plain
    before = target.calls
    most = 0
    ticks = {"n": 0}
    real_tick = instrument._tick

    def counted(t: Any, s0: float) -> None:
        if threading.current_thread() is not threading.main_thread():
            ticks["n"] += 1
        real_tick(t, s0)

    monkeypatch.setattr(instrument, "_tick", counted)

    def other() -> None:
        nonlocal most
        for i in range(3000):
            clock[0] += 1_000_000  # 1 ms a call: past the owner's next tick from the 11th on
            step(i)
            most = max(most, len(watch.starts))

    t = threading.Thread(target=other)
    t.start()
    t.join(60)
    # README, "Threads": another thread's calls are no steps (issue 45: they were counted, and moved the owner's step
    # numbers): none is timed, none ticks, none is counted
    assert most <= watch.settings.history + 1
    assert ticks["n"] == 0
    assert target.calls == before
    assert not _triggered(records, "fake_other_thread")


def test_a_plain_call_whose_target_leaves_the_idle_path_meanwhile_still_holds_its_nested_calls(records: Any) -> None:
    # the plain path counts nothing: a call it holds looks for it on the stack whenever a target was ever plain and
    # idle, also when the holder's target left the idle path during the call (a tick that armed a triggered window)
    inner = autoprof(name="left_inner", skip_first=0, wait=5, warmup=1, active=1)(lambda x: x * 2)
    inner(1)  # outermost once: a target of its own, in its schedule's wait
    calls = SESSION.targets["left_inner"].calls
    state = {"on": False}

    def body(x: int) -> int:
        if not state["on"]:
            return x + 1
        target = SESSION.targets["left_outer"]
        target.position.swap_in(target.position.own(), None, target.done)  # as a triggered window is armed
        target._state(False, target.plain)
        assert not target.idle
        return sum(inner(x) for _ in range(4)) + 1

    outer = autoprof(name="left_outer", **FAST)(body)
    _idle(outer, 1)
    assert SESSION.targets["left_outer"].idle and PLAIN.seen
    state["on"] = True
    assert outer(3) == 25
    assert SESSION.targets["left_inner"].calls == calls  # held: none of its four calls was a step of its own
    assert not records.of("autoprof.window", target="left_inner")


def test_a_decorated_call_outside_any_plain_call_is_a_step_though_a_target_is_plain_and_idle(records: Any) -> None:
    # the stack is looked up (a target is plain and idle) and holds no plain call: the call is its target's step
    idle = autoprof(name="idle_elsewhere", **FAST)(lambda x: x + 1)
    _idle(idle, 1)
    assert PLAIN.seen
    own = autoprof(name="own_steps", **FAST)(lambda x: x * 2)
    for i in range(3):
        assert own(i) == 2 * i
    assert SESSION.targets["own_steps"].calls == 3 and SESSION.targets["own_steps"].done
    assert records.of("autoprof.window", target="own_steps")


def test_a_concurrent_tasks_bare_call_holds_no_sync_call_it_makes(records: Any) -> None:
    # asyncio.gather: the second task's call runs bare (neither a step nor an annotation); a sync target called inside
    # it is nested in it by the bare call's mark (its task's context), never held by it as a plain call (its frame is
    # no plain call): not a step of its own, as inside the task whose call is the step
    leaf = autoprof(name="bare_leaf", skip_first=0, wait=0, warmup=1, active=1, repeat=1)(lambda x: x)
    plain = autoprof(name="bare_plain_idle", **FAST)(lambda x: x)
    _idle(plain, 1)
    assert PLAIN.seen

    @autoprof(name="bare_async", skip_first=0, wait=100, warmup=1, active=1)
    async def step(x: int) -> int:
        await asyncio.sleep(0)
        return leaf(x)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(step(i) for i in range(4))))

    assert asyncio.run(main()) == [0, 1, 2, 3]
    assert "bare_leaf" not in SESSION.targets or SESSION.targets["bare_leaf"].calls == 0
    assert SESSION.targets["bare_async"].plain  # not taken for a holder
