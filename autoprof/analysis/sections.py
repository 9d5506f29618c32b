"""Section times: how long each ``autoprof.section`` (or, in a trace autoprof did not record, each user
annotation of the program's own) takes, per call and per step. Pure: no torch, no I/O. Not a rule: the
window record carries the table (live, and offline for each analyzed file)."""

from __future__ import annotations

from itertools import compress
from typing import Any

from autoprof.measure.views import view
from autoprof.trace.model import USER_ANNOTATION_CODE, Trace

#: Annotations torch, its libraries and autoprof write themselves: never a user's section.
_NOT_SECTIONS = (
    "ProfilerStep#",
    "Optimizer.",
    "DistributedDataParallel.",
    "nccl:",
    "gloo:",
    "c10d",
    "record_param_comms",
    "enumerate(DataLoader)",
    "## Call CompiledFxGraph",
    "Torch-Compiled Region",
    "TorchDynamo",
    "CompiledFunction",
    "Pregraph bytecode",
    "AOTDispatcher",
    "autograd::",
    "autoprof.",
)
MAX_SECTIONS = 50


def section_names(trace: Trace) -> set[int]:
    """Name ids of the sections: those autoprof recorded (the ``sections`` metadata of a live window or a kept
    trace), else the user annotations that are neither torch's own nor the decorated target."""
    listed = trace.metadata.get("sections")
    if isinstance(listed, list):
        return {trace.name_id(n) for n in listed if isinstance(n, str)} - {-1}
    used = set(compress(trace.h_name, map(USER_ANNOTATION_CODE.__eq__, trace.h_cat)))  # (one pass in C)
    return {nid for nid in used if not trace.names[nid].startswith(_NOT_SECTIONS) and trace.names[nid] != trace.target}


def section_times(trace: Trace) -> list[dict[str, Any]]:
    """One row per section, the longest first: ``name``, ``calls``, ``total_ms``, ``per_call_ms``, ``per_step_ms``
    (None without steps) and ``step_share`` (of the steps' time, or of the window without steps). A section
    nested in itself counts once, at its outermost call."""
    ids = section_names(trace)
    if not ids:
        return []
    win = view(trace)
    calls: dict[int, int] = {}
    total: dict[int, int] = {}
    parent, names = trace.h_parent, trace.h_name
    for i in trace.host_named(ids):
        if trace.h_cat[i] != USER_ANNOTATION_CODE or not win.host_in[i]:
            continue
        nid = names[i]
        calls[nid] = calls.get(nid, 0) + 1
        p = parent[i]
        while p >= 0 and names[p] != nid:
            p = parent[p]
        if p < 0:  # outermost of its name
            total[nid] = total.get(nid, 0) + trace.h_dur[i]
    steps = len(trace.steps)
    whole = sum(s.dur_ns for s in trace.steps) if steps else win.host_window_ns
    rows = []
    for nid, t in sorted(total.items(), key=lambda item: -item[1])[:MAX_SECTIONS]:
        rows.append(
            {
                "name": trace.names[nid],
                "calls": calls[nid],
                "total_ms": round(t / 1e6, 4),
                "per_call_ms": round(t / calls[nid] / 1e6, 4),
                "per_step_ms": round(t / steps / 1e6, 4) if steps else None,
                "step_share": round(t / whole, 4) if whole > 0 else 0.0,
            }
        )
    return rows


def section_tree(trace: Trace, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """:func:`section_times`' rows (or ``rows``, those of this trace) as a tree, in depth-first order: each row
    gains ``parent`` (the name of the section most of its time runs inside, or None) and ``depth`` (0 for a section
    inside no other). Siblings keep the rows' order (the longest first); a section whose parent has no row (or
    whose parents lead back to it: sections that nest in each other both ways) is a root."""
    if rows is None:
        rows = section_times(trace)
    if not rows:
        return []
    ids = section_names(trace)
    win = view(trace)
    parent, names, cat, dur = trace.h_parent, trace.h_name, trace.h_cat, trace.h_dur
    under: dict[int, dict[int, int]] = {}  # section -> enclosing section -> time of its outermost calls inside it
    for i in trace.host_named(ids):
        if cat[i] != USER_ANNOTATION_CODE or not win.host_in[i]:
            continue
        nid, p, enclosing = names[i], parent[i], -1
        while p >= 0 and names[p] != nid:
            if enclosing < 0 and names[p] in ids and cat[p] == USER_ANNOTATION_CODE:
                enclosing = names[p]
            p = parent[p]
        if p < 0:  # an outermost call of its name, as section_times counts it
            by = under.setdefault(nid, {})
            by[enclosing] = by.get(enclosing, 0) + dur[i]
    listed = {r["name"] for r in rows}
    up: dict[str, str | None] = {}
    for nid, by in under.items():
        best = max(by.items(), key=lambda item: (item[1], -item[0]))[0]
        name = trace.names[nid]
        up[name] = trace.names[best] if best >= 0 and trace.names[best] in listed else None
    for name in list(up):  # a loop of parents: each section on it becomes a root
        seen, at = {name}, up[name]
        while at is not None and at not in seen:
            seen.add(at)
            at = up.get(at)
        if at == name:
            up[name] = None
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        children.setdefault(up.get(r["name"]), []).append(r)
    out: list[dict[str, Any]] = []

    def walk(at: str | None, depth: int) -> None:
        for r in children.get(at, []):
            out.append({**r, "parent": at, "depth": depth})
            walk(r["name"], depth + 1)

    walk(None, 0)
    return out
