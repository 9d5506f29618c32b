"""Compare two runs (issue 23): `autoprof diff` and `autoprof.diff`, on traces made live here and on the shared
GPU traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import shared_trace, validate_record

import autoprof
from autoprof import cli
from autoprof.analysis import compare
from autoprof.analysis.compare import OpTime, Profile
from autoprof.findings import Finding
from autoprof.render import diff as render_diff


def _kept(tmp_path: Path, name: str, step: Any) -> Path:
    """Record one window of ``step`` with autoprof and keep its trace; the kept file."""
    folder = tmp_path / name
    autoprof.configure(trace_dir=str(folder), sink=str(tmp_path / f"{name}.jsonl"), background=False)
    wrapped = autoprof(step, name=name, skip_first=1, wait=0, warmup=1, active=8)
    for _ in range(10):
        wrapped()
    (kept,) = folder.glob("*.json.gz")
    return kept


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The base run: an nn.Linear step; the new run: the same with a manual ``x @ w + b`` and an extra
    elementwise op (slower, and an unfused bias add)."""
    tmp_path = tmp_path_factory.mktemp("runs")
    torch.manual_seed(0)
    # an add of 2048x512 floats (12 MB of traffic: hundreds of us at any CPU's bandwidth), far past a call's fixed
    # cost (CALL_FLOOR_NS, 5 us), which is all that a fused bias would save, and a large share of the new step (a
    # 16-deep matmul is cheap). At the seed's 64x64, and then at 512x256 (CI, torch 2.4.1: the add 12 us into memory
    # it reused, the relu and the mul 100+ us each faulting in fresh pages), a fast CPU ran the add in about that cost:
    # fusing saved under 1% of the step, and the finding came and went from run to run (correctly: a finding about
    # nothing)
    lin = torch.nn.Linear(16, 512)
    x = torch.randn(2048, 16)
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
    assert d.step_shift is not None and d.step_shift.within_noise and d.step_shift.estimate == 0
    assert cli.main(["diff", str(base), str(base), "--fail-on-regression", "5", "--fail-on-new", "info"]) == 0
    out = capsys.readouterr().out
    assert "no change (within noise)" in out and "base 8 steps, new 8 steps" in out


def test_exit_statuses_of_the_gate(runs: tuple[Path, Path], capsys: Any) -> None:
    base, new = runs
    (d,) = autoprof.diff(base, new)
    gate = d.gate(5)
    assert gate.reason is None and gate.interval_pct is not None  # 8 steps a side: an interval
    lo, hi = gate.interval_pct
    # the gate trips on the interval's low end, not on the estimate
    if lo > 0:
        assert cli.main(["diff", str(base), str(new), "--fail-on-regression", str(lo * 0.9)]) == 1
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", str(max(hi, 0) + 50)]) == 0
    assert cli.main(["diff", str(base), str(new), "--fail-on-new", "warning"]) == 1  # the unfused bias add appeared
    (back,) = autoprof.diff(new, base)  # it disappeared: no new finding of it (other verdicts follow the timing)
    assert not any(f.rule == "unfused_bias_add" for f in back.new_findings("warning"))
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
    assert d.ops == []  # 1 µs on a 3 µs add is noise; the mul's time moved with its calls
    assert [(c.kind, c.key[0]) for c in d.calls] == [("more calls", "aten::mul")]  # a change of calls, said apart


def test_kernels_whose_launches_changed_are_listed_apart_from_time(capsys: Any) -> None:
    k = ("aten::mul", "", "vectorized_elementwise_kernel")
    base = Profile("p", 0, [1_000_000] * 3, {}, {k: OpTime(3, 200_000)}, [])
    new = Profile("p", 0, [1_000_000] * 3, {}, {k: OpTime(12, 210_000)}, [])
    d = compare.compare_one(base, new)
    assert d.kernels == [] and [(c.kind, c.key) for c in d.kernel_calls] == [("more calls", k)]
    assert d.to_json()["kernel_call_changes"][0]["change"] == "more calls" and not d.unchanged
    render_diff.table(d, sys.stdout)
    assert "kernel launches per step" in capsys.readouterr().out


def test_a_regime_that_moved_is_one_change_with_both_sides() -> None:
    def regime(v: str) -> Finding:
        return Finding("bound_regime", v, "info", v, "a", {"work_share": 0.5})

    d = compare.compare_one(_profile({}, [regime("compute-bound")]), _profile({}, [regime("overhead-bound")]))
    (c,) = d.verdicts
    assert c.kind == "moved" and c.base and c.new and (c.base.verdict, c.new.verdict) == ("compute-bound", "overhead-bound")


# -- live drift between a target's windows ----------------------------------------------------------------------


def test_drift_margins() -> None:
    from autoprof.analysis.drift import WindowSummary, check

    first = WindowSummary(0, 10.0, "compute-bound")
    assert check(first, WindowSummary(1, 11.0, "compute-bound")) == []  # 10%: jitter
    (slow,) = check(first, WindowSummary(1, 13.0, "compute-bound"))
    assert slow.verdict == "drifted" and slow.severity == "warning" and slow.evidence["change_ratio"] == 0.3
    (moved,) = check(first, WindowSummary(2, 10.2, "overhead-bound"))
    assert "regime moved from compute-bound to overhead-bound" in moved.message and moved.severity == "info"
    assert check(WindowSummary(0, 0.5, None), WindowSummary(1, 0.9, None)) == []  # +0.4 ms: under 1 ms


def test_drift_uses_the_noise_model_when_the_windows_have_steps() -> None:
    from autoprof.analysis.drift import WindowSummary, check

    noisy = (5.0, 15.0, 8.0, 12.0, 10.0, 6.0, 14.0, 9.0)  # median 9.5 ms, wide spread
    later = tuple(t * 1.3 for t in (5.0, 14.0, 9.0, 11.0, 10.0, 7.0, 15.0, 8.0))  # +30% on medians: within the spread
    first = WindowSummary(0, 9.5, None, noisy)
    assert check(first, WindowSummary(1, 12.35, None, later)) == []
    steady = WindowSummary(0, 10.0, None, tuple(10.0 + 0.01 * k for k in range(8)))
    (slow,) = check(steady, WindowSummary(1, 13.0, None, tuple(13.0 + 0.01 * k for k in range(8))))
    assert slow.evidence["tested"] is True and slow.evidence["interval_pct"][0] > 20 and slow.evidence["steps"] == [8, 8]


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


# -- the noise model, the gate, pooling (issue 34) ----------------------------------------------------------------


def _steps_profile(steps: list[int], path: str = "p", rank: int = 0, ops: dict[tuple[str, str], list[int]] | None = None) -> Profile:
    """A profile with these step times (ns) and each op's self time per step (one call a step)."""
    series = ops or {}
    totals = {k: OpTime(sum(1 for v in row if v), sum(row)) for k, row in series.items()}
    return Profile(path, rank, steps, totals, {}, [], [], 100, [], {k: list(v) for k, v in series.items()})


def _jitter(center: int, n: int, spread: float, seed: int) -> list[int]:
    import random

    r = random.Random(seed)
    return [int(center * (1 + spread * (r.random() - 0.5))) for _ in range(n)]


def test_overlapping_steps_are_within_noise_and_a_clear_2x_is_not() -> None:
    base = _jitter(10_000_000, 12, 0.3, 1)
    same = _jitter(10_500_000, 12, 0.3, 2)  # +5% on medians, but the samples overlap
    d = compare.compare_one(_steps_profile(base), _steps_profile(same))
    assert d.step_shift is not None and d.step_shift.decided and d.step_shift.within_noise
    assert d.min_detectable_pct is not None and d.min_detectable_pct > 0
    assert not d.gate(5).tripped and d.gate(5).reason is None
    slow = [2 * t for t in _jitter(10_000_000, 12, 0.3, 3)]
    d2 = compare.compare_one(_steps_profile(base), _steps_profile(slow))
    s = d2.step_shift
    assert s is not None and s.lo is not None and s.hi is not None and not s.within_noise
    assert 60 < s.lo < 100 < s.hi < 140 and d2.gate(50).tripped


def test_the_interval_is_deterministic() -> None:
    from autoprof.analysis._stats import ratio_shift

    a, b = _jitter(5_000_000, 200, 0.5, 4), _jitter(5_200_000, 200, 0.5, 5)
    assert ratio_shift(a, b) == ratio_shift(list(reversed(a)), b) == ratio_shift(a, b)
    j1 = compare.compare_one(_steps_profile(a), _steps_profile(b)).to_json()
    j2 = compare.compare_one(_steps_profile(a), _steps_profile(b)).to_json()
    assert j1 == j2


def test_too_few_steps_cannot_decide_the_gate() -> None:
    d = compare.compare_one(_steps_profile([10_000_000, 11_000_000, 12_000_000]), _steps_profile([30_000_000, 31_000_000, 32_000_000]))
    g = d.gate(5)
    assert not g.tripped and g.reason and "too few steps" in g.reason and "base 3, new 3" in g.reason


def test_an_op_noise_is_not_a_change_and_a_real_one_is() -> None:
    mm, add = ("aten::mm", "[[256, 4096], [4096, 256]]"), ("aten::add", "")
    steps = [10_000_000] * 10
    base = _steps_profile(steps, ops={mm: _jitter(1_000_000, 10, 0.4, 6), add: _jitter(500_000, 10, 0.1, 7)})
    new = _steps_profile(steps, ops={mm: _jitter(1_170_000, 10, 0.4, 8), add: _jitter(1_000_000, 10, 0.1, 9)})
    d = compare.compare_one(base, new)
    assert [(c.kind, c.key[0]) for c in d.ops] == [("slower", "aten::add")]  # the mm's +17% is within its noise
    (add_change,) = d.ops
    assert add_change.tested and add_change.to_json()["per_step"]["interval_ms"][0] > 0


def test_a_tested_change_says_the_shift_it_was_judged_on_not_means_that_contradict_it(capsys: Any) -> None:
    # issue 48 item 7: "slower aten::mm 1 calls 3.600 ms/step -> 1 calls 3.500 ms/step": the label came from the
    # per-step shift (+0.5 ms), the figures were means (one slow base step pulls the base's mean above the new's)
    mm = ("aten::mm", "[[512, 512], [512, 512]]")
    steps = [10_000_000] * 10
    base = _steps_profile(steps, ops={mm: [3_000_000] * 9 + [9_000_000]})  # mean 3.6 ms, median 3.0 ms
    new = _steps_profile(steps, ops={mm: [3_500_000] * 10})  # mean = median 3.5 ms
    d = compare.compare_one(base, new)
    (c,) = d.ops
    assert c.kind == "slower" and c.tested and c.shift is not None and c.shift.estimate == 500_000
    per = c.to_json()["per_step"]
    assert (per["base_ms"], per["new_ms"], per["delta_ms"]) == (3.6, 3.5, 0.5)  # the record's figures are unchanged
    assert (per["base_median_ms"], per["new_median_ms"]) == (3.0, 3.5)
    render_diff.table(d, sys.stdout)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("slower") and "[[512" in x)
    assert "+0.500 ms/step [+0.500, +0.500] (95% confidence); median 3.000 → 3.500 ms/step; 1 → 1 calls/step" in line, line
    assert "3.600" not in line  # no mean that moves against the word


def test_call_growth_over_many_shapes_shows_by_name() -> None:
    steps = [1_000_000] * 4
    base = _steps_profile(steps, ops={("aten::copy_", "[[4]]"): [10_000] * 4})
    new_ops = {("aten::copy_", f"[[{i}]]"): [10_000] * 4 for i in range(12)}
    d = compare.compare_one(base, _steps_profile(steps, ops=new_ops))
    (by_name,) = [c for c in d.call_names if c.key == ("aten::copy_",)]
    assert by_name.kind == "more calls" and by_name.base and by_name.new and (by_name.base.calls, by_name.new.calls) == (4, 48)


def test_windows_are_pooled_and_a_disagreeing_side_is_unstable() -> None:
    def regime(v: str) -> Finding:
        return Finding("bound_regime", v, "info", v, "a", {})

    def kept(run: str, window: int, verdict: str) -> Profile:
        p = _steps_profile([1_000_000] * 3, f"{run}/train.window{window}.rank0.pt.trace.json.gz")
        p.findings = [regime(verdict)]
        return p

    base = [kept("a", 0, "compute-bound"), kept("a", 1, "mixed")]
    new = [kept("b", 0, "mixed"), kept("b", 1, "mixed")]
    (d,) = compare.compare(base, new)
    assert d.base_steps and d.base_steps.count == 6 and d.windows == (2, 2) and len(d.files[0]) == 2
    (v,) = d.verdicts
    assert v.kind == "unstable" and v.unstable == ("base",) and not d.new_findings("info")
    stable = compare.compare([kept("a", 0, "compute-bound"), kept("a", 1, "compute-bound")], new)
    assert [c.kind for c in stable[0].verdicts] == ["moved"]


def test_several_base_runs_are_one_baseline() -> None:
    runs = [_steps_profile([1_000_000 + i] * 3, f"run{i}.json") for i in range(3)]
    for i, p in enumerate(runs):
        p.run = i
    (d,) = compare.compare(runs, [_steps_profile([2_000_000] * 3, "new.json")])
    assert d.base_steps and d.base_steps.count == 9 and d.files[0] == ["run0.json", "run1.json", "run2.json"]


def _trace_file(path: Path, steps: list[float], op_us: float = 50.0) -> Path:
    """A minimal chrome trace: one ProfilerStep#N per step (durations in ms), one aten::mm in each."""
    events: list[dict[str, Any]] = []
    ts = 0.0
    for k, ms in enumerate(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": ts, "dur": ms * 1000, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts + 1, "dur": op_us, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": ts + ms * 1000 - 20, "dur": 10, "pid": 1, "tid": 1})
        ts += ms * 1000 + 10
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_tripped_gate_says_what_tripped_on_one_line_and_in_json(tmp_path: Path, capsys: Any) -> None:
    base = _trace_file(tmp_path / "base.json", [10 + 0.1 * (k % 3) for k in range(9)])
    new = _trace_file(tmp_path / "new.json", [13 + 0.1 * (k % 3) for k in range(9)])
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "5"]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("autoprof: gate tripped: step time +")
    assert "(95% confidence) > +5% threshold; base 9 steps, new 9 steps" in line
    assert "outside noise" in captured.out
    assert cli.main(["diff", "--json", str(base), str(new), "--fail-on-regression", "5", "--confidence", "0.99"]) == 1
    captured = capsys.readouterr()
    (rec_line,) = captured.out.splitlines()
    rec = json.loads(rec_line)
    validate_record(rec)
    gate = rec["gate"]
    assert rec["level"] == "warning" and gate["tripped"] is True and gate["threshold_pct"] == 5 and gate["confidence"] == 0.99
    assert gate["base_steps"] == gate["new_steps"] == 9 and gate["interval_pct"][0] > 5 and gate["reason"] is None
    assert "99% confidence" in captured.err
    # a gate that holds: exit 0, level info
    assert cli.main(["diff", "--json", str(base), str(base), "--fail-on-regression", "5"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["level"] == "info" and rec["gate"]["tripped"] is False and rec["step_ms"]["within_noise"] is True


def test_every_side_that_cannot_be_compared_is_status_2(tmp_path: Path, capsys: Any) -> None:
    good = _trace_file(tmp_path / "good.json", [10.0] * 9)
    few = _trace_file(tmp_path / "few.json", [10.0] * 2)
    nosteps = tmp_path / "nosteps.json"
    nosteps.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500, "pid": 1, "tid": 1}]})
    )
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"traceEvents": []}))
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    job_a, job_b = tmp_path / "ja", tmp_path / "jb"
    job_a.mkdir()
    job_b.mkdir()
    _trace_file(job_a / "train.window0.rank0.pt.trace.json", [10.0] * 5)
    _trace_file(job_a / "train.window0.rank1.pt.trace.json", [10.0] * 5)
    _trace_file(job_b / "eval.window0.rank0.pt.trace.json", [10.0] * 5)
    _trace_file(job_b / "eval.window0.rank0b.pt.trace.json", [10.0] * 5)
    cases = {
        "no steps": ([str(good), str(nosteps), "--fail-on-regression", "5"], "has no steps"),
        "too few steps": ([str(good), str(few), "--fail-on-regression", "5"], "too few steps"),
        "empty traces": ([str(empty), str(empty)], "nothing to compare"),
        "empty directories": ([str(tmp_path / "d1"), str(tmp_path / "d2")], "no trace files"),
        "an empty path": (["", str(good)], "autoprof: "),
        "different targets": ([str(job_a), str(job_b)], "share no rank, target or file name"),
        "one side only": ([str(good)], "needs a base and a new run"),
    }
    for name, (args, said) in cases.items():
        assert cli.main(["diff", *args]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (name, err)


def test_the_a100_v100_pair_names_call_growth_by_name_and_summarises_gemm_kernels() -> None:
    a100 = shared_trace("hta/a100_rank3_of8_train.json.gz")
    v100 = shared_trace("hta/v100_single_ns_resolution.json.gz")
    (d,) = autoprof.diff(a100, v100, top=100)
    assert d.devices == (["NVIDIA A100-PG509-200"], ["Tesla V100-SXM2-32GB"])
    copy = {c.key: c for c in d.call_names}[("aten::copy_",)]
    assert copy.kind == "more calls" and copy.base and copy.new and (copy.base.calls, copy.new.calls) == (444, 1600)
    if d.gemm_summary is not None:
        for side in d.gemm_summary:
            assert len(side.top) <= compare.TOP_KERNELS and sum(side.families.values()) >= len(side.top)


def test_a_compiled_run_names_the_compiled_regions_it_added() -> None:
    eager = shared_trace("hta/a100_rank3_of8_train.json.gz")
    compiled = shared_trace("hta/a100_rank0_of16_compiled_cudagraphs.json.gz")
    (d,) = autoprof.diff(eager, compiled)
    added, removed = d.compiled
    assert "CompiledFunction" in added and "CompiledFunctionBackward" in added and not removed


# -- memory peaks (issue 36) ----------------------------------------------------------------------------------------

MIB = 1 << 20


def _peaks_profile(peaks: dict[str, list[int]], path: str = "p") -> Profile:
    steps = [10_000_000] * max((len(v) for v in peaks.values()), default=3)
    p = _steps_profile(steps, path)
    p.memory_peaks = {k: list(v) for k, v in peaks.items()}
    return p


def test_a_memory_peak_that_grew_is_tested_against_noise_per_device() -> None:
    base = _peaks_profile({"cuda:0": _jitter(1200 * MIB, 10, 0.02, 11), "cpu": _jitter(64 * MIB, 10, 0.02, 12)})
    new = _peaks_profile({"cuda:0": _jitter(1800 * MIB, 10, 0.02, 13), "cpu": _jitter(64 * MIB, 10, 0.02, 14)})
    d = compare.compare_one(base, new)
    cpu, gpu = d.memory_peaks  # the host first, as memory_peak orders devices
    assert (cpu.device, gpu.device) == ("cpu", "cuda:0")
    assert gpu.tested and gpu.changed and gpu.shift is not None and gpu.shift.lo is not None and gpu.shift.lo > 500 * MIB
    assert gpu.change_pct is not None and 45 < gpu.change_pct < 55 and gpu.steps == (10, 10)
    assert cpu.tested and not cpu.changed and cpu.shift is not None and cpu.shift.within_noise
    assert not d.unchanged  # a peak outside noise is a change
    line = render_diff.peak_text(gpu)
    assert line.startswith("memory peak cuda:0: 1.17 GiB → 1.75 GiB (+49%, +591 MiB [+587 MiB, +606 MiB], 95% confidence, outside noise)")
    rec = d.to_json()["memory_peak_changes"]
    assert [r["device"] for r in rec] == ["cpu", "cuda:0"] and rec[1]["tested"] is True and rec[1]["changed"] is True
    assert rec[1]["interval_mib"][0] > 500 and 550 < rec[1]["delta_mib"] < 650 and rec[0]["within_noise"] is True
    same = compare.compare_one(base, base)
    assert same.unchanged and all(not p.changed for p in same.memory_peaks)


def test_memory_peaks_with_few_steps_are_not_tested_and_absent_ones_are_nothing() -> None:
    few = compare.compare_one(_peaks_profile({"cuda:0": [100 * MIB, 100 * MIB]}), _peaks_profile({"cuda:0": [150 * MIB, 150 * MIB]}))
    (peak,) = few.memory_peaks
    assert not peak.tested and peak.changed and peak.delta_bytes == 50 * MIB and peak.change_pct == 50.0
    assert "+50%, +50 MiB on the medians, not tested against noise" in render_diff.peak_text(peak)
    assert few.to_json()["memory_peak_changes"][0]["interval_mib"] is None
    one_side = compare.compare_one(_peaks_profile({"cuda:0": [100 * MIB] * 4}), _peaks_profile({}))
    assert one_side.memory_peaks == [] and one_side.to_json()["memory_peak_changes"] == []
    neither = compare.compare_one(_steps_profile([1_000_000] * 3), _steps_profile([1_000_000] * 3))
    assert neither.to_json()["memory_peak_changes"] == [] and neither.unchanged


def test_pooled_windows_pool_their_step_peaks() -> None:
    a = _peaks_profile({"cuda:0": [1, 2, 3]}, "t.window1.rank0.pt.trace.json")
    b = _peaks_profile({"cuda:0": [4, 5]}, "t.window2.rank0.pt.trace.json")
    assert compare.pool([a, b]).memory_peaks == {"cuda:0": [1, 2, 3, 4, 5]}


def _memory_trace_file(path: Path, peak_mib: list[int]) -> Path:
    """A chrome trace with ``[memory]`` events on cuda:0: per step an aten::mm that allocates ``peak_mib`` MiB and
    frees it before the step ends (as torch's export writes them, with profile_memory=True)."""
    events: list[dict[str, Any]] = []
    total = 0

    def mem(ts: float, nbytes: int, addr: int) -> None:
        nonlocal total
        total += nbytes
        args = {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 0}
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args})

    for k, mib in enumerate(peak_mib):
        t0 = k * 1000.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": t0, "dur": 1000, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t0 + 100, "dur": 200, "pid": 1, "tid": 1})
        mem(t0 + 150, mib * MIB, 4096 * (k + 1))
        mem(t0 + 900, -mib * MIB, 4096 * (k + 1))
    gpu = [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 140 << 30}]
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": gpu}))
    return path


def test_diff_of_two_traces_with_memory_events_says_the_peak_in_the_table_and_json(tmp_path: Path, capsys: Any) -> None:
    base = _memory_trace_file(tmp_path / "base.json", [1228 + k % 2 for k in range(6)])
    new = _memory_trace_file(tmp_path / "new.json", [1843 + k % 2 for k in range(6)])
    assert cli.main(["diff", str(base), str(new)]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "memory peak" in x]
    assert line.startswith("  memory peak cuda:0: 1.2 GiB → 1.8 GiB (+50%, +615 MiB [+614 MiB, +616 MiB], 95% confidence, outside noise)")
    assert cli.main(["diff", "--json", str(base), str(new)]) == 0
    rec = json.loads(capsys.readouterr().out)
    validate_record(rec)
    (peak,) = rec["memory_peak_changes"]
    assert peak["device"] == "cuda:0" and peak["base_bytes"] == 1228 * MIB + MIB // 2 and peak["new_bytes"] == 1843 * MIB + MIB // 2
    assert peak["tested"] and peak["changed"] and peak["steps"] == [6, 6]
    plain = _trace_file(tmp_path / "plain.json", [10.0] * 4)
    assert cli.main(["diff", "--json", str(plain), str(new)]) == 0
    assert json.loads(capsys.readouterr().out)["memory_peak_changes"] == []
    assert cli.main(["diff", str(plain), str(new)]) == 0
    assert "memory peak" not in capsys.readouterr().out


# -- a run that lost a rank (issue 45, item 9) ------------------------------------------------------------------------


def _rank_file(path: Path, rank: int, world: int, steps: list[float]) -> Path:
    _trace_file(path, steps)
    doc = json.loads(path.read_text())
    doc["distributedInfo"] = {"rank": rank, "world_size": world}
    path.write_text(json.dumps(doc))
    return path


def test_a_gate_never_passes_a_run_that_lost_a_rank(tmp_path: Path, capsys: Any) -> None:
    steady = [10 + 0.1 * (k % 3) for k in range(9)]
    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    new.mkdir()
    for rank in (0, 1, 2):
        _rank_file(base / f"r{rank}.json", rank, 3, steady)
    _rank_file(new / "r0.json", 0, 3, steady)
    for gate in (["--fail-on-regression", "5"], ["--fail-on-new", "warning"]):
        assert cli.main(["diff", str(base), str(new), *gate]) == 2, gate
        captured = capsys.readouterr()
        (line,) = captured.err.strip().splitlines()
        assert "cannot be evaluated: the new run has no trace of rank 1, rank 2 (the base run has them)" in line, line
        assert "not compared: the new run has no trace of rank 1" in captured.out
    # the records: rank 0 compared, ranks 1 and 2 each a record saying the new side lacks them
    assert cli.main(["diff", "--json", str(base), str(new), "--fail-on-regression", "5"]) == 2
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for rec in recs:
        validate_record(rec)
    assert [(r["diff_rank"], r.get("missing")) for r in recs] == [
        (0, None),
        (1, {"side": "new", "group": "rank 1"}),
        (2, {"side": "new", "group": "rank 2"}),
    ]
    assert recs[1]["gate"]["reason"] == f"the new run has no trace of rank 1 (the base run has {base / 'r1.json'})"
    # the Python API's gate: the lost rank's Diff cannot be evaluated
    diffs = autoprof.diff(base, new)
    assert [(d.rank, d.missing) for d in diffs] == [(0, None), (1, "new"), (2, "new")]
    assert not diffs[0].gate(5).reason and not diffs[0].gate(5).tripped
    lost = diffs[1].gate(5)
    assert not lost.tripped and lost.reason is not None and "no trace of rank 1" in lost.reason
    assert not diffs[1].unchanged and diffs[1].findings_problem == lost.reason
    # a rank the base lacks is not compared either; a tripped rank still fails 1 beside it
    _rank_file(new / "r1.json", 1, 3, [2 * s for s in steady])
    _rank_file(new / "r2.json", 2, 3, steady)
    _rank_file(new / "r3.json", 3, 4, steady)
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "gate tripped" in err[0] and "(rank 1)" in err[0]
    assert f"the base run has no trace of rank 3 (the new run has {new / 'r3.json'})" in err[1]
