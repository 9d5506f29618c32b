"""autoprof on real DistributedDataParallel (CPU, gloo): the gradient all-reduce runs inside the profiled step.

    torchrun --nproc_per_node=2 examples/ddp.py [--slow-rank 1] [--slow-where inside|between] [--trace-dir DIR]

A slow rank makes the others wait in the all-reduce inside their own steps, so every rank's step takes as long
as the slowest: autoprof finds the straggler through the wait it causes (the rank that waits least), and calls
the waiting ranks communication-bound rather than overhead-bound.
"""

from __future__ import annotations

import argparse
import gc
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import autoprof


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slow-rank", type=int, default=1, help="this rank is slow by 30 ms per step (-1: none)")
    ap.add_argument(
        "--slow-where",
        choices=("inside", "between"),
        default="inside",
        help="the delay inside the profiled step, or between steps (outside the decorated call)",
    )
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--trace-dir", default=None)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.trace_dir:
        autoprof.configure(trace_dir=args.trace_dir)
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(
            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = rank == args.slow_rank

    @autoprof(name="train_step")
    def train_step(x: torch.Tensor, y: torch.Tensor) -> float:
        if slow and args.slow_where == "inside":
            time.sleep(0.03)  # a straggler: slow input, a throttled device, uneven work ...
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here: the fast rank waits for the slow one
        opt.step()
        return float(loss)

    for _ in range(args.steps):
        if slow and args.slow_where == "between":
            time.sleep(0.03)  # outside the decorated call: the other rank's next all-reduce waits for it
        train_step(torch.randn(64, 256), torch.randint(0, 10, (64,)))
    autoprof.flush()  # analysis and the cross-rank comparison finish before the group goes away
    dist.barrier()
    # Free the model (DDP's reducer holds the process group) while Python is alive: left to the interpreter's
    # teardown, a gloo worker thread can drop the last reference to a finished collective after Python has begun
    # to finalize, fail to take the GIL and abort the process ("terminate called without an active exception",
    # SIGABRT; with or without autoprof: 7 of 42 runs beside two busy processes, none of 80 with these lines).
    model = opt = None  # type: ignore[assignment]  # (the step function holds them too)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
