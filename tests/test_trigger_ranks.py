"""Catch the slow step across ranks (issue 35): two gloo ranks on the CPU through torchrun, as tests/test_distributed.py
runs them. Rank 1's batches turn slow part-way through a run: it opens a triggered window that says so (its ``rank``);
rank 0 goes on with its own schedule and opens none; the scheduled windows before and after it (a second run) are
still compared across the ranks, window for window."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import torchrun

pytestmark = [pytest.mark.slow, pytest.mark.timing]

SCRIPT = """
import os
import time
import torch
import torch.distributed as dist
from autoprof.live.instrument import Steps

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
w = torch.randn(64, 64)
steps = Steps("rank_step")  # the trigger from the environment (AUTOPROF_TRIGGER=true)
for run, n in enumerate((50, 8)):
    if run:
        steps.restart()  # a second run: the schedule's window again, compared across the ranks
    for i in range(n):
        with steps.step(i):
            if rank == 1 and run == 0 and i >= 40:
                time.sleep(0.08)  # rank 1's batches turn slow
            time.sleep(0.01)  # steps of ~10 ms: a shared machine's hiccups stay below twice that
            (w @ w).sum().item()
    steps.stop()
import autoprof
autoprof.flush()  # the analysis and the cross-rank comparisons finish before the group goes away
dist.barrier()
dist.destroy_process_group()
os.write(1, f"rank {rank} done\\n".encode())  # one write: the two ranks share the pipe
"""


def _torchrun(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    return torchrun(
        script,
        tmp_path,
        AUTOPROF_TRIGGER="true",
        AUTOPROF_TRIGGER_BUDGET="0.2",  # a triggered window may open from step 20 (4 profiled steps): a short run
        AUTOPROF_CROSS_RANK_TIMEOUT="10",  # a comparison that waited for a window the other rank never recorded
    )


def test_a_rank_that_triggers_says_so_and_the_others_go_on(tmp_path: Path) -> None:
    out, recs = _torchrun(tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rank 0 done" in out.stdout and "rank 1 done" in out.stdout
    windows = [r for r in recs if r["event"] == "autoprof.window"]
    mine = {rank: [w for w in windows if w["rank"] == rank] for rank in (0, 1)}
    # rank 0: its scheduled window of each run, nothing triggered by rank 1's slowdown
    assert [w["trigger"] for w in mine[0]] == [None, None] and [w["window"] for w in mine[0]] == [0, 1]
    # rank 1: the scheduled window, the triggered one (its own index), the second run's scheduled window
    assert [w["trigger"] is None for w in mine[1]] == [True, False, True] and [w["window"] for w in mine[1]] == [0, 1, 2]
    triggered = mine[1][1]
    t = triggered["trigger"]
    assert triggered["world_size"] == 2 and triggered["rank"] == 1
    assert t["kind"] == "persistent" and t["step"] == 41 and t["slow_steps"][-2:] == [40, 41] and t["ratio"] > 3, t
    assert triggered["steps"] == [44, 45, 46] and t["transient"] is False
    findings = [r for r in recs if r["event"] == "autoprof.finding" and r.get("window") == 1 and r["rank"] == 1]
    assert "bound_regime" in {f["rule"] for f in findings}  # its findings say the rank too
    # the scheduled windows are compared across the ranks, window for window (rank 1's second scheduled window is
    # its third): one comparison each, by rank 0, and none waited for a window the other rank never recorded
    compared = [r for r in recs if r.get("rule") == "straggler_ranks"]
    assert [(r["rank"], r["window"]) for r in compared] == [(0, 0), (0, 1)], compared
    assert not [r for r in recs if r["event"] == "autoprof.warning" and r["reason"] == "cross_rank_skipped"]
