"""Trace from chrome-trace JSON files (``.json`` / ``.json.gz``) written by torch.profiler / kineto.

Reads current and 2021 category names, float timestamps with ns fractions, instant events without
``dur``, and links device work to its launch by ``args.correlation`` (flow events as a fallback).
Any problem with the input raises :class:`TraceError` with one line naming the file and the problem.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any

from autoprof.trace.model import (
    CPU_OP,
    DEVICE_CATEGORIES,
    FLOW_CATEGORIES,
    HOST_CATEGORIES,
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


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(path, f"corrupt or truncated gzip ({e})") from None
    if not raw.strip():
        raise TraceError(path, "empty file")
    return raw


def load_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    raw = _read_bytes(p)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise TraceError(p, f"not valid JSON ({str(e).splitlines()[0]})") from None
    del raw
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TraceError(p, "not a chrome trace: no 'traceEvents'")
    if not isinstance(doc["traceEvents"], list):
        raise TraceError(p, "not a chrome trace: 'traceEvents' is not a list")
    return doc


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


def from_document(doc: dict[str, Any], source: str = "<memory>", target: str | None = None) -> Trace:
    """Build a :class:`Trace` from a parsed chrome-trace document."""
    if target is None and isinstance(doc.get("autoprof_target"), str):
        target = doc["autoprof_target"]  # a window kept by autoprof's trace_dir
    b = TraceBuilder(source=source)
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        b.rank = _int(dist.get("rank"), 0)
        b.world_size = max(_int(dist.get("world_size"), 1), 1)
    props = doc.get("deviceProperties")
    if isinstance(props, list):
        b.device_properties = [p for p in props if isinstance(p, dict)]
    b.metadata = {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties") and not isinstance(v, (list, dict))}
    peak = doc.get("autoprof_cpu_peak_flops")
    if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0:
        b.metadata["cpu_peak_flops"] = float(peak)
    host_cats = set(HOST_CATEGORIES)
    dev_cats = set(DEVICE_CATEGORIES)
    flows_s: dict[int, tuple[int, int]] = {}
    flows_f: dict[tuple[int, int], int] = {}
    host_at: dict[tuple[int, int], int] = {}
    dev_no_corr: dict[int, tuple[int, int]] = {}
    for k, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict):
            raise TraceError(source, f"event {k} is not an object")
        ph = ev.get("ph")
        if ph == "M" or (ph is None and "ts" not in ev):
            continue
        cat_raw = ev.get("cat")
        if ph in ("s", "f"):
            if cat_raw in FLOW_CATEGORIES:
                try:
                    key = (b.thread(ev.get("pid"), ev.get("tid")), _ns(ev["ts"]))
                except (KeyError, TypeError):
                    raise TraceError(source, f"event {k}: flow event without a numeric 'ts'") from None
                fid = _int(ev.get("id"))
                if ph == "s":
                    flows_s[fid] = key
                else:
                    flows_f[key] = fid
            continue
        cat = normalize_category(cat_raw) if isinstance(cat_raw, str) else None
        if cat is None:
            continue
        try:
            ts = _ns(ev["ts"])
        except KeyError:
            raise TraceError(source, f"event {k} ({cat_raw}) has no 'ts'") from None
        except TypeError:
            raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'ts'") from None
        dur_v = ev.get("dur", 0)
        try:
            dur = _ns(dur_v) if dur_v is not None else 0
        except TypeError:
            raise TraceError(source, f"event {k} ({cat_raw}) has a non-numeric 'dur'") from None
        name = ev.get("name")
        if not isinstance(name, str):
            name = str(name)
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        corr = _int(args.get("correlation"))
        tid = b.thread(ev.get("pid"), ev.get("tid"))
        if cat in host_cats:
            shapes = None
            if cat == CPU_OP and "Input Dims" in args:
                shapes = (args.get("Input Dims"), args.get("Input type"))
            i = b.add_host(cat, name, ts, dur, tid, corr, shapes)
            host_at[(tid, ts)] = i
        elif cat in dev_cats:
            grid, block = args.get("grid"), args.get("block")
            launch = (tuple(grid), tuple(block)) if isinstance(grid, list) and isinstance(block, list) else None
            device = _int(args.get("device"), _int(ev.get("pid"), 0))
            stream = _int(args.get("stream"), _int(ev.get("tid"), 0))
            j = b.add_device(cat, name, ts, dur, device, stream, corr, launch)
            if corr < 0:
                dev_no_corr[j] = (tid, ts)
    # Flow fallback for device work without a correlation id.
    for j, key in dev_no_corr.items():
        fid = flows_f.get(key)
        if fid is None or fid < 0:
            continue
        b.d_corr[j] = fid
        start = flows_s.get(fid)
        if start is not None and start in host_at:
            h = host_at[start]
            if b.h_corr[h] < 0:
                b.h_corr[h] = fid
    return b.build(target)


def load(path: str | os.PathLike[str], target: str | None = None) -> Trace:
    """Load one chrome-trace file. Raises :class:`TraceError` (one line, names the file) on bad input."""
    with gc_paused():
        return _load(path, target)


def _load(path: str | os.PathLike[str], target: str | None) -> Trace:
    doc = load_json(path)
    try:
        return from_document(doc, source=str(path), target=target)
    except TraceError as e:
        if e.path == str(path):
            raise
        raise TraceError(path, e.problem) from None
    except (TypeError, ValueError, OverflowError, KeyError) as e:
        raise TraceError(path, f"malformed trace event ({type(e).__name__}: {e})") from None


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
