"""Fused ops: ``aten::mm``/``aten::matmul`` whose result feeds an ``aten::add``/``add_`` (unfused bias add)
against one ``aten::addmm``; a compiled addmm is dispatcher-level fusion, reported as information.

Producer → consumer is read from the op tree: the add is the next op on the same thread under the same
parent (view-only ops in between are skipped), in the same step, and, where shapes were recorded, its
first input has the matmul's output shape. Only ops the user's code called count: matmuls inside autograd's
backward nodes are skipped (there an mm followed by an add is gradient accumulation, not a bias), and so are
matmuls inside another op's decomposition (the mask add of ``aten::_scaled_dot_product_attention_math``);
``aten::linear`` on a >2-D input is the one enclosing op kept (the user can flatten the input).

What fusing saves is not the add's time: ``addmm`` still copies the bias into its output before the GEMM (on a CPU an
``aten::copy_`` of the expanded bias, itself an op call; on a GPU a ``Memcpy DtoD``, unless cuBLASLt takes the
bias in its epilogue). The estimate (:func:`_savings`): on a CPU, the add's time beyond a call's fixed cost, less
the copy's share of its bytes; on a device, the add kernels' time less that share, up to all of it (epilogue), or,
where the host is the limit, the add's host time less a call's fixed cost (H200: addmm's host call takes 22-27 µs,
the mm's 16-19 µs), up to all of it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from math import prod
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.flops import matmul_out_shape
from autoprof.measure.steps import device_step_ns, step_times_ns, steps_ns
from autoprof.measure.units import percent, share, us
from autoprof.measure.views import descendants, has_ancestor, launched_under, launches_by_host, view
from autoprof.measure.work import CALL_FLOOR_NS
from autoprof.rules._common import host_floor_ns, noise_floor
from autoprof.trace.model import CPU_OP_CODE, DEVICE_WORK_CODES, GPU_MEMCPY, KERNEL, Trace

RULE_UNFUSED = "unfused_bias_add"
RULE_COMPILED = "compiled_addmm"
UNFUSED = "unfused"
DISPATCHER_FUSED = "dispatcher-fused"
VERDICTS = {RULE_UNFUSED: (UNFUSED,), RULE_COMPILED: (DISPATCHER_FUSED,)}

_PRODUCERS = frozenset({"aten::mm", "aten::matmul"})
_CONSUMERS = frozenset({"aten::add", "aten::add_"})
_VIEW_OPS = frozenset({"aten::_unsafe_view", "aten::view", "aten::reshape", "aten::squeeze", "aten::unsqueeze"})
_COMPILED_MARKERS = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")
# A call's fixed cost on the host (``work.CALL_FLOOR_NS``): addmm's seeding copy is an op call too, so the add's
# share of it is not saved.


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
    if found.pairs:
        saves = _savings(trace, found.pairs)
        floor = host_floor_ns(trace, saves.window_ns, config) if saves.side == "host" else noise_floor(config) * saves.window_ns
        if saves.most_ns >= floor:  # below the floor: a finding about nothing
            findings.append(_unfused(trace, found, saves))
    compiled_ids = {nid for nid, name in enumerate(trace.names) if name.startswith(_COMPILED_MARKERS)}
    compiled = [i for i in found.addmm if has_ancestor(trace, i, compiled_ids)]
    if compiled:
        finding = _compiled_addmm(trace, compiled)
        if finding is not None:
            findings.append(finding)
    return findings


@dataclass
class _Savings:
    """What fusing the window's pairs would save (ns): ``least_ns`` where addmm seeds its output with a copy of the
    bias, ``most_ns`` without one (a GPU's bias epilogue); ``side``: whose time it is ("host" or "device"), and the
    steps' time it is a share of."""

    least_ns: float
    most_ns: float
    side: str
    window_ns: int
    adds_ns: int  # the adds' own time on that side


def _seed_ratio(trace: Trace, add: int) -> float:
    """The seeding copy's bytes against the add's: the copy reads the bias and writes the output, the add reads both
    and writes the output (a [M, N] + [N] bias: about one half). One half where the shapes were not recorded."""
    shapes = trace.shapes.get(add)
    dims = shapes[0] if shapes and type(shapes[0]) is list else []
    tensors = [d for d in dims[:2] if type(d) is list and all(type(x) is int for x in d)]
    if len(tensors) < 2:
        return 0.5
    out, bias = prod(tensors[0]), prod(tensors[1])
    return (bias + out) / (out + bias + out) if out else 0.5


class _SeedRatios:
    """:func:`_seed_ratio` per add, computed once per recorded shapes object (a window repeats its shapes, and a
    loader shares one object among the calls that repeat them)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.known: dict[int, tuple[Any, float]] = {}  # id of the shapes -> (those shapes, kept alive; the ratio)

    def __call__(self, add: int) -> float:
        shapes = self.trace.shapes.get(add)
        if shapes is None:
            return _seed_ratio(self.trace, add)
        hit = self.known.get(id(shapes))
        if hit is not None and hit[0] is shapes:
            return hit[1]
        ratio = _seed_ratio(self.trace, add)
        self.known[id(shapes)] = (shapes, ratio)
        return ratio


def _savings(trace: Trace, pairs: list[tuple[int, int]]) -> _Savings:
    """On a CPU, each add's time beyond a call's fixed cost less the seeding copy's share of it. On a device, where
    the device is the limit (its steps' time at least the host's), the add kernels' time, less the seeding copy's
    share of it, up to all of it; where the host is, the adds' host time less a call's fixed cost, up to all of it."""
    win = view(trace)
    by_host = launches_by_host(trace) if win.device_busy else {}
    # (no launches: every add's device time is 0, and the walk over each add's nested calls is skipped)
    device_ns = (
        {j: sum(trace.d_dur[d] for d in launched_under(trace, j, by_host) if trace.d_cat[d] in DEVICE_WORK_CODES) for _, j in pairs}
        if by_host
        else {}
    )
    host = [trace.h_dur[j] for _, j in pairs]
    if not any(device_ns.values()):
        ratio = _SeedRatios(trace)
        least = sum(max(t - CALL_FLOOR_NS, 0) * (1 - ratio(j)) for t, (_, j) in zip(host, pairs))
        return _Savings(least, least, "host", steps_ns(trace, win), sum(host))
    steps = step_times_ns(trace)
    window = int(statistics.median(steps)) * len(steps) if steps else int(win.window_ns)
    device_steps = [d for d in device_step_ns(trace) if d is not None]
    if sum(device_steps) >= sum(s.dur_ns for s in trace.steps) or not trace.steps:
        kernels = sum(device_ns.values())
        ratio = _SeedRatios(trace)
        least = sum(t * (1 - ratio(j)) for j, t in device_ns.items())
        return _Savings(least, kernels, "device", window, kernels)
    least = sum(max(t - CALL_FLOOR_NS, 0) for t in host)
    return _Savings(least, sum(host), "host", window, sum(host))


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
        #: (id of the matmul's shapes, id of the add's) -> (those shapes, kept alive; the answer): a loader shares
        #: one shapes object among the calls that repeat them
        self.known: dict[tuple[int, int], tuple[Any, Any, bool | None]] = {}

    def add_fits(self, trace: Trace, mm: int, add: int) -> bool | None:
        """True/False where both shapes were recorded, None where not (the pair counts, unchecked)."""
        mm_shapes, add_shapes = trace.shapes.get(mm), trace.shapes.get(add)
        key = (id(mm_shapes), id(add_shapes))
        hit = self.known.get(key)
        if hit is not None and hit[0] is mm_shapes and hit[1] is add_shapes:
            return hit[2]
        fits = self._fits(mm_shapes, add_shapes)
        self.known[key] = (mm_shapes, add_shapes, fits)
        return fits

    def _fits(self, mm_shapes: Any, add_shapes: Any) -> bool | None:
        dims = mm_shapes[0] if mm_shapes and type(mm_shapes[0]) is list else None
        add_dims = add_shapes[0] if add_shapes and type(add_shapes[0]) is list else None
        if not (dims and add_dims):
            return None
        if dims != self.last_dims:
            self.last_dims, self.last_out = dims, (matmul_out_shape(dims[0], dims[1]) if len(dims) >= 2 else None)
        if self.last_out is None or add_dims[0] != self.last_out:
            return False
        # the bias must broadcast into the matmul's output without growing it (addmm writes that output's shape)
        bias = add_dims[1] if len(add_dims) > 1 else None
        if type(bias) is list and bias:
            out = self.last_out
            if len(bias) > len(out) or any(b not in (1, o) for b, o in zip(reversed(bias), reversed(out))):
                return False
        return True


def _unfused(trace: Trace, found: _Pairs, saves: _Savings) -> Finding:
    pairs = found.pairs
    window = saves.window_ns
    spent = sum(trace.h_dur[i] + trace.h_dur[j] for i, j in pairs)
    separate_add = sum(trace.h_dur[j] for _, j in pairs)
    h_parent, h_name = trace.h_parent, trace.h_name
    parent_ids = {h_name[p] for p in {h_parent[i] for i, _ in pairs} if p >= 0}
    advice = "Use torch.addmm(b, x, w) or nn.Linear (one fused GEMM with the bias in its epilogue), or torch.compile the function."
    if trace.name_id("aten::linear") in parent_ids:
        advice += " Under aten::linear this is a >2-D input: flatten it to 2-D before the Linear."
    what = "device" if saves.side == "device" else "host"
    if saves.least_ns == saves.most_ns:
        saving = f"about {percent(saves.least_ns, window)}"
    else:
        saving = f"{percent(saves.least_ns, window)}–{percent(saves.most_ns, window)}"
    if saves.side == "device":
        how = "the add kernels' time, less a Memcpy DtoD where the GEMM seeds its output with the bias"
    elif trace.has_device:
        how = "the adds' host time, less a call's fixed cost: the fused GEMM's call costs more than the mm's"
    else:
        how = "addmm still copies the bias into its output, an op call of its own"
    return Finding(
        RULE_UNFUSED,
        UNFUSED,
        "warning",
        f"unfused bias add: {len(pairs)} matmul results feed a separate add; fusing them saves {saving} of the "
        f"steps' time ({how}; the adds' {what} time is {percent(saves.adds_ns, window)})",
        advice,
        {
            "unfused_count": len(pairs),
            "shape_checked_count": found.shapes_checked,
            "unfused_time_us": us(spent),
            "unfused_time_share": share(spent, window),
            "separate_add_us": us(separate_add),
            "separate_add_share": share(separate_add, window),
            "fusion_saves_us": us(saves.least_ns),
            "fusion_saves_share": share(saves.least_ns, window),
            "fusion_saves_most_us": us(saves.most_ns),
            "fusion_saves_most_share": share(saves.most_ns, window),
            "saving_side": saves.side,
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


def _compiled_addmm(trace: Trace, compiled: list[int]) -> Finding | None:
    """Compiled addmm calls that seed their output with the bias before the GEMM, where the trace shows it: on a GPU
    a ``Memcpy DtoD`` then one GEMM kernel (with cuBLASLt's bias epilogue there is no copy, and nothing to say), on a
    CPU an ``aten::copy_`` inside the addmm. None where no call shows it."""
    evidence: dict[str, Any] = {"compiled_addmm_count": len(compiled)}
    subjects: set[str] = set()
    seeded = 0
    if trace.has_device:
        by_host = launches_by_host(trace)
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
        how = "seed the output with the bias by a Memcpy DtoD, then run one GEMM kernel"
    else:
        copy_id = trace.name_id("aten::copy_")
        seeded = sum(1 for i in compiled if any(trace.h_name[j] == copy_id and trace.h_parent[j] == i for j in descendants(trace, i)))
        evidence["copy_seeded_count"] = seeded
        how = "copy the bias into the output (aten::copy_), then run the GEMM on it"
    if not seeded:
        return None
    return Finding(
        RULE_COMPILED,
        DISPATCHER_FUSED,
        "info",
        f"compiled addmm: {seeded} of {len(compiled)} calls are fused at the dispatcher level only: they {how}",
        "Nothing to do: this is the expected shape of a compiled linear layer.",
        evidence,
        tuple(sorted(subjects)[:5]) or ("aten::addmm",),
    )
