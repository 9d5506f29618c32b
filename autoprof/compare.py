"""Compare two runs: what changed between two readings of the same program. Pure: two sides' per-file
:class:`Profile` lists in, a :class:`Diff` per rank out. No I/O, no torch.

Ops are matched by name and input shapes, kernels by their launching op (and its shapes) and their own name,
never by position (pairing kernels by position "can pair the wrong kernels"); verdicts by rule. The engine
makes the profiles (:func:`autoprof.engine.profile_of`); the CLI and ``autoprof.diff`` render the diffs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from autoprof.findings import Finding, severity_rank
from autoprof.trace.model import MATMUL_OPS

#: Change kinds of an op or kernel.
ADDED, REMOVED, SLOWER, FASTER, MORE_CALLS, FEWER_CALLS = "added", "removed", "slower", "faster", "more calls", "fewer calls"
#: An op's time changed when it moved by this share of its base time and by this much of the base step.
TIME_CHANGE = 0.10
STEP_SHARE = 0.005


@dataclass(frozen=True)
class OpTime:
    """Calls and time (ns) of one op or kernel in a window."""

    calls: int
    ns: int


@dataclass
class Profile:
    """What one trace file says for a comparison (small and picklable)."""

    path: str
    rank: int
    step_ns: list[int]
    ops: dict[tuple[str, str], OpTime]  # (op name, input shapes) -> calls, self time on the host
    kernels: dict[tuple[str, str, str], OpTime]  # (launching op, its input shapes, kernel) -> calls, device time
    devices: list[str]  # the devices' names (deviceProperties)
    findings: list[Finding] = field(default_factory=list)
    events: int | None = None  # the trace's events (None: not known)
    failures: list[str] = field(default_factory=list)  # "rule X failed: ..." for each rule that raised on it


@dataclass(frozen=True)
class Change:
    """One op's or kernel's change: its key (op name and shapes, and kernel), both sides' figures."""

    kind: str
    key: tuple[str, ...]
    base: OpTime | None
    new: OpTime | None

    @property
    def delta_ns(self) -> int:
        return (self.new.ns if self.new else 0) - (self.base.ns if self.base else 0)

    def to_json(self) -> dict[str, Any]:
        def side(t: OpTime | None) -> dict[str, Any] | None:
            return {"calls": t.calls, "total_ms": round(t.ns / 1e6, 4)} if t else None

        return {
            "change": self.kind,
            "key": list(self.key),
            "base": side(self.base),
            "new": side(self.new),
            "delta_ms": round(self.delta_ns / 1e6, 4),
        }


@dataclass(frozen=True)
class VerdictChange:
    """A rule whose verdicts differ: ``moved`` (both sides have the rule), ``appeared`` or ``disappeared``."""

    kind: str
    rule: str
    base: Finding | None
    new: Finding | None

    def to_json(self) -> dict[str, Any]:
        def side(f: Finding | None) -> dict[str, Any] | None:
            if f is None:
                return None
            return {"verdict": f.verdict, "severity": f.severity, "message": f.message, "evidence": f.evidence}

        return {"change": self.kind, "rule": self.rule, "base": side(self.base), "new": side(self.new)}


@dataclass(frozen=True)
class Steps:
    """A side's step times: median and spread (ms)."""

    count: int
    median_ms: float
    min_ms: float
    max_ms: float

    @staticmethod
    def of(step_ns: list[int]) -> Steps | None:
        if not step_ns:
            return None
        ms = [n / 1e6 for n in step_ns]
        return Steps(len(ms), round(statistics.median(ms), 4), round(min(ms), 4), round(max(ms), 4))


@dataclass
class Diff:
    """What changed on one rank between the base run and the new one."""

    rank: int
    base_path: str
    new_path: str
    base_steps: Steps | None
    new_steps: Steps | None
    ops: list[Change]
    kernels: list[Change]
    verdicts: list[VerdictChange]
    devices: tuple[list[str], list[str]] | None  # (base, new) when the device changed
    gemm_kernels: tuple[list[str], list[str]] | None  # (base, new) GEMM kernels, when they differ
    events: tuple[int | None, int | None] = (None, None)  # (base, new) events in each trace
    failures: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))  # (base, new) rules that raised

    @property
    def step_change_pct(self) -> float | None:
        """The median step time's change, in percent of the base's (None without steps on a side)."""
        if not self.base_steps or not self.new_steps or self.base_steps.median_ms <= 0:
            return None
        return round((self.new_steps.median_ms / self.base_steps.median_ms - 1) * 100, 2)

    @property
    def step_problem(self) -> str | None:
        """Why the step times cannot be compared (None when :attr:`step_change_pct` is a number)."""
        if self.step_change_pct is not None:
            return None
        missing = [side for side, steps in (("base", self.base_steps), ("new", self.new_steps)) if not steps]
        if len(missing) == 2:
            return f"neither {self.base_path} nor {self.new_path} has steps (ProfilerStep#N spans)"
        if missing:
            path = self.base_path if missing[0] == "base" else self.new_path
            return f"the {missing[0]} trace {path} has no steps (ProfilerStep#N spans)"
        return f"the base trace {self.base_path} has a median step time of 0 ms"

    @property
    def findings_problem(self) -> str | None:
        """Why the verdicts cannot be compared (None when they can): a side with no events, where no rule read
        anything, or a rule that failed on a side, whose findings there are unknown."""
        for side, path, events in (("base", self.base_path, self.events[0]), ("new", self.new_path, self.events[1])):
            if events == 0:
                return f"the {side} trace {path} has no events: no rule read anything"
        for side, path, failed in (("base", self.base_path, self.failures[0]), ("new", self.new_path, self.failures[1])):
            if failed:
                return f"on the {side} trace {path}, {failed[0]}" + (f" (and {len(failed) - 1} more rules)" if len(failed) > 1 else "")
        return None

    def new_findings(self, level: str) -> list[Finding]:
        """Findings at or above ``level`` that the new run has and the base had not."""
        floor = severity_rank(level)
        return [c.new for c in self.verdicts if c.new is not None and c.kind != "disappeared" and severity_rank(c.new.severity) >= floor]

    @property
    def unchanged(self) -> bool:
        """Nothing changed: no op, kernel, verdict or device change, and step times compared and equal (without
        steps on a side, or with a rule failed, that is not known)."""
        return (
            not (self.ops or self.kernels or self.verdicts or self.devices or self.gemm_kernels)
            and self.step_change_pct == 0
            and self.findings_problem is None
        )

    def to_json(self) -> dict[str, Any]:
        def steps(s: Steps | None) -> dict[str, Any] | None:
            return {"count": s.count, "median_ms": s.median_ms, "min_ms": s.min_ms, "max_ms": s.max_ms} if s else None

        return {
            "base": self.base_path,
            "new": self.new_path,
            "diff_rank": self.rank,
            "step_ms": {"base": steps(self.base_steps), "new": steps(self.new_steps), "change_pct": self.step_change_pct},
            "device_change": {"base": self.devices[0], "new": self.devices[1]} if self.devices else None,
            "gemm_kernel_change": {"base": self.gemm_kernels[0], "new": self.gemm_kernels[1]} if self.gemm_kernels else None,
            "verdict_changes": [c.to_json() for c in self.verdicts],
            "op_changes": [c.to_json() for c in self.ops],
            "kernel_changes": [c.to_json() for c in self.kernels],
        }


def compare(base: list[Profile], new: list[Profile], top: int = 10) -> list[Diff]:
    """One :class:`Diff` per pair of files: one file each; else per rank both sides hold (per-rank traces of a
    job), in rank order; else (several files of a rank: a kept ``trace_dir`` with several targets or windows) per
    file name both sides hold."""
    return [compare_one(b, n, top) for b, n in pairs(base, new)]


def pairs(base: list[Profile], new: list[Profile]) -> list[tuple[Profile, Profile]]:
    """The files compared with each other (see :func:`compare`)."""
    if len(base) == 1 and len(new) == 1:  # one file each, whatever ranks they say
        return [(base[0], new[0])]
    by_rank_base = {p.rank: p for p in base}
    by_rank_new = {p.rank: p for p in new}
    if len(by_rank_base) == len(base) and len(by_rank_new) == len(new):
        return [(by_rank_base[r], by_rank_new[r]) for r in sorted(by_rank_base.keys() & by_rank_new.keys())]
    by_name_base = {_basename(p.path): p for p in base}
    by_name_new = {_basename(p.path): p for p in new}
    return [(by_name_base[k], by_name_new[k]) for k in sorted(by_name_base.keys() & by_name_new.keys())]


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def compare_one(base: Profile, new: Profile, top: int = 10) -> Diff:
    base_steps, new_steps = Steps.of(base.step_ns), Steps.of(new.step_ns)
    step_ns = max(statistics.median(base.step_ns) if base.step_ns else 0, 1)
    return Diff(
        rank=new.rank,
        base_path=base.path,
        new_path=new.path,
        base_steps=base_steps,
        new_steps=new_steps,
        ops=_changes(base.ops, new.ops, step_ns * max(len(base.step_ns), 1), top),
        kernels=_changes(base.kernels, new.kernels, step_ns * max(len(base.step_ns), 1), top),
        verdicts=_verdicts(base.findings, new.findings),
        devices=(base.devices, new.devices) if base.devices != new.devices and (base.devices or new.devices) else None,
        gemm_kernels=_gemm_kernels(base, new),
        events=(base.events, new.events),
        failures=(list(base.failures), list(new.failures)),
    )


def _changes(base: dict[Any, OpTime], new: dict[Any, OpTime], window_ns: float, top: int) -> list[Change]:
    """The ops (or kernels) added, removed, or whose time or calls changed, the largest changes in time first.
    A change in time counts when it is at least ``TIME_CHANGE`` of the base time and ``STEP_SHARE`` of the base
    window (a 3 µs op that became 4 µs is no news)."""
    floor = STEP_SHARE * window_ns
    out: list[Change] = []
    for key in base.keys() | new.keys():
        b, n = base.get(key), new.get(key)
        if b is None and n is not None:
            if n.ns >= floor:
                out.append(Change(ADDED, key, None, n))
        elif n is None and b is not None:
            if b.ns >= floor:
                out.append(Change(REMOVED, key, b, None))
        elif b is not None and n is not None:
            delta = n.ns - b.ns
            if abs(delta) >= max(TIME_CHANGE * b.ns, floor):
                out.append(Change(SLOWER if delta > 0 else FASTER, key, b, n))
            elif n.calls != b.calls and max(n.ns, b.ns) >= floor:
                out.append(Change(MORE_CALLS if n.calls > b.calls else FEWER_CALLS, key, b, n))
    out.sort(key=lambda c: (-abs(c.delta_ns), c.key))
    return out[:top]


def _verdicts(base: list[Finding], new: list[Finding]) -> list[VerdictChange]:
    """Rules whose verdicts differ: by rule, then by verdict within a rule."""
    by_rule_base: dict[str, list[Finding]] = {}
    by_rule_new: dict[str, list[Finding]] = {}
    for f in base:
        by_rule_base.setdefault(f.rule, []).append(f)
    for f in new:
        by_rule_new.setdefault(f.rule, []).append(f)
    out: list[VerdictChange] = []
    for rule in sorted(by_rule_base.keys() | by_rule_new.keys()):
        b, n = by_rule_base.get(rule, []), by_rule_new.get(rule, [])
        if {f.verdict for f in b} == {f.verdict for f in n}:
            continue
        if b and n:
            out.append(VerdictChange("moved", rule, b[0], n[0]))
        elif n:
            out.extend(VerdictChange("appeared", rule, None, f) for f in n)
        else:
            out.extend(VerdictChange("disappeared", rule, f, None) for f in b)
    return out


def _gemm_kernels(base: Profile, new: Profile) -> tuple[list[str], list[str]] | None:
    def gemms(p: Profile) -> list[str]:
        return sorted({kernel for op, _, kernel in p.kernels if op in MATMUL_OPS})

    b, n = gemms(base), gemms(new)
    return (b, n) if b != n and b and n else None
