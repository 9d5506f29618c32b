"""Catch the slow step inside the trainers (issue 35): a real small Lightning Trainer (its profiler and its callback)
and a real Hugging Face Trainer (a GPT-2 built from its config), on the CPU, whose batches turn slow part-way through
(a sleep in the dataset: the data path). ``trigger=True`` is passed as the integrations take options: a triggered
window opens, its record says why, the trainer's results are those of a run without autoprof, and the trainer's own
rhythm (a validation run every 10 steps inside ``fit``) is not taken for a slowdown."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records

from autoprof.config import SWITCH

pytestmark = pytest.mark.timing  # the trigger reads the steps' wall times: CI runs these alone

SLOW_FROM = 100  # the optimizer step whose batch is the first slow one (Lightning)


class _Pairs(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """(x, y) pairs; each sample sleeps ``delay`` s while :attr:`slow` (a slow disk, a decoder)."""

    slow = False

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def __len__(self) -> int:
        return 1 << 20  # never an epoch's end in these runs

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if _Pairs.slow and self.delay:
            time.sleep(self.delay)
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), torch.randn(1, generator=g)


# -- Lightning ---------------------------------------------------------------------------------------------------

try:
    import lightning.pytorch as pl
except ImportError:  # only the Lightning test needs it
    pl = None


def _lightning_run(autoprof_as: str | None, delay: float) -> dict[str, torch.Tensor]:
    """Train a small regressor for 112 optimizer steps with a validation run (4 batches) every 10 steps; the training
    batches turn slow at step ``SLOW_FROM``. ``autoprof_as``: "profiler", "callback" or None (no autoprof). Returns the
    trained weights."""
    from autoprof.integrations.lightning import AutoprofCallback, AutoprofProfiler

    class Regressor(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(16, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            time.sleep(0.003)  # a step of a few ms, as a real one
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            time.sleep(0.003)  # a validation run (4 steps) is then a gap of several training steps' time
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class TurnSlow(pl.Callback):  # type: ignore[misc,name-defined]
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            _Pairs.slow = trainer.global_step >= SLOW_FROM  # the next batch's samples are slow

    # the trigger's options are the integration's own: budget 25% so that the validation target (4 steps a run)
    # could trigger within this short run if its runs' gaps were taken for slow steps
    options = {"trigger": True, "trigger_budget": 0.25}
    profiler = AutoprofProfiler(**options) if autoprof_as == "profiler" else None
    callbacks = [TurnSlow()] + ([AutoprofCallback(**options)] if autoprof_as == "callback" else [])
    trainer = pl.Trainer(
        max_steps=SLOW_FROM + 12,
        accelerator="cpu",
        devices=1,
        profiler=profiler,
        callbacks=callbacks,
        limit_val_batches=4,
        val_check_interval=10,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    _Pairs.slow = False
    torch.manual_seed(0)
    module = Regressor()
    loader = torch.utils.data.DataLoader(_Pairs(delay), batch_size=4)
    trainer.fit(module, loader, torch.utils.data.DataLoader(_Pairs(), batch_size=4))
    _Pairs.slow = False
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


_REFERENCE: dict[str, dict[str, torch.Tensor]] = {}


def _reference(key: str, run: Any) -> dict[str, torch.Tensor]:
    """A run without autoprof (and without the sleeps, which change nothing but time), once per module."""
    if key not in _REFERENCE:
        _REFERENCE[key] = run()
    return _REFERENCE[key]


@pytest.mark.skipif(pl is None, reason="lightning is not installed")
@pytest.mark.parametrize("autoprof_as", ["profiler", "callback"])
def test_lightning_a_slow_data_path_opens_a_triggered_window(records: Records, autoprof_as: str) -> None:
    weights = _lightning_run(autoprof_as, delay=0.012)  # 4 samples of 12 ms: a step ~8x its usual few ms
    assert SWITCH.config.trigger is False  # the integration's targets trigger, not the whole process
    windows = records.of("autoprof.window", target="Regressor.training_step")
    assert [w["trigger"] is None for w in windows] == [True, False], [w["trigger"] for w in windows]
    triggered = windows[1]
    t = triggered["trigger"]
    # step 100's batch loads slowly: the profiler's step begins at the fetch (step 100 is slow), the callback's after
    # it (step 100's period ends with step 101's slow fetch); either way 100 and 101 are slow, asked for when 102 begins
    assert t["kind"] == "persistent" and t["step"] == SLOW_FROM + 1 and t["slow_steps"][-2:] == [SLOW_FROM, SLOW_FROM + 1], t
    assert t["ratio"] > 3 and 2 < t["median_ms"] < 40 and t["transient"] is False and t["period"] is None
    assert triggered["steps"] == [SLOW_FROM + 4, SLOW_FROM + 5, SLOW_FROM + 6]  # within three steps it warms up
    # slow in the window too (the last step by its wall time: the callback's ends before the next fetch)
    assert t["slow_steps_recorded"][:2] == triggered["steps"][:2]
    assert f"step {SLOW_FROM + 1} took" in t["message"]
    assert triggered["framework"] == "lightning" and triggered["rank"] == 0
    (regime,) = records.of("autoprof.finding", target="Regressor.training_step", rule="bound_regime", window=triggered["window"])
    assert regime["verdict"] == "input-bound", regime
    # the validation runs inside fit (every 10 steps) are their own target's steps: neither target took the gap
    # they leave in the other's steps for a recurring slowdown
    validation = records.of("autoprof.window", target="Regressor.validation_step")
    assert all(w["trigger"] is None for w in validation), [w["trigger"] for w in validation]
    # and the run trained exactly as without autoprof
    reference = _reference("lightning", lambda: _lightning_run(None, delay=0.0))
    assert all(torch.equal(weights[k], reference[k]) for k in reference)


# -- the Hugging Face Trainer --------------------------------------------------------------------------------------

try:
    import transformers
except ImportError:  # only the Hugging Face test needs it
    transformers = None
HF_SLOW_FROM = 40


class _Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Token ids for a causal LM; each sample sleeps ``delay`` s while :attr:`_Pairs.slow`."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if _Pairs.slow and self.delay:
            time.sleep(self.delay)
        ids = torch.randint(0, 128, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def _hf_run(tmp: Path, with_autoprof: bool, delay: float) -> dict[str, torch.Tensor]:
    from autoprof.integrations.transformers import AutoprofCallback

    class TurnSlow(transformers.TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _Pairs.slow = state.global_step >= HF_SLOW_FROM

    _Pairs.slow = False
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=128, n_positions=16, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp),
        max_steps=HF_SLOW_FROM + 6,  # the triggered window's last step is 45
        per_device_train_batch_size=2,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    # budget 20%: a triggered window may open from step 20 (4 profiled steps), so that the run stays short
    callbacks = [TurnSlow()] + ([AutoprofCallback(trigger=True, trigger_budget=0.2)] if with_autoprof else [])
    transformers.Trainer(model=model, args=args, train_dataset=_Tokens(delay), callbacks=callbacks).train()
    _Pairs.slow = False
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.skipif(transformers is None, reason="transformers is not installed")
def test_hf_trainer_a_slow_data_path_opens_a_triggered_window(records: Records, tmp_path: Path) -> None:
    weights = _hf_run(tmp_path / "run", True, delay=0.1)  # 2 samples of 100 ms: a step ~10x its usual
    windows = records.of("autoprof.window", target="GPT2LMHeadModel.training_step")
    assert [w["trigger"] is None for w in windows] == [True, False], [w["trigger"] for w in windows]
    triggered = windows[1]
    t = triggered["trigger"]
    # the Trainer fetches a step's batch before on_step_begin: step 40's slow fetch ends step 39's period, so 39
    # and 40 are slow, asked for when step 41 begins; warmed up at 42, recorded 43-45
    assert t["kind"] == "persistent" and t["step"] == HF_SLOW_FROM and t["slow_steps"][-2:] == [HF_SLOW_FROM - 1, HF_SLOW_FROM], t
    assert triggered["steps"] == [HF_SLOW_FROM + 3, HF_SLOW_FROM + 4, HF_SLOW_FROM + 5]
    assert t["ratio"] > 3 and t["transient"] is False and t["slow_steps_recorded"]
    assert triggered["framework"] == "transformers" and triggered["rank"] == 0
    (regime,) = records.of("autoprof.finding", target="GPT2LMHeadModel.training_step", rule="bound_regime", window=triggered["window"])
    assert regime["verdict"] == "input-bound", regime
    reference = _reference("hf", lambda: _hf_run(tmp_path / "reference", False, delay=0.0))
    assert all(torch.equal(weights[k], reference[k]) for k in reference)
