"""Type-checked (never run) by tests/test_typing.py: each line marked ``# error`` must be reported by mypy."""

from __future__ import annotations

import torch

from autoprof import autoprof, configure, section


@autoprof
def step(x: torch.Tensor) -> torch.Tensor:
    return x


step("not a tensor")  # error
autoprof(name=3)  # error
autoprof(step, active="3")  # error
autoprof(step, every=2)  # error
autoprof(name="x")(step)("not a tensor")  # error
section(1)  # error
configure(noise_floor="high")  # error
configure(every=2)  # error
n: int = step(torch.ones(1))  # error
