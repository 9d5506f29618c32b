"""Two gloo ranks on CPU through torchrun: rank-aware records, per-rank traces, stragglers, never a hang."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from conftest import torchrun as run_two_ranks

import autoprof

pytestmark = [pytest.mark.slow, pytest.mark.timing]


def torchrun(
    tmp_path: Path, *args: str, script: str = "distributed.py", **env: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    return run_two_ranks(REPO / "examples" / script, tmp_path, *args, **env)


def test_two_ranks_straggler_named_live_and_offline(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    out, recs = torchrun(tmp_path, "--slow-rank", "1", "--trace-dir", str(traces))
    assert out.returncode == 0, out.stderr[-3000:]
    windows = {r["rank"]: r for r in recs if r["event"] == "autoprof.window"}
    assert set(windows) == {0, 1}
    for rank, w in windows.items():
        assert w["world_size"] == 2 and w["local_rank"] == rank
        assert w["trace_path"].endswith(f"train_step.window0.rank{rank}.pt.trace.json.gz")
    strag = [r for r in recs if r.get("rule") == "straggler_ranks"]
    assert len(strag) == 1 and strag[0]["rank"] == 0  # emitted once, by the lowest rank
    assert strag[0]["evidence"]["straggler_ranks"] == [1]
    files = sorted(traces.iterdir())
    assert [f.name for f in files] == ["train_step.window0.rank0.pt.trace.json.gz", "train_step.window0.rank1.pt.trace.json.gz"]
    offline = [f for f in autoprof.analyze(traces) if f.rule == "straggler_ranks"]
    assert len(offline) == 1 and offline[0].evidence["straggler_ranks"] == [1]


def test_a_rank_that_stops_early_never_hangs_the_job(tmp_path: Path) -> None:
    out, recs = torchrun(tmp_path, "--slow-rank", "-1", "--stop-early-rank", "1", AUTOPROF_CROSS_RANK_TIMEOUT="2")
    assert out.returncode == 0, out.stderr[-3000:]
    warns = [r for r in recs if r["event"] == "autoprof.warning" and r["reason"] == "cross_rank_skipped"]
    assert len(warns) == 1 and warns[0]["rank"] == 0 and "[1]" in warns[0]["message"]
    assert not [r for r in recs if r.get("rule") == "straggler_ranks"]


def test_excluded_rank_pays_only_the_idle_cost(tmp_path: Path) -> None:
    out, recs = torchrun(tmp_path, "--slow-rank", "-1", AUTOPROF_RANKS="0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert {r["rank"] for r in recs if r["event"] == "autoprof.window"} == {0}
    warns = [r for r in recs if r["event"] == "autoprof.warning" and r["reason"] != "machine_busy"]  # (how busy the test machine was)
    assert len(warns) == 1 and "only rank(s) [0]" in warns[0]["message"]


# -- real DistributedDataParallel: the all-reduce inside the step --------------------------------------------------


def _ddp(tmp_path: Path, *args: str, **env: str) -> tuple[list[dict[str, Any]], list[Any]]:
    traces = tmp_path / "traces"
    out, recs = torchrun(tmp_path, *args, "--trace-dir", str(traces), script="ddp.py", **env)
    assert out.returncode == 0, out.stderr[-3000:]
    return recs, autoprof.analyze(traces)


def _live(recs: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return [r for r in recs if r.get("rule") == rule]


def test_ddp_rank_slow_inside_its_step_is_named_and_the_waiting_rank_is_communication_bound(tmp_path: Path) -> None:
    recs, offline = _ddp(tmp_path, "--slow-rank", "1", "--slow-where", "inside")
    (strag,) = _live(recs, "straggler_ranks")
    assert strag["verdict"] == "stragglers" and strag["evidence"]["straggler_ranks"] == [1], strag
    assert strag["evidence"]["method"] == "collective_wait" and strag["evidence"]["wait_for_stragglers_ms"] > 15
    regime = {r["rank"]: r for r in _live(recs, "bound_regime")}
    assert regime[0]["verdict"] == "communication-bound", regime[0]
    assert "Python and dispatch" not in regime[0]["message"]
    assert not _live(recs, "rank_regime_mismatch")  # the straggler explains why the ranks read apart
    (off,) = [f for f in offline if f.rule == "straggler_ranks"]
    assert off.verdict == "stragglers" and off.evidence["straggler_ranks"] == [1]


def test_ddp_rank_slow_between_steps_is_still_named(tmp_path: Path) -> None:
    recs, offline = _ddp(tmp_path, "--slow-rank", "1", "--slow-where", "between")
    (strag,) = _live(recs, "straggler_ranks")
    # rank 0's steps are the long ones (it waits inside them); rank 1 is slow outside its decorated call
    assert strag["verdict"] == "stragglers" and strag["evidence"]["straggler_ranks"] == [1], strag
    (off,) = [f for f in offline if f.rule == "straggler_ranks"]
    assert off.evidence["straggler_ranks"] == [1]


def test_balanced_ddp_has_no_straggler(tmp_path: Path) -> None:
    # ten recorded steps: the median step's wait is then robust to four steps of a preempted rank (2 processes on
    # 2 cores jitter by a few ms; with five, one CI run beside the other releases' installs read a straggler)
    recs, offline = _ddp(tmp_path, "--slow-rank", "-1", "--steps", "16", AUTOPROF_ACTIVE="10")
    (strag,) = _live(recs, "straggler_ranks")
    assert strag["verdict"] == "balanced" and strag["severity"] == "info", strag["evidence"]
    assert [f.verdict for f in offline if f.rule == "straggler_ranks"] == ["balanced"]
