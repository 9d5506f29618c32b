"""Every rule on small synthetic traces built here (no torch work, no ../shared): one case where it fires with the
right verdict and evidence, one where it stays silent."""

from __future__ import annotations

from typing import Any

import pytest
from synth import Synth

from autoprof.analysis import engine, ranks
from autoprof.analysis.ranks import RankSummary
from autoprof.config import Config
from autoprof.measure.steps import device_step_ns, step_times_ns
from autoprof.rules import run_rules
from autoprof.rules.sync import profiler_flush_ns

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, Functor)"
MM_DIMS, MM_TYPES = [[4096, 4096], [4096, 4096]], ["float", "float"]


def busy_gpu(times: tuple[float, ...] = (900, 900, 900), query: bool = True) -> Synth:
    """Three 1 ms steps, each an aten::mm whose GEMM keeps the device busy ``times[k]`` µs."""
    s = Synth()
    for k, t in enumerate(times):
        base = k * 1000
        s.step(k, base, 1000).op("aten::mm", base + 10, 40, MM_DIMS, MM_TYPES)
        if query:
            s.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", base + 12, 1)
        s.launch(GEMM, base + 20, base + 50, t)
    return s


def host_bound_gpu() -> Synth:
    """Three 1 ms steps of 45 small ops, each launching a 2 µs kernel: the device waits for the host."""
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        for j in range(45):
            t = base + 10 + j * 21
            s.op("aten::add", t, 20, [[64], [64], []], ["float", "float", "Scalar"])
            s.launch(ELEMENTWISE, t + 5, t + 12, 2)
    return s


# -- bound_regime (device windows) and roofline ------------------------------------------------------------------


def test_busy_device_is_compute_bound_and_flop_bound_by_the_roofline() -> None:
    fs = busy_gpu().findings()
    r = fs["bound_regime"]
    assert r.verdict == "compute-bound" and r.evidence["device_busy_share"] >= 0.85
    assert r.evidence["work_share"] == r.evidence["device_busy_share"] and r.evidence["roofline_bound"] == "compute"
    assert fs["roofline"].verdict == "compute-bound"
    op = fs["roofline"].evidence["ops"][0]
    assert op["name"] == "aten::mm" and op["bound"] == "compute" and 0 < op["roofline_fraction_ratio"] <= 1


def test_small_launches_are_overhead_bound_memory_side_and_leave_the_device_idle() -> None:
    fs = host_bound_gpu().findings()
    assert fs["bound_regime"].verdict == "overhead-bound"
    assert fs["bound_regime"].evidence["host_active_share"] > fs["bound_regime"].evidence["device_busy_share"]
    gaps = fs["device_idle_gaps"]
    assert gaps.verdict == "device-idle" and gaps.evidence["device_idle_share"] > 0.8
    assert gaps.evidence["host_wait_us"] > gaps.evidence["other_wait_us"]  # waiting for the host to launch
    assert "waiting for the host" in gaps.message
    assert fs["roofline"].verdict == "memory-bound"


def test_a_busy_device_has_no_idle_gaps_finding() -> None:
    assert "device_idle_gaps" not in busy_gpu().findings()


def test_blocking_copies_are_sync_bound_and_the_final_sync_is_the_profilers_flush() -> None:
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::mm", base + 10, 20, MM_DIMS, MM_TYPES).launch(GEMM, base + 15, base + 30, 100)
        s.op("aten::_local_scalar_dense", base + 200, 700)
        s.launch("Memcpy DtoH (Device -> Pageable)", base + 210, base + 880, 5, cat="gpu_memcpy", call="cudaMemcpyAsync")
        s.events[-2]["dur"] = 690  # the copy call blocks until the device is done
    s.runtime("cudaDeviceSynchronize", 3010, 2000)  # after the last launch: the profiler's flush
    fs = s.findings()
    r = fs["bound_regime"]
    assert r.verdict == "sync-bound" and r.evidence["blocked_share"] >= 0.3
    assert "cudaMemcpyAsync" in r.message
    b = fs["blocking_calls"]
    assert b.verdict == "host-blocked" and b.evidence["copy_kinds_ms"]
    # a 5 µs copy gains nothing from pinned memory: the wait is for the queued work, as a synchronization's is
    assert b.evidence["copy_device_us_per_copy"] == 5.0 and "pinned" not in b.advice and ".item()" in b.advice
    # the profiler's own flush is no finding (issue 21): the window record states it once
    assert "final_device_sync" not in fs and not any("flush" in f.message for f in fs.values())
    trace = s.trace()
    assert engine.window_summary(trace, list(fs.values()))["profiler_flush_ms"] == 2.0
    assert profiler_flush_ns(trace) == 2_000_000


def _waiting_copies(copy_us: float, gemm_us: float) -> Synth:
    """Three 1 ms steps: a GEMM of ``gemm_us``, then a device→host copy of ``copy_us`` whose call blocks from 200 µs
    to 900 µs into the step."""
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::mm", base + 10, 20, MM_DIMS, MM_TYPES).launch(GEMM, base + 15, base + 30, gemm_us)
        s.launch("Memcpy DtoH (Device -> Pageable)", base + 200, base + 890 - copy_us, copy_us, cat="gpu_memcpy", call="cudaMemcpyAsync")
        s.events[-2]["dur"] = 700
    return s


def test_a_wait_while_the_device_stays_busy_costs_nothing() -> None:
    # the host waits 70% of each step in cudaMemcpyAsync, but the GEMM keeps the device busy through the wait: the
    # host waited for work that ran anyway (issue 33: a100_rank3_of8_train's 77 ms, 1 ms of it with the device idle)
    fs = _waiting_copies(5, 860).findings()
    assert "blocking_calls" not in fs
    idle = _waiting_copies(5, 100).findings()["blocking_calls"]  # the same wait, the device idle but for the copy
    assert idle.evidence["blocked_ms"] == 2.1 and idle.evidence["idle_wait_ms"] == 2.085 and idle.evidence["busy_wait_ms"] == 0.015
    assert "while the device is idle" in idle.message and "72%" in idle.message


def test_pinned_memory_advice_only_for_copies_long_enough_to_gain_from_it() -> None:
    small = _waiting_copies(3, 100).findings()["blocking_calls"]
    assert "pinned" not in small.advice and "queued" in small.advice and "3 µs" in small.advice
    large = _waiting_copies(400, 100).findings()["blocking_calls"]
    assert large.evidence["copy_device_us_per_copy"] == 400.0 and "pinned memory" in large.advice


def test_a_sync_inside_the_steps_is_the_models_not_the_profilers_flush() -> None:
    s = busy_gpu()
    s.runtime("cudaDeviceSynchronize", 2990, 5)  # inside the last step: the model's own sync
    assert profiler_flush_ns(s.trace()) == 0


def test_no_blocking_no_sync_findings() -> None:
    fs = busy_gpu().findings()
    assert "blocking_calls" not in fs and profiler_flush_ns(busy_gpu().trace()) == 0


def test_data_loading_on_a_gpu_step_is_input_bound() -> None:
    s = busy_gpu(times=(300, 300, 300))
    for k in range(3):
        s.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", k * 1000 + 400, 500)
    r = s.findings()["bound_regime"]
    assert r.verdict == "input-bound" and r.evidence["input_share"] >= 0.25


def test_nothing_leading_on_a_gpu_is_mixed() -> None:
    s = busy_gpu(times=(400, 400, 400), query=False)
    r = s.findings()["bound_regime"]
    assert r.verdict == "mixed", r


# -- occupancy_query_launch, kernel_time_variation -----------------------------------------------------------------


def host_bound_gemms(query: bool = True, kernel: str = GEMM) -> Synth:
    """Three 1 ms steps of 30 small matmuls, each launching a 2 µs kernel after an occupancy query: the device
    waits for the host."""
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000)
        for j in range(30):
            t = base + 10 + j * 32
            s.op("aten::mm", t, 30, [[16, 16], [16, 16]], MM_TYPES)
            if query:
                s.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", t + 2, 1)
            s.launch(kernel, t + 5, t + 12, 2)
    return s


def test_occupancy_query_before_a_gemm_launch_in_an_overhead_bound_window() -> None:
    fs = host_bound_gemms().findings()
    assert fs["bound_regime"].verdict == "overhead-bound"
    o = fs["occupancy_query_launch"]
    assert o.verdict == "heavyweight-launches" and o.evidence["queried_launch_count"] == 90
    assert o.evidence["gemm_conv_count"] == 90 and o.message.startswith("90 GEMM/conv launches")
    assert o.evidence["gemm_conv_share"] == 1.0 and o.subjects == ("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4",)
    assert "occupancy_query_launch" not in host_bound_gemms(query=False).findings()


def test_occupancy_queries_say_nothing_where_no_one_can_act_on_them() -> None:
    # a device-bound window: the queries' host time costs nothing
    assert busy_gpu().findings()["bound_regime"].verdict == "compute-bound"
    assert "occupancy_query_launch" not in busy_gpu().findings()
    # queries before kernels that are no library GEMM/conv (a sort's radix pass): nothing to do about them
    sort = "void at_cuda_detail::cub::DeviceRadixSortHistogramKernel<int>(int*)"
    assert "occupancy_query_launch" not in host_bound_gemms(kernel=sort).findings()


def test_the_same_kernel_at_different_speeds_across_steps() -> None:
    v = busy_gpu(times=(900, 500, 900)).findings()["kernel_time_variation"]
    assert v.verdict == "unstable-kernel-time" and v.evidence["max_cv_ratio"] >= 0.15
    assert "kernel_time_variation" not in busy_gpu().findings()


# -- exposed_communication: both NCCL kernel namings, overlap, the noise floor ------------------------------------


@pytest.mark.parametrize(
    "kernel",
    [
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)",
        "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096>)",
    ],
)
def test_exposed_collective_under_every_nccl_naming(kernel: str) -> None:
    s = busy_gpu(times=(300, 300, 300), query=False)
    for k in range(3):
        s.launch(kernel, k * 1000 + 400, k * 1000 + 400, 400, stream=9)
    c = s.findings()["exposed_communication"]
    assert c.verdict == "exposed-communication" and c.severity == "warning"
    assert c.evidence["exposed_comm_share"] == 1.0 and c.evidence["exposed_window_share"] >= 0.2


def test_collective_overlapped_by_compute_is_information() -> None:
    s = busy_gpu(query=False)
    for k in range(3):
        s.launch("ncclDevKernel_Generic(x)", k * 1000 + 30, k * 1000 + 100, 200, stream=9)
    c = s.findings()["exposed_communication"]
    assert c.verdict == "communication" and c.severity == "info" and c.evidence["exposed_comm_share"] == 0.0


def test_a_collective_that_is_nothing_stays_below_the_noise_floor() -> None:
    s = busy_gpu(query=False)
    s.launch("ncclDevKernel_Generic(x)", 2500, 2990, 5, stream=9)  # 5 µs in a 3 ms window
    assert "exposed_communication" not in s.findings()
    assert "exposed_communication" in s.findings(Config(noise_floor=0.0))
    assert "<1%" in s.findings(Config(noise_floor=0.0))["exposed_communication"].message  # never "0%" of a real figure


# -- compile rules ------------------------------------------------------------------------------------------------


def test_recompiled_frame_and_compilation_inside_the_window() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).x("cpu_op", "TorchDynamo Cache Lookup", base + 5, 3)
        s.x("cpu_op", f"Torch-Compiled Region: 0/{min(k, 1)}", base + 10, 300)
        s.op("aten::mm", base + 20, 250, [[512, 512], [512, 512]], ["float", "float"])
    s.x("cpu_op", "inductor_compile", 1500, 400)  # a recompile's work inside the window
    fs = s.findings()
    rc = fs["recompilation"]
    assert rc.verdict == "recompiled" and rc.evidence["max_compile_id"] == 1
    cw = fs["compilation_in_window"]
    assert cw.verdict == "compiling" and cw.evidence["compile_time_us"] == 400.0
    assert "compile_overhead" not in fs  # 250 µs of matmul is worth its wrapper


def test_compiled_regions_without_ids_as_before_torch_2_5() -> None:
    # torch 2.4 names the region "Torch-Compiled Region" (no frame/compile id) and has no CompiledFxGraph annotation
    s = Synth(gpu=None)
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).x("cpu_op", "TorchDynamo Cache Lookup", base + 5, 20)
        s.x("cpu_op", "Torch-Compiled Region", base + 30, 100)
        s.op("aten::addmm", base + 90, 10, [[32, 32], [32, 32]], ["float", "float"])
    fs = s.findings()
    over = fs["compile_overhead"]
    assert over.evidence["compiled_calls_count"] == 3 and over.evidence["regions"] == ["?"]
    assert over.evidence["wrapper_per_call_us"] == 110.0  # lookup 20 + region 100 - the op's 10
    assert "recompilation" not in fs  # no ids: nothing to say about versions


def _compiled_mlp(peaks: bool) -> Synth:
    """Three steps of a compiled region whose graph calls three extern addmm of a small MLP (8 rows, 64 wide), each
    slowed to 60 µs by its call cost and threads contending: 180 µs of op time against a 75 µs wrapper."""
    s = Synth(gpu=None)
    if peaks:
        s.meta.update(autoprof_cpu_peak_flops=100e9, autoprof_cpu_peak_bytes_per_s=20e9)
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).x("cpu_op", "TorchDynamo Cache Lookup", base + 5, 20)
        s.x("cpu_op", "Torch-Compiled Region: 0/0", base + 30, 250)
        s.x("cpu_op", "AOTDispatcher Runtime Wrapper Prologue", base + 35, 10)
        s.x("user_annotation", "## Call CompiledFxGraph abc ##", base + 60, 195)
        for j, (k_in, n) in enumerate(((32, 64), (64, 64), (64, 10))):
            s.op("aten::addmm", base + 65 + j * 62, 60, [[n], [8, k_in], [k_in, n], [], []], ["float"] * 3 + ["Scalar"] * 2)
    return s


def test_a_compiled_graph_of_small_extern_ops_is_compile_overhead() -> None:
    # issue 33: the addmm calls' own time (180 µs) is no compute the wrapper buys back: at the calibrated peak their
    # work takes a fraction of a call's fixed cost, and eager mode would make the same calls
    over = _compiled_mlp(peaks=True).findings()["compile_overhead"]
    ev = over.evidence
    assert ev["compute_reading"] == "roofline" and ev["compute_per_call_us"] == 0.0 and ev["op_time_per_call_us"] == 180.0
    assert ev["wrapper_per_call_us"] == 75.0  # lookup 20 + region 250 - graph 195
    assert "less than a call's fixed cost" in over.message
    # without a calibrated peak, each op's time beyond the call floor: 3 × 55 µs, more than the wrapper
    assert "compile_overhead" not in _compiled_mlp(peaks=False).findings()


def test_compile_keeps_the_regimes_call_floor_and_work_credit() -> None:
    from autoprof.rules import compile as compile_rule
    from autoprof.rules import regime

    assert (compile_rule.CALL_FLOOR_NS, compile_rule.WORK_CREDIT) == (regime.CALL_FLOOR_NS, regime.WORK_CREDIT)


def test_no_compiled_region_no_compile_findings() -> None:
    fs = busy_gpu().findings()
    assert not {"recompilation", "compilation_in_window", "compile_overhead"} & set(fs)


# -- cold_first_step and batched_matmul offline -------------------------------------------------------------------


def test_a_slow_first_recorded_step_offline() -> None:
    s = Synth(gpu=None)
    for k, dur in enumerate((5000, 1000, 1000, 1000)):
        base = sum((5000, 1000, 1000, 1000)[:k])
        s.step(k, base, dur).op("aten::mm", base + 10, dur - 20, [[64, 64], [64, 64]], ["float", "float"])
    c = s.findings()["cold_first_step"]
    assert c.verdict == "cold-start" and c.evidence["first_step_ms"] == 5.0
    assert "CUDA" not in c.advice and "lazy initialisation" in c.advice  # a CPU window: no GPU advice
    steady = Synth(gpu=None)
    for k in range(4):
        steady.step(k, k * 1000, 1000).op("aten::mm", k * 1000 + 10, 980)
    assert "cold_first_step" not in steady.findings()


def test_matmul_on_3d_inputs_runs_as_bmm() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::matmul", base + 10, 900, [[8, 64, 64], [8, 64, 64]], ["float", "float"])
        s.op("aten::bmm", base + 20, 870, [[8, 64, 64], [8, 64, 64]], ["float", "float"])
    b = s.findings()["batched_matmul"]
    assert b.verdict == "batched" and b.evidence["bmm_count"] == 3
    two_d = Synth(gpu=None)
    two_d.step(0, 0, 1000).op("aten::matmul", 10, 900).op("aten::mm", 20, 870)
    assert "batched_matmul" not in two_d.findings()


# -- unfused_bias_add: only what the user's code called ----------------------------------------------------------


def _mm_add(s: Synth, base: float, parent: str | None) -> None:
    if parent:
        s.op(parent, base + 5, 500)
    s.op("aten::matmul", base + 10, 300, [[8, 64], [64, 64]], ["float", "float"])
    s.op("aten::mm", base + 12, 290, [[8, 64], [64, 64]], ["float", "float"])
    s.op("aten::add", base + 320, 100, [[8, 64], [64], []], ["float", "float", "Scalar"])


def test_an_unfused_bias_add_in_the_users_code_fires() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        s.step(k, k * 1000, 1000)
        _mm_add(s, k * 1000, None)
    u = s.findings()["unfused_bias_add"]
    assert u.verdict == "unfused" and u.evidence["unfused_count"] == 3 and u.evidence["shape_checked_count"] == 3


def _bias_steps(add_us: float, step_us: float = 170) -> Synth:
    """Three CPU steps of ``step_us``: ``x @ w + b`` on [8, 64] x [64, 64], the add taking ``add_us``."""
    s = Synth(gpu=None)
    for k in range(3):
        base = k * step_us
        s.step(k, base, step_us).op("aten::mm", base + 10, 50, [[8, 64], [64, 64]], ["float", "float"])
        s.op("aten::add", base + 70, add_us, [[8, 64], [64], []], ["float", "float", "Scalar"])
    return s


def test_an_unfused_bias_add_states_what_fusing_saves_not_what_the_adds_take() -> None:
    # issue 33: the adds take 7% of a CPU step, but addmm copies the bias into its output (an op call of its own,
    # expand + copy_): fusing saves the add's time beyond a call's fixed cost, less the copy's share of its bytes
    u = _bias_steps(12).findings()["unfused_bias_add"]
    ev = u.evidence
    assert ev["separate_add_share"] == pytest.approx(12 / 170, abs=1e-3)
    seed = (64 + 512) / (512 + 64 + 512)  # the copy reads the bias and writes the output; the add reads both
    assert ev["fusion_saves_us"] == pytest.approx(3 * 7 * (1 - seed), abs=1e-3) and ev["fusion_saves_share"] < 0.02
    assert ev["saving_side"] == "host" and "saves about 2% of the steps' time" in u.message and "is 7%" in u.message
    # a 6 µs add (4% of the step) saves 0.5 µs a step: below the noise floor, no finding
    assert "unfused_bias_add" not in _bias_steps(6).findings()


def test_an_unfused_bias_add_on_a_busy_device_saves_the_add_kernels_time_less_the_seeding_copy() -> None:
    s = Synth()
    for k in range(3):  # the seed at 2048 on a GPU: a 340 µs GEMM, a 12 µs add kernel; the host returns at once
        base = k * 400
        s.step(k, base, 60).op("aten::mm", base + 5, 20, [[2048, 2048], [2048, 2048]], MM_TYPES)
        s.launch(GEMM, base + 10, base + 20, 340)
        s.op("aten::add", base + 30, 15, [[2048, 2048], [2048], []], ["float", "float", "Scalar"])
        s.launch(ELEMENTWISE, base + 35, base + 362, 12)
    ev = s.findings()["unfused_bias_add"].evidence
    assert ev["saving_side"] == "device" and ev["fusion_saves_most_us"] == 36.0  # all of it with a bias epilogue
    assert ev["fusion_saves_us"] == pytest.approx(36 * (1 - (2048 + 2048**2) / (2 * 2048**2 + 2048)), abs=1e-3)
    assert ev["fusion_saves_most_share"] < 0.04 < ev["separate_add_share"]  # the adds' host time says nothing here


def _compiled_addmm(seed: str | None) -> Synth:
    """A compiled region whose graph runs one addmm a step: on a CPU with an aten::copy_ of the bias inside it
    (``seed="copy"``), on a GPU with a Memcpy DtoD before its GEMM (``"dtod"``) or only a GEMM (``"epilogue"``)."""
    s = Synth(gpu=None if seed in (None, "copy") else "NVIDIA H200")
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).x("cpu_op", "Torch-Compiled Region: 0/0", base + 5, 900)
        s.x("user_annotation", "## Call CompiledFxGraph abc ##", base + 10, 880)
        s.op("aten::addmm", base + 20, 850, [[512], [512, 512], [512, 512], [], []], ["float"] * 3 + ["Scalar"] * 2)
        if seed == "copy":
            s.op("aten::copy_", base + 30, 20, [[512, 512], [512, 512], []], ["float", "float", "Scalar"])
        elif seed == "dtod":
            s.launch("Memcpy DtoD (Device -> Device)", base + 30, base + 40, 5, cat="gpu_memcpy", call="cudaMemcpyAsync")
        if seed in ("dtod", "epilogue"):
            s.launch(GEMM, base + 60, base + 70, 600)
    return s


def test_compiled_addmm_is_said_only_where_the_trace_shows_the_seeding_copy() -> None:
    cpu = _compiled_addmm("copy").findings()["compiled_addmm"]
    assert cpu.evidence["copy_seeded_count"] == 3 and "aten::copy_" in cpu.message and cpu.severity == "info"
    gpu = _compiled_addmm("dtod").findings()["compiled_addmm"]
    assert gpu.evidence["dtod_seeded_count"] == 3 and "Memcpy DtoD" in gpu.message
    # no copy in the trace: the GEMM takes the bias in its epilogue (cuBLASLt), or the CPU's addmm showed none
    assert "compiled_addmm" not in _compiled_addmm("epilogue").findings()
    assert "compiled_addmm" not in _compiled_addmm(None).findings()


def test_the_mask_add_inside_sdpa_math_is_not_the_users() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        s.step(k, k * 1000, 1000)
        _mm_add(s, k * 1000, "aten::_scaled_dot_product_attention_math")
    assert "unfused_bias_add" not in s.findings()


# -- cross-rank verdicts ------------------------------------------------------------------------------------------


def test_straggler_named_and_balanced_ranks_said_so() -> None:
    fs = {f.rule: f for f in ranks.check([RankSummary(0, 50.0, "mixed"), RankSummary(1, 80.0, "mixed"), RankSummary(2, 51.0, "mixed")])}
    assert fs["straggler_ranks"].verdict == "stragglers" and fs["straggler_ranks"].evidence["straggler_ranks"] == [1]
    assert "rank_regime_mismatch" not in fs
    (bal,) = ranks.check([RankSummary(0, 50.0, "mixed"), RankSummary(1, 51.0, "mixed")])
    assert bal.verdict == "balanced" and bal.severity == "info" and bal.evidence["straggler_ranks"] == []
    assert ranks.check([RankSummary(0, 50.0, None)]) == []


def test_regime_mismatch_with_and_without_a_majority() -> None:
    fs = {
        f.rule: f
        for f in ranks.check(
            [RankSummary(0, 50.0, "compute-bound"), RankSummary(1, 50.0, "compute-bound"), RankSummary(2, 50.0, "input-bound")]
        )
    }
    m = fs["rank_regime_mismatch"]
    assert m.verdict == "regime-differs" and m.evidence["majority_verdict"] == "compute-bound" and m.subjects == ("rank 2",)
    fs = {f.rule: f for f in ranks.check([RankSummary(0, 50.0, "compute-bound"), RankSummary(1, 50.0, "input-bound")])}
    assert fs["rank_regime_mismatch"].evidence["majority_verdict"] is None
    assert "disagree" in fs["rank_regime_mismatch"].message
    s = RankSummary(3, 12.5, "mixed", 4.0, {"comm_share": 0.3})
    assert RankSummary.from_json(s.to_json()) == s
    assert ranks.summary_of(1, []) is None and ranks.summary_of(1, [2_000_000, 4_000_000]) == RankSummary(1, 3.0, None)


def _cpu_regime(verdict: str, comm_us: float, **shares: float) -> Any:
    from autoprof.findings import Finding

    return Finding("bound_regime", verdict, "info", "m", "a", {"device": "cpu", "comm_us": comm_us, **shares})


def test_the_straggler_is_the_rank_that_waits_least_when_step_times_are_equal() -> None:
    # DDP: rank 1 sleeps 30 ms in its step, rank 0 waits for it in the all-reduce: both steps take ~33 ms
    fast = ranks.summary_of(0, [33_000_000] * 3, _cpu_regime("communication-bound", 3 * 31_000.0, comm_share=0.93))
    slow = ranks.summary_of(1, [33_200_000] * 3, _cpu_regime("overhead-bound", 3 * 800.0, overhead_share=0.9))
    assert fast is not None and slow is not None and fast.wait_ms == 31.0
    (f,) = ranks.check([fast, slow])  # no regime mismatch: the straggler explains it
    assert f.verdict == "stragglers" and f.evidence["straggler_ranks"] == [1] and f.evidence["waiting_ranks"] == [0]
    assert f.evidence["method"] == "collective_wait" and abs(f.evidence["wait_for_stragglers_ms"] - 30.2) < 1e-6
    assert f.evidence["transfer_ms"] == 0.8 and "rank 1 is overhead-bound" in f.message


def test_jittery_waits_of_a_loaded_machine_are_balanced() -> None:
    # balanced DDP on a loaded 2-core machine, as measured: 5.4 and 3.5 ms waits in ~6 ms steps
    (f,) = ranks.check([RankSummary(0, 7.1, "communication-bound", 5.446), RankSummary(1, 5.46, "communication-bound", 3.482)])
    assert f.verdict == "balanced"
    (f,) = ranks.check([RankSummary(0, 3.8, "communication-bound", 2.401), RankSummary(1, 6.06, "communication-bound", 0.656)])
    assert f.verdict == "balanced"  # 1.7 ms apart: less than a straggler's cost worth a warning


def test_equal_waits_are_balanced_and_close_figures_are_no_regime_mismatch() -> None:
    a = RankSummary(0, 50.0, "overhead-bound", 2.0, {"work_share": 0.197, "overhead_share": 0.75, "comm_share": 0.04})
    b = RankSummary(1, 50.5, "mixed", 2.3, {"work_share": 0.202, "overhead_share": 0.74, "comm_share": 0.05})
    (f,) = ranks.check([a, b])
    assert f.verdict == "balanced" and f.evidence["method"] == "collective_wait"
    a_in = RankSummary(0, 50.0, "overhead-bound", 2.0, {**(a.shares or {}), "input_share": 0.0})
    c = RankSummary(1, 50.5, "input-bound", 2.3, {"work_share": 0.05, "overhead_share": 0.15, "comm_share": 0.05, "input_share": 0.7})
    assert [x.verdict for x in ranks.check([a_in, c])] == ["balanced", "regime-differs"]


def test_balanced_ranks_whose_waiting_shares_jitter_have_no_regime_mismatch() -> None:
    # balanced 2-rank DDP at 2-3 ms steps on a loaded machine: the same work, one rank's wait read as overhead
    shares0 = {"input_share": 0.0, "blocked_share": 0.0, "comm_share": 0.15, "work_share": 0.2, "overhead_share": 0.65}
    shares1 = {"input_share": 0.0, "blocked_share": 0.0, "comm_share": 0.6, "work_share": 0.2, "overhead_share": 0.2}
    r0 = RankSummary(0, 2.6, "overhead-bound", 0.4, shares0)
    r1 = RankSummary(1, 2.7, "communication-bound", 1.6, shares1)
    assert [f.verdict for f in ranks.check([r0, r1])] == ["balanced"]
    # the same figures with step times far apart are a real difference
    slow = RankSummary(1, 4.0, "communication-bound", 1.6, shares1)
    assert "regime-differs" in [f.verdict for f in ranks.check([r0, slow])]


def test_a_waiting_ranks_nccl_time_is_waiting_for_the_straggler() -> None:
    from autoprof.findings import Finding

    comm = Finding(
        "exposed_communication",
        "exposed-communication",
        "warning",
        "communication (NCCL) takes 90 ms",
        "overlap",
        {"exposed_comm_us": 90_000.0},
    )
    strag = Finding("straggler_ranks", "stragglers", "warning", "m", "a", {"straggler_ranks": [3]})
    w = ranks.as_waiting(comm, strag)
    assert w.verdict == "waiting-for-peer" and w.severity == "info" and w.evidence["waiting_for_ranks"] == [3]
    assert "straggler rank(s) 3" in w.message


# -- the rule runner --------------------------------------------------------------------------------------------------


def test_a_failing_rule_does_not_hide_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof import rules

    def broken(trace: Any, config: Any = None) -> Any:
        raise RuntimeError("rule bug")

    monkeypatch.setattr(rules, "RULES", {"broken": rules.Rule("broken", broken, {"broken": ("x",)}), **rules.RULES})
    found, failures = run_rules(busy_gpu().trace())
    assert [name for name, _ in failures] == ["broken"] and isinstance(failures[0][1], RuntimeError)
    assert any(f.rule == "bound_regime" for f in found)


def test_rules_are_keyed_and_reported_by_their_own_ids() -> None:
    from autoprof import rules

    assert list(rules.RULES)[:2] == ["bound_regime", "roofline"]  # not the module's name ("regime")
    assert all(rule.id in rule.verdicts for rule in rules.RULES.values())
    assert [rule.id for rule in rules.RULES.values()] == [next(iter(m.VERDICTS)) for m in rules.MODULES]


# -- helpers the rules share ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,inputs,flops",
    [
        ("aten::mm", [[2, 3], [3, 4]], 2 * 2 * 3 * 4),
        ("aten::addmm", [[4], [2, 3], [3, 4]], 2 * 2 * 3 * 4),
        ("aten::bmm", [[5, 2, 3], [5, 3, 4]], 2 * 5 * 2 * 3 * 4),
        ("aten::baddbmm", [[5, 2, 4], [5, 2, 3], [5, 3, 4]], 2 * 5 * 2 * 3 * 4),
        ("aten::matmul", [[3], [3]], 6),
        ("aten::matmul", [[2, 3], [3]], 12),
        ("aten::matmul", [[3], [3, 4]], 24),
        ("aten::matmul", [[7, 2, 3], [3, 4]], 2 * 7 * 2 * 3 * 4),
        ("aten::linear", [[8, 16], [32, 16], [32]], 2 * 8 * 16 * 32),
        ("aten::mm", [[2, 3]], None),  # a shape missing
        ("aten::mm", [[2, -3], [3, 4]], None),  # not a shape
        ("aten::mm", ["x", [3, 4]], None),
        ("aten::linear", [[8, 16], [1, 32, 16]], None),
        ("aten::relu", [[8]], None),
    ],
)
def test_matmul_flops_from_shapes(name: str, inputs: list[Any], flops: int | None) -> None:
    from autoprof.measure.flops import matmul_flops

    assert matmul_flops(name, inputs) == flops


def test_kernel_names_shortened_and_heavy_kernels_recognised() -> None:
    from autoprof.measure.kernels import short_kernel_name
    from autoprof.rules.occupancy import is_heavy

    assert (
        short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, F)")
        == "at::native::vectorized_elementwise_kernel"
    )
    assert short_kernel_name(GEMM) == "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"
    assert short_kernel_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    # the H200's fp32 GEMM (torch 2.11): a cutlass::Kernel2 template
    h200 = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)"
    assert short_kernel_name(h200) == "cutlass_80_simt_sgemm_256x128_8x4_nn_align1"
    assert short_kernel_name("<>") == "<>"[:60]
    assert is_heavy("ampere_sgemm_128x64_tn") and is_heavy("cudnn::winograd") and not is_heavy("elementwise_kernel")


def test_launches_without_a_query_are_counted_apart() -> None:
    s = host_bound_gemms()
    s.op("aten::add", 2975, 20, [[64], [64], []], ["float", "float", "Scalar"]).launch(ELEMENTWISE, 2980, 2990, 2)
    o = s.findings()["occupancy_query_launch"]
    assert o.evidence["queried_launch_count"] == 90 and o.evidence["unqueried_launch_count"] == 1


def test_a_rate_above_the_peak_is_capped_and_said_so() -> None:
    # 4096² floats added in 10 µs: far above any DRAM bandwidth (the data sat in caches)
    s = Synth()
    for k in range(3):
        base = k * 1000
        s.step(k, base, 1000).op("aten::add", base + 10, 30, [[4096, 4096], [4096, 4096], []], ["float", "float", "Scalar"])
        s.launch(ELEMENTWISE, base + 20, base + 50, 10)
    rf = s.findings(Config(noise_floor=0.0))["roofline"]
    op = rf.evidence["ops"][0]
    assert op["above_peak"] is True and op["roofline_fraction_ratio"] == 1.0
    assert "above the datasheet's bandwidth: data served from the device's caches" in rf.message  # a device: no calibration
    assert all(o["roofline_fraction_ratio"] <= 1.0 for o in rf.evidence["ops"] + rf.evidence["top_lost"])


@pytest.mark.parametrize(
    "name,kind",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "AllReduce"),
        ("void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "SendRecv"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllGather"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "Generic"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)", "ReduceScatter"),
        ("some_nccl_helper", "other"),
    ],
)
def test_nccl_kernel_namings_name_their_collective(name: str, kind: str) -> None:
    from autoprof.rules.comm import collective_kind

    assert collective_kind(name) == kind


def test_derived_values_are_computed_once_per_trace_and_kept_out_of_its_data() -> None:
    from autoprof.measure import views
    from autoprof.rules import roofline

    trace = busy_gpu().trace()
    metadata = dict(trace.metadata)
    found, failures = run_rules(trace)
    assert failures == [] and found
    assert trace.metadata == metadata  # the rules wrote nothing into the trace's data
    assert len(trace.derived) >= 3  # the view, the launch links, the blocking calls, the roofline
    assert views.view(trace) is views.view(trace)
    assert roofline.analyze(trace) is roofline.analyze(trace) is not None
    other = busy_gpu().trace()  # a trace of its own has values of its own
    assert views.view(other) is not views.view(trace)
    assert views.blocked_by_call(trace) == views.blocked_by_call(trace)
    copy = views.blocked_by_call(trace)
    copy["x"] = 1
    assert "x" not in views.blocked_by_call(trace)  # callers get a copy: the kept value never changes


# -- a step's time on a device (issue 20, item 6) -----------------------------------------------------------------


def _enqueue_only() -> Synth:
    """Three steps whose host calls take 0.3 ms to enqueue a 14 ms kernel each (a device-bound window)."""
    s = Synth(gpu="NVIDIA H200")
    for k in range(3):
        base = k * 14_000
        s.step(k + 3, base, 300).op("aten::mm", base + 10, 280, [[8192, 8192], [8192, 8192]], ["c10::BFloat16", "c10::BFloat16"])
        s.launch("nvjet_gemm", base + 20, base + 100, 13_900)
    return s


def _live_findings(s: Synth, first_us: float) -> dict[str, Any]:
    trace = s.trace()
    trace.metadata.update({"first_call_ns": int(first_us * 1000), "steady_call_ns": 300_000})  # as a live window's
    found, failures = run_rules(trace)
    assert not failures
    return {f.rule: f for f in found}


def test_device_step_time_is_the_device_lanes_span_of_the_step() -> None:
    s = _enqueue_only()
    trace = s.trace()
    assert device_step_ns(trace) == [13_900_000] * 3  # the kernels, where no ProfilerStep span is on the device lane
    assert step_times_ns(trace) == [13_900_000] * 3  # longer than the host's 0.3 ms
    s.x("gpu_user_annotation", "ProfilerStep#3", 90, 13_950, tid=7, pid=0)  # torch's own span of the step wins
    assert device_step_ns(s.trace())[0] == 13_950_000
    host_only = Synth(gpu=None)
    host_only.step(0, 0, 100).op("aten::mm", 10, 80)
    assert device_step_ns(host_only.trace()) == [None]


def test_a_cold_first_call_is_measured_against_the_devices_steady_step() -> None:
    # host steady 0.3 ms (enqueue only), device 13.9 ms a step: a 20 ms first call is no cold start
    assert "cold_first_step" not in _live_findings(_enqueue_only(), first_us=20_000)
    cold = _live_findings(_enqueue_only(), first_us=500_000)["cold_first_step"]
    assert cold.evidence["steady_step_ms"] == 13.9 and cold.evidence["steady_clock"] == "device"
    assert "lazy CUDA/cuDNN init" in cold.advice
    assert cold.evidence["ratio"] == pytest.approx(500 / 13.9, rel=1e-3)


# -- pageable_copies ------------------------------------------------------------------------------------------------


def _copies(kind: str, launch_us: float) -> Synth:
    s = Synth()
    s.step(0, 0, 1_000)
    s.launch(f"Memcpy HtoD ({kind} -> Device)", 10, 20, 100, cat="gpu_memcpy", call="cudaMemcpyAsync")
    s.events[-2]["dur"] = launch_us  # the launching call: the host waits while a pageable copy is staged
    s.launch("sm80_gemm", 400, 420, 300)
    return s


def test_a_pageable_copy_whose_launch_holds_the_host_is_found() -> None:
    from autoprof.measure.views import view

    s = _copies("Pageable", 150)
    f = s.findings()["pageable_copies"]
    assert f.verdict == "pageable-host-memory" and f.severity == "warning"
    assert f.evidence["pageable_copy_count"] == 1
    assert f.evidence["host_wait_us"] == 150 and f.evidence["pageable_copy_us"] == 100
    assert f.evidence["window_share"] == pytest.approx(150_000 / view(s.trace()).window_ns, abs=1e-3)


def test_pinned_copies_and_negligible_pageable_ones_are_not() -> None:
    assert "pageable_copies" not in _copies("Pinned", 2).findings()
    tiny = _copies("Pageable", 2)
    tiny.events[-3]["dur"] = 1  # a 1 µs copy, a 2 µs launch in a 1 ms step: under the noise floor
    assert "pageable_copies" not in tiny.findings()
