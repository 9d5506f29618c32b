"""``@autoprof`` and ``autoprof.section``: wrapt wrappers that step each target's schedule and annotate
calls while a window records. Near-free otherwise: outside a recording window a call reads two flags,
a thread-local depth and ``perf_counter_ns`` twice, and never touches ``record_function``.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, overload

import torch
import torch.autograd.profiler as _ap
import wrapt

from autoprof import emit as _emit
from autoprof.config import SCHEDULE_KEYS, SWITCH, ConfigError, check_schedule_value
from autoprof.session import _STEADY_KEEP, ACTIVE, DONE, SESSION, WAIT, Target

F = TypeVar("F", bound=Callable[..., Any])

_tls = threading.local()
_get_ident = threading.get_ident
_now = time.perf_counter_ns
_record_function = _ap.record_function
# is_dynamo_compiling is a plain ``return False`` that dynamo folds to True while tracing: the cheapest
# way for a wrapper to step aside inside a compiled region without a graph break.
_is_compiling = getattr(torch.compiler, "is_dynamo_compiling", None) or torch.compiler.is_compiling


def _depth() -> int:
    try:
        return _tls.d  # type: ignore[no-any-return]
    except AttributeError:
        _tls.d = 0
        return 0


def _internal_error(where: str, target: str | None, e: BaseException) -> None:
    _emit.emit("autoprof.error", "error", target=target, window=None, message=f"{where}: {e}", reason="internal",
               error_type=type(e).__name__)


class _Step:
    """What the owner thread does around one outermost call of a target (entered only when not idle)."""

    __slots__ = ("advance", "last", "recording", "rf", "step", "t")

    def __init__(self, t: Target) -> None:
        self.t = t
        self.rf: list[Any] = []
        self.advance = True
        self.last = False
        self.recording = False
        self.step = t.calls
        cfg = SWITCH.config
        phase, _first, last = t.phase(t.pos)
        if phase == DONE:
            t.done = True
        if phase in (DONE, WAIT):
            if _ap._is_profiler_enabled:
                self.annotate()
            return
        if not SESSION.open(t, cfg):
            self._defer()
        elif phase == ACTIVE:
            if not SESSION.start(t):
                self._defer()
            else:
                self.last = last
                self.recording = True
                for name in (f"ProfilerStep#{self.step}", t.name):
                    rf = _record_function(name)
                    rf.__enter__()  # type: ignore[no-untyped-call]
                    self.rf.append(rf)
                return
        if _ap._is_profiler_enabled:
            # someone else's profiler records: annotate the call so it lands in that profile
            self.annotate()

    def annotate(self) -> None:
        rf = _record_function(self.t.name)
        rf.__enter__()  # type: ignore[no-untyped-call]
        self.rf.append(rf)

    def _defer(self) -> None:
        # Back to the start of this cycle's warmup: a window is all of its steps or nothing.
        t = self.t
        c = t.pos - t.skip_first
        cycle = t.wait + t.warmup + t.active
        t.pos = t.skip_first + (c // cycle) * cycle + t.wait
        self.advance = False

    def finish(self, wall_ns: int) -> None:
        t = self.t
        for rf in reversed(self.rf):
            rf.__exit__(None, None, None)
        if self.recording:
            t.win_steps.append(self.step)
            t.win_walls.append(wall_ns)
        if self.advance:
            t.pos += 1
        if self.last:
            SESSION.close(t, SWITCH.config)


def _account(t: Target, wall_ns: int) -> None:
    """Wall time of every outermost call, recorded or not (bounded memory)."""
    if t.calls == 0:
        t.first_call_ns = wall_ns
    elif not t.done:
        r = t.recent_ns
        r.append(wall_ns)
        if len(r) > _STEADY_KEEP:
            del r[0]
    t.calls += 1


class _Instrument:
    """Per-decorated-callable state and the call logic shared by the sync and async wrappers."""

    def __init__(self, name: str, schedule: dict[str, int]) -> None:
        self.name = name
        self.schedule = schedule
        self.target: Target | None = None

    def get_target(self) -> Target:
        t = self.target
        if t is None:
            t = self.target = SESSION.target(self.name, self._schedule())
        return t

    def _schedule(self) -> dict[str, int]:
        cfg = SWITCH.config
        return {k: self.schedule.get(k, getattr(cfg, k)) for k in SCHEDULE_KEYS}

    def enter(self) -> tuple[int, Any]:
        """Returns (mode, state): 0 plain, 1 nested annotation, 2 owner step."""
        if _depth():
            if _ap._is_profiler_enabled:
                rf = _record_function(self.name)
                rf.__enter__()  # type: ignore[no-untyped-call]
                return 1, rf
            return 0, None
        t = self.target or self.get_target()
        me = _get_ident()
        if t.owner != me:
            if t.owner is None:
                with t.lock:
                    if t.owner is None:
                        t.owner = me
            if t.owner != me:
                # another thread's call: not a step; annotated while recording
                if _ap._is_profiler_enabled:
                    rf = _record_function(self.name)
                    rf.__enter__()  # type: ignore[no-untyped-call]
                    return 1, rf
                return 0, None
        _tls.d = 1
        if t.done and not _ap._is_profiler_enabled:
            return 2, None
        try:
            return 2, _Step(t)
        except Exception as e:
            # Give this target up (one error record, then only the idle path) rather than fail every call.
            _internal_error("step start", self.name, e)
            _give_up(t)
            return 2, None

    def leave(self, mode: int, state: Any, wall_ns: int) -> None:
        try:
            if mode == 1:
                state.__exit__(None, None, None)
                return
            _tls.d = 0
            t = self.target
            if t is None:
                return
            _account(t, wall_ns)
            if state is not None:
                state.finish(wall_ns)
        except Exception as e:
            _internal_error("step end", self.name, e)
            if self.target is not None:
                _give_up(self.target)


def _give_up(t: Target) -> None:
    t.done = True
    try:
        SESSION.drop(t)
    except Exception:
        pass


def _make_sync(ins: _Instrument) -> Any:
    switch = SWITCH
    ap = _ap
    tls = _tls
    is_compiling = _is_compiling

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not switch.enabled or is_compiling():
            return wrapped(*args, **kwargs)
        # Idle fast path: the target's windows are over and no profiler records. Kept inline (no method
        # calls): it is what every call pays for the rest of a training run.
        t = ins.target
        if t is not None and t.done and not ap._is_profiler_enabled:
            try:
                d = tls.d
            except AttributeError:
                d = 0
            if d:
                return wrapped(*args, **kwargs)
            tls.d = 1
            try:
                return wrapped(*args, **kwargs)
            finally:
                tls.d = 0
        try:
            mode, state = ins.enter()
        except Exception as e:
            _internal_error("enter", ins.name, e)
            return wrapped(*args, **kwargs)
        if mode == 0:
            return wrapped(*args, **kwargs)
        t0 = _now()
        try:
            return wrapped(*args, **kwargs)
        finally:
            ins.leave(mode, state, _now() - t0)

    return wrapper


def _make_async(ins: _Instrument) -> Any:
    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not SWITCH.enabled:
            return await wrapped(*args, **kwargs)
        try:
            mode, state = ins.enter()
        except Exception as e:
            _internal_error("enter", ins.name, e)
            return await wrapped(*args, **kwargs)
        if mode == 0:
            return await wrapped(*args, **kwargs)
        t0 = _now()
        try:
            return await wrapped(*args, **kwargs)
        finally:
            ins.leave(mode, state, _now() - t0)

    return wrapper


class _ModuleProxy(wrapt.FunctionWrapper):  # type: ignore[misc,type-arg]
    """``autoprof(model)``: a transparent proxy whose calls are steps. Pickling (``torch.save``,
    ``copy.deepcopy``) yields the plain module, without the instrumentation."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)

    def __reduce__(self) -> Any:
        return self.__wrapped__.__reduce__()

    def __copy__(self) -> Any:
        import copy

        return copy.copy(self.__wrapped__)

    def __deepcopy__(self, memo: Any) -> Any:
        import copy

        return copy.deepcopy(self.__wrapped__, memo)


def _qualname(obj: Any) -> str:
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    if isinstance(obj, torch.nn.Module):
        inner = getattr(obj, "_orig_mod", obj)  # a torch.compile'd module
        return type(inner).__qualname__
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__


def _underlying(obj: Any) -> Any:
    return obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj


def _validate(options: dict[str, Any]) -> tuple[str | None, dict[str, int]]:
    name = options.pop("name", None)
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError(f"name must be a non-empty string, not {name!r}")
    unknown = set(options) - set(SCHEDULE_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown autoprof option(s): {', '.join(sorted(unknown))} (valid: name, {', '.join(SCHEDULE_KEYS)})"
        )
    return name, {k: check_schedule_value(k, v) for k, v in options.items()}


def instrument(obj: Any, name: str | None, schedule: dict[str, int]) -> Any:
    """Wrap ``obj`` (function, method, classmethod/staticmethod, nn.Module instance)."""
    if not SWITCH.enabled:
        return obj  # disabled at decoration time: the original, unchanged
    fn = _underlying(obj)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        warnings.warn(
            f"autoprof: {_qualname(obj)} is a generator function; its calls only create the generator, so "
            "autoprof leaves it unwrapped rather than time that. Decorate the function that consumes it, or use "
            "autoprof.section inside it.",
            UserWarning,
            stacklevel=3,
        )
        return obj
    ins = _Instrument(name or _qualname(obj), schedule)
    if inspect.iscoroutinefunction(fn):
        return wrapt.decorator(_make_async(ins))(obj)
    if isinstance(obj, torch.nn.Module):
        return _ModuleProxy(obj, _make_sync(ins))
    if not callable(fn):
        raise TypeError(f"autoprof can only decorate callables, not {type(obj).__name__}")
    return wrapt.decorator(_make_sync(ins))(obj)


@overload
def autoprof(func: F, /) -> F: ...
@overload
def autoprof(func: None = None, /, *, name: str | None = ..., wait: int = ..., warmup: int = ..., active: int = ...,
             repeat: int = ..., skip_first: int = ...) -> Callable[[F], F]: ...
def autoprof(func: Any = None, /, **options: Any) -> Any:
    """Profile calls of ``func``: each outermost call is one step of its own schedule.

    Bare (``@autoprof``) or with keyword-only options (``@autoprof(name=..., wait=..., warmup=...,
    active=..., repeat=..., skip_first=...)``). Works on functions, methods, classmethods,
    staticmethods, ``async def`` functions, ``nn.Module.forward`` and module instances
    (``autoprof(model)``).
    """
    name, schedule = _validate(dict(options))
    if func is None:
        return functools.partial(instrument, name=name, schedule=schedule)
    return instrument(func, name, schedule)


class section:  # noqa: N801 - used like a function: ``with autoprof.section("attn"):``
    """An annotated block (``with autoprof.section("attn"):``) or function (``@autoprof.section("attn")``).

    Records a ``record_function`` annotation only while a window records; otherwise costs a flag check.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"section name must be a non-empty string, not {name!r}")
        self.name = name

    def __enter__(self) -> section:
        if _is_compiling():
            return self  # dynamo ignores record_function; stepping aside adds no graph break
        if _ap._is_profiler_enabled and SWITCH.enabled:
            try:
                rf = _record_function(self.name)
                rf.__enter__()  # type: ignore[no-untyped-call]
            except Exception as e:
                _internal_error("section enter", self.name, e)
                rf = None
        else:
            rf = None
        stack = getattr(_tls, "sections", None)
        if stack is None:
            stack = _tls.sections = []
        stack.append(rf)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _is_compiling():
            return
        try:
            stack = getattr(_tls, "sections", None)
            rf = stack.pop() if stack else None
            if rf is not None:
                rf.__exit__(None, None, None)
        except Exception as e:
            _internal_error("section exit", self.name, e)

    def __call__(self, func: F) -> F:
        sec = self

        @wrapt.decorator
        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            if _is_compiling():
                return wrapped(*args, **kwargs)
            with sec:
                return wrapped(*args, **kwargs)

        if inspect.iscoroutinefunction(_underlying(func)):

            @wrapt.decorator
            async def awrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                with sec:
                    return await wrapped(*args, **kwargs)

            return awrapper(func)  # type: ignore[no-any-return,return-value]
        return wrapper(func)  # type: ignore[no-any-return,return-value]
