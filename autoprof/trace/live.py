"""Trace from a finished profiler window's raw kineto events (``prof.profiler.kineto_results.events()``).

Never ``prof.events()`` / ``key_averages()``: those build a FunctionEvent per event (6–7 s for 100k events
on this project's machines); reading the raw events takes a small fraction of that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from autoprof.trace.model import (
    CPU_OP,
    CUDA_DRIVER,
    CUDA_RUNTIME,
    DEVICE_CATEGORIES,
    DROPPED_OPS,
    HOST_CATEGORIES,
    HOST_CODE,
    SHAPED_OPS,
    SHAPED_PREFIXES,
    USER_ANNOTATION,
    Trace,
    TraceBuilder,
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
) -> Trace:
    """Build a :class:`Trace` from kineto events (objects with ``name()``, ``activity_type()``, ...). ``tick`` is
    called every 256 events (the background analysis paces itself there)."""
    with gc_paused():
        return _build(events, source, target, rank, world_size, metadata, tick)


# What an activity type is: host (category code, is a launching call, is an op) or device (-1, category, False);
# None: a category no rule reads.
_Kind = tuple[int, Any, bool]
_ANNOTATION: _Kind = (HOST_CODE[USER_ANNOTATION], False, False)


def _kind(activity_type: Any) -> _Kind | None:
    cat = normalize_category(str(activity_type))
    if cat in HOST_CATEGORIES:
        return (HOST_CODE[cat], cat in (CUDA_RUNTIME, CUDA_DRIVER), cat == CPU_OP)
    if cat in DEVICE_CATEGORIES:
        return (-1, cat, False)
    return None


class _Threads:
    """Thread rows of a live window. An op or annotation is on its torch thread. A runtime/driver call belongs
    to the thread of the op it was called from (linked by id, as torch's own parser does; resolved at the end,
    the op may come later in the list). One with no linked op gets from torch the thread that stopped the
    profiler: its real system thread (an NCCL watchdog, pin-memory or user thread) is in
    ``device_resource_id()``, a thread of its own here, never the training thread's op tree."""

    def __init__(self, builder: TraceBuilder) -> None:
        self.builder = builder
        self.of: dict[Any, int] = {}  # torch's thread id, or ("sys", system thread id) -> thread row
        self.op_thread: dict[int, int] = {}  # op id (an op's or annotation's correlation_id()) -> torch thread id
        self.unresolved: list[tuple[int, int, int]] = []  # (row, linked op id, torch's thread id) of runtime calls

    def of_call(self, ev: Any, row: int) -> int:
        """A runtime/driver call's thread row (-1 until :meth:`resolve`)."""
        linked = ev.linked_correlation_id()
        if linked > 0:
            self.unresolved.append((row, linked, ev.start_thread_id()))
            return -1
        sys_key = ("sys", ev.device_resource_id())
        tid = self.of.get(sys_key)
        if tid is None:
            tid = self.of[sys_key] = self.builder.thread("host-sys", sys_key[1])
        return tid

    def of_op(self, ev: Any) -> int:
        """An op's or annotation's thread row (and what runtime calls linked to it will resolve to)."""
        torch_tid = ev.start_thread_id()
        tid = self.of.get(torch_tid)
        if tid is None:
            tid = self.of[torch_tid] = self.builder.thread("host", torch_tid)
        self.op_thread[ev.correlation_id()] = torch_tid
        return tid

    def resolve(self) -> None:
        """Put each linked runtime call on its op's thread."""
        h_tid = self.builder.h_tid
        for row, linked, fallback in self.unresolved:
            torch_tid = self.op_thread.get(linked, fallback)
            found = self.of.get(torch_tid)
            if found is None:
                found = self.of[torch_tid] = self.builder.thread("host", torch_tid)
            h_tid[row] = found


class _Shapes:
    """Input shapes and dtypes of the ops rules read, asked of kineto only for those. Name id -> its last
    (shapes, dtypes), shared, not copied: fewer live containers for the cyclic collector to walk when it runs
    again after the load (measured: ~60 ms less per 100k-event window)."""

    def __init__(self, out: dict[int, tuple[Any, Any]]) -> None:
        self.out = out
        self.wanted: dict[int, bool] = {}  # name id -> keep its shapes
        self.last: dict[int, tuple[Any, Any]] = {}

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
        last = self.last.get(nid)
        if last is not None and last[0] == shapes and last[1] == dtypes:
            self.out[row] = last  # a window repeats its shapes: share one copy
        else:
            self.out[row] = self.last[nid] = (shapes, dtypes)


def _build(
    events: Iterable[Any],
    source: str,
    target: str | None,
    rank: int,
    world_size: int,
    metadata: dict[str, Any] | None,
    tick: Callable[[], None] | None,
) -> Trace:
    builder = TraceBuilder(source=source)
    builder.rank, builder.world_size = rank, world_size
    if metadata:
        builder.metadata.update(metadata)
    # The hot loop writes straight into the builder's columns: one dict lookup per event for the
    # category, one for the thread, one for the name; kineto is asked only for what the rules read.
    kind_of: dict[Any, _Kind | None] = {}
    threads = _Threads(builder)
    shapes = _Shapes(builder.h_shapes)
    name_add, cat_add, ts_add = builder.h_name.append, builder.h_cat.append, builder.h_ts.append
    dur_add, tid_add, corr_add = builder.h_dur.append, builder.h_tid.append, builder.h_corr.append
    intern = builder.intern
    names = builder._name_ids
    dropped = DROPPED_OPS
    row = -1
    seen = 0
    for ev in events:
        seen += 1
        if tick is not None and not seen & 255:
            tick()
        name = ev.name()
        if name in dropped:  # only ops carry these names: skip them before asking kineto anything else
            continue
        at = ev.activity_type()
        try:
            kind = kind_of[at]
        except KeyError:
            kind = kind_of[at] = _kind(at)
        if kind is None:
            if not ev.is_user_annotation():
                continue
            kind = _ANNOTATION
        code, launch, is_op = kind
        if code < 0:
            # (a gpu_user_annotation's correlation_id() is its annotation's op id: add_device drops it)
            builder.add_device(
                kind[1], name, ev.start_ns(), ev.duration_ns(), int(ev.device_index()), int(ev.device_resource_id()), ev.correlation_id()
            )
            continue
        row += 1
        nid = names.get(name)
        if nid is None:
            nid = intern(name)
        name_add(nid)
        cat_add(code)
        ts_add(ev.start_ns())
        d = ev.duration_ns()
        dur_add(d if d > 0 else 0)
        if launch:
            tid_add(threads.of_call(ev, row))
            corr_add(ev.correlation_id())
        else:
            tid_add(threads.of_op(ev))
            corr_add(-1)
        if is_op:
            shapes.keep(ev, nid, name, row)
    threads.resolve()
    return builder.build(target)
