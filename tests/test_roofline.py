"""Roofline: per-op intensity and bound, window split, peaks; live CPU and a real A100 trace."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import shared_trace

import autoprof
from autoprof.measure import peaks as peaks
from autoprof.measure.work import ROOFLINE_OPS, op_work
from autoprof.rules import roofline
from autoprof.trace import chrome
from autoprof.trace.model import SHAPED_OPS

FAST = dict(skip_first=0, wait=0, warmup=1, active=3)


def test_every_roofline_op_keeps_its_shapes_in_the_loaders() -> None:
    from autoprof.measure.ops import REDUCTION_OPS
    from autoprof.measure.work import REDUCTIONS

    assert ROOFLINE_OPS <= SHAPED_OPS
    assert set(REDUCTIONS) == REDUCTION_OPS  # a FLOP count for every reduction the loaders keep


def test_work_formulas() -> None:
    f, b = op_work("aten::mm", [[64, 32], [32, 16]], ["float", "float"])  # type: ignore[misc]
    assert f == 2 * 64 * 32 * 16 and b == (64 * 32 + 32 * 16 + 64 * 16) * 4
    f, b = op_work("aten::add", [[1000], [1000], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"])  # type: ignore[misc]
    assert f == 1000 and b == 3 * 1000 * 2
    assert op_work("aten::mm", [[], []], ["", ""]) is None


def test_peak_table_matches_device_names_and_names_sources() -> None:
    assert peaks.gpu_peak("NVIDIA A100-SXM4-80GB").name == "A100 80GB SXM"  # type: ignore[union-attr]
    assert peaks.gpu_peak("NVIDIA A100-PG509-200").name == "A100 40GB"  # type: ignore[union-attr]
    assert peaks.gpu_peak("NVIDIA H100 PCIe").name == "H100 PCIe"  # type: ignore[union-attr]
    assert peaks.gpu_peak("NVIDIA H100 80GB HBM3").name == "H100 SXM"  # type: ignore[union-attr]
    assert peaks.gpu_peak("NVIDIA H200").bytes_per_s == 4.8e12  # type: ignore[union-attr]
    assert peaks.gpu_peak("Tesla V100-SXM2-32GB").name == "V100"  # type: ignore[union-attr]
    assert peaks.gpu_peak("NVIDIA GeForce RTX 2080 Ti").name == "RTX 2080 Ti"  # type: ignore[union-attr]
    assert peaks.gpu_peak("Some Unknown GPU") is None
    assert all(p.source and p.bytes_per_s > 0 and p.flops["fp32" if "fp32" in p.flops else "fp16"] > 0 for p in peaks.GPU_PEAKS)


def test_a100_trace_gemms_compute_side_elementwise_memory_side() -> None:
    t = chrome.load(shared_trace("hta/a100_rank3_of8_train.json.gz"))
    rf = roofline.analyze(t)
    assert rf is not None and rf.peak.name == "A100 40GB"
    ops = {(s.name, s.shapes): s for s in rf.ops.values()}
    big = ops[("aten::mm", "[[1024, 2048], [2048, 4864]]")]
    assert big.bound == "compute" and big.dtype == "tf32" and big.flops / big.bytes > 200
    lin = ops[("aten::linear", "[[1024, 4864], [2048, 4864], [2048]]")]
    assert lin.bound == "compute"
    for key in (("aten::mul", "[[1024, 512], [1024, 512]]"), ("aten::add", "[[98304, 647], [98304, 647], []]")):
        assert ops[key].bound == "memory" and ops[key].flops / ops[key].bytes < 1
    elementwise = [s for s in rf.ops.values() if s.name in ("aten::add", "aten::add_", "aten::mul", "aten::sigmoid")]
    assert elementwise and all(s.bound == "memory" for s in elementwise)
    # an elementwise add streams near the A100's bandwidth: the table's figure is the right order
    add = ops[("aten::add", "[[98304, 647], [98304, 647], []]")].record(rf.peak, rf.peak.flops["fp32"])
    assert 0.5 < add["roofline_fraction_ratio"] <= 1.05
    (f,) = roofline.check(t)
    assert f.evidence["memory_bound_share"] > 0 and f.evidence["compute_bound_share"] > 0
    assert abs(f.evidence["memory_bound_share"] + f.evidence["compute_bound_share"] + f.evidence["unknown_share"] - 1) < 0.01


def test_live_elementwise_chain_is_memory_bound_large_matmul_compute_bound(records: Any) -> None:
    x = torch.randn(1 << 24)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)

    @autoprof(name="chain", **FAST)
    def chain() -> torch.Tensor:
        return torch.sigmoid(x * 2 + 1)

    @autoprof(name="big_mm", **FAST)
    def big() -> torch.Tensor:
        return a @ b

    for _ in range(4):
        chain()
    for _ in range(4):
        big()
    rc = records.findings("chain")
    rb = records.findings("big_mm")
    assert rc["roofline"]["verdict"] == "memory-bound"
    assert rb["roofline"]["verdict"] == "compute-bound"
    ops = {o["name"]: o for o in rc["roofline"]["evidence"]["ops"]}
    assert {"aten::mul", "aten::add", "aten::sigmoid"} <= set(ops)
    for o in ops.values():
        assert o["bound"] == "memory" and o["achieved_bytes_per_s"] > 0 and o["intensity_flops_per_byte"] < 1
    mm = rb["roofline"]["evidence"]["ops"][0]
    assert mm["bound"] == "compute" and mm["achieved_flops_per_s"] > 1e9 and mm["intensity_flops_per_byte"] > 50
    # the bound-regime verdict of the op-bound (CPU) window names the bound itself, first
    if records.judged(rc["bound_regime"], "memory-bound"):
        assert rc["bound_regime"]["evidence"]["roofline_bound"] == "memory"
        assert "bandwidth-bound ops" in rc["bound_regime"]["message"]
    records.judged(rb["bound_regime"], "compute-bound")


def test_configured_peaks_override(records: Any) -> None:
    autoprof.configure(peaks={"flops_per_s": 1e18, "bytes_per_s": 1e6})
    # intensity 0.1 FLOP/B vs ridge 1e12 FLOP/B: memory-bound; a matmul's ~170 FLOP/B too
    a = torch.randn(256, 256)

    @autoprof(name="ovr", **FAST)
    def f() -> torch.Tensor:
        return a @ a

    for _ in range(4):
        f()
    r = records.findings("ovr")["roofline"]
    assert r["evidence"]["peak"] == "configured" and r["verdict"] == "memory-bound"
    with pytest.raises(autoprof.ConfigError, match="peaks"):
        autoprof.configure(peaks={"flops_per_s": -1})
