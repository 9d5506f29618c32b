"""One frozen :class:`Config`: defaults, environment variables, and the process-wide switch object.

No torch import here: reading the configuration must stay cheap and safe at import time.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from autoprof import _guard
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

FORMATS = ("auto", "json", "console")


class ConfigError(ValueError):
    """A bad option: the message is one line that names the option and what it accepts."""


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
    text: str | None = None
    with _guard.quiet("config.show"):  # a repr that raises, is not a str, or recurses (a list nested too deeply)
        text = " ".join(str.split(str.__str__(repr(v))))
    if text is None:
        with _guard.quiet("config.show"):  # a metaclass's __name__ of its own
            text = f"<{str.__str__(type(v).__name__)}>"
    if text is None:
        text = "<a value that cannot be shown>"
    return text if len(text) <= 80 else text[:77] + "..."


def _reject(key: str, value: Any) -> ConfigError:
    return ConfigError(f"{key} must be {ACCEPTS[key]}, not {_show(value)}")


# The checks: each takes (the option's name, a value) and returns the value as the config holds it (a plain int,
# float or str; ranks a sorted tuple; a path a str; rules a tuple), or raises ConfigError with one line.


def _check_int(key: str, value: Any, low: int, high: int) -> int:
    n = _plain_int(value)
    if n is None or not low <= n <= high:
        raise ConfigError(f"{key} must be an integer from {low} to {high}, not {_show(value)}")
    return n


def _check_bool(key: str, value: Any) -> bool:
    if type(value) is not bool:
        raise _reject(key, value)
    return value


def _check_path(key: str, value: Any) -> str | None:
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


def _check_format(key: str, value: Any) -> str:
    text = _plain_str(value)
    if text not in FORMATS:
        raise _reject(key, value)
    return text


def _is_logger(obj: Any) -> bool:
    if issubclass(type(obj), logging.Logger):
        return True
    with _guard.quiet("config.logger"):
        return all(callable(getattr(obj, m, None)) for m in ("info", "warning", "error"))
    return False


def _check_logger(key: str, value: Any) -> Any:
    if value is not None and not _is_logger(value):
        raise _reject(key, value)
    return value


def _check_ranks(key: str, value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not issubclass(type(value), (tuple, list, set, frozenset)):
        raise _reject(key, value)
    ranks = set()
    for r in tuple(value):
        n = _plain_int(r)
        if n is None or not 0 <= n <= MAX_RANK:
            raise _reject(key, value)
        ranks.add(n)
    return tuple(sorted(ranks))


def _check_peaks(key: str, value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    items = list(dict.items(value)) if issubclass(type(value), dict) else []
    peaks = {}
    for k, v in items:
        name, x = _plain_str(k), _plain_float(v)
        if name is not None and x is not None and x > 0:
            peaks[name] = x
    if len(items) != 2 or set(peaks) != {"flops_per_s", "bytes_per_s"}:
        raise _reject(key, value)
    return peaks


def _check_rules(key: str, value: Any) -> tuple[Any, ...]:
    if not issubclass(type(value), (tuple, list)):
        raise _reject(key, value)
    rules = tuple(value)
    seen: set[str] = set()
    for fn in rules:
        rule_id = _plain_str(getattr(fn, "rule_id", None))
        if not callable(fn) or rule_id is None or not issubclass(type(getattr(fn, "verdicts", None)), tuple):
            raise ConfigError(f"{key}: {_show(fn)} is not a rule: declare it with @autoprof.rule(id, verdicts=...)")
        # the declaration as @autoprof.rule checks it: an id set or changed by hand (a built-in one, an undotted one)
        # is refused here too, not only when the rule runs
        problem = declaration_problem(rule_id, getattr(fn, "verdicts", None))
        if problem is not None:
            raise ConfigError(f"{key}: {problem}")
        if rule_id in seen:
            raise ConfigError(f"{key}: two rules have the id {_show(rule_id)}")
        seen.add(rule_id)
    return rules


def _parse_ranks(raw: str) -> tuple[int, ...] | None:
    if raw.strip().lower() == "all":
        return None
    return tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))


@dataclass(frozen=True)
class Kind:
    """What values an option takes: its check, the words its :class:`ConfigError` says it accepts ("<option> must
    be <accepts>, not <the value>"), and how its environment variable's text is read (``None``: a boolean, read
    by :func:`parse_bool`). ``low``/``high``: a numeric option's range."""

    accepts: str
    check: Callable[[str, Any], Any]
    parse: Callable[[str], Any] | None
    low: float | None = None
    high: float | None = None


BOOLEAN = Kind("True or False", _check_bool, None)
PATH = Kind("a non-empty path or None", _check_path, lambda text: text)  # the text as given: a path may end in a space


def integer(low: int, high: int) -> Kind:
    """A whole number from ``low`` to ``high`` (not a bool)."""

    def check(key: str, value: Any) -> int:
        return _check_int(key, value, low, high)

    return Kind(f"an integer from {low} to {high}", check, lambda text: int(text.strip()), low, high)


def number(low: float, high: float, accepts: str) -> Kind:
    """A finite number from ``low`` to ``high`` (an int or a float, not a bool), held as a float."""

    def check(key: str, value: Any) -> float:
        x = _plain_float(value)
        if x is None or not low <= x <= high:
            raise _reject(key, value)
        return x

    return Kind(accepts, check, lambda text: float(text.strip()), low, high)


@dataclass(frozen=True)
class Option:
    """The one declaration of an option, held in its :class:`Config` field's metadata (see :func:`option`)."""

    kind: Kind
    #: One line for people: the options table of docs/options.md and ``configure``'s docstring.
    doc: str
    #: Its environment variable (None: none); ``negated``: the variable switches the option off (``AUTOPROF_DISABLE``).
    env: str | None = None
    negated: bool = False
    #: What ``configure()`` takes when wider than what the config holds (a path-like, any collection of ranks): the
    #: type of its line in :class:`Options`.
    takes: str | None = None
    #: The default as docs/options.md shows it, when its value does not say it well ("stderr", "all").
    shown: str | None = None
    #: A schedule option (also a keyword of ``@autoprof(...)`` and of the trainer integrations, per target).
    schedule: bool = False
    #: The trigger reads it (also a keyword of ``@autoprof(...)``, per target, over ``configure()``'s).
    trigger: bool = False


_T = TypeVar("_T")


def option(
    default: _T,
    kind: Kind,
    doc: str,
    *,
    env: str | None = None,
    negated: bool = False,
    takes: str | None = None,
    shown: str | None = None,
    schedule: bool = False,
    trigger: bool = False,
) -> _T:
    """A :class:`Config` field and everything about its option, declared once: its default, what it takes and its
    check (``kind``), its environment variable, its line of docs, and whether it is a schedule or trigger option.
    The lists that read options (:data:`CHECKS`, :data:`ACCEPTS`, :data:`ENV`, :data:`SCHEDULE_KEYS`,
    :data:`TRIGGER_KEYS`, :class:`Options`, docs/options.md) are made from these."""
    declared = Option(kind, doc, env, negated, takes, shown, schedule, trigger)
    return dataclasses.field(default=default, metadata={"option": declared})


@dataclass(frozen=True)
class Config:
    """Process-wide settings. Change them with :func:`autoprof.configure`. Each field is one option, declared once
    with :func:`option` (its check, environment variable and docs line sit in the field's metadata)."""

    enabled: bool = option(
        True,
        BOOLEAN,
        "off: decorating returns the original function; decorated calls pass straight through",
        env="AUTOPROF_DISABLE",
        negated=True,
        shown="on",
    )
    sink: str | None = option(
        None,
        PATH,
        "append the records as JSON lines to this file instead of stderr (a relative path is of the directory where "
        "it is given, the run's start for the environment variable, so a later `os.chdir`, Hydra's, moves nothing). A "
        "sink that takes no data (a FIFO nobody reads, a full pipe) costs the program at most one 1 s wait per stall: "
        "records are then dropped, with one stderr line, and counted at exit",
        env="AUTOPROF_LOG",
        takes="str | PathLike[str] | None",
        shown="stderr",
    )
    format: str = option(
        "auto",
        Kind("'auto', 'json' or 'console'", _check_format, lambda text: text.strip().lower()),
        "`auto`: text for a person when the records go to stderr and it is a terminal, else JSON lines; `json`: "
        "always JSON lines; `console`: always text (also into a sink file)",
        env="AUTOPROF_FORMAT",
    )
    logger: Any = option(  # noqa: RUF009 (option() is a dataclasses.field)
        None,
        Kind("a logging.Logger or a structlog logger (callable info, warning and error)", _check_logger, None),
        "send records into your structlog logger (through your processors) or stdlib `logging.Logger` (message = "
        'the JSON line, `extra={"autoprof": record}`) instead',
    )
    trace_dir: str | None = option(
        None,
        PATH,
        "keep each window (a relative path: of where it is given, as `sink`'s) as "
        "`<target>.window<N>.rank<R>.pt.trace.json.gz` (opens in Perfetto; `autoprof analyze` reads it with the live "
        "verdicts). `<target>` is the name percent-encoded (`kept/step` → `kept%2Fstep`; one name, one file; long "
        "names keep a prefix and a hash; a child process's, forked or started by `multiprocessing` (not a rank of "
        "its own, as `mp.spawn`'s are): `<target>.window<N>.rank<R>.pid<pid>.pt.trace.json.gz`)",
        env="AUTOPROF_TRACE_DIR",
        takes="str | PathLike[str] | None",
    )
    record_shapes: bool = option(
        True, BOOLEAN, "record input shapes (the fusion, FLOP and bmm rules need them)", env="AUTOPROF_RECORD_SHAPES"
    )
    profile_memory: bool = option(
        False,
        BOOLEAN,
        "record the allocator's events in windows (`torch.profiler`'s `profile_memory`) for the memory verdicts "
        "(`memory_peak`, `allocator_churn`, `memory_creep`; see [memory.md](memory.md)); off by default: it doubles "
        "a window's events; also a decorator option, `@autoprof(profile_memory=True)`",
        env="AUTOPROF_PROFILE_MEMORY",
    )
    wait: int = option(
        DEFAULT_WAIT,
        integer(0, MAX_COUNT),
        "schedule: steps waited (after `skip_first`) before each window's warmup",
        env="AUTOPROF_WAIT",
        schedule=True,
    )
    warmup: int = option(
        DEFAULT_WARMUP,
        integer(0, MAX_COUNT),
        "schedule: steps profiled and thrown away before each window's recorded steps (the profiler's first step carries start-up cost)",
        env="AUTOPROF_WARMUP",
        schedule=True,
    )
    active: int = option(
        DEFAULT_ACTIVE,
        integer(1, MAX_ACTIVE),
        "schedule: steps each window records (a window holds its steps' events in memory)",
        env="AUTOPROF_ACTIVE",
        schedule=True,
    )
    repeat: int = option(
        DEFAULT_REPEAT,
        integer(0, MAX_COUNT),
        "schedule: windows per target (0: windows forever)",
        env="AUTOPROF_REPEAT",
        schedule=True,
    )
    skip_first: int = option(
        DEFAULT_SKIP_FIRST,
        integer(0, MAX_COUNT),
        "schedule: calls skipped first (the cold first call: lazy init, autotuning, allocator growth)",
        env="AUTOPROF_SKIP_FIRST",
        schedule=True,
    )
    background: bool = option(
        True,
        BOOLEAN,
        "analyze windows on the background thread (false: on the calling thread; the training thread only stops the profiler)",
        env="AUTOPROF_BACKGROUND",
    )
    top_ops: int = option(10, integer(0, MAX_TOP_OPS), "rows of `top_ops` in window records")
    ranks: tuple[int, ...] | None = option(
        None,
        Kind(f"a list of integers from 0 to {MAX_RANK}, or None", _check_ranks, _parse_ranks),
        "ranks that record windows (the variable: `0,3`, or `all`); the others pay only the idle cost",
        env="AUTOPROF_RANKS",
        takes="tuple[int, ...] | list[int] | set[int] | frozenset[int] | None",
        shown="all",
    )
    cross_rank_timeout_s: float = option(
        30.0,
        number(0, MAX_CROSS_RANK_TIMEOUT_S, f"a number of seconds from 0 to {MAX_CROSS_RANK_TIMEOUT_S:g}"),
        "how long the comparing rank waits (on the background thread) for the other ranks' window summaries",
        env="AUTOPROF_CROSS_RANK_TIMEOUT",
    )
    peaks: dict[str, float] | None = option(  # noqa: RUF009 (option() is a dataclasses.field)
        None,
        Kind("{'flops_per_s': F, 'bytes_per_s': B} with finite numbers > 0, or None", _check_peaks, None),
        "roofline peaks override (else the GPU table, or the CPU's calibration)",
        shown="table / calibration",
    )
    noise_floor: float = option(
        0.01,
        number(0, MAX_NOISE_FLOOR, f"a share of the window from 0 to {MAX_NOISE_FLOOR}"),
        "findings about a share of the window (NCCL communication, unfused bias adds, a final sync, batched matmuls) "
        "below this share are not emitted: a finding about nothing is noise in a log pipeline",
        env="AUTOPROF_NOISE_FLOOR",
    )
    report: bool = option(
        False,
        BOOLEAN,
        "with `trace_dir`: at the end of the run, write `autoprof-report.rank<R>.html` of the traces this process kept, "
        "next to them (a child process's, forked or started by `multiprocessing`, not a rank of its own: "
        "`autoprof-report.rank<R>.pid<pid>.html`; see `autoprof report` in "
        "[offline.md](offline.md); needs `autoprof[report]`, else one error record)",
        env="AUTOPROF_REPORT",
    )
    rules: tuple[Any, ...] = option(
        (),
        Kind("a list of rules (callables declared with autoprof.rule)", _check_rules, None),
        "your own rules (callables declared with `autoprof.rule`), run after the built-in ones, live and offline; "
        "each call at most 10 s, on a read-only trace; also an option of the trainer integrations",
        takes="Sequence[Any]",
        shown="none",
    )
    trigger: bool = option(
        False,
        BOOLEAN,
        "open a window by itself when steps turn slower than the run's own normal (see [trigger.md](trigger.md)); off "
        "by default: a run's windows stay the schedule's unless asked; also a decorator option, like every `trigger_*`",
        env="AUTOPROF_TRIGGER",
        trigger=True,
    )
    trigger_factor: float = option(
        2.0,
        number(1, MAX_TRIGGER_FACTOR, f"a number from 1 to {MAX_TRIGGER_FACTOR:g} (times the median step)"),
        "a slow step is at least this many times the baseline's median step (and `trigger_mads` MADs and `trigger_floor_ms` above it)",
        env="AUTOPROF_TRIGGER_FACTOR",
        trigger=True,
    )
    trigger_mads: float = option(
        6.0,
        number(0, MAX_TRIGGER_MADS, f"a number from 0 to {MAX_TRIGGER_MADS:g} (MADs above the median step)"),
        "a slow step is at least this many MADs (median absolute deviations) above the baseline's median step",
        env="AUTOPROF_TRIGGER_MADS",
        trigger=True,
    )
    trigger_history: int = option(
        50,
        integer(5, MAX_TRIGGER_HISTORY),
        "the baseline is the median and MAD of this many recent unprofiled steps",
        env="AUTOPROF_TRIGGER_HISTORY",
        trigger=True,
    )
    trigger_min_steps: int = option(
        20, integer(3, MAX_COUNT), "steps of history before any trigger", env="AUTOPROF_TRIGGER_MIN_STEPS", trigger=True
    )
    trigger_budget: float = option(
        0.05,
        number(0, 1, "a share of the steps from 0 to 1"),
        "triggered windows record (warmup and active) at most this share of the target's steps",
        env="AUTOPROF_TRIGGER_BUDGET",
        trigger=True,
    )
    trigger_interval: int = option(
        200,
        integer(0, MAX_COUNT),
        "steps at least between two triggered windows: the next starts at least this many steps after one whose "
        "slowdown lasted (see [trigger.md](trigger.md))",
        env="AUTOPROF_TRIGGER_INTERVAL",
        trigger=True,
    )
    trigger_floor_ms: float = option(
        1.0,
        number(0, MAX_TRIGGER_FLOOR_MS, f"a number of milliseconds from 0 to {MAX_TRIGGER_FLOOR_MS:g}"),
        "a slow step is at least this many milliseconds above the baseline's median step (below, a window could not show the difference)",
        env="AUTOPROF_TRIGGER_FLOOR_MS",
        trigger=True,
    )

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes``, each as its field's check (:data:`CHECKS`) returns it; raises
        :class:`ConfigError` (one line) on an unknown or bad option."""
        changes = {str.__str__(key): value for key, value in changes.items()}  # a str subclass's hash is its own
        unknown = set(changes) - set(OPTIONS)
        if unknown:
            raise ConfigError(f"unknown option(s): {', '.join(sorted(k if k.isidentifier() else _show(k) for k in unknown))}")
        cfg = dataclasses.replace(self, **{key: _accepted(key, value) for key, value in changes.items()})
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Every option, checked by the one validator per field (:data:`CHECKS`, which the environment's values pass
        too); the first bad one raises :class:`ConfigError` with one line."""
        for key in OPTIONS:
            _accepted(key, getattr(self, key))


# Everything below is read from the fields' declarations: nothing here names an option.

#: Each option's declaration, by name, in field order.
OPTIONS: dict[str, Option] = {f.name: f.metadata["option"] for f in dataclasses.fields(Config)}
#: The schedule's options, per target (``@autoprof(...)``, the trainer integrations); the same process-wide.
SCHEDULE_KEYS = tuple(key for key, opt in OPTIONS.items() if opt.schedule)
#: The trigger's options (a window when a step is slower than the run's own normal, see :mod:`autoprof.live.trigger`):
#: process-wide through ``configure()``, and per target through ``@autoprof(...)``.
TRIGGER_KEYS = tuple(key for key, opt in OPTIONS.items() if opt.trigger)
#: What each field accepts, as its ConfigError says: "<field> must be <this>, not <the value>".
ACCEPTS: dict[str, str] = {key: opt.kind.accepts for key, opt in OPTIONS.items()}
#: The one validator of each field, shared by :meth:`Config.validate` (``configure()``) and :func:`from_env`: a
#: value either passes here wherever it comes from, or never reaches a config. Each returns the value as the
#: config holds it (a plain int, float or str; ranks a sorted tuple; a path a str; rules a tuple).
CHECKS: dict[str, Callable[[Any], Any]] = {key: functools.partial(opt.kind.check, key) for key, opt in OPTIONS.items()}
#: (low, high) of each numeric trigger option.
TRIGGER_RANGES: dict[str, tuple[float, float]] = {
    key: (opt.kind.low, opt.kind.high)
    for key, opt in OPTIONS.items()
    if opt.trigger and opt.kind.low is not None and opt.kind.high is not None
}
#: Environment variable -> (field, parser of its text), for the options that are not booleans. A parsed value
#: passes the field's check in :data:`CHECKS` like any value given to ``configure()``; one that does not warns once
#: and keeps the default.
ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    opt.env: (key, opt.kind.parse) for key, opt in OPTIONS.items() if opt.env is not None and opt.kind.parse is not None
}
#: Environment variable -> field, for the booleans (read by :func:`parse_bool`; a negated one switches it off).
_BOOL_ENV: dict[str, str] = {opt.env: key for key, opt in OPTIONS.items() if opt.env is not None and opt.kind.parse is None}


def check_schedule_value(key: str, value: Any) -> int:
    """A schedule option's value (``@autoprof(active=...)``), checked as ``configure()`` checks it."""
    checked: int = CHECKS[key](value)
    return checked


def _accepted(key: str, value: Any) -> Any:
    """``value`` as the config holds it, by the field's check in :data:`CHECKS`: whatever that check did not
    foresee (an object whose ``__iter__``, ``__fspath__`` or attributes raise) is a :class:`ConfigError` too."""
    try:
        return CHECKS[key](value)
    except ConfigError:
        raise
    except Exception:
        raise _reject(key, value) from None


def _from_text(key: str, parse: Callable[[str], Any], text: str | None) -> Any:
    """``key``'s value from its environment variable's ``text``, as the config holds it: text its parser cannot
    read (a ``ValueError``, an ``OverflowError``, ...) is a :class:`ConfigError`, as a value its check refuses is."""
    try:
        if text is None:
            raise ValueError("not text")
        return _accepted(key, parse(text))
    except ConfigError:
        raise
    except Exception:
        raise ConfigError(f"{key} cannot be read from it") from None


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


def from_env(env: dict[str, str] | os._Environ[str] | None = None) -> Config:
    """The configuration the environment asks for (each option's ``env`` in its declaration). Each value passes the
    same validator as ``configure()``'s (:data:`CHECKS`); a bad one warns once (at the user's line) and keeps the
    default."""
    environ = os.environ if env is None else env
    values: dict[str, Any] = {}
    for key, opt in OPTIONS.items():
        name = opt.env
        if name is None:
            continue
        default = _DEFAULTS[key]
        if opt.kind.parse is None:  # a boolean
            values[key] = parse_bool(name, environ.get(name), default != opt.negated) != opt.negated
            continue
        raw = environ.get(name)
        text = _plain_str(raw)
        if raw is None or (text is not None and text.strip() == ""):
            continue
        try:
            values[key] = _from_text(key, opt.kind.parse, text)
        except ConfigError as e:  # a warning, never an exception
            _warn_once(name, f"{name}={_show(raw)} is rejected ({e}); using the default ({_show(default)})")
    return Config(**values)


_DEFAULTS: dict[str, Any] = {key: getattr(Config(), key) for key in OPTIONS}


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
    """The keyword arguments :func:`configure` takes (for type checkers): one line per :class:`Config` field, made
    from the field's declaration (its type, or the wider one ``configure()`` takes: ``sink`` and ``trace_dir`` a
    path, ``ranks`` any collection of ints); ``python tests/test_options.py --write`` writes them, and that test
    checks them."""

    # generated from Config's declarations: do not edit by hand
    enabled: bool
    sink: str | PathLike[str] | None
    format: str
    logger: Any
    trace_dir: str | PathLike[str] | None
    record_shapes: bool
    profile_memory: bool
    wait: int
    warmup: int
    active: int
    repeat: int
    skip_first: int
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
    trigger_history: int
    trigger_min_steps: int
    trigger_budget: float
    trigger_interval: int
    trigger_floor_ms: float
    # end of the generated lines


def configure(**options: Unpack[Options]) -> Config:
    """Change process-wide settings; returns the new :class:`Config`.

    Each keyword is a :class:`Config` field (typed by :class:`Options`; docs/options.md lists each with its
    environment variable and default): its name and what it accepts, below.
    Raises :class:`ConfigError` (a ``ValueError``) with one line on a bad option; nothing changes then.
    """
    cfg = SWITCH.config.replace(**options)  # each field's check makes a path a str, ranks and rules tuples
    SWITCH.set(cfg)  # the records follow: emit reads the current sink and logger at each record
    return cfg


def _option_lines() -> str:
    """``configure``'s docstring's list of options, one line each, from their declarations."""
    return "\n".join(f"    ``{key}``: {opt.kind.accepts}." for key, opt in OPTIONS.items())


if configure.__doc__ is not None:  # None under python -OO
    configure.__doc__ = configure.__doc__.rstrip() + "\n\n    Options:\n\n" + _option_lines() + "\n"


def _reset_for_tests() -> None:  # pragma: no cover - used by the test-suite only
    _warned.clear()
    SWITCH.set(from_env())


__all__ = ["SWITCH", "TRIGGER_KEYS", "Config", "ConfigError", "configure", "from_env", "option", "parse_bool"]
