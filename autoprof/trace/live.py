"""Trace from a finished profiler window's raw kineto events (``prof.profiler.kineto_results.events()``).

Never ``prof.events()`` / ``key_averages()``: those build a FunctionEvent per event (6–7 s for 100k events
on this project's machines); reading the raw events takes a small fraction of that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autoprof.trace.model import (
    CUDA_DRIVER,
    CUDA_RUNTIME,
    DEVICE_CATEGORIES,
    HOST_CATEGORIES,
    USER_ANNOTATION,
    Trace,
    TraceBuilder,
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
    b = TraceBuilder(source=source)
    b.rank, b.world_size = rank, world_size
    if metadata:
        b.metadata.update(metadata)
    host_cats = set(HOST_CATEGORIES)
    dev_cats = set(DEVICE_CATEGORIES)
    corr_cats = (CUDA_RUNTIME, CUDA_DRIVER)
    add_host, add_device, thread = b.add_host, b.add_device, b.thread
    for ev in events:
        cat = normalize_category(str(ev.activity_type()))
        if cat is None:
            if ev.is_user_annotation():
                cat = USER_ANNOTATION
            else:
                continue
        name = ev.name()
        ts = ev.start_ns()
        dur = ev.duration_ns()
        if cat in host_cats:
            shapes = None
            if cat == "cpu_op":
                s = ev.shapes()
                if s:
                    shapes = (s, ev.dtypes())
            corr = ev.correlation_id() if cat in corr_cats else -1
            add_host(cat, name, ts, dur, thread("host", ev.start_thread_id()), corr, shapes)
        elif cat in dev_cats:
            add_device(cat, name, ts, dur, int(ev.device_index()), int(ev.device_resource_id()), ev.correlation_id())
    return b.build(target)
