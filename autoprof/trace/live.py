"""Trace from a finished profiler window's raw kineto events (``prof.profiler.kineto_results.events()``).

Never ``prof.events()`` / ``key_averages()``: those build a FunctionEvent per event (6–7 s for 100k events
on this project's machines); reading the raw events takes a small fraction of that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autoprof.trace.model import (
    CPU_OP,
    CUDA_DRIVER,
    CUDA_RUNTIME,
    DEVICE_CATEGORIES,
    HOST_CATEGORIES,
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
) -> Trace:
    """Build a :class:`Trace` from kineto events (objects with ``name()``, ``activity_type()``, ...)."""
    with gc_paused():
        return _build(events, source, target, rank, world_size, metadata)


def _build(events: Iterable[Any], source: str, target: str | None, rank: int, world_size: int,
           metadata: dict[str, Any] | None) -> Trace:
    b = TraceBuilder(source=source)
    b.rank, b.world_size = rank, world_size
    if metadata:
        b.metadata.update(metadata)
    # The hot loop writes straight into the builder's columns: one dict lookup per event for the
    # category, one for the thread, one for the name; kineto is asked only for what the rules read.
    cat_of: dict[str, Any] = {}
    thread_of: dict[int, int] = {}
    ann = HOST_CATEGORIES.index(USER_ANNOTATION)
    h_name, h_cat, h_ts, h_dur, h_tid, h_corr = b.h_name, b.h_cat, b.h_ts, b.h_dur, b.h_tid, b.h_corr
    shapes_out = b.h_shapes
    intern = b.intern
    names = b._name_ids
    for ev in events:
        at = ev.activity_type()
        c = cat_of.get(at, False)
        if c is False:
            cat = normalize_category(str(at))
            if cat in HOST_CATEGORIES:
                c = (cat, HOST_CATEGORIES.index(cat), cat in (CUDA_RUNTIME, CUDA_DRIVER))
            elif cat in DEVICE_CATEGORIES:
                c = (cat, -1, True)
            else:
                c = None
            cat_of[at] = c
        if c is None:
            if not ev.is_user_annotation():
                continue
            c = (USER_ANNOTATION, ann, False)
        name = ev.name()
        if c[1] < 0:
            b.add_device(c[0], name, ev.start_ns(), ev.duration_ns(), int(ev.device_index()),
                         int(ev.device_resource_id()), ev.correlation_id())
            continue
        i = len(h_ts)
        nid = names.get(name)
        h_name.append(nid if nid is not None else intern(name))
        h_cat.append(c[1])
        h_ts.append(ev.start_ns())
        d = ev.duration_ns()
        h_dur.append(d if d > 0 else 0)
        st = ev.start_thread_id()
        tid = thread_of.get(st)
        if tid is None:
            tid = thread_of[st] = b.thread("host", st)
        h_tid.append(tid)
        h_corr.append(ev.correlation_id() if c[2] else -1)
        if c[0] == CPU_OP and (name in SHAPED_OPS or name.startswith(SHAPED_PREFIXES)):
            shp = ev.shapes()
            if shp:
                shapes_out[i] = (shp, ev.dtypes())
    return b.build(target)
