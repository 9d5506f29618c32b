"""One builder of a window's records (render/records.py), live and offline; one wording of a failed rule; the live
window's drift and trigger judged in analysis/drift.py from the window's Analysis."""

from __future__ import annotations

import io
from typing import Any

from autoprof.analysis import drift
from autoprof.analysis.engine import Analysis, RuleFailureError
from autoprof.findings import Finding
from autoprof.render import records, table
from autoprof.render.emit import ERROR_EVENT, FINDING_EVENT, WARNING_EVENT, WINDOW_EVENT
from autoprof.rules import regime

BROKE = RuleFailureError("ValueError", "it broke")


def _regime(descheduled: float) -> Finding:
    evidence = {"descheduled_share": descheduled, "cpu_share": 0.5, "preempted_steps": 2}
    return Finding(regime.RULE, "overhead-bound", "warning", "overhead-bound", "batch work", evidence)


def _analysis(findings: list[Finding] | None = None, **fields: Any) -> Analysis:
    summary = {"step_device_ms": None, "step_period_ms": [2.0, 3.0, None], "regime": {"verdict": "overhead-bound"}}
    return Analysis(
        "a.json",
        findings=findings if findings is not None else [_regime(0.0)],
        failures=[("myteam.boom", BROKE)],
        steps=[1, 2, 3],
        step_ns=[1_000_000, 2_000_000, 3_000_000],
        summary=fields.pop("summary", summary),
        event_count=5,
        **fields,
    )


def test_a_failed_rule_has_one_wording_in_the_records_the_table_and_the_lines() -> None:
    assert records.rule_failed("myteam.boom", BROKE) == "rule myteam.boom failed: it broke"
    assert records.rule_failed("myteam.boom", BROKE, typed=True) == "rule myteam.boom failed: ValueError: it broke"
    assert records.rule_failed(None, BROKE) == "rule failed: it broke"
    a = _analysis()
    (error,) = [r for r in records.file_records(a) if r["event"] == ERROR_EVENT]
    assert (error["message"], error["reason"], error["error_type"]) == ("rule myteam.boom failed: it broke", "rule", "ValueError")
    out = io.StringIO()
    table.write([a], out, color=False)
    assert "  error    myteam.boom   rule failed: it broke\n" in out.getvalue()  # the column layout kept
    assert a.failure_lines == [records.rule_failed("myteam.boom", BROKE, typed=True)]  # the diff's and the warnings' line


def test_a_live_window_and_a_file_go_through_one_builder_in_one_order() -> None:
    late = Finding(drift.RULE, drift.DRIFTED, "warning", "window 1 drifted", "look", {})
    a = _analysis([_regime(0.2)])
    live = records.LiveWindow([7, 8, 9], [4_000_000] * 3, {"autoprof_overhead_ms": 1.0}, {"calls_total": 9}, [late])
    ctx = {"target": "step", "window": 1}
    built = records.window_records(a, ctx, {"source": "live"}, live)
    kinds = [(event, fields.get("rule") or fields.get("reason")) for event, _, fields in built]
    findings = [(FINDING_EVENT, regime.RULE), (FINDING_EVENT, drift.RULE)]
    assert kinds == [(WINDOW_EVENT, None), *findings, (WARNING_EVENT, "machine_busy"), (ERROR_EVENT, "rule")]
    window = built[0][2]
    assert list(window)[:3] == ["target", "window", "source"] and window["steps"] == [7, 8, 9] and window["step_wall_ms"] == [4.0] * 3
    assert window["calls_total"] == 9 and "stall_ms" not in window  # the live costs as handed in
    busy = built[3][2]
    assert list(busy) == ["target", "window", "descheduled_share", "cpu_share", "reason", "message"] and busy["descheduled_share"] == 0.2
    assert "source" not in built[4][2]  # an error record carries the context only, as it always has
    offline = records.window_records(a, ctx, {"trace_rank": 0})
    assert [e for e, _, _ in offline] == [WINDOW_EVENT, FINDING_EVENT, ERROR_EVENT]  # no drift, no machine_busy
    assert offline[0][2]["steps"] == [1, 2, 3] and offline[0][2]["stall_ms"] == 0.0


def test_a_quiet_machine_has_no_busy_warning() -> None:
    assert records.machine_busy([_regime(0.05)], {}) is None and records.machine_busy([], {}) is None


def test_drift_is_judged_from_the_analysis_against_the_first_window() -> None:
    reference: list[drift.WindowSummary] = []
    first = _analysis(step_time_ns=[10_000_000] * 3)
    assert drift.judge(reference, 0, first, [1] * 3) == [] and reference[0].step_ms == 10.0  # the first is the reference
    slower = _analysis(step_time_ns=[20_000_000] * 3)
    (found,) = drift.judge(reference, 1, slower, [1] * 3)
    assert found.rule == drift.RULE and found.evidence["step_ms"] == 20.0 and found.evidence["first_verdict"] == "overhead-bound"
    walls_only = _analysis(step_time_ns=[])  # no step in the trace: the training thread's walls stand in
    (by_walls,) = drift.judge(reference, 2, walls_only, [30_000_000] * 3)
    assert by_walls.evidence["step_ms"] == 30.0
    assert drift.judge([], 3, walls_only, []) == []


def test_a_triggered_window_is_judged_on_periods_less_the_run_queue_wait() -> None:
    a = _analysis()  # periods 2 ms, 3 ms, and none for the last step: its wall time stands in
    assert drift.trigger_step_times(a, [1, 2, 3], [9, 9, 7_000_000], []) == [2_000_000, 3_000_000, 7_000_000]
    cpus = [(0, 500_000), (0, 0), (0, -1)]  # a wait read, none, one not known
    assert drift.trigger_step_times(a, [1, 2, 3], [9, 9, 7_000_000], cpus) == [1_500_000, 3_000_000, 7_000_000]
    none = _analysis(summary={"step_period_ms": None})
    assert drift.trigger_step_times(none, [1, 2], [5, 6], []) == [5, 6]
