"""Hostile step numbers handed to ``Steps.begin`` (a live window: torch runs here, unlike tests/test_hostile_inputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records
from test_hostile_inputs import _HostileInt

import autoprof
from autoprof.live.instrument import Steps

# -- Steps.begin: the trainer's step number -----------------------------------------------------------------


def _steps_of_one_window(tmp_path: Path, step: object) -> list[Any]:
    autoprof.configure(sink=tmp_path / "r.jsonl", background=False)
    s = Steps("hostile.step", skip_first=0, wait=0, warmup=0, active=1, repeat=1)
    s.begin(step)
    x = torch.randn(16, 16)
    torch.matmul(x, x)
    s.end()
    (window,) = Records(tmp_path / "r.jsonl").of("autoprof.window")  # validated against the record schema
    steps: list[Any] = window["steps"]
    return steps


@pytest.mark.parametrize("step", [True, False, 2**63, 2**70, -1, 1.0, "7", _HostileInt(4)])
def test_a_step_number_that_is_not_an_int64_is_missing_and_counted(tmp_path: Path, step: object) -> None:
    """True is an int, and 2**70 one past the schema's int64: both were written as the window's steps."""
    steps = _steps_of_one_window(tmp_path, step)
    assert steps and all(type(n) is int and 0 <= n < 2**63 for n in steps)  # the count of steps so far


@pytest.mark.parametrize("step", [0, 41, 2**63 - 1])
def test_a_step_number_that_is_an_int64_is_the_windows(tmp_path: Path, step: int) -> None:
    assert _steps_of_one_window(tmp_path, step) == [step]
