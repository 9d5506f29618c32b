"""One analysis, many renderers (issue 32): each trace's one :class:`autoprof.analysis.engine.Analysis`, from one pipeline,
read by ``analyze``, ``diff`` and ``report``; the same analysis options on every command; a rule's failure in every
output; one builder of the window record, live and offline, and one writer of records."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, validate_record
from synth import Synth

from autoprof import cli
from autoprof.analysis import engine
from autoprof.render import emit, htmlreport, records
from autoprof.trace import chrome

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

BROKEN_RULES = (
    "import autoprof\n"
    "@autoprof.rule('team.broken', verdicts=('never',))\n"
    "def broken(trace, config):\n"
    "    raise RuntimeError('a bug in my rule')\n"
    "RULES = [broken]\n"
)
FAILURE = "rule team.broken failed: RuntimeError: a bug in my rule"


def _trace(path: Path, op_us: float = 1_000, n: int = 4) -> Path:
    s = Synth(gpu=None)
    for k in range(n):
        s.step(k, k * 10_000, 10_000)
        s.op("aten::mm", k * 10_000 + 100, op_us, dims=[[64, 64], [64, 64]], types=["float", "float"])
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": s.events}).encode()))
    return path


@pytest.fixture
def broken_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "brokenrules.py").write_text(BROKEN_RULES)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("brokenrules", None)
    return tmp_path


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


# -- the one result type ----------------------------------------------------------------------------------------


def test_one_analysis_carries_what_each_command_reads(tmp_path: Path) -> None:
    f = _trace(tmp_path / "a.json.gz")
    (a,) = engine.analyze_files([f], jobs=1, parts={"profile", "page"})
    trace = chrome.load(f, workers=0)
    findings, _ = engine.analyze_trace(trace)
    assert engine.FileResult is engine.Analysis  # the former name still works
    assert a.error is None and a.steps == [0, 1, 2, 3] and a.step_ns == [s.dur_ns for s in trace.steps]
    assert [x.rule for x in a.findings] == [x.rule for x in findings]
    # what the diff compares and what the page draws, read from the same loaded trace as the findings
    assert a.profile == engine.profile_of(trace, findings, str(f))
    page = engine.page_of(trace, findings)
    assert a.page == page and a.page.breakdown and a.page.top_ops
    # without parts, neither is read (a file's analysis stays what analyze needs)
    (plain,) = engine.analyze_files([f], jobs=1)
    assert plain.profile is None and plain.page is None and plain.findings == a.findings
    with pytest.raises(TypeError):
        engine.Analysis("p", 1)  # type: ignore[call-arg]  # keywords only, after the path


def test_the_pipeline_reads_views_in_the_worker_that_loads_the_file(tmp_path: Path) -> None:
    files = [_trace(tmp_path / f"r{k}.json.gz", op_us=1_000 + 500 * k) for k in range(2)]
    parts = {engine.Part.PROFILE, engine.Part.PAGE}
    here = engine.analyze_files(files, jobs=1, parts=parts)
    there = engine.analyze_files(files, jobs=2, parts=parts)  # two fresh processes
    assert [a.profile for a in there] == [a.profile for a in here]
    assert [a.page for a in there] == [a.page for a in here] and all(a.page is not None for a in here)
    assert [a.summary for a in there] == [a.summary for a in here]


def test_each_part_is_built_only_when_asked_and_a_wrong_name_is_one_line(tmp_path: Path) -> None:
    f = _trace(tmp_path / "a.json.gz")
    (page_only,) = engine.analyze_files([f], jobs=1, parts={"page"})
    assert page_only.page is not None and page_only.profile is None
    (profile_only,) = engine.analyze_files([f], jobs=1, parts=[engine.Part.PROFILE])
    assert profile_only.profile is not None and profile_only.page is None
    assert page_only.findings == profile_only.findings  # the parts change nothing of the rest
    with pytest.raises(ValueError, match=r"^parts: 'pages' is not a part of an Analysis \(the parts: 'profile', 'page'\)$"):
        engine.analyze_files([f], jobs=1, parts={"pages"})


def test_the_former_views_and_page_names_still_work_with_a_warning(tmp_path: Path) -> None:
    f = _trace(tmp_path / "a.json.gz")
    with pytest.warns(DeprecationWarning, match="engine.Views is deprecated"):
        views = engine.Views(diff=True, page=htmlreport.file_report)
    with pytest.warns(DeprecationWarning, match="file_report is deprecated"):
        (old,) = engine.analyze_files([f], jobs=1, views=views)  # the former keyword, the former page reader
    (new,) = engine.analyze_files([f], jobs=1, parts={"profile", "page"})
    assert old.profile == new.profile and old.page == new.page and new.page is not None
    with pytest.warns(DeprecationWarning, match="FileReport is deprecated"):
        assert htmlreport.FileReport is engine.Analysis
    with pytest.warns(DeprecationWarning, match="page_of is deprecated"):
        assert htmlreport.page_of(new) is new


def test_the_report_in_python_reads_in_this_process_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``htmlreport.write``/``reports`` (``autoprof.report``, the end-of-run report) start no process unless asked."""
    from autoprof.analysis import _fleet

    def no_pool(*_: object) -> None:
        raise AssertionError("a FilePool was started")

    monkeypatch.setattr(_fleet, "FilePool", no_pool)
    monkeypatch.setattr(_fleet, "usable_cpus", lambda: 4)  # as on a machine of 4 CPUs, whatever this one has
    files = [_trace(tmp_path / f"r{k}.json.gz") for k in range(2)]
    reps = htmlreport.reports(files)
    assert [r.error for r in reps] == [None, None] and all(r.step_ns for r in reps)
    with pytest.raises(AssertionError, match="FilePool"):
        htmlreport.reports(files, jobs=2)  # asked: the pool is what it would start


def test_autoprof_report_takes_the_pipelines_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autoprof

    files = [_trace(tmp_path / f"r{k}.json.gz") for k in range(2)]
    seen: list[dict[str, object]] = []
    real = htmlreport.write

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(dict(kwargs))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(htmlreport, "write", spy)
    out = autoprof.report(files, tmp_path / "one.html")
    assert out == str(tmp_path / "one.html") and seen[-1] == dict(workers=None, jobs=1, executor=None)
    autoprof.report(files, tmp_path / "two.html", jobs=2, workers=0)  # two fresh processes read the files
    assert seen[-1] == dict(workers=0, jobs=2, executor=None)
    one, two = ((tmp_path / n).read_text() for n in ("one.html", "two.html"))
    assert one.count("r0.json.gz") == two.count("r0.json.gz") > 0 and len(one) == pytest.approx(len(two), rel=0.01)
    with pytest.raises(TypeError):
        autoprof.report(files, tmp_path / "x.html", None, 0)  # type: ignore[misc]  # keyword-only


# -- the same options on every command ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["analyze", "diff", "report"])
@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--jobs", "0", "expected a number of files analyzed in parallel"),
        ("--workers", "-1", "expected a number of helper processes"),
        ("--scheduler-timeout", "0", "expected a number of seconds"),
    ],
)
def test_every_command_takes_the_analysis_options(
    command: str, option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, command, option, value, "a.json", "b.json")
    assert code == 2 and said in err, err


@pytest.mark.parametrize("command", ["analyze", "diff", "report"])
def test_every_command_reaches_for_the_scheduler(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(_trace(tmp_path / "a.json.gz"))
    page = tmp_path / "p.html"
    argv = [command, "--scheduler", "tcp://127.0.0.1:1", "--scheduler-timeout", "0.2", f, f]
    code, out, err = _main(capsys, *argv, *(["-o", str(page)] if command == "report" else ["--json"]))
    if importlib.util.find_spec("distributed") is None:
        assert err == "autoprof: --scheduler needs Dask distributed, which is not installed: pip install 'autoprof[dask]'\n"
    else:
        assert err.startswith("autoprof: cannot reach the Dask scheduler at tcp://127.0.0.1:1 within 0.2 s"), err
        assert err.count("\n") == 1
    assert code == 2 and out == "" and not page.exists()


# -- a rule's failure in every output ----------------------------------------------------------------------------


def test_a_failing_rule_is_in_every_output(tmp_path: Path, broken_rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(_trace(tmp_path / "a.json.gz")), str(_trace(tmp_path / "b.json.gz", op_us=3_000))
    rules = ("--rules", "brokenrules:RULES", "--jobs", "1")
    code, out, _ = _main(capsys, "analyze", *rules, a)
    (said,) = [row for row in out.splitlines() if "team.broken" in row]
    assert code == 0 and said.split() == ["error", "team.broken", "rule", "failed:", "a", "bug", "in", "my", "rule"]
    code, out, _ = _main(capsys, "analyze", "--json", *rules, a)
    errors = [r for r in map(json.loads, out.splitlines()) if r["event"] == "autoprof.error"]
    assert code == 0 and [(e["message"], e["reason"], e["error_type"]) for e in errors] == [
        ("rule team.broken failed: a bug in my rule", "rule", "RuntimeError")  # as live: the type in error_type
    ]
    code, out, _ = _main(capsys, "diff", *rules, a, b)
    assert code == 0 and f"error on the base trace: {FAILURE}" in out and f"error on the new trace: {FAILURE}" in out
    code, out, _ = _main(capsys, "diff", "--json", *rules, a, b)
    (rec,) = map(json.loads, out.splitlines())
    validate_record(rec)
    assert code == 0 and rec["rule_failures"] == {"base": [FAILURE], "new": [FAILURE]}
    # the report's reading (the page draws rep.failures: tests/test_hostile_commands.py renders it with plotly)
    config = cli._user_rules(["brokenrules:RULES"])
    (rep,) = htmlreport.reports([a], config, jobs=1)
    assert rep.error is None and rep.failure_lines == [FAILURE]


def test_a_failing_rule_is_in_the_diff_read_in_parallel(broken_rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--jobs 2``: the files go to fresh processes, the user's rule by its import path; its failure comes back, and
    the record is the one ``--jobs 1`` writes."""
    tmp = broken_rules
    files = [str(_trace(tmp / f"r{k}.json.gz", op_us=1_000 + 500 * k)) for k in range(3)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    run = [sys.executable, "-m", "autoprof", "diff", "--json", "--jobs", "2", "--rules", "brokenrules:RULES", *files]
    out = subprocess.run(run, capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
    (rec,) = map(json.loads, out.stdout.splitlines())
    assert out.returncode == 0, out.stderr
    assert rec["rule_failures"] == {"base": [FAILURE, FAILURE], "new": [FAILURE]} and len(rec["files"]["base"]) == 2
    code, here, _ = _main(capsys, *run[3:5], "--jobs", "1", *run[7:])
    (one,) = map(json.loads, here.splitlines())
    drop = ("timestamp", "pid")
    assert code == 0 and {k: v for k, v in one.items() if k not in drop} == {k: v for k, v in rec.items() if k not in drop}


# -- one builder of the window record, one writer of records ------------------------------------------------------

OFFLINE_KEYS = ["steps", "step_wall_ms", "top_ops", "event_count", "autoprof_overhead_ms", "stall_ms", "sections"]
SUMMARY_KEYS = ["step_device_ms", "step_period_ms", "profiler_flush_ms", "step_memory_peak_bytes", "regime"]


def test_the_offline_window_record_keeps_its_fields_in_their_order(tmp_path: Path) -> None:
    (a,) = engine.analyze_files([_trace(tmp_path / "a.json.gz")], jobs=1)
    window, *_ = records.file_records(a)
    own = list(window)[list(window).index("trace_rank") + 1 :]
    assert own == OFFLINE_KEYS + SUMMARY_KEYS  # as the CLI has always written them: the records stay byte-identical
    assert window["step_wall_ms"] == [round(ns / 1e6, 4) for ns in a.step_ns] and window["stall_ms"] == 0.0


def test_the_live_window_record_keeps_its_fields_in_their_order() -> None:
    fields = emit.window_fields(
        steps=[3, 4],
        step_wall_ns=[1_234_567, 2_000_000],
        top_ops=[],
        sections=[],
        event_count=7,
        costs={"autoprof_overhead_ms": 1.0, "stall_ms": 0.5},
        summary=dict.fromkeys(SUMMARY_KEYS),
        live={"calls_total": 9, "trigger": None},
    )
    assert list(fields) == ["steps", "step_wall_ms", "top_ops", "sections", "event_count", "autoprof_overhead_ms", "stall_ms"] + [
        *SUMMARY_KEYS,
        "calls_total",
        "trigger",
    ]
    assert fields["step_wall_ms"] == [1.2346, 2.0]


def test_one_writer_of_records_is_json_and_has_no_nan() -> None:
    rec = emit.build_record(emit.WINDOW_EVENT, "info", target="t", window=None, top=[{"x": 1.5, "y": (1, 2)}], nan=float("nan"))
    assert emit.line(rec) == json.dumps(rec, separators=(",", ":"))  # what the CLI wrote before: byte for byte
    deep = {"event": "e", "evidence": {"ratio": float("nan"), "spans": [1.0, float("inf")]}}
    assert json.loads(emit.line(deep)) == {"event": "e", "evidence": {"ratio": None, "spans": [1.0, None]}}
    assert not math.isnan(rec["nan"] or 0.0)
