"""One frozen :class:`Config`: defaults, environment variables, and the process-wide switch object.

No torch import here: reading the configuration must stay cheap and safe at import time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from autoprof.findings import declaration_problem

if TYPE_CHECKING:
    from os import PathLike

    from typing_extensions import Unpack

# Schedule defaults (per target). Skip the cold first call (lazy init, autotuning, allocator growth),
# wait one more step, warm the profiler up for one step (its first active step carries start-up cost),
# then record three steps: enough to see step-to-step variation, small enough to stay cheap. One window.
DEFAULT_SKIP_FIRST = 1
DEFAULT_WAIT = 1
DEFAULT_WARMUP = 1
DEFAULT_ACTIVE = 3
DEFAULT_REPEAT = 1

SCHEDULE_KEYS = ("wait", "warmup", "active", "repeat", "skip_first")
#: The trigger's options (a window when a step is slower than the run's own normal, see :mod:`autoprof.live.trigger`):
#: process-wide through ``configure()``, and per target through ``@autoprof(...)``.
TRIGGER_KEYS = (
    "trigger",
    "trigger_factor",
    "trigger_mads",
    "trigger_history",
    "trigger_min_steps",
    "trigger_budget",
    "trigger_interval",
    "trigger_floor_ms",
)


class ConfigError(ValueError):
    """A bad option: the message is one line that names the option and what it accepts."""


@dataclass(frozen=True)
class Config:
    """Process-wide settings. Change them with :func:`autoprof.configure`."""

    enabled: bool = True
    #: Where records go: None → JSON lines on stderr; a path → JSON lines appended to that file.
    sink: str | None = None
    #: A host logger (structlog BoundLogger or stdlib ``logging.Logger``) that receives the records instead.
    logger: Any = None
    #: How autoprof's own writer writes the records: "auto" (text for a person when they go to stderr and stderr is a
    #: terminal, else JSON lines), "json" (always JSON lines) or "console" (always text).
    format: str = "auto"
    #: Keep each window as a gzipped chrome trace in this directory.
    trace_dir: str | None = None
    record_shapes: bool = True
    #: Record the allocator's events in windows (``torch.profiler.profile(profile_memory=True)``): the memory
    #: verdicts (``memory_peak``, ``allocator_churn``, ``memory_creep``) read them. Off by default: it doubles a
    #: window's events.
    profile_memory: bool = False
    skip_first: int = DEFAULT_SKIP_FIRST
    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    repeat: int = DEFAULT_REPEAT
    #: Analyze windows on a background thread (the training thread only stops the profiler).
    background: bool = True
    top_ops: int = 10
    #: Ranks that record windows (None: all). Other ranks pay only the idle cost.
    ranks: tuple[int, ...] | None = None
    #: How long the comparing rank waits for the other ranks' window summaries (background thread).
    cross_rank_timeout_s: float = 30.0
    #: Roofline peaks override: {"flops_per_s": ..., "bytes_per_s": ...} (else the GPU table / CPU calibration).
    peaks: dict[str, float] | None = None
    #: Findings about a share of the window (communication, unfused adds, a final sync, batched matmuls) below
    #: this share are not emitted: a finding about nothing is noise in a log pipeline.
    noise_floor: float = 0.01
    #: At the end of the run, write an HTML report of the traces kept in ``trace_dir`` next to them
    #: (``autoprof-report.rank<R>.html``; needs ``autoprof[report]``).
    report: bool = False
    #: A user's own rules (callables declared with ``autoprof.rule``), run after the built-in ones, live and offline.
    rules: tuple[Any, ...] = ()
    #: Open a window by itself when a step is slower than the target's own normal (off by default: a run's windows
    #: stay the schedule's unless asked). The options below tune it.
    trigger: bool = False
    #: A slow step is at least this many times the baseline's median ...
    trigger_factor: float = 2.0
    #: ... and this many MADs (median absolute deviations) above it ...
    trigger_mads: float = 6.0
    #: ... and this many milliseconds above it (below, a window could not show the difference).
    trigger_floor_ms: float = 1.0
    #: The baseline is the median and MAD of this many recent unprofiled steps.
    trigger_history: int = 50
    #: Steps of history before any trigger.
    trigger_min_steps: int = 20
    #: Triggered windows record (warmup and active) at most this share of the target's steps.
    trigger_budget: float = 0.05
    #: Steps at least between two triggered windows.
    trigger_interval: int = 200

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes``, each as its field's check (:data:`CHECKS`) returns it; raises
        :class:`ConfigError` (one line) on an unknown or bad option."""
        changes = {str.__str__(key): value for key, value in changes.items()}  # a str subclass's hash is its own
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown option(s): {', '.join(sorted(k if k.isidentifier() else _show(k) for k in unknown))}")
        cfg = dataclasses.replace(self, **{key: _accepted(key, value) for key, value in changes.items()})
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Every option, checked by the one validator per field (:data:`CHECKS`, which the environment's values pass
        too); the first bad one raises :class:`ConfigError` with one line."""
        for f in dataclasses.fields(self):
            _accepted(f.name, getattr(self, f.name))


#: Upper bounds: a value past them is a mistake, not a wish (``active=10**100`` would record forever and hold
#: every event in memory). ``active`` bounds how many steps one window holds in memory.
MAX_ACTIVE = 1000
MAX_COUNT = 10**9  # skip_first, wait, warmup, repeat: call counts
MAX_TOP_OPS = 1000
MAX_RANK = 10**7
MAX_CROSS_RANK_TIMEOUT_S = 3600.0
MAX_NOISE_FLOOR = 0.5
MAX_TRIGGER_FACTOR = 1000.0
MAX_TRIGGER_MADS = 1000.0
MAX_TRIGGER_FLOOR_MS = 3_600_000.0
MAX_TRIGGER_HISTORY = 10_000
#: (low, high) of each numeric trigger option.
TRIGGER_RANGES: dict[str, tuple[float, float]] = {
    "trigger_factor": (1.0, MAX_TRIGGER_FACTOR),
    "trigger_mads": (0.0, MAX_TRIGGER_MADS),
    "trigger_floor_ms": (0.0, MAX_TRIGGER_FLOOR_MS),
    "trigger_budget": (0.0, 1.0),
    "trigger_history": (5, MAX_TRIGGER_HISTORY),
    "trigger_min_steps": (3, MAX_COUNT),
    "trigger_interval": (0, MAX_COUNT),
}
_TRIGGER_INTS = ("trigger_history", "trigger_min_steps", "trigger_interval")


def _plain_int(v: Any) -> int | None:
    """``v`` as a plain int if it is an integer (not a bool), else None. Only its type is asked (``isinstance``
    would ask the object its ``__class__``), and an int subclass is made a plain int before anything compares
    it: its comparisons, ``__index__`` and ``__int__`` are its own, and may raise or lie."""
    t = type(v)
    return int.__int__(v) if issubclass(t, int) and t is not bool else None


def _plain_float(v: Any) -> float | None:
    """``v`` as a plain float if it is a finite number (an int or a float, not a bool), else None."""
    if issubclass(type(v), float):
        x = float.__float__(v)
    else:
        n = _plain_int(v)
        if n is None or abs(n) > sys.float_info.max:  # 10**400 is an int no float holds
            return None
        x = float(n)
    return x if math.isfinite(x) else None


def _plain_str(v: Any) -> str | None:
    """``v`` as a plain str if it is one (a str subclass's methods are its own), else None."""
    return str.__str__(v) if issubclass(type(v), str) else None


def _show(v: Any) -> str:
    """A value for a one-line error message: its repr on one line, cut short."""
    try:
        text = " ".join(str.split(str.__str__(repr(v))))
    except Exception:  # a repr that raises, is not a str, or recurses (a list nested too deeply)
        try:
            text = f"<{str.__str__(type(v).__name__)}>"
        except Exception:  # a metaclass's __name__ of its own
            text = "<a value that cannot be shown>"
    return text if len(text) <= 80 else text[:77] + "..."


def _check_int(key: str, value: Any, low: int, high: int) -> int:
    n = _plain_int(value)
    if n is None or not low <= n <= high:
        raise ConfigError(f"{key} must be an integer from {low} to {high}, not {_show(value)}")
    return n


def _is_logger(obj: Any) -> bool:
    if issubclass(type(obj), logging.Logger):
        return True
    try:
        return all(callable(getattr(obj, m, None)) for m in ("info", "warning", "error"))
    except Exception:
        return False


def check_schedule_value(key: str, value: Any) -> int:
    low = 1 if key == "active" else 0  # repeat=0: windows forever
    return _check_int(key, value, low, MAX_ACTIVE if key == "active" else MAX_COUNT)


def _reject(key: str, value: Any) -> ConfigError:
    return ConfigError(f"{key} must be {ACCEPTS[key]}, not {_show(value)}")


def _check_bool(key: str) -> Any:
    def check(value: Any) -> bool:
        if type(value) is not bool:
            raise _reject(key, value)
        return value

    return check


def _check_schedule(key: str) -> Any:
    def check(value: Any) -> int:
        return check_schedule_value(key, value)

    return check


def _check_path(key: str) -> Any:
    def check(value: Any) -> str | None:
        if value is None:
            return None
        text = _plain_str(value)
        if text is None and issubclass(type(value), os.PathLike):
            text = _plain_str(os.fspath(value))  # a bytes path is not one; a __fspath__ that raises: _accepted
        if text is None or not text.strip() or "\0" in text:
            raise _reject(key, value)
        try:
            # Where it is given (the environment: where the run started): a later os.chdir (Hydra's) moves nothing.
            return os.path.abspath(text)
        except OSError:  # the working directory is gone: as given
            return text

    return check


def _check_ranks(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not issubclass(type(value), (tuple, list, set, frozenset)):
        raise _reject("ranks", value)
    ranks = set()
    for r in tuple(value):
        n = _plain_int(r)
        if n is None or not 0 <= n <= MAX_RANK:
            raise _reject("ranks", value)
        ranks.add(n)
    return tuple(sorted(ranks))


def _check_peaks(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    items = list(dict.items(value)) if issubclass(type(value), dict) else []
    peaks = {}
    for k, v in items:
        name, x = _plain_str(k), _plain_float(v)
        if name is not None and x is not None and x > 0:
            peaks[name] = x
    if len(items) != 2 or set(peaks) != {"flops_per_s", "bytes_per_s"}:
        raise _reject("peaks", value)
    return peaks


def _check_noise_floor(value: Any) -> float:
    x = _plain_float(value)
    if x is None or not 0 <= x <= MAX_NOISE_FLOOR:
        raise _reject("noise_floor", value)
    return x


def _check_timeout(value: Any) -> float:
    x = _plain_float(value)
    if x is None or not 0 <= x <= MAX_CROSS_RANK_TIMEOUT_S:
        raise _reject("cross_rank_timeout_s", value)
    return x


def _check_trigger_number(key: str) -> Any:
    low, high = TRIGGER_RANGES[key]

    def check(value: Any) -> float | int:
        if key in _TRIGGER_INTS:
            return _check_int(key, value, int(low), int(high))
        x = _plain_float(value)
        if x is None or not low <= x <= high:
            raise _reject(key, value)
        return x

    return check


def _check_logger(value: Any) -> Any:
    if value is not None and not _is_logger(value):
        raise _reject("logger", value)
    return value


FORMATS = ("auto", "json", "console")


def _check_format(value: Any) -> str:
    text = _plain_str(value)
    if text not in FORMATS:
        raise _reject("format", value)
    return text


def _check_top_ops(value: Any) -> int:
    return _check_int("top_ops", value, 0, MAX_TOP_OPS)


def _check_rules(value: Any) -> tuple[Any, ...]:
    if not issubclass(type(value), (tuple, list)):
        raise _reject("rules", value)
    rules = tuple(value)
    seen: set[str] = set()
    for fn in rules:
        rule_id = _plain_str(getattr(fn, "rule_id", None))
        if not callable(fn) or rule_id is None or not issubclass(type(getattr(fn, "verdicts", None)), tuple):
            raise ConfigError(f"rules: {_show(fn)} is not a rule: declare it with @autoprof.rule(id, verdicts=...)")
        # the declaration as @autoprof.rule checks it: an id set or changed by hand (a built-in one, an undotted one)
        # is refused here too, not only when the rule runs
        problem = declaration_problem(rule_id, getattr(fn, "verdicts", None))
        if problem is not None:
            raise ConfigError(f"rules: {problem}")
        if rule_id in seen:
            raise ConfigError(f"rules: two rules have the id {_show(rule_id)}")
        seen.add(rule_id)
    return rules


#: What each field accepts, as its ConfigError says: "<field> must be <this>, not <the value>".
ACCEPTS: dict[str, str] = {
    **{key: "True or False" for key in ("enabled", "record_shapes", "profile_memory", "background", "report", "trigger")},
    **{key: f"an integer from {1 if key == 'active' else 0} to {MAX_ACTIVE if key == 'active' else MAX_COUNT}" for key in SCHEDULE_KEYS},
    "top_ops": f"an integer from 0 to {MAX_TOP_OPS}",
    "sink": "a non-empty path or None",
    "format": "'auto', 'json' or 'console'",
    "trace_dir": "a non-empty path or None",
    "logger": "a logging.Logger or a structlog logger (callable info, warning and error)",
    "ranks": f"a list of integers from 0 to {MAX_RANK}, or None",
    "peaks": "{'flops_per_s': F, 'bytes_per_s': B} with finite numbers > 0, or None",
    "noise_floor": f"a share of the window from 0 to {MAX_NOISE_FLOOR}",
    "cross_rank_timeout_s": f"a number of seconds from 0 to {MAX_CROSS_RANK_TIMEOUT_S:g}",
    "rules": "a list of rules (callables declared with autoprof.rule)",
    "trigger_factor": f"a number from 1 to {MAX_TRIGGER_FACTOR:g} (times the median step)",
    "trigger_mads": f"a number from 0 to {MAX_TRIGGER_MADS:g} (MADs above the median step)",
    "trigger_floor_ms": f"a number of milliseconds from 0 to {MAX_TRIGGER_FLOOR_MS:g}",
    "trigger_budget": "a share of the steps from 0 to 1",
    **{key: f"an integer from {int(TRIGGER_RANGES[key][0])} to {int(TRIGGER_RANGES[key][1])}" for key in _TRIGGER_INTS},
}

#: The one validator of each field, shared by :meth:`Config.validate` (``configure()``) and :func:`from_env`: a
#: value either passes here wherever it comes from, or never reaches a config. Each returns the value as the
#: config holds it (a plain int, float or str; ranks a sorted tuple; a path a str; rules a tuple).
CHECKS: dict[str, Any] = {
    "enabled": _check_bool("enabled"),
    "record_shapes": _check_bool("record_shapes"),
    "profile_memory": _check_bool("profile_memory"),
    "background": _check_bool("background"),
    "report": _check_bool("report"),
    "trigger": _check_bool("trigger"),
    **{key: _check_trigger_number(key) for key in TRIGGER_RANGES},
    "rules": _check_rules,
    **{key: _check_schedule(key) for key in SCHEDULE_KEYS},
    "sink": _check_path("sink"),
    "format": _check_format,
    "trace_dir": _check_path("trace_dir"),
    "logger": _check_logger,
    "top_ops": _check_top_ops,
    "ranks": _check_ranks,
    "peaks": _check_peaks,
    "noise_floor": _check_noise_floor,
    "cross_rank_timeout_s": _check_timeout,
}


def _accepted(key: str, value: Any) -> Any:
    """``value`` as the config holds it, by the field's check in :data:`CHECKS`: whatever that check did not
    foresee (an object whose ``__iter__``, ``__fspath__`` or attributes raise) is a :class:`ConfigError` too."""
    try:
        return CHECKS[key](value)
    except ConfigError:
        raise
    except Exception:
        raise _reject(key, value) from None


_warned: set[str] = set()


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside autoprof and the import machinery:
    the user's ``import autoprof`` or ``configure()``, not autoprof's own line."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name  # warnings skips these itself: not counted
        if not internal and not os.path.abspath(name).startswith(package + os.sep):
            break
        frame = frame.f_back  # type: ignore[assignment]
        level += 0 if internal else 1
    return level


def _warn_once(name: str, message: str) -> None:
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"autoprof: {message}", RuntimeWarning, stacklevel=user_stacklevel())


def parse_bool(name: str, raw: str | None, default: bool) -> bool:
    """Parse a boolean environment variable as OpenTelemetry does: only "true"/"false",
    case-insensitive; anything else warns once and keeps the default."""
    text = _plain_str(raw)
    if raw is None or (text is not None and text.strip() == ""):
        return default
    v = text.strip().lower() if text is not None else None
    if v == "true":
        return True
    if v == "false":
        return False
    _warn_once(name, f"{name}={_show(raw)} is not 'true' or 'false'; using the default ({str(default).lower()})")
    return default


def _parse_ranks(raw: str) -> tuple[int, ...] | None:
    if raw.strip().lower() == "all":
        return None
    return tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))


#: Environment variable -> (field, parser of its text). A parsed value passes the field's check in :data:`CHECKS`
#: like any value given to ``configure()``; one that does not warns once and keeps the default.
ENV: dict[str, tuple[str, Any]] = {
    "AUTOPROF_LOG": ("sink", str),
    "AUTOPROF_FORMAT": ("format", str.lower),
    "AUTOPROF_TRACE_DIR": ("trace_dir", str),
    "AUTOPROF_RANKS": ("ranks", _parse_ranks),
    "AUTOPROF_CROSS_RANK_TIMEOUT": ("cross_rank_timeout_s", float),
    "AUTOPROF_NOISE_FLOOR": ("noise_floor", float),
    **{f"AUTOPROF_{key.upper()}": (key, int) for key in SCHEDULE_KEYS},
    **{f"AUTOPROF_{key.upper()}": (key, int if key in _TRIGGER_INTS else float) for key in TRIGGER_RANGES},
}
_BOOL_ENV = {
    "AUTOPROF_RECORD_SHAPES": "record_shapes",
    "AUTOPROF_PROFILE_MEMORY": "profile_memory",
    "AUTOPROF_BACKGROUND": "background",
    "AUTOPROF_REPORT": "report",
    "AUTOPROF_TRIGGER": "trigger",
}


def from_env(env: dict[str, str] | os._Environ[str] | None = None) -> Config:
    """The configuration the environment asks for. Each value passes the same validator as ``configure()``'s
    (:data:`CHECKS`); a bad one warns once (at the user's line) and keeps the default."""
    environ = os.environ if env is None else env
    defaults = Config()
    values: dict[str, Any] = {"enabled": not parse_bool("AUTOPROF_DISABLE", environ.get("AUTOPROF_DISABLE"), False)}
    for name, key in _BOOL_ENV.items():
        values[key] = parse_bool(name, environ.get(name), getattr(defaults, key))
    for name, (key, parse) in ENV.items():
        raw = environ.get(name)
        text = _plain_str(raw)
        if raw is None or (text is not None and text.strip() == ""):
            continue
        try:
            if text is None:
                raise ValueError("not text")
            values[key] = _accepted(key, parse(text.strip()) if parse is not str else text)
        except Exception as e:  # its parser's ValueError, OverflowError, ...: any is a warning, never an exception
            reason = str(e) if isinstance(e, ConfigError) else f"{key} cannot be read from it"
            _warn_once(name, f"{name}={_show(raw)} is rejected ({reason}); using the default ({_show(getattr(defaults, key))})")
    return Config(**values)


class _Switch:
    """The one mutable holder of the current :class:`Config` (like stamina's ``_config``)."""

    __slots__ = ("config", "enabled")

    def __init__(self) -> None:
        self.config = from_env()
        self.enabled = self.config.enabled  # read on every call: a plain attribute, not a property

    def set(self, cfg: Config) -> None:
        self.config = cfg
        self.enabled = cfg.enabled


SWITCH = _Switch()


class Options(TypedDict, total=False):
    """The keyword arguments :func:`configure` takes (for type checkers; each is a :class:`Config` field, and
    ``sink``/``trace_dir`` also take a path, ``ranks`` any collection of ints)."""

    enabled: bool
    sink: str | PathLike[str] | None
    format: str
    logger: Any
    trace_dir: str | PathLike[str] | None
    record_shapes: bool
    profile_memory: bool
    skip_first: int
    wait: int
    warmup: int
    active: int
    repeat: int
    background: bool
    top_ops: int
    ranks: tuple[int, ...] | list[int] | set[int] | frozenset[int] | None
    cross_rank_timeout_s: float
    peaks: dict[str, float] | None
    noise_floor: float
    report: bool
    rules: Sequence[Any]
    trigger: bool
    trigger_factor: float
    trigger_mads: float
    trigger_floor_ms: float
    trigger_history: int
    trigger_min_steps: int
    trigger_budget: float
    trigger_interval: int


def configure(**options: Unpack[Options]) -> Config:
    """Change process-wide settings; returns the new :class:`Config`.

    Options (:class:`Options`): ``enabled``, ``sink`` (path), ``format`` (``"auto"``, ``"json"``, ``"console"``),
    ``logger``, ``trace_dir``, ``record_shapes``,
    ``profile_memory``, ``background``, ``top_ops``, ``ranks``, ``cross_rank_timeout_s``, ``peaks``, ``noise_floor``, ``report``, ``rules``
    (a user's own rules, declared with ``autoprof.rule``), the schedule
    defaults ``skip_first``, ``wait``, ``warmup``, ``active``, ``repeat``, and the trigger's (a window when a step is
    slow): ``trigger``, ``trigger_factor``, ``trigger_mads``, ``trigger_floor_ms``, ``trigger_history``,
    ``trigger_min_steps``, ``trigger_budget``, ``trigger_interval``.
    Raises :class:`ConfigError` (a ``ValueError``) with one line on a bad option; nothing changes then.
    """
    cfg = SWITCH.config.replace(**options)  # each field's check makes a path a str, ranks and rules tuples
    SWITCH.set(cfg)  # the records follow: emit reads the current sink and logger at each record
    return cfg


def _reset_for_tests() -> None:  # pragma: no cover - used by the test-suite only
    _warned.clear()
    SWITCH.set(from_env())


__all__ = ["SWITCH", "TRIGGER_KEYS", "Config", "ConfigError", "configure", "from_env", "parse_bool"]
