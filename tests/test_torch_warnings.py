"""torch's Python warnings raised while autoprof drives its own profiler (``session._torch_warnings``): each distinct one
becomes one ``autoprof.warning`` record (``reason: "torch_warning"``), never a plain line on the user's stderr; the one
that only concerns autoprof's own use (torch 2.10-2.11's "Profiler clears events at the end of each cycle", said once
per process at a profiler's prepare) is dropped, and given back to torch's once-per-process memory so that a profiler
of the user's still shows it to them, as torch alone would (before, autoprof's first window used it up)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest
from conftest import Records

from autoprof.live import session

QUIET = (
    "Warning: Profiler clears events at the end of each cycle.Only events from the current cycle will be reported."
    "To keep events across cycles, set acc_events=True."
)


def test_a_torch_warning_in_autoprofs_call_is_one_record_per_text(records: Records, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):
        with session._torch_warnings():
            warnings.warn("kineto said something about autoprof's window", UserWarning, stacklevel=1)
    with session._torch_warnings():
        warnings.warn("something else", UserWarning, stacklevel=1)
    got = [r["message"] for r in records.of("autoprof.warning", reason="torch_warning")]
    assert len(got) == 2 and "kineto said something" in got[0] and "something else" in got[1], got
    assert "kineto said" not in capsys.readouterr().err


def test_the_quiet_warning_is_dropped_and_given_back_to_torchs_once_per_process_memory(
    records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: set[str] = {"a warning the user's own profiler was shown"}
    fake = types.ModuleType("torch.profiler.profiler")
    fake._WARNINGS_SHOWN = shown  # type: ignore[attr-defined]

    def warn_once(msg: str) -> None:  # torch 2.11's _warn_once
        if msg not in shown:
            shown.add(msg)
            warnings.warn(msg, UserWarning, stacklevel=2)

    monkeypatch.setitem(sys.modules, "torch.profiler.profiler", fake)
    with session._torch_warnings():
        warn_once(QUIET)  # autoprof's prepare
    assert shown == {"a warning the user's own profiler was shown"}  # torch will say it at the user's profiler
    assert not records.of("autoprof.warning", reason="torch_warning")
    with pytest.warns(UserWarning, match="Profiler clears events"):
        warn_once(QUIET)  # the user's own profiler, later: torch says it, once
    assert QUIET in shown


def test_a_users_profiler_after_autoprofs_window_still_gets_torchs_own_warning(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys
            os.environ["KINETO_LOG_LEVEL"] = "6"
            import torch, autoprof
            from autoprof.live import calibrate
            calibrate.CALIBRATION.failed = True
            autoprof.configure(sink={str(tmp_path / "r.jsonl")!r}, background=False)
            step = autoprof.autoprof(skip_first=0, wait=0, warmup=1, active=1)(lambda x: (x @ x).sum())
            x = torch.randn(8, 8)
            if sys.argv[1] == "autoprof":
                for _ in range(3):
                    step(x)
            sys.stderr.write("USER PROFILER\\n")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                x + 1
            """
        )
    )

    def stderr(mode: str) -> tuple[str, str]:
        run = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        before, _, after = run.stderr.partition("USER PROFILER")
        return before, after

    if "Profiler clears events" not in stderr("plain")[1]:
        pytest.skip("this torch does not warn at a plain profiler's prepare (torch 2.10-2.11 do: CI's 2.11 leg runs this)")
    before, after = stderr("autoprof")
    assert "Profiler clears events" not in before, before  # autoprof's own window: nothing on stderr
    assert "Profiler clears events" in after, after  # the user's: torch's own warning, as without autoprof
