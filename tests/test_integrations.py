"""The trainer integrations (issue 24): ``autoprof.live.instrument.Steps`` on its own, then Lightning and the Hugging Face
Trainer for real (the examples, run as a user runs them: a subprocess each, records in a sink file)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, Records, validate_record

import autoprof
from autoprof.config import ConfigError
from autoprof.live.instrument import Steps, torch_release

# -- Steps: a loop autoprof does not call ----------------------------------------------------------------


def _work(n: int = 32) -> torch.Tensor:
    x = torch.randn(n, n)
    return torch.add(torch.matmul(x, x), 1.0)


def test_steps_drive_the_schedule_with_the_trainers_numbers_and_sections(tmp_path: Path) -> None:
    autoprof.configure(sink=tmp_path / "r.jsonl", background=False)
    steps = Steps("loop.step", framework="lightning", skip_first=1, wait=0, warmup=1, active=2, repeat=1)
    for k in range(6):
        steps.begin(100 + k)
        steps.enter("forward")
        _work()
        steps.leave("forward")
        steps.enter("optimizer")
        _work()
        steps.end()  # "optimizer" is left open: end() closes it
    recs = Records(tmp_path / "r.jsonl")
    (window,) = recs.of("autoprof.window")
    assert window["target"] == "loop.step" and window["framework"] == "lightning"
    assert window["steps"] == [102, 103]  # the trainer's numbers, not autoprof's count
    assert window["calls_total"] == 4
    assert {s["name"]: s["calls"] for s in window["sections"]} == {"forward": 2, "optimizer": 2}
    findings = recs.of("autoprof.finding")
    assert findings and all(f["framework"] == "lightning" for f in findings)
    assert "bound_regime" in {f["rule"] for f in findings}


def test_a_decorated_function_inside_a_driven_step_is_an_annotation_not_a_target(tmp_path: Path) -> None:
    autoprof.configure(sink=tmp_path / "r.jsonl", background=False)

    @autoprof.autoprof(name="inner", skip_first=0, wait=0, warmup=0, active=1, repeat=1)
    def inner() -> torch.Tensor:
        return _work()

    steps = Steps("outer", skip_first=0, wait=0, warmup=1, active=2, repeat=1)
    for k in range(4):
        steps.begin(k)
        inner()
        steps.end()
    windows = Records(tmp_path / "r.jsonl").of("autoprof.window")
    assert [w["target"] for w in windows] == ["outer"]
    assert "framework" not in windows[0]  # only an integration's target says which


def test_a_step_whose_end_was_missed_is_ended_by_the_next_begin(tmp_path: Path) -> None:
    autoprof.configure(sink=tmp_path / "r.jsonl", background=False)
    steps = Steps("s", skip_first=0, wait=0, warmup=0, active=3, repeat=1)
    for k in range(3):
        steps.begin(k)
        steps.enter("phase")
        _work()  # no end(): the trainer raised, say, and the user's loop went on
    steps.end()
    assert not steps.in_step
    (window,) = Records(tmp_path / "r.jsonl").of("autoprof.window")
    assert window["steps"] == [0, 1, 2]
    assert {s["name"]: s["calls"] for s in window["sections"]} == {"phase": 3}
    steps.end()  # an end without a step changes nothing


def test_steps_options_are_checked_once_with_one_line() -> None:
    with pytest.raises(ConfigError, match="unknown autoprof option"):
        Steps("s", every=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="active"):
        Steps("s", active=0)


def test_integration_options_take_autoprofs_keywords(tmp_path: Path) -> None:
    from autoprof.config import SWITCH
    from autoprof.integrations import split_options

    schedule = split_options({"warmup": 2, "trace_dir": str(tmp_path), "ranks": [1, 0]})
    assert schedule == {"warmup": 2}
    assert SWITCH.config.trace_dir == str(tmp_path) and SWITCH.config.ranks == (0, 1)
    before = SWITCH.config
    with pytest.raises(ConfigError, match="unknown autoprof option"):
        split_options({"warmpu": 2, "trace_dir": "elsewhere"})
    with pytest.raises(ConfigError):
        split_options({"active": -1, "trace_dir": "elsewhere"})
    assert SWITCH.config is before  # nothing changed


@pytest.mark.parametrize(
    ("module", "cls", "watch"),
    [
        ("lightning", "AutoprofProfiler", "_watch_entry"),
        ("lightning", "AutoprofCallback", "_watch_entry"),
        ("transformers", "AutoprofCallback", "_watch_train"),
    ],
)
def test_an_integration_that_refuses_or_fails_changes_no_process_wide_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, cls: str, watch: str
) -> None:
    import importlib

    from autoprof.config import SWITCH

    mod = importlib.import_module(f"autoprof.integrations.{module}")
    integration = getattr(mod, cls)
    before = SWITCH.config
    for bad in ({"active": 0}, {"trigger_factor": 0.5}, {"sink": ""}, {"every": 3}):
        with pytest.raises(ConfigError):
            integration(trace_dir=str(tmp_path / "elsewhere"), ranks=[0], **bad)
        assert SWITCH.config is before, bad
    # every option checked, and what else the constructor does (watching the trainer's entry point) done, before any
    # option is applied: a constructor that fails after the check leaves the configuration as it was too

    def broken() -> None:
        raise RuntimeError("cannot watch")

    monkeypatch.setattr(mod, watch, broken)
    with pytest.raises(RuntimeError, match="cannot watch"):
        integration(trace_dir=str(tmp_path / "elsewhere"), warmup=2)
    assert SWITCH.config is before
    monkeypatch.undo()
    integration(trace_dir=str(tmp_path / "here"), warmup=2)
    assert SWITCH.config.trace_dir == str(tmp_path / "here")


@pytest.mark.parametrize(("module", "extra"), [("lightning", "lightning"), ("transformers", "transformers")])
def test_an_integration_without_its_package_says_which_extra_to_install(module: str, extra: str) -> None:
    blocked = ["lightning", "lightning.pytorch", "pytorch_lightning"] if module == "lightning" else ["transformers"]
    code = f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\nimport autoprof.integrations.{module}\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: this autoprof integration needs") and f"pip install 'autoprof[{extra}]'" in last
    # and autoprof itself never needs them
    plain = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked) + "import autoprof, autoprof.live.instrument\n"
    assert subprocess.run([sys.executable, "-c", plain], env=_env(), timeout=120).returncode == 0


# -- the real trainers ---------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    e.update(PYTHONPATH=str(REPO) + os.pathsep + e.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    return e


def _run_example(tmp_path: Path, script: str, *args: str) -> list[dict[str, Any]]:
    sink = tmp_path / "records.jsonl"
    cmd = [sys.executable, str(REPO / "examples" / script), "--sink", str(sink), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    recs = [json.loads(line) for line in sink.read_text().splitlines()]
    for r in recs:
        validate_record(r)
    errors = [r for r in recs if r["event"] == "autoprof.error"]
    assert not errors, errors
    return recs


def _windows(recs: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    return [r for r in recs if r["event"] == "autoprof.window" and r["target"] == target]


def _rules(recs: list[dict[str, Any]], target: str) -> dict[str, str]:
    return {r["rule"]: r["verdict"] for r in recs if r["event"] == "autoprof.finding" and r["target"] == target}


@pytest.mark.slow
def test_lightning_profiler_steps_are_optimizer_steps_with_lightnings_actions_as_sections(tmp_path: Path) -> None:
    recs = _run_example(tmp_path, "lightning_trainer.py", "--accumulate", "2")
    (window,) = _windows(recs, "Regressor.training_step")
    assert window["framework"] == "lightning"
    assert window["steps"] == [2, 3, 4]  # trainer.global_step: skip 1 (step 0), warm up 1 (step 1), record 3
    assert window["calls_total"] == 5  # optimizer steps, not micro-batches
    sections = {s["name"]: s["calls"] for s in window["sections"]}
    assert sections["run_training_batch"] == 6  # two micro-batches a step
    assert sections["[LightningModule]Regressor.optimizer_step"] == 3  # one optimizer step a step
    assert sections["[Strategy]SingleDeviceStrategy.backward"] == 6
    assert sections["[_TrainingEpochLoop].train_dataloader_next"] == 6  # fetching the data is in the step
    assert "bound_regime" in _rules(recs, "Regressor.training_step")
    validation = _windows(recs, "Regressor.validation_step")
    assert validation and validation[0]["framework"] == "lightning"
    assert "[Strategy]SingleDeviceStrategy.validation_step" in {s["name"] for s in validation[0]["sections"]}


@pytest.mark.slow
def test_lightning_callback_under_torch_compile(tmp_path: Path) -> None:
    recs = _run_example(tmp_path, "lightning_trainer.py", "--callback", "--compile")
    (window,) = _windows(recs, "Regressor.training_step")
    assert window["framework"] == "lightning" and window["steps"] == [2, 3, 4]
    sections = {s["name"]: s["calls"] for s in window["sections"]}
    assert {"training_step", "backward", "optimizer_step"} <= set(sections)
    assert sections["optimizer_step"] == 3
    rules = _rules(recs, "Regressor.training_step")
    assert "bound_regime" in rules
    assert "compile_overhead" in rules  # the compiled model's regions were read as such


@pytest.mark.slow
def test_lightning_ddp_on_two_cpu_ranks(tmp_path: Path) -> None:
    recs = _run_example(tmp_path, "lightning_trainer.py", "--devices", "2")
    windows = {r["rank"]: r for r in _windows(recs, "Regressor.training_step")}
    assert set(windows) == {0, 1}
    assert all(w["world_size"] == 2 and w["steps"] == [2, 3, 4] for w in windows.values())
    assert "[Strategy]DDPStrategy.backward" in {s["name"] for s in windows[0]["sections"]}
    regimes = {r["rank"] for r in recs if r.get("rule") == "bound_regime"}
    assert regimes == {0, 1}
    assert [r["rank"] for r in recs if r.get("rule") == "straggler_ranks"] == [0]  # compared across ranks, once


@pytest.mark.slow
def test_hf_trainer_callback_counts_optimizer_steps_under_gradient_accumulation(tmp_path: Path) -> None:
    recs = _run_example(tmp_path, "hf_trainer.py", "--accumulate", "2", "--trace-dir", str(tmp_path / "traces"))
    (window,) = _windows(recs, "GPT2LMHeadModel.training_step")
    assert window["framework"] == "transformers"
    assert window["steps"] == [2, 3, 4]  # state.global_step
    assert window["calls_total"] == 5  # optimizer steps, not micro-batches
    sections = {s["name"]: s["calls"] for s in window["sections"]}
    assert sections == {"forward_backward": 3, "optimizer_step": 3, "after_optimizer_step": 3}
    # two micro-batches a step: the model's forward ran twice in each recorded step (its two embeddings each time)
    with gzip.open(window["trace_path"], "rt") as f:
        events = json.load(f)["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "aten::embedding" and e.get("ph") == "X") == 2 * 2 * 3
    assert "bound_regime" in _rules(recs, "GPT2LMHeadModel.training_step")


@pytest.mark.slow
@pytest.mark.skipif(
    (torch_release(torch.__version__) or (99, 0)) < (2, 5),
    reason="torch 2.4's dynamo cannot compile transformers' GPT-2 masks (fails the same without autoprof: "
    "'more than one element of the written-to tensor refers to a single memory location')",
)
def test_hf_trainer_callback_under_torch_compile(tmp_path: Path) -> None:
    recs = _run_example(tmp_path, "hf_trainer.py", "--compile")
    (window,) = _windows(recs, "GPT2LMHeadModel.training_step")
    assert window["steps"] == [2, 3, 4] and window["calls_total"] == 5
    rules = _rules(recs, "GPT2LMHeadModel.training_step")
    assert "bound_regime" in rules and "compile_overhead" in rules
