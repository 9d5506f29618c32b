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


def _build(events: Iterable[Any], source: str, target: str | None, rank: int, world_size: int,
           metadata: dict[str, Any] | None, tick: Callable[[], None] | None) -> Trace:
    b = TraceBuilder(source=source)
    b.rank, b.world_size = rank, world_size
    if metadata:
        b.metadata.update(metadata)
    # The hot loop writes straight into the builder's columns: one dict lookup per event for the
    # category, one for the thread, one for the name; kineto is asked only for what the rules read.
    cat_of: dict[Any, Any] = {}
    thread_of: dict[Any, int] = {}  # torch's thread id, or ("sys", system thread id) -> thread index
    ann = (HOST_CODE[USER_ANNOTATION], False, False)
    name_add, cat_add, ts_add = b.h_name.append, b.h_cat.append, b.h_ts.append
    dur_add, tid_add, corr_add = b.h_dur.append, b.h_tid.append, b.h_corr.append
    shapes_out = b.h_shapes
    intern = b.intern
    names = b._name_ids
    add_device = b.add_device
    dropped = DROPPED_OPS
    shaped_name: dict[int, bool] = {}  # name id -> keep its shapes (cpu ops only)
    # Name id -> its last (shapes, dtypes). Shared, not copied: fewer live containers for the cyclic
    # collector to walk when it runs again after the load (measured: ~60 ms less per 100k-event window).
    last_shapes: dict[int, tuple[Any, Any]] = {}
    op_thread: dict[int, int] = {}  # op id (an op's or annotation's correlation_id()) -> its torch thread id
    unresolved: list[tuple[int, int, int]] = []  # (row, linked op id, torch's thread id) of runtime calls
    i = -1
    seen = 0
    for ev in events:
        seen += 1
        if tick is not None and not seen & 255:
            tick()
        name = ev.name()
        if name in dropped:  # only ops carry these names: skip them before asking kineto anything else
            continue
        at = ev.activity_type()
        c = cat_of.get(at, False)
        if c is False:
            cat = normalize_category(str(at))
            if cat in HOST_CATEGORIES:
                c = (HOST_CODE[cat], cat in (CUDA_RUNTIME, CUDA_DRIVER), cat == CPU_OP)
            elif cat in DEVICE_CATEGORIES:
                c = (-1, cat, False)
            else:
                c = None
            cat_of[at] = c
        if c is None:
            if not ev.is_user_annotation():
                continue
            c = ann
        ci, launch, is_op = c  # host: (category index, is a launching call, is an op); device: (-1, category, False)
        if ci < 0:
            # (a gpu_user_annotation's correlation_id() is its annotation's op id: add_device drops it)
            add_device(c[1], name, ev.start_ns(), ev.duration_ns(), int(ev.device_index()),
                       int(ev.device_resource_id()), ev.correlation_id())
            continue
        i += 1
        nid = names.get(name)
        if nid is None:
            nid = intern(name)
        name_add(nid)
        cat_add(ci)
        ts_add(ev.start_ns())
        d = ev.duration_ns()
        dur_add(d if d > 0 else 0)
        if launch:
            # A runtime/driver call belongs to the thread of the op it was called from (linked by id, as
            # torch's own parser does). One with no linked op gets from torch the thread that stopped the
            # profiler: its real system thread (an NCCL watchdog, pin-memory or user thread) is in
            # device_resource_id(), a thread of its own here, never the training thread's op tree.
            linked = ev.linked_correlation_id()
            tid: int | None
            if linked > 0:
                tid = -1  # resolved after the loop (the op may come later in the list)
                unresolved.append((i, linked, ev.start_thread_id()))
            else:
                sys_key = ("sys", ev.device_resource_id())
                tid = thread_of.get(sys_key)
                if tid is None:
                    tid = thread_of[sys_key] = b.thread("host-sys", sys_key[1])
            corr_add(ev.correlation_id())
        else:
            st = ev.start_thread_id()
            tid = thread_of.get(st)
            if tid is None:
                tid = thread_of[st] = b.thread("host", st)
            op_thread[ev.correlation_id()] = st  # ops and annotations: what runtime calls link to
            corr_add(-1)
        tid_add(tid)
        if is_op:
            keep = shaped_name.get(nid)
            if keep is None:
                keep = shaped_name[nid] = name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)
            if keep:
                shp = ev.shapes()
                if shp:
                    dts = ev.dtypes()
                    last = last_shapes.get(nid)
                    if last is not None and last[0] == shp and last[1] == dts:
                        shapes_out[i] = last  # a window repeats its shapes: share one copy
                    else:
                        shapes_out[i] = last_shapes[nid] = (shp, dts)
    h_tid = b.h_tid
    for row, linked, fallback in unresolved:
        torch_tid = op_thread.get(linked, fallback)
        found = thread_of.get(torch_tid)
        if found is None:
            found = thread_of[torch_tid] = b.thread("host", torch_tid)
        h_tid[row] = found
    return b.build(target)
