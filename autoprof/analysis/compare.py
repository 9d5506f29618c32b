"""Compare two runs: what changed between two readings of the same program. Pure: two sides' per-file
:class:`Profile` lists in, a :class:`Diff` per rank out. No I/O, no torch.

Ops are matched by name and input shapes, kernels by their launching op (and its shapes) and their own name,
never by position (pairing kernels by position "can pair the wrong kernels"); verdicts by rule. The engine
makes the profiles (:func:`autoprof.analysis.engine.profile_of`); :mod:`autoprof.render.diff` says them as text
(``autoprof diff``'s table, the gate's line), ``Diff.to_json`` as records; this module only compares.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from autoprof.analysis._stats import Shift, ratio_shift, shift
from autoprof.findings import Finding, severity_rank
from autoprof.measure.kernels import kernel_family, kernel_head
from autoprof.measure.ops import MATMUL_OPS

#: Change kinds of an op or kernel.
ADDED, REMOVED, SLOWER, FASTER, MORE_CALLS, FEWER_CALLS = "added", "removed", "slower", "faster", "more calls", "fewer calls"
#: An op's time changed when it moved by this share of its base time and by this much of the base step.
TIME_CHANGE = 0.10
STEP_SHARE = 0.005
#: An op's calls per step changed when they moved by this share of the base's (and by one call a step at least).
CALL_CHANGE = 0.10
#: The gate needs at least this many steps on each side (fewer: no interval worth the name).
MIN_STEPS = 3
#: A device's memory peak changed when its median step peak moved by this share of the base's and this many bytes.
PEAK_CHANGE = 0.05
PEAK_CHANGE_BYTES = 1 << 20
#: GEMM kernels named per side in the summary of a kernel change.
TOP_KERNELS = 5
#: Op names of compiled regions: torch.compile's, AOTAutograd's, a CUDA graph's replay.
COMPILED = re.compile(r"Torch-Compiled Region|CompiledFunction|TorchDynamo|cudaGraphLaunch|CUDAGraph", re.IGNORECASE)


@dataclass(frozen=True)
class OpTime:
    """Calls and time (ns) of one op or kernel in a window."""

    calls: int
    ns: int


@dataclass
class Profile:
    """What one trace file (or several windows of one target, pooled: :func:`pool`) says for a comparison (small
    and picklable)."""

    path: str
    rank: int
    step_ns: list[int]
    ops: dict[tuple[str, str], OpTime]  # (op name, input shapes) -> calls, self time on the host
    kernels: dict[tuple[str, str, str], OpTime]  # (launching op, its input shapes, kernel) -> calls, device time
    devices: list[str]  # the devices' names (deviceProperties)
    findings: list[Finding] = field(default_factory=list)
    events: int | None = None  # the trace's events (None: not known)
    failures: list[str] = field(default_factory=list)  # "rule X failed: ..." for each rule that raised on it
    # each op's and kernel's self (device) time in each step, in the order of step_ns (empty: not known)
    op_steps: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    kernel_steps: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    windows: list[list[Finding]] | None = None  # each pooled window's findings (None: one window, ``findings``)
    files: list[str] = field(default_factory=list)  # the files pooled here (empty: ``path`` alone)
    run: int = 0  # which of a side's runs (input paths) the file came from
    # per device (cpu, cuda:0), each step's peak of allocated memory (bytes above the window's start), in the order
    # of step_ns (:func:`autoprof.rules.memory.step_peaks`); empty without memory events
    memory_peaks: dict[str, list[int]] = field(default_factory=dict)
    # each step's thread CPU time and run-queue wait (ns; the wait -1 where not known), in the order of step_ns, from a
    # live window's readings (issue 49); empty: not known (an offline trace, a window kept before autoprof read them)
    step_cpu: list[tuple[int, int]] = field(default_factory=list)
    # each step's thread minor page faults, in the order of step_ns, where the window read them; empty: not known
    step_faults: list[int] = field(default_factory=list)

    @property
    def window_findings(self) -> list[list[Finding]]:
        return self.windows if self.windows is not None else [self.findings]

    @property
    def paths(self) -> list[str]:
        return self.files or [self.path]


@dataclass(frozen=True)
class Change:
    """One op's or kernel's change: its key (op name and shapes, and kernel; or the op name alone in a roll-up),
    both sides' figures, and with steps on both sides the per-step figures and their interval."""

    kind: str
    key: tuple[str, ...]
    base: OpTime | None
    new: OpTime | None
    steps: tuple[int, int] = (0, 0)  # (base, new) steps the per-step figures are over (0: no steps)
    shift: Shift | None = None  # the per-step time's shift (ns), when tested against noise
    medians: tuple[float, float] | None = None  # (base, new) median time per step (ns), with steps on both sides

    @property
    def delta_ns(self) -> int:
        return (self.new.ns if self.new else 0) - (self.base.ns if self.base else 0)

    @property
    def tested(self) -> bool:
        """The change was tested against the steps' noise (else: totals, one window's worth of luck)."""
        return self.shift is not None and self.shift.decided

    def per_step(self, side: OpTime | None, n: int, calls: bool = False) -> float | None:
        if not n:
            return None
        return ((side.calls if calls else side.ns) if side else 0) / n

    def to_json(self) -> dict[str, Any]:
        def side(t: OpTime | None) -> dict[str, Any] | None:
            return {"calls": t.calls, "total_ms": round(t.ns / 1e6, 4)} if t else None

        out: dict[str, Any] = {
            "change": self.kind,
            "key": list(self.key),
            "base": side(self.base),
            "new": side(self.new),
            "delta_ms": round(self.delta_ns / 1e6, 4),
            "tested": self.tested,
        }
        if self.steps[0] and self.steps[1]:
            b, n = self.steps
            base_ms, new_ms = (self.per_step(self.base, b) or 0) / 1e6, (self.per_step(self.new, n) or 0) / 1e6
            s = self.shift
            out["per_step"] = {
                "base_ms": round(base_ms, 4),
                "new_ms": round(new_ms, 4),
                "base_calls": round(self.per_step(self.base, b, True) or 0, 3),
                "new_calls": round(self.per_step(self.new, n, True) or 0, 3),
                "delta_ms": round(s.estimate / 1e6, 4) if s else round(new_ms - base_ms, 4),
                "base_median_ms": round(self.medians[0] / 1e6, 4) if self.medians else None,
                "new_median_ms": round(self.medians[1] / 1e6, 4) if self.medians else None,
                "interval_ms": [round(s.lo / 1e6, 4), round(s.hi / 1e6, 4)] if s and s.lo is not None and s.hi is not None else None,
                "steps": [b, n],
            }
        return out


@dataclass(frozen=True)
class PeakChange:
    """One device's memory peak, base against new: each side's median step peak (bytes above what its window held
    at its start), and with steps enough on both sides the per-step peaks' shift (bytes) and its interval."""

    device: str
    base_bytes: int
    new_bytes: int
    steps: tuple[int, int]  # (base, new) steps the peaks are over
    shift: Shift | None = None  # the step peaks' shift (bytes), when tested against noise

    @property
    def delta_bytes(self) -> float:
        """The change: the shift's estimate where tested, else the medians' difference."""
        return self.shift.estimate if self.tested and self.shift is not None else float(self.new_bytes - self.base_bytes)

    @property
    def change_pct(self) -> float | None:
        return round(self.delta_bytes / self.base_bytes * 100, 2) if self.base_bytes > 0 else None

    @property
    def tested(self) -> bool:
        return self.shift is not None and self.shift.decided

    @property
    def changed(self) -> bool:
        """Outside noise (where tested) and over the floors (``PEAK_CHANGE`` of the base, ``PEAK_CHANGE_BYTES``)."""
        if self.tested and self.shift is not None and self.shift.within_noise:
            return False
        return abs(self.delta_bytes) >= max(PEAK_CHANGE * self.base_bytes, PEAK_CHANGE_BYTES)

    def to_json(self) -> dict[str, Any]:
        s = self.shift if self.tested else None
        mib = 1 << 20
        return {
            "device": self.device,
            "base_bytes": self.base_bytes,
            "new_bytes": self.new_bytes,
            "delta_mib": round(self.delta_bytes / mib, 3),
            "change_pct": self.change_pct,
            "tested": self.tested,
            "interval_mib": [round(s.lo / mib, 3), round(s.hi / mib, 3)] if s and s.lo is not None and s.hi is not None else None,
            "confidence": self.shift.confidence if self.shift is not None else None,
            "within_noise": s.within_noise if s is not None else None,
            "changed": self.changed,
            "steps": list(self.steps),
        }


@dataclass(frozen=True)
class VerdictChange:
    """A rule whose verdicts differ: ``moved`` (both sides have the rule), ``appeared`` or ``disappeared``; or
    ``unstable``: a side's windows disagree on it, so no change is claimed (``unstable`` names those sides)."""

    kind: str
    rule: str
    base: Finding | None
    new: Finding | None
    unstable: tuple[str, ...] = ()
    verdicts: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # each side's verdicts over its windows

    def to_json(self) -> dict[str, Any]:
        def side(f: Finding | None) -> dict[str, Any] | None:
            if f is None:
                return None
            return {"verdict": f.verdict, "severity": f.severity, "message": f.message, "evidence": f.evidence}

        out: dict[str, Any] = {"change": self.kind, "rule": self.rule, "base": side(self.base), "new": side(self.new)}
        if self.unstable:
            out["unstable"] = list(self.unstable)
            out["window_verdicts"] = {"base": list(self.verdicts[0]), "new": list(self.verdicts[1])}
        return out


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


def check_confidence(confidence: float) -> None:
    """Raise ValueError unless ``confidence`` is one an interval can be read at (0.5 up to, not including, 1)."""
    if not 0.5 <= confidence < 1:  # nan fails too
        raise ValueError(f"confidence must be between 0.5 and 1 (0.95: 95%), got {confidence!r}")


def confidence_text(confidence: float) -> str:
    """``0.95`` as ``95%``, ``0.999`` as ``99.9%`` (not rounded up to ``100%``)."""
    return f"{confidence * 100:.6g}%"


#: The gate sets a step aside when its time off the CPU that the run queue does not explain (the thread blocked: a
#: lock, the GIL, another thread's work; or a hypervisor took the CPU) is this share of the step above its side's
#: typical (median) share: the machine's doing, or a stall that is not the step's work.
BLOCKED_ASIDE = 0.25
OWN_TIME, WALL_TIME = "own_time", "wall_time"
#: Two steps of a side tell what a page fault costs when their minor page faults differ by this many or more (512 KiB of
#: 4 KiB pages: a buffer mapped afresh, not the few faults any step may take).
FAULT_SPREAD = 128
#: The page faults' cost is read only from this many such pairs of steps or more.
FAULT_PAIRS = 10
#: At most this many steps a side (evenly spaced) are paired to read the faults' cost (their pairs grow as the square).
FAULT_STEPS = 200


@dataclass(frozen=True)
class Judged:
    """The steps the gate judges, and on what: each step's own time (its wall time less what the machine kept its
    thread waiting for a CPU: the run-queue wait) where both sides' traces carry their steps' CPU readings (a live
    window's ``step_cpu``), else wall time; steps whose unexplained time off the CPU is ``BLOCKED_ASIDE`` above their
    side's typical share are set aside (where that leaves enough steps for an interval); where both sides' traces carry
    each step's minor page faults, what a fault costs is read from the steps and each step's faults above its side's
    fewest are taken out of its time (``fault_ns``: the profiler's allocations make some windows fault far more)."""

    basis: str  # OWN_TIME or WALL_TIME
    shift: Shift | None  # the judged steps' shift (percent of the base) and its interval
    judged: tuple[int, int]  # (base, new) steps judged
    steps: tuple[int, int]  # (base, new) steps in all
    why_wall: str | None = None  # why the basis is wall time (None: own time)
    # what a minor page fault cost the steps (ns, read from them), each step's faults above its side's fewest taken out
    # of its time; None: not (the traces carry no fault counts, or their steps do not tell the cost)
    fault_ns: float | None = None

    @property
    def set_aside(self) -> tuple[int, int]:
        return self.steps[0] - self.judged[0], self.steps[1] - self.judged[1]

    def to_json(self) -> dict[str, Any]:
        s = self.shift
        return {
            "basis": self.basis,
            "why_wall": self.why_wall,
            "estimate_pct": None if s is None else round(s.estimate, 2),
            "interval_pct": [round(s.lo, 2), round(s.hi, 2)] if s and s.lo is not None and s.hi is not None else None,
            "judged_steps": list(self.judged),
            "steps": list(self.steps),
            "set_aside": list(self.set_aside),
            "fault_us": None if self.fault_ns is None else round(self.fault_ns / 1e3, 3),
        }


def _own_times(p: Profile, runqueue: bool) -> tuple[list[float], list[float]]:
    """A side's steps' times the gate reads (own time with ``runqueue``, else wall time) and each one's blocked share:
    its time off the CPU that the run-queue wait does not explain, over its wall time."""
    times, blocked = [], []
    for wall, (cpu, waited) in zip(p.step_ns, p.step_cpu, strict=True):
        off = max(wall - cpu, 0)  # the thread did not run: it waited for a CPU, or blocked
        descheduled = min(waited, off) if runqueue else 0  # the run queue's part (a wait read outside the step: capped)
        times.append(float(wall - descheduled))
        blocked.append((off - descheduled) / wall if wall > 0 else 0.0)
    return times, blocked


def _fault_cost(sides: list[tuple[list[float], list[int]]]) -> float | None:
    """What one minor page fault costs a step (ns): per side, the median slope of time against faults over every pair of
    its steps whose faults differ by ``FAULT_SPREAD`` or more (Theil-Sen; a side with fewer than ``FAULT_PAIRS`` such
    pairs tells nothing), not below 0; of two sides' costs the lower. A fault costs the same on both sides (one
    machine); a side whose faulting window the machine also slowed (its thread kept off the CPU and its caches cold)
    reads a higher cost, which is the machine's, not the faults'. None where no side tells it."""
    costs: list[float] = []
    for times, faults in sides:
        n = len(times)
        keep = range(n) if n <= FAULT_STEPS else sorted({round(i * (n - 1) / (FAULT_STEPS - 1)) for i in range(FAULT_STEPS)})
        pts = [(faults[i], times[i]) for i in keep]
        slopes = [(tb - ta) / (fb - fa) for a, (fa, ta) in enumerate(pts) for fb, tb in pts[a + 1 :] if abs(fb - fa) >= FAULT_SPREAD]
        if len(slopes) >= FAULT_PAIRS:
            costs.append(max(statistics.median(slopes), 0.0))
    return min(costs) if costs else None


def _less_faults(times: list[float], faults: list[int], cost: float) -> list[float]:
    """Each step's time less what its page faults above its side's fewest cost (a side's level of faults stays: a
    change that maps new memory every step is the program's), never less than half the step."""
    fewest = min(faults)
    return [max(t - cost * (f - fewest), t / 2) for t, f in zip(times, faults, strict=True)]


def judge_steps(base: Profile, new: Profile, confidence: float = 0.95) -> Judged:
    """The gate's reading of the step times: see :class:`Judged`."""
    steps = (len(base.step_ns), len(new.step_ns))
    lacking = [side for side, p in (("base", base), ("new", new)) if len(p.step_cpu) != len(p.step_ns) or not p.step_cpu]
    if lacking:
        none = "no CPU readings in the traces" if len(lacking) == 2 else f"no CPU readings in the {lacking[0]} traces"
        return Judged(WALL_TIME, ratio_shift(base.step_ns, new.step_ns, confidence), steps, steps, none)
    runqueue = all(w >= 0 for p in (base, new) for _, w in p.step_cpu)
    basis = OWN_TIME if runqueue else WALL_TIME
    why = None if runqueue else "the run-queue wait is not known on this platform"
    (bt, bb), (nt, nb) = _own_times(base, runqueue), _own_times(new, runqueue)

    def kept(values: list[Any], blocked: list[float]) -> list[Any]:
        limit = statistics.median(blocked) + BLOCKED_ASIDE
        return [v for v, b in zip(values, blocked, strict=True) if b <= limit]

    cost = None
    if all(len(p.step_faults) == len(p.step_ns) for p in (base, new)):  # the profiler's own faults (issue 49)
        cost = _fault_cost([(kept(bt, bb), kept(base.step_faults, bb)), (kept(nt, nb), kept(new.step_faults, nb))])
        if cost is not None:
            bt, nt = _less_faults(bt, base.step_faults, cost), _less_faults(nt, new.step_faults, cost)
    every = ratio_shift(bt, nt, confidence)
    kb, kn = kept(bt, bb), kept(nt, nb)
    if (len(kb), len(kn)) != steps and min(len(kb), len(kn)) >= MIN_STEPS:
        aside = ratio_shift(kb, kn, confidence)
        if aside is not None and aside.decided:  # set aside only where an interval is left
            return Judged(basis, aside, (len(kb), len(kn)), steps, why, cost)
    return Judged(basis, every, steps, steps, why, cost)


@dataclass(frozen=True)
class Gate:
    """``--fail-on-regression``'s decision on one diff: tripped when the step time's interval lies wholly above
    ``threshold_pct`` (worse than it with ``confidence``); ``reason`` says why it could not be decided."""

    threshold_pct: float
    confidence: float
    estimate_pct: float | None
    interval_pct: tuple[float, float] | None
    base_steps: int
    new_steps: int
    tripped: bool
    reason: str | None = None
    judged: Judged | None = None  # the steps judged and on what (None: wall time, every step, as before issue 49)

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold_pct": self.threshold_pct,
            "confidence": self.confidence,
            "estimate_pct": None if self.estimate_pct is None else round(self.estimate_pct, 2),
            "interval_pct": None if self.interval_pct is None else [round(v, 2) for v in self.interval_pct],
            "base_steps": self.base_steps,
            "new_steps": self.new_steps,
            "tripped": self.tripped,
            "reason": self.reason,
            "basis": self.judged.basis if self.judged else WALL_TIME,
            "why_wall": self.judged.why_wall if self.judged else None,
            "judged_steps": list(self.judged.judged) if self.judged else [self.base_steps, self.new_steps],
            "set_aside": list(self.judged.set_aside) if self.judged else [0, 0],
            "fault_us": None if self.judged is None or self.judged.fault_ns is None else round(self.judged.fault_ns / 1e3, 3),
        }


@dataclass(frozen=True)
class KernelSummary:
    """A side's GEMM kernels in short: how many distinct kernels per family, and the top few by device time."""

    families: dict[str, int]
    top: list[tuple[str, int]]  # (kernel, ns)

    def to_json(self) -> dict[str, Any]:
        return {"families": self.families, "top": [{"kernel": k, "total_ms": round(ns / 1e6, 4)} for k, ns in self.top]}


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
    step_shift: Shift | None = None  # the step time's change (percent of the base) and its interval
    calls: list[Change] = field(default_factory=list)  # ops whose calls per step changed (not a change of speed)
    kernel_calls: list[Change] = field(default_factory=list)  # kernels whose launches per step changed
    op_names: list[Change] = field(default_factory=list)  # the ops' time by name (over all shapes)
    call_names: list[Change] = field(default_factory=list)  # the ops' calls per step by name (over all shapes)
    gemm_summary: tuple[KernelSummary, KernelSummary] | None = None  # with gemm_kernels: each side in short
    compiled: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))  # compiled regions (added, removed)
    files: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))  # (base, new) files pooled
    windows: tuple[int, int] = (1, 1)  # (base, new) windows pooled
    memory_peaks: list[PeakChange] = field(default_factory=list)  # per device both sides recorded memory on
    # the side ("base" or "new") that has no trace of this group (a rank, or a file name) the other side has: nothing
    # of it is compared, and no gate passes it (None: both sides have it)
    missing: str | None = None
    group: str = ""  # what the group is, as a message names it: "rank 1", "rank 1 of target train", "file x.json"
    judged: Judged | None = None  # the gate's reading of the step times (None: a group a side lacks)

    @property
    def missing_problem(self) -> str | None:
        """Why this group cannot be compared at all: a side has no trace of it (None when both have)."""
        if self.missing is None:
            return None
        other, path = ("base", self.base_path) if self.missing == "new" else ("new", self.new_path)
        return f"the {self.missing} run has no trace of {self.group} (the {other} run has {path})"

    @property
    def step_change_pct(self) -> float | None:
        """The median step time's change, in percent of the base's (None without steps on a side)."""
        if not self.base_steps or not self.new_steps or self.base_steps.median_ms <= 0:
            return None
        return round((self.new_steps.median_ms / self.base_steps.median_ms - 1) * 100, 2)

    @property
    def min_detectable_pct(self) -> float | None:
        """The smallest change these steps can tell from noise: the interval's half-width on the log scale the
        interval is made on, in percent (an interval of +200%..+1100% is a factor of 2 either side: 100%)."""
        s = self.step_shift
        if s is None or s.lo is None or s.hi is None:
            return None
        return (math.sqrt((1 + s.hi / 100) / (1 + s.lo / 100)) - 1) * 100

    @property
    def step_problem(self) -> str | None:
        """Why the step times cannot be compared (None when :attr:`step_change_pct` is a number)."""
        if self.step_change_pct is not None:
            return None
        if self.missing_problem is not None:
            return self.missing_problem
        missing = [side for side, steps in (("base", self.base_steps), ("new", self.new_steps)) if not steps]
        if len(missing) == 2:
            return f"neither {self.base_path} nor {self.new_path} has steps (ProfilerStep#N spans)"
        if missing:
            path = self.base_path if missing[0] == "base" else self.new_path
            return f"the {missing[0]} trace {path} has no steps (ProfilerStep#N spans)"
        return f"the base trace {self.base_path} has a median step time of 0 ms"

    def gate(self, threshold_pct: float, confidence: float | None = None) -> Gate:
        """``--fail-on-regression``: does the step time's interval lie above ``threshold_pct``? The interval is the
        one this diff computed (at :func:`compare`'s ``confidence``); ``confidence``, when given, must be that one
        (raises ValueError otherwise, as for a threshold that is not a finite number)."""
        if not math.isfinite(threshold_pct):
            raise ValueError(f"threshold_pct must be a finite number, got {threshold_pct!r}")
        computed = self.step_shift.confidence if self.step_shift is not None else None
        if confidence is None:
            confidence = 0.95 if computed is None else computed
        elif computed is not None and confidence != computed:
            raise ValueError(
                f"this diff's intervals are at confidence {computed}, not {confidence}: diff again with confidence={confidence}"
            )
        b = self.base_steps.count if self.base_steps else 0
        n = self.new_steps.count if self.new_steps else 0
        problem = self.step_problem
        j = self.judged
        s = j.shift if j is not None else self.step_shift
        if problem is None and min(b, n) < MIN_STEPS:
            problem = f"too few steps for an interval: base {b}, new {n} (at least {MIN_STEPS} a side; record more: active, repeat)"
        if problem is None and (s is None or not s.decided):
            problem = (
                f"too few steps for a {confidence_text(confidence)} interval: base {b}, new {n} "
                "(record more: active, repeat; or lower --confidence)"
            )
        if problem is not None or s is None or s.lo is None or s.hi is None:
            return Gate(threshold_pct, confidence, s.estimate if s else None, None, b, n, False, problem, j)
        return Gate(threshold_pct, confidence, s.estimate, (s.lo, s.hi), b, n, s.lo > threshold_pct, judged=j)

    @property
    def findings_problem(self) -> str | None:
        """Why the verdicts cannot be compared (None when they can): a side with no events, where no rule read
        anything, or a rule that failed on a side, whose findings there are unknown; or a side without this group."""
        if self.missing_problem is not None:
            return self.missing_problem
        for side, path, events in (("base", self.base_path, self.events[0]), ("new", self.new_path, self.events[1])):
            if events == 0:
                return f"the {side} trace {path} has no events: no rule read anything"
        for side, path, failed in (("base", self.base_path, self.failures[0]), ("new", self.new_path, self.failures[1])):
            if failed:
                return f"on the {side} trace {path}, {failed[0]}" + (f" (and {len(failed) - 1} more rules)" if len(failed) > 1 else "")
        return None

    @property
    def empty_problem(self) -> str | None:
        """Why nothing at all can be compared: both sides without events."""
        if self.events[0] == 0 and self.events[1] == 0:
            return f"neither {self.base_path} nor {self.new_path} has events: nothing to compare"
        return None

    def new_findings(self, level: str) -> list[Finding]:
        """Findings at or above ``level`` that the new run has and the base had not (an unstable rule is none)."""
        floor = severity_rank(level)
        return [
            c.new for c in self.verdicts if c.new is not None and c.kind in ("moved", "appeared") and severity_rank(c.new.severity) >= floor
        ]

    @property
    def unchanged(self) -> bool:
        """Nothing changed: no op, kernel, call, verdict, device or memory peak change, and step times compared and within noise
        (or equal, where the steps are too few for an interval); without steps on a side, or with a rule failed,
        that is not known."""
        changed = self.ops or self.kernels or self.calls or self.kernel_calls or self.verdicts or self.devices or self.gemm_kernels
        if changed or any(p.changed for p in self.memory_peaks) or self.findings_problem:
            return False
        if self.step_change_pct is None:
            return False
        s = self.step_shift
        return self.step_change_pct == 0 if s is None or not s.decided else s.within_noise

    def to_json(self) -> dict[str, Any]:
        def steps(s: Steps | None) -> dict[str, Any] | None:
            return {"count": s.count, "median_ms": s.median_ms, "min_ms": s.min_ms, "max_ms": s.max_ms} if s else None

        s = self.step_shift
        mde = self.min_detectable_pct
        return {
            "base": self.base_path,
            "new": self.new_path,
            "diff_rank": self.rank,
            "step_ms": {
                "base": steps(self.base_steps),
                "new": steps(self.new_steps),
                "change_pct": self.step_change_pct,
                "estimate_pct": None if s is None else round(s.estimate, 2),
                "interval_pct": [round(s.lo, 2), round(s.hi, 2)] if s and s.lo is not None and s.hi is not None else None,
                "confidence": None if s is None else s.confidence,
                "within_noise": None if s is None or not s.decided else s.within_noise,
                "min_detectable_pct": None if mde is None else round(mde, 2),
                "judged": self.judged.to_json() if self.judged else None,
            },
            "device_change": {"base": self.devices[0], "new": self.devices[1]} if self.devices else None,
            "gemm_kernel_change": {"base": self.gemm_kernels[0], "new": self.gemm_kernels[1]} if self.gemm_kernels else None,
            "gemm_kernel_summary": {"base": self.gemm_summary[0].to_json(), "new": self.gemm_summary[1].to_json()}
            if self.gemm_summary
            else None,
            "compiled_regions": {"added": self.compiled[0], "removed": self.compiled[1]},
            "verdict_changes": [c.to_json() for c in self.verdicts],
            "op_changes": [c.to_json() for c in self.ops],
            "op_name_changes": [c.to_json() for c in self.op_names],
            "call_changes": [c.to_json() for c in self.calls],
            "call_name_changes": [c.to_json() for c in self.call_names],
            "kernel_changes": [c.to_json() for c in self.kernels],
            "kernel_call_changes": [c.to_json() for c in self.kernel_calls],
            "memory_peak_changes": [p.to_json() for p in self.memory_peaks],
            "rule_failures": {"base": self.failures[0], "new": self.failures[1]},
            "files": {"base": self.files[0], "new": self.files[1]},
            "windows": {"base": self.windows[0], "new": self.windows[1]},
        } | ({"missing": {"side": self.missing, "group": self.group}} if self.missing is not None else {})


def compare(base: list[Profile], new: list[Profile], top: int = 10, confidence: float = 0.95) -> list[Diff]:
    """One :class:`Diff` per pair of sides' groups (see :func:`pairs`): the files of one rank and target on a side
    (several windows of a kept ``trace_dir``, several base runs) are pooled first (:func:`pool`). Where the sides share
    a group, each group only one side holds (a rank the new run lost, a file name it no longer has) is a Diff too,
    with ``missing`` set: nothing of it is compared, and its gate cannot be evaluated (a gate never passes what it could
    not compare)."""
    check_confidence(confidence)
    out = [compare_one(b, n, top, confidence) for b, n in pairs(base, new)]
    if out:
        out.extend(_missing(base, new))
    return out


def _missing(base: list[Profile], new: list[Profile]) -> list[Diff]:
    """A Diff for each group (see :func:`pairs`) that only one side holds, with the side that lacks it."""
    gb, gn = _groups(base), _groups(new)
    if len(gb) == 1 and len(gn) == 1:
        return []
    out = []
    for side, here, there in (("new", gb, gn), ("base", gn, gb)):
        for key in sorted(here.keys() - there.keys(), key=lambda k: (isinstance(k, str), k)):
            p = pool(here[key])
            group = f"file {key}" if isinstance(key, str) else f"rank {key[0]}" + (f" of target {key[1]}" if key[1] else "")
            steps = Steps.of(p.step_ns)
            b, n = (p, None) if side == "new" else (None, p)
            out.append(
                Diff(
                    rank=p.rank,
                    base_path=b.path if b else "",
                    new_path=n.path if n else "",
                    base_steps=steps if b else None,
                    new_steps=steps if n else None,
                    ops=[],
                    kernels=[],
                    verdicts=[],
                    devices=None,
                    gemm_kernels=None,
                    events=(p.events, None) if b else (None, p.events),
                    failures=(list(p.failures), []) if b else ([], list(p.failures)),
                    files=(p.paths, []) if b else ([], p.paths),
                    windows=(len(p.window_findings), 0) if b else (0, len(p.window_findings)),
                    missing=side,
                    group=group,
                )
            )
    out.sort(key=lambda d: (d.rank, d.group))
    return out


_WINDOW = re.compile(r"\.window\d+(?=\.rank\d+\.)")
_CHILD = re.compile(r"(?<=\d)\.pid\d+(?=\.pt\.trace\.json(?:\.gz)?$)")


def group_key(path: str) -> str:
    """The name a file is grouped by on a side: its name, with a kept trace's window number (and a forked child's pid)
    left out (``train.window3.rank0.pt.trace.json.gz``, ``train.window0.rank0.pid4242.pt.trace.json.gz`` ->
    ``train.rank0.pt.trace.json.gz``)."""
    name = _WINDOW.sub("", _basename(path))
    return _CHILD.sub("", name) if _KEPT.match(_basename(path)) else name


def pairs(base: list[Profile], new: list[Profile]) -> list[tuple[Profile, Profile]]:
    """The sides' groups compared with each other: one group each (one file, or the windows of one target), whatever
    ranks they say; else per rank (and target, for kept traces) both sides hold, when each run (input path,
    ``Profile.run``) of a side holds one file per rank (per-rank traces of a job), in rank order; else per file
    name (a kept trace's window number left out) both sides hold. A side's files that share a key (windows of one
    target, the same rank in several base runs) are pooled (:func:`pool`)."""
    gb, gn = _groups(base), _groups(new)
    if len(gb) == 1 and len(gn) == 1:
        return [(pool(next(iter(gb.values()))), pool(next(iter(gn.values()))))]
    return [(pool(gb[k]), pool(gn[k])) for k in sorted(gb.keys() & gn.keys(), key=lambda k: (isinstance(k, str), k))]


def _groups(side: list[Profile]) -> dict[Any, list[Profile]]:
    """A side's profiles by key: rank where every run holds one file per rank, else the file's :func:`group_key`."""
    runs: dict[int, list[Profile]] = {}
    for p in side:
        runs.setdefault(p.run, []).append(p)
    by_rank = all(len({p.rank for p in run}) == len(run) for run in runs.values())
    out: dict[Any, list[Profile]] = {}
    for p in side:
        out.setdefault((p.rank, target_of(p.path)) if by_rank else group_key(p.path), []).append(p)
    return out


_KEPT = re.compile(r"^(?P<target>.+)\.window\d+\.rank\d+(?:\.pid\d+)?\.pt\.trace\.json(?:\.gz)?$")


def target_of(path: str) -> str:
    """The target a kept trace's file name says (``train.window3.rank0.pt.trace.json.gz``: ``train``); '' for
    another name."""
    m = _KEPT.match(_basename(path))
    return m.group("target") if m else ""


def pool(profiles: list[Profile]) -> Profile:
    """Several windows (or runs) of one rank and target as one side: their steps one after another, ops and kernels
    summed, each window's findings kept apart (for :func:`_verdicts`' stability test)."""
    if len(profiles) == 1:
        return profiles[0]
    first = profiles[0]
    steps: list[int] = []
    ops: dict[tuple[str, str], list[int]] = {}
    kernels: dict[tuple[str, str, str], list[int]] = {}
    op_steps: dict[tuple[str, str], list[int]] = {}
    kernel_steps: dict[tuple[str, str, str], list[int]] = {}
    windows: list[list[Finding]] = []
    devices: set[str] = set()
    peaks: dict[str, list[int]] = {}
    known = all(not p.step_ns or p.op_steps or not p.ops for p in profiles)
    cpu_known = all(len(p.step_cpu) == len(p.step_ns) for p in profiles)  # readings for every step, or none kept
    faults_known = cpu_known and all(len(p.step_faults) == len(p.step_ns) for p in profiles)
    for p in profiles:
        offset = len(steps)
        steps.extend(p.step_ns)
        for src, dst, per_src, per_dst in ((p.ops, ops, p.op_steps, op_steps), (p.kernels, kernels, p.kernel_steps, kernel_steps)):
            for key, t in src.items():
                entry = dst.setdefault(key, [0, 0])  # type: ignore[arg-type]
                entry[0] += t.calls
                entry[1] += t.ns
            if known:
                for key, series in per_src.items():
                    row = per_dst.setdefault(key, [])  # type: ignore[arg-type]
                    row.extend([0] * (offset - len(row)))
                    row.extend(series)
        windows.extend(p.window_findings)
        devices.update(p.devices)
        for device, series in p.memory_peaks.items():
            peaks.setdefault(device, []).extend(series)
    for per in (op_steps, kernel_steps):
        for row in per.values():
            row.extend([0] * (len(steps) - len(row)))
    events = [p.events for p in profiles]
    paths = [f for p in profiles for f in p.paths]
    return Profile(
        f"{first.path} (+{len(paths) - 1} more)",
        first.rank,
        steps,
        {k: OpTime(c, t) for k, (c, t) in ops.items()},
        {k: OpTime(c, t) for k, (c, t) in kernels.items()},
        sorted(devices),
        [f for p in profiles for f in p.findings],
        None if any(e is None for e in events) else sum(e for e in events if e is not None),
        [f for p in profiles for f in p.failures],
        op_steps if known else {},
        kernel_steps if known else {},
        windows,
        paths,
        memory_peaks=peaks,
        step_cpu=[r for p in profiles for r in p.step_cpu] if cpu_known else [],
        step_faults=[f for p in profiles for f in p.step_faults] if faults_known else [],
    )


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def compare_one(base: Profile, new: Profile, top: int = 10, confidence: float = 0.95) -> Diff:
    base_steps, new_steps = Steps.of(base.step_ns), Steps.of(new.step_ns)
    step_ns = max(statistics.median(base.step_ns) if base.step_ns else 0, 1)
    steps = (len(base.step_ns), len(new.step_ns))
    window = step_ns * max(steps[0], 1)
    ops, calls = _changes(base.ops, new.ops, base.op_steps, new.op_steps, steps, step_ns, window, top, confidence)
    kernels, kernel_calls = _changes(
        base.kernels, new.kernels, base.kernel_steps, new.kernel_steps, steps, step_ns, window, top, confidence
    )
    name_ops = [_by_name(p.ops, p.op_steps) for p in (base, new)]
    op_names, call_names = _changes(name_ops[0][0], name_ops[1][0], name_ops[0][1], name_ops[1][1], steps, step_ns, window, top, confidence)
    gemm_kernels = _gemm_kernels(base, new)
    return Diff(
        rank=new.rank,
        base_path=base.path,
        new_path=new.path,
        base_steps=base_steps,
        new_steps=new_steps,
        ops=ops,
        kernels=kernels,
        verdicts=_verdicts(base.window_findings, new.window_findings),
        devices=(base.devices, new.devices) if base.devices != new.devices and (base.devices or new.devices) else None,
        gemm_kernels=gemm_kernels,
        events=(base.events, new.events),
        failures=(list(base.failures), list(new.failures)),
        step_shift=ratio_shift(base.step_ns, new.step_ns, confidence),
        calls=calls,
        kernel_calls=kernel_calls,
        op_names=op_names,
        call_names=call_names,
        gemm_summary=(_gemm_summary(base), _gemm_summary(new)) if gemm_kernels else None,
        compiled=_compiled(base, new),
        files=(base.paths, new.paths),
        windows=(len(base.window_findings), len(new.window_findings)),
        memory_peaks=_peak_changes(base, new, confidence),
        judged=judge_steps(base, new, confidence),
    )


def _peak_changes(base: Profile, new: Profile, confidence: float) -> list[PeakChange]:
    """Each device both sides recorded memory on: the median step peaks, and with at least ``MIN_STEPS`` steps a side
    the step peaks' shift (the same noise model as the step times, on bytes)."""
    out = []
    for device in sorted(base.memory_peaks.keys() & new.memory_peaks.keys(), key=lambda d: (d != "cpu", d)):
        b, n = base.memory_peaks[device], new.memory_peaks[device]
        if not b or not n:
            continue
        tested = shift(b, n, confidence) if min(len(b), len(n)) >= MIN_STEPS else None
        out.append(PeakChange(device, round(statistics.median(b)), round(statistics.median(n)), (len(b), len(n)), tested))
    return out


def _by_name(
    ops: dict[tuple[str, str], OpTime], per_step: dict[tuple[str, str], list[int]]
) -> tuple[dict[Any, OpTime], dict[Any, list[int]]]:
    """The ops summed over their shapes: by name alone."""
    totals: dict[Any, list[int]] = {}
    for (name, _), t in ops.items():
        entry = totals.setdefault((name,), [0, 0])
        entry[0] += t.calls
        entry[1] += t.ns
    series: dict[Any, list[int]] = {}
    for (name, _), row in per_step.items():
        acc = series.get((name,))
        series[(name,)] = list(row) if acc is None else [a + b for a, b in zip(acc, row)]
    return {k: OpTime(c, t) for k, (c, t) in totals.items()}, series


def _changes(
    base: dict[Any, OpTime],
    new: dict[Any, OpTime],
    base_steps: dict[Any, list[int]],
    new_steps: dict[Any, list[int]],
    steps: tuple[int, int],
    step_ns: float,
    window_ns: float,
    top: int,
    confidence: float,
) -> tuple[list[Change], list[Change]]:
    """The ops (or kernels) added, removed, or whose time changed, the largest changes in time first; and apart
    from those, the ones whose calls per step changed (a change of what runs, not of its speed).

    With steps on both sides (and each op's time per step known), a change in time counts when its per-step
    interval excludes zero, and its estimate is at least ``TIME_CHANGE`` of the base's per-step time and
    ``STEP_SHARE`` of the base's median step; without steps, the totals against the same floors (not tested
    against noise: ``Change.tested`` is False). Calls per step changed when they moved by at least
    ``CALL_CHANGE`` of the base's and by at least one call per step (per window without steps)."""
    nb, nn = steps
    per_step = bool(nb and nn and (base_steps or new_steps or not (base or new)))
    out: list[Change] = []
    calls: list[Change] = []
    for key in base.keys() | new.keys():
        b, n = base.get(key), new.get(key)
        if per_step:
            bs, ns_ = base_steps.get(key) or [0] * nb, new_steps.get(key) or [0] * nn
            s = shift(bs, ns_, confidence)
            med: tuple[float, float] | None = (statistics.median(bs), statistics.median(ns_))
            b_ns, n_ns = (b.ns if b else 0) / nb, (n.ns if n else 0) / nn
            b_calls, n_calls = (b.calls if b else 0) / nb, (n.calls if n else 0) / nn
            floor = STEP_SHARE * step_ns
        else:
            s, med = None, None
            b_ns, n_ns = float(b.ns if b else 0), float(n.ns if n else 0)
            b_calls, n_calls = float(b.calls if b else 0), float(n.calls if n else 0)
            floor = STEP_SHARE * window_ns
        at = (nb, nn) if per_step else (0, 0)
        noisy = s is not None and s.decided and s.within_noise
        delta = s.estimate if s is not None and s.decided else n_ns - b_ns
        if b is None and n is not None:
            if n_ns >= floor and not noisy:
                out.append(Change(ADDED, key, None, n, at, s, med))
            continue
        if n is None and b is not None:
            if b_ns >= floor and not noisy:
                out.append(Change(REMOVED, key, b, None, at, s, med))
            continue
        assert b is not None and n is not None
        if b_calls != n_calls and abs(n_calls - b_calls) >= max(CALL_CHANGE * b_calls, 1) - 1e-9:
            calls.append(Change(MORE_CALLS if n_calls > b_calls else FEWER_CALLS, key, b, n, at, s, med))
        elif abs(delta) >= max(TIME_CHANGE * b_ns, floor) and not noisy:
            out.append(Change(SLOWER if delta > 0 else FASTER, key, b, n, at, s, med))
    out.sort(key=lambda c: (-abs(c.delta_ns), c.key))
    calls.sort(key=lambda c: (-abs((c.new.calls if c.new else 0) - (c.base.calls if c.base else 0)), c.key))
    return out[:top], calls[:top]


def _verdicts(base: list[list[Finding]], new: list[list[Finding]]) -> list[VerdictChange]:
    """Rules whose verdicts differ: by rule, then by verdict within a rule. Each side is its windows' findings: a
    rule whose windows on a side disagree is ``unstable`` there, and no change of it is claimed."""

    def by_rule(windows: list[list[Finding]]) -> tuple[dict[str, list[Finding]], dict[str, set[frozenset[str]]]]:
        first: dict[str, list[Finding]] = {}
        seen: dict[str, set[frozenset[str]]] = {}
        rules = {f.rule for w in windows for f in w}
        for w in windows:
            here: dict[str, list[Finding]] = {}
            for f in w:
                here.setdefault(f.rule, []).append(f)
            for rule in rules:
                seen.setdefault(rule, set()).add(frozenset(f.verdict for f in here.get(rule, [])))
                if rule in here:
                    first.setdefault(rule, here[rule])
        return first, seen

    by_rule_base, seen_base = by_rule(base)
    by_rule_new, seen_new = by_rule(new)
    out: list[VerdictChange] = []
    for rule in sorted(by_rule_base.keys() | by_rule_new.keys()):
        b, n = by_rule_base.get(rule, []), by_rule_new.get(rule, [])
        sb, sn = seen_base.get(rule, {frozenset()}), seen_new.get(rule, {frozenset()})
        if sb == sn and len(sb) == 1:
            continue
        unstable = tuple(side for side, seen in (("base", sb), ("new", sn)) if len(seen) > 1)
        if unstable:
            if sb == sn:
                continue  # the same disagreement on both sides: nothing moved
            shown = tuple(tuple(sorted({v for vs in seen for v in vs} or {"none"})) for seen in (sb, sn))
            out.append(VerdictChange("unstable", rule, b[0] if b else None, n[0] if n else None, unstable, (shown[0], shown[1])))
        elif b and n:
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


def _gemm_summary(p: Profile) -> KernelSummary:
    """A side's GEMM kernels: distinct kernels per family (the name's library or architecture: ``ampere``,
    ``volta``, ``cutlass``, ``sm90``...), the ``TOP_KERNELS`` with the most device time."""
    time: dict[str, int] = {}
    for (op, _, kernel), t in p.kernels.items():
        if op in MATMUL_OPS:
            time[kernel] = time.get(kernel, 0) + t.ns
    families: dict[str, int] = {}
    for kernel in time:
        families[gemm_family(kernel)] = families.get(gemm_family(kernel), 0) + 1
    top = sorted(time.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KERNELS]
    return KernelSummary(dict(sorted(families.items())), top)


def gemm_family(kernel: str) -> str:
    """A GEMM kernel's family: its kernel family where the table names one other than ``gemm``, else the leading
    word of its name (the library or architecture)."""
    family = kernel_family(kernel)
    if family is not None and family.name != "gemm":
        return family.name
    head = kernel_head(kernel).lstrip("_")
    word = re.split(r"[_:<(\s]", head, maxsplit=1)[0]
    return word or "other"


def _compiled(base: Profile, new: Profile) -> tuple[list[str], list[str]]:
    """Compiled regions (torch.compile's, AOTAutograd's, CUDA graphs' launches) the new run added and removed, by op
    name."""

    def regions(p: Profile) -> set[str]:
        return {name for name, _ in p.ops if COMPILED.search(name)}

    b, n = regions(base), regions(new)
    return sorted(n - b), sorted(b - n)
