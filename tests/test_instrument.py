"""@autoprof and autoprof.section on every call kind, the schedule, the idle path, and never breaking the host."""

from __future__ import annotations

import asyncio
import gc
import inspect
import sys
import threading
import tracemalloc
from typing import Any

import pytest
import torch

import autoprof
from autoprof.live import instrument
from autoprof.live.session import SESSION

FAST = dict(skip_first=0, wait=0, warmup=1, active=2)


def _annotation_names(records: Any, target: str) -> list[str]:
    win = records.of("autoprof.window", target=target)
    assert win, f"no window record for {target}"
    return [op["name"] for op in win[0]["top_ops"]]


class CountingRF:
    """Counts record_function constructions, delegating to the real one."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.real = instrument._record_function

    def __call__(self, name: str) -> Any:
        self.names.append(name)
        return self.real(name)


@pytest.fixture
def rf_counter(monkeypatch: pytest.MonkeyPatch) -> CountingRF:
    c = CountingRF()
    monkeypatch.setattr(instrument, "_record_function", c)
    return c


def test_bare_and_keyword_forms_preserve_metadata(records: Any) -> None:
    def add(x: torch.Tensor, y: torch.Tensor = None) -> torch.Tensor:  # type: ignore[assignment]
        """Adds."""
        return x + (y if y is not None else 1)

    sig = inspect.signature(add)
    bare = autoprof(add)
    kw = autoprof(name="adder", **FAST)(add)
    for f in (bare, kw):
        assert f.__name__ == "add" and f.__doc__ == "Adds."
        assert inspect.signature(f) == sig
        assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))
    with pytest.raises(autoprof.ConfigError, match="unknown autoprof option"):
        autoprof(bogus=1)
    with pytest.raises(autoprof.ConfigError, match="active"):
        autoprof(active=0)


def test_module_object_itself_is_the_decorator(records: Any) -> None:
    @autoprof
    def f(x: int) -> int:
        return x + 1

    @autoprof(name="g", **FAST)
    def g(x: int) -> int:
        return x * 2

    assert f(1) == 2 and g(2) == 4


def test_methods_classmethods_staticmethods_and_forward(records: Any) -> None:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @autoprof(**FAST)
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with autoprof.section("attn"):
                return self.lin(x)

        @autoprof(name="Block.cm", **FAST)
        @classmethod
        def cm(cls, v: int) -> tuple[type, int]:
            return cls, v

        @autoprof(name="Block.sm", **FAST)
        @staticmethod
        def sm(v: int) -> int:
            return v + 1

    b = Block()
    assert isinstance(b, torch.nn.Module)
    for _ in range(8):  # three targets take turns: one window at a time
        assert b(torch.ones(1, 4)).shape == (1, 4)
        assert Block.cm(3) == (Block, 3) and b.cm(3) == (Block, 3)
        assert Block.sm(3) == 4 and b.sm(3) == 4
    win = records.of("autoprof.window", target="test_methods_classmethods_staticmethods_and_forward.<locals>.Block.forward")
    assert win and win[0]["steps"] == [1, 2]
    assert records.of("autoprof.window", target="Block.cm")
    assert records.of("autoprof.window", target="Block.sm")


def test_module_instance_is_instrumented_and_still_a_module(records: Any) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    wrapped = autoprof(model, name="seq", **FAST)
    assert isinstance(wrapped, torch.nn.Sequential)
    assert wrapped[0] is model[0]
    x = torch.ones(2, 8)
    for _ in range(3):
        assert torch.equal(wrapped(x), model(x))
    win = records.of("autoprof.window", target="seq")
    assert win and win[0]["steps"] == [1, 2]
    assert "aten::addmm" in [op["name"] for op in win[0]["top_ops"]]


def test_async_function_step_covers_the_body(records: Any) -> None:
    @autoprof(name="astep", **FAST)
    async def astep(n: int) -> int:
        await asyncio.sleep(0.002)
        torch.ones(8) * 2
        return n

    assert inspect.iscoroutinefunction(astep)

    async def main() -> list[int]:
        return [await astep(i) for i in range(3)]

    assert asyncio.run(main()) == [0, 1, 2]
    win = records.of("autoprof.window", target="astep")[0]
    assert win["steps"] == [1, 2]
    assert all(ms >= 1.5 for ms in win["step_wall_ms"]), win["step_wall_ms"]  # the awaited sleep is inside


def test_the_async_wrapper_has_the_sync_ones_guards(records: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle (its windows over): no step bookkeeping at all; inside a compiled region: the call as it is."""
    from autoprof.live import instrument

    @autoprof(name="aguards", **FAST)
    async def astep(n: int) -> int:
        return n

    async def run(k: int) -> list[int]:
        return [await astep(i) for i in range(k)]

    assert asyncio.run(run(4)) == [0, 1, 2, 3]  # skip 1, record 2: its one window is over
    assert records.of("autoprof.window", target="aguards")

    def no_step(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a step began")

    monkeypatch.setattr(instrument._Instrument, "begin", no_step)
    assert asyncio.run(run(3)) == [0, 1, 2]  # the idle fast path
    monkeypatch.setattr(instrument, "_is_compiling", lambda: True)
    fresh = autoprof(name="acompiled", **FAST)(astep.__wrapped__)  # the wrapper reads the guard when it is made
    assert asyncio.run(fresh(5)) == 5
    assert not records.of("autoprof.error")


def test_generator_functions_are_left_unwrapped_with_a_warning() -> None:
    def gen(n: int) -> Any:
        yield from range(n)

    with pytest.warns(UserWarning, match="generator function"):
        out = autoprof(gen)
    assert out is gen
    assert list(out(3)) == [0, 1, 2]


def test_disabled_at_decoration_returns_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    def f() -> int:
        return 1

    autoprof.configure(enabled=False)
    assert autoprof(f) is f
    assert autoprof(name="x")(f) is f


def test_env_disable_switch(tmp_path: Any) -> None:
    import subprocess

    code = "import autoprof\ndef f(): return 1\nprint(autoprof(f) is f)"
    env = {**__import__("os").environ, "AUTOPROF_DISABLE": "TRUE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "True"
    env["AUTOPROF_DISABLE"] = "yes"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
    assert "AUTOPROF_DISABLE='yes' is not 'true' or 'false'" in out.stderr


def test_schedule_step_numbers_and_repeat(records: Any) -> None:
    @autoprof(name="sched", skip_first=2, wait=1, warmup=1, active=2, repeat=2)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    for _ in range(15):
        f(torch.ones(2))
    wins = records.of("autoprof.window", target="sched")
    # skip 0,1; cycle of 4 = wait 2, warmup 3, active 4-5; then wait 6, warmup 7, active 8-9; then done.
    assert [w["steps"] for w in wins] == [[4, 5], [8, 9]]
    assert [w["window"] for w in wins] == [0, 1]
    assert all(w["calls_total"] in (6, 10) for w in wins)
    assert all(len(w["step_wall_ms"]) == 2 for w in wins)


def test_default_schedule_skips_the_cold_first_call(records: Any) -> None:
    @autoprof
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    for _ in range(8):
        f(torch.ones(2))
    (win,) = records.of("autoprof.window")
    assert win["steps"] == [3, 4, 5]  # skip_first=1, wait=1, warmup=1, active=3
    assert win["first_call_ms"] is not None


def test_nested_calls_and_sections_become_annotations(records: Any) -> None:
    @autoprof(name="inner")
    def inner(x: torch.Tensor) -> torch.Tensor:
        return x.sin()

    @autoprof.section("block")
    def block(x: torch.Tensor) -> torch.Tensor:
        return x.cos()

    @autoprof(name="outer", **FAST)
    def outer(x: torch.Tensor) -> torch.Tensor:
        with autoprof.section("attn"):
            y = inner(x)
        return block(y)

    for _ in range(3):
        outer(torch.ones(4))
    trace = _last_trace(records, "outer")
    names = {trace.host_name(i): trace.host_cat(i) for i in range(trace.n_host)}
    for n in ("ProfilerStep#1", "outer", "attn", "inner", "block"):
        assert names.get(n) == "user_annotation", (n, names)
    # the nested decorated call never became a target of its own
    assert "inner" not in SESSION.targets


def _last_trace(records: Any, target: str) -> Any:
    """Re-run a target's last window through the live loader: via trace_dir (the same kineto events)."""
    from autoprof.trace import chrome

    win = records.of("autoprof.window", target=target)[-1]
    assert win["trace_path"], "enable trace_dir in the test"
    return chrome.load(win["trace_path"], target=target)


@pytest.fixture(autouse=True)
def _keep_traces(request: Any, tmp_path: Any) -> None:
    if "records" in request.fixturenames:
        request.getfixturevalue("records")
        autoprof.configure(trace_dir=str(tmp_path / "traces"))


def test_two_alternating_targets_each_get_their_own_window(records: Any) -> None:
    @autoprof(name="train", **FAST)
    def train(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    @autoprof(name="eval", **FAST)
    def evaluate(x: torch.Tensor) -> torch.Tensor:
        return x - 1

    for _ in range(8):
        train(torch.ones(2))
        evaluate(torch.ones(2))
    tw = records.of("autoprof.window", target="train")
    ew = records.of("autoprof.window", target="eval")
    assert tw[0]["steps"] == [1, 2]
    # eval wanted its window while train's was open: it waits its turn, then records whole.
    assert len(ew) == 1 and len(ew[0]["steps"]) == 2 and ew[0]["steps"][0] > 2
    assert SESSION.window is None


def test_idle_and_wait_paths_call_no_record_function(records: Any, rf_counter: CountingRF) -> None:
    @autoprof(name="idle", skip_first=0, wait=3, warmup=1, active=1)
    def f(x: int) -> int:
        return x

    for i in range(3):  # wait phase
        f(i)
    assert rf_counter.names == []
    f(3)  # warmup
    f(4)  # active
    assert "ProfilerStep#4" in rf_counter.names
    n = len(rf_counter.names)
    for i in range(50):  # after the last window: idle
        f(i)
    assert len(rf_counter.names) == n


def test_disabled_at_call_time_calls_no_record_function(records: Any, rf_counter: CountingRF) -> None:
    @autoprof(name="d", **FAST)
    def f(x: int) -> int:
        return x

    autoprof.configure(enabled=False)
    for i in range(10):
        assert f(i) == i
    assert rf_counter.names == []
    assert records.of("autoprof.window") == []


def test_return_values_and_exceptions_pass_through_unchanged(records: Any) -> None:
    sentinel = object()
    err = ValueError("boom")

    @autoprof(name="raiser", **FAST)
    def f(kind: str) -> object:
        if kind == "raise":
            raise err
        return sentinel

    for i in range(4):  # two cuts in a row (a third would give the target's windows up: window_given_up)
        if i % 2:
            with pytest.raises(ValueError) as e:
                f("raise")
            assert e.value is err
            tb = e.value.__traceback__
            frames = []
            while tb is not None:
                frames.append(tb.tb_frame.f_code.co_name)
                tb = tb.tb_next
            assert frames[-1] == "f"  # the raising frame is the user's own
        else:
            assert f("ok") is sentinel
    for _ in range(3):  # a cycle without a raise: the window records whole
        assert f("ok") is sentinel
    wins = records.of("autoprof.window", target="raiser")
    assert [w["steps"] for w in wins] == [[5, 6]]  # every window that held a raising step was cut, never recorded
    assert records.of("autoprof.warning", reason="window_incomplete")


def test_injected_failure_inside_autoprof_becomes_an_error_record(records: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof.analysis import engine

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("injected analysis failure")

    monkeypatch.setattr(engine, "analyze_trace", broken)

    @autoprof(name="victim", **FAST)
    def f(x: int) -> int:
        return x + 1

    assert [f(i) for i in range(4)] == [1, 2, 3, 4]
    errs = records.of("autoprof.error", target="victim")
    assert errs and "injected analysis failure" in errs[0]["message"]
    assert errs[0]["error_type"] == "RuntimeError"


def test_failing_step_bookkeeping_never_reaches_the_user(records: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_start(self: Any, t: Any) -> bool:
        raise OSError("profiler exploded")

    monkeypatch.setattr(type(SESSION), "start", broken_start)

    @autoprof(name="fragile", **FAST)
    def f(x: int) -> int:
        return x * 3

    assert [f(i) for i in range(5)] == [0, 3, 6, 9, 12]
    errs = records.of("autoprof.error", target="fragile")
    assert errs and "profiler exploded" in errs[0]["message"]


def test_foreign_profiler_guard_keeps_the_users_profile(records: Any) -> None:
    @autoprof(name="guarded", **FAST)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.mul(2)

    with torch.profiler.profile() as user_prof:
        for _ in range(5):
            f(torch.ones(3))
    names = [e.name() for e in user_prof.profiler.kineto_results.events()]
    assert names.count("aten::mul") == 5  # the user's profile kept all its events
    assert names.count("guarded") == 5  # and autoprof's annotations landed in it
    warns = records.of("autoprof.warning", target="guarded")
    assert len(warns) == 1 and warns[0]["reason"] == "foreign_profiler"
    assert records.of("autoprof.window", target="guarded") == []
    for _ in range(3):  # once the user's profiler is gone, autoprof records its window
        f(torch.ones(3))
    assert records.of("autoprof.window", target="guarded")


def test_no_graph_break_under_torch_compile_fullgraph(records: Any) -> None:
    @autoprof(name="inside")
    def inside(x: torch.Tensor) -> torch.Tensor:
        with autoprof.section("sec"):
            return x.sin() + 1

    class M(torch.nn.Module):
        @autoprof(name="M.forward")
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return inside(x) * 2

    from torch import _dynamo

    _dynamo.reset()
    m = M()
    compiled = torch.compile(m, fullgraph=True, backend="eager")  # fullgraph: a graph break would raise
    x = torch.randn(4)
    assert torch.allclose(compiled(x), (x.sin() + 1) * 2)
    explain = _dynamo.explain(M())(x)
    assert explain.graph_break_count == 0


def test_compiled_module_decorated_from_outside_steps_the_schedule(records: Any) -> None:
    from torch import _dynamo

    _dynamo.reset()
    lin = torch.nn.Linear(16, 16)
    compiled = autoprof(torch.compile(lin, backend="eager"), name="compiled_lin", **FAST)
    for _ in range(4):
        compiled(torch.randn(2, 16))
    wins = records.of("autoprof.window", target="compiled_lin")
    assert wins and wins[0]["steps"] == [1, 2]


def test_threads_do_not_corrupt_the_step_count(records: Any) -> None:
    @autoprof(name="threaded", skip_first=0, wait=17, warmup=1, active=2)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                f(torch.ones(2))
        except BaseException as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    f(torch.ones(2))  # the main thread owns the schedule
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(20):
        f(torch.ones(2))
    for t in threads:
        t.join()
    assert not errors
    t = SESSION.targets["threaded"]
    assert t.calls == 21  # only the owner's calls are steps
    wins = records.of("autoprof.window", target="threaded")
    assert [w["steps"] for w in wins] == [[18, 19]]


def test_memory_stays_flat_over_100k_idle_calls(records: Any) -> None:
    @autoprof(name="flat", **FAST)
    def f(x: int) -> int:
        return x

    for i in range(5):
        f(i)
    assert records.of("autoprof.window", target="flat")
    gc.collect()
    tracemalloc.start()
    for i in range(20_000):
        f(i)
    gc.collect()
    base, _ = tracemalloc.get_traced_memory()
    for i in range(100_000):
        f(i)
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert after - base < 64 * 1024, f"grew by {after - base} bytes over 100k calls"


def test_no_profiler_left_running_at_exit(tmp_path: Any) -> None:
    import subprocess

    sink = str(tmp_path / "r.jsonl")
    code = (
        "import atexit\n"
        "import torch.autograd.profiler as ap\n"
        # registered before autoprof's own handler, so it runs after it (atexit is LIFO)
        "atexit.register(lambda: print('recording at exit:', ap._is_profiler_enabled))\n"
        "import torch, autoprof\n"
        f"autoprof.configure(sink={sink!r})\n"
        "@autoprof(skip_first=0, wait=0, warmup=1, active=50)\n"
        "def f(x): return x + 1\n"
        "for _ in range(5): f(torch.ones(2))\n"
        "print('recording before exit:', ap._is_profiler_enabled)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "recording before exit: True" in out.stdout
    assert "recording at exit: False" in out.stdout


def test_an_internal_failure_gives_the_target_up_once(records: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}

    def broken_start(self: Any, t: Any) -> bool:
        calls["n"] += 1
        raise OSError("profiler exploded")

    monkeypatch.setattr(type(SESSION), "start", broken_start)

    @autoprof(name="given_up", **FAST)
    def f(x: int) -> int:
        return x

    for i in range(20):
        assert f(i) == i
    assert calls["n"] == 1  # not retried on every call
    assert len(records.of("autoprof.error", target="given_up")) == 1
    assert SESSION.window is None  # nothing left open for other targets
    assert SESSION.targets["given_up"].done


def test_instrumented_module_instance_pickles_as_the_plain_module(records: Any, tmp_path: Any) -> None:
    import copy

    model = torch.nn.Linear(4, 2)
    wrapped = autoprof(model, name="picklable", **FAST)
    path = tmp_path / "m.pt"
    torch.save(wrapped, path)  # whole-module save, as users do
    loaded = torch.load(path, weights_only=False)
    assert type(loaded) is torch.nn.Linear
    assert torch.equal(loaded.weight, model.weight)
    clone = copy.deepcopy(wrapped)
    assert type(clone) is torch.nn.Linear and clone.weight is not model.weight


def test_a_torch_below_the_floor_leaves_callables_unprofiled_with_one_warning(monkeypatch: Any) -> None:
    import warnings

    from autoprof.live import instrument

    assert instrument.torch_release("2.11.0+cu130") == (2, 11) and instrument.torch_release("2.4.1") == (2, 4)
    assert instrument.torch_release("main") is None  # an unreadable version is given the benefit of the doubt
    assert instrument.TORCH_SUPPORTED  # the torch the suite runs on
    monkeypatch.setattr(instrument, "TORCH_SUPPORTED", False)
    monkeypatch.setattr(instrument, "_warned_old_torch", False)

    def f(x: int) -> int:
        return x + 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert autoprof(f) is f and autoprof(name="g")(f) is f
    assert len(caught) == 1 and "needs torch >= 2.4" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the user's decoration, not at autoprof
