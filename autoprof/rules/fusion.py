"""Fused ops: ``aten::mm``/``aten::matmul`` whose result feeds an ``aten::add``/``add_`` (unfused bias add)
against one ``aten::addmm``; a compiled addmm is dispatcher-level fusion, reported as information.

Producer → consumer is read from the op tree: the add is the next op on the same thread under the same
parent (view-only ops in between are skipped), in the same step, and, where shapes were recorded, its
first input has the matmul's output shape. Only ops the user's code called count: matmuls inside autograd's
backward nodes are skipped (there an mm followed by an add is gradient accumulation, not a bias), and so are
matmuls inside another op's decomposition (the mask add of ``aten::_scaled_dot_product_attention_math``);
``aten::linear`` on a >2-D input is the one enclosing op kept (the user can flatten the input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules._common import has_ancestor, launched_under, launches_by_host, noise_floor, share, steps_ns, us, view
from autoprof.rules._flops import matmul_out_shape
from autoprof.trace.model import CPU_OP_CODE, GPU_MEMCPY, KERNEL, Trace

RULE_UNFUSED = "unfused_bias_add"
RULE_COMPILED = "compiled_addmm"
UNFUSED = "unfused"
DISPATCHER_FUSED = "dispatcher-fused"
VERDICTS = {RULE_UNFUSED: (UNFUSED,), RULE_COMPILED: (DISPATCHER_FUSED,)}

_PRODUCERS = frozenset({"aten::mm", "aten::matmul"})
_CONSUMERS = frozenset({"aten::add", "aten::add_"})
_VIEW_OPS = frozenset({"aten::_unsafe_view", "aten::view", "aten::reshape", "aten::squeeze", "aten::unsqueeze"})
_COMPILED_MARKERS = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")


def _next_op(trace: Trace, i: int, view_ids: set[int]) -> int:
    """The next cpu_op after ``i`` on the same thread with the same parent, skipping view-only ops."""
    parent, tid = trace.h_parent[i], trace.h_tid[i]
    parents, cats, tids, names = trace.h_parent, trace.h_cat, trace.h_tid, trace.h_name
    j = i + 1
    n = trace.n_host
    end = trace.h_ts[parent] + trace.h_dur[parent] if parent >= 0 else None
    while j < n and tids[j] == tid:
        if parents[j] == parent and cats[j] == CPU_OP_CODE:
            if names[j] not in view_ids:
                return j
        elif end is not None and trace.h_ts[j] >= end:
            return -1
        j += 1
    return -1


def _called_by_user(trace: Trace, i: int, linear_id: int) -> bool:
    """Whether op ``i`` was called by the user's code: no enclosing op but ``aten::linear`` (a Linear on a >2-D
    input runs matmul then add, which the user can change). Annotations (steps, sections) do not count."""
    p = trace.h_parent[i]
    while p >= 0:
        if trace.h_cat[p] == CPU_OP_CODE and trace.h_name[p] != linear_id:
            return False
        p = trace.h_parent[p]
    return True


@dataclass
class _Pairs:
    """The window's user-called matmuls followed by an add of their result (producer, consumer), its addmm
    calls, and how many pairs had their shapes checked."""

    pairs: list[tuple[int, int]] = field(default_factory=list)
    addmm: list[int] = field(default_factory=list)
    shapes_checked: int = 0


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    found = _gather(trace)
    findings: list[Finding] = []
    window = steps_ns(trace, view(trace))
    separate_add = sum(trace.h_dur[j] for _, j in found.pairs)  # roughly what one fused GEMM saves
    if found.pairs and separate_add >= noise_floor(config) * window:  # below the floor: a finding about nothing
        findings.append(_unfused(trace, found, window, separate_add))
    compiled_ids = {nid for nid, name in enumerate(trace.names) if name.startswith(_COMPILED_MARKERS)}
    compiled = [i for i in found.addmm if has_ancestor(trace, i, compiled_ids)]
    if compiled:
        findings.append(_compiled_addmm(trace, compiled))
    return findings


class _Ids:
    """Interned ids of the names the pairing reads (-1: absent from the trace)."""

    def __init__(self, trace: Trace) -> None:
        self.producers = {trace.name_id(name) for name in _PRODUCERS} - {-1}
        self.consumers = {trace.name_id(name) for name in _CONSUMERS} - {-1}
        self.views = {trace.name_id(name) for name in _VIEW_OPS} - {-1}
        self.addmm = trace.name_id("aten::addmm")
        self.matmul = trace.name_id("aten::matmul")
        self.linear = trace.name_id("aten::linear")
        self.backward = {nid for nid, name in enumerate(trace.names) if "Backward" in name or name.startswith("autograd::engine")}


def _gather(trace: Trace) -> _Pairs:
    win = view(trace)
    ids = _Ids(trace)
    found = _Pairs()
    shapes = _OutputShapes()
    for i in trace.host_named(ids.producers | {ids.addmm}):
        if trace.h_cat[i] != CPU_OP_CODE or not win.host_in[i]:
            continue
        nid = trace.h_name[i]
        if nid == ids.addmm:
            found.addmm.append(i)
            continue
        if nid not in ids.producers or not _user_matmul(trace, i, ids):
            continue
        j = _next_op(trace, i, ids.views)
        if j < 0 or trace.h_name[j] not in ids.consumers or win.host_step[j] != win.host_step[i]:
            continue
        fits = shapes.add_fits(trace, i, j)
        if fits is False:
            continue
        found.shapes_checked += fits is True
        found.pairs.append((i, j))
    return found


def _user_matmul(trace: Trace, i: int, ids: _Ids) -> bool:
    """A matmul the user's code called: not the mm under an aten::matmul (that matmul is the producer), not in
    autograd's backward (an mm then an add there is gradient accumulation), not inside another op's
    decomposition (the mask add of SDPA's math path: nothing to fuse)."""
    p = trace.h_parent[i]
    if p >= 0 and trace.h_name[p] == ids.matmul:
        return False
    if ids.backward and has_ancestor(trace, i, ids.backward):
        return False
    return _called_by_user(trace, i, ids.linear)


class _OutputShapes:
    """Whether an add's first input has the matmul's output shape (a window repeats the same shapes: the last
    output shape is reused)."""

    def __init__(self) -> None:
        self.last_dims: Any = None
        self.last_out: list[int] | None = None

    def add_fits(self, trace: Trace, mm: int, add: int) -> bool | None:
        """True/False where both shapes were recorded, None where not (the pair counts, unchecked)."""
        mm_shapes, add_shapes = trace.shapes.get(mm), trace.shapes.get(add)
        dims = mm_shapes[0] if mm_shapes and type(mm_shapes[0]) is list else None
        add_dims = add_shapes[0] if add_shapes and type(add_shapes[0]) is list else None
        if not (dims and add_dims):
            return None
        if dims != self.last_dims:
            self.last_dims, self.last_out = dims, (matmul_out_shape(dims[0], dims[1]) if len(dims) >= 2 else None)
        return self.last_out is not None and add_dims[0] == self.last_out


def _unfused(trace: Trace, found: _Pairs, window: int, separate_add: int) -> Finding:
    pairs = found.pairs
    spent = sum(trace.h_dur[i] + trace.h_dur[j] for i, j in pairs)
    h_parent, h_name = trace.h_parent, trace.h_name
    parent_ids = {h_name[p] for p in {h_parent[i] for i, _ in pairs} if p >= 0}
    advice = "Use torch.addmm(b, x, w) or nn.Linear (one fused GEMM with the bias in its epilogue), or torch.compile the function."
    if trace.name_id("aten::linear") in parent_ids:
        advice += " Under aten::linear this is a >2-D input: flatten it to 2-D before the Linear."
    return Finding(
        RULE_UNFUSED,
        UNFUSED,
        "warning",
        f"unfused bias add: {len(pairs)} matmul results feed a separate add; the adds take "
        f"{share(separate_add, window):.1%} of the steps' time",
        advice,
        {
            "unfused_count": len(pairs),
            "shape_checked_count": found.shapes_checked,
            "unfused_time_us": us(spent),
            "unfused_time_share": share(spent, window),
            "separate_add_us": us(separate_add),
            "separate_add_share": share(separate_add, window),
            "fused_addmm_count": len(found.addmm),
            "input_shapes": _first_shapes(trace, pairs),
            "parents": sorted(trace.names[nid] for nid in parent_ids)[:5],
        },
        tuple(sorted({f"{trace.names[a]} -> {trace.names[b]}" for a, b in {(h_name[i], h_name[j]) for i, j in pairs}})),
    )


def _first_shapes(trace: Trace, pairs: list[tuple[int, int]]) -> list[str]:
    """The first few distinct input shapes of the matmuls."""
    shapes: list[str] = []
    for i, _ in pairs[:1000]:
        s = trace.shapes.get(i)
        if s and str(s[0]) not in shapes:
            shapes.append(str(s[0]))
            if len(shapes) == 5:
                break
    return shapes


def _compiled_addmm(trace: Trace, compiled: list[int]) -> Finding:
    """Compiled addmm: on a GPU, a DtoD memcpy seeds the output with the bias, then one GEMM kernel."""
    evidence: dict[str, Any] = {"compiled_addmm_count": len(compiled)}
    subjects: set[str] = set()
    if trace.has_device:
        by_host = launches_by_host(trace)
        seeded = 0
        for i in compiled:
            launched = launched_under(trace, i, by_host)
            launched.sort(key=lambda d: trace.d_ts[d])
            cats = [trace.device_cat(d) for d in launched]
            names = [trace.device_name(d) for d in launched]
            if GPU_MEMCPY in cats and KERNEL in cats:
                k = cats.index(GPU_MEMCPY)
                if "DtoD" in names[k] and KERNEL in cats[k + 1 :]:
                    seeded += 1
                    subjects.update(name for name, c in zip(names, cats) if c == KERNEL)
        evidence["dtod_seeded_count"] = seeded
        msg = f"compiled addmm: {len(compiled)} calls fused at the dispatcher level" + (
            f"; {seeded} seed the output with the bias by a Memcpy DtoD, then run one GEMM kernel with a bias epilogue" if seeded else ""
        )
    else:
        msg = f"compiled addmm: {len(compiled)} calls fused at the dispatcher level (extern addmm in the compiled graph)"
    return Finding(
        RULE_COMPILED,
        DISPATCHER_FUSED,
        "info",
        msg,
        "Nothing to do: this is the expected shape of a compiled linear layer.",
        evidence,
        tuple(sorted(subjects)[:5]) or ("aten::addmm",),
    )
