"""Chrome-trace events into a :class:`TraceBuilder`'s columns: :class:`EventConsumer`, the hot loop of an offline
load, and what a batch consumed elsewhere (a helper process) hands back (:class:`Columns`, :class:`BatchResult`).

Events can arrive in several batches: parsed in this process (:meth:`EventConsumer.consume`) or consumed by
another consumer whose columns are appended (:meth:`EventConsumer.merge`). Either way the builder ends up
with the same columns, in file order.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from autoprof import _guard
from autoprof.trace.inputs import TraceError
from autoprof.trace.model import (
    _INT64_MAX,  # an int in this range is read as it is (untrusted_int's own test, inlined in the hot loops)
    ARG_OPS,
    CAUSAL_ARG,
    CPU_OP_CODE,
    DEVICE_CATEGORIES,
    DEVICE_CODE,
    DROPPED_OPS,
    FLOW_CATEGORIES,
    GPU_USER_ANNOTATION,
    HOST_CODE,
    LAUNCH_CODES,
    MEMORY_COLUMNS,
    SHAPED_OPS,
    SHAPED_PREFIXES,
    TraceBuilder,
    causal_flag,
    conv_args,
    normalize_category,
    untrusted_int,
)

#: A consumer's own category codes: host categories are HOST_CODE's values, device categories follow from
#: DEVICE_OFFSET on (one lookup tells which lane an event goes to), SKIPPED for categories no rule reads.
DEVICE_OFFSET = 16
SKIPPED = -1

_int = untrusted_int  # every integer read from a file goes through the untrusted-value reader
#: Ops whose shapes are read with their concrete inputs (a key of their own in the shapes' copies).
_SPECIAL_SHAPES = frozenset(CAUSAL_ARG) | ARG_OPS


def category_code(cat: Any) -> int:
    """The consumer's code of a raw ``cat`` value."""
    norm = normalize_category(cat) if isinstance(cat, str) else None
    if norm is None:
        return SKIPPED
    if norm in HOST_CODE:
        return HOST_CODE[norm]
    if norm in DEVICE_CODE:
        return DEVICE_OFFSET + DEVICE_CODE[norm]
    return SKIPPED


@dataclass
class Columns:
    """Everything :meth:`EventConsumer.merge` needs of a consumer that read one batch on its own (picklable:
    arrays, lists and dicts). Name and thread columns index this batch's own ``names`` and ``threads``."""

    count: int  # events read
    names: list[str]
    threads: list[tuple[Any, Any]]
    h_name: array[int]
    h_cat: array[int]
    h_ts: array[int]
    h_dur: array[int]
    h_tid: array[int]
    h_corr: array[int]
    h_shapes: dict[int, tuple[Any, ...]]
    d_name: array[int]
    d_cat: array[int]
    d_ts: array[int]
    d_dur: array[int]
    d_device: array[int]
    d_stream: array[int]
    d_corr: array[int]
    d_launch: dict[int, tuple[Any, ...]]
    dev_no_corr: dict[int, tuple[int, int]]
    f_start: array[int]
    f_tid: array[int]
    f_ts: array[int]
    f_id: array[int]
    memory: tuple[array[int], ...] = ()  # the builder's MEMORY_COLUMNS


class BatchStatus(Enum):
    """How reading one batch on its own went."""

    READ = "read"  # parsed and consumed: its columns come with it
    UNPARSED = "unparsed"  # not a run of whole events: the scanner reads from here on
    FAILED = "failed"  # parsed, but an event is bad (or its helper is gone): consumed again by the caller, whose
    # error message knows the event's index in the whole file


@dataclass
class BatchResult:
    status: BatchStatus
    columns: Columns | None = None


_orjson_loads: Any
try:  # a faster parser for the batches (the stdlib's is used where orjson is missing)
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _orjson_loads = None


def parse_batch(text: str) -> list[Any] | None:
    """The events of a batch (whole events joined by commas), or None where it is not such a run."""
    doc = "[" + text + "]"
    if _orjson_loads is not None:
        with _guard.quiet("batch.orjson"):  # e.g. NaN or a 2**64 integer, which the stdlib reads: try it
            v = _orjson_loads(doc)
            return v if type(v) is list else None
    try:
        v = json.loads(doc)
    except (ValueError, RecursionError):
        return None
    return v if type(v) is list else None


# -- typed decoding (msgspec): only the fields the consumer reads, no dict per event ---------------------------
# Every field is ``Any`` (the values are exactly the ones ``json`` gives, checked by the same code as a dict's)
# but ``args``, an object or nothing: a batch where any event is not an object, or has ``args`` that is not
# one, does not decode and goes the dict way, whose reading names the problem. The shapes and concrete inputs
# stay raw text (``msgspec.Raw``) until an op whose shapes the rules read needs them, and are decoded once per
# distinct text.
try:
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a dependency; without it every batch goes the dict way
    msgspec = None  # type: ignore[assignment]

_decode_events: Any = None
_decode_raw: Any = None
_UNSET: Any = None
_NO_ARGS: Any = None
if msgspec is not None:
    _UNSET = msgspec.UNSET
    _NO_RAW = msgspec.Raw()

    class _Args(msgspec.Struct, gc=False):
        """The ``args`` keys the consumer reads (absent: ``None``, as ``dict.get``; the raw ones: empty)."""

        correlation: Any = -1
        dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
        types: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
        concrete: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
        grid: Any = None
        block: Any = None
        device: Any = None
        stream: Any = None
        nbytes: Any = msgspec.field(default=None, name="Bytes")
        dtype: Any = msgspec.field(default=None, name="Device Type")
        dindex: Any = msgspec.field(default=None, name="Device Id")
        addr: Any = msgspec.field(default=None, name="Addr")
        total: Any = msgspec.field(default=None, name="Total Allocated")
        reserved: Any = msgspec.field(default=None, name="Total Reserved")

    class _Event(msgspec.Struct, gc=False):
        """The keys of an event the consumer reads (absent: ``None``, as ``dict.get``; ``ts``: unset)."""

        ph: Any = None
        cat: Any = None
        name: Any = None
        pid: Any = None
        tid: Any = None
        ts: Any = msgspec.UNSET
        dur: Any = 0
        id: Any = None
        args: _Args | None = None

    _NO_ARGS = _Args()
    _decode_events = msgspec.json.Decoder(list[_Event]).decode
    _decode_raw = msgspec.json.decode


def decode_batch(text: str) -> list[Any] | None:
    """The events of a batch as typed records (:class:`_Event`), or None where msgspec is missing or the batch
    does not decode that way (then :func:`parse_batch` reads it as dicts)."""
    if _decode_events is None:
        return None
    with _guard.quiet("batch.msgspec"):  # not a run of objects, NaN, a lone surrogate, nesting too deep...: the dict way decides
        return _decode_events("[" + text + "]")  # type: ignore[no-any-return]
    return None


def _raw_value(raw: Any) -> Any:
    """A raw argument's value, exactly as ``json`` reads it (msgspec first; the stdlib for what it refuses,
    e.g. 1e400, which the stdlib reads as inf)."""
    with _guard.quiet("batch.raw_value"):
        return _decode_raw(raw)
    return json.loads(bytes(raw))


def consume_batch(consumer: EventConsumer, text: str) -> bool:
    """Parse a batch and append its events to ``consumer``: typed where it decodes so, else as dicts. False
    where the text is not a run of whole events (nothing appended). Raises as :meth:`EventConsumer.consume`."""
    typed = decode_batch(text)
    if typed is not None:
        consumer.consume_typed(typed)
        return True
    events = parse_batch(text)
    if events is None:
        return False
    consumer.consume(events)
    return True


def read_batch(text: str, source: str) -> BatchResult:
    """One batch, parsed and consumed on its own (in a helper process, or here while helpers are busy)."""
    consumer = EventConsumer(TraceBuilder(source=source), source)
    parsed = None
    with _guard.quiet("batch.redo"):  # redone where the event index in the whole file is known, for the exact error
        parsed = consume_batch(consumer, text)
    if parsed is None:
        return BatchResult(BatchStatus.FAILED)
    if not parsed:
        return BatchResult(BatchStatus.UNPARSED)
    return BatchResult(BatchStatus.READ, consumer.columns())


#: What :attr:`EventConsumer.op_ids` says of an op's name besides its id (>= 0: a plain op's, interned).
_OP_NEW = -1  # not looked up (or not kept: a name that is no string)
_OP_DROPPED = -2  # DROPPED_OPS: skipped
_OP_SHAPED = -3  # its shapes are kept
_OP_PLAIN = -4  # neither, not interned yet
_NOTHING: Any = object()  # no previous event's pid or tid


def _op_kind(name: str) -> int:
    """What an op's name is: dropped, shaped, or plain (:data:`_OP_DROPPED`...)."""
    if name in DROPPED_OPS:
        return _OP_DROPPED
    if name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES):
        return _OP_SHAPED
    return _OP_PLAIN


def _bad_time(source: str, k: int, cat: Any, key: str, value: Any) -> TraceError:
    if value is None:
        return TraceError(source, f"event {k} ({cat}) has no '{key}'")
    return TraceError(source, f"event {k} ({cat}) has a non-numeric '{key}'")


class EventConsumer:
    """Turns chrome events into builder columns, one pass. Host events are written straight into the
    builder's columns; categories and threads are looked up once per distinct value (short local names in
    :meth:`consume`: it is the hot loop of an offline load)."""

    def __init__(self, builder: TraceBuilder, source: str) -> None:
        self.builder = builder
        self.source = source
        self.count = 0  # events seen so far: the index of the next one, for error messages
        self.cat_cache: dict[Any, int] = {}  # raw category -> category_code
        self.threads: dict[tuple[Any, Any], int] = {}
        self.shaped: dict[str, bool] = {}
        self.last_raw: dict[str, tuple[Any, ...]] = {}  # an op's name -> its last (dims text, types text, shapes)
        self.op_ids: dict[str, int] = {}  # an op's name -> its name id (plain), or _OP_DROPPED / _OP_SHAPED / _OP_PLAIN
        # Op name -> its last (dims, types): repeated shapes share one copy (less memory, less for the
        # cyclic collector to walk, and pickled once by a helper).
        self.last_shapes: dict[str, tuple[Any, ...]] = {}
        # The typed reading's copies: raw argument text -> its value; (kind, raw texts) -> shapes; launch configs.
        self.raw_values: dict[bytes, Any] = {}
        self.shape_values: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.launch_values: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.dev_no_corr: dict[int, tuple[int, int]] = {}  # device index -> (thread, ts): linked by flows
        # Flow events (used only if correlation ids are missing): start?, thread, ts, id.
        self.f_start = array("b")
        self.f_tid = array("l")
        self.f_ts = array("q")
        self.f_id = array("q")

    def consume(self, events: Iterable[Any]) -> None:
        """Append ``events`` (the next ones of the file) to the builder. Raises TraceError on a bad event."""
        b = self.builder
        source = self.source
        cat_cache = self.cat_cache
        threads = self.threads
        dropped = DROPPED_OPS
        cpu_op = CPU_OP_CODE
        empty: dict[str, Any] = {}
        add_name, add_cat, add_ts, add_dur = b.h_name.append, b.h_cat.append, b.h_ts.append, b.h_dur.append
        add_tid, add_corr = b.h_tid.append, b.h_corr.append
        names = b._name_ids
        intern = b.intern
        int64 = _INT64_MAX
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
                    self._flow(ev, ph, k)
                    continue
                if ph == "M" or (ph is None and "ts" not in ev):
                    continue
            cat = ev.get("cat")
            try:
                code = cat_cache[cat]
            except KeyError:
                code = cat_cache[cat] = category_code(cat)
            except TypeError:  # unhashable category
                code = SKIPPED
            if code < 0:
                if ph == "i" and ev.get("name") == "[memory]":
                    self._memory(ev, k)
                continue
            ts = ev.get("ts")
            if type(ts) is int:
                ts *= 1000
            elif type(ts) is float:
                ts = round(ts * 1000)
            else:
                raise _bad_time(source, k, cat, "ts", ts)
            dur = ev.get("dur", 0)
            if type(dur) is int:
                dur *= 1000
            elif type(dur) is float:
                dur = round(dur * 1000)
            elif dur is None:
                dur = 0
            else:
                raise _bad_time(source, k, cat, "dur", dur)
            name = ev.get("name")
            if type(name) is not str:
                name = str(name)
            elif code == cpu_op and name in dropped:
                continue
            args = ev.get("args")
            if type(args) is not dict:
                args = empty
            corr = args.get("correlation", -1)
            if type(corr) is not int or corr > int64 or corr < -int64:  # past int64: no id (orjson reads it as a float)
                corr = _int(corr)
            key = (ev.get("pid"), ev.get("tid"))
            try:  # self._thread(*key), inlined: the hot path
                tid = threads[key]
            except KeyError:
                tid = threads[key] = b.thread(*key)
            except TypeError:
                tid = self._thread(*key)
            if code >= DEVICE_OFFSET:
                self._device(code, name, ts, dur, tid, corr, ev, args)
                continue
            if code == cpu_op and "Input Dims" in args:
                self._shapes(name, args)
            nid = names.get(name)
            add_name(nid if nid is not None else intern(name))
            add_cat(code)
            add_ts(ts)
            add_dur(dur if dur > 0 else 0)
            add_tid(tid)
            add_corr(corr)
        self.count = k + 1

    def consume_typed(self, events: Iterable[Any]) -> None:
        """:meth:`consume` for typed records (:func:`decode_batch`): the same columns, the same errors.

        Fewer lookups per event than the dict reading: an op's name is looked up once (``op_ids``: its id, or
        that it is dropped or shaped), and a run of events on one thread finds its row without a key tuple
        (``last_*``: the previous event's pid, tid and row; equal values are the same dict key)."""
        b = self.builder
        source = self.source
        cat_cache = self.cat_cache
        threads = self.threads
        cpu_op = CPU_OP_CODE
        unset = _UNSET
        no_args = _NO_ARGS
        flow_cats = FLOW_CATEGORIES
        add_name, add_cat, add_ts, add_dur = b.h_name.append, b.h_cat.append, b.h_ts.append, b.h_dur.append
        add_tid, add_corr = b.h_tid.append, b.h_corr.append
        f_start, f_tid, f_ts, f_id = self.f_start.append, self.f_tid.append, self.f_ts.append, self.f_id.append
        names = b._name_ids
        intern = b.intern
        op_ids = self.op_ids
        shape_values, h_shapes, h_ts, special = self.shape_values, b.h_shapes, b.h_ts, _SPECIAL_SHAPES
        add_d_name, add_d_cat, add_d_ts, add_d_dur = b.d_name.append, b.d_cat.append, b.d_ts.append, b.d_dur.append
        add_d_device, add_d_stream, add_d_corr = b.d_device.append, b.d_stream.append, b.d_corr.append
        d_ts, d_launch, launch_values, dev_no_corr = b.d_ts, b.d_launch, self.launch_values, self.dev_no_corr
        span = DEVICE_CODE[GPU_USER_ANNOTATION]  # a span's correlation id is its annotation's: not kept (add_device)
        int64 = _INT64_MAX
        last_pid: Any = _NOTHING
        last_tid: Any = _NOTHING
        last_row = -1
        last_raw = self.last_raw
        last_grid: Any = None
        last_block: Any = None
        last_launch: Any = None
        ev: Any
        ts: Any
        dur: Any
        name: Any
        events = events if type(events) is list else list(events)
        for ev in events:  # (an event's index is found only for an error's message: _index, no count per event)
            ph = ev.ph
            cat = ev.cat
            if ph != "X":
                if ph == "s" or ph == "f":  # self._flow, inlined
                    if cat not in flow_cats:
                        continue
                    ts = ev.ts
                    if type(ts) is not int and type(ts) is not float:
                        raise TraceError(source, f"event {self._index(events, ev)}: flow event without a numeric 'ts'")
                    pid, tid = ev.pid, ev.tid
                    if pid == last_pid and tid == last_tid:
                        tid = last_row
                    else:
                        key = (pid, tid)
                        try:
                            tid = threads[key]
                        except KeyError:
                            tid = threads[key] = b.thread(pid, tid)
                        except TypeError:
                            tid = self._thread(pid, tid)
                        else:
                            last_pid, last_tid, last_row = pid, key[1], tid
                    flow_id = ev.id
                    f_start(ph == "s")
                    f_tid(tid)
                    f_ts(ts * 1000 if type(ts) is int else round(ts * 1000))
                    f_id(flow_id if type(flow_id) is int and -int64 <= flow_id <= int64 else _int(flow_id))
                    continue
                if ph == "M" or (ph is None and ev.ts is unset):
                    continue
            try:
                code = cat_cache[cat]
            except KeyError:
                code = cat_cache[cat] = category_code(cat)
            except TypeError:  # unhashable category
                code = SKIPPED
            if code < 0:
                if ph == "i" and ev.name == "[memory]":
                    self._memory_typed(ev)
                continue
            ts = ev.ts
            if type(ts) is int:
                ts *= 1000
            elif type(ts) is float:
                ts = round(ts * 1000)
            else:
                raise _bad_time(source, self._index(events, ev), cat, "ts", None if ts is unset else ts)
            dur = ev.dur
            if type(dur) is int:
                dur *= 1000
            elif type(dur) is float:
                dur = round(dur * 1000)
            elif dur is None:
                dur = 0
            else:
                raise _bad_time(source, self._index(events, ev), cat, "dur", dur)
            name = ev.name
            if type(name) is not str:
                name = str(name)
                op = _OP_NEW  # (no text of a non-string is the name of a dropped or shaped op)
            elif code == cpu_op:
                op = op_ids.get(name, _OP_NEW)
                if op == _OP_NEW:
                    op = op_ids[name] = _op_kind(name)
                if op == _OP_DROPPED:
                    continue
            else:
                op = _OP_NEW
            args = ev.args
            if args is None:
                args = no_args
            corr = args.correlation
            if type(corr) is not int or corr > int64 or corr < -int64:  # past int64: no id, as the dict reading has it
                corr = _int(corr)
            pid, tid = ev.pid, ev.tid
            if pid == last_pid and tid == last_tid:  # self._thread(pid, tid), inlined: the hot path
                tid = last_row
            else:
                key = (pid, tid)
                try:
                    tid = threads[key]
                except KeyError:
                    tid = threads[key] = b.thread(pid, tid)
                except TypeError:
                    tid = self._thread(pid, tid)
                else:
                    last_pid, last_tid, last_row = pid, key[1], tid
            if code >= DEVICE_OFFSET:  # self._device_typed, inlined
                grid, block = args.grid, args.block
                j = len(d_ts)
                if type(grid) is list and type(block) is list:
                    if grid == last_grid and block == last_block:  # the last kernel's configuration again
                        d_launch[j] = last_launch
                    else:
                        launch = (tuple(grid), tuple(block))
                        try:
                            d_launch[j] = last_launch = launch_values.setdefault(launch, launch)
                            last_grid, last_block = grid, block
                        except TypeError:  # an unhashable element: kept as it is
                            d_launch[j] = launch
                nid = names.get(name)
                add_d_name(nid if nid is not None else intern(name))
                code -= DEVICE_OFFSET
                add_d_cat(code)
                add_d_ts(ts)
                add_d_dur(dur if dur > 0 else 0)
                device = args.device
                add_d_device(device if type(device) is int and -int64 <= device <= int64 else _int(device, _int(ev.pid, 0)))
                stream = args.stream
                add_d_stream(stream if type(stream) is int and -int64 <= stream <= int64 else _int(stream, _int(ev.tid, 0)))
                add_d_corr(-1 if code == span else corr)
                if corr < 0:
                    dev_no_corr[j] = (tid, ts)
                continue
            if op >= 0:  # an op of a plain name: its id
                add_name(op)
            else:
                if op == _OP_SHAPED and args.dims:  # self._shapes_typed, inlined (an op's: only ops are shaped)
                    if name in special:
                        h_shapes[len(h_ts)] = self._shape_value(name, args)
                    else:  # the op's last texts again (compared in place): its shapes, with no key to build
                        dims, types = args.dims, args.types
                        last = last_raw.get(name)
                        if last is not None and last[0] == dims and last[1] == types:
                            h_shapes[len(h_ts)] = last[2]
                        else:
                            shapes = shape_values.get((bytes(dims), bytes(types)))
                            if shapes is None:
                                shapes = self._shape_value(name, args)
                            h_shapes[len(h_ts)] = shapes
                            last_raw[name] = (dims.copy(), types.copy(), shapes)  # (copies: no batch's text kept)
                nid = names.get(name)
                if nid is None:
                    nid = intern(name)
                if op == _OP_PLAIN:  # an op's name, from now on found by one lookup
                    op_ids[name] = nid
                add_name(nid)
            add_cat(code)
            add_ts(ts)
            add_dur(dur if dur > 0 else 0)
            add_tid(tid)
            add_corr(corr)
        self.count += len(events)

    def _index(self, events: list[Any], ev: Any) -> int:
        """The index in the file of ``ev``, one of ``events`` (the records of the batch being read)."""
        return self.count + next(k for k, other in enumerate(events) if other is ev)

    def _memory_typed(self, ev: Any) -> None:
        """:meth:`_memory` for a typed record."""
        args = ev.args
        ts = ev.ts
        if args is None or (type(ts) is not int and (type(ts) is not float or not math.isfinite(ts))):
            return
        nbytes = _int(args.nbytes, 0)
        if not nbytes:
            return
        self.builder.add_memory(
            round(ts * 1000),
            self._thread(ev.pid, ev.tid),
            _int(args.dtype, 0),
            _int(args.dindex, -1),
            _int(args.addr, -1),
            nbytes,
            _int(args.total, -1),
            _int(args.reserved, -1),
        )

    def _raw(self, raw: Any) -> Any:
        """A raw argument's value, decoded once per distinct text (a trace repeats its shapes: one copy)."""
        key = bytes(raw)
        try:
            return self.raw_values[key]
        except KeyError:
            value = self.raw_values[key] = _raw_value(raw)
            return value

    def _shape_value(self, name: str, args: Any) -> tuple[Any, ...]:
        """:meth:`_shapes` for a typed record of an op whose shapes the rules read: the same values, one copy of
        each distinct (dims, types)."""
        dims, types = args.dims, args.types
        concrete = args.concrete
        if name in CAUSAL_ARG:
            key: tuple[Any, ...] = (name, bytes(dims), bytes(types), bytes(concrete))
        elif name in ARG_OPS:
            key = (None, bytes(dims), bytes(types), bytes(concrete))
        else:
            key = (bytes(dims), bytes(types))
        shapes = self.shape_values.get(key)
        if shapes is None:
            raw = self._raw
            dims_v, types_v = raw(dims), raw(types) if types else None
            concrete_v = raw(concrete) if concrete else None
            if name in CAUSAL_ARG:  # attention: whether it is causal halves its FLOPs
                shapes = (dims_v, types_v, causal_flag(name, concrete_v))
            elif name in ARG_OPS:  # convolutions: stride, padding, groups... give their output size
                shapes = (dims_v, types_v, None, conv_args(concrete_v))
            else:
                shapes = (dims_v, types_v)
            self.shape_values[key] = shapes
        return shapes

    def _memory(self, ev: dict[str, Any], k: int) -> None:
        """An allocator instant (``profile_memory``): its time, thread, device, address, bytes and the totals after
        it. One without a numeric time (a finite one) or byte count is skipped (the rules read no half event)."""
        args = ev.get("args")
        ts = ev.get("ts")
        if type(args) is not dict or (type(ts) is not int and (type(ts) is not float or not math.isfinite(ts))):
            return
        nbytes = _int(args.get("Bytes"), 0)
        if not nbytes:
            return
        self.builder.add_memory(
            round(ts * 1000),
            self._thread(ev.get("pid"), ev.get("tid")),
            _int(args.get("Device Type"), 0),
            _int(args.get("Device Id"), -1),
            _int(args.get("Addr"), -1),
            nbytes,
            _int(args.get("Total Allocated"), -1),
            _int(args.get("Total Reserved"), -1),
        )

    def _flow(self, ev: dict[str, Any], ph: str, k: int) -> None:
        """A flow event's start or end (kept for the fallback link of device work without a correlation id)."""
        if ev.get("cat") not in FLOW_CATEGORIES:
            return
        ts = ev.get("ts")
        if type(ts) is not int and type(ts) is not float:
            raise TraceError(self.source, f"event {k}: flow event without a numeric 'ts'")
        flow_id = ev.get("id")
        self.f_start.append(ph == "s")
        self.f_tid.append(self._thread(ev.get("pid"), ev.get("tid")))
        self.f_ts.append(round(ts * 1000))
        self.f_id.append(_int(flow_id))  # (past int64: no id, as orjson's float of it reads)

    def _shapes(self, name: str, args: dict[str, Any]) -> None:
        """Keep the input shapes and dtypes of the host event about to be appended, for the ops rules read."""
        want = self.shaped.get(name)
        if want is None:
            want = self.shaped[name] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
        if not want:
            return
        dims, types = args.get("Input Dims"), args.get("Input type")
        index = len(self.builder.h_ts)
        if name in CAUSAL_ARG:  # attention: whether it is causal halves its FLOPs
            self.builder.h_shapes[index] = (dims, types, causal_flag(name, args.get("Concrete Inputs")))
            return
        if name in ARG_OPS:  # convolutions: stride, padding, groups... give their output size
            conv = conv_args(args.get("Concrete Inputs"))
            last = self.last_shapes.get(name)
            if last is not None and last[0] == dims and last[1] == types and last[3] == conv:
                self.builder.h_shapes[index] = last
            else:
                self.builder.h_shapes[index] = self.last_shapes[name] = (dims, types, None, conv)
            return
        last = self.last_shapes.get(name)
        if last is not None and last[0] == dims and last[1] == types:
            self.builder.h_shapes[index] = last  # a trace repeats its shapes: share one copy
        else:
            self.builder.h_shapes[index] = self.last_shapes[name] = (dims, types)

    def _device(self, code: int, name: str, ts: int, dur: int, tid: int, corr: int, ev: dict[str, Any], args: dict[str, Any]) -> None:
        grid, block = args.get("grid"), args.get("block")
        launch = (tuple(grid), tuple(block)) if isinstance(grid, list) and isinstance(block, list) else None
        device = _int(args.get("device"), _int(ev.get("pid"), 0))
        stream = _int(args.get("stream"), _int(ev.get("tid"), 0))
        j = self.builder.add_device(DEVICE_CATEGORIES[code - DEVICE_OFFSET], name, ts, dur, device, stream, corr, launch)
        if corr < 0:
            self.dev_no_corr[j] = (tid, ts)

    def _thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        try:
            return self.threads[key]
        except KeyError:
            t = self.threads[key] = self.builder.thread(pid, tid)
            return t
        except TypeError:  # unhashable pid/tid
            return self.builder.thread(str(pid), str(tid))

    # -- batches consumed elsewhere -------------------------------------------------------------
    def columns(self) -> Columns:
        """What :meth:`merge` needs of this consumer."""
        builder = self.builder
        return Columns(
            self.count,
            builder.names,
            builder.threads,
            builder.h_name,
            builder.h_cat,
            builder.h_ts,
            builder.h_dur,
            builder.h_tid,
            builder.h_corr,
            builder.h_shapes,
            builder.d_name,
            builder.d_cat,
            builder.d_ts,
            builder.d_dur,
            builder.d_device,
            builder.d_stream,
            builder.d_corr,
            builder.d_launch,
            self.dev_no_corr,
            self.f_start,
            self.f_tid,
            self.f_ts,
            self.f_id,
            tuple(getattr(builder, name) for name in MEMORY_COLUMNS),
        )

    def merge(self, part: Columns) -> None:
        """Append a batch that another consumer read (its events follow the ones seen so far)."""
        builder = self.builder
        name_map = [builder.intern(s) for s in part.names]
        thread_map = [builder.thread(*key) for key in part.threads]
        h0, d0 = len(builder.h_ts), len(builder.d_ts)
        builder.h_name.extend(map(name_map.__getitem__, part.h_name))
        builder.h_cat.extend(part.h_cat)
        builder.h_ts.extend(part.h_ts)
        builder.h_dur.extend(part.h_dur)
        builder.h_tid.extend(map(thread_map.__getitem__, part.h_tid))
        builder.h_corr.extend(part.h_corr)
        if part.h_shapes:
            builder.h_shapes.update({i + h0: v for i, v in part.h_shapes.items()})
        builder.d_name.extend(map(name_map.__getitem__, part.d_name))
        builder.d_cat.extend(part.d_cat)
        builder.d_ts.extend(part.d_ts)
        builder.d_dur.extend(part.d_dur)
        builder.d_device.extend(part.d_device)
        builder.d_stream.extend(part.d_stream)
        builder.d_corr.extend(part.d_corr)
        if part.d_launch:
            builder.d_launch.update({j + d0: v for j, v in part.d_launch.items()})
        for j, (t, ts) in part.dev_no_corr.items():
            self.dev_no_corr[j + d0] = (thread_map[t], ts)
        self.f_start.extend(part.f_start)
        self.f_tid.extend(map(thread_map.__getitem__, part.f_tid))
        self.f_ts.extend(part.f_ts)
        self.f_id.extend(part.f_id)
        if part.memory and len(part.memory[0]):
            for name, col in zip(MEMORY_COLUMNS, part.memory):
                getattr(builder, name).extend(map(thread_map.__getitem__, col) if name == "m_tid" else col)
        self.count += part.count

    def finish(self) -> None:
        """Flow fallback: link device work without a correlation id to its launch through flow events."""
        if not self.dev_no_corr:
            return
        builder = self.builder
        launch_at = {(builder.h_tid[i], builder.h_ts[i]): i for i in range(len(builder.h_ts)) if builder.h_cat[i] in LAUNCH_CODES}
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
            builder.d_corr[j] = fid
            start_key = flows_s.get(fid)
            if start_key is not None and start_key in launch_at:
                h = launch_at[start_key]
                if builder.h_corr[h] < 0:
                    builder.h_corr[h] = fid
