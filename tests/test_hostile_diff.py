"""A careless user's ``autoprof diff``: the same file twice, overlapping sides, odd steps, odd gates, the Python
API with odd arguments. Synthetic chrome traces (one ProfilerStep#N per step) built under tmp_path; expected
changes computed by hand."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

import autoprof
from autoprof import cli
from autoprof.analysis import compare
from autoprof.analysis._stats import Shift
from autoprof.render import diff as render_diff
from autoprof.trace.chrome import TraceError


def _trace(path: Path, steps: list[float], rank: int | None = None, gz: bool = False) -> Path:
    """One ProfilerStep#N per step (durations in ms), an aten::mm and an aten::add in each."""
    events: list[dict[str, Any]] = []
    ts = 0.0
    for k, ms in enumerate(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": ts, "dur": ms * 1000, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts + 1, "dur": 50.0, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": ts + ms * 1000 - 20, "dur": 10, "pid": 1, "tid": 1})
        ts += ms * 1000 + 10
    doc: dict[str, Any] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
    data = json.dumps(doc)
    if gz:
        path.write_bytes(gzip.compress(data.encode()))
    else:
        path.write_text(data)
    return path


def _nine(center: float) -> list[float]:
    return [center + 0.1 * (k % 3) for k in range(9)]


def _run(capsys: Any, *args: str) -> tuple[int, str, list[str]]:
    rc = cli.main(["diff", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.strip().splitlines()


def _records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _hl_pct(base: list[float], new: list[float]) -> float:
    """The Hodges–Lehmann change by hand: the median of every new/base ratio, in percent."""
    ratios = sorted(math.log(y) - math.log(x) for x in base for y in new)
    n = len(ratios)
    mid = ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2
    return (math.exp(mid) - 1) * 100


# --- identical and overlapping sides ---------------------------------------------------------------------------


def test_identical_traces_are_within_noise_and_the_gate_passes(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    rc, out, err = _run(capsys, str(a), str(a), "--fail-on-regression", "0")
    assert rc == 0 and not err
    assert "+0.0% [" in out and "within noise" in out and "no change (within noise)" in out


def test_zero_spread_steps_give_a_degenerate_interval_that_is_within_noise(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [10.0] * 9)
    rc, out, _ = _run(capsys, "--json", str(a), str(a), "--fail-on-regression", "0")
    (rec,) = _records(out)
    assert rc == 0 and rec["gate"]["tripped"] is False and rec["step_ms"]["within_noise"] is True
    lo, hi = rec["step_ms"]["interval_pct"]
    assert lo <= 0 <= hi


def test_the_same_base_file_twice_is_read_once(tmp_path: Path, capsys: Any) -> None:
    """``diff a a b``: a's steps counted twice would narrow the interval with no new evidence."""
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    _, once, _ = _run(capsys, "--json", str(a), str(b))
    rc, twice, err = _run(capsys, "--json", str(a), str(a), str(b), "--fail-on-regression", "5")
    (r1,), (r2,) = _records(once), _records(twice)
    assert rc == 1 and len(err) == 1 and "base 9 steps, new 9 steps" in err[0]
    assert r2["step_ms"]["base"]["count"] == 9 and r2["files"]["base"] == [str(a)]
    assert r2["step_ms"]["interval_pct"] == r1["step_ms"]["interval_pct"]


def test_a_directory_and_a_file_inside_it_as_bases_read_the_file_once(tmp_path: Path, capsys: Any) -> None:
    d = tmp_path / "ref"
    d.mkdir()
    a = _trace(d / "a.json", _nine(10))
    b = _trace(tmp_path / "b.json", _nine(13))
    rc, out, _ = _run(capsys, "--json", str(d), str(a), str(b))
    (rec,) = _records(out)
    assert rc == 0 and rec["step_ms"]["base"]["count"] == 9 and rec["windows"]["base"] == 1


def test_a_file_compared_with_its_own_directory_is_an_a_a_comparison(tmp_path: Path, capsys: Any) -> None:
    d = tmp_path / "run"
    d.mkdir()
    a = _trace(d / "a.json", _nine(10))
    (d / "README.md").write_text("not a trace")  # not *.json: ignored
    rc, out, err = _run(capsys, str(d), str(a))
    assert rc == 0 and not err and "within noise" in out


def test_a_gzipped_trace_reads_as_the_plain_one(tmp_path: Path, capsys: Any) -> None:
    plain = _trace(tmp_path / "a.json", _nine(10))
    gz = _trace(tmp_path / "a.json.gz", _nine(10), gz=True)
    new = _trace(tmp_path / "new.json", _nine(13))
    _, p_out, _ = _run(capsys, "--json", str(plain), str(new))
    _, g_out, _ = _run(capsys, "--json", str(gz), str(new))
    assert _records(p_out)[0]["step_ms"] == _records(g_out)[0]["step_ms"]


# --- bad inputs: exit 2, one line, no traceback ------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_bad_inputs_are_status_2_with_one_line(tmp_path: Path, capsys: Any, as_json: bool) -> None:
    good = _trace(tmp_path / "good.json", _nine(10))
    trunc = tmp_path / "trunc.json"
    trunc.write_text(good.read_text()[: len(good.read_text()) // 2])
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "metrics.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    notjson = tmp_path / "notes.json"
    notjson.write_text("hello")
    cases = {
        "truncated new": ([str(good), str(trunc)], "truncated JSON"),
        "truncated base": ([str(trunc), str(good)], "truncated JSON"),
        "a dir of non-traces": ([str(junk), str(good)], "not a chrome trace"),
        "an empty dir": ([str(tmp_path / "empty"), str(good)], "no trace files"),
        "not JSON": ([str(good), str(notjson)], "not valid JSON"),
        "missing": ([str(tmp_path / "nope.json"), str(good)], "no such file"),
        "one path": ([str(good)], "needs a base and a new run"),
    }
    for name, (args, said) in cases.items():
        rc, out, err = _run(capsys, *(["--json"] if as_json else []), *args)
        assert rc == 2 and len(err) == 1 and said in err[0] and "Traceback" not in err[0], (name, err)
        assert not out, name


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-1", "nan", "inf", "95", "abc"])
def test_confidence_outside_its_range_is_refused(tmp_path: Path, capsys: Any, value: str) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    assert cli.main(["diff", str(a), str(a), f"--confidence={value}"]) == 2
    err = capsys.readouterr().err
    assert "expected a confidence between 0.5 and 1" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "1e400", "5%", "abc"])
def test_a_threshold_that_is_no_percentage_is_refused(tmp_path: Path, capsys: Any, value: str) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    assert cli.main(["diff", str(a), str(a), f"--fail-on-regression={value}"]) == 2
    assert "expected a percentage" in capsys.readouterr().err


def test_confidence_one_half_is_accepted_and_narrower(tmp_path: Path, capsys: Any) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    _, o95, _ = _run(capsys, "--json", str(a), str(b))
    rc, o50, _ = _run(capsys, "--json", str(a), str(b), "--confidence", "0.5")
    lo95, hi95 = _records(o95)[0]["step_ms"]["interval_pct"]
    lo50, hi50 = _records(o50)[0]["step_ms"]["interval_pct"]
    assert rc == 0 and lo95 <= lo50 <= hi50 <= hi95 and _records(o50)[0]["step_ms"]["confidence"] == 0.5


def test_a_confidence_just_below_1_is_not_called_100_percent(tmp_path: Path, capsys: Any) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    rc, out, err = _run(capsys, str(a), str(b), "--fail-on-regression", "5", "--confidence", "0.999999")
    assert rc == 2 and len(err) == 1 and "99.9999% interval" in err[0] and "100%" not in out + err[0]
    rc, out, _ = _run(capsys, str(a), str(b), "--confidence", "0.999")
    assert rc == 0 and "(99.9% confidence)" in out


# --- steps: few, zero, outliers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2])
def test_fewer_than_3_steps_cannot_be_gated(tmp_path: Path, capsys: Any, n: int) -> None:
    a = _trace(tmp_path / "a.json", [10.0 + 0.1 * k for k in range(n)])
    b = _trace(tmp_path / "b.json", [20.0 + 0.2 * k for k in range(4)])
    rc, out, err = _run(capsys, str(a), str(b), "--fail-on-regression", "5")
    assert rc == 2 and len(err) == 1 and "too few steps for an interval" in err[0] and "at least 3 a side" in err[0]
    assert "not tested against noise" in out
    rc, out, err = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5")
    (rec,) = _records(out)  # still a parseable record, saying why
    assert rc == 2 and rec["gate"]["tripped"] is False and "too few steps" in rec["gate"]["reason"]


def test_3_against_3_steps_cannot_give_a_95_percent_interval(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [10.0, 10.1, 10.2])
    b = _trace(tmp_path / "b.json", [20.0, 20.2, 20.4])
    rc, _, err = _run(capsys, str(a), str(b), "--fail-on-regression", "5")
    assert rc == 2 and len(err) == 1 and "too few steps for a 95% interval: base 3, new 3" in err[0]


def test_a_2x_regression_with_4_steps_a_side_trips_with_the_hand_computed_interval(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [10.0, 10.1, 10.2, 10.3])
    b = _trace(tmp_path / "b.json", [20.0, 20.2, 20.4, 20.6])
    rc, out, err = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5")
    (rec,) = _records(out)
    sb = [10.0, 10.1, 10.2, 10.29]  # the last step ends at its last event (10 us before the span's end)
    sn = [20.0, 20.2, 20.4, 20.59]
    # 4 against 4: P(U = 0) = 1/70 <= 0.025, so the 95% interval is the smallest and largest ratio
    lo, hi = (min(sn) / max(sb) - 1) * 100, (max(sn) / min(sb) - 1) * 100
    assert rc == 1 and rec["gate"]["tripped"] is True
    assert rec["gate"]["interval_pct"] == pytest.approx([lo, hi], abs=0.01)
    assert rec["step_ms"]["estimate_pct"] == pytest.approx(_hl_pct(sb, sn), abs=0.01)
    assert len(err) == 1 and err[0].startswith("autoprof: gate tripped: step time +100.0%")


def test_the_change_matches_the_hand_computed_hodges_lehmann_shift(tmp_path: Path, capsys: Any) -> None:
    base = [10.0, 10.4, 9.8, 10.1, 10.9, 10.2, 9.9, 10.0, 10.3]
    new = [11.0, 11.9, 10.8, 11.3, 11.1, 11.6, 11.2, 10.9, 11.4]
    a, b = _trace(tmp_path / "a.json", base), _trace(tmp_path / "b.json", new)
    _, out, _ = _run(capsys, "--json", str(a), str(b))
    (rec,) = _records(out)
    seen_b, seen_n = base[:-1] + [base[-1] - 0.01], new[:-1] + [new[-1] - 0.01]
    assert rec["step_ms"]["estimate_pct"] == pytest.approx(_hl_pct(seen_b, seen_n), abs=0.01)
    lo, _ = rec["step_ms"]["interval_pct"]
    assert lo > 0 and rec["step_ms"]["within_noise"] is False


def test_a_huge_outlier_step_does_not_move_the_change(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    b = _trace(tmp_path / "b.json", _nine(10)[:-1] + [1000.0])
    rc, out, _ = _run(capsys, str(a), str(b), "--fail-on-regression", "5")
    assert rc == 0 and "within noise" in out


def test_a_step_of_0_ns_is_left_out_not_a_crash(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [0.0] + _nine(10)[1:])
    b = _trace(tmp_path / "b.json", _nine(10))
    rc, out, err = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5")
    (rec,) = _records(out)
    assert rc == 0 and not err and rec["step_ms"]["within_noise"] is True


def test_a_base_of_only_0_ns_steps_cannot_be_gated(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [0.0] * 9)
    b = _trace(tmp_path / "b.json", _nine(10))
    rc, _, err = _run(capsys, str(a), str(b), "--fail-on-regression", "5")
    assert rc == 2 and len(err) == 1 and "median step time of 0 ms" in err[0]


def test_a_faster_run_passes_the_gate(tmp_path: Path, capsys: Any) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(5))
    rc, out, err = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5")
    (rec,) = _records(out)
    assert rc == 0 and not err and rec["gate"]["tripped"] is False and rec["level"] == "info"
    assert rec["gate"]["estimate_pct"] == pytest.approx(_hl_pct([10, 10.1, 10.19], [5, 5.1, 5.19]), abs=0.5)
    assert rec["gate"]["interval_pct"][1] < 0


def test_the_gate_line_and_the_json_gate_agree(tmp_path: Path, capsys: Any) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    rc, out, err = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5", "--fail-on-new", "critical")
    (rec,) = _records(out)
    g = rec["gate"]
    lo, hi = g["interval_pct"]
    assert rc == 1 and len(err) == 1
    assert f"{g['estimate_pct']:+.1f}% [{lo:+.1f}%, {hi:+.1f}%] (95% confidence) > +5% threshold" in err[0]
    assert f"base {g['base_steps']} steps, new {g['new_steps']} steps" in err[0]
    assert g["interval_pct"] == rec["step_ms"]["interval_pct"] and g["estimate_pct"] == rec["step_ms"]["estimate_pct"]


def test_a_threshold_inside_the_interval_does_not_trip(tmp_path: Path, capsys: Any) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    _, out, _ = _run(capsys, "--json", str(a), str(b))
    lo, _ = _records(out)[0]["step_ms"]["interval_pct"]
    assert _run(capsys, str(a), str(b), "--fail-on-regression", str(math.floor(lo) - 1))[0] == 1
    assert _run(capsys, str(a), str(b), "--fail-on-regression", str(math.ceil(lo) + 1))[0] == 0


# --- ranks, targets, several bases -----------------------------------------------------------------------------


def _two_ranks(tmp_path: Path, new: dict[int, list[float] | None]) -> tuple[Path, Path]:
    """A base run of two ranks of nine 10 ms steps, and a new one whose rank ``r`` has the steps ``new[r]`` (None: a
    trace of that rank without steps)."""
    base, later = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    later.mkdir()
    for r in (0, 1):
        _trace(base / f"train.window0.rank{r}.pt.trace.json", _nine(10), rank=r)
        steps = new[r]
        if steps is not None:
            _trace(later / f"train.window0.rank{r}.pt.trace.json", steps, rank=r)
            continue
        bare = {
            "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500, "pid": 1, "tid": 1}],
            "distributedInfo": {"rank": r, "world_size": 2},
        }
        (later / f"train.window0.rank{r}.pt.trace.json").write_text(json.dumps(bare))
    return base, later


def test_one_rank_regressed_names_its_rank(tmp_path: Path, capsys: Any) -> None:
    ra, rb = _two_ranks(tmp_path, {0: _nine(10), 1: _nine(13)})
    rc, out, err = _run(capsys, "--json", str(ra), str(rb), "--fail-on-regression", "5")
    recs = _records(out)
    assert rc == 1 and [r["diff_rank"] for r in recs] == [0, 1]
    assert [r["gate"]["tripped"] for r in recs] == [False, True]
    assert len(err) == 1 and err[0].endswith("(rank 1)")


def test_a_rank_without_steps_on_one_side_makes_the_gate_status_2(tmp_path: Path, capsys: Any) -> None:
    ra, rc_ = _two_ranks(tmp_path, {0: _nine(10), 1: None})
    rc, out, err = _run(capsys, "--json", str(ra), str(rc_), "--fail-on-regression", "5")
    recs = _records(out)
    assert rc == 2 and len(recs) == 2 and len(err) == 1 and "has no steps" in err[0]
    assert recs[1]["gate"]["reason"] is not None and recs[1]["gate"]["tripped"] is False
    # without a gate the same pair is reported, status 0
    assert _run(capsys, str(ra), str(rc_))[0] == 0


def test_a_regressed_rank_is_said_and_fails_even_when_another_rank_cannot_be_evaluated(tmp_path: Path, capsys: Any) -> None:
    ra, rc_ = _two_ranks(tmp_path, {0: _nine(13), 1: None})  # rank 0: 30% slower; rank 1 without steps
    rc, _, err = _run(capsys, str(ra), str(rc_), "--fail-on-regression", "5")
    assert rc == 1 and len(err) == 2, err
    assert "gate tripped" in err[0] and err[0].endswith("(rank 0)") and "has no steps" in err[1]


def test_pairs_of_one_rank_are_named_by_their_file_when_the_gate_trips(tmp_path: Path, capsys: Any) -> None:
    ra, rb = tmp_path / "ra", tmp_path / "rb"
    ra.mkdir()
    rb.mkdir()
    for name in ("a.json", "b.json"):  # no distributedInfo: both rank 0, paired by file name
        _trace(ra / name, _nine(10))
    _trace(rb / "a.json", _nine(10))
    _trace(rb / "b.json", _nine(13))
    rc, _, err = _run(capsys, str(ra), str(rb), "--fail-on-regression", "5")
    assert rc == 1 and len(err) == 1 and err[0].endswith(f"({rb / 'b.json'})"), err


def test_the_smallest_detectable_change_is_a_half_width_on_the_log_scale() -> None:
    d = compare.Diff(0, "a", "b", None, None, [], [], [], None, None)
    d.step_shift = Shift(461.0, 200.0, 1100.0, 0.95, 9, 9)  # a factor of 3 to 12: 2x either side of 6x
    assert d.min_detectable_pct == pytest.approx(100.0)


def test_several_base_runs_with_different_step_counts_are_pooled(tmp_path: Path, capsys: Any) -> None:
    r1 = _trace(tmp_path / "r1.json", [10.0, 10.1, 10.2, 10.3])
    r2 = _trace(tmp_path / "r2.json", _nine(10))
    new = _trace(tmp_path / "new.json", _nine(13))
    rc, out, err = _run(capsys, "--json", str(r1), str(r2), str(new), "--fail-on-regression", "5")
    (rec,) = _records(out)
    assert rc == 1 and rec["step_ms"]["base"]["count"] == 13 and rec["windows"]["base"] == 2
    assert "base 13 steps, new 9 steps" in err[0]


def test_the_json_is_the_same_twice_but_for_time_and_pid(tmp_path: Path, capsys: Any) -> None:
    a = _trace(tmp_path / "a.json", [10.0, 10.4, 9.8, 10.1, 10.9, 10.2, 9.9, 10.0, 10.3])
    b = _trace(tmp_path / "b.json", [11.0, 11.9, 10.8, 11.3, 11.1, 11.6, 11.2, 10.9, 11.4])
    runs = []
    for _ in range(2):
        _, out, _ = _run(capsys, "--json", str(a), str(b), "--fail-on-regression", "5")
        (rec,) = _records(out)
        rec.pop("timestamp")
        rec.pop("pid")
        runs.append(json.dumps(rec, sort_keys=True))
    assert runs[0] == runs[1]


# --- the Python API ---------------------------------------------------------------------------------------------


def test_the_api_takes_a_str_a_path_a_list(tmp_path: Path) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    for base, new in ((str(a), str(b)), (a, b), ([a], [b]), ((str(a),), b)):
        (d,) = autoprof.diff(base, new)
        assert d.gate(5).tripped and d.step_shift is not None and d.step_shift.estimate == pytest.approx(29.7, abs=0.05)


def test_the_api_refuses_an_empty_list_with_a_trace_error(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    with pytest.raises(TraceError, match="no trace files"):
        autoprof.diff([], a)
    with pytest.raises(TraceError, match="no trace files"):
        autoprof.diff(a, [])


@pytest.mark.parametrize("confidence", [0.0, 0.3, 1.0, 1.5, -1.0, float("nan")])
def test_the_api_refuses_a_confidence_the_cli_refuses(tmp_path: Path, confidence: float) -> None:
    a = _trace(tmp_path / "a.json", _nine(10))
    with pytest.raises(ValueError, match="confidence"):
        autoprof.diff(a, a, confidence=confidence)


def test_a_gate_at_another_confidence_than_the_diff_is_refused(tmp_path: Path) -> None:
    """The gate reads the diff's interval; labelling a 95% interval 99% would be a lie."""
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    (d,) = autoprof.diff(a, b)
    assert d.gate(5).confidence == 0.95 and d.gate(5, 0.95).tripped
    with pytest.raises(ValueError, match=r"confidence=0\.99"):
        d.gate(5, 0.99)
    (d99,) = autoprof.diff(a, b, confidence=0.99)
    g = d99.gate(5)
    assert g.confidence == 0.99 and "(99% confidence)" in render_diff.gate_line(g)


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), float("-inf")])
def test_a_gate_threshold_that_is_not_finite_is_refused(tmp_path: Path, threshold: float) -> None:
    """nan compared false: a gate that silently never trips."""
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    (d,) = autoprof.diff(a, b)
    with pytest.raises(ValueError, match="finite"):
        d.gate(threshold)


def test_gate_values_around_the_interval(tmp_path: Path) -> None:
    a, b = _trace(tmp_path / "a.json", _nine(10)), _trace(tmp_path / "b.json", _nine(13))
    (d,) = autoprof.diff(a, b)
    s = d.step_shift
    assert s is not None and s.lo is not None
    assert d.gate(0).tripped and d.gate(s.lo - 0.01).tripped
    assert not d.gate(s.lo).tripped and not d.gate(s.estimate).tripped and not d.gate(1000).tripped


# --- a kept trace_dir from a real run ---------------------------------------------------------------------------


def test_a_kept_trace_dir_with_repeat_windows_pools_them(tmp_path: Path, capsys: Any) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16)

    def record(name: str, extra: int) -> Path:
        folder = tmp_path / name
        autoprof.configure(trace_dir=str(folder), sink=str(tmp_path / f"{name}.jsonl"), background=False)

        def step() -> torch.Tensor:
            with torch.no_grad():
                y = lin(x)
                for _ in range(extra):
                    y = torch.relu(y) * 1.0001
                return y

        wrapped = autoprof(step, name=name, skip_first=0, wait=0, warmup=1, active=4, repeat=2)
        for _ in range(12):
            wrapped()
        return folder

    base, new = record("base", 0), record("new", 40)
    assert len(list(base.glob("*.json.gz"))) == 2
    rc, out, err = _run(capsys, "--json", str(base), str(new))
    assert rc == 0, err
    (rec,) = _records(out)
    assert rec["windows"] == {"base": 2, "new": 2} and rec["step_ms"]["base"]["count"] == 8
    added = {c["key"][0] for c in rec["op_name_changes"] if c["change"] in ("added", "slower")}
    assert "aten::relu" in added
    # the same kept dir as both sides: within noise
    rc, out, _ = _run(capsys, str(base), str(base), "--fail-on-regression", "0")
    assert rc == 0 and "within noise" in out
