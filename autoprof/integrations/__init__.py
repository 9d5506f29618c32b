"""Trainer integrations: autoprof inside loops the user does not write.

- :mod:`autoprof.integrations.lightning`: ``AutoprofProfiler`` (``Trainer(profiler=...)``) and ``AutoprofCallback``
  (``Trainer(callbacks=[...])``) for Lightning (``lightning`` or ``pytorch_lightning``);
- :mod:`autoprof.integrations.transformers`: ``AutoprofCallback`` for the Hugging Face ``Trainer``.

Each is an optional extra (``pip install 'autoprof[lightning]'``, ``'autoprof[transformers]'``); importing one
without its package raises one ``ImportError`` line that names the extra. Nothing else in autoprof imports them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from autoprof import _guard
from autoprof.config import ACCEPTS, CHECKS, SCHEDULE_KEYS, SWITCH, TRIGGER_KEYS, Config, ConfigError, check_schedule_value, configure
from autoprof.render import emit as _emit

#: The keyword arguments every integration takes besides the schedule's: :func:`autoprof.configure`'s, read from the
#: :class:`~autoprof.config.Config` fields (a new option is an integration's option too, ``rules`` included).
CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(Config) if f.name not in SCHEDULE_KEYS)


def missing(package: str, extra: str) -> ImportError:
    """The one-line error of an integration imported without its package."""
    return ImportError(f"this autoprof integration needs {package}, which is not installed: pip install 'autoprof[{extra}]'")


def failed(framework: str, where: str, e: BaseException) -> None:
    """An integration's own failure in a trainer's hook: one error record, never the trainer's exception."""
    _emit.error(f"{framework} integration, {where}: {e}", "internal", e, target=None, window=None)


def guarded(framework: str, where: str, fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(*args)`` from a trainer's hook; an Exception is :func:`failed`'s record."""
    with _guard.call(failed, framework, where):
        fn(*args)


def split_options(options: dict[str, Any]) -> dict[str, Any]:
    """Apply an integration's process-wide options (``trace_dir``, ``sink``, ``ranks``... as
    :func:`autoprof.configure`) and return its targets' own: the schedule's (``wait``, ``warmup``...) and the
    trigger's (``trigger``, ``trigger_factor``..., as ``@autoprof(trigger=...)``: for the integration's targets only,
    over ``configure()``'s). One-line :class:`ConfigError` on an unknown or bad option; nothing changes then."""
    own, settings = checked_options(options)
    apply_settings(settings)
    return own


def checked_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An integration's options, every one checked and none applied: (its targets' own options, as
    :func:`split_options` returns them; the process-wide ones, for :func:`apply_settings`). An integration checks
    first, does whatever else may fail, and applies last: a refused option (or a constructor that fails after) leaves
    the process's configuration as it was. One-line :class:`ConfigError` on an unknown or bad option."""
    unknown = sorted(set(options) - set(SCHEDULE_KEYS) - set(CONFIG_KEYS))
    if unknown:
        valid = ", ".join(SCHEDULE_KEYS + CONFIG_KEYS)
        raise ConfigError(f"unknown autoprof option(s): {', '.join(unknown)} (valid: {valid})")
    settings = {k: v for k, v in options.items() if k in CONFIG_KEYS and k not in TRIGGER_KEYS}
    own: dict[str, Any] = {k: check_schedule_value(k, v) for k, v in options.items() if k in SCHEDULE_KEYS}
    for k in TRIGGER_KEYS:
        if k in options:
            own[k] = _check_trigger(k, options[k])
    if settings:
        SWITCH.config.replace(**settings)  # checked as configure() checks them, nothing applied
    return own, settings


def apply_settings(settings: dict[str, Any]) -> None:
    """The process-wide options :func:`checked_options` checked, applied (:func:`autoprof.configure`)."""
    if settings:
        configure(**settings)


def _check_trigger(key: str, value: Any) -> Any:
    """A trigger option's value, checked as ``configure()`` checks it (one line)."""
    try:
        return CHECKS[key](value)
    except ConfigError:
        raise
    except Exception:
        raise ConfigError(f"{key} must be {ACCEPTS[key]}, not {value!r}") from None


def watch_raises(owner: Any, attr: str, on_raise: Callable[[Any, BaseException], None]) -> None:
    """Wrap ``owner.attr`` (a trainer's entry point, on its class or module) once with a pass-through: when a call
    raises, ``on_raise(its first argument, the exception)`` runs first (a failure in it is swallowed), then the
    exception goes on unchanged; what the call returns is untouched. The trainers call no hook of theirs on every
    failure, so this is how an integration hears that a run ended by raising."""
    fn = getattr(owner, attr, None)
    if fn is None or getattr(fn, "_autoprof_watch", False):
        return

    @functools.wraps(fn)
    def watched(first: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(first, *args, **kwargs)
        except BaseException as e:
            with _guard.quiet("integration.on_raise"):
                on_raise(first, e)
            raise

    watched._autoprof_watch = True  # type: ignore[attr-defined]
    setattr(owner, attr, watched)
