"""Trace from chrome-trace JSON files (``.json`` / ``.json.gz``) written by torch.profiler / kineto.

Reads current and 2021 category names, float timestamps with ns fractions, instant events without
``dur``, and links device work to its launch by ``args.correlation`` (flow events as a fallback).
Any problem with the input raises :class:`TraceError` with one line naming the file and the problem.

This module puts the rooms together: :mod:`~autoprof.trace.inputs` (which files, the gate, the error),
:mod:`~autoprof.trace.jsonstream` (the document, chunk by chunk), :mod:`~autoprof.trace.batches` (the event
array in batches, helper processes), :mod:`~autoprof.trace.events` (events into columns); here the
document's metadata becomes the trace's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoprof.trace import _pool, batches, jsonstream
from autoprof.trace.events import EventConsumer
from autoprof.trace.inputs import (
    TRACE_SUFFIXES,
    TraceError,
    failed_load,
    find_trace_files,
    iter_trace_inputs,
    open_regular_file,
)
from autoprof.trace.model import Trace, TraceBuilder, gc_paused, step_cpu_of, untrusted_int

__all__ = [
    "TRACE_SUFFIXES",
    "ReadSizes",
    "TraceError",
    "failed_load",
    "find_trace_files",
    "from_document",
    "iter_trace_inputs",
    "load",
    "open_regular_file",
]


@dataclass(frozen=True)
class ReadSizes:
    """How a file is read: characters per read, characters per batch of events (0: no batches, every event
    through the exact scanner), and batches read in this process before helper processes start. The defaults
    are what was measured fastest; tests pass small ones."""

    chunk_chars: int = jsonstream.CHUNK_CHARS
    batch_chars: int = jsonstream.BATCH_CHARS
    pool_after: int = batches.POOL_AFTER


DEFAULT_SIZES = ReadSizes()


_int = untrusted_int  # every integer read from a file goes through the untrusted-value reader


def _apply_metadata(builder: TraceBuilder, doc: dict[str, Any]) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        builder.rank = max(_int(dist.get("rank"), 0), 0)
        builder.world_size = max(_int(dist.get("world_size"), 1), 1)
    sections = doc.get("autoprof_sections")  # the sections a window kept by autoprof used
    if isinstance(sections, list):
        builder.metadata["sections"] = [n for n in sections[:10_000] if isinstance(n, str)]
    props = doc.get("deviceProperties")
    if isinstance(props, list):
        builder.device_properties = [p for p in props if isinstance(p, dict)]
    builder.metadata.update(
        {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties") and not isinstance(v, (list, dict))}
    )
    for key, meta_key in (
        ("autoprof_cpu_peak_flops", "cpu_peak_flops"),
        ("autoprof_cpu_peak_bytes_per_s", "cpu_peak_bytes_per_s"),
        ("autoprof_cpu_peak_spread_ratio", "cpu_peak_spread_ratio"),
    ):
        peak = doc.get(key)
        if (
            isinstance(peak, (int, float))
            and not isinstance(peak, bool)
            and math.isfinite(peak)
            and (peak > 0 or (peak == 0 and meta_key == "cpu_peak_spread_ratio"))
        ):
            builder.metadata[meta_key] = float(peak)
    step_cpu = step_cpu_of(doc.get("autoprof_step_cpu"))  # a live window's per-step CPU readings (issue 49)
    if step_cpu is not None:
        builder.metadata["step_cpu"] = step_cpu
    for key in ("host_memory_bytes", "host_memory_available_bytes"):  # the recording machine's: the host creep's forecast
        host = doc.get("autoprof_" + key)
        if type(host) is int and host > 0:
            builder.metadata[key] = host


def _target_of(doc: dict[str, Any], target: str | None) -> str | None:
    if target is None and isinstance(doc.get("autoprof_target"), str):
        return str(doc["autoprof_target"])  # a window kept by autoprof's trace_dir
    return target


def from_document(doc: dict[str, Any], source: str = "<memory>", target: str | None = None) -> Trace:
    """Build a :class:`Trace` from a parsed chrome-trace document."""
    builder = TraceBuilder(source=source)
    consumer = EventConsumer(builder, source)
    consumer.consume(doc["traceEvents"])
    consumer.finish()
    _apply_metadata(builder, doc)
    return builder.build(_target_of(doc, target))


def load(path: str | os.PathLike[str], target: str | None = None, workers: int | None = None, sizes: ReadSizes = DEFAULT_SIZES) -> Trace:
    """Load one chrome-trace file (peak memory stays far below ``json.load``'s).

    The ``traceEvents`` array is parsed in batches of whole events; a large file's batches are shared with
    ``workers`` helper processes (default: the usable CPUs, at most 4, none with one CPU; 0 keeps
    everything in this process). Raises :class:`TraceError` (one line, names the file) on bad input, and
    nothing else.
    """
    if workers is None:
        workers = _pool.default_workers()
    with gc_paused():
        return _load(path, target, workers, sizes)


def _load(path: str | os.PathLike[str], target: str | None, workers: int, sizes: ReadSizes) -> Trace:
    src = str(path)
    builder = TraceBuilder(source=src)
    consumer = EventConsumer(builder, src)
    reader = jsonstream.StreamReader(Path(path), sizes.chunk_chars, sizes.batch_chars)

    def read_array(reader: jsonstream.StreamReader) -> None:
        batches.read_array(reader, consumer, workers, sizes.pool_after)

    try:
        with reader:
            meta = reader.parse(read_array)
    except TraceError as e:
        if e.path == src:
            raise
        raise TraceError(path, e.problem) from None
    except (TypeError, ValueError, OverflowError, KeyError, RecursionError) as e:
        raise TraceError(path, f"malformed trace event ({type(e).__name__}: {e})") from None
    consumer.finish()
    _apply_metadata(builder, meta)
    return builder.build(_target_of(meta, target))
