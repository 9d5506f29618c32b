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

from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules._common import has_ancestor, launched_under, launches_by_host, noise_floor, share, steps_ns, us, view
from autoprof.trace.model import CPU_OP, GPU_MEMCPY, HOST_CODE, KERNEL, Trace

RULE_UNFUSED = "unfused_bias_add"
RULE_COMPILED = "compiled_addmm"
UNFUSED = "unfused"
DISPATCHER_FUSED = "dispatcher-fused"
VERDICTS = {RULE_UNFUSED: (UNFUSED,), RULE_COMPILED: (DISPATCHER_FUSED,)}

_PRODUCERS = frozenset({"aten::mm", "aten::matmul"})
_CONSUMERS = frozenset({"aten::add", "aten::add_"})
_VIEW_OPS = frozenset({"aten::_unsafe_view", "aten::view", "aten::reshape", "aten::squeeze", "aten::unsqueeze"})
_COMPILED_MARKERS = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")


def matmul_out_shape(a: list[Any], b: list[Any]) -> list[int] | None:
    """Output shape of ``torch.matmul(a, b)`` from input shapes, or None when unknown."""
    if not (isinstance(a, list) and isinstance(b, list)) or not a or not b:
        return None
    if len(a) == 1 and len(b) == 1:
        return []
    if len(b) == 1:
        return list(a[:-1])
    if len(a) == 1:
        return list(b[:-2]) + [b[-1]]
    ba, bb = list(a[:-2]), list(b[:-2])
    n = max(len(ba), len(bb))
    ba, bb = [1] * (n - len(ba)) + ba, [1] * (n - len(bb)) + bb
    batch = [x if y == 1 else y for x, y in zip(ba, bb)]
    return batch + [a[-2], b[-1]]


def _next_op(trace: Trace, i: int, kcpu: int, view_ids: set[int]) -> int:
    """The next cpu_op after ``i`` on the same thread with the same parent, skipping view-only ops."""
    parent, tid = trace.h_parent[i], trace.h_tid[i]
    parents, cats, tids, names = trace.h_parent, trace.h_cat, trace.h_tid, trace.h_name
    j = i + 1
    n = trace.n_host
    end = trace.h_ts[parent] + trace.h_dur[parent] if parent >= 0 else None
    while j < n and tids[j] == tid:
        if parents[j] == parent and cats[j] == kcpu:
            if names[j] not in view_ids:
                return j
        elif end is not None and trace.h_ts[j] >= end:
            return -1
        j += 1
    return -1


def _called_by_user(trace: Trace, i: int, kcpu: int, linear_id: int) -> bool:
    """Whether op ``i`` was called by the user's code: no enclosing op but ``aten::linear`` (a Linear on a >2-D
    input runs matmul then add, which the user can change). Annotations (steps, sections) do not count."""
    p = trace.h_parent[i]
    while p >= 0:
        if trace.h_cat[p] == kcpu and trace.h_name[p] != linear_id:
            return False
        p = trace.h_parent[p]
    return True


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    v = view(trace)
    kcpu = HOST_CODE[CPU_OP]
    prod_ids = {trace.name_id(n) for n in _PRODUCERS} - {-1}
    addmm_id = trace.name_id("aten::addmm")
    view_ids = {trace.name_id(n) for n in _VIEW_OPS} - {-1}
    consumer_ids = {trace.name_id(n) for n in _CONSUMERS} - {-1}
    matmul_id = trace.name_id("aten::matmul")
    linear_id = trace.name_id("aten::linear")
    backward_ids = {nid for nid, n in enumerate(trace.names) if "Backward" in n or n.startswith("autograd::engine")}
    shapes_of = trace.shapes
    last_dims: Any = None
    last_out: list[int] | None = None
    pairs: list[tuple[int, int]] = []
    addmm: list[int] = []
    shapes_checked = 0
    for i in trace.host_named(prod_ids | {addmm_id}):
        if trace.h_cat[i] != kcpu or not v.host_in[i]:
            continue
        nid = trace.h_name[i]
        if nid == addmm_id:
            addmm.append(i)
            continue
        if nid not in prod_ids:
            continue
        p = trace.h_parent[i]
        if p >= 0 and trace.h_name[p] == matmul_id:
            continue  # the matmul above it is the producer
        if backward_ids and has_ancestor(trace, i, backward_ids):
            continue
        if not _called_by_user(trace, i, kcpu, linear_id):
            continue  # inside another op's decomposition (the mask add of SDPA's math path): nothing to fuse
        j = _next_op(trace, i, kcpu, view_ids)
        if j < 0 or trace.h_name[j] not in consumer_ids or v.host_step[j] != v.host_step[i]:
            continue
        si, sj = shapes_of.get(i), shapes_of.get(j)
        dims = si[0] if si and type(si[0]) is list else None
        add_dims = sj[0] if sj and type(sj[0]) is list else None
        if dims and add_dims:
            if dims != last_dims:  # a window repeats the same shapes: reuse the last output shape
                last_dims, last_out = dims, (matmul_out_shape(dims[0], dims[1]) if len(dims) >= 2 else None)
            out = last_out
            if out is None or add_dims[0] != out:
                continue
            shapes_checked += 1
        pairs.append((i, j))
    findings: list[Finding] = []
    window = steps_ns(trace, v)
    t_add = sum(trace.h_dur[j] for _, j in pairs)  # roughly what one fused GEMM saves
    if pairs and t_add >= noise_floor(config) * window:  # below the floor: a finding about nothing
        t = sum(trace.h_dur[i] + trace.h_dur[j] for i, j in pairs)
        h_parent, h_name = trace.h_parent, trace.h_name
        parent_ids = {h_name[p] for p in {h_parent[i] for i, _ in pairs} if p >= 0}
        parents = sorted(trace.names[nid] for nid in parent_ids)
        shapes: list[str] = []  # the first few distinct input shapes
        for i, _ in pairs[:1000]:
            s = trace.shapes.get(i)
            if s and str(s[0]) not in shapes:
                shapes.append(str(s[0]))
                if len(shapes) == 5:
                    break
        in_linear = trace.name_id("aten::linear") in parent_ids
        advice = (
            "Use torch.addmm(b, x, w) or nn.Linear (one fused GEMM with the bias in its epilogue), or "
            "torch.compile the function."
        )
        if in_linear:
            advice += " Under aten::linear this is a >2-D input: flatten it to 2-D before the Linear."
        findings.append(
            Finding(
                RULE_UNFUSED,
                UNFUSED,
                "warning",
                f"unfused bias add: {len(pairs)} matmul results feed a separate add; the adds take "
                f"{share(t_add, window):.1%} of the steps' time",
                advice,
                {
                    "unfused_count": len(pairs),
                    "shape_checked_count": shapes_checked,
                    "unfused_time_us": us(t),
                    "unfused_time_share": share(t, window),
                    "separate_add_us": us(t_add),
                    "separate_add_share": share(t_add, window),
                    "fused_addmm_count": len(addmm),
                    "input_shapes": shapes,
                    "parents": parents[:5],
                },
                tuple(sorted({f"{trace.names[a]} -> {trace.names[b]}" for a, b in {(h_name[i], h_name[j]) for i, j in pairs}})),
            )
        )
    compiled_ids = {nid for nid, n in enumerate(trace.names) if n.startswith(_COMPILED_MARKERS)}
    compiled = [i for i in addmm if has_ancestor(trace, i, compiled_ids)]
    if compiled:
        findings.append(_compiled_addmm(trace, compiled))
    return findings


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
                    subjects.update(n for n, c in zip(names, cats) if c == KERNEL)
        evidence["dtod_seeded_count"] = seeded
        msg = (
            f"compiled addmm: {len(compiled)} calls fused at the dispatcher level"
            + (f"; {seeded} seed the output with the bias by a Memcpy DtoD, then run one GEMM kernel with a bias "
               "epilogue" if seeded else "")
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
