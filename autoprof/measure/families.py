"""Where a window's work goes by family, when no peak can draw a roofline: a device (or a CPU) with no row in the
peak table, no database entry and no calibration still has kernels and ops whose families say what limits them.

A GEMM, convolution or attention kernel (cuBLAS, CUTLASS, cuDNN, Triton templates, flash and memory-efficient
attention, rocBLAS/hipBLASLt/Tensile, MIOpen) is FLOP work by its class; an elementwise, reduction, norm,
softmax, copy, transpose, gather or optimizer kernel is bandwidth work (``kernels.FAMILIES``). A kernel whose name
says nothing (a custom kernel) is read by the op that launched it (:func:`kernels.op_family`: ``aten::mm`` is FLOP
work, ``aten::add`` bandwidth work). On a CPU, the window's outermost ops are read by their kind alone: the
matmul, convolution (``mkldnn_convolution``, ``_slow_conv2d_forward``) and attention ops are FLOP work, the
elementwise, reduction, copy and gather ops bandwidth work.

This reading never needs shapes (a CUDA graph's replay, Triton kernels, a trace recorded without
``record_shapes``) nor a peak. It cannot tell a small GEMM below its device's ridge from a large one: where a peak
is known the roofline reads each op by its intensity instead (``roofline``), and a record says which basis it used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprof.measure.kernels import COMPUTE, kernel_family, op_family
from autoprof.measure.views import View, ancestor_flags
from autoprof.trace.model import CPU_OP_CODE, KERNEL_CODE, Trace

#: The record's word for a verdict read from kernel families (device) and from op families (CPU), against
#: ``"roofline"`` for one read by the roofline.
KERNEL_FAMILIES = "kernel families"
OP_FAMILIES = "op families"
ROOFLINE = "roofline"


@dataclass
class FamilySplit:
    """The window's work time (kernel time on a device, the outermost family ops' time on a CPU), and how much of
    it is FLOP work and bandwidth work by family; the rest has no family (``unknown_ns``)."""

    total_ns: int
    compute_ns: int = 0
    memory_ns: int = 0
    by_family: dict[str, list[int]] = field(default_factory=dict)  # family -> [kernels or calls, time]

    @property
    def unknown_ns(self) -> int:
        return max(self.total_ns - self.compute_ns - self.memory_ns, 0)

    def add(self, family: str, bound: str, dur: int) -> None:
        entry = self.by_family.setdefault(family, [0, 0])
        entry[0] += 1
        entry[1] += dur
        if bound == COMPUTE:
            self.compute_ns += dur
        else:
            self.memory_ns += dur

    def top(self, n: int = 8) -> list[tuple[str, int]]:
        """The families with the most time, the largest first (name, ns)."""
        return sorted(((k, v[1]) for k, v in self.by_family.items()), key=lambda item: -item[1])[:n]


def _launching_op(trace: Trace, launch: int, memo: dict[int, tuple[str, str] | None]) -> tuple[str, str] | None:
    """The outermost host op above a launching call that has a family: (its name, its bound), or None."""
    if launch in memo:
        return memo[launch]
    found: tuple[str, str] | None = None
    names, h_name, parent = trace.names, trace.h_name, trace.h_parent
    p = launch
    while p >= 0:
        name = names[h_name[p]]
        bound = op_family(name)
        if bound is not None:
            found = (name, bound)
        p = parent[p]
    memo[launch] = found
    return found


def device_split(trace: Trace, win: View) -> FamilySplit:
    """The window's kernels by family: by the kernel's own name first, else by the op that launched it."""
    d_name, d_dur, d_cat, d_launch, names = trace.d_name, trace.d_dur, trace.d_cat, trace.d_launch_host, trace.names
    families: dict[int, tuple[str, str] | None] = {}
    memo: dict[int, tuple[str, str] | None] = {}
    kernels = [j for j, (c, inside) in enumerate(zip(d_cat, win.device_in)) if c == KERNEL_CODE and inside]
    split = FamilySplit(sum(d_dur[j] for j in kernels))
    for j in kernels:
        nid = d_name[j]
        if nid not in families:
            fam = kernel_family(names[nid])
            families[nid] = (fam.name, fam.bound) if fam is not None else None
        known = families[nid]
        if known is None and d_launch[j] >= 0:
            known = _launching_op(trace, d_launch[j], memo)
        if known is not None:
            split.add(known[0], known[1], d_dur[j])
    return split


def host_calls(trace: Trace, win: View, waits: set[int] | frozenset[int] = frozenset()) -> list[tuple[int, str]]:
    """The window's outermost host ops that have a family (none above them, nor a wait: ``waits``, name ids), with
    their bound."""
    names = trace.names
    bound_of = {nid: b for nid, n in enumerate(names) if (b := op_family(n)) is not None}
    if not bound_of:
        return []
    under = ancestor_flags(trace, set(bound_of) | set(waits))
    cat, inside, h_name = trace.h_cat, win.host_in, trace.h_name
    return [(i, bound_of[h_name[i]]) for i in trace.host_named(bound_of) if cat[i] == CPU_OP_CODE and inside[i] and not under[i]]
