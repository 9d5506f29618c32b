"""Kernels read by their names' families (measure/kernels.py) where no op's shapes cost them: the table against real
kernel names, the cost model's precedence, and the roofline and bound_regime findings reading the same split."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from conftest import shared_trace
from synth import Synth

from autoprof.measure.kernels import COMPUTE, FAMILIES, MEMORY, kernel_family, kernel_head
from autoprof.measure.peaks import peak_for
from autoprof.rules import regime, roofline
from autoprof.trace import chrome
from autoprof.trace.model import KERNEL_CODE

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

# (trace, a kernel's own name there (kernel_head), its family, its bound): every family against a real name
REAL = [
    ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", "ampere_sgemm_128x64_nn", "gemm", COMPUTE),
    ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", "cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1", "gemm", COMPUTE),
    ("hta/v100_single_ns_resolution.json.gz", "volta_sgemm_64x64_nt", "gemm", COMPUTE),
    ("h200/bf16_8192.chrome.json.gz", "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm", COMPUTE),
    ("h200/addmm2048.chrome.json.gz", "cutlass_80_simt_sgemm_256x128_8x4_nn_align1", "gemm", COMPUTE),
    ("amd/mi210_gpu_only.json.gz", "Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT16x64x64_", "gemm", COMPUTE),
    ("hta/v100_single_ns_resolution.json.gz", "cudnn::detail::dgrad_engine", "conv", COMPUTE),
    ("hta/v100_single_ns_resolution.json.gz", "wgrad_alg0_engine", "conv", COMPUTE),
    ("hta/v100_single_ns_resolution.json.gz", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "conv", COMPUTE),
    ("hta/v100_single_ns_resolution.json.gz", "cudnn::winograd_nonfused::winogradForwardOutput4x4", "conv", COMPUTE),
    ("amd/mi210_gpu_only.json.gz", "igemm_fwd_gtcx2_nhwc_bf16_", "conv", COMPUTE),  # MIOpen's implicit-GEMM convolution
    ("amd/mi300x_qwen05b_inference.json.gz", "attn_fwd", "attention", COMPUTE),
    ("h200/gpt2_train.chrome.json.gz", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_", "attention", COMPUTE),
    ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", "gemv2T_kernel_val", "gemv", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "at::native::batch_norm_backward_kernel", "norm", MEMORY),
    ("hta/v100_single_ns_resolution.json.gz", "cudnn::bn_bw_1C11_kernel_new", "norm", MEMORY),
    ("amd/mi300x_normalization_launch.json.gz", "MIOpenBatchNormFwdTrainSpatial", "norm", MEMORY),
    ("amd/mi300x_bert_small_inference.json.gz", "at::native::vectorized_layer_norm_kernel", "norm", MEMORY),
    ("h200/loader_slow.chrome.json.gz", "softmax_warp_forward", "softmax", MEMORY),
    ("h200/gpt2_train.chrome.json.gz", "at::native::cunn_SoftMaxForwardReg", "softmax", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "at::native::reduce_kernel", "reduce", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "batched_transpose_16x64_pack_1x4_ediv_1x2_half", "transpose", MEMORY),
    ("hta/a100_alexnet_cuda_sync.json.gz", "cudnn::ops::nchwToNhwcKernel", "transpose", MEMORY),
    ("amd/mi300x_qwen05b_inference.json.gz", "at::native::CatArrayBatchedCopy", "copy", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "at::native::vectorized_elementwise_kernel", "elementwise", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "SubTensorOpWithScalar1d", "elementwise", MEMORY),
    ("h200/gpt2_train.chrome.json.gz", "at::native::fused_dropout_kernel_vec", "elementwise", MEMORY),
    ("hta/a100_triton_compiled_tiny.json.gz", "triton_poi_fused_add_cos_sin_0", "triton-pointwise", MEMORY),
    ("h200/gpt2_train.chrome.json.gz", "at::native::multi_tensor_apply_kernel", "optimizer", MEMORY),
    ("hta/a100_rank3_of8_train.json.gz", "split_embedding_codegen_forward_unweighted_kernel", "embedding", MEMORY),
    ("amd/mi210_gpu_only.json.gz", "at::native::max_pool_backward_nchw", "pooling", MEMORY),
]
# Real kernels the table must not know: Inductor's old names, a sort, collectives (communication, not math).
UNKNOWN = [
    ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", "triton__0d1d2d3d4d5d6d"),
    ("h200/gpt2_train.chrome.json.gz", "at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortOnesweepKernel"),
    ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
    ("hta/a100_rank3_of8_train.json.gz", "ncclKernel_AllReduce_RING_LL_Sum_float"),  # "Reduce" in it: still NCCL's
]

_heads: dict[str, dict[str, list[str]]] = {}


def _kernels_named(rel: str, head: str) -> list[str]:
    """The full names of the trace's kernels whose own name starts with ``head``."""
    if rel not in _heads:
        t = chrome.load(shared_trace(rel))
        by_head: dict[str, list[str]] = {}
        for cat, nid in zip(t.d_cat, t.d_name):
            if cat == KERNEL_CODE:
                by_head.setdefault(kernel_head(t.names[nid]), []).append(t.names[nid])
        _heads[rel] = by_head
    return sorted({n for h, names in _heads[rel].items() if h.startswith(head) for n in names})


@pytest.mark.parametrize(("rel", "head", "family", "bound"), REAL)
def test_each_family_reads_the_real_kernels_of_its_kind(rel: str, head: str, family: str, bound: str) -> None:
    names = _kernels_named(rel, head)
    assert names, f"no kernel {head}* in {rel}"
    for name in names:
        fam = kernel_family(name)
        assert fam is not None and (fam.name, fam.bound) == (family, bound), (name, fam)


@pytest.mark.parametrize(("rel", "head"), UNKNOWN)
def test_real_kernels_of_no_known_family_stay_unknown(rel: str, head: str) -> None:
    names = _kernels_named(rel, head)
    assert names
    assert all(kernel_family(n) is None for n in names)


def test_every_family_has_a_real_kernel_and_one_bound() -> None:
    real = {family for _, _, family, _ in REAL}
    assert {f.name for f in FAMILIES} - real == {"triton-reduction"}  # no trace here has Inductor's reductions
    bounds: dict[str, set[str]] = {}
    for f in FAMILIES:
        bounds.setdefault(f.name, set()).add(f.bound)
    assert all(len(b) == 1 for b in bounds.values()), bounds


@pytest.mark.parametrize(
    ("name", "family"),
    [
        # the kernel's own name decides, never its template arguments or parameters
        ("void at::native::vectorized_elementwise_kernel<4, at::native::convolution_functor<float>>(int, float*)", "elementwise"),
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*)", "copy"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(Params)", "gemm"),
        # Inductor's pointwise and reduction kernels carry the names of the ops they fused: their kind decides
        ("triton_poi_fused_convolution_relu_0", "triton-pointwise"),
        ("triton_red_fused_convolution_backward_sum_1", "triton-reduction"),
        ("triton_per_fused__softmax_2", "triton-reduction"),
        ("triton_tem_fused_mm_3", "gemm"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
        ("void fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>::Params)", "attention"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)", "attention"),
        ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1", "gemm"),
        ("void at::native::conv_depthwise2d_forward_kernel<float>(float const*)", "conv"),
        ("MIOpenConvUni", "conv"),
        ("void at::native::unrolled_elementwise_kernel<at::native::convert_kernel>(int)", "elementwise"),
        ("void internal::gemvx::kernel<int, int, float, float, false, true>(cublasGemvParams<float>)", "gemv"),
    ],
)
def test_families_by_name(name: str, family: str) -> None:
    fam = kernel_family(name)
    assert fam is not None and fam.name == family, (name, fam)


@pytest.mark.parametrize(
    "name", ["my_ext::fused_thing_kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "void convert_dq_to_16bits(int)"]
)
def test_unknown_names_have_no_family(name: str) -> None:
    assert kernel_family(name) is None


# -- the roofline: the cost model first, names for what it leaves ------------------------------------------------

BF16_MM = ([[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"])  # ~1365 FLOP/B: FLOP-bound on an A100
ADD = ([[4096, 4096], [4096, 4096], []], ["float", "float", "Scalar"])  # bandwidth-bound


def _graph_window(kernels: list[tuple[str, float]], steps: int = 3, gpu: str = "NVIDIA A100-SXM4-80GB") -> Synth:
    """Steps of 1 ms whose device work is one cudaGraphLaunch (one correlation for all its kernels, no op above
    them), back to back: the device busy ~``sum(kernels)`` µs a step."""
    s = Synth(gpu=gpu)
    corr = 5000
    for k in range(steps):
        base = k * 1000
        s.step(k, base, 1000)
        corr += 1
        s.runtime("cudaGraphLaunch", base + 2, 5, corr=corr)
        t: float = base + 10
        for name, dur in kernels:
            s.x("kernel", name, t, dur, tid=7, pid=0, correlation=corr, device=0, stream=7)
            t += dur
    return s


def test_a_cuda_graph_replay_is_read_by_its_kernels_names() -> None:
    s = _graph_window([("ampere_sgemm_128x64_nn", 700), ("void at::native::vectorized_elementwise_kernel<4>(int)", 150), ("my_kernel", 50)])
    roof = roofline.analyze(s.trace())
    assert roof is not None and not roof.ops
    assert roof.by_name == {"gemm": [3, 2_100_000], "elementwise": [3, 450_000]}
    assert (roof.by_name_compute_ns, roof.by_name_memory_ns) == (2_100_000, 450_000)
    assert roof.compute_ns == 2_100_000 and roof.memory_ns == 450_000 and roof.unknown_ns == 150_000  # my_kernel
    assert roof.by_step == {k: [700_000, 150_000] for k in range(3)}
    found = s.findings()
    r, f = found["bound_regime"], found["roofline"]
    assert r.verdict == "compute-bound" and r.evidence["roofline_bound"] == "compute", r.message
    assert r.evidence["classified_by_name_share"] == pytest.approx(850 / 900, abs=1e-3)
    assert r.evidence["by_name_compute_share"] == pytest.approx(700 / 900, abs=1e-3)
    assert r.evidence["by_name_families"] == {"gemm": pytest.approx(700 / 900, abs=1e-3), "elementwise": pytest.approx(150 / 900, abs=1e-3)}
    assert "94% of the kernel time read by kernel name" in r.message
    # the roofline's finding: the same split, read the same way, with no op to name
    assert f.verdict == "compute-bound" and f.subjects == ("gemm kernels", "elementwise kernels")
    assert f.evidence["ops"] == [] and "record_shapes=True" in f.advice


def test_a_kernel_under_a_costed_op_is_never_reclassified_by_name() -> None:
    # the names say the opposite of the cost model: the shapes win
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        s.op("aten::mm", base + 5, 5, *BF16_MM).launch("void at::native::vectorized_elementwise_kernel<4>(int)", base + 6, base + 20, 600)
        s.op("aten::add", base + 15, 5, *ADD).launch("ampere_sgemm_128x64_nn", base + 16, base + 620, 300)
    roof = roofline.analyze(s.trace())
    assert roof is not None and roof.by_name == {} and roof.by_name_ns == 0
    assert roof.compute_ns == 1_800_000 and roof.memory_ns == 900_000
    r = s.findings()["bound_regime"]
    assert r.evidence["classified_by_name_share"] == 0.0 and "kernel name" not in r.message


def test_kernels_of_ops_the_cost_model_cannot_cost_are_read_by_name() -> None:
    # a convolution recorded without shapes and an mm whose shapes are empty: their kernels' names say what they are
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        s.op("aten::cudnn_convolution", base + 5, 5).launch("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", base + 6, base + 20, 500)
        s.op("aten::mm", base + 15, 5, [[], []], ["float", "float"]).launch("volta_sgemm_64x64_nt", base + 16, base + 520, 200)
        s.op("aten::add", base + 25, 5, *ADD).launch("void at::native::vectorized_elementwise_kernel<4>(int)", base + 26, base + 720, 200)
    roof = roofline.analyze(s.trace())
    assert roof is not None
    assert roof.by_name == {"conv": [3, 1_500_000], "gemm": [3, 600_000]}
    assert roof.compute_ns == 2_100_000 and roof.memory_ns == 600_000 and roof.unknown_ns == 0
    assert {st.name for st in roof.ops.values()} == {"aten::add"}  # the costed op keeps its per-op figures


def test_collectives_and_unknown_kernels_stay_uncosted_and_ops_by_kind_are_not_counted_twice() -> None:
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        s.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", base + 5, base + 10, 500, stream=9)
        s.launch("my_ext::fused_thing_kernel", base + 8, base + 510, 200)
        s.op("aten::_foreach_add_", base + 20, 5).launch(
            "void multi_tensor_apply_kernel<TensorListMetadata<2>>(int)", base + 21, base + 710, 200
        )
    roof = roofline.analyze(s.trace())
    assert roof is not None and roof.by_name == {}  # the optimizer's kernel is its op's, by kind
    assert roof.memory_ns == roof.by_kind_ns == 600_000 and roof.compute_ns == 0 and roof.unknown_ns == 2_100_000
    r = s.findings()["bound_regime"]
    # the NCCL kernels run alone half of each step: exposed communication leads the window (issue 33, item 5)
    assert r.verdict == "communication-bound" and r.evidence["comm_share"] > 0.5, r.message


def test_a_device_only_window_with_no_names_the_table_knows_stays_uncosted() -> None:
    s = Synth()
    for k in range(3):
        s.device("triton__0d1d2d3d", k * 1000 + 10, 900)
    roof = roofline.analyze(s.trace())
    assert roof is not None and roof.by_name_ns == 0 and roof.unknown_ns == roof.total_ns > 0
    assert "roofline" not in s.findings()


# -- one split, one rule: the roofline finding and the bound_regime reading ----------------------------------------


def test_the_roofline_names_its_split_by_the_bound_regimes_rule() -> None:
    assert roofline.MARGIN == regime.MARGIN
    shares = [0, 1, 2, 3, 4, 5, 6, 8, 10]
    for c, m, u in itertools.product(shares, repeat=3):
        verdict, bound = regime.work_verdict(c, m, u)
        assert roofline.bound_of(c, m, u) == ("unknown" if bound == "uncosted" else bound), (c, m, u)
        assert verdict == {"compute": "compute-bound", "memory": "memory-bound"}.get(bound, "mixed")


def _both(s: Synth) -> tuple[Any, Any]:
    found = s.findings()
    return found["bound_regime"], found["roofline"]


@pytest.mark.parametrize(
    "parts",
    [
        [("gemm", 550), ("add", 0), ("custom", 400)],  # 55% FLOP-bound beside 40% not costed: no bound leads
        [("gemm", 300), ("add", 600), ("custom", 0)],
        [("gemm", 800), ("add", 100), ("custom", 0)],
    ],
)
def test_the_roofline_finding_reads_as_the_breakdown_the_regime_prints(parts: list[tuple[str, float]]) -> None:
    s = Synth()
    for k in range(3):
        base, t = k * 1000, float(k * 1000 + 20)
        s.step(k, base, 1000)
        for j, (what, dur) in enumerate(parts):
            if not dur:
                continue
            if what == "gemm":
                s.op("aten::mm", base + 5 + j * 10, 5, *BF16_MM)
            elif what == "add":
                s.op("aten::add", base + 5 + j * 10, 5, *ADD)
            else:
                s.op("my_ext::thing", base + 5 + j * 10, 5)
            s.launch(f"kernel_{j}", base + 6 + j * 10, t, dur)
            t += dur
    r, f = _both(s)
    assert r.evidence["reading"] == "device"
    shares = r.evidence["roofline_shares"]
    assert (f.evidence["compute_bound_share"], f.evidence["memory_bound_share"], f.evidence["unknown_share"]) == (
        shares["compute"],
        shares["memory"],
        shares["uncosted"],
    )
    assert f.evidence["roofline_bound"] == r.evidence["roofline_bound"]
    if r.evidence["roofline_bound"] in ("compute", "memory"):
        assert f.verdict == r.verdict
    else:
        assert f.verdict == "mixed"
    split = r.message[r.message.rindex("(") + 1 : -1]
    assert split in f.message and "not the window's limit" in f.message


# -- advice: GPU-only advice never on a CPU window ----------------------------------------------------------------

GPU_WORDS = ("tensor", "tf32", "TF32", "bf16", "fp16", "cuda")


def test_cpu_windows_get_no_gpu_advice() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        base = k * 30_000
        s.step(k, base, 30_000)
        s.op("aten::mm", base + 10, 20_000, [[1024, 1024], [1024, 1024]], ["float", "float"])
        s.op("aten::add", base + 20_100, 9_000, [[4096, 4096], [4096, 4096], []], ["float", "float", "Scalar"])
    trace = s.trace()
    trace.metadata.update(cpu_peak_flops=1e11, cpu_peak_bytes_per_s=1e10)
    roof = roofline.analyze(trace)
    assert roof is not None and not roof.on_device and {st.bound for st in roof.ops.values()} == {"compute", "memory"}
    (f,) = roofline.check(trace)
    texts = [f.advice] + [op["advice"] for op in f.evidence["ops"]]
    assert len(texts) == 3
    for text in texts:
        assert not any(w in text for w in GPU_WORDS), text
    assert "of the ops' own time" in f.message and "FLOP-bound ops" in f.message


@pytest.mark.parametrize(
    ("gpu", "dtype", "says", "never"),
    [
        ("NVIDIA A100-SXM4-80GB", "fp32", ("tensor (matrix) cores", "allow_tf32"), ()),
        ("Tesla V100-SXM2-32GB", "fp32", ("tensor (matrix) cores",), ("TF32", "tf32")),  # no TF32 on a V100
        ("NVIDIA A100-SXM4-80GB", "bf16", ("Compute-bound in bf16",), ("use the tensor", "TF32")),  # already bf16
    ],
)
def test_device_compute_advice_fits_the_device_and_the_dtype(gpu: str, dtype: str, says: tuple[str, ...], never: tuple[str, ...]) -> None:
    peak = peak_for([{"name": gpu}], {}, None)
    assert peak is not None
    text = roofline.advice("compute", dtype, peak, on_device=True)
    assert all(w in text for w in says) and not any(w in text for w in never), text
    assert "bf16/fp16" not in roofline.advice("memory", "bf16", peak, on_device=True)
