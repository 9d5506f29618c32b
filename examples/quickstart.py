"""The seed's experiment: torch.add(torch.matmul(x, w), b) in a decorated step, at 64×64 and at 2048×2048.

Run:  python examples/quickstart.py
autoprof writes its records to stderr (JSON lines; on a terminal, text and a summary at the end): an
``autoprof.window`` record per recording window and an ``autoprof.finding`` per verdict. At 64×64 the step is
overhead-bound (Python and dispatch dominate); at 2048×2048 it is compute-bound. The matmul-then-add pair is an
unfused bias add, but on a CPU ``addmm`` still copies the bias into its output, so fusing saves about half of the
add's time beyond a call's fixed cost: at 2048×2048 that is under the noise floor (1 % of the step) and the
``unfused_bias_add`` finding is not written; at 64×64, where the add's own call is a fifth of a tiny step, it is (on
a GPU, where the GEMM takes the bias in its epilogue, it is at both sizes: the H200 traces of this step show it).
"""

from __future__ import annotations

import torch

import autoprof


def make_step(n: int):
    torch.manual_seed(0)
    x, w, b = torch.randn(n, n), torch.randn(n, n), torch.randn(n)

    @autoprof(name=f"seed_step_{n}x{n}")
    def step() -> torch.Tensor:
        return torch.add(torch.matmul(x, w), b)

    return step


def main() -> None:
    for n in (64, 2048):
        step = make_step(n)
        for _ in range(8):  # defaults: skip the cold first call, wait 1, warm up 1, record 3
            step()
    autoprof.flush()  # wait for the background analysis before the script ends


if __name__ == "__main__":
    main()
