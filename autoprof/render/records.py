"""A window's records, the one builder live and offline: the ``autoprof.window`` record, its findings' records and its
rules' failures, from the window's :class:`~autoprof.analysis.engine.Analysis`. A live window hands in what only it
knows as data (:class:`LiveWindow`: its recorded steps and their wall times, what it cost the program, its own fields,
its drift findings); a file's records carry zero costs (:data:`OFFLINE_COSTS`). The builder writes nothing: it returns
``(event, level, fields)`` triples, which the live job writes through :func:`autoprof.render.emit.emit` and the CLI
turns into JSON lines (:func:`file_records`). :func:`~autoprof.findings.rule_failed` is the one wording of a failed rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoprof.findings import Finding, error_type, record_level, rule_failed
from autoprof.render.emit import ERROR_EVENT, FINDING_EVENT, WARNING_EVENT, WINDOW_EVENT, build_record, window_fields
from autoprof.rules import regime

if TYPE_CHECKING:
    from autoprof.analysis.engine import Analysis

#: One record before it is written: its event, its level and its fields, in the order the line holds them.
Record = tuple[str, str, dict[str, Any]]

#: Offline, the program paid nothing for its window: both costs are 0 (and the records stay reproducible).
OFFLINE_COSTS: Mapping[str, float] = {"autoprof_overhead_ms": 0.0, "stall_ms": 0.0}

#: A window whose steps' thread was preempted this share of the step or more was read on a busy machine.
MACHINE_BUSY_SHARE = 0.10


@dataclass(frozen=True)
class LiveWindow:
    """What a live window's records hold beyond its :class:`~autoprof.analysis.engine.Analysis`, gathered by the
    window's job: the recorded steps and their wall times (the training thread's clock), what the window cost the
    program (``costs``), its own fields (``fields``: its target's calls, the kept trace, the trigger, the CPU share)
    and its findings from beyond the trace (``drift``: ``window_drift`` against its target's first window)."""

    steps: Sequence[int]
    walls: Sequence[int]
    costs: Mapping[str, Any]
    fields: Mapping[str, Any]
    drift: Sequence[Finding] = ()


def window_records(analysis: Analysis, context: Mapping[str, Any], tags: Mapping[str, Any], live: LiveWindow | None = None) -> list[Record]:
    """The window's records in the order they are written: the window record, its findings (then a live window's
    drift), a live window's ``machine_busy`` warning, then one error per failed rule. ``context`` leads every record
    (target, window, ...); ``tags`` follow it on the window and finding records (live: ``source``; a file: its
    ``trace_rank``)."""
    fields = window_fields(
        steps=analysis.steps if live is None else live.steps,
        step_wall_ns=analysis.step_ns if live is None else live.walls,
        top_ops=analysis.top_ops,
        sections=analysis.sections,
        event_count=analysis.event_count,
        costs=OFFLINE_COSTS if live is None else live.costs,
        summary=analysis.summary,
        live=None if live is None else live.fields,
    )
    out: list[Record] = [(WINDOW_EVENT, "info", {**context, **tags, **fields})]
    findings = [*analysis.findings, *(live.drift if live is not None else ())]
    out.extend((FINDING_EVENT, record_level(f), {**context, **tags, **f.to_record()}) for f in findings)
    busy = machine_busy(analysis.findings, context) if live is not None else None
    if busy is not None:
        out.append(busy)
    out.extend(
        (ERROR_EVENT, "error", {**context, "message": rule_failed(name, e), "reason": "rule", "error_type": error_type(e)})
        for name, e in analysis.failures
    )
    return out


def file_records(analysis: Analysis) -> list[dict[str, Any]]:
    """A file's records (``autoprof analyze --json``), as the live path writes a window's: the window record, then
    the findings, then the failed rules."""
    context = {
        "target": analysis.path,
        "window": None,
        "source": analysis.path,
        "rank": analysis.rank,
        "world_size": analysis.world_size,
    }
    built = window_records(analysis, context, {"trace_rank": analysis.rank})
    return [build_record(event, level, **fields) for event, level, fields in built]


def machine_busy(findings: Sequence[Finding], context: Mapping[str, Any]) -> Record | None:
    """The ``machine_busy`` warning of a live window whose steps the machine kept off the CPU (the regime's
    ``descheduled_share`` at least :data:`MACHINE_BUSY_SHARE`): how busy, and that its shares are suspect."""
    regime_finding = next((f for f in findings if f.rule == regime.RULE), None)
    if regime_finding is None:
        return None
    ev = regime_finding.evidence
    d = ev.get("descheduled_share")
    if not isinstance(d, float) or d < MACHINE_BUSY_SHARE:
        return None
    message = (
        f"the window was read on a busy machine: other work kept the steps' thread off the CPU {d:.0%} of the step "
        f"(it ran {ev.get('cpu_share', 0):.0%} of its steps' wall time, waited for a CPU in {ev.get('preempted_steps')} of them); "
        "that time is left out of op work and overhead, and the window's shares are suspect"
    )
    fields = {**context, "descheduled_share": d, "cpu_share": ev.get("cpu_share"), "reason": "machine_busy", "message": message}
    return (WARNING_EVENT, "warning", fields)
