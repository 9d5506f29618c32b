"""Lightning: ``Trainer(profiler=AutoprofProfiler())``, or ``Trainer(callbacks=[AutoprofCallback()])`` next to another
profiler. Works with ``lightning`` and with ``pytorch_lightning`` (Lightning calls its profiler and callbacks by
method name, so either package's trainer takes these classes).

Each stage's batches are the steps of their own target, ``<LightningModule class>.training_step`` (and
``.validation_step``, ``.test_step``, ``.predict_step``), scheduled as ``@autoprof`` targets are. A training step
is one optimizer step: from fetching its first micro-batch to the end of the batch in which the optimizer stepped
(``accumulate_grad_batches`` micro-batches), numbered by ``trainer.global_step``. With the profiler, every
Lightning action inside a step (``[Strategy]...training_step``, ``...backward``, ``[LightningModule]...optimizer_step``,
the data fetch, callbacks' hooks) is a section, named as Lightning names it; with the callback, the step's phases
between the hooks Lightning calls back (``training_step``, ``zero_grad``, ``backward``, ``after_backward``,
``optimizer_step``).

A run's end stops autoprof's profiler whatever ends it: a stage's end hook (``on_train_end``, ``on_validation_end``...:
``max_steps``, early stopping, the last epoch), an exception (``on_exception``; and ``fit``/``validate``/``test``/
``predict`` themselves are watched, through a pass-through wrapper of Lightning's one entry-point handler, so a run
without callbacks is covered too), ``teardown``. A window cut short that way is dropped and said once
(``window_incomplete``), never mixed into the next run; each run (``setup``) starts the schedules over. An earlier
trainer's teardown (``Profiler.__del__`` runs it when the garbage collector takes the trainer, at any step of a later
run) stops that run's steps only, never the window of the run that drives the target now (``Steps.stop``).

With ``trigger=True`` (:mod:`autoprof.live.trigger`) a step's period is its begin to the next step's of its stage; a
step that follows another stage's steps (training after a validation run inside ``fit``, the next validation run
after the training between) begins a new period, so the trainer's own rhythm is never a slow step.
"""

from __future__ import annotations

import sys
from typing import Any

from autoprof import _guard
from autoprof.integrations import apply_settings, checked_options, failed, guarded, missing, watch_raises

try:
    import lightning.pytorch as _pl
except ImportError:
    try:
        import pytorch_lightning as _pl  # type: ignore[no-redef]
    except ImportError:
        raise missing("Lightning (lightning or pytorch_lightning)", "lightning") from None

from autoprof.live.instrument import Steps
from autoprof.live.session import SESSION

FRAMEWORK = "lightning"
STAGES = ("train", "validation", "test", "predict")
_STEP_HOOK = {"train": "training_step", "validation": "validation_step", "test": "test_step", "predict": "predict_step"}
# The action that fetches a stage's next batch (Lightning >= 2.0): a step begins there, so that waiting for data
# counts in it.
_FETCH = {"train_dataloader_next": "train", "val_next": "validation", "test_next": "test", "predict_next": "predict"}
# The hooks that end a stage's run (Lightning calls them on every callback and on the module, once per run).
_ENDS = {f"on_{stage}_end": stage for stage in STAGES}


class _Stages:
    """The targets of one trainer's stages, and the step in progress (at most one: stages do not overlap)."""

    def __init__(self, schedule: dict[str, Any]) -> None:
        self.schedule = schedule
        self.targets: dict[str, Steps] = {}
        self.current: Steps | None = None
        self.stage: str | None = None
        self.last: str | None = None  # the stage of the last step begun
        self.batches = 0  # micro-batches of the training step in progress
        self.stepped = False  # the optimizer stepped in the training step in progress
        self.handled: BaseException | None = None  # the exception being handled where the step began (a fit retried in an except)

    def begin(self, stage: str, module: Any, trainer: Any) -> None:
        if self.current is not None:
            self.end()
        steps = self.targets.get(stage)
        if steps is None:
            cls = module.__class__.__name__ if module is not None else "LightningModule"  # (a weak proxy forwards __class__)
            steps = self.targets[stage] = Steps(f"{cls}.{_STEP_HOOK[stage]}", framework=FRAMEWORK, **self.schedule)
        if self.last is not None and self.last != stage:
            # the trigger times a step from its begin to the next one's: the time since this stage's last step went
            # to another stage's steps (a validation run inside fit), timed as that stage's target: no step's period
            SESSION.new_period(steps.name)
        self.last = stage
        self.current, self.stage = steps, stage
        self.batches, self.stepped = 0, False
        self.handled = sys.exc_info()[1]
        steps.begin(getattr(trainer, "global_step", None) if stage == "train" else None)

    def end(self) -> None:
        steps, self.current, self.stage = self.current, None, None
        if steps is not None:
            steps.end()

    def stop(self, stage: str | None, reason: str, failed: bool = False) -> None:
        """A stage's run is over (``stage`` None: every stage's; ``failed``: it raised): its step in progress ends and
        no window of its target stays open."""
        if stage is None or stage == self.stage:
            self.current = self.stage = None
        for name, steps in list(self.targets.items()):
            if stage is None or name == stage:
                steps.stop(reason, failed=failed)

    def restart(self) -> None:
        """A new run of the trainer (``fit``, ``validate``...): every stage's schedule starts over."""
        self.current = self.stage = self.last = None
        for steps in list(self.targets.values()):
            steps.restart()

    def batch_done(self, trainer: Any) -> None:
        """A batch of the stage in progress ended: the end of its step, unless a training step still
        accumulates gradients (no optimizer step yet, fewer micro-batches than ``accumulate_grad_batches``)."""
        if self.stage == "train" and not self.stepped:
            accumulate = getattr(trainer, "accumulate_grad_batches", 1)
            if isinstance(accumulate, int) and self.batches < accumulate:
                return
        self.end()


def _trainer_of(module: Any) -> Any:
    with _guard.quiet("lightning.trainer"):  # a module not attached to a trainer raises
        return module.trainer if module is not None else None
    return None


class AutoprofProfiler(_pl.profilers.Profiler):
    """A Lightning profiler (``Trainer(profiler=AutoprofProfiler(...))``) whose findings are autoprof's records.

    Options: ``@autoprof``'s schedule (``wait``, ``warmup``, ``active``, ``repeat``, ``skip_first``) for every stage's
    target, the trigger's (``trigger``, ``trigger_budget``...) for those targets, and :func:`autoprof.configure`'s
    (``trace_dir``, ``sink``, ``ranks``...), applied process-wide.
    ``summary()`` says where the records went; the records themselves are written as windows close.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__()  # first: Profiler.__del__ tears down whatever __init__ got to (a bad option raises below)
        self._stages = _Stages({})
        self._lightning_module: Any = None  # set by the trainer (a weak proxy of the LightningModule)
        self._stages.schedule, settings = checked_options(options)
        _watch_entry()
        apply_settings(settings)  # last: a refused option, or a failure above, changes nothing process-wide

    # -- Lightning's Profiler interface (profile() is the base class's) ---------------------------
    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        super().setup(stage, local_rank, log_dir)
        guarded(FRAMEWORK, "setup", self._stages.restart)

    def teardown(self, stage: str | None) -> None:
        stages = getattr(self, "_stages", None)
        if stages is not None:
            guarded(FRAMEWORK, "teardown", stages.stop, None, "the trainer tore down")
        super().teardown(stage)

    def describe(self) -> None:
        """Nothing to print: the records were written as the windows closed (the run is over: nothing records)."""
        guarded(FRAMEWORK, "describe", self._stages.stop, None, "the run ended")

    def summary(self) -> str:
        return "autoprof: the findings are the autoprof.window and autoprof.finding records (see autoprof.configure's sink)"

    # (Lightning calls these some 30 times a batch: a hook's frame, no `with`; the action's name is formatted only on
    # a failure, in its error record)
    @_guard.hook(lambda e, self, action_name: failed(FRAMEWORK, f"start {action_name}", e))
    def start(self, action_name: str) -> None:
        stages = self._stages
        kind = action_name.rsplit(".", 1)[-1] if action_name.startswith("[") else action_name
        if kind == "on_exception":
            stages.stop(None, "the trainer raised", failed=True)
            return
        ended = _ENDS.get(kind)
        if ended is not None and action_name.startswith("["):
            stages.stop(ended, f"{ended} ended")
            return
        stage = _FETCH.get(kind)
        if stage is None and stages.current is None and action_name.startswith("[Strategy]"):
            stage = next((s for s, hook in _STEP_HOOK.items() if hook == kind), None)  # a loop without a profiled fetch
        if stage is not None and not (stage == "train" and stages.stage == "train"):
            module = self._lightning_module
            stages.begin(stage, module, _trainer_of(module))
        current = stages.current
        if current is None:
            return
        if kind == "optimizer_step" and action_name.startswith("[LightningModule]"):
            stages.stepped = True
        if kind == _STEP_HOOK.get(stages.stage or "") and action_name.startswith("[Strategy]"):
            stages.batches += 1
        current.enter(action_name)

    @_guard.hook(lambda e, self, action_name: failed(FRAMEWORK, f"stop {action_name}", e))
    def stop(self, action_name: str) -> None:
        stages = self._stages
        current = stages.current
        if current is None:
            return
        current.leave(action_name)
        stage = stages.stage
        if action_name.startswith("[LightningModule]") and action_name.endswith(f".on_{stage}_batch_end"):
            stages.batch_done(_trainer_of(self._lightning_module))
        elif action_name == "run_training_epoch":
            raised = sys.exc_info()[1]
            if raised is not None and raised is not stages.handled:  # the epoch unwinds: the step raised
                stages.stop(None, f"the trainer raised {type(raised).__name__}", failed=True)
            else:  # the epoch's last step, still accumulating (a partial accumulation)
                stages.end()


class AutoprofCallback(_pl.Callback):
    """A Lightning callback (``Trainer(callbacks=[AutoprofCallback(...)])``) for users who keep another profiler:
    the same targets and steps as :class:`AutoprofProfiler`, with the step's phases between Lightning's callback
    hooks as sections. Options as :class:`AutoprofProfiler`'s."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        schedule, settings = checked_options(options)
        self._stages = _Stages(schedule)
        _watch_entry()
        apply_settings(settings)  # last: a refused option, or a failure above, changes nothing process-wide

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._guarded("setup", self._stages.restart)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._guarded("on_exception", self._stages.stop, None, "the trainer raised", True)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_train_end", self._stages.stop, "train", "train ended")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_validation_end", self._stages.stop, "validation", "validation ended")

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_test_end", self._stages.stop, "test", "test ended")

    def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_predict_end", self._stages.stop, "predict", "predict ended")

    def _phase(self, name: str) -> None:
        if self._stages.current is not None:
            self._stages.current.phase(name)

    def _guarded(self, where: str, fn: Any, *args: Any) -> None:
        guarded(FRAMEWORK, where, fn, *args)

    def _batch_start(self, stage: str, trainer: Any, pl_module: Any) -> None:
        stages = self._stages
        if not (stage == "train" and stages.stage == "train"):
            stages.begin(stage, pl_module, trainer)
        stages.batches += 1
        self._phase(_STEP_HOOK[stage])

    def _batch_end(self, trainer: Any) -> None:
        stages = self._stages
        if stages.current is not None:
            stages.current.leave(None)
            stages.batch_done(trainer)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._guarded("on_train_batch_start", self._batch_start, "train", trainer, pl_module)

    def on_before_zero_grad(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self._guarded("on_before_zero_grad", self._phase, "zero_grad")

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        self._guarded("on_before_backward", self._phase, "backward")

    def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_after_backward", self._phase, "after_backward")

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        def step() -> None:
            self._stages.stepped = True
            self._phase("optimizer_step")

        self._guarded("on_before_optimizer_step", step)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._guarded("on_train_batch_end", self._batch_end, trainer)

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._guarded("on_validation_batch_start", self._batch_start, "validation", trainer, pl_module)

    def on_validation_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._guarded("on_validation_batch_end", self._batch_end, trainer)

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._guarded("on_test_batch_start", self._batch_start, "test", trainer, pl_module)

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._guarded("on_test_batch_end", self._batch_end, trainer)

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._guarded("on_predict_batch_start", self._batch_start, "predict", trainer, pl_module)

    def on_predict_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._guarded("on_predict_batch_end", self._batch_end, trainer)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._guarded("on_train_epoch_end", self._stages.end)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._guarded("teardown", self._stages.stop, None, "the trainer tore down")


def _watch_entry() -> None:
    """Watch Lightning's one handler of ``fit``/``validate``/``test``/``predict`` (``trainer.call._call_and_handle_interrupt``,
    :func:`~autoprof.integrations.watch_raises`): when the run raises, the trainer's autoprof profiler and callbacks
    stop their steps and windows, even with no callback to carry ``on_exception``."""
    watch_raises(getattr(getattr(_pl, "trainer", None), "call", None), "_call_and_handle_interrupt", _run_raised)


def _run_raised(trainer: Any, e: BaseException) -> None:
    for owner in [getattr(trainer, "profiler", None), *list(getattr(trainer, "callbacks", None) or ())]:
        if isinstance(owner, (AutoprofProfiler, AutoprofCallback)):
            guarded(FRAMEWORK, "run raised", owner._stages.stop, None, f"the run raised {type(e).__name__}", True)


__all__ = ["AutoprofCallback", "AutoprofProfiler"]
