"""autoprof's own structlog logger. It never calls ``structlog.configure`` nor touches the host's logging
configuration: records go through a private processor chain to stderr, a file, or a logger the host hands
over with ``configure(logger=...)``."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import MutableMapping
from typing import IO, Any

import structlog

from autoprof.config import SWITCH
from autoprof.findings import SCHEMA_VERSION

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "critical": logging.CRITICAL}
_HOST = socket.gethostname()
_lock = threading.Lock()
_out: dict[str, Any] = {}


def dist_info() -> tuple[int, int, int]:
    """(rank, local_rank, world_size): torch.distributed when initialized, else torchrun's env, else 0, 0, 1."""
    rank = local = None
    world = None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = int(dist.get_rank()), int(dist.get_world_size())
    except Exception:
        rank = world = None
    env = os.environ
    try:
        if rank is None:
            rank = int(env.get("RANK", "0"))
        if world is None:
            world = int(env.get("WORLD_SIZE", "1"))
        local = int(env.get("LOCAL_RANK", str(rank if world == 1 else 0)))
    except ValueError:
        rank, local, world = rank or 0, 0, world or 1
    return rank, local, world


def add_base_fields(_logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Processor: the fields every record carries."""
    rank, local, world = dist_info()
    base = {
        "event": event_dict.pop("event"),
        "schema_version": SCHEMA_VERSION,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "level": method,
        "target": event_dict.pop("target", None),
        "window": event_dict.pop("window", None),
        "rank": rank,
        "local_rank": local,
        "world_size": world,
        "pid": os.getpid(),
        "host": _HOST,
    }
    base.update(event_dict)
    return base


def _default(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def render_json(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    return json.dumps(event_dict, default=_default, separators=(",", ":"), allow_nan=False)


class _LineWriter:
    """The logger at the end of the private chain: writes one line per record, thread-safely."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def _file(self) -> IO[str]:
        if self.path is None:
            return sys.stderr
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        return self._fh

    def msg(self, line: str) -> None:
        with _lock:
            f = self._file()
            f.write(line + "\n")
            f.flush()

    debug = info = warning = error = critical = msg

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def reset_output() -> None:
    """Drop the cached output so the next record follows the current configuration."""
    w = _out.pop("writer", None)
    if isinstance(w, _LineWriter):
        w.close()
    _out.pop("logger", None)


def _logger() -> Any:
    log = _out.get("logger")
    if log is None:
        writer = _LineWriter(SWITCH.config.sink)
        log = structlog.wrap_logger(
            writer,
            processors=[add_base_fields, _sanitize, render_json],
            wrapper_class=structlog.BoundLogger,
            cache_logger_on_first_use=False,
        )
        _out["writer"] = writer
        _out["logger"] = log
    return log


def _sanitize(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Processor: JSON has no NaN/inf; such numbers become null."""
    for k, v in list(event_dict.items()):
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            event_dict[k] = None
    return event_dict


def build_record(event: str, level: str = "info", **fields: Any) -> dict[str, Any]:
    """The record as a dict (what the JSON line holds), without writing it."""
    d: dict[str, Any] = {"event": event, **fields}
    out = add_base_fields(None, level, d)
    return dict(_sanitize(None, level, out))


def emit(event: str, level: str = "info", **fields: Any) -> None:
    """Write one record. Never raises: a failing sink is reported once on stderr and dropped."""
    try:
        host = SWITCH.config.logger
        if host is not None:
            _to_host(host, event, level, fields)
            return
        getattr(_logger(), level)(event, **fields)
    except Exception as e:  # never raise into the user's code
        _fallback(event, e)


def _to_host(host: Any, event: str, level: str, fields: dict[str, Any]) -> None:
    rec = build_record(event, level, **fields)
    if isinstance(host, logging.Logger):
        host.log(_LEVELS.get(level, logging.INFO), json.dumps(rec, default=_default), extra={"autoprof": rec})
        return
    ev = rec.pop("event")
    getattr(host, level)(ev, **rec)


_fallback_warned: set[str] = set()


def _fallback(event: str, e: Exception) -> None:
    key = type(e).__name__
    if key in _fallback_warned:
        return
    _fallback_warned.add(key)
    try:
        sys.stderr.write(f"autoprof: could not write a record ({event}): {type(e).__name__}: {e}\n")
    except Exception:
        pass
