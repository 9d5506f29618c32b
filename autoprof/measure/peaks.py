"""Device peaks for the roofline: FLOP/s per dtype and memory bandwidth, matched by the trace's
``deviceProperties`` name. Dense (no structured sparsity) vendor figures; each row names its source. NVIDIA rows give
the FP32 and FP64 figures without tensor cores; AMD rows give the matrix-core (MFMA) figures, what a GEMM reaches.

Override with ``autoprof.configure(peaks={"flops_per_s": ..., "bytes_per_s": ...})``. CPU windows use a
calibration measured by the live path (one matmul, one large copy; cached per process).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from autoprof.config import Config
from autoprof.measure.gpudb import database_peak

T = 1e12
G = 1e9
#: The name of the peaks a CPU trace's calibration gives (``Peak.name``).
CPU_PEAK_NAME = "CPU (calibrated)"


@dataclass(frozen=True)
class Peak:
    name: str
    flops: dict[str, float]  # dtype key (fp64, fp32, tf32, fp16, bf16, fp8, int8) -> FLOP/s (int8: op/s)
    bytes_per_s: float
    source: str
    match: tuple[str, ...] = field(default=())

    def flops_for(self, dtype: str) -> float | None:
        return self.flops.get(dtype) or (self.flops.get("fp16") if dtype == "bf16" else None)


# AMD CDNA 3 at 2100 MHz (MI300X, MI325X: the same die and clocks; 304 CUs): FP64 matrix 163.4 (vector 81.7), FP32
# matrix 163.4, TF32 653.7, FP16/BF16 1307.4, FP8 2614.9 TFLOPS, INT8 2614.9 TOPS, dense (the data sheets' sparsity
# figures are twice these).
_CDNA3 = {
    "fp64": 163.4 * T,
    "fp32": 163.4 * T,
    "tf32": 653.7 * T,
    "fp16": 1307.4 * T,
    "bf16": 1307.4 * T,
    "fp8": 2614.9 * T,
    "int8": 2614.9 * T,
}

# Order matters: the first row whose every match string occurs in the device name wins.
GPU_PEAKS: tuple[Peak, ...] = (
    Peak(
        "H200",
        {"fp64": 34 * T, "fp32": 67 * T, "tf32": 494.5 * T, "fp16": 989.5 * T, "bf16": 989.5 * T, "fp8": 1979 * T},
        4800 * G,
        "NVIDIA H200 Tensor Core GPU datasheet (SXM), dense",
        ("H200",),
    ),
    Peak(
        "H100 PCIe",
        {"fp64": 26 * T, "fp32": 51 * T, "tf32": 378 * T, "fp16": 756 * T, "bf16": 756 * T, "fp8": 1513 * T},
        2000 * G,
        "NVIDIA H100 Tensor Core GPU datasheet (PCIe), dense",
        ("H100", "PCIe"),
    ),
    Peak(
        "H100 SXM",
        {"fp64": 34 * T, "fp32": 67 * T, "tf32": 494.5 * T, "fp16": 989.5 * T, "bf16": 989.5 * T, "fp8": 1979 * T},
        3350 * G,
        "NVIDIA H100 Tensor Core GPU datasheet (SXM), dense",
        ("H100",),
    ),
    Peak(
        "B200",
        {"fp64": 40 * T, "fp32": 80 * T, "tf32": 1100 * T, "fp16": 2250 * T, "bf16": 2250 * T, "fp8": 4500 * T},
        8000 * G,
        "NVIDIA HGX B200 specifications, per GPU, dense",
        ("B200",),
    ),
    Peak(
        "A100 80GB PCIe",
        {"fp64": 9.7 * T, "fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T, "bf16": 312 * T},
        1935 * G,
        "NVIDIA A100 Tensor Core GPU datasheet (80GB PCIe), dense",
        ("A100", "80GB", "PCIe"),
    ),
    Peak(
        "A100 80GB SXM",
        {"fp64": 9.7 * T, "fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T, "bf16": 312 * T},
        2039 * G,
        "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM), dense",
        ("A100", "80GB"),
    ),
    Peak(
        "A100 40GB",
        {"fp64": 9.7 * T, "fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T, "bf16": 312 * T},
        1555 * G,
        "NVIDIA A100 Tensor Core GPU datasheet (40GB), dense",
        ("A100",),
    ),
    Peak("V100", {"fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 125 * T}, 900 * G, "NVIDIA Tesla V100 datasheet (SXM2)", ("V100",)),
    Peak(
        "L40S",
        {"fp32": 91.6 * T, "tf32": 183 * T, "fp16": 362 * T, "bf16": 362 * T, "fp8": 733 * T},
        864 * G,
        "NVIDIA L40S datasheet, dense",
        ("L40S",),
    ),
    Peak(
        "L4",
        {"fp32": 30.3 * T, "tf32": 60 * T, "fp16": 121 * T, "bf16": 121 * T, "fp8": 242 * T},
        300 * G,
        "NVIDIA L4 Tensor Core GPU datasheet, dense",
        ("L4",),
    ),
    Peak(
        "RTX 4090",
        {"fp32": 82.6 * T, "fp16": 165.2 * T, "bf16": 165.2 * T},
        1008 * G,
        "NVIDIA Ada GPU architecture whitepaper (FP16 tensor, FP32 accumulate, dense)",
        ("4090",),
    ),
    Peak(
        "RTX 3090",
        {"fp32": 35.6 * T, "fp16": 71 * T, "bf16": 71 * T},
        936 * G,
        "NVIDIA Ampere GA102 GPU architecture whitepaper (FP16 tensor, FP32 accumulate, dense)",
        ("3090",),
    ),
    Peak(
        "RTX 2080 Ti",
        {"fp32": 13.4 * T, "fp16": 53.8 * T},
        616 * G,
        "NVIDIA Turing GPU architecture whitepaper (FP16 tensor, FP32 accumulate)",
        ("2080 Ti",),
    ),
    # AMD Instinct (CDNA). ROCm names a device "AMD Instinct MI300X" (or "AMD Instinct MI300X VF", the SR-IOV virtual
    # function a cloud VM sees: the whole GPU, 304 CUs, the same peaks). Figures from AMD's data sheets and product
    # pages (amd.com/en/products/accelerators/instinct), dense (no sparsity), at the peak engine clock; fp64 and fp32
    # are the matrix (MFMA) figures, int8 in op/s. A device partitioned (CPX/TPX modes) shows fewer CUs than these.
    Peak(
        "MI325X",
        # AMD Instinct MI325X data sheet: FP64 matrix 163.4 (vector 81.7), FP32 matrix 163.4, TF32 653.7,
        # FP16/BF16 1307.4, FP8 2614.9 TFLOPS, INT8 2614.9 TOPS; 256 GB HBM3E at 6 TB/s.
        dict(_CDNA3),
        6000 * G,
        "AMD Instinct MI325X data sheet, dense (matrix cores)",
        ("MI325X",),
    ),
    Peak(
        "MI300X",
        # AMD Instinct MI300X data sheet: FP64 matrix 163.4 (vector 81.7), FP32 matrix 163.4, TF32 653.7,
        # FP16/BF16 1307.4, FP8 2614.9 TFLOPS, INT8 2614.9 TOPS (304 CUs at 2100 MHz); 192 GB HBM3 at 5.3 TB/s.
        dict(_CDNA3),
        5300 * G,
        "AMD Instinct MI300X data sheet, dense (matrix cores)",
        ("MI300X",),
    ),
    Peak(
        "MI355X",
        # AMD Instinct MI355X data sheet (CDNA 4): FP64 matrix 78.6, FP32 matrix 157.3, FP16/BF16 2516.6 ("2.5 PF"),
        # FP8 5033.2 TFLOPS, INT8 5033.2 TOPS (256 CUs at 2400 MHz); 288 GB HBM3E at 8 TB/s. CDNA 4 has no TF32.
        {"fp64": 78.6 * T, "fp32": 157.3 * T, "fp16": 2516.6 * T, "bf16": 2516.6 * T, "fp8": 5033.2 * T, "int8": 5033.2 * T},
        8000 * G,
        "AMD Instinct MI355X data sheet, dense (matrix cores)",
        ("MI355X",),
    ),
    Peak(
        "MI250X (one GCD)",
        # AMD Instinct MI250X data sheet, per OAM module: FP64/FP32 matrix 95.7, FP16/BF16 383 TFLOPS, INT8 383 TOPS;
        # 128 GB HBM2e at 3.2 TB/s (3276.8 GB/s). The module is two GCDs and ROCm shows each as a device of its own
        # (110 CUs, 64 GB; named "AMD Instinct MI250X" or "AMD Instinct MI250X/MI250"): half of each figure.
        {"fp64": 47.85 * T, "fp32": 47.85 * T, "fp16": 191.5 * T, "bf16": 191.5 * T, "int8": 191.5 * T},
        1638.4 * G,
        "AMD Instinct MI250X data sheet, dense (matrix cores), halved per GCD",
        ("MI250X",),
    ),
    Peak(
        "MI210",
        # AMD Instinct MI210 data sheet: FP64/FP32 matrix 45.3 (vector 22.6), FP16/BF16 181.0 TFLOPS, INT8 181.0 TOPS
        # (104 CUs at 1700 MHz); 64 GB HBM2e at 1.6 TB/s (1638.4 GB/s).
        {"fp64": 45.3 * T, "fp32": 45.3 * T, "fp16": 181.0 * T, "bf16": 181.0 * T, "int8": 181.0 * T},
        1638.4 * G,
        "AMD Instinct MI210 data sheet, dense (matrix cores)",
        ("MI210",),
    ),
)


def gpu_peak(device_name: str | None) -> Peak | None:
    if not device_name:
        return None
    for peak in GPU_PEAKS:  # each word of the row whole: "NVIDIA L40" is no "L4"
        if all(re.search(rf"(?<![A-Za-z0-9]){re.escape(m)}(?![A-Za-z0-9])", device_name) for m in peak.match):
            return peak
    return None


def peak_for(trace_device_properties: list[dict[str, Any]], metadata: dict[str, Any], config: Config | None) -> Peak | None:
    """The peaks that apply: the config override, else the GPU table, else the GPU database (``_gpudb``, where
    installed), else the CPU calibration."""
    override = config.peaks if config is not None else None
    if isinstance(override, dict) and override.get("flops_per_s") and override.get("bytes_per_s"):
        flops = float(override["flops_per_s"])
        return Peak(
            "configured",
            {"fp32": flops, "tf32": flops, "fp16": flops, "bf16": flops, "fp8": flops, "fp64": flops},
            float(override["bytes_per_s"]),
            "autoprof.configure(peaks=...)",
        )
    for props in trace_device_properties:
        peak = gpu_peak(str(props.get("name", "")))
        if peak:
            return peak
    for props in trace_device_properties:  # no row: the GPU database, where installed (``_gpudb``)
        name = str(props.get("name") or "")
        if name and not name.startswith("AMD"):
            sms, mem = props.get("numSms"), props.get("totalGlobalMem")
            row = database_peak(name, sms if type(sms) is int and sms > 0 else None, mem if type(mem) is int and mem > 0 else None)
            if row:
                return Peak(row.name, dict(row.flops), row.bytes_per_s, row.source)
    cf, cb = metadata.get("cpu_peak_flops"), metadata.get("cpu_peak_bytes_per_s")
    if isinstance(cf, (int, float)) and isinstance(cb, (int, float)) and cf > 0 and cb > 0:
        cf = float(cf)
        return Peak(
            CPU_PEAK_NAME,
            {"fp32": cf, "tf32": cf, "fp16": cf, "bf16": cf, "fp64": cf / 2},
            float(cb),
            "measured once per process: a 1024×1024 float32 matmul and a 32 MB copy",
        )
    return None
