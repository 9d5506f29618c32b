"""A user's rules run under a contract the engine enforces, live and offline (issue 28, items 6 and 7): JSON-safe
findings, ids outside the built-in namespaces, a trace they cannot change, a time limit per call; rules made by a
factory or defined in a script analyze with ``--jobs 2`` too; the trainer integrations take ``rules=``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, Records, shared_trace, validate_record
from synth import cpu_rank_doc

import autoprof
from autoprof import Finding
from autoprof import rules as user_rules
from autoprof.analysis import _fleet, engine
from autoprof.analysis.vocabulary import VOCABULARY
from autoprof.config import SCHEDULE_KEYS, SWITCH, Config


def _strict(line: str) -> dict[str, Any]:
    """One JSON line, read as a strict reader does (no NaN, no Infinity)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    rec: dict[str, Any] = json.loads(line, parse_constant=refuse)
    return rec


def _files(tmp_path: Path, n: int = 2) -> list[Path]:
    out = []
    for k in range(n):
        p = tmp_path / f"t{k}.json"
        p.write_text(json.dumps(cpu_rank_doc(0, 1, 1000 + 500 * k)))
        out.append(p)
    return out


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "autoprof", "analyze", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=timeout)


def _module(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))


# -- findings that are not JSON, or not valid records ----------------------------------------------------------

BAD_EVIDENCE = """
import autoprof
from autoprof import Finding

def finding(rule, evidence):
    return Finding(rule, "seen", "info", "a message", "some advice", evidence)

def make(rule, *evidence):
    @autoprof.rule(rule, verdicts=("seen",))
    def check(trace, config):
        return [finding(rule, e) for e in evidence]
    return check

loop = {"n_count": 1}
loop["again"] = loop

class Loud(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")

@autoprof.rule("team.loud", verdicts=("seen",))
def loud(trace, config):
    raise Loud()

@autoprof.rule("team.exits", verdicts=("seen",))
def exits(trace, config):
    raise SystemExit(3)

RULES = [
    make("team.nan", {"ok_count": 1}, {"ratio": float("nan")}),  # the first one is kept
    make("team.inf", {"times_ms": [1.0, float("inf")]}),
    make("team.tuple_key", {(1, 2): 3}),
    make("team.int_key", {1: "one"}),
    make("team.circular", loop),
    make("team.a_set", {"ids": {1, 2}}),
    make("team.an_object", {"what": object()}),
    make("team.too_big", {"n_count": 10**40}),
    loud,
    exits,
]
"""
BAD_REASONS = {
    "team.nan": "nan",
    "team.inf": "inf",
    "team.tuple_key": "key",
    "team.int_key": "key",
    "team.circular": "circular",
    "team.a_set": "set",
    "team.an_object": "object",
    "team.too_big": "64 bits",
    "team.loud": "Loud",
    "team.exits": "SystemExit",
}


def test_findings_that_are_not_json_are_dropped_with_one_error_each_and_the_output_stays_json(tmp_path: Path) -> None:
    _module(tmp_path, "badrules", BAD_EVIDENCE)
    (trace_file,) = _files(tmp_path, 1)
    out = _cli(tmp_path, "--json", "--jobs", "1", "--rules", "badrules:RULES", str(trace_file))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    recs = [_strict(line) for line in out.stdout.splitlines()]  # NaN or Infinity would raise here
    for r in recs:
        validate_record(r)
    assert [r["event"] for r in recs].count("autoprof.window") == 1
    assert any(r.get("rule") == "bound_regime" for r in recs)  # the built-in rules' findings still come out
    mine = [r for r in recs if r["event"] == "autoprof.finding" and r["rule"].startswith("team.")]
    assert [(r["rule"], r["evidence"]) for r in mine] == [("team.nan", {"ok_count": 1})]  # that finding only is dropped
    errors: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        if r["event"] == "autoprof.error":
            errors.setdefault(r["message"].split(" ")[1], []).append(r)
    assert set(errors) == set(BAD_REASONS)
    for rule, why in BAD_REASONS.items():
        (error,) = errors[rule]  # one record each
        assert error["message"].startswith(f"rule {rule} failed: "), error
        assert why in error["message"] or why == error["error_type"], error


LIVE_RULES = """
import autoprof
from autoprof import Finding

def make(rule, message="m", advice="a", subjects=(), evidence=None):
    @autoprof.rule(rule, verdicts=("seen",))
    def check(trace, config):
        return [Finding(rule, "seen", "info", message, advice, evidence or {}, subjects)]
    return check

loop = []
loop.append(loop)

@autoprof.rule("team.vandal", verdicts=("seen",))
def vandal(trace, config):
    for change in (lambda: trace.steps.clear(), lambda: trace.h_self.__setitem__(0, 0), lambda: trace.names.clear()):
        try:
            change()
        except Exception:
            pass
    trace.steps = None
    trace.metadata.clear()
    return []

RULES = [
    make("team.no_message", message=None),
    make("team.empty_message", message=""),
    make("team.number_message", message=5),
    make("team.no_advice", advice=None),
    make("team.letters", subjects="aten::mm"),
    make("team.circular", evidence={"loop": loop}),
    make("team.nan", evidence={"deep": {"ratio": float("nan")}}),
    vandal,
    make("team.fine", evidence={"n_count": 2}),
]
"""


def test_live_records_stay_valid_and_a_window_record_comes_out_whatever_the_rules_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, "liverules", LIVE_RULES)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("liverules", None)
    import liverules  # type: ignore[import-not-found]

    autoprof.configure(sink=tmp_path / "r.jsonl", background=False, rules=liverules.RULES)
    x = torch.randn(32, 32)

    @autoprof.autoprof(name="step", skip_first=0, wait=0, warmup=1, active=2, repeat=1)
    def step() -> torch.Tensor:
        return (x @ x) @ x

    for _ in range(3):
        step()
    recs = Records(tmp_path / "r.jsonl")  # every record is validated against the schema
    (window,) = recs.of("autoprof.window", target="step")
    assert len(window["steps"]) == 2 and window["top_ops"] and window["regime"] is not None
    findings = recs.findings("step")
    assert "bound_regime" in findings
    assert {rule for rule in findings if rule.startswith("team.")} == {"team.fine"}
    errors = {r["message"].split(" ")[1]: r for r in recs.of("autoprof.error")}
    expected = {"team.no_message", "team.empty_message", "team.number_message", "team.no_advice", "team.letters"}
    assert set(errors) == expected | {"team.circular", "team.nan"}, sorted(errors)
    assert "message must be a non-empty string" in errors["team.no_message"]["message"]
    assert "advice must be a string" in errors["team.no_advice"]["message"]
    assert "subjects" in errors["team.letters"]["message"]
    assert "circular" in errors["team.circular"]["message"] and "nan" in errors["team.nan"]["message"]
    assert all(r["reason"] == "rule" and r["target"] == "step" for r in errors.values())


# -- rule ids -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule_id", ["autoprof.pwned", "bound_regime.check", "straggler_ranks.mine", "window_drift.x"])
def test_a_rule_id_in_a_built_in_namespace_is_refused_when_declared(rule_id: str) -> None:
    with pytest.raises(ValueError, match="built-in namespace") as caught:
        autoprof.rule(rule_id, verdicts=("x",))
    assert "\n" not in str(caught.value)
    autoprof.rule("team." + rule_id.replace(".", "_"), verdicts=("x",))  # the same words in one's own namespace: fine


def test_every_built_in_rule_id_is_a_reserved_namespace() -> None:
    from autoprof.findings import reserved_namespaces

    assert reserved_namespaces() == {"autoprof", *VOCABULARY}


def test_a_rule_whose_id_is_changed_after_its_declaration_is_not_run(tmp_path: Path) -> None:
    def pwn(trace: Any, config: Any) -> list[Finding]:
        return [Finding("bound_regime", "pwned", "critical", "all yours", "none")]

    def ours(trace: Any, config: Any) -> list[Finding]:
        return [Finding("autoprof.window", "seen", "critical", "m", "a")]

    sneaky = autoprof.rule("team.sneaky", verdicts=("x",))(pwn)
    plain = autoprof.rule("team.plain", verdicts=("seen",))(ours)
    config = autoprof.configure(rules=[sneaky, plain])
    sneaky.rule_id, sneaky.verdicts = "bound_regime", ("pwned",)  # type: ignore[attr-defined]  # changed afterwards
    plain.rule_id = "autoprof.window"  # type: ignore[attr-defined]
    (result,) = engine.analyze_files(_files(tmp_path, 1), config, jobs=1)
    regimes = [f for f in result.findings if f.rule == "bound_regime"]
    assert len(regimes) == 1 and regimes[0].verdict in VOCABULARY["bound_regime"]
    assert not [f for f in result.findings if f.severity == "critical" or f.rule == "autoprof.window"]
    assert result.summary["regime"]["verdict"] == regimes[0].verdict
    assert len(result.failures) == 2 and all(str(e).startswith("not run: ") for _, e in result.failures), result.failures
    messages = " ".join(str(e) for _, e in result.failures)
    assert "built-in namespace" in messages and "dotted" in messages


# -- a trace the rules cannot change --------------------------------------------------------------------------


def _witness(trace: Any, config: Any) -> list[Finding]:
    """What a rule reads of the trace, as evidence: a later rule must read the same whatever the ones before it did."""
    from autoprof.measure.steps import device_step_ns
    from autoprof.measure.views import view

    shaped = sorted(trace.shapes)[:3]
    evidence = {
        "steps": [[s.number, s.start_ns, s.end_ns] for s in trace.steps],
        "h_dur_sum": sum(trace.h_dur),
        "h_self_sum": sum(trace.h_self),
        "names": list(trace.names),
        "shapes": [trace.shapes.get(i) for i in shaped],
        "metadata": sorted(trace.metadata),
        "host_in": sum(view(trace).host_in),
        "device_step_ns": device_step_ns(trace),
        "mm_calls": len(trace.host_named([trace.name_id("aten::mm")])),
    }
    return [Finding("team.witness", "seen", "info", "what I read", "none", json.loads(json.dumps(evidence)))]


def _vandal(trace: Any, config: Any) -> list[Finding]:
    from autoprof.measure.views import view

    attempts: list[Callable[[], object]] = [
        lambda: trace.steps.clear(),
        lambda: trace.steps.pop(),
        lambda: trace.h_dur.__setitem__(0, 10**12),
        lambda: trace.h_self.__setitem__(slice(0, 2), trace.h_self[2:4]),
        lambda: trace.names.clear(),
        lambda: trace.shapes[sorted(trace.shapes)[0]][0].clear(),
        lambda: trace.host_named([trace.name_id("aten::mm")]).clear(),
        lambda: trace.host_by_name().clear(),
        lambda: view(trace).host_in.__setitem__(0, False),
        lambda: trace.metadata.clear(),
        lambda: config.peaks.clear(),
    ]
    for attempt in attempts:
        try:
            attempt()
        except Exception:
            pass
    trace.derived = None
    trace.steps = None
    trace.h_dur = None
    return []


def test_a_rule_cannot_change_what_the_built_in_rules_the_record_or_later_rules_read(tmp_path: Path) -> None:
    witness = autoprof.rule("team.witness", verdicts=("seen",))(_witness)
    vandal = autoprof.rule("team.vandal", verdicts=("seen",))(_vandal)
    before = autoprof.rule("team.before", verdicts=("seen",))(lambda trace, config: _vandal(trace, config))
    peaks = {"flops_per_s": 1e12, "bytes_per_s": 1e11}
    files = _files(tmp_path, 1)
    (alone,) = engine.analyze_files(files, SWITCH.config.replace(peaks=peaks, rules=(witness,)), jobs=1)
    config = SWITCH.config.replace(peaks=peaks, rules=(before, witness, vandal))
    (result,) = engine.analyze_files(files, config, jobs=1)
    assert result.failures == [] and result.error is None
    assert config.peaks == peaks  # the configuration is the rules' to read only, too
    seen = {f.rule: f.evidence for f in result.findings if f.rule.startswith("team.")}
    assert seen == {"team.witness": alone.findings[-1].evidence}  # what the later rule read: the trace as it is
    assert seen["team.witness"]["steps"] and seen["team.witness"]["mm_calls"] == 3
    for field in ("steps", "step_ns", "top_ops", "sections", "summary", "event_count"):
        assert getattr(result, field) == getattr(alone, field), field  # the record's fields
    assert [f for f in result.findings if f.rule != "team.witness"] == [f for f in alone.findings if f.rule != "team.witness"]


@pytest.mark.parametrize("rel", ["h200/gpt2_train.chrome.json.gz", "hta/a100_rank3_of8_train.json.gz", None])
def test_the_read_only_trace_reads_as_the_trace_and_shares_nothing_a_rule_could_change(rel: str | None, tmp_path: Path) -> None:
    from types import MappingProxyType

    from autoprof.rules import RULES, read_only
    from autoprof.trace import chrome

    trace = chrome.load(shared_trace(rel) if rel else _files(tmp_path, 1)[0], workers=0)
    config = Config()
    as_is = [f for rule in RULES.values() for f in rule.run(trace, config)]
    frozen = read_only(trace)
    assert [f for rule in RULES.values() for f in rule.run(frozen, config)] == as_is  # the built-in rules read it alike
    for name, value in vars(frozen).items():  # a field added to Trace one day must be made read-only here too
        if type(value) in (memoryview, tuple, MappingProxyType, str, int, type(None)):
            assert type(value) is not memoryview or value.readonly, name
        elif type(value) in (dict, list):  # small ones: copies
            assert value == getattr(trace, name) and value is not getattr(trace, name), name
        else:
            assert type(value).__name__ in ("_CopiedOnRead", "Derived") and value is not getattr(trace, name), name


# -- a time limit per call ------------------------------------------------------------------------------------


def test_a_slow_rule_costs_the_time_limit_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(user_rules, "USER_RULE_TIME_LIMIT_S", 0.5, raising=False)
    release = threading.Event()
    deadline = time.monotonic() + 15

    @autoprof.rule("team.sleepy", verdicts=("seen",))
    def sleepy(trace: Any, config: Any) -> list[Finding]:
        release.wait(15)  # blocked in C: runs on after the limit, its thread a daemon
        return []

    @autoprof.rule("team.spin", verdicts=("seen",))
    def spin(trace: Any, config: Any) -> list[Finding]:
        while time.monotonic() < deadline:  # pure Python: stopped at the limit
            pass
        return []

    @autoprof.rule("team.after", verdicts=("seen",))
    def after(trace: Any, config: Any) -> list[Finding]:
        return [Finding("team.after", "seen", "info", "ran", "none")]

    config = SWITCH.config.replace(rules=(sleepy, spin, after))
    files = _files(tmp_path, 1)
    try:
        started = time.monotonic()
        (result,) = engine.analyze_files(files, config, jobs=1)
        first = time.monotonic() - started
        assert first < 5, first
        assert {f.rule for f in result.findings} >= {"bound_regime", "team.after"} and result.summary["regime"]
        assert {name for name, _ in result.failures} == {"team.sleepy", "team.spin"}
        assert all(str(e).startswith("ran past its time limit of 0.5 s") for _, e in result.failures), result.failures
        assert {getattr(e, "type_name", None) for _, e in result.failures} == {"RuleTimeoutError"}
        for _ in range(100):  # the pure-Python one is stopped, not left spinning on the interpreter's lock
            if not any(t.name == "autoprof-rule-team.spin" for t in threading.enumerate()):
                break
            time.sleep(0.02)
        assert not any(t.name == "autoprof-rule-team.spin" for t in threading.enumerate())
        started = time.monotonic()
        (again,) = engine.analyze_files(files, config, jobs=1)  # the same process again (the report at exit does)
        assert time.monotonic() - started < first - 0.5
        assert {name for name, _ in again.failures} == {"team.sleepy", "team.spin"}
        assert all("earlier in this process" in str(e) for _, e in again.failures)
        assert "team.after" in {f.rule for f in again.findings}
    finally:
        release.set()


EXIT_SCRIPT = """
import json, sys, time
import torch, autoprof
from autoprof import Finding, rules
from autoprof.render import htmlreport
rules.USER_RULE_TIME_LIMIT_S = 2.0
htmlreport._plotly = lambda: (None, None, None)  # no plotly here: the page is a stub, the analysis behind it is not
htmlreport.render = lambda reps: "page"
real_write = htmlreport.write
def timed_write(*args, **kwargs):
    t0 = time.monotonic()
    try:
        return real_write(*args, **kwargs)
    finally:
        print(json.dumps({"report_s": time.monotonic() - t0}), flush=True)
htmlreport.write = timed_write

@autoprof.rule("team.slow", verdicts=("seen",))
def slow(trace, config):
    time.sleep(40)
    return [Finding("team.slow", "seen", "info", "late", "none")]

autoprof.configure(sink=sys.argv[1], trace_dir=sys.argv[2], report=True, rules=[slow])
@autoprof.autoprof(name="step", skip_first=0, wait=0, warmup=1, active=2)
def step(x):
    return x @ x
for _ in range(3):
    step(torch.ones(16, 16))
"""


def test_a_slow_rule_never_holds_the_exit_nor_drops_the_window(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(EXIT_SCRIPT)
    sink, traces = tmp_path / "r.jsonl", tmp_path / "traces"
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script), str(sink), str(traces)], capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=45
    )
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert took < 30, took  # never the rule's 40 s, nor the 30 s the exit waits for the last windows
    recs = [json.loads(line) for line in sink.read_text().splitlines()]
    for r in recs:
        validate_record(r)
    assert [r["event"] for r in recs].count("autoprof.window") == 1  # the window is not dropped
    (error,) = [r for r in recs if r["event"] == "autoprof.error"]
    assert error["message"].startswith("rule team.slow failed: ran past its time limit of 2 s"), error
    assert error["error_type"] == "RuleTimeoutError" and error["target"] == "step"
    (report,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert report["report_s"] < 2.0, report  # the report's analysis does not wait for the rule again
    assert (traces / "autoprof-report.rank0.html").read_text() == "page"


# -- rules in worker processes ---------------------------------------------------------------------------------

FACTORY = """
import os
import autoprof
from autoprof import Finding

def make(rule_id, at_least):
    @autoprof.rule(rule_id, verdicts=("many-matmuls",))
    def check(trace, config):
        mm = trace.name_id("aten::mm")
        calls = len(trace.host_named([mm])) if mm >= 0 else 0
        if calls < at_least:
            return []
        return [Finding(rule_id, "many-matmuls", "info", f"{calls} aten::mm", "fine", {"calls_count": calls, "pid": os.getpid()})]
    return check

MADE = make("team.made", 2)
"""


def test_a_rule_made_by_a_factory_analyzes_with_jobs_2(tmp_path: Path) -> None:
    _module(tmp_path, "factory", FACTORY)
    files = _files(tmp_path, 2)
    out = _cli(tmp_path, "--json", "--jobs", "2", "--rules", "factory:MADE", *map(str, files))
    assert out.returncode == 0, out.stderr
    recs = [_strict(line) for line in out.stdout.splitlines()]
    for r in recs:
        validate_record(r)
    assert not [r for r in recs if r["event"] == "autoprof.error"], out.stdout
    mine = [r for r in recs if r.get("rule") == "team.made"]
    assert [r["source"] for r in mine] == [str(f) for f in files]  # each file, in input order
    assert all(r["evidence"]["calls_count"] == 3 for r in mine)


SCRIPT_RULES = """
import json, os, sys
print("script ran", flush=True)  # no __main__ guard: a worker that imported this script would run it again
import autoprof
from autoprof import Finding
from autoprof.analysis import engine

@autoprof.rule("team.mine", verdicts=("seen",))
def mine(trace, config):
    return [Finding("team.mine", "seen", "info", "mine", "none", {"pid": os.getpid()})]

lam = autoprof.rule("team.lam", verdicts=("seen",))(lambda trace, config: [Finding("team.lam", "seen", "info", "l", "a")])
autoprof.configure(rules=[mine, lam])
files = sys.argv[1:]
found = {
    "jobs2": [f.rule for f in autoprof.analyze(files, jobs=2) if f.rule.startswith("team.")],
    "default": [f.rule for f in autoprof.analyze(files) if f.rule.startswith("team.")],
    "errors": [r.error for r in engine.analyze_files(files, jobs=2) if r.error],
    "pids": sorted({f.evidence["pid"] for f in autoprof.analyze(files, jobs=2) if f.rule == "team.mine"}),
    "me": os.getpid(),
}
print(json.dumps(found))
"""


def test_rules_defined_in_the_calling_script_analyze_in_parallel_defaults(tmp_path: Path) -> None:
    script = tmp_path / "analyze_mine.py"
    script.write_text(SCRIPT_RULES)
    files = _files(tmp_path, 2)
    out = subprocess.run(
        [sys.executable, str(script), *map(str, files)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "script ran" and lines.count("script ran") == 1
    found = json.loads(lines[-1])
    assert found["jobs2"] == found["default"] == ["team.mine", "team.lam"] * 2
    assert found["errors"] == []
    assert found["pids"] == [found["me"]]  # a script's own rules are analyzed in the process that has them


IMPORTED = """
import json, os, sys
sys.path.insert(0, sys.argv[1])  # where the rules live: neither the working directory nor PYTHONPATH
import farrules
import autoprof
files = sys.argv[2:]
found = autoprof.analyze(files, jobs=2, config=autoprof.configure(rules=[farrules.far]))
print(json.dumps(sorted({f.evidence["pid"] for f in found if f.rule == "team.far"}) + [os.getpid()]))
"""

FAR = """
import os
import autoprof
from autoprof import Finding

@autoprof.rule("team.far", verdicts=("seen",))
def far(trace, config):
    return [Finding("team.far", "seen", "info", "far", "none", {"pid": os.getpid()})]
"""


@pytest.mark.skipif(_fleet.usable_cpus() < 2, reason="one CPU: files are analyzed one after another, in this process")
def test_an_importable_rule_travels_to_the_workers_by_its_import_path(tmp_path: Path) -> None:
    far = tmp_path / "far"
    far.mkdir()
    _module(far, "farrules", FAR)
    script = tmp_path / "use_far.py"
    script.write_text(IMPORTED)
    files = _files(tmp_path, 2)
    out = subprocess.run(
        [sys.executable, str(script), str(far), *map(str, files)], capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr
    *pids, me = json.loads(out.stdout.splitlines()[-1])
    assert len(pids) == 2 and me not in pids  # analyzed in two worker processes, each importing the rule


@autoprof.rule("team.module_level", verdicts=("x",))
def _module_level(trace: Any, config: Any) -> list[Finding]:
    return []


def test_ship_refuses_exactly_what_another_process_cannot_import() -> None:
    def local(trace: Any, config: Any) -> list[Finding]:
        return []

    shipped = user_rules.ship([_module_level])
    assert shipped is not None and [rule_id for rule_id, _ in shipped.rules] == ["team.module_level"]
    (fn,), failures = shipped.resolve()
    assert fn is _module_level and failures == []
    assert user_rules.ship([autoprof.rule("team.local", verdicts=("x",))(local)]) is None
    assert user_rules.ship([autoprof.rule("team.lam", verdicts=("x",))(lambda t, c: [])]) is None


# -- the trainer integrations ----------------------------------------------------------------------------------


def test_the_integrations_take_every_configure_option_rules_included() -> None:
    from autoprof.integrations import CONFIG_KEYS, split_options

    assert set(CONFIG_KEYS) | set(SCHEDULE_KEYS) == {f.name for f in dataclasses.fields(Config)}
    assert not set(CONFIG_KEYS) & set(SCHEDULE_KEYS)
    assert split_options({"rules": [_module_level], "wait": 2}) == {"wait": 2}
    assert SWITCH.config.rules == (_module_level,)
