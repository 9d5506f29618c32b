"""The observer effect: step times of a training loop before, during and after an autoprof window, side by side
with the same loop without autoprof. Target: the steps right after a window (when its analysis runs in the
background) within 10 % of the steps outside windows.

Run:  python benchmarks/observer.py [--runs 3] [--steps 50] [--width 2048] [--ops 300]

Each contender runs in a fresh process (``--child``), ``--runs`` times, interleaved; the figures are medians over
runs of per-phase medians. The loop: an MLP forward + backward + SGD step on a batch, plus ``--ops`` small ops per
step (so that a window has thousands of events to analyze, as a real model's does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SKIP, WAIT, WARMUP, ACTIVE = 10, 5, 1, 3
AFTER = 1  # the step right after the window: its analysis starts then


def child(with_autoprof: bool, steps: int, width: int, ops: int) -> dict[str, list[float]]:
    import torch

    import autoprof

    autoprof.configure(sink=os.devnull)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, width), torch.randint(0, 10, (64,))
    small = torch.randn(16)

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        z = small
        for _ in range(ops):
            z = z * 1.0001

    if with_autoprof:
        step = autoprof.autoprof(name="observed", skip_first=SKIP, wait=WAIT, warmup=WARMUP, active=ACTIVE)(step)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    autoprof.flush()
    first = SKIP + WAIT  # index of the first step of the window (warmup)
    end = first + WARMUP + ACTIVE  # first step after the window closed
    return {
        "outside": times[first - WAIT : first] + times[end + 10 :],  # just before the window; well after it
        "during": times[first:end],
        "after": times[end : end + AFTER],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--child", choices=("plain", "autoprof"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child == "autoprof", args.steps, args.width, args.ops)))
        return
    results: dict[str, list[dict[str, float]]] = {"plain": [], "autoprof": []}
    for _ in range(args.runs):
        for who in ("plain", "autoprof"):
            cmd = [sys.executable, __file__, "--child", who, "--steps", str(args.steps), "--width", str(args.width), "--ops", str(args.ops)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            phases = json.loads(out.stdout.strip().splitlines()[-1])
            results[who].append({k: statistics.median(v) for k, v in phases.items()})
    med = {who: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for who, rs in results.items()}
    base = med["plain"]["outside"]
    print(f"{'contender':10s} {'outside ms':>11s} {'during ms':>10s} {'after ms':>9s}   ratios to plain outside")
    for who, m in med.items():
        print(
            f"{who:10s} {m['outside']:11.2f} {m['during']:10.2f} {m['after']:9.2f}   "
            f"outside {m['outside'] / base:.3f}  during {m['during'] / base:.3f}  after {m['after'] / base:.3f}"
        )
    ratio = med["autoprof"]["after"] / med["autoprof"]["outside"]
    print(
        f"\nstep right after a window / step outside windows (autoprof): {ratio:.3f}  "
        f"target (<= 1.10): {'met' if ratio <= 1.10 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
