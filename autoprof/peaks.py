"""Device peaks for the roofline: FLOP/s per dtype and memory bandwidth, matched by the trace's
``deviceProperties`` name. Dense (no structured sparsity) vendor figures; each row names its source.

Override with ``autoprof.configure(peaks={"flops_per_s": ..., "bytes_per_s": ...})``. CPU windows use a
calibration measured by the live path (one matmul, one large copy; cached per process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoprof.config import Config

T = 1e12
G = 1e9


@dataclass(frozen=True)
class Peak:
    name: str
    flops: dict[str, float]  # dtype key (fp32, tf32, fp16, bf16, fp8, fp64) -> FLOP/s
    bytes_per_s: float
    source: str
    match: tuple[str, ...] = field(default=())

    def flops_for(self, dtype: str) -> float | None:
        return self.flops.get(dtype) or (self.flops.get("fp16") if dtype == "bf16" else None)


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
)


def gpu_peak(device_name: str | None) -> Peak | None:
    if not device_name:
        return None
    for peak in GPU_PEAKS:
        if all(m in device_name for m in peak.match):
            return peak
    return None


def peak_for(trace_device_properties: list[dict[str, Any]], metadata: dict[str, Any], config: Config | None) -> Peak | None:
    """The peaks that apply: the config override, else the GPU table, else the CPU calibration."""
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
    cf, cb = metadata.get("cpu_peak_flops"), metadata.get("cpu_peak_bytes_per_s")
    if isinstance(cf, (int, float)) and isinstance(cb, (int, float)) and cf > 0 and cb > 0:
        cf = float(cf)
        return Peak(
            "CPU (calibrated)",
            {"fp32": cf, "tf32": cf, "fp16": cf, "bf16": cf, "fp64": cf / 2},
            float(cb),
            "measured once per process: a 1024×1024 float32 matmul and a 32 MB copy",
        )
    return None
