"""Memory of a `repeat=0` run on a fast step (issue 22): windows close faster than the paced background analysis
reads them; the queue of closed windows is bounded, so the RSS stays flat. Prints the RSS at step 10k and at the
end side by side, with the windows analyzed and skipped. Target: the end within 50 MB of step 10k.

Run:  python benchmarks/repeat_forever.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch

import autoprof
from autoprof.live.session import MAX_PENDING, SESSION


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    fd, sink = tempfile.mkstemp(prefix="autoprof-repeat-", suffix=".jsonl")
    os.close(fd)
    autoprof.configure(sink=sink)

    @autoprof(repeat=0)
    def step(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    x = torch.ones(4)
    marks: dict[int, float] = {}
    started = time.perf_counter()
    for i in range(1, args.steps + 1):
        step(x)
        if i == 1_000 or i % 10_000 == 0 or i == args.steps:
            marks[i] = rss_mb()
    elapsed = time.perf_counter() - started
    queued = SESSION._queue.unfinished_tasks
    autoprof.flush()
    with open(sink) as f:
        windows = sum('"autoprof.window"' in line for line in f)
    os.unlink(sink)
    first, last = marks[min(10_000, args.steps)], marks[args.steps]
    print(f"steps {args.steps} in {elapsed:.1f} s; windows analyzed {windows}, skipped {SESSION.skipped_total}")
    print(f"closed windows queued at the end: {queued} (at most {MAX_PENDING})")
    print("step        RSS MB")
    for i, mb in sorted(marks.items()):
        print(f"{i:<10}  {mb:8.1f}")
    growth = last - first
    print(f"\ntarget (RSS at the end within 50 MB of step 10k): {'met' if growth <= 50 else 'NOT met'} ({growth:+.1f} MB)")


if __name__ == "__main__":
    main()
