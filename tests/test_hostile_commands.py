"""The commands against a hostile user (issues 8-11): empty paths, gates that cannot be evaluated, a report that
would overwrite its input or leave temporary files, hostile names, loads that run out of memory, and the numeric
options' own messages. Small synthetic traces, the commands run in this process (``cli.main``)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import sys
import types
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any, ClassVar

import pytest
from synth import Synth

import autoprof
from autoprof import cli
from autoprof.analysis import _fleet, engine
from autoprof.config import Config
from autoprof.render import htmlreport

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

# -- traces ------------------------------------------------------------------------------------------------


def _doc(steps: bool = True, op_us: float = 1_000, step_us: float = 10_000, name: str = "aten::mm", n: int = 3) -> dict[str, Any]:
    """``n`` CPU steps of ``step_us``, each with one op of ``op_us`` (with or without the ProfilerStep#N spans)."""
    s = Synth(gpu=None)
    for k in range(n):
        t0 = k * step_us
        if steps:
            s.step(k, t0, step_us)
        s.op(name, t0 + 100, op_us, dims=[[64, 64], [64, 64]], types=["float", "float"])
    return {"traceEvents": s.events}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    else:
        path.write_text(json.dumps(doc))
    return path


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """``autoprof ARGV`` in this process: its status, stdout, and stderr's lines."""
    capsys.readouterr()
    code = cli.main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err.splitlines()


def _listing(*dirs: Path) -> dict[str, list[str]]:
    return {str(d): sorted(os.listdir(d)) for d in dirs}


# -- 8: an empty path or URL names nothing ---------------------------------------------------------------


def test_an_empty_path_or_url_is_bad_input_never_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # the current directory holds traces: '' must not read them
    good = _write(tmp_path / "good.json", _doc())
    _write(tmp_path / "slow.json", _doc(op_us=9_000))

    for empty in ("", "file://"):
        code, out, err = _main(capsys, "diff", empty, empty, "--fail-on-regression", "5")
        assert code == 2 and out == ""
        assert len(err) == 1 and err[0].startswith(f"autoprof: {empty or repr('')}: ") and "names no file" in err[0], err

    code, out, err = _main(capsys, "analyze", "--jobs", "1", "", str(good), "file://", "memory://")
    assert code == 2
    assert out.count("good.json") == 1 and "slow.json" not in out  # the good input analyzed, the directory never walked
    assert [line.split(": ")[1] for line in err] == ["''", "file://", "memory://"], err

    page = tmp_path / "r.html"
    code, _, err = _main(capsys, "report", "", str(good), "-o", str(page))
    assert code == 2 and len(err) == 2 and err[0].startswith("autoprof: '': ") and "wrote" in err[1]
    assert "slow.json" not in page.read_text()

    for call in (
        lambda: autoprof.analyze(""),
        lambda: autoprof.analyze(["file://"]),
        lambda: autoprof.diff("", good),
        lambda: autoprof.diff(good, "file://"),
        lambda: autoprof.report("", tmp_path / "api.html"),
    ):
        with pytest.raises(autoprof.TraceError, match="names no file"):
            call()
    assert not (tmp_path / "api.html").exists()


# -- 9: a gate that cannot be evaluated does not pass ------------------------------------------------------


def test_a_regression_gate_without_steps_on_a_side_exits_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _write(tmp_path / "base.json", _doc(n=6))
    slow_no_steps = _write(tmp_path / "new.json", _doc(steps=False, op_us=10_000, n=6))  # 10x slower ops, no step marks
    slow = _write(tmp_path / "slow.json", _doc(op_us=10_000, step_us=20_000, n=6))  # 6 steps a side: an interval

    for args in ([str(base), str(slow_no_steps)], ["--json", str(base), str(slow_no_steps)], [str(slow_no_steps), str(base)]):
        code, out, err = _main(capsys, "diff", *args, "--fail-on-regression", "5")
        assert code == 2, (args, out, err)
        assert len(err) == 1 and "--fail-on-regression 5 cannot be evaluated" in err[0] and "has no steps" in err[0]
        assert str(slow_no_steps) in err[0]
        assert out  # the comparison itself is still shown
    code, out, err = _main(capsys, "diff", str(base), str(slow_no_steps))
    assert code == 0 and err == []  # no gate asked: nothing to fail
    assert "not compared" in out and "no change" not in out
    # where steps exist the gate still decides: 10x slower fails it
    assert _main(capsys, "diff", str(base), str(slow), "--fail-on-regression", "5")[0] == 1
    assert _main(capsys, "diff", str(base), str(base), "--fail-on-regression", "5")[0] == 0


def test_empty_inputs_never_pass_a_gate_or_read_as_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    for gates in ([], ["--fail-on-regression", "5"], ["--fail-on-new", "info"]):
        code, out, err = _main(capsys, "diff", str(one), str(two), *gates)
        assert code == 2 and "no change" not in out
        assert len(err) == 1 and str(one) in err[0] and "no trace files" in err[0]

    empty: dict[str, Any] = {"traceEvents": []}  # a readable trace with nothing in it
    _write(one / "rank0.json", empty)
    _write(two / "rank0.json", empty)
    for gate, why in ((["--fail-on-regression", "5"], "has steps"), (["--fail-on-new", "info"], "has no events")):
        code, out, err = _main(capsys, "diff", str(one), str(two), *gate)
        assert code == 2 and "no change" not in out, (gate, out, err)
        assert len(err) == 1 and f"{gate[0]} {gate[1]} cannot be evaluated" in err[0] and why in err[0], err
    code, out, _ = _main(capsys, "diff", str(one), str(two))
    assert "no change" not in out and "has no events" in out


def test_a_new_findings_gate_with_a_rule_that_failed_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    @autoprof.rule("hostile.broken", verdicts=("never",))
    def broken(trace: Any, config: Any) -> list[autoprof.Finding]:
        raise RuntimeError("a bug in my rule")

    base = _write(tmp_path / "base.json", _doc())
    autoprof.configure(rules=[broken])  # what the command reads (reset after each test)
    code, out, err = _main(capsys, "diff", str(base), str(base), "--fail-on-new", "warning")
    assert code == 2 and "a bug in my rule" in out  # the failure is shown, and the gate does not pass
    assert len(err) == 1 and "--fail-on-new warning cannot be evaluated" in err[0] and "hostile.broken" in err[0]
    (d,) = autoprof.diff(base, base, config=Config().replace(rules=(broken,)))
    assert d.findings_problem is not None and "hostile.broken failed" in d.findings_problem and not d.unchanged


# -- 10: the report's output, its inputs, its names --------------------------------------------------------


def test_a_report_never_overwrites_one_of_its_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _write(tmp_path / "x.json.gz", _doc())
    run = tmp_path / "run"
    run.mkdir()
    inside = _write(run / "rank0.json", _doc())
    (tmp_path / "alias.html").symlink_to(trace)
    os.link(inside, tmp_path / "hard.json")
    before = {p: p.read_bytes() for p in (trace, inside)}
    listing = _listing(tmp_path, run)

    for inputs, out in (
        ([trace], trace),  # the same path
        ([trace], tmp_path / "alias.html"),  # a link to it
        ([run], inside),  # found inside an input directory
        ([run], tmp_path / "hard.json"),  # another name of it (os.path.samefile)
        ([f"file://{trace}"], trace),
    ):
        code, _, err = _main(capsys, "report", *map(str, inputs), "-o", str(out))
        assert code == 2, (inputs, out, err)
        assert len(err) == 1 and str(out) in err[0] and "input" in err[0] and "overwrite" in err[0], err
        with pytest.raises(htmlreport.OutputError):
            autoprof.report(inputs, out)
    assert {p: p.read_bytes() for p in before} == before
    assert _listing(tmp_path, run) == listing


def test_a_report_that_cannot_be_written_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _write(tmp_path / "t.json", _doc())
    outdir = tmp_path / "out"
    outdir.mkdir()
    monkeypatch.chdir(tmp_path)
    listing = _listing(tmp_path, outdir)

    code, _, err = _main(capsys, "report", str(trace), "-o", str(outdir))
    assert code == 2 and len(err) == 1 and str(outdir) in err[0] and "is a directory" in err[0], err
    code, _, err = _main(capsys, "report", str(trace), "-o", "")
    assert code == 2 and len(err) == 1 and "output path is empty" in err[0], err
    assert _listing(tmp_path, outdir) == listing

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)  # the last step of writing the page fails
    with pytest.raises(OSError, match="No space left"):
        htmlreport.write([trace], outdir / "r.html")
    monkeypatch.undo()
    assert _listing(tmp_path, outdir) == listing


def test_a_report_names_every_input_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = []
    for k in range(5):
        p = tmp_path / f"bad{k}.json"
        p.write_text("{not json")
        bad.append(p)
    page = tmp_path / "r.html"
    code, _, err = _main(capsys, "report", *map(str, bad), "-o", str(page))
    assert code == 2 and not page.exists()
    assert len(err) == 5 and [line.split(": ")[1] for line in err] == [str(p) for p in bad], err
    with pytest.raises(htmlreport.NoReadableInputError, match="4 more") as caught:
        autoprof.report(bad, page)
    assert len(caught.value.errors) == 5


def test_a_hostile_name_costs_a_capped_length_on_the_page(tmp_path: Path) -> None:
    def doc(op: str, kernel: str, host: str) -> dict[str, Any]:
        s = Synth()
        for k in range(2):
            t0 = k * 2_000
            s.step(k, t0, 2_000)
            s.op(op, t0 + 10, 50)
            s.launch(kernel, t0 + 20, t0 + 100, 200)
            s.op(host, t0 + 400, 300)  # the host is busy here while the device idles: the gap's label
            s.launch("elementwise_kernel", t0 + 700, t0 + 800, 50)
        return {"traceEvents": s.events, **s.meta}

    n = 100_000
    plain = htmlreport.write([_write(tmp_path / "plain.json", doc("aten::op", "gemm", "aten::nonzero"))], tmp_path / "p.html")
    hostile = [_write(tmp_path / "hostile.json", doc("aten::" + "q" * n, "k" * n, "h" * n))]
    (rep,) = htmlreport.write(hostile, tmp_path / "h.html")
    assert rep.error is None and rep.page and rep.page.kernels and rep.page.strip and plain[0].page and plain[0].page.kernels
    page = (tmp_path / "h.html").read_text()
    cap = 200  # what one name may cost
    for ch in "qkh":
        assert ch * cap not in page  # nowhere whole, in no table, hover text or label
        assert ch * (cap // 2) in page  # but shown, cut
    assert "…" in page
    growth = len(page) - len((tmp_path / "p.html").read_text())
    assert growth < 20 * cap * 3  # a few occurrences of each name at the cap, not 100k characters each
    assert all(len(o["name"]) <= cap for o in rep.page.top_ops) and all(len(k["name"]) <= cap for k in rep.page.kernels)
    # a finding whose message names such an op (a user's rule, say) is cut the same way
    rep.findings.append(dataclasses.replace(rep.findings[0], message=f"slow: {'m' * n} here", advice="a " + "v" * n))
    again = htmlreport.render([rep])
    assert "m" * cap not in again and "v" * cap not in again and "m" * (cap // 2) in again


def test_a_rule_that_fails_in_a_report_is_on_stderr_and_on_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hostile_rules.py").write_text(
        "import autoprof\n"
        "@autoprof.rule('hostile.broken', verdicts=('never',))\n"
        "def broken(trace, config):\n"
        "    raise RuntimeError('a bug in my rule')\n"
        "RULES = [broken]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("hostile_rules", None)
    trace = _write(tmp_path / "t.json", _doc())
    page = tmp_path / "r.html"
    code, _, err = _main(capsys, "report", str(trace), "-o", str(page), "--rules", "hostile_rules:RULES")
    assert code == 0
    assert f"autoprof: {trace}: rule hostile.broken failed: RuntimeError: a bug in my rule" in err, err
    text = page.read_text()
    assert "rule hostile.broken failed: RuntimeError: a bug in my rule" in text and "rule-failure" in text


# -- 11: one file's failure, the workers, the scheduler, the numeric options --------------------------------


def test_jobs_1_a_load_out_of_memory_is_that_files_line_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = _write(tmp_path / "bomb.json.gz", _doc())
    good = _write(tmp_path / "good.json", _doc())
    real = engine._load

    def load(f: Any, workers: int | None) -> Any:
        if str(f) == str(bomb):
            raise MemoryError
        return real(f, workers)

    monkeypatch.setattr(engine, "_load", load)
    code, out, err = _main(capsys, "analyze", "--jobs", "1", str(bomb), str(good))
    assert code == 2 and str(good) in out and "bound_regime" in out
    assert len(err) == 1 and err[0].startswith(f"autoprof: {bomb}: ") and "out of memory" in err[0], err

    code, _, err = _main(capsys, "report", "--jobs", "1", str(bomb), str(good), "-o", str(tmp_path / "r.html"))
    assert code == 2 and (tmp_path / "r.html").exists()
    assert err[0].startswith(f"autoprof: {bomb}: ") and "MemoryError" in err[0], err
    code, _, err = _main(capsys, "diff", str(bomb), str(good))
    assert code == 2 and len(err) == 1 and err[0].startswith(f"autoprof: {bomb}: "), err


class _Inline(Executor):
    """A stand-in for the local pool: records its size and runs each task here."""

    sizes: ClassVar[list[int]] = []

    def __init__(self, n: int) -> None:
        _Inline.sizes.append(n)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future

    def terminate(self) -> None:
        pass


def test_jobs_are_capped_by_the_cpus_and_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [_write(tmp_path / f"rank{k}.json", _doc()) for k in range(5)]
    monkeypatch.setattr(_fleet, "usable_cpus", lambda: 3)
    monkeypatch.setattr(_fleet, "FilePool", _Inline)
    _Inline.sizes = []
    for jobs, paths in ((1000, files), (1000, files[:2]), (2, files)):
        results = list(engine.iter_files(paths, jobs=jobs))
        assert [r.error for r in results] == [None] * len(paths)
    assert _Inline.sizes == [3, 2, 2]  # min(jobs, CPUs, files)
    code, out, _ = _main(capsys, "analyze", "--help")
    assert code == 0 and "usable CPUs" in " ".join(out.split()) and "no more than the files" in " ".join(out.split())


def test_an_unreachable_scheduler_is_given_up_after_its_timeout_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[float] = []

    def client(address: str, timeout: float) -> Any:
        asked.append(timeout)
        raise OSError(f"Timed out trying to connect to {address} after {timeout} s")

    monkeypatch.setitem(sys.modules, "distributed", types.SimpleNamespace(Client=client))
    good = _write(tmp_path / "t.json", _doc())
    address = "tcp://10.255.255.1:8786"
    code, _, err = _main(capsys, "analyze", "--scheduler", address, str(good))
    assert code == 2 and asked == [10]  # the default: 10 s, not 30
    assert len(err) == 1 and address in err[0] and "within 10 s" in err[0], err
    code, _, err = _main(capsys, "analyze", "--scheduler", address, "--scheduler-timeout", "0.5", str(good))
    assert code == 2 and asked[-1] == 0.5 and "within 0.5 s" in err[0], err


@pytest.mark.parametrize(
    "argv,option,what",
    [
        (["diff", "--top", "-1", "a", "b"], "--top", "ops and kernels"),
        (["diff", "--top", "0", "a", "b"], "--top", "ops and kernels"),
        (["analyze", "--jobs", "0", "a"], "--jobs", "files analyzed in parallel"),
        (["analyze", "--workers", "-1", "a"], "--workers", "helper processes"),
        (["report", "--workers", "many", "a"], "--workers", "helper processes"),
        (["analyze", "--scheduler-timeout", "0", "a"], "--scheduler-timeout", "seconds"),
        (["diff", "--fail-on-regression", "-3", "a", "b"], "--fail-on-regression", "percentage"),
    ],
)
def test_each_numeric_option_has_its_own_message(argv: list[str], option: str, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, *argv)
    bad = argv[argv.index(option) + 1]
    assert code == 2
    assert f"argument {option}: expected " in err[-1]  # argparse names the option, the validator says what it wants
    assert what in err[-1] and f"got {bad!r}" in err[-1], err[-1]


# -- issue 45, item 12: the Python API refuses what the command line refuses, in one line, before any work ------------


@pytest.mark.parametrize(
    "call,option",
    [
        ("analyze", {"workers": "2"}),
        ("analyze", {"jobs": "2"}),
        ("analyze", {"jobs": 0}),
        ("analyze", {"workers": -1}),
        ("analyze", {"workers": True}),
        ("analyze", {"workers": 2.0}),
        ("analyze", {"config": {"top_ops": 3}}),
        ("analyze", {"executor": "dask"}),
        ("report", {"workers": "2"}),
        ("report", {"jobs": "2"}),
        ("diff", {"workers": "2"}),
        ("diff", {"jobs": "2"}),
        ("diff", {"top": "5"}),
        ("diff", {"top": 0}),
        ("diff", {"confidence": "0.9"}),
        ("diff", {"confidence": 0.3}),
    ],
)
def test_the_python_api_refuses_a_bad_option_in_one_line_naming_it_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, option: dict[str, Any]
) -> None:
    good = _write(tmp_path / "good.json", _doc())
    read: list[str] = []
    real = engine.analyze_one
    monkeypatch.setattr(engine, "analyze_one", lambda path, *a, **k: read.append(path) or real(path, *a, **k))
    (name,) = option
    with pytest.raises(ValueError) as e:
        if call == "analyze":
            autoprof.analyze(good, **option)
        elif call == "report":
            autoprof.report(good, tmp_path / "page.html", **option)
        else:
            autoprof.diff(good, good, **option)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{name} must be "), text
    assert not read and not (tmp_path / "page.html").exists()  # before any work, and no trace blamed
    # the same values, right, work
    if call == "analyze":
        assert isinstance(autoprof.analyze(good, workers=0, jobs=1), list)
    elif call == "diff":
        assert len(autoprof.diff(good, good, workers=0, jobs=1, top=5, confidence=0.9)) == 1
