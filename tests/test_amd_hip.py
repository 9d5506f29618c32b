"""AMD Instinct GPUs and the HIP runtime: the peaks of AMD's data sheets, HIP's launches, syncs and copies read as
CUDA's are (one runtime table, ``autoprof/rules/runtime.py``), RCCL's kernels as NCCL's. Synthetic traces built
here, then the real AMD windows of ../shared/traces/amd (MANIFEST.md there: the reading by hand of each)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synth import Synth

from autoprof.analysis import engine
from autoprof.measure import runtime
from autoprof.measure.peaks import GPU_PEAKS, gpu_peak, peak_for
from autoprof.measure.views import blocked_by_call, view
from autoprof.rules import regime, roofline
from autoprof.rules.sync import profiler_flush_ns

T = 1e12
MI300X = "AMD Instinct MI300X VF"
GEMM = "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>(int)"
BF16_MM = ([[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"])


# -- peaks ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "peak", "bf16_tflops", "fp32_tflops", "tb_per_s"),
    [
        ("AMD Instinct MI300X VF", "MI300X", 1307.4, 163.4, 5.3),  # the SR-IOV function a cloud VM sees
        ("AMD Instinct MI300X", "MI300X", 1307.4, 163.4, 5.3),
        ("MI300X", "MI300X", 1307.4, 163.4, 5.3),
        ("AMD Instinct MI325X", "MI325X", 1307.4, 163.4, 6.0),
        ("AMD Instinct MI355X", "MI355X", 2516.6, 157.3, 8.0),
        ("AMD Instinct MI210", "MI210", 181.0, 45.3, 1.6384),
        ("AMD Instinct MI250X", "MI250X (one GCD)", 191.5, 47.85, 1.6384),  # a module is two GCDs, two devices
        ("AMD Instinct MI250X/MI250", "MI250X (one GCD)", 191.5, 47.85, 1.6384),
    ],
)
def test_amd_instinct_peaks_from_the_data_sheets(device: str, peak: str, bf16_tflops: float, fp32_tflops: float, tb_per_s: float) -> None:
    p = gpu_peak(device)
    assert p is not None and p.name == peak
    assert p.flops_for("bf16") == pytest.approx(bf16_tflops * T) and p.flops_for("fp16") == p.flops_for("bf16")
    assert p.flops_for("fp32") == pytest.approx(fp32_tflops * T)
    assert p.bytes_per_s == pytest.approx(tb_per_s * T)
    assert p.source.startswith("AMD Instinct") and "data sheet" in p.source and "dense" in p.source
    assert peak_for([{"id": 0, "name": device}], {}, None) is p


def test_amd_dense_figures_hold_their_ratios() -> None:
    mi300x = gpu_peak("AMD Instinct MI300X")
    assert mi300x is not None
    # CDNA 3 per CU per clock: FP8 twice FP16, FP16 twice TF32's double, FP32 matrix an eighth of FP16: dense figures
    assert mi300x.flops["fp8"] == pytest.approx(2 * mi300x.flops["fp16"], rel=1e-3)
    assert mi300x.flops["tf32"] == pytest.approx(mi300x.flops["fp16"] / 2, rel=1e-3)
    assert mi300x.flops["fp32"] == pytest.approx(mi300x.flops["fp16"] / 8, rel=1e-3)
    assert mi300x.flops["int8"] == mi300x.flops["fp8"]
    assert 240 <= mi300x.flops["bf16"] / mi300x.bytes_per_s <= 250  # the bf16 ridge: ~247 FLOP/byte
    assert "tf32" not in gpu_peak("AMD Instinct MI355X").flops  # type: ignore[union-attr]  # CDNA 4 has none


def test_amd_rows_and_nvidia_rows_never_match_each_others_names() -> None:
    amd = {p.name for p in GPU_PEAKS if p.source.startswith("AMD")}
    assert amd == {"MI210", "MI250X (one GCD)", "MI300X", "MI325X", "MI355X"}
    for name in ("NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB"):
        p = gpu_peak(name)
        assert p is not None and p.name not in amd
    assert gpu_peak("AMD Instinct MI100") is None and gpu_peak("AMD Radeon RX 7900 XTX") is None  # no figures: no guess


# -- the runtime table ----------------------------------------------------------------------------------------------


def test_every_cuda_wait_has_its_hip_twin_in_the_one_table() -> None:
    table = runtime.RUNTIME_CALLS
    for name, call in table.items():
        if call.api != runtime.CUDA:
            continue
        twin = "hip" + name[len("cuda") :]
        if name == "cudaFreeHost":
            twin = "hipHostFree"  # HIP's name (hipFreeHost is its deprecated alias)
        if twin in table:
            assert table[twin].kind == call.kind and table[twin].blocking == call.blocking, (name, twin)
        else:
            assert not call.blocking, f"{name} waits, its HIP twin {twin} is not in the table"
    hip_waits = {"hipMemcpyWithStream", "hipDeviceSynchronize", "hipStreamSynchronize", "hipMemcpy", "hipEventSynchronize"}
    assert hip_waits | {"hipStreamWaitEvent", "hipFree", "hipHostFree"} <= runtime.BLOCKING_CALLS
    # an asynchronous copy waits exactly as cudaMemcpyAsync does (pageable staging): the same kind, the same reading
    assert table["hipMemcpyAsync"] == table["cudaMemcpyAsync"]._replace(api=runtime.HIP)
    assert {"hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch"} <= (
        runtime.LAUNCH_CALLS
    )
    assert not runtime.LAUNCH_CALLS & runtime.BLOCKING_CALLS
    assert {"hipDeviceSynchronize", "cudaDeviceSynchronize"} <= runtime.DEVICE_SYNC_CALLS
    assert runtime.is_occupancy_query("hipOccupancyMaxActiveBlocksPerMultiprocessor")
    assert runtime.is_occupancy_query("cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")


def test_no_rule_keeps_its_own_list_of_runtime_names() -> None:
    rules = Path(runtime.__file__).parent
    literal = re.compile(r"""["'](?:cuda|hip|cu)[A-Z]\w*["']|["']nccl["']""")
    own = {p.name: literal.findall(p.read_text()) for p in sorted(rules.glob("*.py")) if p.name not in ("runtime.py", "__init__.py")}
    assert {k: v for k, v in own.items() if v} == {}


# -- HIP calls in a window (synthetic) ----------------------------------------------------------------------------


def _item_step(s: Synth, base: float, copy_call: str, copy_us: float) -> None:
    """One step (600 ms): a 100 ms bf16 GEMM, then ``.item()``: the copy call waits ``copy_us`` for the device."""
    s.step(0, base, 600_000).op("aten::mm", base + 10, 30, *BF16_MM)
    s.launch(GEMM, base + 20, base + 50, 100_000, call="hipLaunchKernel")
    s.op("aten::_local_scalar_dense", base + 1_000, copy_us + 100)
    s.launch("Memcpy DtoH (Device -> Pageable)", base + 1_010, base + 100_060, 5, cat="gpu_memcpy", call=copy_call)
    s.events[-2]["dur"] = copy_us  # the copy call blocks until the device is done


def test_a_long_hip_memcpy_with_stream_is_sync_bound_not_host_work() -> None:
    # the window: 493 ms in torch's blocking copy on ROCm read as host work gave overhead-bound
    s = Synth(gpu=MI300X)
    _item_step(s, 0, "hipMemcpyWithStream", 493_000)
    fs = s.findings()
    r = fs["bound_regime"]
    assert r.verdict == regime.SYNC_BOUND, r.message
    assert "hipMemcpyWithStream" in r.message and r.evidence["blocked_by_call_us"] == {"hipMemcpyWithStream": 493_000.0}
    assert r.evidence["blocked_share"] >= 0.8 and r.evidence["host_active_share"] < r.evidence["device_busy_share"]
    b = fs["blocking_calls"]
    assert b.verdict == "host-blocked" and b.subjects == ("hipMemcpyWithStream",)
    assert b.evidence["copy_kinds_ms"] == {"Memcpy DtoH (Device -> Pageable)": 493.0}
    assert ".item()" in b.advice and "ROCm" in b.advice


def test_hip_memcpy_async_waits_as_cuda_memcpy_async_does() -> None:
    readings = {}
    for call in ("cudaMemcpyAsync", "hipMemcpyAsync"):
        s = Synth(gpu=MI300X)
        _item_step(s, 0, call, 493_000)
        fs = s.findings()
        readings[call] = (fs["bound_regime"].verdict, fs["bound_regime"].evidence["blocked_share"], fs["blocking_calls"].advice)
    assert readings["hipMemcpyAsync"] == readings["cudaMemcpyAsync"] and readings["hipMemcpyAsync"][0] == regime.SYNC_BOUND


def test_hip_device_synchronize_in_the_step_is_blocked_time_and_after_the_steps_the_profilers_flush() -> None:
    s = Synth(gpu=MI300X)
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::mm", base + 10, 20, *BF16_MM).launch(GEMM, base + 15, base + 30, 100, call="hipLaunchKernel")
        s.runtime("hipDeviceSynchronize", base + 40, 700)  # torch.cuda.synchronize() in the step
    s.runtime("hipDeviceSynchronize", 3010, 2000)  # after the last launch: the profiler's flush
    fs = s.findings()
    r = fs["bound_regime"]
    assert r.verdict == regime.SYNC_BOUND and r.evidence["blocked_by_call_us"] == {"hipDeviceSynchronize": 2100.0}
    assert fs["blocking_calls"].subjects == ("hipDeviceSynchronize",)
    trace = s.trace()
    assert profiler_flush_ns(trace) == 2_000_000
    assert engine.window_summary(trace, list(fs.values()))["profiler_flush_ms"] == 2.0


def test_a_windows_last_hip_device_synchronize_is_the_profilers_flush_without_steps_too() -> None:
    # no ProfilerStep (a plain `with profile():` block): the whole trace is the window, and its last device sync,
    # with nothing launched after it, is the profiler's wait for the queued work, not the program's
    s = Synth(gpu="AMD Instinct MI210")
    for j in range(20):
        s.launch(ELEMENTWISE, j * 10, j * 10 + 5, 50, call="hipLaunchKernel")
    s.runtime("hipDeviceSynchronize", 200, 900)
    trace = s.trace()
    assert profiler_flush_ns(trace) == 900_000 and blocked_by_call(trace) == {}
    assert view(trace).end_ns == 200_000  # the window ends where the flush begins
    fs = s.findings()
    assert "blocking_calls" not in fs and fs["bound_regime"].evidence["blocked_us"] == 0.0


def test_hip_launches_link_their_kernels_and_an_occupancy_query_before_a_gemm_counts() -> None:
    s = Synth(gpu=MI300X)
    calls = ("hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel")
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        for j in range(30):
            t = base + 10 + j * 32
            s.op("aten::mm", t, 30, [[16, 16], [16, 16]], ["c10::BFloat16", "c10::BFloat16"])
            s.runtime("hipOccupancyMaxActiveBlocksPerMultiprocessor", t + 2, 1)
            s.launch(GEMM, t + 5, t + 12, 2, call=calls[j % 3])
    trace = s.trace()
    assert {trace.host_name(h) for h in trace.d_launch_host} == set(calls) <= runtime.LAUNCH_CALLS
    fs = s.findings()
    assert fs["bound_regime"].verdict == regime.OVERHEAD_BOUND
    o = fs["occupancy_query_launch"]
    assert o.verdict == "heavyweight-launches" and o.evidence["queried_launch_count"] == 90 and o.evidence["gemm_conv_count"] == 90
    assert o.subjects == (GEMM,)


@pytest.mark.parametrize(
    ("kernel", "kind"),
    [
        ("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", "Generic"),  # RCCL >= 2.19
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllReduce"),
        ("void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "AllGather"),  # RCCL < 2.19, NCCL < 2.19
    ],
)
def test_rccl_kernels_are_communication(kernel: str, kind: str) -> None:
    assert runtime.is_collective_kernel(kernel) and runtime.collective_kind(kernel) == kind
    s = Synth(gpu=MI300X)
    for k, dur in enumerate((400, 200, 600)):  # a collective's time varies with its peers'
        base = k * 1000
        s.step(k, base, 1000).op("aten::mm", base + 10, 20, *BF16_MM).launch(GEMM, base + 15, base + 30, 300, call="hipLaunchKernel")
        s.launch(kernel, base + 350, base + 350, dur, stream=9, call="hipExtLaunchKernel")
    fs = s.findings()
    c = fs["exposed_communication"]
    assert c.verdict == "exposed-communication" and c.evidence["collectives_us"] == {kind: 1200.0}
    assert "kernel_time_variation" not in fs  # a collective's time is set by its slowest peer: never compared


# -- the real AMD windows ---------------------------------------------------------------------------------------

from test_rules_gpu import findings, load  # noqa: E402  # the real traces, loaded once per session as there

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

# file, its device's peak, the MANIFEST's reading by hand (the verdicts it allows)
AMD_WINDOWS = [
    ("amd/mi300x_qwen05b_inference.json.gz", "MI300X", {"memory-bound", "mixed"}),
    ("amd/mi300x_bert_small_inference.json.gz", "MI300X", {"overhead-bound"}),
    ("amd/mi210_gpu_only.json.gz", "MI210", {"memory-bound", "mixed"}),
    ("amd/mi300x_normalization_launch.json.gz", "MI300X", {"overhead-bound"}),
]


@pytest.mark.parametrize(("rel", "peak", "verdicts"), AMD_WINDOWS)
def test_each_amd_window_has_its_devices_peaks_and_the_manifests_verdict(rel: str, peak: str, verdicts: set[str]) -> None:
    roof = roofline.analyze(load(rel), None)
    assert roof is not None and roof.peak.name == peak
    r = findings(rel)["bound_regime"]
    assert r.verdict in verdicts, r.message
    assert "no peak known" not in r.message


def test_qwen_on_mi300x_is_device_bound_and_costed_its_gemms_as_tracelens_reads_them() -> None:
    rel = "amd/mi300x_qwen05b_inference.json.gz"
    r = findings(rel)["bound_regime"]
    ev = r.evidence
    # 13 ms of kernels launched before the window (their correlation ids precede the step's first call; the step's
    # torch.cuda.synchronize() waits for them) are not its work: the window on the device is the rest (issue 33)
    assert 12_500 <= ev["device_outside_us"] <= 13_500 and 33_000 <= ev["device_window_us"] <= 34_500
    assert ev["device_busy_share"] >= regime.DEVICE_BUSY_COMPUTE and ev["device_busy_share"] > ev["host_active_share"]
    assert r.verdict in ("memory-bound", "mixed") and ev["reading"] == "device"
    assert ev["roofline_shares"] is not None and ev["roofline_bound"] in ("memory", "mixed")
    assert ev["roofline_shares"]["memory"] > ev["roofline_shares"]["compute"]  # bandwidth-heavy: elementwise and copies
    # torch.cuda.synchronize() inside the step (13 ms) is waiting, not host work; the last one is the profiler's
    assert 12_500 <= ev["blocked_by_call_us"]["hipDeviceSynchronize"] <= 13_500
    assert "hipMemcpyWithStream" in ev["blocked_by_call_us"]
    assert 3.5e6 <= profiler_flush_ns(load(rel)) <= 4.5e6
    # the bf16 GEMMs (aten::linear) at 457-521 TFLOP/s, TraceLens's own reading of this trace: 35-40 % of 1307.4 T
    roof = findings(rel)["roofline"].evidence
    gemms = [op for op in roof["ops"] if op["name"] == "aten::linear" and op["bound"] == "compute"]
    assert gemms and all(400e12 <= op["achieved_flops_per_s"] <= 550e12 for op in gemms[:3])
    assert roof["peak_source"] == "AMD Instinct MI300X data sheet, dense (matrix cores)"


def test_bert_on_mi300x_stays_overhead_bound_with_its_copy_apart() -> None:
    ev = findings("amd/mi300x_bert_small_inference.json.gz")["bound_regime"].evidence
    # host activity is its ops and runtime calls (49 %), not the Python frames around them (96 %, issue 33)
    assert ev["device_busy_share"] < 0.2 and 0.4 < ev["host_active_share"] < 0.6
    assert findings("amd/mi300x_bert_small_inference.json.gz")["bound_regime"].verdict == "overhead-bound"
    assert set(ev["blocked_by_call_us"]) == {"hipDeviceSynchronize", "hipMemcpyWithStream"}


def test_mi210_device_only_window_its_flush_is_not_a_blocking_call() -> None:
    rel = "amd/mi210_gpu_only.json.gz"
    fs = findings(rel)
    assert "blocking_calls" not in fs  # its one hipDeviceSynchronize is the profiler's flush (1.3 ms of 6 ms)
    assert 1.2e6 <= profiler_flush_ns(load(rel)) <= 1.4e6
    ev = fs["bound_regime"].evidence
    assert ev["blocked_us"] == 0.0 and ev["device_busy_share"] >= 0.85 and ev["host_active_share"] < 0.3


def test_mi210_device_only_window_is_read_by_its_kernels_names_as_the_manifest_reads_it() -> None:
    # device events only, no op to cost: batch norms, elementwise ops and transposes ~68% of the kernel time,
    # MIOpen's implicit-GEMM convolutions and Tensile GEMMs ~32% (issue 33, item 2)
    fs = findings("amd/mi210_gpu_only.json.gz")
    r, f = fs["bound_regime"], fs["roofline"]
    ev = r.evidence
    assert r.verdict == "memory-bound" and ev["roofline_bound"] == "memory", r.message
    assert ev["classified_by_name_share"] == 1.0 and ev["uncosted_share"] == 0.0
    assert 0.6 <= ev["by_name_memory_share"] <= 0.75 and 0.25 <= ev["by_name_compute_share"] <= 0.4
    assert {"norm", "elementwise", "transpose", "gemm"} <= set(ev["by_name_families"])
    # the roofline's finding is the same split, not a second reading
    assert f.verdict == "memory-bound" and f.evidence["ops"] == []
    assert (f.evidence["memory_bound_share"], f.evidence["compute_bound_share"]) == (ev["memory_bound_share"], ev["compute_bound_share"])


def test_qwen_kernels_queued_before_the_window_are_not_read_at_all() -> None:
    # 31% of the kernel time has no launch in the window (queued before it began): those kernels are out of the
    # window (issue 33, item 8), so nothing is left for the name table; the window's own kernels are costed by shapes
    ev = findings("amd/mi300x_qwen05b_inference.json.gz")["bound_regime"].evidence
    assert ev["classified_by_name_share"] < 0.01 and ev["uncosted_share"] < 0.02, ev
    assert ev["device_outside_us"] > 10_000  # the 13 ms queued before the window
