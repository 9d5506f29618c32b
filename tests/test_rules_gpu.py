"""GPU rules on real traces from ../shared/traces (see MANIFEST.md there)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import shared_trace

from autoprof.analysis import engine
from autoprof.findings import Finding
from autoprof.rules import fusion, occupancy, regime, run_rules
from autoprof.rules.sync import profiler_flush_ns
from autoprof.trace import chrome
from autoprof.trace.model import KERNEL

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

_cache: dict[str, Any] = {}


def load(rel: str) -> Any:
    if rel not in _cache:
        _cache[rel] = chrome.load(shared_trace(rel))
    return _cache[rel]


def findings(rel: str) -> dict[str, Finding]:
    fs, failures = run_rules(load(rel))
    assert failures == []
    return {f.rule: f for f in fs}


def test_a_busy_device_mostly_in_collectives_and_uncosted_kernels_is_not_called_compute_bound() -> None:
    # device-bound, but 37% of its kernel time is NCCL's (the peers' time, never costed) and no bound leads the
    # rest: "compute-bound" would be a guess (issue 21). fbgemm's embedding kernels are read by name (issue 33).
    f = findings("hta/a100_rank3_of8_train.json.gz")["bound_regime"]
    assert f.verdict == "mixed" and "device-bound" in f.message and "no bound leading" in f.message
    ev = f.evidence
    assert ev["reading"] == "device" and ev["roofline_bound"] == "mixed"
    assert ev["device_busy_share"] >= regime.DEVICE_BUSY_COMPUTE
    assert ev["uncosted_share"] > 0.35  # the NCCL kernels stay uncosted
    assert 0.1 < ev["classified_by_name_share"] < 0.3 and ev["by_name_families"]["embedding"] > 0.1
    # the seed's evidence: Self CPU and Self device totals in the same range
    assert ev["self_cpu_total_us"] > 0 and ev["self_device_total_us"] > 0
    assert 0.5 <= ev["cpu_to_device_ratio"] <= 2.0


def test_convolutions_recorded_without_shapes_are_read_by_their_kernels_names() -> None:
    # a conv net in fp32 on a V100: cuDNN's convolution kernels (implicit GEMM, winograd, wgrad/dgrad) and sgemms
    # under aten::convolution ops that carry no shapes, 63% of the kernel time: FLOP-bound by their class
    f = findings("hta/v100_single_ns_resolution.json.gz")["bound_regime"]
    ev = f.evidence
    assert f.verdict == "compute-bound" and ev["roofline_bound"] == "compute", f.message
    assert "read by kernel name" in f.message
    assert ev["classified_by_name_share"] > 0.6 and ev["by_name_compute_share"] > 0.6
    assert set(ev["by_name_families"]) >= {"conv", "gemm"} and ev["uncosted_share"] < 0.05
    assert ev["memory_bound_share"] > 0.3  # batch norms and elementwise ops, costed from their shapes
    assert ev["self_cpu_total_us"] > 0 and ev["self_device_total_us"] > 0
    assert 0.5 <= ev["cpu_to_device_ratio"] <= 2.0


def test_convnet_is_overhead_bound() -> None:
    f = findings("hta/a100_rank0_of2_convnet.json.gz")["bound_regime"]
    assert f.verdict == "overhead-bound"
    assert 0.15 <= f.evidence["device_busy_share"] <= 0.35  # GPU busy ~1/4 of the steps
    assert f.evidence["host_active_share"] > 0.6  # the host busy dispatching
    assert f.evidence["cpu_to_device_ratio"] > 3  # Self CPU total far above Self CUDA total


def test_stacked_linear_sync_bound_in_cudafree() -> None:
    fs = findings("param/rtx2080ti_stacked_linear.json.gz")
    f = fs["bound_regime"]
    # the host waits in cudaFree (49% of the window) longer than it works (41%), the device busy 19%: the larger
    # of the host's shares names it (it read overhead-bound while the overhead branch came first)
    assert f.verdict == "sync-bound" and "cudaFree" in f.message, f.message
    assert f.evidence["blocked_share"] > f.evidence["host_active_share"] > f.evidence["device_busy_share"]
    free_ms = f.evidence["blocked_by_call_us"]["cudaFree"] / 1000
    assert 900 <= free_ms <= 1100  # ~1 s of host time in cudaFree, reported apart
    assert f.evidence["host_active_share"] < 1 - f.evidence["blocked_share"] + 1e-6
    blocked = fs["blocking_calls"]
    assert blocked.subjects[0] == "cudaFree"
    # nn.Linear's forward is addmm (fused); its backward mm's are not unfused bias adds
    assert "unfused_bias_add" not in fs
    trace = load("param/rtx2080ti_stacked_linear.json.gz")
    assert sum(1 for i in trace.host_indices("cpu_op") if trace.host_name(i) == "aten::addmm") == 840
    assert fusion.check(trace) == []


def test_compiled_cudagraphs_sync_bound_memcpy_named_and_final_sync() -> None:
    fs = findings("hta/a100_rank0_of16_compiled_cudagraphs.json.gz")
    f = fs["bound_regime"]
    assert f.verdict != "compute-bound"
    assert f.verdict == "sync-bound"
    by_call = f.evidence["blocked_by_call_us"]
    assert max(by_call, key=by_call.get) == "cudaMemcpyAsync"
    assert 700 <= by_call["cudaMemcpyAsync"] / 1000 <= 850  # ~0.77 s
    blocking = fs["blocking_calls"]
    assert blocking.subjects[0] == "cudaMemcpyAsync" and "cudaMemcpyAsync" in blocking.message
    assert "final_device_sync" not in fs  # the profiler's flush is no finding: the window record says it
    assert 150 <= profiler_flush_ns(load("hta/a100_rank0_of16_compiled_cudagraphs.json.gz")) / 1e6 <= 165  # ~158 ms


@pytest.mark.parametrize(
    "rel", ["hta/a100_rank3_of8_train.json.gz", "hta/v100_single_ns_resolution.json.gz", "amd/mi300x_qwen05b_inference.json.gz"]
)
def test_waits_while_the_device_stays_busy_are_no_blocking_finding(rel: str) -> None:
    # 77 ms / 53 ms / 13 ms of host time in cudaMemcpyAsync / hipDeviceSynchronize (11-28% of the window), but the
    # device is busy through nearly all of it (device-bound windows): the host waited for work that ran anyway
    fs = findings(rel)
    assert "blocking_calls" not in fs
    assert fs["bound_regime"].evidence["blocked_share"] > 0.1 and fs["bound_regime"].evidence["device_busy_share"] > 0.8


def test_waits_with_the_device_idle_are_named_and_the_overlapped_rest_said_apart() -> None:
    b = findings("hta/a100_rank0_of16_compiled_cudagraphs.json.gz")["blocking_calls"]
    assert 0.3 < b.evidence["idle_wait_share"] < 0.45 < b.evidence["blocked_share"]  # 465 of 770 ms with the device idle
    assert "overlapped device work" in b.message


def test_v100_final_sync_is_the_profilers_flush_in_the_window_record() -> None:
    trace = load("hta/v100_single_ns_resolution.json.gz")
    found, _ = engine.analyze_trace(trace)
    assert 85 <= engine.window_summary(trace, found)["profiler_flush_ms"] <= 95  # ~89 ms
    assert "final_device_sync" not in {f.rule for f in found}


def test_resnet_2021_schema_is_input_bound() -> None:
    trace = load("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz")
    assert trace.n_device > 8000 and len(trace.steps) == 6  # loaded despite the 2021 category names
    assert sum(1 for d in range(trace.n_device) if trace.d_launch_host[d] >= 0) == trace.n_device
    f = findings("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz")["bound_regime"]
    assert f.verdict == "input-bound"
    assert 0.3 <= f.evidence["input_share"] <= 0.5  # enumerate(DataLoader) ~40% of step time


def test_alexnet_occupancy_queried_launches_are_gemm_conv() -> None:
    trace = load("hta/a100_alexnet_cuda_sync.json.gz")
    (f,) = occupancy.check(trace)
    assert f.evidence["queried_launch_count"] >= 6
    assert f.evidence["gemm_conv_share"] == 1.0
    assert all(occupancy.is_heavy(k) for k in f.subjects)
    # elementwise launches carry no occupancy query
    elementwise = [trace.device_name(d) for d in trace.device_indices(KERNEL) if "elementwise" in trace.device_name(d)]
    assert elementwise and not any("elementwise" in k for k in f.subjects)
    assert f.evidence["unqueried_launch_count"] >= len(elementwise)


def test_triton_tiny_compile_overhead_warning() -> None:
    fs = findings("hta/a100_triton_compiled_tiny.json.gz")
    f = fs["compile_overhead"]
    assert f.severity == "warning"
    assert f.evidence["compute_side"] == "device"
    assert f.evidence["wrapper_per_call_us"] > 100 * f.evidence["compute_per_call_us"]
    assert f.evidence["compute_per_call_us"] == pytest.approx(1.76, abs=0.01)  # one tiny triton kernel


def test_rank_and_world_size_from_distributed_info() -> None:
    t = load("hta/a100_rank3_of8_train.json.gz")
    assert (t.rank, t.world_size) == (3, 8)
    assert [s.number for s in t.steps] == list(range(1009, 1015))
    assert t.device_properties and t.device_properties[0]["name"].startswith("NVIDIA A100")


def test_device_work_belongs_to_the_launching_step() -> None:
    t = load("hta/v100_single_ns_resolution.json.gz")
    hs = t.step_of_host()
    ds = t.step_of_device(hs)
    late = 0
    for d in range(t.n_device):
        h = t.d_launch_host[d]
        if h < 0 or ds[d] < 0:
            continue
        assert ds[d] == hs[h]
        step = t.steps[ds[d]]
        if t.d_ts[d] >= step.end_ns:
            late += 1  # ran after its step's CPU span ended: attributed by launch, not by overlap
    assert late > 0


def test_a100_train_unfused_inside_linear_and_bmm_and_occupancy() -> None:
    from autoprof.config import Config

    fs = findings("hta/a100_rank3_of8_train.json.gz")
    # 12 unfused adds take 228 µs of a 465 ms window (0.05%): below the default noise floor, not emitted
    assert "unfused_bias_add" not in fs
    p = shared_trace("hta/a100_rank3_of8_train.json.gz")
    found, _ = run_rules(chrome.load(p), Config(noise_floor=0.0))
    unf = {f.rule: f for f in found}["unfused_bias_add"]
    assert unf.evidence["separate_add_share"] < 0.01
    assert unf.evidence["unfused_count"] == 12
    assert unf.evidence["shape_checked_count"] == 12  # shapes recorded: add consumes the matmul's output
    assert unf.evidence["parents"] == ["aten::linear"]
    assert unf.evidence["fused_addmm_count"] > 0
    # 4938 occupancy queries before GEMMs, in a device-bound window: their host time costs nothing, no finding
    assert "occupancy_query_launch" not in fs and fs["bound_regime"].evidence["device_busy_share"] > 0.8


# The MANIFEST's table of the H200 windows: what a profiling expert reads in each.
H200_VERDICTS = {
    "seed64": "overhead-bound",
    "seed2048": "compute-bound",
    "addmm2048": "compute-bound",
    "bf16_8192": "compute-bound",
    "elementwise_big": "memory-bound",
    "compile_tiny": "overhead-bound",
    "loader_slow": "input-bound",
    "gpt2_train": "overhead-bound",
}


@pytest.mark.parametrize("window", sorted(H200_VERDICTS))
def test_h200_windows_read_as_an_expert_reads_them(window: str) -> None:
    fs = findings(f"h200/{window}.chrome.json.gz")
    f = fs["bound_regime"]
    assert f.verdict == H200_VERDICTS[window], f.message
    assert f.evidence["reading"] == "device"
    assert "final_device_sync" not in fs  # the profiler's own flush is no finding
    if window == "elementwise_big":  # ~89% of HBM bandwidth: bandwidth-bound by the roofline, said in the verdict
        assert f.evidence["roofline_bound"] == "memory" and f.evidence["roofline_shares"]["memory"] > 0.9
        assert "fuse" in f.advice
    if window == "gpt2_train":  # 6 occupancy queries before sorts and scans: nothing a user can act on
        assert "occupancy_query_launch" not in fs


def test_every_shared_trace_analyses_without_error() -> None:
    import glob

    from conftest import SHARED_TRACES

    files = sorted(glob.glob(str(SHARED_TRACES / "*" / "*.json.gz")))
    if not files:
        pytest.skip("../shared/traces is absent here")
    for f in files:
        fs, failures = run_rules(chrome.load(f))
        assert failures == [], f
        assert any(x.rule == "bound_regime" for x in fs), f


@pytest.mark.parametrize(
    "rel,kinds",
    [
        ("hta/a100_rank3_of8_train.json.gz", {"SendRecv", "AllReduce"}),
        ("hta/a100_rank0_of2_convnet.json.gz", {"AllReduce", "Broadcast"}),
        ("hta/a100_rank0_of16_compiled_cudagraphs.json.gz", {"SendRecv"}),
    ],
)
def test_per_rank_collective_figures_on_the_a100_rank_traces(rel: str, kinds: set[str]) -> None:
    c = findings(rel)["exposed_communication"]
    by_kind = c.evidence["collectives_us"]
    assert set(by_kind) == kinds and all(v > 0 for v in by_kind.values())
    # kernels of one kind can overlap (streams), so the kinds sum to at least the merged communication time
    assert sum(by_kind.values()) >= c.evidence["comm_us"] * 0.99
    assert c.evidence["rank"] == load(rel).rank


def test_pageable_copies_on_the_real_traces() -> None:
    # the 2021 ResNet-50 trace copies its batches from pageable memory: 12 copies, the host waiting in each launch
    f = findings("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz")["pageable_copies"]
    assert f.verdict == "pageable-host-memory" and f.severity == "info"
    assert f.evidence["pageable_copy_count"] == 12
    assert f.evidence["host_wait_us"] > 10_000 and f.evidence["window_share"] >= 0.01
    # a handful of small pageable copies in the H200 loader window: below the noise floor, no finding
    assert "pageable_copies" not in findings("h200/loader_slow.chrome.json.gz")
    # and none where no copy is pageable
    assert "pageable_copies" not in findings("hta/a100_rank0_of2_convnet.json.gz")
