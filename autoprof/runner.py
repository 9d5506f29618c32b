"""``autoprof run SCRIPT [ARGS...]``: a training script, unmodified, with its own ``sys.argv``, output and exit status,
its steps found without a decorator.

- A plain loop: each ``torch.optim.Optimizer.step`` of the first optimizer that steps ends a step (the target
  ``<script>.step``): the step runs from the end of one optimizer step to the end of the next (the batch's fetch, the
  forward, the backward and the optimizer). The step ends outside torch's own ``Optimizer.step#...`` annotation
  (:func:`install_optimizer_clock` wraps torch's wrapper of each optimizer class, made when its first optimizer is built).
- A loop with no optimizer (evaluation, inference): each batch of the first DataLoader that yields ends a step
  (:func:`install_loader_clock`), until an optimizer steps.
- The Hugging Face Trainer and Lightning: when the script imports them, each ``Trainer`` gets the integration that
  exists (``AutoprofCallback`` for the Trainer, ``profiler=AutoprofProfiler()`` for Lightning, unless it has a
  profiler of its own), and the optimizer clock stands aside: the trainer's steps are its steps.

The script runs as ``python SCRIPT ARGS`` would run it (compiled from its bytes under its absolute path, run as
``__main__``, ``sys.argv[0]`` as typed, its folder first on ``sys.path``): what it raises (an exception,
``SystemExit``, a Ctrl-C) leaves ``autoprof run`` exactly so, and the interpreter reports it and sets the exit status
as it would without autoprof; the traceback it prints starts at the script's own frame (no autoprof or runpy frame),
and a ``.py`` file's syntax error shows as python shows it. A file that is not Python and does not compile is one
line (:class:`NotAScriptError`). The verdicts come at the end (the
summary, :mod:`autoprof.render.emit`).
"""

from __future__ import annotations

import builtins
import functools
import os
import runpy
import sys
import threading
import types
import weakref
import zipfile
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from autoprof.live.instrument import Steps
from autoprof.render import emit as _emit


class OptimizerClock:
    """Ends a step of ``steps`` at each step of the first optimizer that steps (a second optimizer, a GAN's, is part
    of the same step); stands aside once a trainer's integration drives the steps (``enabled`` False)."""

    def __init__(self, steps: Steps, script: str = "the script") -> None:
        self.steps = steps
        self.script = script
        self.enabled = True
        self.ticks = 0
        self._thread: int | None = None  # the thread of the optimizer's steps
        self._owner: Callable[[], Any] | None = None
        self._loader: Callable[[], Any] | None = None  # the dataset of the first DataLoader that yields, no optimizer yet

    def tick(self, optimizer: Any) -> None:
        if not self.enabled:
            return
        self._owner, first = _first(self._owner, optimizer)
        if first:
            self._step()

    def loader_tick(self, dataset: Any) -> None:
        """A batch of a DataLoader over ``dataset`` was fetched: with no optimizer stepping (an evaluation or inference
        loop), each batch of the first DataLoader that yields ends a step (the batch's fetch comes at the end of the
        step before it: the step runs from one batch to the next); once an optimizer steps, its steps are the steps."""
        if not self.enabled or self._owner is not None:
            return
        self._loader, first = _first(self._loader, dataset)
        if first:
            self._step()

    def _step(self) -> None:
        self.ticks += 1
        self._thread = threading.get_ident()
        self.steps.end()  # Steps never raises: a failure is one record, then only the idle path
        self.steps.begin()

    def stop(self) -> None:
        """The script ended: its loop's run stops, on the loop's thread (a loop run in a thread of its own that has
        ended is left to the session's end of run: a step cannot be stopped from another thread). No step found
        (no optimizer stepped, no trainer was built, no target of the script's own was called): said once."""
        if self.enabled and self.ticks == 0 and not _other_targets(self.steps.name):
            _emit.warning(
                f"autoprof run found no step to profile in {self.script}: no torch.optim optimizer stepped, no "
                "DataLoader yielded a batch and no Hugging Face or Lightning Trainer was built; decorate the step "
                "function with @autoprof (or drive autoprof.Steps) to profile it",
                "no_step",
                target=self.steps.name,
                window=None,
            )
        if self._thread is None or self._thread == threading.get_ident():
            self.steps.stop("the script ended")


def _first(held: Callable[[], Any] | None, obj: Any) -> tuple[Callable[[], Any], bool]:
    """The first object that ticks owns the clock: ``held`` (a reference to it, None before the first tick) and
    whether ``obj`` is it (a weak reference where the object takes one, else held for the run)."""
    if held is not None:
        return held, held() is obj
    try:
        return weakref.ref(obj), True
    except TypeError:  # not an object a weak reference can name: held for the run
        return (lambda: obj), True


def _other_targets(name: str) -> bool:
    """Whether the script called a target of its own (an ``@autoprof`` function, its own ``Steps``)."""
    from autoprof.live.session import SESSION

    return any(other != name for other in list(SESSION.targets))


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


def install_loader_clock(clock: OptimizerClock) -> Callable[[], None]:
    """Wrap the DataLoader iterators' ``__next__`` (``torch.utils.data.dataloader._BaseDataLoaderIter``, every
    DataLoader's) so each batch, once fetched, ticks ``clock`` (:meth:`OptimizerClock.loader_tick`). Returns the undo."""
    from torch.utils.data import dataloader

    cls = dataloader._BaseDataLoaderIter
    original = cls.__dict__["__next__"]

    @functools.wraps(original)
    def next_batch(self: Any) -> Any:
        out = original(self)  # the end of the data (StopIteration) is no batch: no tick
        clock.loader_tick(getattr(self, "_dataset", None))
        return out

    cls.__next__ = next_batch  # type: ignore[method-assign]

    def undo() -> None:
        cls.__next__ = original  # type: ignore[method-assign]

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


class NotAScriptError(Exception):
    """The script could not start: ``message`` is its one line (a file that is not Python), ``status`` the exit
    status python gives it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _compile(script: str, path: str) -> Any:
    """The script's code, compiled as python compiles a script (its bytes, so a coding line is honoured; its absolute
    path as its file name). A file that is not Python: :class:`NotAScriptError` (one line, python's status 1); a ``.py``
    file's own syntax error is raised as python shows it."""
    with open(path, "rb") as f:
        source = f.read()
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeDecodeError) as e:
        if path.endswith((".py", ".pyw")) and isinstance(e, SyntaxError):
            raise
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        why = e.msg if isinstance(e, SyntaxError) else str(e)
        raise NotAScriptError(f"{script} is not a Python script: {why}{where}", 1) from None


def _own_frames(tb: TracebackType | None, code: Any) -> TracebackType | None:
    """The part of a traceback from the script's own frames on (``python SCRIPT`` shows no others): autoprof's and
    runpy's frames above the script's module code left out; None when it never ran (a syntax error)."""
    while tb is not None and tb.tb_frame.f_code is not code:
        tb = tb.tb_next
    return tb


def _hook_without_autoprof(code: Any) -> None:
    """Whatever ``sys.excepthook`` is when the script's exception leaves it (the script's own, or python's) gets the
    traceback without autoprof's frames, as under ``python SCRIPT``."""
    hook = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        sys.excepthook = hook
        own = _own_frames(tb, code)
        if own is not None or isinstance(value, SyntaxError):
            tb = own
            value.__traceback__ = own  # what python's own hook prints (the argument only when the exception has none)
        hook(kind, value, tb)

    sys.excepthook = excepthook


def run_script(script: str, args: Sequence[str], schedule: dict[str, Any], name: str | None = None) -> None:
    """Run ``script`` with ``args`` as ``python script args`` would (``sys.argv`` as typed, ``__main__`` with its
    absolute ``__file__``, its folder first on ``sys.path``), its steps profiled with ``schedule``; whatever it raises
    (``SystemExit`` included) is raised on, unchanged, and its traceback printed without autoprof's frames. A file
    that is not Python: :class:`NotAScriptError`."""
    path = os.path.abspath(script)
    code = None
    if not zipfile.is_zipfile(path):  # a zipapp: its __main__ module, run by runpy as python runs it
        try:
            code = _compile(script, path)
        except SyntaxError:
            _hook_without_autoprof(None)  # python shows a script's syntax error with no traceback
            raise
    target = name or f"{os.path.splitext(os.path.basename(script))[0]}.step"
    clock = OptimizerClock(Steps(target, **schedule), script)
    undo_optimizer = install_optimizer_clock(clock)
    undo_loader = install_loader_clock(clock)
    install_trainer_hooks(clock, schedule)
    sys.argv = [script, *args]
    main = types.ModuleType("__main__")
    if code is not None:
        main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __spec__=None, __package__=None)
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main  # kept to the end, as python keeps a script's (pickle finds its classes there)
        sys.path.insert(0, os.path.dirname(path))
    try:
        if code is None:
            runpy.run_path(script, run_name="__main__")
        else:
            exec(code, main.__dict__)
    except SystemExit as e:
        _emit.set_exit_status(e.code)
        raise
    except BaseException:
        if code is not None:
            _hook_without_autoprof(code)
        raise
    finally:
        clock.stop()
        undo_loader()
        undo_optimizer()
