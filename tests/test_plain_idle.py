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
from autoprof import instrument
from autoprof.instrument import Steps
from autoprof.session import SESSION

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
    assert target.done and target.plain
    before = instrument._tls.d
    assert outer(1) == 2 and instrument._tls.d == before and instrument._INSIDE.n == 0


def test_a_target_whose_windows_held_a_decorated_call_is_not_plain(records: Any) -> None:
    inner = autoprof(name="held_inner")(lambda x: x * 2)
    outer = autoprof(name="holding_outer", **FAST)(lambda x: inner(x) + 1)
    _idle(outer, 1)
    assert not SESSION.targets["holding_outer"].plain
    assert "held_inner" not in SESSION.targets  # nested: never a target of its own
    assert outer(3) == 7


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


def test_the_trigger_skips_the_period_across_a_profiled_call(records: Any) -> None:
    autoprof.configure(trigger=True)
    step = autoprof(name="periods", **FAST)(lambda x: x)
    for i in range(6):
        step(i)
    watch = SESSION.targets["periods"].watch
    assert watch is not None
    times = list(watch.times)
    # the first idle call after the window measures from no start (negative: no step's), the others are periods
    assert times and times[0] < 0 and all(t >= 0 for t in times[1:])
    watch.refresh(10)
    assert watch.median >= 0
