"""CPU peaks for the roofline of a CPU-only run: measured once per process, when the first window opens.

The figures are written into each window's trace (``autoprof_cpu_peak_*``), so an offline analysis of a kept
trace reads the ones the live analysis used. The regime verdict only uses them to cost each op's work (an op
call is work when that takes longer than a call's fixed cost), so a peak measured low or high by half moves
no verdict of the shipped scenarios.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

MATMUL_SIZES = (512, 1024)
MATMUL_RUNS = 5
COPY_RUNS = 7
COPY_FLOATS = 1 << 23  # 32 MB


@dataclass(frozen=True, slots=True)
class CpuPeaks:
    """Measured peaks: float32 matmul FLOP/s, copy bytes/s, and the spread of the best matmul's runs
    (1 - median/best: how far a typical run fell short of the best)."""

    flops: float
    bytes_per_s: float
    spread: float

    def metadata(self) -> dict[str, float]:
        """The figures under the trace metadata keys the loaders read (``cpu_peak_*``)."""
        return {"cpu_peak_flops": self.flops, "cpu_peak_bytes_per_s": self.bytes_per_s, "cpu_peak_spread_ratio": self.spread}


class Calibration:
    """The process's one calibration. Timings measured so far are kept across attempts: a calibration that
    is interrupted (a Ctrl-C, a SIGINT storm) resumes where it stopped instead of starting over, so it
    completes even when no attempt could run it whole. A calibration that fails leaves no peaks (the
    roofline then says it has none) and is not tried again."""

    def __init__(self) -> None:
        self.timings: dict[str, list[float]] = {}
        self.result: CpuPeaks | None = None
        self.failed = False

    def peaks(self) -> CpuPeaks | None:
        """The peaks, measured on the first call (~0.1 s here) on the calling thread with torch's thread
        count, so no training work competes with it: the best of 5 timed runs (after a warm-up) of float32
        matmuls at 512 and 1024, and of 7 copies of 32 MB (~1.3 ms each)."""
        if self.result is None and not self.failed:
            try:
                self.result = self._measure()
            except Exception:
                self.failed = True
        return self.result

    def _measure(self) -> CpuPeaks | None:
        for size in MATMUL_SIZES:
            self._time_matmul(size, self.timings.setdefault(f"mm{size}", []))
        copies = self.timings.setdefault("copy", [])
        self._time_copy(copies)
        runs = max((self.timings[f"mm{size}"] for size in MATMUL_SIZES), key=max)
        best = max(runs)
        if not best or not max(copies):
            self.failed = True
            return None
        return CpuPeaks(best, max(copies), 1.0 - statistics.median(runs) / best)

    @staticmethod
    def _time_matmul(size: int, rates: list[float]) -> None:
        if len(rates) >= MATMUL_RUNS:
            return
        left = torch.full((size, size), 0.5)  # values do not matter to the timing; filling is cheaper than randn
        right = torch.full((size, size), 0.5)
        torch.mm(left, right)
        while len(rates) < MATMUL_RUNS:
            t0 = time.perf_counter()
            torch.mm(left, right)
            rates.append(2 * size**3 / (time.perf_counter() - t0))

    @staticmethod
    def _time_copy(rates: list[float]) -> None:
        if len(rates) >= COPY_RUNS:
            return
        src = torch.empty(COPY_FLOATS)
        dst = torch.empty_like(src)
        dst.copy_(src)
        while len(rates) < COPY_RUNS:
            t0 = time.perf_counter()
            dst.copy_(src)
            rates.append(2 * COPY_FLOATS * 4 / (time.perf_counter() - t0))


CALIBRATION = Calibration()


def cpu_peaks() -> CpuPeaks | None:
    """The process's calibrated CPU peaks (see :meth:`Calibration.peaks`)."""
    return CALIBRATION.peaks()
