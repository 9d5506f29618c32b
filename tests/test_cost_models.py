"""The roofline's cost models per op family (issue 21): shapes in, FLOPs and bytes out, checked against arithmetic
done by hand; and the regime's verdict branches for a device-bound window on small synthetic device traces."""

from __future__ import annotations

from typing import Any

import pytest
from synth import Synth

from autoprof.measure.work import is_roofline_op, memory_by_kind, op_work
from autoprof.rules import regime
from autoprof.trace.model import SHAPED_OPS, causal_flag

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

F32, BF16, I64 = "float", "c10::BFloat16", "long int"


@pytest.mark.parametrize(
    "name,dims,types,flops,nbytes",
    [
        # weight [V=50257, D=768], indices [16, 512]: 8192 rows of 768 floats read and written, 8192 int64 read
        (
            "aten::embedding",
            [[50257, 768], [16, 512], [], [], []],
            [F32, I64, "Scalar", "Scalar", "Scalar"],
            0,
            2 * 8192 * 768 * 4 + 8192 * 8,
        ),
        # grad [16, 512, 768] added into the weight's rows: read the grad row, read and write the weight row
        ("aten::embedding_dense_backward", [[16, 512, 768], [16, 512]], [F32, I64], 8192 * 768, 3 * 8192 * 768 * 4 + 8192 * 8),
        # weight [1000, 64], 300 indices in 10 bags: 300 rows read, 10 bags written, 300 indices
        ("aten::embedding_bag", [[1000, 64], [300], [10]], [F32, I64, I64], 300 * 64, 300 * 64 * 4 + 10 * 64 * 4 + 300 * 8),
        # gather/take: the output has the index's shape
        ("aten::gather", [[4096, 4096], [], [4096, 16]], [F32, "Scalar", I64], 0, 2 * 65536 * 4 + 65536 * 8),
        ("aten::take", [[1000], [10]], [BF16, I64], 0, 2 * 10 * 2 + 10 * 8),
        # index_select of 100 rows of a [1000, 256] table (dim 0)
        ("aten::index_select", [[1000, 256], [], [100]], [F32, "Scalar", I64], 0, 2 * 100 * 256 * 4 + 100 * 8),
        # scatter_add_ in place: 64 source elements read, self's read and written
        ("aten::scatter_add_", [[128], [], [64], [64]], [F32, "Scalar", I64, F32], 64, 3 * 64 * 4),
        # out-of-place scatter: self copied first (read + write 128 floats)
        ("aten::scatter", [[128], [], [64], [64]], [F32, "Scalar", I64, F32], 0, 3 * 64 * 4 + 2 * 128 * 4),
        # sort of 1024×1024 floats along the last dim: read once, write values and int64 indices; n·log2(1024)·~1
        ("aten::sort", [[1024, 1024], [], []], [F32, "Scalar", "Scalar"], 1024 * 1024 * 11, 1024 * 1024 * (4 + 4 + 8)),
        # casts and copies: read and write each element once
        ("aten::_to_copy", [[256, 256]], [BF16], 0, 2 * 65536 * 2),
        ("aten::clone", [[10, 10]], [F32], 0, 2 * 100 * 4),
        # normalizations and softmax backward: read the inputs, write an input-shaped output
        ("aten::native_group_norm", [[8, 32, 16, 16], [32], [32]], [F32, F32, F32], 8 * 65536, (65536 + 64 + 65536) * 4),
        ("aten::_fused_rms_norm", [[4, 1024], [1024]], [BF16, BF16], 4 * 4096, (4096 + 1024 + 4096) * 2),
        (
            "aten::_log_softmax_backward_data",
            [[8192, 8192], [8192, 8192], [], []],
            [F32, F32, "Scalar", "Scalar"],
            4 * 8192**2,
            3 * 8192**2 * 4,
        ),
        # losses: nll_loss gathers one element per row; its backward writes the whole [N, C] gradient
        ("aten::nll_loss_forward", [[8192, 8192], [8192], [], [], []], [F32, I64, "", "Scalar", "Scalar"], 8192, 8192 * 4 + 8192 * 8),
        ("aten::nll_loss_backward", [[], [8192, 8192], [8192]], [F32, F32, I64], 0, 8192 * 8192 * 4 + 8192 * 8),
        ("aten::native_dropout_backward", [[16, 512, 768], [16, 512, 768], []], [BF16, "bool", "Scalar"], 6291456, 6291456 * (2 + 1 + 2)),
    ],
)
def test_memory_op_costs(name: str, dims: list[Any], types: list[Any], flops: float, nbytes: float) -> None:
    assert op_work(name, dims, types) == (float(flops), float(nbytes))
    assert name in SHAPED_OPS and is_roofline_op(name) and memory_by_kind(name)


QKV = [[16, 12, 512, 64]] * 3
ATTN_FWD = 2 * 192 * 512 * 512 * 64 * 2  # Q·Kᵀ and P·V, 2·B·L·S·E each (B = 16 × 12 heads)
QKV_BYTES = 3 * 192 * 512 * 64 * 2  # bf16


def test_attention_forward_and_backward_flops_causal_halved() -> None:
    fwd = op_work("aten::scaled_dot_product_attention", [*QKV, [], [], [], [], []], [BF16] * 3 + [""] * 5)
    assert fwd == (ATTN_FWD, QKV_BYTES + 192 * 512 * 64 * 2)  # the inputs read, the output written
    causal = op_work("aten::scaled_dot_product_attention", [*QKV, [], [], [], [], []], [BF16] * 3 + [""] * 5, causal=True)
    assert causal is not None and causal[0] == ATTN_FWD / 2
    # a backward's inputs start with the output's gradient; four products (twice the forward), dQ, dK, dV written
    bwd = op_work("aten::_scaled_dot_product_flash_attention_backward", [[16, 12, 512, 64], *QKV], [BF16] * 4)
    assert bwd == (2 * ATTN_FWD, 4 * 192 * 512 * 64 * 2 + QKV_BYTES)
    bwd_causal = op_work("aten::_scaled_dot_product_flash_attention_backward", [[16, 12, 512, 64], *QKV], [BF16] * 4, causal=True)
    assert bwd_causal is not None and bwd_causal[0] == ATTN_FWD


def test_causal_flag_from_each_attention_ops_concrete_inputs() -> None:
    # positions of is_causal in the ops' schemas, as torch records them (strings in a chrome export, values live)
    assert causal_flag("aten::scaled_dot_product_attention", ["", "", "", "", "0.1", "True", "0.125", "False"]) is True
    assert causal_flag("aten::_scaled_dot_product_cudnn_attention", ["", "", "", "", "True", "0.1", "True", "False", "0.125"]) is True
    assert causal_flag("aten::_scaled_dot_product_flash_attention_for_cpu", [None, None, None, 0.0, False, None, None]) is False
    assert causal_flag("aten::scaled_dot_product_attention", []) is None  # not recorded: not halved
    assert causal_flag("aten::mm", ["True"]) is None


def test_ops_without_costable_shapes_are_bandwidth_bound_by_kind_never_compute() -> None:
    # the optimizers' multi-tensor updates record no shapes; cat's tensor list carries no dtype
    assert op_work("aten::_foreach_addcdiv_", [[], [], [], []], ["TensorList", "TensorList", "TensorList", "Scalar"]) is None
    assert op_work("aten::cat", [[[16, 512, 768], [16, 512, 768]], []], ["TensorList", "Scalar"]) is None
    for name in ("aten::_foreach_addcdiv_", "aten::cat", "aten::_fused_adamw_", "aten::cudnn_batch_norm_backward", "aten::max_pool2d"):
        assert memory_by_kind(name) and is_roofline_op(name)
    assert not memory_by_kind("aten::mm") and not memory_by_kind("triton_poi_fused_add_0")


# -- the device-bound verdict's branches ---------------------------------------------------------------------------

MM_TYPES = ["c10::BFloat16", "c10::BFloat16"]


def _device_bound(parts: list[tuple[str, list[Any], list[Any], float]], steps: int = 3) -> dict[str, Any]:
    """Device-bound steps (1 ms each, device busy ~95%): each part an op (name, dims, types) whose kernel runs
    ``µs``."""
    s = Synth(gpu="NVIDIA H200")
    for k in range(steps):
        base, t = k * 1000, k * 1000 + 20
        s.step(k, base, 1000)
        for j, (name, dims, types, dur) in enumerate(parts):
            s.op(name, base + 5 + j * 10, 5, dims, types)
            s.launch(f"kernel_{j}", base + 6 + j * 10, t, dur)
            t += dur
    found = s.findings()
    return {"verdict": found["bound_regime"].verdict, **found["bound_regime"].evidence, "message": found["bound_regime"].message}


GEMM = ("aten::mm", [[8192, 8192], [8192, 8192]], MM_TYPES)  # intensity ~2700 FLOP/byte: FLOP-bound on an H200
ADD = ("aten::add", [[8192, 8192], [8192, 8192], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"])  # bandwidth-bound
CUSTOM = ("my_ext::fused_thing", [], [])  # a custom kernel: nothing to cost it with


def test_a_device_bound_window_in_flop_bound_kernels_is_compute_bound() -> None:
    r = _device_bound([(*GEMM, 800), (*ADD, 150)])
    assert r["verdict"] == "compute-bound" and r["reading"] == "device" and r["roofline_bound"] == "compute"
    assert r["roofline_shares"] == {
        "compute": pytest.approx(800 / 950, abs=1e-3),
        "memory": pytest.approx(150 / 950, abs=1e-3),
        "uncosted": 0.0,
    }


def test_a_device_bound_window_in_bandwidth_bound_kernels_is_memory_bound() -> None:
    r = _device_bound([(*ADD, 800), (*GEMM, 150)])
    assert r["verdict"] == "memory-bound" and r["roofline_bound"] == "memory" and "bandwidth-bound" in r["message"]


def test_a_device_bound_window_with_no_bound_leading_is_mixed() -> None:
    r = _device_bound([(*GEMM, 500), (*ADD, 450)])  # 53% against 47%: within the margin
    assert r["verdict"] == "mixed" and r["roofline_bound"] == "mixed" and "no bound leading" in r["message"]


def test_a_device_bound_window_in_work_the_roofline_cannot_cost_is_never_compute_bound() -> None:
    r = _device_bound([(*CUSTOM, 800), (*GEMM, 150)])
    assert r["verdict"] == "mixed" and r["roofline_bound"] == "unknown" and r["uncosted_share"] > 0.8
    assert "device-bound" in r["message"] and "cannot cost" in r["message"]


def test_work_verdict_margins() -> None:
    assert regime.work_verdict(60, 39, 1) == ("compute-bound", "compute")  # 60 ≥ 1.5 × 39
    assert regime.work_verdict(55, 40, 5) == ("mixed", "mixed")
    assert regime.work_verdict(10, 70, 20) == ("memory-bound", "memory")
    assert regime.work_verdict(30, 10, 60) == ("mixed", "uncosted")
    assert regime.work_verdict(0, 0, 0) == ("mixed", "mixed")


def _busy_and_host(device_us: float, host_us: float) -> Any:
    """Three 1 ms steps: the host active ``host_us`` (many small launching ops), the device busy ``device_us``."""
    s = Synth(gpu="NVIDIA H200")
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        n = 20
        for j in range(n):
            t = base + 10 + j * (host_us / n)
            s.op("aten::mm", t, host_us / n - 1, GEMM[1], GEMM[2])
            s.launch(f"gemm_{j}", t + 1, base + 10 + j * (device_us / n), device_us / n - 0.5)
    return s.findings()["bound_regime"]


def test_a_device_busier_than_half_but_less_than_the_host_is_not_the_bottleneck() -> None:
    # the live GPT-2 window of issue 21: device busy 62%, host active 74% -> the device waits on the host
    f = _busy_and_host(620, 740)
    assert f.verdict == "overhead-bound", f.message
    assert f.evidence["device_busy_share"] < f.evidence["host_active_share"]


def test_a_saturated_device_is_the_bottleneck_however_busy_the_host() -> None:
    f = _busy_and_host(950, 970)
    assert f.verdict == "compute-bound" and f.evidence["device_busy_share"] >= regime.DEVICE_SATURATED
    assert _busy_and_host(700, 500).verdict == "compute-bound"  # busier than the host, above 60%


def test_a_device_busy_only_in_copies_is_said_so() -> None:
    s = Synth(gpu="NVIDIA H200")
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::copy_", base + 5, 10, [[1024], [1024], []], ["float", "float", ""])
        s.launch("Memcpy HtoD (Pageable -> Device)", base + 6, base + 20, 950, cat="gpu_memcpy", call="cudaMemcpyAsync")
    f = s.findings()["bound_regime"]
    assert f.verdict == "mixed" and "copies and memsets" in f.message and "pinned" in f.advice
