"""The end-of-run summary, read from the records already written: :class:`Tally` keeps, per target, its last window's
verdict and findings (and counts of its warnings and errors), so the summary needs nothing of the live session's
internals. :mod:`autoprof.render.emit` feeds it every record it writes and writes the ``autoprof.summary`` record at
exit; :mod:`autoprof.render.text` prints it as a block."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from autoprof.findings import SEVERITIES
from autoprof.render.text import SHARES

#: The findings a target's summary lists, at most (the most severe first; the regime's verdict is the summary's head).
TOP_FINDINGS = 3
REGIME_RULE = "bound_regime"


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _Target:
    __slots__ = ("errors", "findings", "name", "notes", "steps", "trace_path", "verdict", "warnings", "window", "windows")

    def __init__(self, name: str) -> None:
        self.name = name
        self.windows = 0
        self.window: int | None = None
        self.steps: list[Any] = []
        self.verdict: str | None = None
        self.trace_path: str | None = None
        self.findings: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []  # warnings about the target when it has no window (why none)
        self.warnings = 0
        self.errors = 0


class Tally:
    """What the summary says, kept as records are written (thread-safe; a few small dicts per target)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # (a signal handler's record can land inside its own thread's observe)
        self.targets: dict[str, _Target] = {}
        self.warnings = 0
        self.errors = 0
        self.seen = False

    def observe(self, rec: Mapping[str, Any]) -> None:
        event = rec.get("event")
        if event in ("autoprof.run", "autoprof.summary"):
            return
        target = rec.get("target")
        with self._lock:
            self.seen = True
            t = self.targets.get(target) if isinstance(target, str) else None
            if event == "autoprof.window" and isinstance(target, str):
                t = self.targets.setdefault(target, _Target(target))
                regime = rec.get("regime")
                t.windows += 1
                t.window = rec.get("window")
                t.steps = list(rec.get("steps") or [])
                t.verdict = regime.get("verdict") if isinstance(regime, Mapping) else None
                t.trace_path = rec.get("trace_path")
                t.findings = []
            elif event == "autoprof.finding" and t is not None and rec.get("window") == t.window:
                t.findings.append(
                    {k: rec.get(k) for k in ("rule", "verdict", "severity", "message", "advice")}
                    | ({"evidence": rec.get("evidence")} if rec.get("rule") == REGIME_RULE else {})
                )
            elif event in ("autoprof.warning", "autoprof.error"):
                key = "warnings" if event == "autoprof.warning" else "errors"
                if isinstance(target, str):
                    t = self.targets.setdefault(target, _Target(target))
                    setattr(t, key, getattr(t, key) + 1)
                    if not t.windows and len(t.notes) < TOP_FINDINGS:
                        t.notes.append({"rule": rec.get("reason"), "verdict": None, "severity": "warning", "message": rec.get("message")})
                else:
                    setattr(self, key, getattr(self, key) + 1)

    def fields(self) -> dict[str, Any]:
        """The ``autoprof.summary`` record's own fields about the targets (the caller adds where things went)."""
        with self._lock:
            return {"targets": [_target_fields(t) for t in self.targets.values()], "warnings": self.warnings, "errors": self.errors}

    def clear(self) -> None:
        with self._lock:
            self.targets.clear()
            self.warnings = self.errors = 0
            self.seen = False


def _severity(f: Mapping[str, Any]) -> int:
    sev = f.get("severity")
    return SEVERITIES.index(sev) if sev in SEVERITIES else -1


def why(evidence: Any) -> dict[str, Any] | None:
    """The leading share of the regime's evidence: ``{"share": "input", "value": 0.76}``, or None."""
    if not isinstance(evidence, Mapping):
        return None
    found = [(word, float(evidence[key])) for key, word in SHARES if _number(evidence.get(key))]
    if not found:
        return None
    word, value = max(found, key=lambda kv: kv[1])
    return {"share": word, "value": round(value, 4)}


def _target_fields(t: _Target) -> dict[str, Any]:
    regime = next((f for f in t.findings if f.get("rule") == REGIME_RULE), None)
    others = sorted((f for f in t.findings if f.get("rule") != REGIME_RULE), key=_severity, reverse=True)
    top = [{k: f.get(k) for k in ("rule", "verdict", "severity", "message")} for f in others[:TOP_FINDINGS]] or t.notes
    return {
        "target": t.name,
        "windows": t.windows,
        "window": t.window,
        "steps": t.steps,
        "verdict": (regime or {}).get("verdict") or t.verdict,
        "why": why(regime.get("evidence")) if regime else None,
        "next": (regime or (others[0] if others else {})).get("advice"),
        "findings": top,
        "warnings": t.warnings,
        "errors": t.errors,
        "trace_path": t.trace_path,
    }
