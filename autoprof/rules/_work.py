"""Work (FLOPs) and traffic (bytes) of an op from its recorded input shapes and dtypes. Pure; no torch.

Estimates, documented in docs/rules.md: matmul-family and attention FLOPs are exact (2·M·K·N per matrix
product, the formulas torch.utils.flop_counter uses); elementwise ops count one FLOP per output element;
reductions and norms a small constant per input element. Bytes are each tensor input read once plus the
output written once (its shape inferred from the inputs); caches and re-reads are ignored.
"""

from __future__ import annotations

from math import prod
from typing import Any

from autoprof.rules._flops import matmul_flops, matmul_out_shape
from autoprof.trace.model import COPY_OPS, ELEMENTWISE_OPS, GATHER_OPS, LOSS_OPS, MATMUL_OPS, SORT_OPS

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
    "aten::_log_softmax_backward_data": 4,
    "aten::native_group_norm": 8,
    "aten::native_batch_norm": 8,
    "aten::_native_batch_norm_legit": 8,
    "aten::rms_norm": 4,
    "aten::_fused_rms_norm": 4,
    "aten::native_group_norm_backward": 10,
    "aten::native_batch_norm_backward": 10,
    "aten::_fused_rms_norm_backward": 8,
}
# Softmaxes and normalizations write an output of their input's shape; the true reductions a smaller one.
_SAME_SHAPE_OUT = set(REDUCTIONS) - {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::norm", "aten::var"}
ATTENTION = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product")
#: Ops whose work is memory traffic by their nature (gathers, sorts, copies, the optimizers' multi-tensor
#: updates): where their shapes do not give their bytes (tensor lists, no dtype), their time still counts as
#: bandwidth-bound, never as compute.
MEMORY_KIND_PREFIXES = (
    "aten::_foreach_",
    "aten::_fused_adam",
    "aten::_fused_sgd",
    "aten::cudnn_batch_norm",
    "aten::max_pool",
    "aten::avg_pool",
    "aten::adaptive_avg_pool",
    "aten::_adaptive_avg_pool",
)
MEMORY_KIND_OPS = GATHER_OPS | SORT_OPS | COPY_OPS | LOSS_OPS
ROOFLINE_OPS = MATMUL_OPS | ELEMENTWISE | frozenset(REDUCTIONS) | MEMORY_KIND_OPS


def is_roofline_op(name: str) -> bool:
    return name in ROOFLINE_OPS or name.startswith(ATTENTION) or name.startswith(MEMORY_KIND_PREFIXES)


def memory_by_kind(name: str) -> bool:
    """An op whose time is memory traffic whatever its shapes (FLOPs negligible against its bytes)."""
    return name in MEMORY_KIND_OPS or name in ELEMENTWISE or name in REDUCTIONS or name.startswith(MEMORY_KIND_PREFIXES)


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


def op_work(name: str, dims: list[Any], types: list[Any] | None, causal: bool | None = None) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one call, or None when the shapes do not say. ``causal``: an attention call's mask (its
    FLOPs halved)."""
    ts = _tensors(dims, types)
    if not ts:
        return None
    if name in MEMORY_KIND_OPS:
        return _memory_work(name, ts)
    esize = ts[0][1]
    read = sum(prod(d) * s for d, s in ts)
    if name in MATMUL_OPS:
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
        return _attention_work(name, ts, read, esize, causal)
    if name in ELEMENTWISE:
        n = max(prod(d) for d, _ in ts)
        return float(n), float(read + n * esize)
    if name in REDUCTIONS:
        n = prod(ts[0][0])
        out_n = n if name in _SAME_SHAPE_OUT else 0
        return float(n * REDUCTIONS[name]), float(read + out_n * esize)
    return None


def _attention_work(name: str, ts: list[tuple[list[int], int]], read: int, esize: int, causal: bool | None) -> tuple[float, float] | None:
    """Scaled dot-product attention (math, flash, memory-efficient, cuDNN): forward ``Q·Kᵀ`` and ``P·V``, 2·B·L·S·(E+Ev)
    FLOPs; backward four such products (twice the forward, as torch.utils.flop_counter counts it); a causal mask
    halves both. Bytes: the tensor inputs read once and the output written once."""
    backward = name.endswith("_backward")
    first = 1 if backward else 0  # a backward's inputs start with the output's gradient, then Q, K, V
    if len(ts) < first + 3 or len(ts[first][0]) < 2:
        return None
    q, k, v = ts[first][0], ts[first + 1][0], ts[first + 2][0]
    batch = prod(q[:-2])
    ell, e, s, ev = q[-2], q[-1], k[-2], v[-1]
    flops = 2 * batch * ell * s * e + 2 * batch * ell * s * ev
    if backward:
        flops *= 2
    if causal:
        flops //= 2
    written = (prod(q) + prod(k) + prod(v)) if backward else batch * ell * ev  # the gradients of Q, K, V, or the output
    return float(flops), float(read + written * esize)


def _memory_work(name: str, ts: list[tuple[list[int], int]]) -> tuple[float, float] | None:
    """Bytes moved (FLOPs are a few per element at most) by gathers, scatters, sorts, copies and losses, from
    their tensor inputs. Estimates, documented in docs/rules.md."""
    (first, es), n = ts[0], prod(ts[0][0])
    if name == "aten::embedding" and len(ts) >= 2:  # weight [V, D], indices [...]: rows gathered, written
        rows, idx_es = prod(ts[1][0]), ts[1][1]
        width = first[-1] if first else 0
        return 0.0, float(2 * rows * width * es + rows * idx_es)
    if name in ("aten::embedding_backward", "aten::embedding_dense_backward") and len(ts) >= 2:
        rows, idx_es = prod(ts[1][0]), ts[1][1]  # grad [..., D], indices [...]: each row added into the weight's
        width = first[-1] if first else 0
        return float(rows * width), float(3 * rows * width * es + rows * idx_es)
    if name in ("aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only") and len(ts) >= 2:
        rows, idx_es = prod(ts[1][0]), ts[1][1]  # weight [V, D], indices [N], offsets [B]: N rows read, B bags out
        width = first[-1] if first else 0
        bags = prod(ts[2][0]) if len(ts) > 2 else 1
        return float(rows * width), float(rows * width * es + bags * width * es + rows * idx_es)
    if name in ("aten::gather", "aten::take") and len(ts) >= 2:  # the output has the index's shape
        m, idx_es = prod(ts[1][0]), ts[1][1]
        return 0.0, float(2 * m * es + m * idx_es)
    if name == "aten::index_select" and len(ts) >= 2:  # rows along the first dimension (the usual dim=0)
        k, idx_es = prod(ts[1][0]), ts[1][1]
        row = n // first[0] if first and first[0] else 0
        return 0.0, float(2 * k * row * es + k * idx_es)
    if name in ("aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_", "aten::index_add", "aten::index_add_"):
        if len(ts) < 2:
            return None
        m = max(prod(d) for d, _ in ts[1:])  # the source (or index) elements written into self
        copy = 0 if name.endswith("_") else 2 * n * es  # out of place: self copied first
        return float(m if "add" in name else 0), float(3 * m * es + copy)
    if name == "aten::index_put_" and len(ts) >= 2:
        m = prod(ts[-1][0])
        return 0.0, float(3 * m * es)
    if name in ("aten::masked_select", "aten::masked_scatter_"):
        return 0.0, float(sum(prod(d) * s for d, s in ts) + n * es)
    if name in SORT_OPS:  # read the input, write values and int64 indices (topk: at most as many)
        return float(n * max(1, (first[-1] if first else 1).bit_length())), float(n * es + n * (es + 8))
    if name in ("aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous"):
        return 0.0, float(2 * n * es)
    if name == "aten::nll_loss_forward":  # one element gathered per row of the [N, C] input
        rows = first[0] if first else 0
        return float(rows), float(rows * es + sum(prod(d) * s for d, s in ts[1:]))
    if name == "aten::nll_loss_backward" and len(ts) >= 2:  # (grad, self [N, C], target): the [N, C] gradient written
        big = max((prod(d) * s for d, s in ts), default=0)
        return 0.0, float(big + sum(prod(d) * s for d, s in ts[2:]))
    if name == "aten::native_dropout_backward":  # elementwise: grad × mask × scale
        return float(n), float(sum(prod(d) * s for d, s in ts) + n * es)
    return None  # tensor lists (cat, stack, index) carry no dtype: bandwidth-bound by kind, not costed


class WorkCache:
    """Per op name, the last few distinct (shapes, dtypes) and their work: a training window repeats the same
    shapes, and comparing lists is far cheaper than formatting or recomputing them."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[int, list[tuple[Any, Any, bool | None, tuple[float, float] | None, str | None, str]]] = {}

    def get(
        self, nid: int, name: str, dims: list[Any], types: list[Any] | None, causal: bool | None = None
    ) -> tuple[tuple[float, float] | None, str | None, str]:
        """(work or None, dtype key, shapes as text)."""
        entries = self._by_name.setdefault(nid, [])
        for d, t, c, work, dk, text in entries:
            if d == dims and t == types and c == causal:
                return work, dk, text
        work = op_work(name, dims, types, causal) if dims else None
        dk = dtype_key(types)
        text = str(dims) + (" causal" if causal else "")
        entries.append((dims, types, causal, work, dk, text))
        if len(entries) > 8:
            del entries[0]
        return work, dk, text
