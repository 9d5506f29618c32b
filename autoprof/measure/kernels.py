"""The kernel vocabulary: what a device kernel is by its name, where no op's shapes say what it computes.

The roofline costs an op from its recorded shapes first (``work``). Kernels with no costed op above them (a CUDA
graph's replay, ``cudaGraphLaunch``, launches them all; a trace of device events only; a convolution the cost model
cannot cost) are read by their name's family instead: a GEMM, a convolution or an attention kernel is FLOP-bound by
its class, an elementwise, reduction, copy, normalisation, softmax, transpose or optimizer kernel bandwidth-bound.
One table: a family added here is read alike by every rule. A kernel the table does not know (a custom kernel,
Inductor's old ``triton__0d1d2d`` names, a sort, a collective) has no family and stays uncosted.

A kernel is read by its own name, not its template arguments (``vectorized_elementwise_kernel<..., convert...>`` is
elementwise): :func:`kernel_head`. The families are tried in order, first match wins: Inductor's kernel kinds
(its pointwise and reduction kernels carry the names of the aten ops they fused, ``triton_poi_fused_convolution_0``
is a bias add), the GEMM libraries' own prefixes, then the bandwidth-bound families, then the FLOP-bound ones.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from autoprof.measure.ops import CONV_OPS, MATMUL_OPS
from autoprof.measure.runtime import is_collective_kernel
from autoprof.measure.work import memory_by_kind

COMPUTE = "compute"  # FLOP-bound by its class
MEMORY = "memory"  # bandwidth-bound by its class


class Family(NamedTuple):
    """A kernel family: its name, its bound by class (``COMPUTE`` or ``MEMORY``), and the pattern of its names."""

    name: str
    bound: str
    pattern: re.Pattern[str]


def _family(name: str, bound: str, *patterns: str) -> Family:
    return Family(name, bound, re.compile("|".join(patterns), re.IGNORECASE))


#: Kernel families, tried in this order on the kernel's own name (:func:`kernel_head`).
FAMILIES: tuple[Family, ...] = (
    # Inductor's generated kernels by kind: pointwise, reduction, persistent reduction; templates are GEMMs.
    _family("triton-pointwise", MEMORY, r"^triton_poi_"),
    _family("triton-reduction", MEMORY, r"^triton_(?:red|per)_"),
    _family("gemm", COMPUTE, r"^triton_tem_", r"^triton_(?:b|add)?mm_"),  # Inductor's GEMM templates, old names too
    # Attention kernels (FlashAttention, xformers' and CK's fmha, AMD's attn_fwd), before the GEMM libraries whose
    # code some of them are (``fmha_cutlassF_...``).
    # vLLM's KV-cache writes carry "flash" in their names (``reshape_and_cache_flash_kernel``) and only copy.
    _family("copy", MEMORY, r"reshape_and_cache"),
    _family("attention", COMPUTE, r"flash", r"fmha", r"attention", r"attn"),
    # GEMM libraries' own names: AMD Tensile (``Cijk_Ailk_Bljk_...``), CUTLASS, cuBLAS's sm90 xmma and nvjet.
    _family("gemm", COMPUTE, r"^Cijk_", r"cutlass", r"xmma", r"nvjet"),
    # Bandwidth-bound by class.
    _family("gemv", MEMORY, r"gemv"),  # a matrix-vector product moves a byte per FLOP or two: never FLOP-bound
    _family("norm", MEMORY, r"norm", r"\bbn_(?:fw|bw)", r"gammabeta", r"rowwisemoments"),  # batch/layer/group/RMS norms, cuDNN's bn_*
    _family("softmax", MEMORY, r"softmax"),
    _family("reduce", MEMORY, r"reduce", r"\breduction"),
    _family("transpose", MEMORY, r"transpose", r"nchwtonhwc", r"nhwctonchw"),  # cuDNN's layout conversions too
    _family("copy", MEMORY, r"copy", r"\bfill", r"im2col", r"col2im"),
    _family("elementwise", MEMORY, r"elementwise", r"subtensorop", r"pointwise", r"dropout"),  # MIOpen's SubTensorOp*
    _family("optimizer", MEMORY, r"multi_tensor_apply"),  # the fused optimizers' multi-tensor updates
    _family("embedding", MEMORY, r"embedding", r"index_?select", r"gather", r"scatter"),
    _family("pooling", MEMORY, r"pool"),
    # FLOP-bound by class.
    _family("conv", COMPUTE, r"conv(?!ert|ersion)", r"wgrad", r"dgrad", r"fprop", r"winograd", r"[sh0-9]cudnn", r"igemm", r"implicit_gemm"),
    # sgemm, hgemm, ampere_*gemm, cuBLAS's gemmk1; not fbgemm's sparse kernels (permutes, bucketize: index shuffles)
    _family("gemm", COMPUTE, r"(?<!fb)gemm", r"matmul"),
)

#: TF32 tensor-op kernels (an fp32 op whose kernels are these runs at the TF32 peak).
TF32_MARKERS = ("tf32", "s1688", "tensorop_s")

_ANONYMOUS = re.compile(r"\(anonymous namespace\)::")


def kernel_head(name: str) -> str:
    """The kernel's own name: no return type, namespace-less anonymous parts, template arguments or parameters
    (a CUTLASS kernel is its template argument: ``cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1``)."""
    return short_kernel_name(_ANONYMOUS.sub("", name))


def kernel_family(name: str) -> Family | None:
    """The family a kernel's name says it belongs to; None for a collective (its time is the peers', not this
    device's math) and for a name the table does not know."""
    if is_collective_kernel(name):
        return None
    head = kernel_head(name)
    for family in FAMILIES:
        if family.pattern.search(head):
            return family
    return None


#: Host ops that are FLOP work by their kind, beyond the matmul and convolution families (``trace.model``'s
#: ``MATMUL_OPS``, ``CONV_OPS``) and attention: the fused and scaled GEMMs and the backends' convolution entries.
COMPUTE_OP_PREFIXES = (
    "aten::_addmm_activation",
    "aten::_scaled_mm",
    "aten::_int_mm",
    "aten::mkldnn_linear",
    "aten::mkldnn_conv",
    "aten::_slow_conv",
    "aten::slow_conv",
    "aten::thnn_conv",
    "aten::cudnn_conv",
    "aten::miopen_conv",
    "aten::convolution_backward",
    "aten::_flash_attention",
    "aten::_efficient_attention",
    "aten::_cudnn_attention",
    "aten::_scaled_dot_product",
    "aten::scaled_dot_product_attention",
)


def op_family(name: str) -> str | None:
    """The bound of a host op by its kind: ``COMPUTE`` for the matmul, convolution and attention families,
    ``MEMORY`` for ops whose work is memory traffic (elementwise, reductions and norms, copies, gathers, sorts, the
    optimizers' multi-tensor updates: ``work.memory_by_kind``); None for the rest."""
    if name in MATMUL_OPS or name in CONV_OPS or name.startswith(COMPUTE_OP_PREFIXES):
        return COMPUTE
    if memory_by_kind(name):
        return MEMORY
    return None


_CUTLASS = re.compile(r"(?:void )?cutlass::Kernel[0-9]*<")


def short_kernel_name(name: str) -> str:
    """A readable kernel name: no return type, template arguments or parameter list."""
    match = _CUTLASS.match(name)
    if match:  # cutlass::Kernel<...> and cutlass::Kernel2<...>: the kernel is the template argument
        return name[match.end() :].split(">", 1)[0].split("(", 1)[0]
    depth = 0
    out: list[str] = []  # characters at template depth 0, up to the parameter list
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    text = "".join(out).strip()
    tokens = text.split()
    short = tokens[-1] if tokens else ""
    return short or name[:60]
