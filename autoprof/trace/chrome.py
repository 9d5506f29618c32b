"""Trace from chrome-trace JSON files (``.json`` / ``.json.gz``) written by torch.profiler / kineto.

Reads current and 2021 category names, float timestamps with ns fractions, instant events without
``dur``, and links device work to its launch by ``args.correlation`` (flow events as a fallback).
Any problem with the input raises :class:`TraceError` with one line naming the file and the problem.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from autoprof.trace.model import (
    CPU_OP,
    CUDA_DRIVER,
    CUDA_RUNTIME,
    DEVICE_CATEGORIES,
    DROPPED_OPS,
    FLOW_CATEGORIES,
    HOST_CATEGORIES,
    SHAPED_OPS,
    SHAPED_PREFIXES,
    Trace,
    TraceBuilder,
    gc_paused,
    normalize_category,
)

TRACE_SUFFIXES = (".json", ".json.gz")


class TraceError(ValueError):
    """The one error a loader raises for input it cannot read. ``str()`` is one line naming the file."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _ns(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError
    return int(round(v * 1000))


def _int(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        digits = v.rsplit(" ", 1)[-1]
        if digits.isdigit():
            return int(digits)
    return default


def _apply_metadata(b: TraceBuilder, doc: dict[str, Any]) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        b.rank = max(_int(dist.get("rank"), 0), 0)
        b.world_size = max(_int(dist.get("world_size"), 1), 1)
    props = doc.get("deviceProperties")
    if isinstance(props, list):
        b.device_properties = [p for p in props if isinstance(p, dict)]
    b.metadata.update(
        {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties") and not isinstance(v, (list, dict))}
    )
    for key, meta_key in (("autoprof_cpu_peak_flops", "cpu_peak_flops"),
                          ("autoprof_cpu_peak_bytes_per_s", "cpu_peak_bytes_per_s")):
        peak = doc.get(key)
        if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0:
            b.metadata[meta_key] = float(peak)


def _target_of(doc: dict[str, Any], target: str | None) -> str | None:
    if target is None and isinstance(doc.get("autoprof_target"), str):
        return str(doc["autoprof_target"])  # a window kept by autoprof's trace_dir
    return target


def from_document(doc: dict[str, Any], source: str = "<memory>", target: str | None = None) -> Trace:
    """Build a :class:`Trace` from a parsed chrome-trace document."""
    b = TraceBuilder(source=source)
    _consume(b, doc["traceEvents"], source)
    _apply_metadata(b, doc)
    return b.build(_target_of(doc, target))


def _consume(b: TraceBuilder, events: Iterable[Any], source: str) -> None:
    """Turn chrome events into builder columns (one pass; the events can be a stream).

    The hot loop of an offline analysis: host events are written straight into the builder's columns,
    categories and threads are looked up once per distinct value.
    """
    host_idx = {c: k for k, c in enumerate(HOST_CATEGORIES)}
    dev_cats = set(DEVICE_CATEGORIES)
    launch_cats = {host_idx[CUDA_RUNTIME], host_idx[CUDA_DRIVER]}
    cpu_op = host_idx[CPU_OP]
    flows: list[tuple[str, int, int, int]] = []  # (ph, thread, ts, id): used only if correlation ids are missing
    launch_at: dict[tuple[int, int], int] = {}
    dev_no_corr: dict[int, tuple[int, int]] = {}
    cat_cache: dict[Any, str | None] = {}
    threads: dict[tuple[Any, Any], int] = {}
    shaped: dict[str, bool] = {}
    h_name, h_cat, h_ts, h_dur, h_tid, h_corr = b.h_name, b.h_cat, b.h_ts, b.h_dur, b.h_tid, b.h_corr
    names = b._name_ids
    intern = b.intern
    num = (int, float)
    for k, ev in enumerate(events):
        if type(ev) is not dict:
            raise TraceError(source, f"event {k} is not an object")
        ph = ev.get("ph")
        if ph == "M" or (ph is None and "ts" not in ev):
            continue
        cat_raw = ev.get("cat")
        if ph == "s" or ph == "f":
            if cat_raw in FLOW_CATEGORIES:
                try:
                    flows.append((ph, b.thread(ev.get("pid"), ev.get("tid")), _ns(ev["ts"]), _int(ev.get("id"))))
                except (KeyError, TypeError):
                    raise TraceError(source, f"event {k}: flow event without a numeric 'ts'") from None
            continue
        try:
            cat = cat_cache[cat_raw]
        except KeyError:
            cat = cat_cache[cat_raw] = normalize_category(cat_raw) if isinstance(cat_raw, str) else None
        except TypeError:  # unhashable category
            cat = None
        if cat is None:
            continue
        ts = ev.get("ts")
        if type(ts) not in num:
            if ts is None:
                raise TraceError(source, f"event {k} ({cat_raw}) has no 'ts'")
            raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'ts'")
        ts = int(round(ts * 1000))  # type: ignore[operator]
        dur = ev.get("dur", 0)
        if type(dur) in num:
            dur = int(round(dur * 1000))
        elif dur is None:
            dur = 0
        else:
            raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'dur'")
        name = ev.get("name")
        if type(name) is not str:
            name = str(name)
        elif name in DROPPED_OPS and cat == CPU_OP:
            continue
        args = ev.get("args")
        if type(args) is not dict:
            args = {}
        corr = args.get("correlation", -1)
        if type(corr) is not int:
            corr = _int(corr)
        key = (ev.get("pid"), ev.get("tid"))
        try:
            tid = threads[key]
        except KeyError:
            tid = threads[key] = b.thread(*key)
        except TypeError:  # unhashable pid/tid
            tid = b.thread(str(key[0]), str(key[1]))
        ci = host_idx.get(cat, -1)
        if ci >= 0:
            i = len(h_ts)
            nid = names.get(name)
            h_name.append(nid if nid is not None else intern(name))
            h_cat.append(ci)
            h_ts.append(ts)
            h_dur.append(dur if dur > 0 else 0)
            h_tid.append(tid)
            h_corr.append(corr)
            if ci == cpu_op and "Input Dims" in args:
                want = shaped.get(name)
                if want is None:
                    want = shaped[name] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
                if want:
                    b.h_shapes[i] = (args.get("Input Dims"), args.get("Input type"))
            elif ci in launch_cats:
                launch_at[(tid, ts)] = i
        elif cat in dev_cats:
            grid, block = args.get("grid"), args.get("block")
            launch = (tuple(grid), tuple(block)) if isinstance(grid, list) and isinstance(block, list) else None
            device = _int(args.get("device"), _int(ev.get("pid"), 0))
            stream = _int(args.get("stream"), _int(ev.get("tid"), 0))
            j = b.add_device(cat, name, ts, dur, device, stream, corr, launch)
            if corr < 0:
                dev_no_corr[j] = (tid, ts)
    if not dev_no_corr:
        return
    # Flow fallback for device work without a correlation id.
    flows_s = {fid: (t, ts) for ph, t, ts, fid in flows if ph == "s"}
    flows_f = {(t, ts): fid for ph, t, ts, fid in flows if ph == "f"}
    for j, key in dev_no_corr.items():
        fid = flows_f.get(key)
        if fid is None or fid < 0:
            continue
        b.d_corr[j] = fid
        start = flows_s.get(fid)
        if start is not None and start in launch_at:
            h = launch_at[start]
            if b.h_corr[h] < 0:
                b.h_corr[h] = fid


def load(path: str | os.PathLike[str], target: str | None = None) -> Trace:
    """Load one chrome-trace file, streaming its events (peak memory stays far below ``json.load``'s).

    Raises :class:`TraceError` (one line, names the file) on bad input, and nothing else.
    """
    with gc_paused():
        return _load(path, target)


def _load(path: str | os.PathLike[str], target: str | None) -> Trace:
    p = Path(path)
    src = str(path)
    b = TraceBuilder(source=src)
    reader = _StreamReader(p)
    try:
        with reader:
            meta = reader.parse(lambda events: _consume(b, events, src))
    except TraceError as e:
        if e.path == src:
            raise
        raise TraceError(path, e.problem) from None
    except (TypeError, ValueError, OverflowError, KeyError, RecursionError) as e:
        raise TraceError(path, f"malformed trace event ({type(e).__name__}: {e})") from None
    _apply_metadata(b, meta)
    return b.build(_target_of(meta, target))


_WS = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 20
_MAX_VALUE = 256 << 20  # one JSON value (an event, a metadata entry) larger than this is not a trace


class _StreamReader:
    """Reads a chrome-trace JSON document chunk by chunk: the top-level keys are decoded whole (they are
    small), the ``traceEvents`` array one event at a time with the C decoder (``raw_decode``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.src = str(path)
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._raw: Any = None
        self._text: Any = None
        decoder = json.JSONDecoder()
        self._dec = decoder.raw_decode
        self._scan = decoder.scan_once  # type: ignore[attr-defined]  # the C scanner raw_decode wraps: (value, end) or StopIteration
        self._last: Any = None

    def __enter__(self) -> _StreamReader:
        try:
            raw = open(self.path, "rb")
        except FileNotFoundError:
            raise TraceError(self.path, "no such file") from None
        except IsADirectoryError:
            raise TraceError(self.path, "is a directory, not a trace file") from None
        except OSError as e:
            raise TraceError(self.path, f"cannot read: {e.strerror or e}") from None
        self._raw = raw
        head = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if head == b"\x1f\x8b" else raw
        self._gz = head == b"\x1f\x8b"
        self._text = io.TextIOWrapper(stream, encoding="utf-8", errors="strict")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._raw is not None:
            self._raw.close()

    # -- buffer ----------------------------------------------------------------------------------
    def _more(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self._text.read(_CHUNK)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(self.path, f"corrupt or truncated gzip ({e})") from None
        except UnicodeDecodeError:
            raise TraceError(self.path, "not UTF-8 text") from None
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def _skip(self) -> str:
        """Skip whitespace; the next character ('' at the end of input)."""
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        self._skip()
        while True:
            if len(self.buf) - self.pos < 65536 and not self.eof:
                self._more()
                continue
            try:
                v, self.pos = self._dec(self.buf, self.pos)
                self._last = v
                return v
            except json.JSONDecodeError as e:
                if self.eof:
                    problem = "truncated JSON" if e.pos >= len(self.buf) - 1 else "not valid JSON"
                    raise TraceError(self.path, f"{problem} ({e.msg} at char {e.pos})") from None
                if len(self.buf) - self.pos > _MAX_VALUE:
                    raise TraceError(self.path, f"not valid JSON ({e.msg})") from None
                self._more()
            except RecursionError:
                raise TraceError(self.path, "not valid JSON (nested too deeply)") from None

    def _expect(self, ch: str, what: str) -> None:
        c = self._skip()
        if c != ch:
            if c == "":
                raise TraceError(self.path, f"truncated JSON (expected {what})")
            raise TraceError(self.path, f"not valid JSON (expected {what}, found {c!r})")
        self.pos += 1

    def _events(self) -> Iterator[Any]:
        """The elements of the ``traceEvents`` array, one at a time (the '[' is consumed).

        The hot loop of a large file: state is kept in locals and the C scanner is called directly.
        """
        scan = self._scan
        ws = _WS.match
        c = self._skip()
        if c == "]":
            self.pos += 1
            return
        buf, pos = self.buf, self.pos
        while True:
            if len(buf) - pos < 65536 and not self.eof:
                self.pos = pos
                self._more()
                buf, pos = self.buf, self.pos
            try:
                ev, pos = scan(buf, pos)
            except (StopIteration, json.JSONDecodeError):
                self.buf, self.pos = buf, pos
                self._value()  # re-decode for a precise error, or after reading more input
                ev, pos = self._last, self.pos
                buf = self.buf
            yield ev
            pos = ws(buf, pos).end()  # type: ignore[union-attr]  # the pattern always matches
            if pos >= len(buf):
                self.buf, self.pos = buf, pos
                c = self._skip()
                buf, pos = self.buf, self.pos
            else:
                c = buf[pos]
            if c == ",":
                pos = ws(buf, pos + 1).end()  # type: ignore[union-attr]
                if pos >= len(buf):
                    self.buf, self.pos = buf, pos
                    self._skip()
                    buf, pos = self.buf, self.pos
                continue
            self.buf, self.pos = buf, pos
            if c == "]":
                self.pos = pos + 1
                return
            if c == "":
                raise TraceError(self.path, "truncated JSON (traceEvents never closed)")
            raise TraceError(self.path, f"not valid JSON (expected ',' or ']' in traceEvents, found {c!r})")

    def parse(self, consume: Any) -> dict[str, Any]:
        """Parse the document; ``consume`` gets the event iterator. Returns the other top-level keys."""
        c = self._skip()
        if c == "":
            raise TraceError(self.path, "empty file")
        if c == "[":  # a bare array of events
            self.pos += 1
            consume(self._events())
            if self._skip() != "":
                raise TraceError(self.path, "not valid JSON (data after the event array)")
            return {}
        if c != "{":
            try:
                self._value()
            except TraceError as e:
                raise TraceError(self.path, e.problem) from None
            raise TraceError(self.path, "not a chrome trace: the document is not an object")
        self.pos += 1
        meta: dict[str, Any] = {}
        seen_events = False
        first = True
        while True:
            c = self._skip()
            if c == "}":
                self.pos += 1
                break
            if c == "":
                raise TraceError(self.path, "truncated JSON (the document never closed)")
            if not first:
                if c != ",":
                    raise TraceError(self.path, f"not valid JSON (expected ',' or '}}', found {c!r})")
                self.pos += 1
                c = self._skip()
            if c != '"':
                raise TraceError(self.path, f"not valid JSON (expected a key, found {c!r})")
            first = False
            key = self._value()
            self._expect(":", "':'")
            if key == "traceEvents":
                if self._skip() != "[":
                    self._value()
                    raise TraceError(self.path, "not a chrome trace: 'traceEvents' is not a list")
                self.pos += 1
                consume(self._events())
                seen_events = True
            else:
                meta[key] = self._value()
        if self._skip() != "":
            raise TraceError(self.path, "not valid JSON (data after the document)")
        if not seen_events:
            raise TraceError(self.path, "not a chrome trace: no 'traceEvents'")
        return meta


def find_trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files a path names: the file itself, or the ``*.json(.gz)`` files in a directory."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
        if not files:
            raise TraceError(p, "directory holds no trace files (*.json, *.json.gz)")
        return files
    if not p.exists():
        raise TraceError(p, "no such file or directory")
    return [p]
