"""One frozen :class:`Config`: defaults, environment variables, and the process-wide switch object.

No torch import here: reading the configuration must stay cheap and safe at import time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

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
    #: Keep each window as a gzipped chrome trace in this directory.
    trace_dir: str | None = None
    record_shapes: bool = True
    skip_first: int = DEFAULT_SKIP_FIRST
    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    repeat: int = DEFAULT_REPEAT
    #: Analyse windows on a background thread (the training thread only stops the profiler).
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

    def replace(self, **changes: Any) -> Config:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown option(s): {', '.join(sorted(unknown))}")
        cfg = dataclasses.replace(self, **changes)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Every option, checked; the first bad one raises :class:`ConfigError` with one line."""
        for key in SCHEDULE_KEYS:
            check_schedule_value(key, getattr(self, key))
        for key in ("enabled", "record_shapes", "background"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"{key} must be True or False, not {_show(getattr(self, key))}")
        _check_int("top_ops", self.top_ops, 0, MAX_TOP_OPS)
        if self.ranks is not None and (not isinstance(self.ranks, tuple) or not all(_is_int(r) and 0 <= r <= MAX_RANK for r in self.ranks)):
            raise ConfigError(f"ranks must be a list of integers from 0 to {MAX_RANK}, or None, not {_show(self.ranks)}")
        if self.peaks is not None and not (
            isinstance(self.peaks, dict)
            and set(self.peaks) == {"flops_per_s", "bytes_per_s"}
            and all(_is_finite_number(v) and v > 0 for v in self.peaks.values())
        ):
            raise ConfigError(
                f"peaks must be {{'flops_per_s': F, 'bytes_per_s': B}} with finite numbers > 0, or None, not {_show(self.peaks)}"
            )
        if not _is_finite_number(self.noise_floor) or not 0 <= self.noise_floor <= MAX_NOISE_FLOOR:
            raise ConfigError(f"noise_floor must be a share of the window from 0 to {MAX_NOISE_FLOOR}, not {_show(self.noise_floor)}")
        timeout = self.cross_rank_timeout_s
        if not _is_finite_number(timeout) or not 0 <= timeout <= MAX_CROSS_RANK_TIMEOUT_S:
            raise ConfigError(
                f"cross_rank_timeout_s must be a number of seconds from 0 to {MAX_CROSS_RANK_TIMEOUT_S:g}, not {_show(timeout)}"
            )
        for key in ("sink", "trace_dir"):
            val = getattr(self, key)
            if val is not None and (not isinstance(val, (str, os.PathLike)) or not os.fspath(val) or "\0" in os.fspath(val)):
                raise ConfigError(f"{key} must be a non-empty path or None, not {_show(val)}")
        if self.logger is not None and not _is_logger(self.logger):
            raise ConfigError(
                f"logger must be a logging.Logger or a structlog logger (callable info, warning and error), not {_show(self.logger)}"
            )


#: Upper bounds: a value past them is a mistake, not a wish (``active=10**100`` would record forever and hold
#: every event in memory). ``active`` bounds how many steps one window holds in memory.
MAX_ACTIVE = 1000
MAX_COUNT = 10**9  # skip_first, wait, warmup, repeat: call counts
MAX_TOP_OPS = 1000
MAX_RANK = 10**7
MAX_CROSS_RANK_TIMEOUT_S = 3600.0
MAX_NOISE_FLOOR = 0.5


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_finite_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _show(v: Any) -> str:
    """A value for a one-line error message: its repr on one line, cut short."""
    try:
        text = " ".join(repr(v).split())
    except Exception:
        text = f"<{type(v).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _check_int(key: str, value: Any, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:
        raise ConfigError(f"{key} must be an integer from {low} to {high}, not {_show(value)}")
    return int(value)


def _is_logger(obj: Any) -> bool:
    if isinstance(obj, logging.Logger):
        return True
    try:
        return all(callable(getattr(obj, m, None)) for m in ("info", "warning", "error"))
    except Exception:
        return False


def check_schedule_value(key: str, value: Any) -> int:
    low = 1 if key == "active" else 0  # repeat=0: windows forever
    return _check_int(key, value, low, MAX_ACTIVE if key == "active" else MAX_COUNT)


_warned: set[str] = set()


def parse_bool(name: str, raw: str | None, default: bool) -> bool:
    """Parse a boolean environment variable as OpenTelemetry does: only "true"/"false",
    case-insensitive; anything else warns once and keeps the default."""
    if raw is None or raw.strip() == "":
        return default
    v = raw.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"autoprof: {name}={raw!r} is not 'true' or 'false'; using the default ({str(default).lower()})",
            RuntimeWarning,
            stacklevel=3,
        )
    return default


def _env_int(env: dict[str, str] | os._Environ[str], name: str, key: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return check_schedule_value(key, int(raw.strip()))
    except (ValueError, ConfigError):
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"autoprof: {name}={raw!r} is not a valid {key}; using {default}", RuntimeWarning, stacklevel=3)
        return default


def _env_ranks(raw: str | None) -> tuple[int, ...] | None:
    if raw is None or raw.strip() == "" or raw.strip().lower() == "all":
        return None
    try:
        ranks = tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))
        if any(r < 0 for r in ranks):
            raise ValueError
        return ranks
    except ValueError:
        if "AUTOPROF_RANKS" not in _warned:
            _warned.add("AUTOPROF_RANKS")
            warnings.warn(
                f"autoprof: AUTOPROF_RANKS={raw!r} is not a comma-separated list of ranks; profiling all ranks",
                RuntimeWarning,
                stacklevel=3,
            )
        return None


def _env_float(env: dict[str, str] | os._Environ[str], name: str, default: float, high: float, what: str) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = float(raw)
        if not 0 <= v <= high:  # NaN and inf fail too
            raise ValueError
        return v
    except ValueError:
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"autoprof: {name}={raw!r} is not {what} from 0 to {high:g}; using {default}", RuntimeWarning, stacklevel=3)
        return default


def from_env(env: dict[str, str] | os._Environ[str] | None = None) -> Config:
    """The configuration the environment asks for. Bad values warn once and keep the default."""
    environ = os.environ if env is None else env
    disabled = parse_bool("AUTOPROF_DISABLE", environ.get("AUTOPROF_DISABLE"), False)
    sink = environ.get("AUTOPROF_LOG") or None
    trace_dir = environ.get("AUTOPROF_TRACE_DIR") or None
    ranks = _env_ranks(environ.get("AUTOPROF_RANKS"))
    timeout = _env_float(environ, "AUTOPROF_CROSS_RANK_TIMEOUT", 30.0, MAX_CROSS_RANK_TIMEOUT_S, "a number of seconds")
    return Config(
        ranks=ranks,
        cross_rank_timeout_s=timeout,
        enabled=not disabled,
        sink=sink,
        trace_dir=trace_dir,
        record_shapes=parse_bool("AUTOPROF_RECORD_SHAPES", environ.get("AUTOPROF_RECORD_SHAPES"), True),
        skip_first=_env_int(environ, "AUTOPROF_SKIP_FIRST", "skip_first", DEFAULT_SKIP_FIRST),
        wait=_env_int(environ, "AUTOPROF_WAIT", "wait", DEFAULT_WAIT),
        warmup=_env_int(environ, "AUTOPROF_WARMUP", "warmup", DEFAULT_WARMUP),
        active=_env_int(environ, "AUTOPROF_ACTIVE", "active", DEFAULT_ACTIVE),
        repeat=_env_int(environ, "AUTOPROF_REPEAT", "repeat", DEFAULT_REPEAT),
        background=parse_bool("AUTOPROF_BACKGROUND", environ.get("AUTOPROF_BACKGROUND"), True),
        noise_floor=_env_float(environ, "AUTOPROF_NOISE_FLOOR", 0.01, MAX_NOISE_FLOOR, "a share of the window"),
    )


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
    logger: Any
    trace_dir: str | PathLike[str] | None
    record_shapes: bool
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


def configure(**options: Unpack[Options]) -> Config:
    """Change process-wide settings; returns the new :class:`Config`.

    Options (:class:`Options`): ``enabled``, ``sink`` (path), ``logger``, ``trace_dir``, ``record_shapes``,
    ``background``, ``top_ops``, ``ranks``, ``cross_rank_timeout_s``, ``peaks``, ``noise_floor`` and the schedule
    defaults ``skip_first``, ``wait``, ``warmup``, ``active``, ``repeat``.
    Raises :class:`ConfigError` (a ``ValueError``) with one line on a bad option; nothing changes then.
    """
    values: dict[str, Any] = dict(options)
    for key in ("sink", "trace_dir"):
        if isinstance(values.get(key), Path):
            values[key] = str(values[key])
    if isinstance(values.get("ranks"), (list, set, frozenset)):
        values["ranks"] = tuple(sorted(values["ranks"]))
    cfg = SWITCH.config.replace(**values)
    SWITCH.set(cfg)  # the records follow: emit reads the current sink and logger at each record
    return cfg


def _reset_for_tests() -> None:  # pragma: no cover - used by the test-suite only
    _warned.clear()
    SWITCH.set(from_env())


__all__ = ["SWITCH", "Config", "ConfigError", "configure", "from_env", "parse_bool"]
