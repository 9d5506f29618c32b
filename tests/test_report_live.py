"""The report of a live run (torch runs in a subprocess here, unlike tests/test_report.py)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_report import _browse, _png_colors

from autoprof.trace import chrome


@pytest.mark.slow
def test_a_live_window_report_next_to_the_kept_traces(tmp_path: Path) -> None:
    """configure(trace_dir=..., report=True): the page is written at the end of the run, next to the traces."""
    script = tmp_path / "run.py"
    script.write_text(
        "import torch, autoprof\n"
        f"autoprof.configure(trace_dir={str(tmp_path / 'traces')!r}, report=True, sink={str(tmp_path / 'r.jsonl')!r})\n"
        "@autoprof(skip_first=1, wait=0, warmup=1, active=3, repeat=1)\n"
        "def step(x):\n"
        "    with autoprof.section('matmul'):\n"
        "        y = x @ x\n"
        "    return torch.relu(y).sum()\n"
        "x = torch.randn(256, 256)\n"
        "for _ in range(6):\n"
        "    step(x)\n"
    )
    e = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=e, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    page = tmp_path / "traces" / "autoprof-report.rank0.html"
    assert page.exists(), sorted(p.name for p in (tmp_path / "traces").iterdir())
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert not [r for r in records if r["event"] == "autoprof.error"]
    dom, console, shot = _browse(page, tmp_path)
    assert console == [], console
    assert 'id="roofline0"' in dom and dom.count('class="main-svg"') >= 2
    assert "No device activity strip" in dom  # a CPU window
    assert _png_colors(shot) > 20
    kept = next((tmp_path / "traces").glob("*.pt.trace.json.gz"))
    with gzip.open(kept, "rt") as f:
        assert chrome.from_document(json.load(f)).steps  # the page was made from these
