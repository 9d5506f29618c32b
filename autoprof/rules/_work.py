"""Work (FLOPs) and traffic (bytes) of an op from its recorded input shapes and dtypes. Pure; no torch.

Estimates, documented in docs/rules.md: matmul-family and attention FLOPs are exact (2·M·K·N per matrix
product, the formulas torch.utils.flop_counter uses); elementwise ops count one FLOP per output element;
reductions and norms a small constant per input element. Bytes are each tensor input read once plus the
output written once (its shape inferred from the inputs); caches and re-reads are ignored.
"""

from __future__ import annotations

from math import prod
from typing import Any

from autoprof.rules._flops import matmul_flops
from autoprof.rules.fusion import matmul_out_shape
from autoprof.trace.model import ELEMENTWISE_OPS, MATMUL_OPS

DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "int": 4,
    "long int": 8,
    "long": 8,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}
DTYPE_PEAK_KEY = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
}

ELEMENTWISE = ELEMENTWISE_OPS
REDUCTIONS = {  # FLOPs per input element
    "aten::sum": 1,
    "aten::mean": 1,
    "aten::amax": 1,
    "aten::max": 1,
    "aten::norm": 2,
    "aten::var": 3,
    "aten::softmax": 5,
    "aten::_softmax": 5,
    "aten::log_softmax": 5,
    "aten::_log_softmax": 5,
    "aten::layer_norm": 8,
    "aten::native_layer_norm": 8,
    "aten::group_norm": 8,
    "aten::batch_norm": 8,
    "aten::native_layer_norm_backward": 10,
    "aten::_softmax_backward_data": 4,
}
# Softmaxes and normalizations write an output of their input's shape; the true reductions a smaller one.
_SAME_SHAPE_OUT = set(REDUCTIONS) - {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::norm", "aten::var"}
MATMULS = MATMUL_OPS
ATTENTION = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product")
ROOFLINE_OPS = MATMULS | ELEMENTWISE | frozenset(REDUCTIONS)


def is_roofline_op(name: str) -> bool:
    return name in ROOFLINE_OPS or name.startswith(ATTENTION)


def _tensors(dims: list[Any], types: list[Any] | None) -> list[tuple[list[int], int]]:
    """(shape, element size) of each tensor input (scalars and lists skipped)."""
    out: list[tuple[list[int], int]] = []
    if not types:
        return out
    for d, t in zip(dims, types):
        size = DTYPE_BYTES.get(t) if type(t) is str else None
        if size is not None and type(d) is list:
            for x in d:
                if type(x) is not int:
                    break
            else:
                out.append((d, size))
    return out


def dtype_key(types: list[Any] | None) -> str | None:
    for t in types or ():
        if isinstance(t, str) and t in DTYPE_PEAK_KEY:
            return DTYPE_PEAK_KEY[t]
    return None


def op_work(name: str, dims: list[Any], types: list[Any] | None) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one call, or None when the shapes do not say."""
    ts = _tensors(dims, types)
    if not ts:
        return None
    esize = ts[0][1]
    read = sum(prod(d) * s for d, s in ts)
    if name in MATMULS:
        flops = matmul_flops(name, dims)
        if not flops:
            return None
        if name in ("aten::mm", "aten::bmm"):
            out = matmul_out_shape(dims[0], dims[1])
        elif name in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
            out = matmul_out_shape(dims[1], dims[2])
        elif name == "aten::matmul":
            out = matmul_out_shape(dims[0], dims[1])
        else:  # linear: input [..., K], weight [N, K]
            out = list(dims[0][:-1]) + [dims[1][0]] if len(dims) > 1 and dims[1] else None
        if out is None:
            return None
        return float(flops), float(read + prod(out) * esize)
    if name.startswith(ATTENTION):
        if len(ts) < 3 or len(ts[0][0]) < 2:
            return None
        q, k, v = ts[0][0], ts[1][0], ts[2][0]
        batch = prod(q[:-2])
        ell, e, s, ev = q[-2], q[-1], k[-2], v[-1]
        return float(2 * batch * ell * s * e + 2 * batch * ell * s * ev), float(read + batch * ell * ev * esize)
    if name in ELEMENTWISE:
        n = max(prod(d) for d, _ in ts)
        return float(n), float(read + n * esize)
    if name in REDUCTIONS:
        n = prod(ts[0][0])
        out_n = n if name in _SAME_SHAPE_OUT else 0
        return float(n * REDUCTIONS[name]), float(read + out_n * esize)
    return None


class WorkCache:
    """Per op name, the last few distinct (shapes, dtypes) and their work: a training window repeats the same
    shapes, and comparing lists is far cheaper than formatting or recomputing them."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[int, list[tuple[Any, Any, tuple[float, float] | None, str | None, str]]] = {}

    def get(self, nid: int, name: str, dims: list[Any], types: list[Any] | None) -> tuple[tuple[float, float] | None, str | None, str]:
        """(work or None, dtype key, shapes as text)."""
        entries = self._by_name.setdefault(nid, [])
        for d, t, work, dk, text in entries:
            if d == dims and t == types:
                return work, dk, text
        work = op_work(name, dims, types) if dims else None
        dk = dtype_key(types)
        text = str(dims)
        entries.append((dims, types, work, dk, text))
        if len(entries) > 8:
            del entries[0]
        return work, dk, text
