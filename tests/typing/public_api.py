"""Type-checked (never run) by tests/test_typing.py with ``mypy --strict``: the public API keeps the types of
what it decorates. In type-checked code, use ``from autoprof import autoprof``: a type checker sees
``import autoprof`` as a module, which it does not let you call (it works at runtime)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from typing_extensions import assert_type

import autoprof as ap
from autoprof import Config, Finding, TraceError, analyze, autoprof, configure, flush, section
from autoprof.live.instrument import Section


@autoprof
def step(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return x * scale


@autoprof(name="train", wait=0, warmup=1, active=3, repeat=1, skip_first=2)
def train(batch: list[int]) -> float:
    return float(sum(batch))


@autoprof
async def fetch(n: int) -> bytes:
    return b"x" * n


class Model(torch.nn.Module):
    @autoprof
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @autoprof(name="helper")
    @classmethod
    def make(cls) -> Model:
        return cls()


as_callable: Callable[[torch.Tensor, float], torch.Tensor] = step  # the signature is kept
assert_type(step(torch.ones(1)), torch.Tensor)
assert_type(step(torch.ones(1), scale=2.0), torch.Tensor)
assert_type(train([1, 2]), float)
assert_type(Model().forward(torch.ones(1)), torch.Tensor)

model = autoprof(Model(), name="encoder")  # a module instance, named
assert_type(model, Model)
plain = autoprof(Model())
assert_type(plain, Model)


def to_text(x: int) -> str:
    return str(x)


decorate = autoprof(name="later", active=2)
later: Callable[[int], str] = decorate(to_text)
assert_type(decorate(to_text)(1), str)

with section("attn") as sec:
    assert_type(sec, Section)


@section("mlp")
def mlp(x: torch.Tensor) -> torch.Tensor:
    return x


assert_type(mlp(torch.ones(1)), torch.Tensor)
assert_type(flush(), bool)
assert_type(flush(timeout=1.0), bool)
configure(sink="autoprof.jsonl", background=False, noise_floor=0.02)
for finding in analyze("trace.json.gz"):
    assert_type(finding, Finding)
    assert_type(finding.verdict, str)
assert_type(Config().noise_floor, float)
assert_type(ap.section(""), Section)
err: type[ValueError] = TraceError
