"""Hugging Face ``Trainer``: ``Trainer(..., callbacks=[AutoprofCallback()])``.

Each optimizer step of training is a step of the target ``<model class>.training_step``, from ``on_step_begin``
(before its first micro-batch's forward) to ``on_step_end`` (after the optimizer, the scheduler and
``zero_grad``): with ``gradient_accumulation_steps=N`` one step covers N micro-batches. It is numbered by
``state.global_step``. Its sections are the phases the Trainer calls back between: ``forward_backward`` (the
micro-batches' forward and backward, and gradient clipping), ``optimizer_step`` (between ``on_pre_optimizer_step``
and ``on_optimizer_step``) and ``after_optimizer_step`` (the scheduler, ``zero_grad``). The Trainer fetches a step's
micro-batches before ``on_step_begin``: waiting for data falls between steps, not in them (the bound regime counts
the ``enumerate(DataLoader)`` time between a window's steps as input, and the window record's ``step_period_ms``
shows the period it adds to each step).

A run's end stops autoprof's profiler whatever ends it: ``on_train_end`` (the last step, ``max_steps``), and an
exception out of ``Trainer.train`` (the Trainer calls no callback then: the callback watches ``Trainer.train`` itself,
a pass-through wrapper installed once on the class that returns and raises exactly what ``train`` does). Each
``train()`` is a run of its own: the schedule starts over at ``on_train_begin``.
"""

from __future__ import annotations

from typing import Any

from autoprof.integrations import apply_settings, checked_options, guarded, missing, watch_raises

try:
    import transformers as _transformers
    from transformers import TrainerCallback as _TrainerCallback
except ImportError:
    raise missing("transformers", "transformers") from None

from autoprof.live.instrument import Steps

FRAMEWORK = "transformers"


def _model_name(model: Any) -> str:
    inner = getattr(model, "module", model)  # DistributedDataParallel and friends hold the model as .module
    inner = getattr(inner, "_orig_mod", inner)  # a torch.compile'd model
    return type(inner).__name__ if inner is not None else "Trainer"


class AutoprofCallback(_TrainerCallback):
    """A ``TrainerCallback`` that profiles the Trainer's steps with autoprof's schedule.

    Options: ``@autoprof``'s schedule (``wait``, ``warmup``, ``active``, ``repeat``, ``skip_first``) and the trigger's
    (``trigger``, ``trigger_budget``...) for its target, and :func:`autoprof.configure`'s (``trace_dir``, ``sink``,
    ``ranks``...), applied process-wide.
    """

    def __init__(self, **options: Any) -> None:
        self._schedule, settings = checked_options(options)
        self._steps: Steps | None = None
        _watch_train()
        apply_settings(settings)  # last: a refused option, or a failure above, changes nothing process-wide

    def _over(self, reason: str, failed: bool) -> None:
        """The run is over: no step, no window of autoprof's left open after it."""
        if self._steps is not None:
            self._steps.stop(reason, failed=failed)

    def _guarded(self, where: str, fn: Any, *args: Any) -> None:
        guarded(FRAMEWORK, where, fn, *args)

    def _phase(self, name: str) -> None:
        if self._steps is not None and self._steps.in_step:
            self._steps.phase(name)

    def _begin(self, state: Any, model: Any) -> None:
        steps = self._steps
        if steps is None:
            steps = self._steps = Steps(f"{_model_name(model)}.training_step", framework=FRAMEWORK, **self._schedule)
        steps.begin(getattr(state, "global_step", None))
        self._phase("forward_backward")

    def _end(self) -> None:
        if self._steps is not None:
            self._steps.end()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_step_begin", self._begin, state, kwargs.get("model"))

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_pre_optimizer_step", self._phase, "optimizer_step")

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_optimizer_step", self._phase, "after_optimizer_step")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_step_end", self._end)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._steps is not None:
            self._guarded("on_train_begin", self._steps.restart)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_train_end", self._over, "the training run ended", False)


def _watch_train() -> None:
    """Watch ``transformers.Trainer.train`` (subclasses that call it are covered; see
    :func:`~autoprof.integrations.watch_raises`): when it raises, each ``AutoprofCallback`` of that trainer stops its
    step and window."""
    watch_raises(_transformers.Trainer, "train", _train_raised)


def _train_raised(trainer: Any, e: BaseException) -> None:
    handler = getattr(trainer, "callback_handler", None)
    for callback in list(getattr(handler, "callbacks", ())):
        if isinstance(callback, AutoprofCallback):
            callback._guarded("train raised", callback._over, f"Trainer.train raised {type(e).__name__}", True)


__all__ = ["AutoprofCallback"]
