"""Lightning without touching the training code: ``Trainer(profiler=AutoprofProfiler())``.

Run:  python examples/lightning_trainer.py            (pip install 'autoprof[lightning]')
A small regression model trained for a few steps on the CPU. autoprof writes its JSON records to stderr (or to
``--sink``): an ``autoprof.window`` per recording window of ``Regressor.training_step`` (and of
``Regressor.validation_step``), whose ``sections`` say where in Lightning's step the time went, and an
``autoprof.finding`` per verdict. ``--callback`` uses ``AutoprofCallback`` instead (for a trainer that keeps
another profiler); ``--accumulate N`` makes each step N micro-batches; ``--devices 2`` runs DDP on two CPU
processes (gloo); ``--compile`` compiles the model first.
"""

from __future__ import annotations

import argparse

import torch

import autoprof
from autoprof.integrations.lightning import AutoprofCallback, AutoprofProfiler

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]


class Regressor(pl.LightningModule):  # type: ignore[misc]
    def __init__(self, compile_model: bool = False) -> None:
        super().__init__()
        net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
        self.net = torch.compile(net, backend="aot_eager") if compile_model else net

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", help="write the records to this file (default: stderr)")
    parser.add_argument("--trace-dir", help="keep each window's chrome trace in this folder")
    parser.add_argument("--callback", action="store_true", help="AutoprofCallback instead of AutoprofProfiler")
    parser.add_argument("--accumulate", type=int, default=1, help="accumulate_grad_batches")
    parser.add_argument("--devices", type=int, default=1, help="CPU processes (2: DDP over gloo)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (aot_eager)")
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps")
    args = parser.parse_args()

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(512, 64), torch.randn(512, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    # One window per stage: skip the first step, warm up one, record three (autoprof's keywords).
    options = {"skip_first": 1, "wait": 0, "warmup": 1, "active": 3, "repeat": 1, "sink": args.sink, "trace_dir": args.trace_dir}
    trainer = pl.Trainer(
        max_steps=args.steps,
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        accumulate_grad_batches=args.accumulate,
        profiler=None if args.callback else AutoprofProfiler(**options),
        callbacks=[AutoprofCallback(**options)] if args.callback else [],
        limit_val_batches=4,
        val_check_interval=min(args.steps * args.accumulate, 8),
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Regressor(args.compile), loader, loader)
    autoprof.flush()  # wait for the background analysis before the script ends


if __name__ == "__main__":
    main()
