"""``autoprof run SCRIPT [ARGS...]``: a training script, unmodified, with its own ``sys.argv``, output and exit status,
its steps found without a decorator.

- A plain loop: each ``torch.optim.Optimizer.step`` of the first optimizer that steps ends a step (the target
  ``<script>.step``): the step runs from the end of one optimizer step to the end of the next (the batch's fetch, the
  forward, the backward and the optimizer). The step ends outside torch's own ``Optimizer.step#...`` annotation
  (:func:`install_optimizer_clock` wraps torch's wrapper of each optimizer class, made when its first optimizer is built).
- The Hugging Face Trainer and Lightning: when the script imports them, each ``Trainer`` gets the integration that
  exists (``AutoprofCallback`` for the Trainer, ``profiler=AutoprofProfiler()`` for Lightning, unless it has a
  profiler of its own), and the optimizer clock stands aside: the trainer's steps are its steps.

The script runs as ``python SCRIPT ARGS`` would run it (``runpy.run_path`` as ``__main__``, its folder first on
``sys.path``): what it raises (an exception, ``SystemExit``, a Ctrl-C) leaves ``autoprof run`` exactly so, and the
interpreter reports it and sets the exit status as it would without autoprof. The verdicts come at the end (the
summary, :mod:`autoprof.render.emit`).
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from autoprof.live.instrument import Steps


class OptimizerClock:
    """Ends a step of ``steps`` at each step of the first optimizer that steps (a second optimizer, a GAN's, is part
    of the same step); stands aside once a trainer's integration drives the steps (``enabled`` False)."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.enabled = True
        self._owner: Callable[[], Any] | None = None

    def tick(self, optimizer: Any) -> None:
        if not self.enabled:
            return
        if self._owner is None:
            try:
                self._owner = weakref.ref(optimizer)
            except TypeError:  # not an object a weak reference can name: held for the run
                self._owner = lambda: optimizer
        elif self._owner() is not optimizer:
            return
        self.steps.end()  # Steps never raises: a failure is one record, then only the idle path
        self.steps.begin()

    def stop(self) -> None:
        self.steps.stop("the script ended")


def install_optimizer_clock(clock: OptimizerClock) -> Callable[[], None]:
    """Wrap ``torch.optim.Optimizer.profile_hook_step`` (torch's wrapper of an optimizer class's ``step``, applied once
    per class when its first optimizer is built) so each optimizer step, once torch's wrapper returns, ticks ``clock``.
    Returns the undo."""
    from torch.optim.optimizer import Optimizer

    torch_wrapper = Optimizer.__dict__["profile_hook_step"]
    hook_step = torch_wrapper.__func__ if isinstance(torch_wrapper, staticmethod) else torch_wrapper

    def profile_hook_step(func: Callable[..., Any]) -> Callable[..., Any]:
        hooked = hook_step(func)

        @functools.wraps(hooked)
        def step(*args: Any, **kwargs: Any) -> Any:
            out = hooked(*args, **kwargs)
            if args:
                clock.tick(args[0])
            return out

        return step

    Optimizer.profile_hook_step = staticmethod(profile_hook_step)  # type: ignore[method-assign]

    def undo() -> None:
        Optimizer.profile_hook_step = torch_wrapper  # type: ignore[method-assign]

    return undo


def _on_import(name: str, hook: Callable[[Any], None]) -> None:
    import wrapt

    wrapt.register_post_import_hook(hook, name)


def _wrap_trainer_init(module: Any, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
    """Replace ``module.Trainer.__init__`` by ``wrap(it)``, once (a module imported again keeps one wrapper)."""
    trainer = getattr(module, "Trainer", None)
    if trainer is None or getattr(trainer.__init__, "_autoprof_run", False):
        return
    init = functools.wraps(trainer.__init__)(wrap(trainer.__init__))
    init._autoprof_run = True  # type: ignore[attr-defined]
    trainer.__init__ = init


def install_trainer_hooks(clock: OptimizerClock, options: dict[str, Any]) -> None:
    """When the script imports the Hugging Face Trainer or Lightning, each ``Trainer`` it builds gets autoprof's
    integration (with ``options``: the schedule), and the optimizer clock stands aside."""

    def transformers_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            from autoprof.integrations.transformers import AutoprofCallback

            handler = getattr(self, "callback_handler", None)
            if handler is not None and not any(isinstance(c, AutoprofCallback) for c in handler.callbacks):
                self.add_callback(AutoprofCallback(**options))
            clock.enabled = False

        return init

    def lightning_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("profiler") is None:
                from autoprof.integrations.lightning import AutoprofProfiler

                kwargs["profiler"] = AutoprofProfiler(**options)
                clock.enabled = False
            original(self, *args, **kwargs)

        return init

    transformers_hook = functools.partial(_wrap_trainer_init, wrap=transformers_init)
    lightning_hook = functools.partial(_wrap_trainer_init, wrap=lightning_init)
    _on_import("transformers.trainer", transformers_hook)
    _on_import("lightning.pytorch.trainer.trainer", lightning_hook)
    _on_import("pytorch_lightning.trainer.trainer", lightning_hook)


def run_script(script: str, args: Sequence[str], schedule: dict[str, Any], name: str | None = None) -> None:
    """Run ``script`` with ``args`` as ``python script args`` would, its steps profiled with ``schedule``; whatever it
    raises (``SystemExit`` included) is raised on, unchanged."""
    target = name or f"{os.path.splitext(os.path.basename(script))[0]}.step"
    clock = OptimizerClock(Steps(target, **schedule))
    undo = install_optimizer_clock(clock)
    install_trainer_hooks(clock, schedule)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(os.path.abspath(script), run_name="__main__")
    finally:
        clock.stop()
        undo()
