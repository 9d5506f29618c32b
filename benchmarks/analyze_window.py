"""Time from a closed profiler window to findings for ~100k events, side by side with key_averages() on the
same window. Target: autoprof <= 1/10 of key_averages' time.

Run:  python benchmarks/analyze_window.py [--events 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from autoprof import engine
from autoprof.session import _cpu_peaks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    x, w, b = torch.randn(16, 16), torch.randn(16, 16), torch.randn(16)
    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    prof.prepare_trace()
    prof.start_trace()
    steps = 5
    per_step = args.events // steps // 6  # each iteration records 6 events (matmul, mm, 3 resolve_conj, add)
    for s in range(steps):
        with record_function(f"ProfilerStep#{s}"):
            for _ in range(per_step):
                torch.add(torch.matmul(x, w), b)
    prof.stop_trace()

    raw_events = len(prof.profiler.kineto_results.events())
    # as in a live window: the calibrated CPU peaks are known, so the roofline rule runs too
    flops, bw = _cpu_peaks() or (0.0, 0.0)
    meta = {"live": True, "cpu_peak_flops": flops, "cpu_peak_bytes_per_s": bw}
    t0 = time.perf_counter()
    trace = engine.window_trace(prof.profiler.kineto_results, target=None, metadata=meta)
    t1 = time.perf_counter()
    findings, failures = engine.analyze_trace(trace)
    t2 = time.perf_counter()
    assert not failures, failures
    ka = prof.key_averages()
    t3 = time.perf_counter()
    ours, theirs = t2 - t0, t3 - t2
    print(f"events in window: {raw_events} ({trace.n_events} kept by the loader)")
    print(f"{'path':40s} {'seconds':>8s} {'ratio':>7s}")
    print(f"{'autoprof load (raw kineto events)':40s} {t1 - t0:8.3f}")
    print(f"{'autoprof rules':40s} {t2 - t1:8.3f}")
    print(f"{'autoprof window -> findings':40s} {ours:8.3f} {ours / theirs:7.3f}")
    print(f"{'key_averages()':40s} {theirs:8.3f} {1.0:7.3f}")
    print(f"\ntarget (<= 0.10 of key_averages): {'met' if ours <= 0.1 * theirs else 'NOT met'} ({ours / theirs:.3f})")
    print(f"findings: {sorted({f.rule for f in findings})}; key_averages rows: {len(ka)}")


if __name__ == "__main__":
    main()
