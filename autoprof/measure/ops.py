"""The op vocabulary: what an aten op is by its name, in families (matmul, elementwise, reduction, gather,
sort, copy, loss, convolution), which the cost model (``work``), the kernel families (``kernels``) and the rules
read. The loaders keep the shapes of exactly these ops (``trace.model.SHAPED_OPS``: loading needs no more than the
names). Pure."""

from __future__ import annotations

from autoprof.trace.model import ARG_OPS

MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul", "aten::linear"})
ELEMENTWISE_OPS = frozenset(
    {
        "aten::add",
        "aten::add_",
        "aten::sub",
        "aten::sub_",
        "aten::mul",
        "aten::mul_",
        "aten::div",
        "aten::div_",
        "aten::relu",
        "aten::relu_",
        "aten::gelu",
        "aten::silu",
        "aten::sigmoid",
        "aten::tanh",
        "aten::exp",
        "aten::neg",
        "aten::pow",
        "aten::sqrt",
        "aten::rsqrt",
        "aten::where",
        "aten::clamp",
        "aten::clamp_",
        "aten::copy_",
        "aten::fill_",
        "aten::zero_",
        "aten::threshold_backward",
        "aten::sigmoid_backward",
        "aten::gelu_backward",
        "aten::tanh_backward",
        "aten::silu_backward",
        "aten::addcmul_",
        "aten::addcdiv_",
        "aten::lerp_",
        "aten::masked_fill",
        "aten::masked_fill_",
        "aten::cos",
        "aten::sin",
        "aten::abs",
        "aten::native_dropout",
        "aten::dropout",
        "aten::mish",
        "aten::hardtanh",
    }
)
REDUCTION_OPS = frozenset(
    {
        "aten::sum",
        "aten::mean",
        "aten::amax",
        "aten::max",
        "aten::norm",
        "aten::var",
        "aten::softmax",
        "aten::_softmax",
        "aten::log_softmax",
        "aten::_log_softmax",
        "aten::layer_norm",
        "aten::native_layer_norm",
        "aten::group_norm",
        "aten::batch_norm",
        "aten::native_layer_norm_backward",
        "aten::_softmax_backward_data",
        "aten::_log_softmax_backward_data",
        "aten::native_group_norm",
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit",
        "aten::rms_norm",
        "aten::_fused_rms_norm",
        "aten::native_group_norm_backward",
        "aten::native_batch_norm_backward",
        "aten::_fused_rms_norm_backward",
    }
)
# More ops whose time is memory traffic (issue 21), costed in bytes from their shapes: gathers and scatters
# (embedding lookups, indexing), sorts, copies and concatenation, normalizations, softmax and losses with their
# backward passes (normalizations: REDUCTION_OPS).
GATHER_OPS = frozenset(
    {
        "aten::embedding",
        "aten::embedding_backward",
        "aten::embedding_dense_backward",
        "aten::embedding_bag",
        "aten::_embedding_bag",
        "aten::_embedding_bag_forward_only",
        "aten::index_select",
        "aten::gather",
        "aten::take",
        "aten::scatter",
        "aten::scatter_",
        "aten::scatter_add",
        "aten::scatter_add_",
        "aten::index_add",
        "aten::index_add_",
        "aten::index",
        "aten::index_put_",
        "aten::masked_select",
        "aten::masked_scatter_",
    }
)
SORT_OPS = frozenset({"aten::sort", "aten::argsort", "aten::topk", "aten::msort"})
COPY_OPS = frozenset({"aten::cat", "aten::stack", "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous"})
LOSS_OPS = frozenset({"aten::nll_loss_forward", "aten::nll_loss_backward", "aten::native_dropout_backward"})
#: Convolutions (forward and backward, every level a call passes through: conv2d -> convolution -> _convolution
#: -> mkldnn/cudnn/miopen/slow kernels), costed from their shapes and their recorded stride, padding, dilation,
#: groups, transposed flag and output mask: the ops whose concrete inputs the loaders keep (``trace.model.ARG_OPS``).
CONV_OPS = ARG_OPS
#: Every op of a family: the ops whose shapes the loaders keep (``trace.model.SHAPED_OPS``).
SHAPED = MATMUL_OPS | ELEMENTWISE_OPS | REDUCTION_OPS | GATHER_OPS | SORT_OPS | COPY_OPS | LOSS_OPS | CONV_OPS
