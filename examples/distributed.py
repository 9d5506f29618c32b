"""autoprof on several ranks (CPU, gloo). Launch:

    torchrun --nproc_per_node=2 examples/distributed.py [--slow-rank 1]

Each rank profiles its own window and writes records carrying its rank; the lowest rank compares the ranks'
step times and regimes and names stragglers. With --trace-dir, each rank keeps its window as
<target>.window0.rank<R>.pt.trace.json.gz, and `autoprof analyze DIR` gives the same straggler verdict.
"""

from __future__ import annotations

import argparse
import gc
import time

import torch
import torch.distributed as dist

import autoprof


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slow-rank", type=int, default=1, help="this rank sleeps 30 ms per step (-1: none)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--stop-early-rank", type=int, default=-1, help="this rank stops after 2 steps (before its window)")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.trace_dir:
        autoprof.configure(trace_dir=args.trace_dir)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @autoprof(name="train_step")
    def train_step(x: torch.Tensor, y: torch.Tensor) -> float:
        if rank == args.slow_rank:
            time.sleep(0.03)  # a straggler: slow input, a throttled device, uneven work ...
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        return float(loss)

    for i in range(args.steps):
        if rank == args.stop_early_rank and i >= 2:
            x = torch.randn(64, 256)  # this rank keeps training without calling the decorated step
            torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (64,))).backward()
        else:
            train_step(torch.randn(64, 256), torch.randint(0, 10, (64,)))
        for p in model.parameters():  # gradient averaging after the step, outside the profiled target
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
    autoprof.flush()  # analysis and the cross-rank comparison finish before the group goes away
    dist.barrier()
    # Free the model and its optimizer, and collect, while Python is alive: left to the interpreter's
    # teardown, a gloo worker thread can drop the last reference to a finished collective after Python has begun
    # to finalize, fail to take the GIL and abort the process ("terminate called without an active exception",
    # SIGABRT; with or without autoprof: 1 of 25 runs beside two busy processes, none of 80 with these lines).
    model = opt = None  # type: ignore[assignment]  # (the step function holds them too)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
