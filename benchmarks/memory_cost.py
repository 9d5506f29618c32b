"""What recording memory costs a window (``profile_memory=True``), side by side with the same window without it, on
the CPU: the recorded steps' wall time, closing the window (stop_trace and reading kineto's raw events, what the
training thread pays), and the analysis (load and rules, on the background thread).

Run:  python benchmarks/memory_cost.py [--iters 2000] [--rounds 3]
Each measurement runs in a fresh process on its own window of the same workload (a small MLP-like step that
allocates per op: every op's output is an allocation and a free), interleaved; the median run is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from autoprof.analysis import engine
from autoprof.trace.model import gc_paused

STEPS = 4


def _measure(memory: bool, iters: int) -> dict[str, Any]:
    x, w, b = torch.randn(16, 16), torch.randn(16, 16), torch.randn(16)
    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=memory)
    prof.prepare_trace()
    prof.start_trace()
    t0 = time.perf_counter()
    for s in range(STEPS):
        with record_function(f"ProfilerStep#{s}"):
            for _ in range(iters):
                torch.relu(torch.add(torch.matmul(x, w), b))
    t1 = time.perf_counter()
    prof.stop_trace()
    events = prof.profiler.kineto_results.events()
    t2 = time.perf_counter()
    with gc_paused():
        trace = engine.window_trace(events, target=None, metadata={"live": True})
        t3 = time.perf_counter()
        findings, failures = engine.analyze_trace(trace)
    t4 = time.perf_counter()
    assert not failures, failures
    return {
        "steps_s": t1 - t0,
        "close_s": t2 - t1,
        "load_s": t3 - t2,
        "rules_s": t4 - t3,
        "raw_events": len(events),
        "memory_events": trace.n_memory,
        "rules": sorted({f.rule for f in findings}),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000, help="iterations per step (4 steps a window)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each, each in a fresh process")
    ap.add_argument("--child", choices=("plain", "memory"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_measure(args.child == "memory", args.iters)))
        return

    def child(kind: str) -> dict[str, Any]:
        cmd = [sys.executable, __file__, "--child", kind, "--iters", str(args.iters)]
        env = {**os.environ, "KINETO_LOG_LEVEL": os.environ.get("KINETO_LOG_LEVEL", "5")}
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
        return dict(json.loads(out.strip().splitlines()[-1]))

    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "memory": []}
    for _ in range(args.rounds):  # interleaved
        for kind in runs:
            runs[kind].append(child(kind))

    def median(kind: str, key: str) -> float:
        values = sorted(r[key] for r in runs[kind])
        return float(values[len(values) // 2])

    plain, mem = runs["plain"][0], runs["memory"][0]
    print(
        f"window: {STEPS} steps x {args.iters} iterations; raw events {plain['raw_events']} without memory, "
        f"{mem['raw_events']} with ({mem['memory_events']} [memory]); {args.rounds} fresh processes each"
    )
    print(f"{'part (median run)':34s} {'plain s':>9s} {'memory s':>9s} {'ratio':>7s}")
    for key, label in (
        ("steps_s", "recorded steps (wall)"),
        ("close_s", "close: stop_trace + raw events"),
        ("load_s", "analysis: load"),
        ("rules_s", "analysis: rules"),
    ):
        a, b = median("plain", key), median("memory", key)
        print(f"{label:34s} {a:9.3f} {b:9.3f} {b / a if a else float('nan'):7.2f}")
    total_a = sum(median("plain", k) for k in ("close_s", "load_s", "rules_s"))
    total_b = sum(median("memory", k) for k in ("close_s", "load_s", "rules_s"))
    print(f"{'close + analysis':34s} {total_a:9.3f} {total_b:9.3f} {total_b / total_a:7.2f}")
    print(f"findings with memory: {mem['rules']}")


if __name__ == "__main__":
    main()
