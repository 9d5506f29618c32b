"""``autoprof run SCRIPT [ARGS...]``: an unmodified script, with its own argv, output and exit status; a plain loop's
steps found at each optimizer step; Lightning through its integration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, validate_record

PLAIN = """
import sys, torch
print("argv", sys.argv[1:], __name__)
torch.manual_seed(0)
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[sys.argv.index("--lr") + 1]))
for _ in range(10):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("weights", round(float(model.weight.sum()), 6))
if "--fail" in sys.argv:
    raise ValueError("the script failed")
if "--exit" in sys.argv:
    sys.exit(3)
if "--interrupt" in sys.argv:  # a Ctrl-C
    import os, signal, time
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    return env


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(), timeout=300, cwd=cwd)


def _records(sink: Path) -> list[dict[str, Any]]:
    recs = [json.loads(line) for line in sink.read_text().splitlines()]
    for r in recs:
        validate_record(r)
    return recs


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(PLAIN)
    return script


def test_a_plain_loop_runs_unmodified_and_its_optimizer_steps_are_the_steps(plain: Path) -> None:
    alone = _python(plain.parent, "train.py", "--lr", "0.05")
    sink = plain.parent / "r.jsonl"
    run = _python(plain.parent, "-m", "autoprof", "run", "--active", "2", "--warmup", "1", "--sink", str(sink), "train.py", "--lr", "0.05")
    assert alone.returncode == run.returncode == 0, run.stderr
    assert run.stdout == alone.stdout  # its own argv, its own output, the same result
    assert "argv ['--lr', '0.05'] __main__" in run.stdout
    recs = _records(sink)
    (window,) = [r for r in recs if r["event"] == "autoprof.window"]
    assert window["target"] == "train.step" and len(window["steps"]) == 2  # found without a decorator
    assert any(r["event"] == "autoprof.finding" and r["rule"] == "bound_regime" for r in recs)
    summary = recs[-1]
    assert summary["event"] == "autoprof.summary" and summary["targets"][0]["target"] == "train.step"


@pytest.mark.parametrize(
    ("flag", "status", "ended"),
    [
        ("--exit", 3, "with exit status 3 (sys.exit)"),
        ("--fail", 1, "by an exception (ValueError)"),
        ("--interrupt", -2, "interrupted (KeyboardInterrupt)"),
    ],
)
def test_a_script_that_fails_exits_as_it_would_without_autoprof(plain: Path, flag: str, status: int, ended: str) -> None:
    alone = _python(plain.parent, "train.py", "--lr", "0.1", flag)
    sink = plain.parent / "r.jsonl"
    run = _python(plain.parent, "-m", "autoprof", "run", "--sink", str(sink), "train.py", "--lr", "0.1", flag)
    assert alone.returncode == run.returncode == status
    assert run.stdout == alone.stdout
    if flag != "--exit":
        last = "ValueError: the script failed" if flag == "--fail" else "KeyboardInterrupt"
        assert run.stderr.rstrip().splitlines()[-1] == last == alone.stderr.rstrip().splitlines()[-1]
    assert _records(sink)[-1]["ended"] == ended


SUITE_IN_THE_BACKGROUND = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a non-interactive shell starts `pytest ... &`
sys.path.insert(0, sys.argv[1])
import conftest  # what pytest imports before any test
ctrl_c = "import os, signal; os.kill(os.getpid(), signal.SIGINT); print('ignored')"
print(subprocess.run([sys.executable, "-c", ctrl_c], capture_output=True, text=True, timeout=120).returncode)
"""


def test_the_suites_pythons_get_their_ctrl_c_even_when_the_suite_was_started_with_sigint_ignored() -> None:
    """The Ctrl-C tests above (and tests/test_text.py's, tests/test_faults.py's storms) need a SIGINT to reach the Python
    that sends it. Run in the background by a non-interactive shell, the suite inherited SIGINT ignored and so did its
    Pythons: the script exited 0 after its sleep, with and without autoprof (a Ctrl-C "lost under load"). conftest puts
    Python's handler back, which each exec resets to the default."""
    done = subprocess.run(
        [sys.executable, "-c", SUITE_IN_THE_BACKGROUND, str(REPO / "tests")], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "-2", done.stdout  # killed by its SIGINT, as from a terminal


def test_a_zipapp_runs_as_python_runs_it(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as z:
        z.writestr("__main__.py", "import sys\nprint('zip', sys.argv)\n")
    alone = _python(tmp_path, "app.pyz", "a")
    run = _python(tmp_path, "-m", "autoprof", "run", "app.pyz", "a")
    assert alone.returncode == run.returncode == 0 and run.stdout == alone.stdout == "zip ['app.pyz', 'a']\n", run.stderr


def test_bad_usage_is_one_line_and_the_script_never_runs(tmp_path: Path) -> None:
    missing = _python(tmp_path, "-m", "autoprof", "run", "nope.py")
    assert missing.returncode == 2 and missing.stderr == "autoprof: can't open file 'nope.py': not a file\n"
    (tmp_path / "t.py").write_text("print('ran')\n")
    bad = _python(tmp_path, "-m", "autoprof", "run", "--active", "0", "t.py")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("autoprof: active must be an integer from 1")
    assert len(bad.stderr.splitlines()) == 1


LIGHTNING = """
import torch
try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 1)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

data = torch.utils.data.TensorDataset(torch.randn(128, 16), torch.randn(128, 1))
trainer = pl.Trainer(max_steps=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, accelerator="cpu", devices=1)
trainer.fit(Regressor(), torch.utils.data.DataLoader(data, batch_size=16))
print("fitted", trainer.global_step)
"""


def test_an_unmodified_lightning_script_gets_the_integration(tmp_path: Path) -> None:
    pytest.importorskip("lightning", reason="Lightning is the test extra's")
    (tmp_path / "fit.py").write_text(textwrap.dedent(LIGHTNING))
    sink = tmp_path / "r.jsonl"
    run = _python(tmp_path, "-m", "autoprof", "run", "--skip-first", "1", "--wait", "0", "--active", "2", "--sink", str(sink), "fit.py")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "fitted 8" in run.stdout
    windows = [r for r in _records(sink) if r["event"] == "autoprof.window"]
    assert windows and {w["target"] for w in windows} == {"Regressor.training_step"}  # the trainer's steps, not the clock's
    assert all(w.get("framework") == "lightning" for w in windows)


HF = """
import tempfile, torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class Tokens(torch.utils.data.Dataset):
    def __init__(self):
        self.ids = torch.randint(0, 512, (40, 32), generator=torch.Generator().manual_seed(0))
    def __len__(self):
        return len(self.ids)
    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=512, n_positions=64, bos_token_id=0, eos_token_id=0))
with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, max_steps=6, per_device_train_batch_size=4, use_cpu=True, report_to=[],
                             save_strategy="no", logging_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
print("trained", trainer.state.global_step)
"""


def test_an_unmodified_hugging_face_trainer_script_gets_the_integration(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="transformers is the test extra's")
    (tmp_path / "hf.py").write_text(textwrap.dedent(HF))
    sink = tmp_path / "r.jsonl"
    run = _python(tmp_path, "-m", "autoprof", "run", "--skip-first", "1", "--wait", "0", "--active", "2", "--sink", str(sink), "hf.py")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "trained 6" in run.stdout
    windows = [r for r in _records(sink) if r["event"] == "autoprof.window"]
    assert windows and {w["target"] for w in windows} == {"GPT2LMHeadModel.training_step"}
    assert all(w.get("framework") == "transformers" for w in windows)


EVAL = """
import sys, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
loader = DataLoader(TensorDataset(torch.randn(96, 16)), batch_size=8)
total = 0.0
with torch.no_grad():
    for _ in range(2):  # two passes over the data: the first DataLoader's batches are the steps
        for (x,) in loader:
            total += float(model(x).sum())
print("total", round(total, 4))
"""


def test_a_loop_with_no_optimizer_steps_at_each_batch_of_its_dataloader(tmp_path: Path) -> None:
    # issue 48: a plain loop's steps are found without a decorator: each optimizer step, or a DataLoader's batch
    (tmp_path / "evaluate.py").write_text(EVAL)
    alone = _python(tmp_path, "evaluate.py")
    sink = tmp_path / "r.jsonl"
    run = _python(tmp_path, "-m", "autoprof", "run", "--sink", str(sink), "--skip-first", "1", "evaluate.py")
    assert alone.returncode == run.returncode == 0, run.stderr
    assert run.stdout == alone.stdout  # what the script computes is unchanged
    recs = _records(sink)
    windows = [r for r in recs if r["event"] == "autoprof.window" and r["target"] == "evaluate.step"]
    assert windows and all(len(w["steps"]) >= 1 for w in windows), [r.get("message") for r in recs]
    assert not [r for r in recs if r.get("reason") == "no_step"]
