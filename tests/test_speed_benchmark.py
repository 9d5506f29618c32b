"""benchmarks/speed.py, issue 37's one run of every speed row: it gathers each benchmark's target lines, says
which benchmark failed (exit 1), and refuses a --hta-python it cannot use before running anything (exit 2). The
benchmarks themselves are never timed here (fake ones stand in)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def speed(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("speed_under_test", BENCHMARKS / "speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)  # absolute: speed.py's folder joined with it is itself


def test_every_target_line_is_gathered_and_a_failed_benchmark_is_named(
    speed: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _fake(
        tmp_path,
        "good.py",
        """
        print("case   ns")
        print("idle target (<= 1000 ns added): met (167 ns)")
        print("idle decorator added: 206 ns in the quiet run's units (x0.81 here; goal <= 200 ns): NOT met")
        print("async idle ... (target <= 1.10: met)")
        print("findings: ['bound_regime']")  # no goal: not a target line
        """,
    )
    broken = _fake(tmp_path, "broken.py", "print('time target (<= 0.10 of HTA): met (0.05)')\nraise SystemExit(3)\n")
    silent = _fake(tmp_path, "silent.py", "print('nothing to say')\n")
    monkeypatch.setattr(speed, "benchmarks", lambda hta, quick: [(good, []), (broken, []), (silent, [])])
    monkeypatch.setattr(sys, "argv", ["speed.py"])
    assert speed.main() == 1
    out = capsys.readouterr().out
    table = out[out.index("its target line") :]
    assert "met     idle target (<= 1000 ns added): met (167 ns)" in table
    assert "NOT met idle decorator added: 206 ns" in table and "met     async idle" in table
    assert "findings:" not in table and "nothing to say" not in table
    assert "met     time target (<= 0.10 of HTA): met (0.05)" in table  # said, though its benchmark then failed
    assert f"no target line, or a failed run: {broken}, {silent}" in out
    assert "exit 3" in out


def test_the_four_rows_run_in_order_with_quick_arguments(speed: ModuleType) -> None:
    names = [name for name, _ in speed.benchmarks(None, False)]
    assert names == ["overhead.py", "window_stall.py", "analyze_window.py", "analyze_file.py"]
    assert all((BENCHMARKS / name).is_file() for name in names)
    quick = dict(speed.benchmarks("/py", True))
    assert quick["analyze_file.py"] == ["--events", "100000", "--hta-python", "/py"]
    assert quick["analyze_window.py"] == ["--events", "20000", "--rounds", "1"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("/nonexistent/python", "cannot run /nonexistent/python (FileNotFoundError"),
        ("/bin/true", "/bin/true does not import hta"),  # exits 0 for anything: not taken for a Python with hta
        ("", "an empty path"),
    ],
)
def test_an_unusable_hta_python_is_refused_before_anything_runs(
    speed: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str, said: str
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(speed, "run", lambda script, args: ran.append(script))
    monkeypatch.setattr(sys, "argv", ["speed.py", f"--hta-python={value}"])
    with pytest.raises(SystemExit) as exit_:
        speed.main()
    assert exit_.value.code == 2 and ran == []
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("speed.py: error: --hta-python: ") and said in line
