"""Trace from a finished profiler window's raw kineto events (``prof.profiler.kineto_results.events()``).

Never ``prof.events()`` / ``key_averages()``: those build a FunctionEvent per event (6–7 s for 100k events
on this project's machines); reading the raw events takes a small fraction of that.

Releases differ in what a raw event offers (measured on 2.4.1, 2.11.0, 2.13.0, 2.14.1, 2.15.0):
``activity_type()`` exists from 2.13, ``is_user_annotation()`` from 2.11. What an event is comes from
``activity_type()`` where the release has it; else from ``device_type()``, ``is_user_annotation()`` (before
2.11: the record scope, ``USER_SCOPE``), and the name (runtime ``cuda*``/``hip*`` and driver ``cu[A-Z]*``
calls, ``Memcpy``/``Memset`` on the device; a device span named as a host annotation is that annotation's
span on the device lane). Which way is decided once per event class (:func:`reader_for`), never per event.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable
from operator import methodcaller
from typing import Any

from autoprof import _guard
from autoprof.trace.model import (
    ARG_OPS,
    CAUSAL_ARG,
    CPU_OP,
    CUDA_DRIVER,
    CUDA_RUNTIME,
    DEVICE_CATEGORIES,
    DEVICE_CODE,
    DROPPED_OPS,
    GPU_MEMCPY,
    GPU_MEMSET,
    GPU_USER_ANNOTATION,
    HOST_CATEGORIES,
    HOST_CODE,
    KERNEL,
    SHAPED_OPS,
    SHAPED_PREFIXES,
    USER_ANNOTATION,
    Trace,
    TraceBuilder,
    causal_flag,
    conv_args,
    gc_paused,
    normalize_category,
)


def from_kineto_events(
    events: Iterable[Any],
    *,
    source: str = "live",
    target: str | None = None,
    rank: int = 0,
    world_size: int = 1,
    metadata: dict[str, Any] | None = None,
    tick: Callable[[], None] | None = None,
    device_properties: list[dict[str, Any]] | None = None,
) -> Trace:
    """Build a :class:`Trace` from kineto events (objects with ``name()``, ``activity_type()`` or
    ``device_type()``, ...). ``tick`` is called every 256 events (the background analysis paces itself there).
    ``device_properties``: the devices' properties as a chrome export writes them (``name``...), for the
    roofline's peaks. The accessors the events' release lacks are named in ``metadata["live_missing"]``."""
    with gc_paused():
        return _build(events, source, target, rank, world_size, metadata, tick, device_properties)


# What an activity type is: host (category code, is a launching call, is an op) or device (-1, category, False);
# None: a category no rule reads.
_Kind = tuple[int, Any, bool]
_ANNOTATION: _Kind = (HOST_CODE[USER_ANNOTATION], False, False)
_PENDING_CODE = -2
_PENDING: _Kind = (_PENDING_CODE, KERNEL, False)  # a device span that may be an annotation's (see Reader)


def _kind(activity_type: Any) -> _Kind | None:
    cat = normalize_category(str(activity_type))
    if cat in HOST_CATEGORIES:
        return (HOST_CODE[cat], cat in (CUDA_RUNTIME, CUDA_DRIVER), cat == CPU_OP)
    if cat in DEVICE_CATEGORIES:
        return (-1, cat, False)
    return None


USER_SCOPE = 7  # at::RecordScope::USER_SCOPE: record_function labels (ProfilerStep#N, sections, targets)
_DRIVER = re.compile(r"cu[A-Z]")  # CUDA driver API calls: cuLaunchKernel, cuMemcpyAsync...
#: Host events that are no host activity, by name: the allocator's instants (``profile_memory``; read into the
#: memory columns) and out-of-memory marks. Skipped as activity_type skips them.
_HOST_SKIPPED = frozenset({"[memory]", "[OutOfMemory]"})
#: Device-lane events other than work (CUPTI's synchronization records): skipped as activity_type skips them.
_DEVICE_SKIPPED = frozenset({"Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event"})


def _host_category(name: str) -> str | None:
    """What a host event that is no annotation is, by its name: a runtime or driver call, else an op."""
    if name in _HOST_SKIPPED:
        return None
    if name.startswith(("cuda", "hip")):
        return CUDA_RUNTIME
    if _DRIVER.match(name):
        return CUDA_DRIVER
    return CPU_OP


def _device_category(name: str) -> str | None:
    if name.startswith("Memcpy"):
        return GPU_MEMCPY
    if name.startswith("Memset"):
        return GPU_MEMSET
    if name in _DEVICE_SKIPPED:
        return None
    return KERNEL


#: A device span whose kind is settled only once the whole window is read (before 2.11: an annotation's span
#: is known by its name, which its host annotation may carry later in the list).
PENDING_DEVICE = "pending"


class Reader:
    """How one event class tells what an event is: ``activity(ev)`` gives a key that :func:`_kind` maps to
    a category, the same lookup the fast path does on ``activity_type()``'s values. ``missing`` names the
    accessors this release lacks (each derived another way)."""

    def __init__(self, cls: type) -> None:
        has = {a for a in ("activity_type", "is_user_annotation", "scope", "device_type") if hasattr(cls, a)}
        self.missing = tuple(a for a in ("activity_type", "is_user_annotation") if a not in has)
        self.fast = "activity_type" in has
        self.usable = self.fast or "device_type" in has
        self.activity: Callable[[Any], Any]
        if self.fast:
            self.activity = getattr(cls, "activity_type")  # noqa: B009 - the unbound accessor: one call per event, as before
        elif self.usable:
            self.activity = self._derived(cls, "is_user_annotation" in has, "scope" in has)
        else:
            self.activity = _nothing

    @staticmethod
    def _derived(cls: type, has_annotation: bool, has_scope: bool) -> Callable[[Any], Any]:
        host_of: dict[str, str | None] = {}  # name -> category (names repeat: classified once)
        device_of: dict[str, str | None] = {}
        cpu_of: dict[Any, bool] = {}  # device_type() value -> is the host
        device_type: Callable[[Any], Any] = getattr(cls, "device_type")  # noqa: B009
        if has_annotation:
            annotation: Callable[[Any], bool] = getattr(cls, "is_user_annotation")  # noqa: B009
        elif has_scope:
            scope: Callable[[Any], int] = getattr(cls, "scope")  # noqa: B009

            def annotation(ev: Any) -> bool:
                return bool(scope(ev) == USER_SCOPE)

        else:

            def annotation(ev: Any) -> bool:
                return False

        def activity(ev: Any) -> str | None:
            dt = device_type(ev)
            on_host = cpu_of.get(dt)
            if on_host is None:
                on_host = cpu_of[dt] = str(dt).rsplit(".", 1)[-1].upper() == "CPU"
            name = ev.name()
            if on_host:
                if annotation(ev):
                    return USER_ANNOTATION
                try:
                    return host_of[name]
                except KeyError:
                    cat = host_of[name] = _host_category(name)
                    return cat
            if has_annotation and annotation(ev):
                return GPU_USER_ANNOTATION
            try:
                cat = device_of[name]
            except KeyError:
                cat = device_of[name] = _device_category(name)
            if cat == KERNEL and not has_annotation:
                return PENDING_DEVICE
            return cat

        return activity


def _nothing(ev: Any) -> None:
    return None


_READERS: dict[type, Reader] = {}


def reader_for(cls: type) -> Reader:
    """The :class:`Reader` of an event class, made once per process."""
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = Reader(cls)
    return reader


class _Threads:
    """Thread rows of a live window. An op or annotation is on its torch thread. A runtime/driver call belongs
    to the thread of the op it was called from (linked by id, as torch's own parser does; resolved at the end,
    the op may come later in the list). One with no linked op gets from torch the thread that stopped the
    profiler: its real system thread (an NCCL watchdog, pin-memory or user thread) is in
    ``device_resource_id()``, a thread of its own here, never the training thread's op tree."""

    def __init__(self, builder: TraceBuilder) -> None:
        self.builder = builder
        self.of: dict[Any, int] = {}  # torch's thread id, or ("sys", system thread id) -> thread row
        self.ops: list[Any] = []  # the ops and annotations, in order, and their torch thread ids
        self.op_tids: list[int] = []
        self.unresolved: list[tuple[int, int, int]] = []  # (row, linked op id, torch's thread id) of runtime calls

    def of_call(self, ev: Any, row: int, torch_tid: int) -> int:
        """A runtime/driver call's thread row (-1 until :meth:`resolve`); ``torch_tid``: its ``start_thread_id()``."""
        linked = ev.linked_correlation_id()
        if linked > 0:
            self.unresolved.append((row, linked, torch_tid))
            return -1
        sys_key = ("sys", ev.device_resource_id())
        tid = self.of.get(sys_key)
        if tid is None:
            tid = self.of[sys_key] = self.builder.thread("host-sys", sys_key[1])
        return tid

    def of_op(self, ev: Any, torch_tid: int) -> int:
        """An op's or annotation's thread row (and what runtime calls linked to it will resolve to: its op id is
        asked only when the window has linked runtime calls, see :meth:`resolve`); ``torch_tid``: its
        ``start_thread_id()``."""
        tid = self.of.get(torch_tid)
        if tid is None:
            tid = self.of[torch_tid] = self.builder.thread("host", torch_tid)
        self.ops.append(ev)
        self.op_tids.append(torch_tid)
        return tid

    def of_thread(self, torch_tid: int) -> int:
        """The thread row of torch's thread id (a memory event's: its ops' row)."""
        tid = self.of.get(torch_tid)
        if tid is None:
            tid = self.of[torch_tid] = self.builder.thread("host", torch_tid)
        return tid

    def resolve(self) -> None:
        """Put each linked runtime call on its op's thread (op id: an op's or annotation's ``correlation_id()``; the
        last op of an id wins)."""
        if not self.unresolved:
            return
        op_thread = dict(zip(map(methodcaller("correlation_id"), self.ops), self.op_tids))
        h_tid = self.builder.h_tid
        for row, linked, fallback in self.unresolved:
            torch_tid = op_thread.get(linked, fallback)
            found = self.of.get(torch_tid)
            if found is None:
                found = self.of[torch_tid] = self.builder.thread("host", torch_tid)
            h_tid[row] = found


class _Memory:
    """The allocator's ``[memory]`` instants of a window (``profile_memory=True``). A raw event says its time,
    thread, device and byte count (``nbytes()``: > 0 allocated, < 0 freed); the address and the allocator's totals
    are not among its accessors on any release (the chrome export has them from the profiler's own records): they
    stay -1, and the rules count the window's memory from its start (what was held before is not seen either way).
    The events are kept as the loop meets them and read at the end, one accessor over all of them at a time."""

    __slots__ = ("add", "builder", "events", "threads")

    def __init__(self, builder: TraceBuilder, threads: _Threads) -> None:
        self.builder = builder
        self.threads = threads
        self.events: list[Any] = []
        self.add = self.events.append

    def finish(self) -> None:
        events = self.events
        if not events:
            return
        cls = type(events[0])
        if not hasattr(cls, "nbytes"):  # on every release from 2.4; events without it are not read
            return
        nbytes = list(map(cls.nbytes, events))
        if not all(nbytes):
            events = [ev for ev, n in zip(events, nbytes) if n]
            nbytes = [n for n in nbytes if n]
        b = self.builder
        n = len(events)
        b.m_ts.extend(map(cls.start_ns, events))
        rows: dict[int, int] = {}
        of_thread = self.threads.of_thread
        b.m_tid.extend([rows[t] if t in rows else rows.setdefault(t, of_thread(t)) for t in map(cls.start_thread_id, events)])
        index = list(map(cls.device_index, events))
        # device_type() is the slow accessor (~1.3 µs, an enum object each): a device index is one device of a
        # window, so its type is asked of its first event only; the host's allocations have index -1
        codes: dict[int, int] = {-1: 0}
        for ev, k in zip(events, index):
            if k not in codes:
                codes[k] = _device_code(ev.device_type())
        b.m_dtype.extend(map(codes.__getitem__, index))
        b.m_dindex.extend(index)
        b.m_bytes.extend(nbytes)
        unknown = array("q", [-1]) * n
        b.m_addr.extend(unknown)
        b.m_total.extend(unknown)
        b.m_reserved.extend(unknown)


#: c10's DeviceType codes by name, as a chrome export writes them in a memory event's ``Device Type``.
_DEVICE_CODES = {"CPU": 0, "CUDA": 1, "MKLDNN": 2, "HIP": 6, "XLA": 9, "XPU": 12, "MPS": 13, "META": 14, "PRIVATEUSE1": 20}


def _device_code(dt: Any) -> int:
    """A raw event's ``device_type()`` (an enum of torch's) as c10's code: its value where it has one."""
    try:
        return int(dt)
    except (TypeError, ValueError):
        return _DEVICE_CODES.get(str(dt).rsplit(".", 1)[-1].upper(), -1)


class _Shapes:
    """Input shapes and dtypes of the ops rules read, asked of kineto only for those. Name id -> its last
    (shapes, dtypes), shared, not copied: fewer live containers for the cyclic collector to walk when it runs
    again after the load (measured: ~60 ms less per 100k-event window)."""

    def __init__(self, out: dict[int, tuple[Any, ...]]) -> None:
        self.out = out
        self.wanted: dict[int, bool] = {}  # name id -> keep its shapes
        self.last: dict[int, tuple[Any, ...]] = {}

    def keep(self, ev: Any, nid: int, name: str, row: int) -> None:
        keep = self.wanted.get(nid)
        if keep is None:
            keep = self.wanted[nid] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
        if not keep:
            return
        shapes = ev.shapes()
        if not shapes:
            return
        dtypes = ev.dtypes()
        if name in CAUSAL_ARG:  # attention: whether it is causal halves its FLOPs
            concrete = None
            with _guard.quiet("trace.concrete_inputs"):  # a release without the accessor, or an input it cannot convert
                concrete = ev.concrete_inputs()
            self.out[row] = (shapes, dtypes, causal_flag(name, concrete))
            return
        if name in ARG_OPS:  # convolutions: stride, padding, groups... give their output size
            args = None
            with _guard.quiet("trace.concrete_inputs"):  # a release without the accessor, or an input it cannot convert
                args = conv_args(ev.concrete_inputs())
            last = self.last.get(nid)
            if last is not None and last[0] == shapes and last[1] == dtypes and last[3] == args:
                self.out[row] = last
            else:
                self.out[row] = self.last[nid] = (shapes, dtypes, None, args)
            return
        last = self.last.get(nid)
        if last is not None and last[0] == shapes and last[1] == dtypes:
            self.out[row] = last  # a window repeats its shapes: share one copy
        else:
            self.out[row] = self.last[nid] = (shapes, dtypes)


#: Events read per slice of the hot loop: each accessor is asked of a whole slice at once (``map`` over the class's
#: own method, no attribute lookup per event), and ``tick`` runs between slices (the background analysis paces
#: itself there: one slice holds the GIL well under a millisecond).
SLICE = 512


def _accessor(cls: type, uniform: bool, name: str) -> Callable[[Any], Any]:
    """How to ask every event of the list for ``name()``: the class's own method when all events are of one class,
    else a lookup per event."""
    if uniform:
        method: Callable[[Any], Any] = getattr(cls, name)
        return method
    return methodcaller(name)


def _build(
    events: Iterable[Any],
    source: str,
    target: str | None,
    rank: int,
    world_size: int,
    metadata: dict[str, Any] | None,
    tick: Callable[[], None] | None,
    device_properties: list[dict[str, Any]] | None,
) -> Trace:
    builder = TraceBuilder(source=source)
    builder.rank, builder.world_size = rank, world_size
    if metadata:
        builder.metadata.update(metadata)
    if device_properties:
        builder.device_properties = list(device_properties)
    events = events if isinstance(events, list) else list(events)
    if not events:
        return builder.build(target)
    cls = type(events[0])
    reader = reader_for(cls)
    if reader.missing:
        builder.metadata["live_missing"] = list(reader.missing)
    if not reader.usable:
        raise TypeError(f"raw profiler events of this torch have neither activity_type() nor device_type(): {cls.__name__}")
    uniform = all(type(ev) is cls for ev in events)
    activity = reader.activity if uniform else _per_event(reader)
    name_of = _accessor(cls, uniform, "name")
    start_of = _accessor(cls, uniform, "start_ns")
    duration_of = _accessor(cls, uniform, "duration_ns")
    thread_of = _accessor(cls, uniform, "start_thread_id")
    derived = not reader.fast or "is_user_annotation" in reader.missing  # an unknown kind is skipped, not asked
    # Each slice: names first (the dropped ops are never asked anything else), then each kept event's kind, in the
    # events' order (names are interned and device rows added in that order); then the host events' columns, one
    # accessor over the slice's host events at a time. kineto is asked only for what the rules read.
    kind_of: dict[Any, _Kind | None] = {PENDING_DEVICE: _PENDING}
    pending: list[int] = []  # device rows whose kind is settled at the end (see Reader)
    threads = _Threads(builder)
    shapes = _Shapes(builder.h_shapes)
    memory = _Memory(builder, threads)
    h_name, h_cat, h_ts, h_dur, h_tid, h_corr = builder.h_name, builder.h_cat, builder.h_ts, builder.h_dur, builder.h_tid, builder.h_corr
    intern = builder.intern
    names = builder._name_ids
    wanted = shapes.wanted
    dropped = DROPPED_OPS
    add_device = builder.add_device
    row = len(h_name)
    for at in range(0, len(events), SLICE):
        if tick is not None:
            tick()
        part = events[at : at + SLICE]
        host: list[Any] = []
        host_kinds: list[_Kind] = []
        host_names: list[str] = []
        for ev, name in zip(part, map(name_of, part)):
            if name in dropped:  # only ops carry these names: skip them before asking kineto anything else
                continue
            act = activity(ev)
            try:
                kind = kind_of[act]
            except KeyError:
                kind = kind_of[act] = _kind(act)
            if kind is None:
                if name == "[memory]":  # an allocator instant (profile_memory): its own columns
                    memory.add(ev)
                    continue
                if derived or not ev.is_user_annotation():
                    continue
                kind = _ANNOTATION
            code = kind[0]
            if code < 0:
                # (a gpu_user_annotation's correlation_id() is its annotation's op id: add_device drops it)
                start, span, corr = ev.start_ns(), ev.duration_ns(), ev.correlation_id()
                d = add_device(kind[1], name, start, span, int(ev.device_index()), int(ev.device_resource_id()), corr)
                if code == _PENDING_CODE:
                    pending.append(d)
                continue
            nid = names.get(name)
            if nid is None:
                nid = intern(name)
            h_name.append(nid)
            h_cat.append(code)
            host.append(ev)
            host_kinds.append(kind)
            host_names.append(name)
        if not host:
            continue
        h_ts.extend(map(start_of, host))
        h_dur.extend([d if d > 0 else 0 for d in map(duration_of, host)])
        base = row
        for ev, (_, launch, _), torch_tid in zip(host, host_kinds, map(thread_of, host)):
            if launch:
                h_tid.append(threads.of_call(ev, row, torch_tid))
                h_corr.append(ev.correlation_id())
            else:
                h_tid.append(threads.of_op(ev, torch_tid))
                h_corr.append(-1)
            row += 1
        for k, (ev, kind, name) in enumerate(zip(host, host_kinds, host_names)):
            if kind[2]:
                nid = h_name[base + k]
                keep = wanted.get(nid)
                if keep is None:
                    keep = wanted[nid] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
                if keep:
                    shapes.keep(ev, nid, name, base + k)
    threads.resolve()
    memory.finish()
    if pending:
        _settle_annotation_spans(builder, pending)
    return builder.build(target)


def _per_event(reader: Reader) -> Callable[[Any], Any]:
    """``reader.activity`` for a list whose events are not all of one class: each event's own class's reader."""

    def activity(ev: Any) -> Any:
        return reader_for(type(ev)).activity(ev)

    return activity


def _settle_annotation_spans(builder: TraceBuilder, pending: list[int]) -> None:
    """Device spans read as kernels by a release without ``is_user_annotation()``: one named as a host
    annotation of the window (``ProfilerStep#N``, a section) is that annotation's span on the device lane."""
    code = HOST_CODE[USER_ANNOTATION]
    annotations = {nid for nid, k in zip(builder.h_name, builder.h_cat) if k == code}
    if not annotations:
        return
    span = DEVICE_CODE[GPU_USER_ANNOTATION]
    for d in pending:
        if builder.d_name[d] in annotations:
            builder.d_cat[d] = span
            builder.d_corr[d] = -1
