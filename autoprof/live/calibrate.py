"""CPU peaks for the roofline of a CPU-only run: measured once per process, when the first window opens.

The figures are written into each window's trace (``autoprof_cpu_peak_*``), so an offline analysis of a kept
trace reads the ones the live analysis used. The regime verdict only uses them to cost each op's work (an op
call is work when that takes longer than a call's fixed cost), so a peak measured low or high by half moves
no verdict of the shipped scenarios.
"""

from __future__ import annotations

import statistics
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from autoprof import _guard

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
    completes even when no attempt could run it whole. Each timed run (and each warm-up) is one step of that
    progress, taken with signals held (``held``: Python's handlers wait until the run's timing is kept): a Ctrl-C
    held down, a SIGINT every few ms, interrupted each 1024² matmul before it returned, so the calibration never
    advanced and every call that opened a window spent itself on it. The runs' operands are made the same way, once,
    held, and kept across attempts until their runs are done (``operands``): made afresh by each attempt, outside the
    held runs, their allocations (new pages: 5-15 ms each on a loaded machine) were what the storm interrupted next.
    A calibration that fails leaves no peaks (the roofline then says it has none) and is not tried again."""

    def __init__(self) -> None:
        self.timings: dict[str, list[float]] = {}
        self.operands: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # kept across attempts while their runs go on
        self.result: CpuPeaks | None = None
        self.failed = False

    def peaks(self, held: AbstractContextManager[Any] | None = None) -> CpuPeaks | None:
        """The peaks, measured on the first call (~0.1 s here) on the calling thread with torch's thread
        count, so no training work competes with it: the best of 5 timed runs (after a warm-up) of float32
        matmuls at 512 and 1024, and of 7 copies of 32 MB (~1.3 ms each). ``held``: entered around each run."""
        if self.result is None and not self.failed:
            with _guard.quiet("calibration.failed"):
                self.result = self._measure(held if held is not None else nullcontext())
                self.operands.clear()
                return self.result
            self.failed = True
            self.operands.clear()
        return self.result

    def _operands(self, held: AbstractContextManager[Any], key: str, make: Any, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``key``'s two operands, ``make(*args)`` each: made once, with signals held (a Ctrl-C meanwhile comes once
        they are kept), then the same for every attempt until their runs are done."""
        pair = self.operands.get(key)
        if pair is None:
            with held:
                pair = self.operands[key] = (make(*args), make(*args))
        return pair

    def _measure(self, held: AbstractContextManager[Any]) -> CpuPeaks | None:
        for size in MATMUL_SIZES:
            rates = self.timings.setdefault(f"mm{size}", [])
            if len(rates) <= MATMUL_RUNS:
                # values do not matter to the timing; filling is cheaper than randn
                left, right = self._operands(held, f"mm{size}", torch.full, (size, size), 0.5)
                self._time(held, rates, MATMUL_RUNS, 2 * size**3, torch.mm, left, right)
                del left, right
                self.operands.pop(f"mm{size}", None)
        copies = self.timings.setdefault("copy", [])
        if len(copies) <= COPY_RUNS:
            src, dst = self._operands(held, "copy", torch.empty, COPY_FLOATS)
            self._time(held, copies, COPY_RUNS, 2 * COPY_FLOATS * 4, dst.copy_, src)
            del src, dst
            self.operands.pop("copy", None)
        runs = max((self.timings[f"mm{size}"][1:] for size in MATMUL_SIZES), key=max)
        best = max(runs)
        if not best or not max(copies[1:]):
            self.failed = True
            return None
        return CpuPeaks(best, max(copies[1:]), 1.0 - statistics.median(runs) / best)

    @staticmethod
    def _time(held: AbstractContextManager[Any], rates: list[float], runs: int, work: int, op: Any, *args: Any) -> None:
        """``runs`` timed runs of ``op(*args)`` (``work`` FLOPs or bytes each) after a warm-up, into ``rates`` (its
        first entry is the warm-up's); those already there are kept."""
        while len(rates) < runs + 1:
            with held:
                t0 = time.perf_counter()
                op(*args)
                rates.append(work / (time.perf_counter() - t0))


CALIBRATION = Calibration()


def cpu_peaks(held: AbstractContextManager[Any] | None = None) -> CpuPeaks | None:
    """The process's calibrated CPU peaks (see :meth:`Calibration.peaks`)."""
    return CALIBRATION.peaks(held)
