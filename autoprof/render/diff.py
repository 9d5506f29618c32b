"""``autoprof diff``'s text: a :class:`~autoprof.analysis.compare.Diff` as the lines a person reads (:func:`table`),
the gate's line (:func:`gate_line`), its record (:func:`record`) and the phrase naming the groups one side lacks (:func:`missing_text`).
:mod:`autoprof.analysis.compare` compares; this module says what it found."""

from __future__ import annotations

from typing import IO, Any

from autoprof.analysis.compare import (
    BLOCKED_ASIDE,
    FASTER,
    OWN_TIME,
    SLOWER,
    WALL_TIME,
    Diff,
    Gate,
    Judged,
    KernelSummary,
    PeakChange,
    confidence_text,
)
from autoprof.render.emit import DIFF_EVENT, build_record
from autoprof.render.text import clean
from autoprof.rules.memory import size


def peak_text(peak: PeakChange) -> str:
    """``memory peak cuda:0: 1.2 GiB → 1.8 GiB (+50%, +614 MiB [+600 MiB, +630 MiB], 95% confidence, outside noise)``."""
    pct = peak.change_pct
    change = ", ".join(p for p in (f"{pct:+.0f}%" if pct is not None else "", f"{_signed(peak.delta_bytes)}") if p)
    s = peak.shift
    if peak.tested and s is not None and s.lo is not None and s.hi is not None:
        noise = "within noise" if s.within_noise else "outside noise"
        change += f" [{_signed(s.lo)}, {_signed(s.hi)}], {s.confidence:.0%} confidence, {noise}"
    else:
        change += " on the medians, not tested against noise: too few steps"
    b, n = peak.steps
    return f"memory peak {peak.device}: {size(peak.base_bytes)} → {size(peak.new_bytes)} ({change}); base {b} steps, new {n} steps"


def _signed(n: float) -> str:
    return ("+" if n >= 0 else "") + size(n)


def judged_text(j: Judged) -> str:
    """``judged 18 of 20 steps a side on their own time (wall less run-queue wait); 2 a side set aside (...)``."""
    (jb, jn), (tb, tn) = j.judged, j.steps
    count = f"judged {jb} of {tb} steps a side" if (jb, tb) == (jn, tn) else f"judged base {jb} of {tb} steps, new {jn} of {tn}"
    basis = "their own time (wall less run-queue wait)" if j.basis == OWN_TIME else f"wall time ({j.why_wall})"
    out = f"{count} on {basis}"
    ab, an = j.set_aside
    if ab or an:
        n = f"{ab} a side" if ab == an else f"base {ab}, new {an}"
        out += f"; {n} set aside (blocked off the CPU {BLOCKED_ASIDE:.0%} of the step more than their side's typical step)"
    if j.fault_ns is not None:
        out += f"; less their page faults above their side's fewest ({j.fault_ns / 1e3:.2g} µs a fault, read from the steps)"
    return out


def gate_line(g: Gate) -> str:
    """The one line a tripped (or undecided) gate prints."""
    if g.reason:
        return f"--fail-on-regression {g.threshold_pct:g} cannot be evaluated: {g.reason}"
    assert g.estimate_pct is not None and g.interval_pct is not None
    lo, hi = g.interval_pct
    verb = "tripped" if g.tripped else "passed"
    rel = ">" if g.tripped else "not >"
    j = g.judged
    if j is None or (j.basis == WALL_TIME and j.set_aside == (0, 0) and j.fault_ns is None):
        steps = f"base {g.base_steps} steps, new {g.new_steps} steps" + (f"; on wall time ({j.why_wall})" if j else "")
    else:
        steps = judged_text(j)
    return (
        f"gate {verb}: step time {g.estimate_pct:+.1f}% [{lo:+.1f}%, {hi:+.1f}%] ({confidence_text(g.confidence)} confidence) "
        f"{rel} +{g.threshold_pct:g}% threshold; {steps}"
    )


def kernels_text(k: KernelSummary) -> str:
    """A side's GEMM kernels in short: ``12 kernels (8 cutlass, 4 cublas); top: ...``."""
    fams = ", ".join(f"{n} {f}" for f, n in sorted(k.families.items(), key=lambda kv: (-kv[1], kv[0])))
    top = ", ".join(f"{name} {ns / 1e6:.2f} ms" for name, ns in k.top)
    return f"{sum(k.families.values())} kernels ({fams}); top: {top}"


def record(d: Diff, gate: Gate | None) -> dict[str, Any]:
    """One diff's ``autoprof.diff`` record (``autoprof diff --json``), its gate's decision with it (None: no gate)."""
    level = "warning" if gate is not None and gate.tripped else "info"
    fields = d.to_json()
    fields["gate"] = gate.to_json() if gate is not None else None
    where = d.new_path or d.base_path  # a group the new run lacks: the base's files
    return build_record(DIFF_EVENT, level, target=where, window=None, source=where, **fields)


def missing_text(diffs: list[Diff]) -> str | None:
    """The groups a side lacks (:attr:`Diff.missing`), all in one phrase: ``the new run has no trace of rank 1 (the
    base run has base/r1.json)``, ``the new run has no trace of rank 1, rank 2 (the base run has them)``; None when
    every group is on both sides."""
    parts = []
    for side, other in (("new", "base"), ("base", "new")):
        lacking = [d for d in diffs if d.missing == side]
        if len(lacking) == 1:
            parts.append(lacking[0].missing_problem)
        elif lacking:
            parts.append(f"the {side} run has no trace of {', '.join(d.group for d in lacking)} (the {other} run has them)")
    return "; ".join(p for p in parts if p) or None


def _judged(change: Any) -> str | None:
    """A tested change of time as the line says it: the statistic it was judged on (the Hodges-Lehmann shift of the
    per-step times, with its interval), then each side's median time per step where the medians move the same way
    (the means can move the other way: one slow step in the base). None for a change not tested against noise."""
    s = change.shift
    if change.kind not in (SLOWER, FASTER) or not change.tested or s is None or s.lo is None or s.hi is None:
        return None
    nb, nn = change.steps
    calls = " → ".join(f"{(t.calls if t else 0) / k:.4g}" for t, k in ((change.base, nb), (change.new, nn)))
    line = f"{s.estimate / 1e6:+.3f} ms/step [{s.lo / 1e6:+.3f}, {s.hi / 1e6:+.3f}] ({confidence_text(s.confidence)} confidence)"
    med = change.medians
    if med is not None and (med[1] - med[0]) * s.estimate > 0:
        line += f"; median {med[0] / 1e6:.3f} → {med[1] / 1e6:.3f} ms/step"
    return f"{line}; {calls} calls/step"


def _per_step(change: Any, side: Any, n: int) -> str:
    if side is None:
        return "-"
    if n:
        return f"{side.calls / n:.4g} calls {side.ns / n / 1e6:.3f} ms/step"
    return f"{side.calls} calls {side.ns / 1e6:.3f} ms"


class _CleanLines:
    """A text stream whose writes are lines (each ends in its own newlines, the only ones it means): everything before
    them :func:`~autoprof.render.text.clean`, so a name from a trace cannot write escape sequences or lines."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, text: str) -> None:
        body = text.rstrip("\n")
        self.out.write(clean(body) + text[len(body) :])


def table(d: Diff, stream: IO[str]) -> None:
    """One diff's text (``autoprof diff`` without ``--json``): the pair, the step time's change and its interval, the
    gate's reading, memory peaks, failures, devices, GEMM kernels, compiled regions, verdicts, then each changed op,
    call count and kernel; every line :func:`~autoprof.render.text.clean`."""
    out = _CleanLines(stream)
    if d.missing is not None:
        out.write(f"{d.base_path or '(none)'} → {d.new_path or '(none)'}  (rank {d.rank})\n")
        out.write(f"  not compared: {d.missing_problem}\n\n")
        return
    out.write(f"{d.base_path} → {d.new_path}  (rank {d.rank})\n")
    if len(d.files[0]) > 1 or len(d.files[1]) > 1:
        out.write(f"  pooled: base {len(d.files[0])} files, new {len(d.files[1])} files\n")
    b, n = d.base_steps, d.new_steps
    s = d.step_shift
    if b and n and d.step_change_pct is not None:
        out.write(
            f"  step time: {b.median_ms:.3f} ms [{b.min_ms:.3f}–{b.max_ms:.3f}] → {n.median_ms:.3f} ms "
            f"[{n.min_ms:.3f}–{n.max_ms:.3f}]; base {b.count} steps, new {n.count} steps\n"
        )
        if s is not None and s.lo is not None and s.hi is not None:
            noise = "within noise" if s.within_noise else "outside noise"
            out.write(
                f"  change: {s.estimate:+.1f}% [{s.lo:+.1f}%, {s.hi:+.1f}%] ({confidence_text(s.confidence)} confidence), {noise}; "
                f"these steps detect changes of about ±{d.min_detectable_pct or 0:.1f}% or more\n"
            )
        else:
            conf = s.confidence if s is not None else 0.95
            out.write(
                f"  change: {d.step_change_pct:+.1f}% (medians), not tested against noise: "
                f"too few steps for a {confidence_text(conf)} interval\n"
            )
    elif d.step_problem:
        out.write(f"  step time: not compared: {d.step_problem}\n")
    j = d.judged
    if b and n and j is not None and (j.basis == OWN_TIME or j.set_aside != (0, 0) or j.fault_ns is not None):
        js = j.shift
        if js is not None and js.lo is not None and js.hi is not None:
            out.write(f"  the gate's reading: {js.estimate:+.1f}% [{js.lo:+.1f}%, {js.hi:+.1f}%]; {judged_text(j)}\n")
    for peak in d.memory_peaks:
        out.write(f"  {peak_text(peak)}\n")
    for side, failed in zip(("base", "new"), d.failures):
        for line in failed:
            out.write(f"  error on the {side} trace: {line}\n")
    if d.devices:
        out.write(
            f"  device: {', '.join(d.devices[0]) or 'none'} → {', '.join(d.devices[1]) or 'none'} (the likely cause of what follows)\n"
        )
    if d.gemm_summary:
        out.write(f"  GEMM kernels, base: {kernels_text(d.gemm_summary[0])}\n")
        out.write(f"  GEMM kernels, new:  {kernels_text(d.gemm_summary[1])}\n")
    added, removed = d.compiled
    if added:
        out.write(f"  compiled regions added: {', '.join(added)}\n")
    if removed:
        out.write(f"  compiled regions removed: {', '.join(removed)}\n")
    for c in d.verdicts:
        if c.kind == "unstable":
            shown = "; ".join(f"{side}: {'/'.join(vs)}" for side, vs in zip(("base", "new"), c.verdicts))
            out.write(f"  {c.rule}: unstable on {' and '.join(c.unstable)} (its windows disagree: {shown}); no change claimed\n")
        elif c.kind == "moved" and c.base and c.new:
            out.write(f"  {c.rule}: {c.base.verdict} → {c.new.verdict}: {c.new.message}\n")
        elif c.new:
            out.write(f"  + {c.rule} ({c.new.verdict}): {c.new.message}\n")
        elif c.base:
            out.write(f"  - {c.rule} ({c.base.verdict}): {c.base.message}\n")
    sections = (
        ("ops by name and shapes (time; largest first)", d.ops),
        ("ops by name (time, all shapes)", d.op_names),
        ("calls per step by name and shapes (what runs, not its speed)", d.calls),
        ("calls per step by name (all shapes)", d.call_names),
        ("kernels (device time; largest first)", d.kernels),
        ("kernel launches per step (what runs, not its speed)", d.kernel_calls),
    )
    for title, changes in sections:
        if not changes:
            continue
        untested = any(not c.tested for c in changes)
        out.write(f"  {title}{', not tested against noise' if untested else ''}:\n")
        for change in changes:
            nb, nn = change.steps
            sides = _judged(change) or " → ".join(_per_step(change, t, k) for t, k in ((change.base, nb), (change.new, nn)))
            out.write(f"    {change.kind:<11} {' '.join(part for part in change.key if part)}  {sides}\n")
    if d.unchanged:
        within = d.step_shift is not None and d.step_shift.decided
        out.write("  no change (within noise)\n" if within else "  no change\n")
    for side, path, events in zip(("base", "new"), (d.base_path, d.new_path), d.events):
        if events == 0:
            out.write(f"  nothing to compare: the {side} trace {path} has no events\n")
    out.write("\n")
