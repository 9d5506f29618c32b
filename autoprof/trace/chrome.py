"""Trace from chrome-trace JSON files (``.json`` / ``.json.gz``) written by torch.profiler / kineto.

Reads current and 2021 category names, float timestamps with ns fractions, instant events without
``dur``, and links device work to its launch by ``args.correlation`` (flow events as a fallback).
Any problem with the input raises :class:`TraceError` with one line naming the file and the problem.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import queue
import re
import stat
import threading
import zlib
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from autoprof.trace import _pool
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
    untrusted_int,
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


_int = untrusted_int  # every integer read from a file goes through the untrusted-value reader


def _apply_metadata(b: TraceBuilder, doc: dict[str, Any]) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        b.rank = max(_int(dist.get("rank"), 0), 0)
        b.world_size = max(_int(dist.get("world_size"), 1), 1)
    sections = doc.get("autoprof_sections")  # the sections a window kept by autoprof used
    if isinstance(sections, list):
        b.metadata["sections"] = [n for n in sections[:10_000] if isinstance(n, str)]
    props = doc.get("deviceProperties")
    if isinstance(props, list):
        b.device_properties = [p for p in props if isinstance(p, dict)]
    b.metadata.update(
        {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties") and not isinstance(v, (list, dict))}
    )
    for key, meta_key in (("autoprof_cpu_peak_flops", "cpu_peak_flops"),
                          ("autoprof_cpu_peak_bytes_per_s", "cpu_peak_bytes_per_s"),
                          ("autoprof_cpu_peak_spread_ratio", "cpu_peak_spread_ratio")):
        peak = doc.get(key)
        if isinstance(peak, (int, float)) and not isinstance(peak, bool) and math.isfinite(peak) and (
            peak > 0 or (peak == 0 and meta_key == "cpu_peak_spread_ratio")
        ):
            b.metadata[meta_key] = float(peak)


def _target_of(doc: dict[str, Any], target: str | None) -> str | None:
    if target is None and isinstance(doc.get("autoprof_target"), str):
        return str(doc["autoprof_target"])  # a window kept by autoprof's trace_dir
    return target


def from_document(doc: dict[str, Any], source: str = "<memory>", target: str | None = None) -> Trace:
    """Build a :class:`Trace` from a parsed chrome-trace document."""
    b = TraceBuilder(source=source)
    c = _Consumer(b, source)
    c.consume(doc["traceEvents"])
    c.finish()
    _apply_metadata(b, doc)
    return b.build(_target_of(doc, target))


class _Consumer:
    """Turns chrome events into builder columns, one pass; events can arrive in several batches (a stream,
    parsed chunks, or the columns of chunks consumed in a worker process: :meth:`merge`).

    The hot loop of an offline analysis: host events are written straight into the builder's columns,
    categories and threads are looked up once per distinct value.
    """

    def __init__(self, b: TraceBuilder, source: str) -> None:
        self.b = b
        self.source = source
        self.count = 0  # events seen so far: the index of the next one, for error messages
        self.cat_cache: dict[Any, int] = {}  # raw category -> _category_code
        self.threads: dict[tuple[Any, Any], int] = {}
        self.shaped: dict[str, bool] = {}
        # Op name -> its last (dims, types): repeated shapes share one copy (less memory, less for the
        # cyclic collector to walk, and pickled once by a worker).
        self.last_shapes: dict[str, tuple[Any, Any]] = {}
        self.dev_no_corr: dict[int, tuple[int, int]] = {}  # device index -> (thread, ts): linked by flows
        # Flow events (used only if correlation ids are missing): start?, thread, ts, id.
        self.f_start = array("b")
        self.f_tid = array("l")
        self.f_ts = array("q")
        self.f_id = array("q")

    def consume(self, events: Iterable[Any]) -> None:
        b = self.b
        source = self.source
        cat_cache = self.cat_cache
        threads = self.threads
        shaped = self.shaped
        last_shapes = self.last_shapes
        dev_no_corr = self.dev_no_corr
        flow_cats = FLOW_CATEGORIES
        dropped = DROPPED_OPS
        cpu_op = _CPU_OP_IDX
        empty: dict[str, Any] = {}
        hn, hc, hts, hdur = b.h_name.append, b.h_cat.append, b.h_ts.append, b.h_dur.append
        htid, hcorr = b.h_tid.append, b.h_corr.append
        h_ts = b.h_ts
        h_shapes = b.h_shapes
        names = b._name_ids
        intern = b.intern
        add_device = b.add_device
        fs, ft, fts, fid = self.f_start.append, self.f_tid.append, self.f_ts.append, self.f_id.append
        ev: Any
        ts: Any
        dur: Any
        name: Any
        k = self.count - 1
        for k, ev in enumerate(events, self.count):  # k is read after the loop
            if type(ev) is not dict:
                raise TraceError(source, f"event {k} is not an object")
            ph = ev.get("ph")
            if ph != "X":
                if ph == "s" or ph == "f":
                    if ev.get("cat") in flow_cats:
                        ts = ev.get("ts")
                        tt = type(ts)
                        if tt is not int and tt is not float:
                            raise TraceError(source, f"event {k}: flow event without a numeric 'ts'")
                        i = ev.get("id")
                        fs(ph == "s")
                        ft(self._thread(ev.get("pid"), ev.get("tid")))
                        fts(round(ts * 1000))
                        fid(i if type(i) is int else _int(i))
                    continue
                if ph == "M" or (ph is None and "ts" not in ev):
                    continue
            cat_raw = ev.get("cat")
            try:
                code = cat_cache[cat_raw]
            except KeyError:
                code = cat_cache[cat_raw] = _category_code(cat_raw)
            except TypeError:  # unhashable category
                code = -1
            if code < 0:
                continue
            ts = ev.get("ts")
            tt = type(ts)
            if tt is int:
                ts *= 1000
            elif tt is float:
                ts = round(ts * 1000)
            elif ts is None:
                raise TraceError(source, f"event {k} ({cat_raw}) has no 'ts'")
            else:
                raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'ts'")
            dur = ev.get("dur", 0)
            tt = type(dur)
            if tt is int:
                dur *= 1000
            elif tt is float:
                dur = round(dur * 1000)
            elif dur is None:
                dur = 0
            else:
                raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'dur'")
            name = ev.get("name")
            if type(name) is not str:
                name = str(name)
            elif code == cpu_op and name in dropped:
                continue
            args = ev.get("args")
            if type(args) is not dict:
                args = empty
            corr = args.get("correlation", -1)
            if type(corr) is not int:
                corr = _int(corr)
            key = (ev.get("pid"), ev.get("tid"))
            try:  # self._thread(*key), inlined: the hot path
                tid = threads[key]
            except KeyError:
                tid = threads[key] = b.thread(*key)
            except TypeError:
                tid = self._thread(*key)
            if code < _DEVICE_CODE:
                nid = names.get(name)
                if code == cpu_op and "Input Dims" in args:
                    want = shaped.get(name)
                    if want is None:
                        want = shaped[name] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
                    if want:
                        dims, types = args.get("Input Dims"), args.get("Input type")
                        last = last_shapes.get(name)
                        if last is not None and last[0] == dims and last[1] == types:
                            h_shapes[len(h_ts)] = last  # a trace repeats its shapes: share one copy
                        else:
                            h_shapes[len(h_ts)] = last_shapes[name] = (dims, types)
                hn(nid if nid is not None else intern(name))
                hc(code)
                hts(ts)
                hdur(dur if dur > 0 else 0)
                htid(tid)
                hcorr(corr)
            else:
                grid, block = args.get("grid"), args.get("block")
                launch = (tuple(grid), tuple(block)) if isinstance(grid, list) and isinstance(block, list) else None
                device = _int(args.get("device"), _int(ev.get("pid"), 0))
                stream = _int(args.get("stream"), _int(ev.get("tid"), 0))
                j = add_device(DEVICE_CATEGORIES[code - _DEVICE_CODE], name, ts, dur, device, stream, corr, launch)
                if corr < 0:
                    dev_no_corr[j] = (tid, ts)
        self.count = k + 1

    def _thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        try:
            return self.threads[key]
        except KeyError:
            t = self.threads[key] = self.b.thread(pid, tid)
            return t
        except TypeError:  # unhashable pid/tid
            return self.b.thread(str(pid), str(tid))

    # -- batches consumed elsewhere -------------------------------------------------------------
    def part(self) -> tuple[Any, ...]:
        """What :meth:`merge` needs of this consumer (picklable: arrays, lists, dicts)."""
        b = self.b
        return (self.count, b.names, b.threads,
                b.h_name, b.h_cat, b.h_ts, b.h_dur, b.h_tid, b.h_corr, b.h_shapes,
                b.d_name, b.d_cat, b.d_ts, b.d_dur, b.d_device, b.d_stream, b.d_corr, b.d_launch,
                self.dev_no_corr, self.f_start, self.f_tid, self.f_ts, self.f_id)

    def merge(self, part: tuple[Any, ...]) -> None:
        """Append a batch that another consumer read (its events follow the ones seen so far)."""
        (count, names, threads, h_name, h_cat, h_ts, h_dur, h_tid, h_corr, h_shapes,
         d_name, d_cat, d_ts, d_dur, d_device, d_stream, d_corr, d_launch,
         dev_no_corr, f_start, f_tid, f_ts, f_id) = part
        b = self.b
        nmap = [b.intern(s) for s in names]
        tmap = [b.thread(*key) for key in threads]
        h0, d0 = len(b.h_ts), len(b.d_ts)
        b.h_name.extend(map(nmap.__getitem__, h_name))
        b.h_cat.extend(h_cat)
        b.h_ts.extend(h_ts)
        b.h_dur.extend(h_dur)
        b.h_tid.extend(map(tmap.__getitem__, h_tid))
        b.h_corr.extend(h_corr)
        if h_shapes:
            b.h_shapes.update({i + h0: v for i, v in h_shapes.items()})
        b.d_name.extend(map(nmap.__getitem__, d_name))
        b.d_cat.extend(d_cat)
        b.d_ts.extend(d_ts)
        b.d_dur.extend(d_dur)
        b.d_device.extend(d_device)
        b.d_stream.extend(d_stream)
        b.d_corr.extend(d_corr)
        if d_launch:
            b.d_launch.update({j + d0: v for j, v in d_launch.items()})
        for j, (t, ts) in dev_no_corr.items():
            self.dev_no_corr[j + d0] = (tmap[t], ts)
        self.f_start.extend(f_start)
        self.f_tid.extend(map(tmap.__getitem__, f_tid))
        self.f_ts.extend(f_ts)
        self.f_id.extend(f_id)
        self.count += count

    def finish(self) -> None:
        """Flow fallback: link device work without a correlation id to its launch through flow events."""
        if not self.dev_no_corr:
            return
        b = self.b
        launch_at = {(b.h_tid[i], b.h_ts[i]): i for i in range(len(b.h_ts)) if b.h_cat[i] in _LAUNCH_CATS}
        flows_s: dict[int, tuple[int, int]] = {}
        flows_f: dict[tuple[int, int], int] = {}
        for start, t, ts, flow_id in zip(self.f_start, self.f_tid, self.f_ts, self.f_id):
            if start:
                flows_s[flow_id] = (t, ts)
            else:
                flows_f[(t, ts)] = flow_id
        for j, key in self.dev_no_corr.items():
            fid = flows_f.get(key)
            if fid is None or fid < 0:
                continue
            b.d_corr[j] = fid
            start_key = flows_s.get(fid)
            if start_key is not None and start_key in launch_at:
                h = launch_at[start_key]
                if b.h_corr[h] < 0:
                    b.h_corr[h] = fid


_HOST_IDX = {c: k for k, c in enumerate(HOST_CATEGORIES)}
_LAUNCH_CATS = frozenset({_HOST_IDX[CUDA_RUNTIME], _HOST_IDX[CUDA_DRIVER]})
_CPU_OP_IDX = _HOST_IDX[CPU_OP]
_DEVICE_CODE = 16  # category codes: host categories 0.., device categories _DEVICE_CODE.., -1 skipped


def _category_code(cat: Any) -> int:
    norm = normalize_category(cat) if isinstance(cat, str) else None
    if norm in _HOST_IDX:
        return _HOST_IDX[norm]
    if norm in DEVICE_CATEGORIES:
        return _DEVICE_CODE + DEVICE_CATEGORIES.index(norm)
    return -1


def load(path: str | os.PathLike[str], target: str | None = None, workers: int | None = None) -> Trace:
    """Load one chrome-trace file (peak memory stays far below ``json.load``'s).

    The ``traceEvents`` array is parsed in batches of whole events; a large file's batches are shared with
    ``workers`` helper processes (default: the usable CPUs, at most 4, none with one CPU; 0 keeps
    everything in this process). Raises :class:`TraceError` (one line, names the file) on bad input, and
    nothing else.
    """
    if workers is None:
        workers = _pool.default_workers()
    with gc_paused():
        return _load(path, target, workers)


def _load(path: str | os.PathLike[str], target: str | None, workers: int) -> Trace:
    p = Path(path)
    src = str(path)
    b = TraceBuilder(source=src)
    consumer = _Consumer(b, src)
    reader = _StreamReader(p)
    try:
        with reader:
            meta = reader.parse(consumer, workers)
    except TraceError as e:
        if e.path == src:
            raise
        raise TraceError(path, e.problem) from None
    except (TypeError, ValueError, OverflowError, KeyError, RecursionError) as e:
        raise TraceError(path, f"malformed trace event ({type(e).__name__}: {e})") from None
    consumer.finish()
    _apply_metadata(b, meta)
    return b.build(_target_of(meta, target))


_orjson_loads: Any
try:  # a faster parser for the batches (the stdlib's is used where orjson is missing)
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _orjson_loads = None


def _parse_batch(text: str) -> list[Any] | None:
    """The events of a batch (whole events joined by commas), or None where it is not such a run."""
    doc = "[" + text + "]"
    if _orjson_loads is not None:
        try:
            v = _orjson_loads(doc)
            return v if type(v) is list else None
        except Exception:  # e.g. NaN or a 2**64 integer, which the stdlib reads: try it
            pass
    try:
        v = json.loads(doc)
    except (ValueError, RecursionError):
        return None
    return v if type(v) is list else None


def _work(text: str, source: str) -> tuple[Any, ...]:
    """One batch, parsed and consumed on its own (in a worker process, or here while workers are busy)."""
    events = _parse_batch(text)
    if events is None:
        return ("parse",)
    c = _Consumer(TraceBuilder(source=source), source)
    try:
        c.consume(events)
    except Exception:  # redone where the event index in the whole file is known, for the exact error
        return ("error",)
    return ("ok", c.part())


_WS = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 20  # characters per read
_BATCH = 1 << 20  # characters of whole events parsed at once (small enough to stay in the CPU's caches)
_POOL_AT = 2  # batches read in this process before helper processes are started (a large file only)
_MAX_VALUE = 256 << 20  # one JSON value (an event, a metadata entry) larger than this is not a trace


class _StreamReader:
    """Reads a chrome-trace JSON document chunk by chunk. The ``traceEvents`` array is parsed in batches of
    whole events: a batch is cut after an event's closing brace, and only a batch that parses whole as a run
    of values is taken. The scanner (``raw_decode``, one value at a time) reads the top-level keys, the last
    events, and everything from a batch that does not parse whole: it is exact and names the problem.

    Why a cut that parses is a true event boundary: the batch starts at a true boundary (outside any
    string, inside the array), so the parser sees the same tokens as a reader of the whole file; a cut
    inside a string leaves an odd number of quotes and cannot parse, and a cut after the array's end leaves
    data after the closing bracket.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.src = str(path)
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters of the document before ``buf``: error positions are in the whole file
        self.eof = False
        self._raw: Any = None
        self._text: Any = None
        decoder = json.JSONDecoder()
        self._dec = decoder.raw_decode
        self._scan = decoder.scan_once  # type: ignore[attr-defined]  # the C scanner raw_decode wraps: (value, end) or StopIteration
        self._last: Any = None
        self._prefetch: _Prefetch | None = None

    def __enter__(self) -> _StreamReader:
        raw = open_regular_file(self.path)
        self._raw = raw
        head = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if head == b"\x1f\x8b" else raw
        self._text = io.TextIOWrapper(stream, encoding="utf-8", errors="strict")
        self._prefetch = _Prefetch(self._text)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._prefetch is not None:
            self._prefetch.stop()
        if self._raw is not None:
            self._raw.close()

    # -- buffer ----------------------------------------------------------------------------------
    def _more(self, at_least: int = 1) -> bool:
        """Append at least ``at_least`` more characters to the buffer (fewer at the end); False at the end."""
        if self.eof:
            return False
        pieces = []
        got = 0
        while got < at_least:
            try:
                piece = self._prefetch.get() if self._prefetch else self._text.read(_CHUNK)
            except (OSError, EOFError, zlib.error) as e:
                raise TraceError(self.path, f"corrupt or truncated gzip ({e})") from None
            except UnicodeDecodeError:
                raise TraceError(self.path, "not UTF-8 text") from None
            if not piece:
                self.eof = True
                break
            pieces.append(piece)
            got += len(piece)
        if not pieces:
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos:] + "".join(pieces)
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
                    raise TraceError(self.path, f"{problem} ({e.msg} at char {self.base + e.pos})") from None
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

    # -- the event array -------------------------------------------------------------------------
    def _take_batch(self) -> tuple[str, str, int] | None:
        """The next run of whole events (about ``_BATCH`` characters, cut after a closing brace that a
        comma and an opening brace follow), the separator after it, and where it starts in the document;
        None when the buffer holds no such cut (the array's last event, or one event longer than several
        batches)."""
        for _ in range(8):
            if len(self.buf) - self.pos < _BATCH and not self.eof:
                self._more(_BATCH)
            buf, pos = self.buf, self.pos
            # The last cut within a batch's length, else (an event longer than that) the last in the buffer.
            cut = _last_cut(buf, pos, min(len(buf), pos + _BATCH))
            if cut is None and pos + _BATCH < len(buf):
                cut = _last_cut(buf, pos, len(buf))
            if cut is not None:
                k, j = cut
                self.pos = j
                return buf[pos : k + 1], buf[k + 1 : j], self.base + pos
            if self.eof or not self._more(_BATCH):
                return None
        return None

    def _consume_array(self, c: _Consumer, workers: int) -> None:
        """The elements of the ``traceEvents`` array (its '[' consumed): batches first, then the scanner
        for the last events (and for everything from a batch that does not parse whole)."""
        pending: list[tuple[str, str, int]] = []  # batches taken, not yet merged into the builder, in order
        ready: dict[int, tuple[Any, ...]] = {}  # results of batches done in this process while workers ran
        done = 0  # number of batches merged: the id of pending[0]
        pool: _pool.Pool | None = None
        limit = _pool.PER_WORKER * workers + 4  # batches in flight before this waits for the oldest
        try:
            while True:
                batch = self._take_batch()
                last = batch is None  # the rest is for the scanner: wait for every batch in flight
                if batch is not None:
                    bid = done + len(pending)
                    pending.append(batch)
                    if pool is None and workers > 0 and bid == _POOL_AT:
                        pool = _pool.Pool.start(workers, self.src)
                    if pool is not None and pool.submit(bid, batch[0]):
                        pass
                    elif len(pending) == 1:  # nothing before it: straight into the builder
                        events = _parse_batch(batch[0])
                        if events is None:
                            return self._rescan(c, pending)
                        c.consume(events)
                        pending.clear()
                        done += 1
                        continue
                    else:
                        ready[bid] = _work(batch[0], self.src)
                # Merge finished batches in order.
                while pending:
                    r = ready.pop(done, None)
                    if r is None and pool is not None:
                        r = pool.result(done, wait=last or len(pending) > limit)
                    if r is None:
                        if not last:
                            break
                        r = ("error",)  # cannot happen (waited for); redone here rather than lost
                    if not self._merge(c, r, pending[0][0]):
                        return self._rescan(c, pending)
                    pending.pop(0)
                    done += 1
                if last:
                    break
        finally:
            if pool is not None:
                pool.close()
        c.consume(self._events())

    def _merge(self, c: _Consumer, r: tuple[Any, ...], text: str) -> bool:
        if r[0] == "ok":
            c.merge(r[1])
            return True
        if r[0] == "parse":
            return False
        events = _parse_batch(text)  # consumed here: raises the exact error, with the index in the file
        if events is None:
            return False
        c.consume(events)
        return True

    def _rescan(self, c: _Consumer, pending: list[tuple[str, str, int]]) -> None:
        """Read everything from the first unmerged batch on with the scanner (exact; names any problem)."""
        self.buf = "".join(t + s for t, s, _ in pending) + self.buf[self.pos :]
        self.base = pending[0][2]
        self.pos = 0
        pending.clear()
        c.consume(self._events())

    def _events(self) -> Iterator[Any]:
        """The remaining elements of the ``traceEvents`` array, one at a time, up to its ']'.

        State is kept in locals and the C scanner is called directly.
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

    def parse(self, consumer: _Consumer, workers: int = 0) -> dict[str, Any]:
        """Parse the document, feeding the events to ``consumer``. Returns the other top-level keys."""
        c = self._skip()
        if c == "":
            raise TraceError(self.path, "empty file")
        if c == "[":  # a bare array of events
            self.pos += 1
            self._consume_array(consumer, workers)
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
                self._consume_array(consumer, workers)
                seen_events = True
            else:
                meta[key] = self._value()
        if self._skip() != "":
            raise TraceError(self.path, "not valid JSON (data after the document)")
        if not seen_events:
            raise TraceError(self.path, "not a chrome trace: no 'traceEvents'")
        return meta


def _last_cut(buf: str, pos: int, end: int) -> tuple[int, int] | None:
    """The last ``}`` (at k) followed by a comma and ``{`` (at j) in ``buf[pos:end]``, as (k, j)."""
    j = buf.rfind("{", pos + 1, end)
    while j > pos:
        k = j - 1
        while k > pos and buf[k] in " \t\n\r":
            k -= 1
        if buf[k] == "," and k > pos:
            k -= 1
            while k > pos and buf[k] in " \t\n\r":
                k -= 1
            if buf[k] == "}" and k > pos:
                return k, j
        j = buf.rfind("{", pos + 1, k + 1)
    return None


class _Prefetch:
    """Reads (and gunzips: zlib lets other threads run meanwhile) the next pieces of text on a thread."""

    def __init__(self, text: Any) -> None:
        self._text = text
        self._q: queue.Queue[Any] = queue.Queue(maxsize=8)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="autoprof-read", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            try:
                piece: Any = self._text.read(_CHUNK)
            except BaseException as e:  # handed to the reading thread, which turns it into a TraceError
                piece = e
            while not self._stopped:
                try:
                    self._q.put(piece, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if not isinstance(piece, str) or not piece:
                return

    def get(self) -> str:
        piece = self._q.get()
        if isinstance(piece, BaseException):
            self._stopped = True
            raise piece
        if not piece:
            self._stopped = True
        return piece  # type: ignore[no-any-return]

    def stop(self) -> None:
        self._stopped = True
        self._thread.join()


def _os_problem(e: OSError) -> str:
    return f"cannot read: {e.strerror or type(e).__name__}"


def open_regular_file(path: str | os.PathLike[str]) -> io.BufferedReader:
    """Open ``path`` for reading, refusing anything that is not a regular file (the one gate every trace input
    passes). Opened non-blocking first, so a FIFO without a writer cannot hang the caller, then checked with
    ``fstat`` on the open descriptor (no race between a check and the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(path, _os_problem(e)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TraceError(path, "is a directory, not a trace file")
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _not_regular(path: str | os.PathLike[str], mode: int) -> TraceError:
    return TraceError(path, f"not a regular file ({_kind(mode)}): refused")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a plain file"


def iter_trace_inputs(path: str | os.PathLike[str]) -> Iterator[Path | TraceError]:
    """The trace files a path names (the file itself, or the ``*.json(.gz)`` files under a directory, sorted),
    and a :class:`TraceError` for each part of it that cannot be read (the path itself, a subdirectory that
    cannot be listed, an entry that cannot be examined or is not a regular file). Never raises."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        yield TraceError(p, "no such file or directory")
        return
    except (OSError, ValueError) as e:  # ENAMETOOLONG, EACCES, ELOOP; ValueError: a NUL in the path
        yield TraceError(p, _os_problem(e) if isinstance(e, OSError) else "not a valid path")
        return
    if not stat.S_ISDIR(st.st_mode):
        yield p
        return
    found: list[Path | TraceError] = []
    unlisted: list[OSError] = []
    for root, _dirs, names in os.walk(p, onerror=unlisted.append):
        for name in names:
            if name.endswith(TRACE_SUFFIXES):
                f = Path(root, name)
                try:
                    mode = os.stat(f).st_mode
                except FileNotFoundError:
                    continue  # a dangling link or a file removed meanwhile
                except OSError as e:
                    found.append(TraceError(f, _os_problem(e)))
                    continue
                found.append(f if stat.S_ISREG(mode) else _not_regular(f, mode))
    for err in unlisted:
        found.append(TraceError(err.filename if err.filename is not None else p, f"cannot list: {err.strerror or err}"))
    if not found:
        yield TraceError(p, "directory holds no trace files (*.json, *.json.gz)")
        return
    found.sort(key=lambda x: str(x.path if isinstance(x, TraceError) else x))
    yield from found


def find_trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files a path names; raises the first :class:`TraceError` of :func:`iter_trace_inputs`."""
    files = []
    for f in iter_trace_inputs(path):
        if isinstance(f, TraceError):
            raise f
        files.append(f)
    return files
