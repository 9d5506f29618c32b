"""Compare two runs (issue 23): `autoprof diff` and `autoprof.diff`, on traces made live here and on the shared
GPU traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import shared_trace, validate_record

import autoprof
from autoprof import cli, compare
from autoprof.compare import OpTime, Profile
from autoprof.findings import Finding


def _kept(tmp_path: Path, name: str, step: Any) -> Path:
    """Record one window of ``step`` with autoprof and keep its trace; the kept file."""
    folder = tmp_path / name
    autoprof.configure(trace_dir=str(folder), sink=str(tmp_path / f"{name}.jsonl"), background=False)
    wrapped = autoprof(step, name=name, skip_first=1, wait=0, warmup=1, active=3)
    for _ in range(5):
        wrapped()
    (kept,) = folder.glob("*.json.gz")
    return kept


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The base run: an nn.Linear step; the new run: the same with a manual ``x @ w + b`` and an extra
    elementwise op (slower, and an unfused bias add)."""
    tmp_path = tmp_path_factory.mktemp("runs")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64)  # the seed's size: the separate add is a fifth of the step
    x = torch.randn(64, 64)
    w, b = lin.weight.detach().t().contiguous(), lin.bias.detach()

    def base() -> torch.Tensor:
        with torch.no_grad():
            return lin(x)

    def new() -> torch.Tensor:
        y = x @ w + b
        return torch.relu(y) * 1.5

    return _kept(tmp_path, "base", base), _kept(tmp_path, "new", new)


def test_the_diff_names_added_ops_the_new_finding_and_the_step_time(runs: tuple[Path, Path]) -> None:
    base, new = runs
    (d,) = autoprof.diff(base, new, top=100)  # every change (the table lists the 10 largest)
    added = {c.key[0] for c in d.ops if c.kind == "added"}
    removed = {c.key[0] for c in d.ops if c.kind == "removed"}
    assert {"aten::mm", "aten::add", "aten::mul"} <= added | {c.key[0] for c in d.ops if c.kind == "slower"}
    assert "aten::addmm" in removed or "aten::linear" in removed
    assert all(c.key[1] for c in d.ops if c.key[0] in ("aten::mm", "aten::addmm"))  # matched with their shapes
    appeared = {c.rule: c for c in d.verdicts if c.kind == "appeared"}
    assert "unfused_bias_add" in appeared and appeared["unfused_bias_add"].new is not None
    assert d.step_change_pct is not None and d.base_steps and d.new_steps
    assert d.new_findings("warning")  # the unfused bias add is a warning


def test_identical_runs_have_no_change_and_pass_the_gate(runs: tuple[Path, Path], capsys: Any) -> None:
    base, _ = runs
    (d,) = autoprof.diff(base, base)
    assert d.unchanged and d.step_change_pct == 0.0
    assert cli.main(["diff", str(base), str(base), "--fail-on-regression", "5", "--fail-on-new", "info"]) == 0
    assert "no change" in capsys.readouterr().out


def test_exit_statuses_of_the_gate(runs: tuple[Path, Path], capsys: Any) -> None:
    base, new = runs
    (d,) = autoprof.diff(base, new)
    worse = d.step_change_pct or 0.0
    # a regression past the threshold fails the gate; under it does not
    if worse > 0:
        assert cli.main(["diff", str(base), str(new), "--fail-on-regression", str(max(worse - 1, 0))]) == 1
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", str(abs(worse) + 50)]) == 0
    assert cli.main(["diff", str(base), str(new), "--fail-on-new", "warning"]) == 1  # the unfused bias add appeared
    assert cli.main(["diff", str(new), str(base), "--fail-on-new", "warning"]) == 0  # it disappeared: no new finding
    capsys.readouterr()


def test_bad_inputs_are_one_line_and_status_2(tmp_path: Path, runs: tuple[Path, Path], capsys: Any) -> None:
    base, _ = runs
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args in ([str(base), str(tmp_path / "missing.json")], [str(bad), str(base)]):
        assert cli.main(["diff", *args]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("autoprof: ")
    assert cli.main(["diff", str(base), str(base), "--fail-on-regression", "-3"]) == 2  # bad usage
    capsys.readouterr()
    with pytest.raises(autoprof.TraceError):
        autoprof.diff(base, tmp_path / "missing.json")


def test_json_records_are_valid_diff_records(runs: tuple[Path, Path], capsys: Any) -> None:
    base, new = runs
    assert cli.main(["diff", "--json", str(base), str(new)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    rec = json.loads(line)
    validate_record(rec)
    assert rec["event"] == "autoprof.diff" and rec["base"] == str(base) and rec["new"] == str(new)
    assert any(c["rule"] == "unfused_bias_add" and c["change"] == "appeared" for c in rec["verdict_changes"])
    assert rec["step_ms"]["change_pct"] is not None


def test_a_diff_across_gpus_states_the_device_change_and_the_gemm_kernels() -> None:
    a100 = shared_trace("hta/a100_rank0_of2_convnet.json.gz")
    h200 = shared_trace("h200/seed2048.chrome.json.gz")
    (d,) = autoprof.diff(a100, h200)
    assert d.devices == (["NVIDIA A100-PG509-200"], ["NVIDIA H200"])
    assert d.gemm_kernels is not None
    before, after = d.gemm_kernels
    assert any("cutlass_80_simt_sgemm" in k for k in after) and not set(before) & set(after)


# -- the pure comparison, on small profiles built here ---------------------------------------------------------------


def _profile(ops: dict[tuple[str, str], OpTime], findings: list[Finding] | None = None, steps: list[int] | None = None) -> Profile:
    return Profile("p", 0, steps or [1_000_000] * 3, ops, {}, [], findings or [])


def test_ops_are_matched_by_name_and_shapes_never_by_position() -> None:
    base = _profile({("aten::mm", "[[64, 64], [64, 64]]"): OpTime(3, 300_000), ("aten::mm", "[[8, 8], [8, 8]]"): OpTime(3, 30_000)})
    new = _profile({("aten::mm", "[[8, 8], [8, 8]]"): OpTime(3, 30_000), ("aten::mm", "[[64, 64], [64, 64]]"): OpTime(3, 600_000)})
    d = compare.compare_one(base, new)
    assert [(c.kind, c.key) for c in d.ops] == [("slower", ("aten::mm", "[[64, 64], [64, 64]]"))]


def test_tiny_changes_are_no_news_and_call_counts_are_said() -> None:
    base = _profile({("aten::add", ""): OpTime(3, 3_000), ("aten::mul", ""): OpTime(3, 200_000)})
    new = _profile({("aten::add", ""): OpTime(3, 4_000), ("aten::mul", ""): OpTime(6, 205_000)})
    d = compare.compare_one(base, new)
    assert [(c.kind, c.key[0]) for c in d.ops] == [("more calls", "aten::mul")]  # 1 µs on a 3 µs add is noise


def test_a_regime_that_moved_is_one_change_with_both_sides() -> None:
    def regime(v: str) -> Finding:
        return Finding("bound_regime", v, "info", v, "a", {"work_share": 0.5})

    d = compare.compare_one(_profile({}, [regime("compute-bound")]), _profile({}, [regime("overhead-bound")]))
    (c,) = d.verdicts
    assert c.kind == "moved" and c.base and c.new and (c.base.verdict, c.new.verdict) == ("compute-bound", "overhead-bound")


# -- live drift between a target's windows ----------------------------------------------------------------------


def test_drift_margins() -> None:
    from autoprof.drift import WindowSummary, check

    first = WindowSummary(0, 10.0, "compute-bound")
    assert check(first, WindowSummary(1, 11.0, "compute-bound")) == []  # 10%: jitter
    (slow,) = check(first, WindowSummary(1, 13.0, "compute-bound"))
    assert slow.verdict == "drifted" and slow.severity == "warning" and slow.evidence["change_ratio"] == 0.3
    (moved,) = check(first, WindowSummary(2, 10.2, "overhead-bound"))
    assert "regime moved from compute-bound to overhead-bound" in moved.message and moved.severity == "info"
    assert check(WindowSummary(0, 0.5, None), WindowSummary(1, 0.9, None)) == []  # +0.4 ms: under 1 ms


def test_a_later_window_that_slowed_down_is_a_window_drift_finding(records: Any) -> None:
    import time

    delay = [0.0]

    @autoprof(name="drifting", skip_first=0, wait=0, warmup=1, active=2, repeat=3)
    def step() -> None:
        time.sleep(delay[0])

    for _ in range(3):  # the first window: 2 ms steps
        delay[0] = 0.002
        step()
    assert "window_drift" not in records.findings("drifting")
    for _ in range(3):  # the second: 12 ms steps
        delay[0] = 0.012
        step()
    drifts = [r for r in records.of("autoprof.finding", target="drifting") if r["rule"] == "window_drift"]
    assert len(drifts) == 1 and drifts[0]["window"] == 1 and drifts[0]["evidence"]["first_window"] == 0
    assert drifts[0]["evidence"]["step_ms"] > 2 * drifts[0]["evidence"]["first_step_ms"]


def test_files_are_paired_by_rank_else_by_name() -> None:
    def p(path: str, rank: int) -> Profile:
        return Profile(path, rank, [1], {}, {}, [])

    # per-rank traces of a job: by rank
    assert [(b.path, n.path) for b, n in compare.pairs([p("a/r0", 0), p("a/r1", 1)], [p("b/x1", 1), p("b/x0", 0)])] == [
        ("a/r0", "b/x0"),
        ("a/r1", "b/x1"),
    ]
    # a kept trace_dir with two targets of rank 0: by file name
    base = [p("ref/train.window0.rank0.pt.trace.json.gz", 0), p("ref/eval.window0.rank0.pt.trace.json.gz", 0)]
    new = [p("new/eval.window0.rank0.pt.trace.json.gz", 0), p("new/train.window0.rank0.pt.trace.json.gz", 0)]
    assert [(b.path, n.path) for b, n in compare.pairs(base, new)] == [
        ("ref/eval.window0.rank0.pt.trace.json.gz", "new/eval.window0.rank0.pt.trace.json.gz"),
        ("ref/train.window0.rank0.pt.trace.json.gz", "new/train.window0.rank0.pt.trace.json.gz"),
    ]
