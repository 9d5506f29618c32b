"""Roofline: is device-bound time limited by compute or by memory bandwidth?

Per op (the outermost op of a known kind: matmul family, attention, convolutions, elementwise, reductions/norms),
from recorded shapes and dtypes: FLOPs and bytes (``work.op_work``), arithmetic intensity (FLOP/byte), time
(device time of the kernels it launched; on a CPU its own duration), achieved FLOP/s and bytes/s, the
roofline it could reach (``min(peak_flops, intensity × peak_bandwidth)``), the fraction reached, the bound
(compute when the intensity is at or above the ridge ``peak_flops / peak_bandwidth``, else memory), and the
time lost against the roofline. Per window: device time split into compute-bound, memory-bound and unknown.

The cost model comes first: a kernel under an op it costs is that op's. A kernel with no costed op above it (a CUDA
graph's replay, a trace of device events only, an op without shapes or of a kind the model does not cost) is read by
its name's family (``_kernels``: GEMM, convolution and attention kernels FLOP-bound, elementwise, reduction, copy,
norm and the like bandwidth-bound), and its time is said apart (``by_name``); a name the table does not know stays
unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.kernels import COMPUTE, TF32_MARKERS, Family, kernel_family
from autoprof.measure.ops import CONV_OPS
from autoprof.measure.peaks import Peak, peak_for
from autoprof.measure.runtime import LAUNCH_CALLS
from autoprof.measure.steps import merged_processes
from autoprof.measure.units import duration, percent, share, us
from autoprof.measure.views import View, ancestor_flags, has_ancestor, op_self_ns, view
from autoprof.measure.work import MASK_FROM_CALLS, WorkCache, is_roofline_op, memory_by_kind
from autoprof.trace.model import CPU_OP_CODE, KERNEL_CODE, Trace

RULE = "roofline"
COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
MIXED = "mixed"
VERDICTS = {RULE: (COMPUTE_BOUND, MEMORY_BOUND, MIXED)}
#: A bound names the split when its share is at least this many times each other share (time not costed among
#: them): the bound_regime reading's ``MARGIN``, so that both name the same split alike.
MARGIN = 1.5
_LOW_PRECISION = ("bf16", "fp16", "fp8", "int8")


def advice(bound: str, dtype: str, peak: Peak, on_device: bool) -> str:
    """One line of advice for an op of this bound. On a device: tensor (matrix) cores, TF32 only where the device
    has it, lower precision only for an op not already in it; on a CPU none of these (no tensor cores, no TF32)."""
    if not on_device:
        if bound == "memory":
            return "Memory-bound: fuse it with its neighbours (torch.compile) or avoid materialising intermediates."
        return (
            "Compute-bound: the math itself takes the time: do less of it (a better algorithm, fewer or smaller "
            "matmuls) or give it more cores (torch.set_num_threads)."
        )
    low = dtype in _LOW_PRECISION
    if bound == "memory":
        precision = "" if low else ", keep data in lower precision (bf16/fp16)"
        return f"Memory-bound: fuse it with its neighbours (torch.compile){precision}, or avoid materialising intermediates."
    if low:
        return f"Compute-bound in {dtype}: fewer FLOPs (a better algorithm, less work per step) and shapes that are multiples of 8/16."
    tf32 = ", or TF32 via torch.backends.cuda.matmul.allow_tf32" if "tf32" in peak.flops and dtype != "tf32" else ""
    return f"Compute-bound: use the tensor (matrix) cores (bf16/fp16{tf32}) and shapes that are multiples of 8/16."


def bound_of(compute: float, memory: float, unknown: float) -> str:
    """The bound a split names: "compute" or "memory" when that share leads each other by ``MARGIN``; "unknown"
    when time not costed leads so (never called compute); else "mixed"."""
    ranked = sorted((("compute", compute), ("memory", memory), ("unknown", unknown)), key=lambda item: -item[1])
    (lead, top), (_, second) = ranked[0], ranked[1]
    if top <= 0 or top < MARGIN * second:
        return "mixed"
    return lead


def split_text(compute: float, memory: float, unknown: float, whole: float, on_device: bool = True) -> str:
    """The split as both readings print it."""
    what = "kernels" if on_device else "ops"
    return (
        f"{percent(compute, whole)} of its time in FLOP-bound {what}, {percent(memory, whole)} bandwidth-bound, "
        f"{percent(unknown, whole)} not costed"
    )


@dataclass
class OpStat:
    name: str
    shapes: str
    dtype: str
    bound: str
    calls: int = 0
    time_ns: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    ideal_ns: float = 0.0
    on_device: bool = True

    def record(self, peak: Peak, pf: float) -> dict[str, Any]:
        t = self.time_ns / 1e9
        ai = self.flops / self.bytes if self.bytes else 0.0
        roof = min(pf, ai * peak.bytes_per_s)
        achieved = self.flops / t if t else 0.0
        if self.bound == "memory":  # bytes against the bandwidth (an op that moves data and computes nothing too)
            fraction = (self.bytes / t) / peak.bytes_per_s if t and peak.bytes_per_s else None
        else:
            fraction = achieved / roof if roof else None
        above = fraction is not None and fraction > 1.0
        return {
            "name": self.name,
            "input_shapes": self.shapes,
            "dtype": self.dtype,
            "calls_count": self.calls,
            "time_us": us(self.time_ns),
            "intensity_flops_per_byte": round(ai, 4),
            "achieved_flops_per_s": round(achieved, 1),
            "achieved_bytes_per_s": round(self.bytes / t, 1) if t else 0.0,
            # Never more than 100% of a peak as a fact: above it, the data sat in caches the calibration (or the
            # datasheet's DRAM figure) does not see, said as such.
            "roofline_fraction_ratio": (1.0 if above else round(fraction, 4)) if fraction is not None else None,
            "above_peak": above,
            "bound": self.bound,
            "lost_us": us(max(self.time_ns - self.ideal_ns, 0)),
            "advice": advice(self.bound, self.dtype, peak, self.on_device),
        }


@dataclass
class Roofline:
    peak: Peak
    total_ns: int
    compute_ns: int = 0
    memory_ns: int = 0  # bandwidth-bound time: costed ops below the ridge, and ops bandwidth-bound by kind
    ops: dict[tuple[str, str, str], OpStat] = field(default_factory=dict)
    #: Ops bandwidth-bound by their kind whose bytes the shapes do not give (optimizers' multi-tensor updates,
    #: tensor lists): name -> [calls, time]. Their time is in ``memory_ns``.
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    #: Per step index: [compute-bound ns, memory-bound ns] of its ops (the report's step breakdown).
    by_step: dict[int, list[int]] = field(default_factory=dict)
    #: Kernels no costed op explains, classified by their name's family (``_kernels``): family -> [kernels,
    #: time]. Their time is in ``compute_ns`` or ``memory_ns`` (by the family's bound) and in the two below.
    by_name: dict[str, list[int]] = field(default_factory=dict)
    by_name_compute_ns: int = 0
    by_name_memory_ns: int = 0
    on_device: bool = True
    #: Convolution calls (host events) whose work the trace does not give: not roofline ops for the window, the
    #: roofline looks through them (to a costed convolution they call) and the regime counts their own time as
    #: uncosted op work.
    opaque: frozenset[int] = frozenset()
    #: Op calls (host event indices) the cost model could not cost (no shapes, no peak for their dtype): the regime
    #: reads a CPU window's such calls by their op family.
    uncosted: list[int] = field(default_factory=list)

    @property
    def by_kind_ns(self) -> int:
        return sum(t for _, t in self.by_kind.values())

    @property
    def by_name_ns(self) -> int:
        return self.by_name_compute_ns + self.by_name_memory_ns

    @property
    def unknown_ns(self) -> int:
        return max(self.total_ns - self.compute_ns - self.memory_ns, 0)

    def decided(self) -> str | None:
        """'memory' or 'compute' when that bound leads the split (:func:`bound_of`, the bound_regime's rule)."""
        if self.total_ns <= 0:
            return None
        bound = bound_of(self.compute_ns, self.memory_ns, self.unknown_ns)
        return bound if bound in ("compute", "memory") else None


def analyze(trace: Trace, config: Config | None = None) -> Roofline | None:
    """The trace's roofline (None without a peak for its device), computed once per trace (``trace.derived``):
    the rules of one analysis share one config, so the first to ask sets its peak override."""
    return trace.derive(lambda t: _analyze(t, config), key=analyze)


def _analyze(trace: Trace, config: Config | None) -> Roofline | None:
    if merged_processes(trace) > 1:  # a file merged from several ranks: one roofline would add their time together
        return None
    # a trace with no device events is a CPU reading: a device named in it (CUDA present, unused) gives no peaks
    peak = peak_for(trace.device_properties if len(trace.d_dur) else [], trace.metadata, config)
    if peak is None:
        return None
    win = view(trace)
    on_device = bool(win.device_busy)
    if (
        not on_device and not len(trace.d_dur) and any(n in LAUNCH_CALLS for n in trace.names)
    ):  # kernels launched, none recorded: no roofline
        return None
    if on_device:
        total = sum(dur for dur, c, inside in zip(trace.d_dur, trace.d_cat, win.device_in) if c == KERNEL_CODE and inside)
    else:
        total = op_self_ns(trace, win)
    roof = Roofline(peak, total, on_device=on_device)
    if total <= 0:
        return roof
    roof_ids = {nid for nid, n in enumerate(trace.names) if is_roofline_op(n)}
    cache = WorkCache(_conv_args_from_calls(trace))
    opaque = _uncostable_convs(trace, roof_ids, cache)
    roof.opaque = frozenset(opaque)
    kernels_of: dict[int, list[int]] = {}  # op -> the device events of its kernels
    loose: list[int] = []  # kernels under no roofline op of the window
    timed = _timed_on_device(trace, win, roof_ids, opaque, kernels_of, loose) if on_device else _timed_on_host(trace, win, roof_ids, opaque)
    uncosted: list[int] = []  # op calls the cost model could not cost
    for (nid, shapes_text, dtype), group in _grouped(trace, timed, roof.by_kind, win.host_step, roof.by_step, uncosted, cache).items():
        if not _place(roof, trace.names[nid], shapes_text, dtype, group):
            uncosted.extend(group.members)
    roof.memory_ns += roof.by_kind_ns
    roof.uncosted = uncosted
    if on_device:  # the cost model first: only kernels it left uncosted are read by their names
        _classify(trace, win, roof, loose + [j for i in uncosted for j in kernels_of.get(i, ())])
    # Ops run concurrently on several streams can sum past the busy time: keep the split within it.
    if roof.compute_ns + roof.memory_ns > total:
        scale = total / (roof.compute_ns + roof.memory_ns)
        roof.compute_ns, roof.memory_ns = int(roof.compute_ns * scale), int(roof.memory_ns * scale)
        roof.by_name_compute_ns, roof.by_name_memory_ns = int(roof.by_name_compute_ns * scale), int(roof.by_name_memory_ns * scale)
    return roof


def _classify(trace: Trace, win: View, roof: Roofline, kernels: list[int]) -> None:
    """Kernels no costed op explains, by their name's family: their time to the family's bound (and to their
    step's), apart in ``by_name``; a kernel of no known family stays unknown."""
    families: dict[int, Family | None] = {}
    names, d_name, d_dur, step_of = trace.names, trace.d_name, trace.d_dur, win.device_step
    for j in kernels:
        nid = d_name[j]
        if nid not in families:
            families[nid] = kernel_family(names[nid])
        family = families[nid]
        if family is None:
            continue
        dur = d_dur[j]
        entry = roof.by_name.setdefault(family.name, [0, 0])
        entry[0] += 1
        entry[1] += dur
        compute = family.bound == COMPUTE
        if compute:
            roof.compute_ns += dur
            roof.by_name_compute_ns += dur
        else:
            roof.memory_ns += dur
            roof.by_name_memory_ns += dur
        k = step_of[j]
        if k >= 0:
            roof.by_step.setdefault(k, [0, 0])[0 if compute else 1] += dur


class _Timed(NamedTuple):
    """One op call's time, and whether a TF32 tensor-op kernel ran for it."""

    op: int
    time_ns: int
    tf32: bool


def _shapes(trace: Trace, i: int, cache: WorkCache) -> tuple[list[Any], list[Any], bool | None, Any]:
    """A host op's recorded (input dims, input types, causal flag, convolution arguments)."""
    shp = trace.shapes.get(i)
    if not shp:
        return [], [], None, None
    dims = shp[0] if type(shp[0]) is list else []
    types = shp[1] if type(shp[1]) is list else []
    args = cache.conv_args.get(i) or (shp[3] if len(shp) > 3 else None)
    return dims, types, shp[2] if len(shp) > 2 else None, args


def _conv_args_from_calls(trace: Trace) -> dict[int, tuple[Any, ...]]:
    """Per convolution call, the arguments its own calls say where the trace did not record them (``MASK_FROM_CALLS``:
    the output mask of torch 1.8's cuDNN backward from which of its two halves it called)."""
    out: dict[int, tuple[Any, ...]] = {}
    for name, (at, calls) in MASK_FROM_CALLS.items():
        outer = trace.name_id(name)
        if outer < 0:
            continue
        seen: dict[int, list[bool]] = {}
        for k, call in enumerate(calls):
            nid = trace.name_id(call)
            for j in trace.host_named([nid]) if nid >= 0 else ():
                p = trace.h_parent[j]
                if p >= 0 and trace.h_name[p] == outer:
                    seen.setdefault(p, [False] * len(calls))[k] = True
        for p, mask in seen.items():
            shp = trace.shapes.get(p)
            args = list(shp[3] or ()) if shp and len(shp) > 3 else []
            if len(args) > at and args[at] is not None:
                continue  # recorded: the trace's own word
            out[p] = tuple(args + [None] * (at + 1 - len(args)))[:at] + (tuple(mask),) + tuple(args[at + 1 :])
    return out


def _uncostable_convs(trace: Trace, roof_ids: set[int], cache: WorkCache) -> set[int]:
    """The convolution calls whose shapes and recorded arguments do not give their work: the roofline looks through
    them to the convolution they call (an old trace's cuDNN backward without its output mask, above its
    ``cudnn_convolution_backward_input`` and ``_weight``), and a call none of whose levels can be costed stays
    not costed (its time is the regime's uncosted op work, never overhead)."""
    conv_ids = {nid for nid in roof_ids if trace.names[nid] in CONV_OPS}
    out: set[int] = set()
    if not conv_ids:
        return out
    names = trace.names
    for i in trace.host_named(conv_ids):
        nid = trace.h_name[i]
        dims, types, causal, args = _shapes(trace, i, cache)
        if cache.get(nid, names[nid], dims, types, causal, args)[0] is None:
            out.add(i)
    return out


def _timed_on_device(
    trace: Trace, win: View, roof_ids: set[int], opaque: set[int], kernels_of: dict[int, list[int]], loose: list[int]
) -> list[_Timed]:
    """The window's kernels, each counted at the outermost roofline op above the call that launched it (linear
    → addmm, layer_norm → native_layer_norm, conv2d → cudnn_convolution; a convolution that cannot be costed is
    looked through). Each op's kernels (device event indices) go to ``kernels_of``; the kernels under no roofline
    op of the window (or launched by nothing recorded) to ``loose``."""
    tf32_ids = {nid for nid, n in enumerate(trace.names) if any(m in n.lower() for m in TF32_MARKERS)}
    h_name, parent = trace.h_name, trace.h_parent
    top_of: dict[int, int] = {}  # launching call -> that op, or -1
    kernel_ns: dict[int, int] = {}  # op -> its kernels' time
    tf32_ops: set[int] = set()  # ops that ran a TF32 tensor-op kernel
    for j, (launch, cat, inside, dur, kernel) in enumerate(zip(trace.d_launch_host, trace.d_cat, win.device_in, trace.d_dur, trace.d_name)):
        if cat != KERNEL_CODE or not inside:
            continue
        if launch < 0:
            loose.append(j)
            continue
        top = top_of.get(launch)
        if top is None:
            top, p = -1, launch
            while p >= 0:
                if h_name[p] in roof_ids and p not in opaque:
                    top = p
                p = parent[p]
            top_of[launch] = top
        if top < 0:
            loose.append(j)
            continue
        kernel_ns[top] = kernel_ns.get(top, 0) + dur
        kernels_of.setdefault(top, []).append(j)
        if kernel in tf32_ids:
            tf32_ops.add(top)
    timed = []
    for i, t in sorted(kernel_ns.items()):
        if trace.h_cat[i] == CPU_OP_CODE and win.host_in[i]:
            timed.append(_Timed(i, t, i in tf32_ops))
        else:  # an op outside the window: its kernels are no op's of it
            loose.extend(kernels_of.pop(i))
    return timed


def _timed_on_host(trace: Trace, win: View, roof_ids: set[int], opaque: set[int]) -> list[_Timed]:
    """Without a device: the outermost roofline ops' own durations (conv2d → convolution → _convolution →
    mkldnn_convolution counts once, at conv2d; a convolution that cannot be costed is looked through)."""
    calls = trace.host_named(roof_ids)
    if len(calls) * 4 >= trace.n_host:  # most events are such ops (a CPU window): one pass answers all at once
        under = ancestor_flags(trace, roof_ids, opaque)
        nested: Callable[[int], bool] = under.__getitem__
    else:
        nested = partial(has_ancestor, trace, name_ids=roof_ids, skip=opaque)
    cats, inside = trace.h_cat, win.host_in
    return [_Timed(i, trace.h_dur[i], False) for i in calls if i not in opaque and cats[i] == CPU_OP_CODE and inside[i] and not nested(i)]


@dataclass
class _Group:
    """Calls of one (op, shapes, dtype): their number, time, and one call's (FLOPs, bytes)."""

    calls: int
    time_ns: int
    work: tuple[float, float]
    steps: dict[int, int] = field(default_factory=dict)  # step index -> time
    members: list[int] = field(default_factory=list)  # the op calls (host event indices)


def _grouped(
    trace: Trace,
    timed: list[_Timed],
    by_kind: dict[str, list[int]],
    step_of: Any,
    by_step: dict[int, list[int]],
    uncosted: list[int],
    cache: WorkCache,
) -> dict[tuple[int, str, str], _Group]:
    """Calls and time per (op name id, shapes, dtype): a window repeats the same few, each is costed once. Calls
    that cannot be costed but are bandwidth-bound by their kind go to ``by_kind`` (name -> [calls, time]) and to
    their step's memory-bound time in ``by_step``; the others that cannot be costed to ``uncosted``; a group
    keeps its time per step (``step_of``: host event -> step index) for :func:`_place`."""
    groups: dict[tuple[int, str, str], _Group] = {}
    # (name id, id of the recorded shapes) -> (those shapes, kept alive; their work): a loader shares one shapes
    # object among the calls that repeat them, so most calls are one lookup; a call whose convolution arguments come
    # from its calls (``cache.conv_args``) is costed on its own
    known: dict[tuple[int, int], tuple[Any, tuple[tuple[float, float] | None, str | None, str]]] = {}
    recorded, own_args, h_name, names = trace.shapes, cache.conv_args, trace.h_name, trace.names
    for i, t, tf32 in timed:
        if t <= 0:
            continue
        nid = h_name[i]
        name = names[nid]
        shp = recorded.get(i)
        seen = (nid, id(shp))
        hit = known.get(seen) if shp is not None and i not in own_args else None
        if hit is not None and hit[0] is shp:
            work, dtype, shapes_text = hit[1]
        else:
            dims, types, causal, args = _shapes(trace, i, cache)
            work, dtype, shapes_text = got = cache.get(nid, name, dims, types, causal, args)
            if shp is not None and i not in own_args:
                known[seen] = (shp, got)
        if work is None:
            if memory_by_kind(name):
                entry = by_kind.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += t
                by_step.setdefault(step_of[i], [0, 0])[1] += t
            else:
                uncosted.append(i)
            continue
        dtype = dtype or "fp32"
        if dtype == "fp32" and tf32:
            dtype = "tf32"
        key = (nid, shapes_text, dtype)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(0, 0, work)
        group.calls += 1
        group.time_ns += t
        group.members.append(i)
        k = step_of[i]
        group.steps[k] = group.steps.get(k, 0) + t
    return groups


def _place(roof: Roofline, name: str, shapes_text: str, dtype: str, group: _Group) -> bool:
    """Cost a group against the peak: its bound (intensity against the ridge), ideal time, and its share of the
    compute- or memory-bound time. False when it cannot be costed (no peak for its dtype, no bytes)."""
    peak = roof.peak
    peak_flops = peak.flops_for(dtype)
    flops, nbytes = group.work
    if not peak_flops or nbytes <= 0:
        return False
    bound = "compute" if flops / nbytes >= peak_flops / peak.bytes_per_s else "memory"
    stat = roof.ops.get((name, shapes_text, dtype))
    if stat is None:
        stat = roof.ops[(name, shapes_text, dtype)] = OpStat(name, shapes_text, dtype, bound, on_device=roof.on_device)
    calls = group.calls
    stat.calls += calls
    stat.time_ns += group.time_ns
    stat.flops += flops * calls
    stat.bytes += nbytes * calls
    stat.ideal_ns += max(flops / peak_flops, nbytes / peak.bytes_per_s) * 1e9 * calls
    if bound == "compute":
        roof.compute_ns += group.time_ns
    else:
        roof.memory_ns += group.time_ns
    column = 0 if bound == "compute" else 1
    for k, t in group.steps.items():
        roof.by_step.setdefault(k, [0, 0])[column] += t
    return True


def by_name_evidence(roof: Roofline) -> dict[str, Any]:
    """The time read by kernel name, as a share of the kernel time: in all, FLOP-bound, bandwidth-bound, and per
    family (the largest first). Both readings carry these keys."""
    whole = roof.total_ns
    families = sorted(roof.by_name.items(), key=lambda item: -item[1][1])
    return {
        "classified_by_name_share": share(roof.by_name_ns, whole),
        "by_name_compute_share": share(roof.by_name_compute_ns, whole),
        "by_name_memory_share": share(roof.by_name_memory_ns, whole),
        "by_name_families": {name: share(t, whole) for name, (_, t) in families[:8]},
    }


def by_name_text(roof: Roofline) -> str:
    """The message's note on time read by kernel name ("" when none was)."""
    if not roof.by_name_ns:
        return ""
    return f"; {percent(roof.by_name_ns, roof.total_ns)} of the kernel time read by kernel name (no costed op above those kernels)"


def _above_peak_text(op: OpStat, peak: Peak) -> str:
    """Why an op ran above the peak it was costed against: on a CPU, data in caches the calibration's copy does not
    see; on a device, a bandwidth-bound op served from its L2 cache, an FP32 matmul that ran on TF32 tensor cores
    (its kernel's name did not say so) where the device has them, else the datasheet's figure is below what it ran."""
    if not op.on_device:
        return "above the calibrated peak: cache-resident data"
    if op.bound == "memory":
        return "above the datasheet's bandwidth: data served from the device's caches"
    if op.dtype == "fp32" and "tf32" in peak.flops:
        return "above the datasheet's FP32 peak: it ran on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32)"
    return f"above the datasheet's {op.dtype.upper()} peak"


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    """The split of the device's kernel time (on a CPU, of the ops' own time), named by the rule the bound_regime
    reading names it by, and the ops that lose the most time against their roofline."""
    roof = analyze(trace, config)
    if roof is None or not (roof.ops or roof.by_name_ns):
        return []  # (ops bandwidth-bound by kind alone give no per-op figures to report)
    by_time = sorted(roof.ops.values(), key=lambda s: -s.time_ns)[:10]
    by_lost = sorted(roof.ops.values(), key=lambda s: -(s.time_ns - s.ideal_ns))[:5]
    decided = roof.decided()
    verdict = {"compute": COMPUTE_BOUND, "memory": MEMORY_BOUND}.get(decided or "", MIXED)
    whole = "the device's kernel time" if roof.on_device else "the ops' own time"
    split = split_text(roof.compute_ns, roof.memory_ns, roof.unknown_ns, roof.total_ns, roof.on_device)
    msg = (
        f"roofline ({roof.peak.name}) of {whole} ({duration(roof.total_ns)}): {split}{by_name_text(roof)}; "
        "a breakdown of the work, not the window's limit (bound_regime names that)"
    )
    families = sorted(roof.by_name, key=lambda n: -roof.by_name[n][1])
    if by_lost:
        top = by_lost[0]
        top_rec = top.record(roof.peak, roof.peak.flops_for(top.dtype) or 0.0)
        msg += f"; most time lost in {top.name} {top.shapes} ({top.bound}-bound, " + (
            f"{_above_peak_text(top, roof.peak)})"
            if top_rec["above_peak"]
            else f"{(top_rec['roofline_fraction_ratio'] or 0):.0%} of its roofline)"
        )
        tip = str(top_rec["advice"])
        subjects = tuple(f"{s.name} {s.shapes}" for s in by_lost)
    else:  # only kernels read by their names: no op to name
        tip = (
            "Read by the kernels' names, not costed: profile with record_shapes=True (eager ops, not a CUDA graph's "
            "replay) to have each op's FLOPs, bytes and fraction of its roofline."
        )
        subjects = tuple(f"{name} kernels" for name in families[:5])
    return [
        Finding(
            RULE,
            verdict,
            "info",
            msg,
            tip,
            {
                "peak": roof.peak.name,
                "peak_source": roof.peak.source,
                "peak_bytes_per_s": roof.peak.bytes_per_s,
                "peak_flops_per_s": dict(roof.peak.flops),
                "op_time_us": us(roof.total_ns),
                "compute_bound_share": share(roof.compute_ns, roof.total_ns),
                "memory_bound_share": share(roof.memory_ns, roof.total_ns),
                "unknown_share": share(roof.unknown_ns, roof.total_ns),
                "roofline_bound": bound_of(roof.compute_ns, roof.memory_ns, roof.unknown_ns),
                "memory_by_kind_share": share(roof.by_kind_ns, roof.total_ns),
                "memory_by_kind_ops": sorted(roof.by_kind, key=lambda n: -roof.by_kind[n][1])[:5],
                **by_name_evidence(roof),
                "ops": [s.record(roof.peak, roof.peak.flops_for(s.dtype) or 0.0) for s in by_time],
                "top_lost": [s.record(roof.peak, roof.peak.flops_for(s.dtype) or 0.0) for s in by_lost],
            },
            subjects,
        )
    ]
