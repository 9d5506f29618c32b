"""Work (FLOPs) and traffic (bytes) of an op from its recorded input shapes and dtypes. Pure; no torch.

Estimates, documented in docs/rules.md: matmul-family and attention FLOPs are exact (2·M·K·N per matrix
product, the formulas torch.utils.flop_counter uses), and so are convolutions' (2·N·|weight|·output spatial per
product, from their shapes and recorded stride, padding, dilation, groups and output mask); elementwise ops count
one FLOP per output element; reductions and norms a small constant per input element. Bytes are each tensor input read once plus the
output written once (its shape inferred from the inputs); caches and re-reads are ignored.
"""

from __future__ import annotations

from math import prod
from typing import Any

from autoprof.measure.flops import matmul_flops, matmul_out_shape
from autoprof.measure.ops import CONV_OPS, COPY_OPS, ELEMENTWISE_OPS, GATHER_OPS, LOSS_OPS, MATMUL_OPS, SORT_OPS

#: The fixed cost of one op call on a CPU (dispatch, allocation, the profiler's own bookkeeping: 3–4 µs measured
#: here for an elementwise op on 16 elements). An op call whose work at the calibrated peak would take less is
#: overhead: its time is the framework's, not the math's.
CALL_FLOOR_NS = 5_000
#: An op call is credited as work with at most this many times its roofline time. An op that runs below 5 % of
#: its roofline is not limited by its FLOPs or its bytes but by something else (threads contending on a loaded
#: machine, allocation, cache misses): the rest of its time counts with the overhead.
WORK_CREDIT = 20


def credited_ns(time_ns: float, ideal_ns: float, calls: int = 1) -> float | None:
    """The op work of ``calls`` calls that took ``time_ns`` and whose work at the peaks takes ``ideal_ns``: their time
    past each call's fixed cost (``CALL_FLOOR_NS``, overhead as for every other op), at most ``WORK_CREDIT`` times the
    ideal; None when one call's work is below ``CALL_FLOOR_NS`` (the whole call is overhead).

    The fixed cost comes out of every call, as it does for uncosted ops: crediting a costed call's whole time made a
    64×64 matmul flip between all overhead and all work where the calibrated peak put its ideal at the floor."""
    if ideal_ns / calls < CALL_FLOOR_NS:
        return None
    return min(max(time_ns - calls * CALL_FLOOR_NS, 0), WORK_CREDIT * ideal_ns)


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
ROOFLINE_OPS = MATMUL_OPS | ELEMENTWISE | frozenset(REDUCTIONS) | MEMORY_KIND_OPS | CONV_OPS


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


def op_work(
    name: str, dims: list[Any], types: list[Any] | None, causal: bool | None = None, args: tuple[Any, ...] | None = None
) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one call, or None when the shapes do not say. ``causal``: an attention call's mask (its
    FLOPs halved); ``args``: a convolution's recorded concrete inputs (``trace.model.conv_args``)."""
    ts = _tensors(dims, types)
    if not ts:
        return None
    if name in CONV_OPS:
        return conv_work(name, dims, ts, args)
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


# Convolutions. Forward: name -> positions, in the recorded inputs, of (stride, padding, dilation, output_padding,
# groups) and the transposed flag (a position, or the op's constant); None: the op has no such argument (stride and
# dilation 1, padding and output_padding 0, groups 1). The input is the first tensor, the weight the second.
_T, _F = True, False
CONV_FORWARD: dict[str, tuple[int | None, int | None, int | None, int | None, int | None, int | bool]] = {
    "aten::conv1d": (3, 4, 5, None, 6, _F),
    "aten::conv2d": (3, 4, 5, None, 6, _F),
    "aten::conv3d": (3, 4, 5, None, 6, _F),
    "aten::_convolution_mode": (3, 4, 5, None, 6, _F),
    "aten::convolution": (3, 4, 5, 7, 8, 6),
    "aten::_convolution": (3, 4, 5, 7, 8, 6),
    "aten::conv_transpose1d": (3, 4, 7, 5, 6, _T),
    "aten::conv_transpose2d": (3, 4, 7, 5, 6, _T),
    "aten::conv_transpose3d": (3, 4, 7, 5, 6, _T),
    "aten::mkldnn_convolution": (4, 3, 5, None, 6, _F),  # (input, weight, bias, padding, stride, dilation, groups)
    "aten::cudnn_convolution": (3, 2, 4, None, 5, _F),  # (input, weight, padding, stride, dilation, groups, ...)
    "aten::cudnn_convolution_transpose": (4, 2, 5, 3, 6, _T),
    "aten::miopen_convolution": (4, 3, 5, None, 6, _F),
    "aten::miopen_depthwise_convolution": (4, 3, 5, None, 6, _F),
    "aten::miopen_convolution_transpose": (5, 3, 6, 4, 7, _T),
    "aten::_slow_conv2d_forward": (4, 5, None, None, None, _F),  # (input, weight, kernel_size, bias, stride, padding)
    "aten::thnn_conv2d": (4, 5, None, None, None, _F),
    "aten::slow_conv3d": (4, 5, None, None, None, _F),
    "aten::slow_conv3d_forward": (4, 5, None, None, None, _F),
    "aten::slow_conv_dilated2d": (4, 5, 6, None, None, _F),
    "aten::slow_conv_dilated3d": (4, 5, 6, None, None, _F),
    "aten::slow_conv_transpose2d": (4, 5, 7, 6, None, _T),
    "aten::slow_conv_transpose3d": (4, 5, 7, 6, None, _T),
    "aten::_conv_depthwise2d": (4, 5, 6, None, None, _F),
    "aten::_nnpack_spatial_convolution": (4, 3, None, None, None, _F),  # (input, weight, bias, padding, stride)
}
# Backward: name -> positions of (grad_output, input, weight, transposed flag or constant, output mask). The grad
# of the output gives the output's size: no stride or padding is needed. The two products are the gradient of the
# input and of the weight, each as many FLOPs as the forward (torch.utils.flop_counter counts them so).
CONV_BACKWARD: dict[str, tuple[int, int, int, int | bool, int]] = {
    "aten::convolution_backward": (0, 1, 2, 7, 10),  # (grad_out, input, weight, bias_sizes, stride, ..., output_mask)
    "aten::cudnn_convolution_backward": (1, 0, 2, _F, 10),  # (input, grad_out, weight, padding, ..., output_mask)
    "aten::mkldnn_convolution_backward": (1, 0, 2, _F, 7),
    "aten::_slow_conv2d_backward": (0, 1, 2, _F, 6),
}
# One product each, the input's (or the weight's) size a recorded list: (grad_out, the size, the other tensor).
CONV_BACKWARD_ONE = {
    "aten::cudnn_convolution_backward_input": (1, 0, 2),  # (input_size, grad_out, weight, ...): the input's gradient
    "aten::cudnn_convolution_backward_weight": (1, 0, 2),  # (weight_size, grad_out, input, ...): the weight's gradient
}
#: A backward whose output mask the trace did not record but whose own calls say it (torch 1.8's cuDNN backward
#: calls ``cudnn_convolution_backward_input`` when the mask asks for the input's gradient, ``_weight`` for the
#: weight's): name -> (the mask's position, the calls in mask order).
MASK_FROM_CALLS = {
    "aten::cudnn_convolution_backward": (10, ("aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight")),
}
_ARG_NAMES = ("stride", "padding", "dilation", "output_padding", "groups")


def _shape(x: Any) -> list[int] | None:
    if type(x) is not list and type(x) is not tuple:
        return None
    for d in x:
        if type(d) is not int or d < 0:
            return None
    return list(x)


def _arg(args: tuple[Any, ...] | None, pos: int | None, default: Any) -> Any:
    """A concrete input by position: the op's default where it has no such argument; None where it has one the
    trace did not record."""
    if pos is None:
        return default
    if args is None or pos >= len(args):
        return None
    return args[pos]


def _per_dim(v: Any, n: int) -> list[int] | None:
    """A stride, padding or dilation as one int per spatial dimension (a single value applies to all)."""
    if type(v) is int:
        return [v] * n
    if type(v) is tuple and all(type(x) is int and x >= 0 for x in v):
        if len(v) == n:
            return list(v)
        if len(v) == 1:
            return list(v) * n
    return None


def conv_work(name: str, dims: list[Any], ts: list[tuple[list[int], int]], args: tuple[Any, ...] | None) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one convolution call, forward or backward, or None when its shapes and recorded arguments do
    not say. FLOPs: 2·N·Cout·(output spatial)·(Cin/groups)·(kernel), i.e. 2·N·|weight|·(the output's spatial size;
    a transposed convolution's input's); a backward counts that once per gradient its output mask asks for (input,
    weight). Bytes: each tensor input read once and each output written once. The bias's adds are not counted (as
    torch.utils.flop_counter does not)."""
    esize = ts[0][1]
    read = sum(prod(d) * s for d, s in ts)
    if name in CONV_FORWARD:
        out = _conv_output(name, dims, args)
        if out is None:
            return None
        x, w, out_shape, transposed = out
        spatial = x[2:] if transposed else out_shape[2:]
        return float(2 * x[0] * prod(w) * prod(spatial)), float(read + prod(out_shape) * esize)
    if name in CONV_BACKWARD:
        g_at, x_at, w_at, t_at, m_at = CONV_BACKWARD[name]
        if len(dims) <= max(g_at, x_at, w_at):
            return None
        go, xs, ws = _shape(dims[g_at]), _shape(dims[x_at]), _shape(dims[w_at])
        transposed = t_at if type(t_at) is bool else _arg(args, t_at, None)
        mask = _arg(args, m_at, None)
        if not go or not xs or not ws:
            return None
        x, w = xs, ws
        if type(transposed) is not bool or type(mask) is not tuple or len(mask) < 2:
            return None
        if not (len(go) == len(x) == len(w) >= 3) or not all(type(m) is bool for m in mask):
            return None
        spatial = x[2:] if transposed else go[2:]
        product = 2 * go[0] * prod(w) * prod(spatial)
        written = (prod(x) if mask[0] else 0) + (prod(w) if mask[1] else 0) + (go[1] if len(mask) > 2 and mask[2] else 0)
        return float(product * (int(mask[0]) + int(mask[1]))), float(read + written * esize)
    if name in CONV_BACKWARD_ONE:  # cuDNN's own gradient ops (older torch): never transposed
        g_at, size_at, other_at = CONV_BACKWARD_ONE[name]
        if len(dims) <= max(g_at, other_at):
            return None
        go, other, size = _shape(dims[g_at]), _shape(dims[other_at]), _shape(_arg(args, size_at, None))
        if not go or not other or not size or not (len(go) == len(other) == len(size) >= 3):
            return None
        w = other if name.endswith("_input") else size
        return float(2 * go[0] * prod(w) * prod(go[2:])), float(read + prod(size) * esize)
    return None


def _conv_output(name: str, dims: list[Any], args: tuple[Any, ...] | None) -> tuple[list[int], list[int], list[int], bool] | None:
    """(input, weight, output shape, transposed) of a forward convolution, or None when the trace does not say."""
    if len(dims) < 2:
        return None
    x, w = _shape(dims[0]), _shape(dims[1])
    if not x or not w or len(w) < 3 or 0 in w:
        return None
    n = len(w) - 2
    if len(x) == len(w) - 1:  # an unbatched input (conv2d of [C, H, W])
        x = [1] + x
    if len(x) != len(w):
        return None
    s_at, p_at, d_at, o_at, g_at, t_at = CONV_FORWARD[name]
    transposed = t_at if type(t_at) is bool else _arg(args, t_at, None)
    stride, dilation = _per_dim(_arg(args, s_at, 1), n), _per_dim(_arg(args, d_at, 1), n)
    groups = _arg(args, g_at, 1)
    if type(transposed) is not bool or stride is None or dilation is None or type(groups) is not int or groups < 1:
        return None
    if 0 in stride or 0 in dilation:
        return None
    # What torch itself would refuse is no convolution to cost: channels must fit the weight and the groups.
    in_channels = w[0] if transposed else w[1] * groups  # a transposed weight is [Cin, Cout/groups, ...]
    if x[1] != in_channels or w[0] % groups:
        return None
    kernel = w[2:]
    padding = _per_dim(_arg(args, p_at, 0), n)  # (a padding of 'same' is not recorded: None)
    if padding is None:
        return None
    if transposed:
        extra = _per_dim(_arg(args, o_at, 0), n)
        if extra is None:
            return None
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + e + 1 for i, s, p, d, k, e in zip(x[2:], stride, padding, dilation, kernel, extra)]
        return _checked(x, w, [x[0], w[1] * groups] + spatial, True)
    spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(x[2:], stride, padding, dilation, kernel)]
    return _checked(x, w, [x[0], w[0]] + spatial, False)


def _checked(x: list[int], w: list[int], out: list[int], transposed: bool) -> tuple[list[int], list[int], list[int], bool] | None:
    return (x, w, out, transposed) if all(d > 0 for d in out[2:]) else None


def conv_args_text(name: str, args: tuple[Any, ...] | None) -> str:
    """A convolution's recorded arguments as text, for its shapes in the evidence (two calls of equal shapes but a
    different stride are two rows)."""
    if args is None:
        return ""
    spec = CONV_FORWARD.get(name)
    if spec is None:  # a backward: its output mask (which gradients it computes)
        back = CONV_BACKWARD.get(name)
        if back is None:
            return ""
        mask, transposed = _arg(args, back[4], None), type(back[3]) is int and _arg(args, back[3], None) is True
        return (f" output_mask={list(mask)}" if type(mask) is tuple else "") + (" transposed" if transposed else "")
    words = []
    for key, pos in zip(_ARG_NAMES, spec):
        v = _arg(args, pos, None) if pos is not None else None
        if v is not None:
            words.append(f"{key}={list(v) if type(v) is tuple else v}")
    if type(spec[5]) is int and _arg(args, spec[5], None) is True:
        words.append("transposed")
    return " " + " ".join(words) if words else ""


class WorkCache:
    """Per op name, the last few distinct (shapes, dtypes) and their work: a training window repeats the same
    shapes, and comparing lists is far cheaper than formatting or recomputing them."""

    __slots__ = ("_by_name", "conv_args")

    def __init__(self, conv_args: dict[int, tuple[Any, ...]] | None = None) -> None:
        #: Per host event, convolution arguments the trace's structure gives where it recorded none.
        self.conv_args = conv_args or {}
        self._by_name: dict[int, list[tuple[Any, Any, bool | None, Any, tuple[float, float] | None, str | None, str]]] = {}

    def get(
        self,
        nid: int,
        name: str,
        dims: list[Any],
        types: list[Any] | None,
        causal: bool | None = None,
        args: tuple[Any, ...] | None = None,
    ) -> tuple[tuple[float, float] | None, str | None, str]:
        """(work or None, dtype key, shapes as text). ``args``: a convolution's recorded arguments."""
        entries = self._by_name.setdefault(nid, [])
        for d, t, c, a, work, dk, text in entries:
            if d == dims and t == types and c == causal and a == args:
                return work, dk, text
        work = op_work(name, dims, types, causal, args) if dims else None
        dk = dtype_key(types)
        text = str(dims) + (" causal" if causal else "") + (conv_args_text(name, args) if args else "")
        entries.append((dims, types, causal, args, work, dk, text))
        if len(entries) > 8:
            del entries[0]
        return work, dk, text
