"""The Hugging Face Trainer without touching the training code: ``Trainer(callbacks=[AutoprofCallback()])``.

Run:  python examples/hf_trainer.py            (pip install 'autoprof[transformers]')
A small GPT-2 built from its config (random weights: nothing is downloaded) trained for a few steps on the CPU.
autoprof writes its JSON records to stderr (or to ``--sink``): an ``autoprof.window`` per recording window of
``GPT2LMHeadModel.training_step``, numbered by the Trainer's ``global_step``, with the step's phases as sections
(``forward_backward``, ``optimizer_step``, ``after_optimizer_step``), and an ``autoprof.finding`` per verdict.
``--accumulate N`` makes each step N micro-batches; ``--compile`` has the Trainer compile the model.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch

import autoprof
from autoprof.integrations.transformers import AutoprofCallback

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from a config: never the hub


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Random token sequences (a language model's batches)."""

    def __init__(self, n: int, length: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", help="write the records to this file (default: stderr)")
    parser.add_argument("--trace-dir", help="keep each window's chrome trace in this folder")
    parser.add_argument("--accumulate", type=int, default=1, help="gradient_accumulation_steps")
    parser.add_argument("--compile", action="store_true", help="TrainingArguments(torch_compile=True), aot_eager")
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps")
    args = parser.parse_args()

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=512, n_positions=64, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out,
            max_steps=args.steps,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=args.accumulate,
            torch_compile=args.compile,
            torch_compile_backend="aot_eager" if args.compile else None,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        # One window: skip the first step, warm up one, record three (autoprof's keywords).
        callback = AutoprofCallback(skip_first=1, wait=0, warmup=1, active=3, repeat=1, sink=args.sink, trace_dir=args.trace_dir)
        data = Tokens(4 * args.accumulate * (args.steps + 1), 32, config.vocab_size)
        Trainer(model=model, args=training, train_dataset=data, callbacks=[callback]).train()
    autoprof.flush()  # wait for the background analysis before the script ends


if __name__ == "__main__":
    main()
