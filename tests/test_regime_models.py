"""The regime verdict on real models and loops (issue 12): each scenario reads as what its trace shows.

Real models from configs with random weights (transformers' GPT2Config; never a download), a DataLoader,
torch.compile, forward + backward + optimizer steps. The figures in the comments were measured on the project's
2-core machine; the assertions hold with wide margins (see docs/rules.md, "Reading a CPU window").
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from conftest import own_share

import autoprof

pytestmark = pytest.mark.timing  # live verdicts that rest on CPU time: CI runs them alone

SCHEDULE = dict(skip_first=2, wait=0, warmup=1, active=3)


def _regime(records: Any, name: str, step: Any, calls: int = 7) -> dict[str, Any]:
    for _ in range(calls):
        step()
    found = records.findings(name)
    assert "bound_regime" in found, records.all()
    return found["bound_regime"]  # type: ignore[no-any-return]


def test_gpt2_training_step_is_overhead_bound(records: Any) -> None:
    import transformers  # a test dependency: GPT-2 from its config, random weights, no download

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (1, 8))

    @autoprof(name="gpt2", **SCHEDULE)
    def step() -> None:
        opt.zero_grad()
        model(ids, labels=ids).loss.backward()
        opt.step()

    r = _regime(records, "gpt2", step)
    # ~25 MFLOP in ~8 ms: thousands of small op calls; measured overhead 72%, op work 26%
    ev = r["evidence"]
    if records.judged(r, "overhead-bound"):
        assert ev["overhead_share"] > ev["work_share"] and "framework overhead" in r["message"]
    assert ev["small_op_call_count"] > 500 and ev["input_share"] == ev["comm_share"] == 0
    # the mask add inside torch's own aten::_scaled_dot_product_attention_math is nothing the user can fuse
    assert "unfused_bias_add" not in records.findings("gpt2")


class _SlowDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.01)  # decoding, augmentation: 10 ms per item (the input share keeps its margin on a loaded machine)
        return torch.randn(3, 32, 32), i % 10


def test_cnn_fed_by_a_slow_dataloader_is_input_bound(records: Any) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = iter(torch.utils.data.DataLoader(_SlowDataset(), batch_size=8, num_workers=0))

    @autoprof(name="cnn", **SCHEDULE)
    def step() -> None:
        x, y = next(batches)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    r = _regime(records, "cnn", step)
    if records.judged(r, "input-bound"):  # measured: input 83-89% of the step
        assert own_share(r["evidence"], "input_share") > 0.6
    assert "Python and dispatch" not in r["message"] and "torch.compile" not in r["advice"]


def test_compiled_wide_mlp_is_compute_bound(records: Any) -> None:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048)
    )
    compiled = torch.compile(mlp)
    x = torch.randn(32, 2048)

    @autoprof(name="mlp", **SCHEDULE)
    def step() -> torch.Tensor:
        with torch.no_grad():
            return compiled(x)  # type: ignore[no-any-return]

    r = _regime(records, "mlp", step)
    # skinny GEMMs (batch 32) at ~50% of the calibrated peak take ~93% of the step: op work, not overhead
    if records.judged(r, "compute-bound"):
        assert own_share(r["evidence"], "compute_work_share") > 0.6 and r["evidence"]["roofline_bound"] == "compute"


def test_many_tiny_elementwise_ops_are_overhead_bound(records: Any) -> None:
    x = torch.randn(16)

    @autoprof(name="tiny", **SCHEDULE)
    def step() -> torch.Tensor:
        y = x
        for _ in range(100):
            y = y * 1.0001 + 0.0001
        return y

    r = _regime(records, "tiny", step)
    records.judged(r, "overhead-bound")  # nanoseconds of math per op, microseconds per call
    assert r["evidence"]["small_op_call_count"] >= 600 and own_share(r["evidence"], "work_share") < 0.2


def test_large_softmax_is_memory_bound(records: Any) -> None:
    x = torch.randn(4096, 4096)

    @autoprof(name="softmax", **SCHEDULE)
    def step() -> torch.Tensor:
        return torch.softmax(x, dim=-1)

    r = _regime(records, "softmax", step, calls=6)
    if records.judged(r, "memory-bound"):
        assert own_share(r["evidence"], "memory_work_share") > 0.6 and r["evidence"]["roofline_bound"] == "memory"
    assert "tensor cores" not in r["advice"] and "TF32" not in r["advice"]


def test_cpu_advice_never_mentions_gpu_features(records: Any) -> None:
    from autoprof.rules import regime

    for verdict, advice in regime._CPU_ADVICE.items():
        assert "tensor core" not in advice and "TF32" not in advice and "CUDA" not in advice, verdict
