"""The moved modules against a hostile user: every way of reaching a former path (attribute access on the package,
the import styles, pickles, ``mock.patch`` by string, a user's rule module, two threads at once), and autoprof itself
never going through one (``-W error::DeprecationWarning`` over the live side, the pipeline's workers and the CLI)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from synth import Synth

import autoprof

REPO = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def _run(code: str, *args: str, cwd: Path = REPO, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=_env(**env),
    )


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoprof", *args], capture_output=True, text=True, cwd=cwd, timeout=60, env=_env(**env))


def _trace(path: Path) -> Path:
    s = Synth()
    t = 0.0
    for k in range(4):
        s.step(k, t, 1000)
        s.op("aten::mm", t + 10, 300, dims=[[64, 64], [64, 64]], types=["float", "float"])
        s.launch("sgemm_kernel", t + 20, t + 40, 200)
        t += 1000
    path.write_text(json.dumps({"traceEvents": s.events, **s.meta}))
    return path


def test_a_former_path_is_an_attribute_of_the_package_after_a_bare_import() -> None:
    """Before the move ``import autoprof`` was enough for ``autoprof.compare.Diff`` (the README then) and
    ``autoprof.engine.analyze_files``: the package imported them. The alias must keep that, not only ``import
    autoprof.compare``."""
    proc = _run(
        """
        import importlib, json, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        import autoprof
        out = {}
        for old, new in autoprof.MOVED.items():
            try:
                out[old] = getattr(autoprof, old.rpartition(".")[2]) is importlib.import_module(new)
            except AttributeError as e:
                out[old] = str(e)
        print(json.dumps(out))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    broken = {old: got for old, got in seen.items() if got is not True}
    assert broken == {}, broken


def test_import_styles_of_a_former_path_reach_the_moved_module() -> None:
    proc = _run(
        """
        import importlib, importlib.util, inspect, json, pkgutil, sys, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        import autoprof
        from autoprof.analysis import compare, drift, engine
        from autoprof.live import schedule
        out = {}
        from autoprof import engine as e1
        import autoprof.compare as c1
        from autoprof.engine import analyze
        out["from_import"] = e1 is engine and c1 is compare and analyze is autoprof.analyze
        out["import_module"] = importlib.import_module("autoprof.ranks") is importlib.import_module("autoprof.analysis.ranks")
        spec = importlib.util.find_spec("autoprof.drift")  # not imported yet under its former name
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out["manual_load"] = module is drift and drift.__spec__.name == "autoprof.analysis.drift"
        import autoprof.schedule as s_old
        out["reload"] = importlib.reload(s_old) is schedule and schedule.__spec__.name == "autoprof.live.schedule"
        out["after"] = importlib.util.find_spec("autoprof.schedule").name == "autoprof.live.schedule"
        out["resolve_name"] = pkgutil.resolve_name("autoprof.compare:Diff") is compare.Diff
        out["getmodule"] = inspect.getmodule(compare.Diff) is compare and compare.__name__ == "autoprof.analysis.compare"
        print(json.dumps(out))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen == dict.fromkeys(seen, True) and len(seen) == 7, seen


@pytest.mark.offline
def test_pickles_of_the_former_paths_load_and_new_ones_name_the_new_path(tmp_path: Path) -> None:
    from autoprof.analysis import compare, engine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, name, obj in [
            ("autoprof.engine", "Analysis", engine.Analysis),
            ("autoprof.engine", "FileResult", engine.Analysis),
            ("autoprof.compare", "Diff", compare.Diff),
        ]:
            assert pickle.loads(f"c{old}\n{name}\n.".encode()) is obj
        (result,) = engine.analyze_files([str(_trace(tmp_path / "a.json"))], None, jobs=1)
        assert result.error is None and result.findings
        data = pickle.dumps(result, protocol=2)
        assert b"autoprof.analysis.engine\n" in data
        assert not [m for m in autoprof.MOVED if f"{m}\n".encode() in data]
        again = pickle.loads(data.replace(b"autoprof.analysis.engine\n", b"autoprof.engine\n"))
    assert type(again) is engine.Analysis and again.path == result.path and again.findings == result.findings


def test_every_class_and_function_of_a_moved_module_names_its_new_module() -> None:
    """What pickle, FilePool's calls and ``inspect`` write down is the new path, never a deprecated one."""
    wrong = []
    for new in autoprof.MOVED.values():
        module = importlib.import_module(new)
        for name, value in vars(module).items():
            if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ in autoprof.MOVED:
                wrong.append(f"{new}.{name}: {value.__module__}")
            if inspect.isclass(value) and value.__module__ == new:
                assert pickle.loads(pickle.dumps(value)) is value
    assert wrong == []


@pytest.mark.offline
def test_autoprof_offline_never_goes_through_a_former_path(tmp_path: Path) -> None:
    """With DeprecationWarning an error everywhere (workers included, through PYTHONWARNINGS): the pipeline on two
    fresh worker processes, the page, and every command."""
    a, b = _trace(tmp_path / "a.json"), _trace(tmp_path / "b.json")
    error = dict(PYTHONWARNINGS="error::DeprecationWarning")
    proc = _run(
        """
        import sys, autoprof
        findings = autoprof.analyze(sys.argv[1:3], jobs=2)
        assert findings, findings
        assert autoprof.report(sys.argv[1:3], sys.argv[3], jobs=2) == sys.argv[3]
        print([m for m in autoprof.MOVED if m in sys.modules])
        """,
        str(a),
        str(b),
        str(tmp_path / "r.html"),
        **error,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "[]"
    for args in (
        ["analyze", "--jobs", "2", "--json", "a.json", "b.json"],
        ["diff", "a.json", "b.json"],
        ["report", "-o", "r2.html", "a.json", "b.json"],
    ):
        cli = _cli(*args, cwd=tmp_path, **error)
        assert cli.returncode == 0, (args, cli.stderr[-2000:])
        assert "DeprecationWarning" not in cli.stderr, args
    assert (tmp_path / "r2.html").stat().st_size > 0


@pytest.mark.offline
def test_a_user_rule_module_on_the_documented_paths_runs_in_the_workers(tmp_path: Path) -> None:
    """docs/rules.md's API (``autoprof.rules``, ``autoprof.trace.model``) and the former ``autoprof.peaks``, imported by
    each worker of ``--jobs 2``."""
    (tmp_path / "myrules.py").write_text(
        textwrap.dedent(
            """
        import autoprof
        from autoprof import Finding
        from autoprof.rules import read_only
        from autoprof.trace.model import CPU_OP_CODE
        import autoprof.peaks as peaks

        @autoprof.rule("myteam.ops", verdicts=("seen",))
        def ops(trace, config):
            n = sum(1 for c in trace.h_cat if c == CPU_OP_CODE)
            return [Finding("myteam.ops", "seen", "info", f"{n} ops, {peaks.CPU_PEAK_NAME}", "none")]

        RULES = [ops]
        """
        )
    )
    _trace(tmp_path / "a.json")
    _trace(tmp_path / "b.json")
    cli = _cli("analyze", "--rules", "myrules:RULES", "--jobs", "2", "--json", "a.json", "b.json", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr[-2000:]
    records = [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")]
    mine = [r for r in records if r.get("rule") == "myteam.ops"]
    assert sorted(r["target"] for r in mine) == ["a.json", "b.json"], records
    assert all(r["message"].startswith("4 ops") for r in mine)


def test_live_side_under_error_warnings_and_mock_patch_by_former_path(tmp_path: Path) -> None:
    """``@autoprof`` on a small matmul records its window without touching a former path; then
    ``mock.patch("autoprof.instrument._now")`` patches the clock the wrappers read, and undoes it."""
    proc = _run(
        """
        import json, sys, time, warnings
        from unittest import mock
        warnings.simplefilter("error", DeprecationWarning)
        import torch, autoprof
        autoprof.configure(sink=sys.argv[1], background=False)

        @autoprof(name="plain", skip_first=0, wait=0, warmup=1, active=2, repeat=1)
        def f(x):
            return x @ x

        x = torch.ones(8, 8)
        for _ in range(4):
            f(x)
        assert autoprof.flush(30)
        loaded = [m for m in autoprof.MOVED if m in sys.modules]
        warnings.simplefilter("ignore", DeprecationWarning)
        calls = []
        real = time.perf_counter_ns
        with mock.patch("autoprof.instrument._now", side_effect=lambda: calls.append(1) or real()):
            @autoprof(name="patched", skip_first=0, wait=0, warmup=1, active=2, repeat=1)
            def g(x):
                return x @ x
            for _ in range(4):
                g(x)
            assert autoprof.flush(30)
        from autoprof.live import instrument
        windows = [json.loads(l) for l in open(sys.argv[1])]
        windows = {r["target"]: r["steps"] for r in windows if r["event"] == "autoprof.window"}
        print(json.dumps(dict(loaded=loaded, calls=len(calls), restored=instrument._now is real, windows=windows)))
        """,
        str(tmp_path / "records.jsonl"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["loaded"] == [] and seen["restored"] is True
    assert seen["calls"] > 0, "the patch by the former path did not reach the wrappers' clock"
    assert seen["windows"] == {"plain": [1, 2], "patched": [1, 2]}, seen


def test_two_threads_importing_different_former_paths_at_once() -> None:
    names = ["autoprof.instrument", "autoprof.session", "autoprof.window", "autoprof.schedule", "autoprof.peaks", "autoprof.htmlreport"]
    proc = _run(
        """
        import importlib, json, sys, threading, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        import autoprof
        names = sys.argv[1:]
        barrier = threading.Barrier(len(names))
        out = {}
        def go(name):
            barrier.wait()
            try:
                module = importlib.import_module(name)
                out[name] = module is importlib.import_module(autoprof.MOVED[name]) and module.__spec__.name == autoprof.MOVED[name]
            except BaseException as e:
                out[name] = repr(e)
        threads = [threading.Thread(target=go, args=(n,)) for n in names]
        for t in threads: t.start()
        for t in threads: t.join(30)
        print(json.dumps(dict(out=out, alive=[t.name for t in threads if t.is_alive()])))
        """,
        *names,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen == dict(out=dict.fromkeys(names, True), alive=[]), seen


@pytest.mark.offline
def test_reimporting_autoprof_keeps_one_alias_finder() -> None:
    """``importlib.reload(autoprof)`` or a test harness that drops ``autoprof*`` from ``sys.modules`` and imports it
    again: the guard ``isinstance(f, _Moved)`` sees the new class only, so each re-import appends another finder."""
    proc = _run(
        """
        import importlib, sys
        import autoprof
        importlib.reload(autoprof)
        for name in [n for n in sys.modules if n == "autoprof" or n.startswith("autoprof.")]:
            del sys.modules[name]
        import autoprof
        print(sum(type(f).__module__ == "autoprof" and type(f).__name__ == "_Moved" for f in sys.meta_path))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "1"
