"""The gate under load (issue 49 item 3): `autoprof diff --fail-on-regression` judges the steps' own time (wall less
the run-queue wait) where the traces carry their steps' CPU readings, sets aside steps blocked off the CPU far more
than their side's typical step, says so in its line and its ``gate`` object, and reads wall time as before where the
traces carry no readings. Synthetic traces are written here, their readings chosen: nothing depends on this machine's
speed or load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import validate_record

import autoprof
from autoprof import cli
from autoprof.analysis import compare, engine
from autoprof.trace import chrome

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

MS = 1_000_000
JITTER = (0.0, 0.01, 0.02, 0.03, 0.04)  # a step's own time varies by up to 4%, in a fixed pattern


def own_ms(base: float, k: int) -> float:
    return base * (1 + JITTER[k % len(JITTER)])


def _trace(
    path: Path, steps: list[tuple[float, float, float]] | list[float], readings: bool = True, faults: list[int] | None = None
) -> Path:
    """A chrome trace of ``steps``: each (wall, thread CPU time, run-queue wait) in ms, or a wall time alone (CPU time
    equal to it, no wait); with ``readings``, a live window's ``autoprof_step_cpu`` metadata (with ``faults``, each
    step's minor page faults in it)."""
    rows = [s if isinstance(s, tuple) else (s, s, 0.0) for s in steps]
    events: list[dict[str, Any]] = []
    ts = 0.0
    for k, (wall, _, _) in enumerate(rows):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": ts, "dur": wall * 1000, "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts + 1, "dur": wall * 500, "pid": 1, "tid": 1})
        ts += wall * 1000 + 10
    doc: dict[str, Any] = {"traceEvents": events}
    if readings:
        doc["autoprof_step_cpu"] = {
            "wall_ns": [round(w * MS) for w, _, _ in rows],
            "cpu_ns": [round(c * MS) for _, c, _ in rows],
            "runqueue_ns": [round(r * MS) if r >= 0 else -1 for _, _, r in rows],
        }
        if faults is not None:
            doc["autoprof_step_cpu"]["minflt"] = faults
    path.write_text(json.dumps(doc))
    return path


def preempted(own: float, wait: float) -> tuple[float, float, float]:
    """A CPU-bound step the machine kept off the CPU ``wait`` ms: its wall time grows, its CPU time does not."""
    return (own + wait, own, wait)


def blocked(own: float, off: float) -> tuple[float, float, float]:
    """A step whose thread was off the CPU ``off`` ms, not waiting for one (a lock, the GIL, a hypervisor)."""
    return (own + off, own, 0.0)


def test_a_preempted_a_a_pair_passes_where_its_wall_time_tripped(tmp_path: Path, capsys: Any) -> None:
    base = _trace(tmp_path / "base.json", [preempted(own_ms(10, k), 0.0) for k in range(20)])
    # the same program, 14 of its 20 steps kept waiting 12 ms for a CPU
    new = _trace(tmp_path / "new.json", [preempted(own_ms(10, k + 2), 12.0 if k % 10 < 7 else 0.0) for k in range(20)])
    (d,) = autoprof.diff(base, new)
    wall = d.step_shift
    assert wall is not None and wall.lo is not None and wall.lo > 10  # the wall-time interval (the gate before) trips
    g = d.gate(10)
    assert g.reason is None and not g.tripped and g.interval_pct is not None and g.interval_pct[0] <= 0 <= g.interval_pct[1]
    assert g.judged is not None and g.judged.basis == compare.OWN_TIME and g.judged.judged == (20, 20)
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "10"]) == 0
    out = capsys.readouterr().out
    assert "the gate's reading: " in out and "judged 20 of 20 steps a side on their own time (wall less run-queue wait)" in out


def test_a_real_slowdown_under_noise_trips_where_its_wall_time_passed(tmp_path: Path, capsys: Any) -> None:
    # the base run was preempted 10 ms in two steps of three, the new one (1.5x the work) in one of five
    base = _trace(tmp_path / "base.json", [preempted(own_ms(10, k), 10.0 if k % 3 else 0.0) for k in range(20)])
    new = _trace(tmp_path / "new.json", [preempted(own_ms(15, k + 1), 10.0 if k % 5 == 0 else 0.0) for k in range(20)])
    (d,) = autoprof.diff(base, new)
    assert d.step_shift is not None and d.step_shift.lo is not None and d.step_shift.lo < 10  # wall time: passed
    g = d.gate(10)
    assert g.tripped and g.estimate_pct == pytest.approx(50, abs=3) and g.interval_pct is not None and g.interval_pct[0] > 40
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "10"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("autoprof: gate tripped: step time +")
    assert line.endswith("> +10% threshold; judged 20 of 20 steps a side on their own time (wall less run-queue wait)")


def test_blocked_steps_are_set_aside_and_the_line_and_json_say_how_many(tmp_path: Path, capsys: Any) -> None:
    base = _trace(tmp_path / "base.json", [preempted(own_ms(10, k), 0.0) for k in range(20)])
    # 1.3x the work; 3 of its steps blocked 20 ms off the CPU (not waiting for one): far above the side's typical
    new = _trace(tmp_path / "new.json", [blocked(own_ms(13, k), 20.0 if k in (2, 9, 15) else 0.0) for k in range(20)])
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.judged is not None and g.judged.judged == (20, 17) and g.judged.set_aside == (0, 3)
    assert g.tripped and g.estimate_pct == pytest.approx(30, abs=3)
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "10"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(
        "judged base 20 of 20 steps, new 17 of 20 on their own time (wall less run-queue wait); "
        "base 0, new 3 set aside (blocked off the CPU 25% of the step more than their side's typical step)"
    )
    assert cli.main(["diff", "--json", str(base), str(new), "--fail-on-regression", "10"]) == 1
    (rec_line,) = capsys.readouterr().out.splitlines()
    rec = json.loads(rec_line)
    validate_record(rec)
    gate = rec["gate"]
    assert gate["basis"] == "own_time" and gate["why_wall"] is None
    assert gate["judged_steps"] == [20, 17] and gate["set_aside"] == [0, 3] and gate["base_steps"] == gate["new_steps"] == 20
    judged = rec["step_ms"]["judged"]
    assert judged["set_aside"] == [0, 3] and judged["interval_pct"] == gate["interval_pct"]


def test_an_a_a_pair_with_blocked_outliers_passes(tmp_path: Path) -> None:
    base = _trace(tmp_path / "base.json", [blocked(own_ms(10, k), 30.0 if k in (4, 11) else 0.0) for k in range(20)])
    new = _trace(tmp_path / "new.json", [blocked(own_ms(10, k + 3), 30.0 if k in (0, 7, 13, 19) else 0.0) for k in range(20)])
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert not g.tripped and g.reason is None and g.judged is not None and g.judged.set_aside == (2, 4)
    assert g.interval_pct is not None and g.interval_pct[0] <= 0 <= g.interval_pct[1]


def test_setting_aside_never_leaves_too_few_steps_for_an_interval(tmp_path: Path) -> None:
    base = _trace(tmp_path / "base.json", [preempted(own_ms(10, k), 0.0) for k in range(4)])
    new = _trace(tmp_path / "new.json", [blocked(own_ms(10, k), 30.0 if k == 1 else 0.0) for k in range(4)])
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    # 3 of 4 steps on the new side cannot give a 95% interval against 4: every step is judged instead
    assert g.reason is None and g.judged is not None and g.judged.set_aside == (0, 0) and g.judged.judged == (4, 4)


def test_traces_without_cpu_readings_are_judged_on_wall_time_as_before(tmp_path: Path, capsys: Any) -> None:
    steps_b = [preempted(own_ms(10, k), 0.0) for k in range(9)]
    steps_n = [preempted(own_ms(13, k), 0.0) for k in range(9)]
    base, new = _trace(tmp_path / "base.json", steps_b, readings=False), _trace(tmp_path / "new.json", steps_n, readings=False)
    (d,) = autoprof.diff(base, new)
    g = d.gate(5)
    assert d.step_shift is not None and g.tripped and g.estimate_pct == d.step_shift.estimate
    assert g.interval_pct == (d.step_shift.lo, d.step_shift.hi)
    assert g.judged is not None and g.judged.basis == compare.WALL_TIME and g.judged.why_wall == "no CPU readings in the traces"
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "5"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("> +5% threshold; base 9 steps, new 9 steps; on wall time (no CPU readings in the traces)")
    assert cli.main(["diff", "--json", str(base), str(new), "--fail-on-regression", "5"]) == 1
    gate = json.loads(capsys.readouterr().out)["gate"]
    assert gate["basis"] == "wall_time" and gate["set_aside"] == [0, 0] and gate["judged_steps"] == [9, 9]
    # one side with readings, the other without: both on wall time, and the line names the side without
    with_readings = _trace(tmp_path / "new2.json", steps_n)
    (mixed,) = autoprof.diff(base, with_readings)
    gm = mixed.gate(5)
    assert gm.judged is not None and gm.judged.why_wall == "no CPU readings in the base traces" and gm.estimate_pct == g.estimate_pct


def test_an_unknown_run_queue_wait_is_judged_on_wall_time(tmp_path: Path) -> None:
    base = _trace(tmp_path / "base.json", [(own_ms(10, k), own_ms(10, k), -1.0) for k in range(20)])
    new = _trace(tmp_path / "new.json", [(own_ms(10, k) + (12 if k % 4 else 0), own_ms(10, k), -1.0) for k in range(20)])
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.judged is not None and g.judged.basis == compare.WALL_TIME
    assert g.judged.why_wall == "the run-queue wait is not known on this platform"
    assert g.judged.judged == (20, 20)  # 15 of 20 steps off the CPU is the side's typical: none set aside


def test_readings_that_do_not_match_the_steps_are_not_used(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.json", [preempted(10, 5) for _ in range(5)])
    doc = json.loads(path.read_text())
    trace = chrome.from_document(doc)
    assert trace.metadata["step_cpu"]["runqueue_ns"] == [5 * MS] * 5 and len(engine.step_cpu(trace)) == 5
    for bad in (
        {"wall_ns": [1, 2], "cpu_ns": [1], "runqueue_ns": [0, 0]},  # not one length
        {"wall_ns": [1, 2], "cpu_ns": [1, 2.5], "runqueue_ns": [0, 0]},  # not integers
        {"wall_ns": [1, 2], "cpu_ns": [1, -2], "runqueue_ns": [0, 0]},  # a negative CPU time
        {"wall_ns": [1, 2], "cpu_ns": [1, 2], "runqueue_ns": [0, -5]},  # a wait below -1
        [1, 2, 3],
    ):
        doc["autoprof_step_cpu"] = bad
        assert "step_cpu" not in chrome.from_document(doc).metadata
    doc["autoprof_step_cpu"] = {"wall_ns": [1] * 4, "cpu_ns": [1] * 4, "runqueue_ns": [0] * 4}  # 4 readings, 5 steps
    assert engine.step_cpu(chrome.from_document(doc)) == []


def test_pooled_windows_keep_readings_only_when_every_window_has_them(tmp_path: Path) -> None:
    a = engine.profile_of(chrome.load(_trace(tmp_path / "a.json", [preempted(10, 1)] * 3), workers=0), [], "a")
    b = engine.profile_of(chrome.load(_trace(tmp_path / "b.json", [preempted(10, 2)] * 3), workers=0), [], "b")
    c = engine.profile_of(chrome.load(_trace(tmp_path / "c.json", [10.0] * 3, readings=False), workers=0), [], "c")
    assert len(compare.pool([a, b]).step_cpu) == 6 and compare.pool([a, b]).step_cpu[3] == (10 * MS, 2 * MS)
    assert compare.pool([a, c]).step_cpu == []


def test_a_kept_live_window_carries_its_steps_cpu_readings(tmp_path: Path) -> None:
    folder = tmp_path / "kept"
    autoprof.configure(trace_dir=str(folder), sink=str(tmp_path / "log.jsonl"), background=False)
    total = [0]

    def step() -> None:
        total[0] += sum(range(2000))

    wrapped = autoprof(step, name="gate_step", skip_first=0, wait=0, warmup=1, active=4)
    for _ in range(6):
        wrapped()
    (kept,) = folder.glob("*.json.gz")
    trace = chrome.load(kept, workers=0)
    readings = engine.step_cpu(trace)
    assert len(readings) == len(trace.steps) == 4 and all(cpu > 0 for cpu, _ in readings)
    if resource is not None and hasattr(resource, "RUSAGE_THREAD"):  # Linux: each step's minor page faults too
        assert len(engine.step_faults(trace)) == 4 and all(f >= 0 for f in engine.step_faults(trace))
    (d,) = autoprof.diff(kept, kept)
    assert d.judged is not None and d.judged.basis == (compare.OWN_TIME if all(w >= 0 for _, w in readings) else compare.WALL_TIME)


FAULT_MS = 0.002  # what a minor page fault costs here: 2 µs (a fresh page mapped and zero-filled)


def faulted(own: float, faults: int) -> tuple[float, float, float]:
    """A CPU-bound step whose thread took ``faults`` minor page faults: each one's cost is in its CPU time."""
    return (own + faults * FAULT_MS, own + faults * FAULT_MS, 0.0)


def test_page_faults_of_one_window_are_taken_out_and_a_real_slowdown_trips(tmp_path: Path, capsys: Any) -> None:
    # the profiler's allocations left the heap so that the base's second window maps 3000 pages afresh every step (+6 ms,
    # +60%); the new run does 1.5x the work in windows that fault little: on the steps' own time as they are, within
    # noise at 10% (the gate before); less the faults above each side's fewest, +50%
    fb = [0] * 10 + [3000] * 10
    fn = [(k % 3) * 10 for k in range(20)]
    base = _trace(tmp_path / "base.json", [faulted(own_ms(10, k), f) for k, f in enumerate(fb)], faults=fb)
    new = _trace(tmp_path / "new.json", [faulted(own_ms(15, k + 1), f) for k, f in enumerate(fn)], faults=fn)
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.tripped and g.estimate_pct == pytest.approx(50, abs=3) and g.interval_pct is not None and g.interval_pct[0] > 40
    assert g.judged is not None and g.judged.fault_ns == pytest.approx(FAULT_MS * MS, rel=0.05)
    assert cli.main(["diff", str(base), str(new), "--fail-on-regression", "10"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(
        "judged 20 of 20 steps a side on their own time (wall less run-queue wait); "
        "less their page faults above their side's fewest (2 µs a fault, read from the steps)"
    )
    assert cli.main(["diff", "--json", str(base), str(new), "--fail-on-regression", "10"]) == 1
    rec = json.loads(capsys.readouterr().out)
    validate_record(rec)
    assert rec["gate"]["fault_us"] == pytest.approx(2.0, rel=0.05) and rec["step_ms"]["judged"]["fault_us"] == rec["gate"]["fault_us"]


def test_an_a_a_pair_whose_windows_faulted_differently_passes(tmp_path: Path) -> None:
    # the same program: the new run's last 15 steps each faulted 3000 pages (+60%), the base's none
    fn = [0] * 5 + [3000] * 15
    base = _trace(tmp_path / "base.json", [faulted(own_ms(10, k), 0) for k in range(20)], faults=[0] * 20)
    new = _trace(tmp_path / "new.json", [faulted(own_ms(10, k + 2), f) for k, f in enumerate(fn)], faults=fn)
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.reason is None and not g.tripped and g.interval_pct is not None and g.interval_pct[0] <= 0 <= g.interval_pct[1]


def test_a_side_that_faults_in_every_step_keeps_its_faults(tmp_path: Path) -> None:
    # a change that maps new memory every step (3000 pages, +60%) is the program's: only faults above a side's fewest
    # are taken out, so it trips; its few steps' extra faults (under FAULT_SPREAD apart) tell no cost
    fn = [3000 + (k % 4) * 20 for k in range(20)]
    base = _trace(tmp_path / "base.json", [faulted(own_ms(10, k), 0) for k in range(20)], faults=[0] * 20)
    new = _trace(tmp_path / "new.json", [faulted(own_ms(10, k), f) for k, f in enumerate(fn)], faults=fn)
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.judged is not None and g.judged.fault_ns is None
    assert g.tripped and g.estimate_pct == pytest.approx(60, abs=5)
    # with a cost read from its own varying steps, its level stays all the same
    fn2 = [3000] * 10 + [6000] * 10
    new2 = _trace(tmp_path / "new2.json", [faulted(own_ms(10, k), f) for k, f in enumerate(fn2)], faults=fn2)
    (d2,) = autoprof.diff(base, new2)
    g2 = d2.gate(10)
    assert g2.judged is not None and g2.judged.fault_ns == pytest.approx(FAULT_MS * MS, rel=0.05)
    assert g2.tripped and g2.estimate_pct == pytest.approx(60, abs=5)


def test_fault_counts_are_read_only_when_one_per_step(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.json", [faulted(10, 5)] * 3, faults=[5, 5, 5])
    doc = json.loads(path.read_text())
    trace = chrome.from_document(doc)
    assert engine.step_faults(trace) == [5, 5, 5] and len(engine.step_cpu(trace)) == 3
    for bad in ([5, 5], [5, -1, 5], [5, 5.5, 5], "5"):
        doc["autoprof_step_cpu"]["minflt"] = bad
        t = chrome.from_document(doc)
        assert engine.step_faults(t) == [] and len(engine.step_cpu(t)) == 3  # the rest of the readings kept
    a = engine.profile_of(chrome.load(path, workers=0), [], "a")
    b = engine.profile_of(chrome.load(_trace(tmp_path / "b.json", [faulted(10, 5)] * 3), workers=0), [], "b")
    assert compare.pool([a, a]).step_faults == [5] * 6 and compare.pool([a, b]).step_faults == []


def test_a_side_the_machine_slowed_as_it_faulted_does_not_set_the_faults_cost(tmp_path: Path) -> None:
    # the base's second window faulted 3000 pages a step and the machine slowed it 3x besides (its time per fault reads
    # 10 µs); the new run's (1.5x the work) faults cost their 2 µs. The faults' cost is the lower: the new run's
    # faulting steps lose 6 ms (both sides' slopes pooled read 2.8 µs: 8.5 ms)
    fb = [0] * 10 + [3000] * 10
    base = _trace(
        tmp_path / "base.json",
        [(own_ms(10, k) if f == 0 else own_ms(40, k), own_ms(10, k) if f == 0 else own_ms(40, k), 0.0) for k, f in enumerate(fb)],
        faults=fb,
    )
    new = _trace(tmp_path / "new.json", [faulted(own_ms(15, k + 1), f) for k, f in enumerate(fb)], faults=fb)
    (d,) = autoprof.diff(base, new)
    g = d.gate(10)
    assert g.judged is not None and g.judged.fault_ns == pytest.approx(FAULT_MS * MS, rel=0.05)
    assert g.estimate_pct is not None and g.estimate_pct > 0  # the new run is not read faster than a base it outworks
