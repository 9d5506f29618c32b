"""autoprof's own structlog logger. It never calls ``structlog.configure`` nor touches the host's logging
configuration: records go through a private processor chain to stderr, a file, or a logger the host hands
over with ``configure(logger=...)``."""

from __future__ import annotations

import atexit
import datetime as _dt
import errno
import json
import logging
import math
import os
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import structlog

from autoprof import _guard
from autoprof.config import SWITCH
from autoprof.findings import SCHEMA_VERSION, Finding, record_level
from autoprof.render import text as _text
from autoprof.render.summary import Tally

#: The record events autoprof writes (``event`` field); the schema lists them too.
WINDOW_EVENT = "autoprof.window"
DIFF_EVENT = "autoprof.diff"
FINDING_EVENT = "autoprof.finding"
WARNING_EVENT = "autoprof.warning"
ERROR_EVENT = "autoprof.error"
#: The first record of a process (its run id: which run the records after it belong to) and its last (the summary).
RUN_EVENT = "autoprof.run"
SUMMARY_EVENT = "autoprof.summary"

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}
_HOST = socket.gethostname()
#: Held while a record's line is written. Re-entrant: a signal handler runs on the main thread between two bytecodes
#: of whatever runs there, so one that makes autoprof write a record (a decorated call whose window closes inline)
#: can land inside a write of its own thread, which a plain lock would wait for forever (see ``_LineWriter.msg``).
_lock = threading.RLock()
_out: dict[str, Any] = {}


def dist_info() -> tuple[int, int, int]:
    """(rank, local_rank, world_size): torch.distributed when initialized, else torchrun's env, else 0, 0, 1."""
    rank = local = None
    world = None
    dist = sys.modules.get("torch.distributed")
    with _guard.quiet("record.rank"):
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = int(dist.get_rank()), int(dist.get_world_size())
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


def line(record: Mapping[str, Any]) -> str:
    """A record as its JSON line (no newline): the one writer of records, live (the logger's last processor) and in
    the CLI's ``--json`` output. JSON has no NaN or infinity: a number such deep in a record (its top level is
    :func:`_sanitize`'s) is written null."""
    try:
        return json.dumps(record, default=_default, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(_finite(record), default=_default, separators=(",", ":"), allow_nan=False)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float in it (in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render_json(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    return line(event_dict)


def text_output() -> bool:
    """Whether autoprof's own writer writes text (for a person) rather than JSON lines: ``format="console"``, or
    ``"auto"`` (the default) with the records on stderr and stderr a terminal."""
    cfg = SWITCH.config
    if cfg.format != "auto":
        return cfg.format == "console"
    return cfg.sink is None and _isatty(sys.stderr)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError) as e:
        if _guard.from_signal_handler(e):
            raise  # the program's handler raised it
        return False


def render(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    """Processor, the last: the record's JSON line (:func:`line`, byte for byte what pipelines read), or its text
    (:func:`autoprof.render.text.record_lines`) where :func:`text_output` says a person reads it."""
    if not text_output():
        return line(event_dict)
    color = SWITCH.config.sink is None and _text.use_color(sys.stderr)
    return "\n".join(_text.record_lines(event_dict, color))


#: What the end-of-run summary says, fed every record autoprof writes (:func:`observe`).
TALLY = Tally()


def observe(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Processor: the record into :data:`TALLY` (the summary's memory); never drops or changes the record."""
    with _guard.quiet("record.tally"):
        TALLY.observe(event_dict)
    return event_dict


def window_fields(
    *,
    steps: Sequence[int],
    step_wall_ns: Sequence[int],
    top_ops: list[dict[str, Any]],
    sections: list[dict[str, Any]],
    event_count: int,
    costs: Mapping[str, Any],
    summary: Mapping[str, Any],
    live: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``autoprof.window`` record's own fields, live and offline (called by :mod:`autoprof.render.records`, the one
    builder of a window's records): the steps and their wall times, the top ops, the sections, the events, what the window cost the program
    (``costs``), the trace's reading (``summary``: :func:`autoprof.analysis.engine.window_summary`), then a live window's own
    fields (``live``: its target's calls, the kept trace, the trigger). Offline (``live`` None) the sections follow
    the costs, where that record has always had them: both records stay as they were, byte for byte."""
    fields: dict[str, Any] = {"steps": list(steps), "step_wall_ms": [round(ns / 1e6, 4) for ns in step_wall_ns], "top_ops": top_ops}
    if live is not None:
        fields["sections"] = sections
    fields["event_count"] = event_count
    fields.update(costs)
    if live is None:
        fields["sections"] = sections
    fields.update(summary)
    fields.update(live or {})
    return fields


#: How long one record may wait for a sink that does not take it (a FIFO nobody reads, a full pipe). After
#: that the sink counts as stalled: later records try once without waiting and are dropped (and counted)
#: until it takes data again, so a stalled sink costs the program at most this once per stall.
SINK_WAIT_S = 1.0


class _LineWriter:
    """The logger at the end of the private chain: writes one line per record, thread-safely, and never blocks
    the program for longer than :data:`SINK_WAIT_S` (the sink file is opened and written non-blocking)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fd = -1
        self.stalled = False
        self.dropped = 0
        self.busy = False  # a line is being written (by the thread that holds ``_lock``)
        self.queued: list[str] = []  # lines to write, in order: a signal handler's, given while its thread wrote, wait here
        self.close_after = False  # a close asked for while a line was being written: done once it is

    def _open(self, deadline: float) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        while True:
            try:
                return os.open(os.fspath(self.path), flags, 0o666)  # type: ignore[arg-type]
            except OSError as e:
                if e.errno != errno.ENXIO or time.monotonic() >= deadline:  # ENXIO: a FIFO with no reader yet
                    raise
                time.sleep(0.02)

    def _write(self, data: bytes, deadline: float) -> None:
        if self._fd < 0:
            self._fd = self._open(deadline)
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the sink {self.path} takes no data") from None
                select.select([], [self._fd], [], min(left, 0.05))

    def msg(self, line: str) -> None:
        with _lock:
            if self.busy:  # this thread is inside its own write (a signal handler's record): queued, written after it
                self.queued.append(line)
                return
            self.busy = True
            self.queued.append(line)
            try:
                while self.queued:  # (a write a handler's exception cut short leaves the rest to the next record)
                    self._line(self.queued.pop(0))
            finally:
                self.busy = False
                if self.close_after:
                    self.close()

    def _line(self, line: str) -> None:
        """Write one line (``msg``'s part, under ``_lock``)."""
        if self.path is None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            return
        deadline = time.monotonic() + (0.0 if self.stalled else SINK_WAIT_S)
        try:
            self._write((line + "\n").encode("utf-8"), deadline)
        except (OSError, TimeoutError) as e:
            if _guard.from_signal_handler(e):
                raise  # the program's handler raised it as the record was written: the sink is fine
            self.dropped += 1
            if not self.stalled:
                self.stalled = True
                _stderr_line(
                    f"autoprof: records to {self.path} are dropped while it takes no data "
                    f"({type(e).__name__}: {e}); a count follows at exit"
                )
            return
        if self.stalled:
            self.stalled = False
            _stderr_line(f"autoprof: {self.path} takes records again; {self.dropped} were dropped")

    debug = info = warning = error = critical = msg

    def close(self) -> None:
        with _lock:
            if self.busy:  # asked inside this thread's own write (a signal handler): closed once the write is done
                self.close_after = True
                return
            self.close_after = False
            if self.dropped:
                _stderr_line(f"autoprof: {self.dropped} record(s) could not be written to {self.path} and were dropped")
                self.dropped = 0
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _stderr_line(text: str) -> None:
    with _guard.quiet("record.stderr"):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def reset_output() -> None:
    """Drop the cached output so the next record follows the current configuration."""
    writer = _out.pop("writer", None)
    if isinstance(writer, _LineWriter):
        writer.close()
    _out.pop("logger", None)


def _logger() -> Any:
    log = _out.get("logger")
    writer = _out.get("writer")
    if log is not None and isinstance(writer, _LineWriter) and writer.path != SWITCH.config.sink:
        reset_output()  # the sink was configured anew: follow it (config never reaches into this module)
        log = None
    if log is None:
        writer = _LineWriter(SWITCH.config.sink)
        log = structlog.wrap_logger(
            writer,
            processors=[add_base_fields, _sanitize, observe, render],
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
    record: dict[str, Any] = {"event": event, **fields}
    out = add_base_fields(None, level, record)
    return dict(_sanitize(None, level, out))


def emit(event: str, level: str = "info", **fields: Any) -> None:
    """Write one record. Never raises: a failing sink is reported once on stderr and dropped."""
    with _guard.record(_fallback, event):  # never raise into the user's code
        _begin_run()
        host = SWITCH.config.logger
        if host is not None:
            _to_host(host, event, level, fields)
            return
        getattr(_logger(), level)(event, **fields)


def finding(found: Finding, **context: Any) -> None:
    """Write a finding's record (``autoprof.finding``), ``context`` first (target, window, source)."""
    emit(FINDING_EVENT, record_level(found), **context, **found.to_record())


def finding_record(found: Finding, **context: Any) -> dict[str, Any]:
    """The record :func:`finding` writes, as a dict (the CLI's ``--json`` lines)."""
    return build_record(FINDING_EVENT, record_level(found), **context, **found.to_record())


def error(message: str, reason: str, exc: BaseException | None = None, **context: Any) -> None:
    """Write an ``autoprof.error`` record: ``reason`` is one word a pipeline can group by (see the schema), and
    ``exc`` names the exception type behind it (a rule's failure carried across processes names its own:
    ``type_name``)."""
    fields: dict[str, Any] = {**context, "message": message, "reason": reason}
    if exc is not None:
        fields["error_type"] = getattr(exc, "type_name", None) or type(exc).__name__
    emit(ERROR_EVENT, "error", **fields)


def warning(message: str, reason: str, **context: Any) -> None:
    """Write an ``autoprof.warning`` record (``reason`` as for :func:`error`)."""
    emit(WARNING_EVENT, "warning", **context, reason=reason, message=message)


def _to_host(host: Any, event: str, level: str, fields: dict[str, Any]) -> None:
    rec = build_record(event, level, **fields)
    observe(None, level, rec)
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
    _stderr_line(f"autoprof: could not write a record ({event}): {type(e).__name__}: {e}")


_run: dict[str, Any] = {}
_run_lock = threading.RLock()


def run_id() -> str:
    """This run's id: torchrun's (``TORCHELASTIC_RUN_ID``, shared by the ranks of one job) where it names one, else
    one drawn once per process (a forked child keeps its parent's)."""
    if "id" not in _run:
        launched = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
        _run["id"] = launched if launched and launched != "none" else uuid.uuid4().hex[:16]
    return str(_run["id"])


def _begin_run() -> None:
    """Before a process's first record: the ``autoprof.run`` record, which says which run the records after it (of
    this host and pid) belong to, so a sink appended to by several runs reads apart. Once per process."""
    pid = os.getpid()
    if _run.get("pid") == pid:
        return
    with _run_lock:  # another thread's first record waits here until the run record is written
        if _run.get("pid") == pid or _run.get("writing") == pid:  # written, or this is its own emit (re-entered)
            return
        _run["writing"] = pid
        try:
            program = os.path.basename(sys.argv[0]) if sys.argv else ""
            emit(RUN_EVENT, "info", target=None, window=None, run_id=run_id(), program=program)
        finally:
            _run["pid"] = pid


def set_exit_status(code: Any) -> None:
    """The program is ending by ``sys.exit(code)`` (``autoprof run`` sees its script's ``SystemExit``): the summary
    says so unless it is a success (``None`` or 0)."""
    _run["exit"] = code


def _ended() -> str:
    """How the program is ending, at exit: ``normally``, ``interrupted (KeyboardInterrupt)``, ``by an exception
    (ValueError)`` when an exception reached the top (the interpreter keeps it in ``sys.last_type``), or ``with exit
    status 3 (sys.exit)`` when :func:`set_exit_status` was told of a failing ``sys.exit``."""
    kind = getattr(sys, "last_type", None)
    if kind is None:
        code = _run.get("exit")
        if code is None or code == 0:
            return "normally"
        status = int(code) if isinstance(code, int) else 1  # python prints a message given to sys.exit, status 1
        return f"with exit status {status} (sys.exit)"
    name = getattr(kind, "__name__", str(kind))
    return f"interrupted ({name})" if issubclass(kind, KeyboardInterrupt) else f"by an exception ({name})"


def write_summary() -> None:
    """At exit, after the session wrote its last windows: one ``autoprof.summary`` record of what this process's
    records said (per target, its last window's verdict, why, next and findings; where the records, traces and report
    went), if it wrote any. It goes where the records go (text on a terminal, a JSON line elsewhere); when they went
    to a file or JSON lines and stderr is a terminal, its text is also printed there. Never raises, not even a Ctrl-C."""
    with _guard.quiet("record.summary", catches=BaseException):
        if not TALLY.seen:
            return
        cfg = SWITCH.config
        fields = TALLY.fields()
        TALLY.clear()
        where = "the host's logger" if cfg.logger is not None else cfg.sink or "stderr"
        kept = len({t["trace_path"] for t in fields["targets"] if t.get("trace_path")})
        report = None
        if cfg.report and cfg.trace_dir:
            path = os.path.join(os.fspath(cfg.trace_dir), f"autoprof-report.rank{dist_info()[0]}.html")
            report = path if os.path.exists(path) else None
        fields.update(run_id=run_id(), ended=_ended(), records=where, trace_dir=cfg.trace_dir, traces_kept=kept, report=report)
        emit(SUMMARY_EVENT, "info", target=None, window=None, **fields)
        if cfg.logger is None and cfg.format == "auto" and not text_output() and _isatty(sys.stderr):
            rec = build_record(SUMMARY_EVENT, "info", target=None, window=None, **fields)
            _stderr_line("\n".join(_text.summary_lines(rec, _text.use_color(sys.stderr))))


def _after_fork_in_child() -> None:
    """A forked child summarises its own records (not its parent's again) and writes its own ``autoprof.run`` record
    (same run id, its own pid) before its first; fresh locks (another thread of the parent may have held one: the
    background analysis writing a record as a pool forked left the child's first record waiting forever)."""
    global _run_lock, _lock
    TALLY.__init__()  # type: ignore[misc]
    _run_lock = threading.RLock()
    _lock = threading.RLock()
    writer = _out.get("writer")
    if isinstance(writer, _LineWriter):  # a line the parent's other thread was writing is not the child's to finish
        writer.busy, writer.close_after = False, False
        writer.queued.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _reset_for_tests() -> None:  # pragma: no cover - used by the test-suite only
    TALLY.clear()
    _run.pop("pid", None)
    _run.pop("writing", None)


# At exit, in this order (atexit runs the last registered first; the session, imported after this module, registers
# its shutdown later and so drains its windows before both): the summary, then the sink closed (what was dropped).
atexit.register(reset_output)
atexit.register(write_summary)
