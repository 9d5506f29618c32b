"""Records as text a person reads: a few short lines per record (the verdict first, the shares, the advice), the
end-of-run summary as one block per target. Pure functions of a record (a dict, as its JSON line holds it): the live
writer on a terminal (:mod:`autoprof.render.emit`) and ``autoprof show`` (:mod:`autoprof.render.show`) print the same
text. Colour is ANSI, only where the caller says the stream has it (:func:`use_color`).

Why not structlog's ``ConsoleRenderer``: it writes every key of the event as ``key=value`` on one line, and a window
record or a finding holds 0.9-4 KB of nested evidence (a quickstart run: 677-3,211 bytes a record as JSON, about as
long as ``ConsoleRenderer`` text): the verdict is lost in it. It has no second line for the advice and no block for a
summary, and it leaves ``NO_COLOR`` and the terminal to its caller. This module keeps its conventions (a level column
``[warning ]``, its level colours) and chooses what a person reads.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from typing import IO, Any

RESET = "\033[0m"
BOLD = "\033[1m"
DIM = "\033[2m"
#: structlog's ConsoleRenderer level colours.
LEVEL_COLORS = {"critical": "\033[31;1m", "error": "\033[31m", "warning": "\033[33m", "info": "\033[32m", "debug": "\033[34m"}
LEVEL_WIDTH = 8
#: The regime's shares of the window, in the order a step spends its time (the bound_regime finding's evidence).
SHARES = (
    ("input_share", "input"),
    ("blocked_share", "syncs"),
    ("comm_share", "collectives"),
    ("overhead_share", "overhead"),
    ("work_share", "op work"),
)
REGIME_RULE = "bound_regime"
#: A summary's findings are cut to this many characters (the records hold the whole message).
SUMMARY_MESSAGE_CHARS = 140


def use_color(stream: IO[str] | Any) -> bool:
    """Whether to colour text written to ``stream``: a terminal, ``NO_COLOR`` unset or empty (no-color.org), and a
    ``TERM`` other than ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


#: Characters a terminal acts on rather than shows: C0 and C1 controls (ESC, BEL, CR, newline, ...) and the Unicode
#: line and paragraph separators.
_ACTS = ("Cc", "Zl", "Zp")


def clean(text: str) -> str:
    """``text`` (a name from a trace, a path, a message that quotes one) safe to print on a terminal: each control
    character, escape sequences' ESC and newlines among them, written as its Python escape (``\\x1b``, ``\\n``), so
    a trace cannot colour, retitle or clear the terminal or forge a line of its own."""
    if text.isprintable():
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _ACTS else ch for ch in text)


def clean_record(value: Any) -> Any:
    """A record (or any part of one) with every string in it :func:`clean`; the rest as it is."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {clean(k) if isinstance(k, str) else k: clean_record(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_record(v) for v in value]
    return value


class _Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.color and style else text

    def level(self, level: str) -> str:
        return self(f"[{level:<{LEVEL_WIDTH}}]", LEVEL_COLORS.get(level, ""))


def percent(x: Any) -> str:
    return f"{x:.0%}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "?"


def ms(x: Any) -> str:
    return f"{x:.3g} ms" if isinstance(x, (int, float)) and not isinstance(x, bool) else "?"


def median(values: Any) -> float | None:
    xs = sorted(v for v in values or () if isinstance(v, (int, float)) and not isinstance(v, bool))
    if not xs:
        return None
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def shares(evidence: Any) -> list[tuple[str, float]]:
    """The regime's shares of the window that ``evidence`` (a bound_regime finding's) holds, in step order."""
    if not isinstance(evidence, Mapping):
        return []
    return [(word, float(evidence[key])) for key, word in SHARES if isinstance(evidence.get(key), (int, float))]


def _steps(steps: Any) -> str:
    if not isinstance(steps, list) or not steps:
        return "no steps"
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}–{steps[-1]}"


def _where(rec: Mapping[str, Any]) -> str:
    """The target and window a record is about: ``train w0``, ``train``, or ``-``."""
    target, window = rec.get("target"), rec.get("window")
    text = str(target) if target is not None else "-"
    return f"{text} w{window}" if window is not None else text


def _rank(rec: Mapping[str, Any]) -> str:
    world = rec.get("world_size")
    return f" rank {rec.get('rank')}/{world}" if isinstance(world, int) and world > 1 else ""


def record_lines(rec: Mapping[str, Any], color: bool = False) -> list[str]:
    """One record as the lines a person reads (no newlines or other control characters of the record's in them)."""
    rec = clean_record(rec)
    paint = _Paint(color)
    event = str(rec.get("event", "?"))
    level = str(rec.get("level", "info"))
    kind = event.removeprefix("autoprof.")
    if event == "autoprof.window":
        regime = rec.get("regime")
        verdict = regime.get("verdict") if isinstance(regime, Mapping) else None
        step = median(rec.get("step_wall_ms"))
        period = median(rec.get("step_period_ms"))
        times = f"step {ms(step)}" + (f", period {ms(period)}" if period is not None else "")
        head = f"{paint('autoprof', BOLD)} {paint.level(level)} {paint(_where(rec), BOLD)}{_rank(rec)}: "
        head += f"{paint(str(verdict or 'no verdict'), BOLD)} ({_steps(rec.get('steps'))}; {times} median)"
        lines = [head]
        if rec.get("trace_path"):
            lines.append(f"    trace {rec['trace_path']}")
        return lines
    if event == "autoprof.finding":
        rule, verdict = rec.get("rule"), rec.get("verdict")
        lines = [f"  {paint.level(level)} {rule} {paint(str(verdict), BOLD)}: {rec.get('message', '')}"]
        found = shares(rec.get("evidence")) if rule == REGIME_RULE else []
        if found:
            lines.append("    shares of the window: " + " · ".join(f"{word} {percent(x)}" for word, x in found))
        if rec.get("advice"):
            lines.append(f"    → {rec['advice']}")
        return lines
    if event == "autoprof.summary":
        return summary_lines(rec, color)
    if event == "autoprof.run":
        what = f"run {rec.get('run_id')}: {rec.get('program') or '?'}"
        return [paint(f"autoprof {what}{_rank(rec)} (pid {rec.get('pid')} on {rec.get('host')}, {rec.get('timestamp')})", DIM)]
    if event in ("autoprof.warning", "autoprof.error"):
        reason = f" {rec['reason']}" if rec.get("reason") else ""
        return [f"autoprof {paint.level(level)} {_where(rec)}{_rank(rec)}{reason}: {rec.get('message', '')}"]
    if event == "autoprof.diff":
        diff_step = rec.get("step_ms")
        change = diff_step.get("change_pct") if isinstance(diff_step, Mapping) else None
        text = f"{change:+.1f}%" if isinstance(change, (int, float)) else "not compared"
        return [f"autoprof {paint.level(level)} diff {rec.get('base')} → {rec.get('new')}: step time {text}"]
    message = rec.get("message")
    return [f"autoprof {paint.level(level)} {kind} {_where(rec)}" + (f": {message}" if message else "")]


def _cut(text: str, n: int = SUMMARY_MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def summary_lines(rec: Mapping[str, Any], color: bool = False) -> list[str]:
    """An ``autoprof.summary`` record as one block per target: the verdict, why (the leading share), next (the
    advice), the findings that matter most, then where the records, traces and report went."""
    rec = clean_record(rec)
    paint = _Paint(color)
    rule = "─" * 72
    ended = rec.get("ended")
    head = f"autoprof summary{_rank(rec)}" + (f": the run ended {ended}" if ended and ended != "normally" else "")
    lines = [paint(rule, DIM), paint(head, BOLD)]
    targets: Sequence[Any] = rec.get("targets") if isinstance(rec.get("targets"), list) else []  # type: ignore[assignment]
    for t in targets:
        if not isinstance(t, Mapping):
            continue
        windows = t.get("windows", 0)
        where = f"{windows} window(s); the last: window {t.get('window')}, {_steps(t.get('steps'))}" if windows else "no window recorded"
        lines.append(f"{paint(str(t.get('target')), BOLD)} ({where})")
        lines.append(f"  verdict   {paint(str(t.get('verdict') or '-'), BOLD)}")
        why = t.get("why")
        if isinstance(why, Mapping):
            lines.append(f"  why       {why.get('share')} {percent(why.get('value'))} of the window")
        if t.get("next"):
            lines.append(f"  next      {t['next']}")
        for i, f in enumerate(t.get("findings") or []):
            label = "findings" if i == 0 else ""
            sev = str(f.get("severity", ""))
            lines.append(f"  {label:<9} {paint(sev, LEVEL_COLORS.get(sev, ''))} {f.get('rule')}: {_cut(f.get('message', ''))}")
        counts = [f"{n} {word}" for word in ("warnings", "errors") if (n := t.get(word))]
        if counts:
            lines.append(f"  records   {', '.join(counts)} about it (autoprof show)")
    other = [f"{n} {word}" for word in ("warnings", "errors") if (n := rec.get(word))]
    if other:
        lines.append(f"other records: {', '.join(other)} (autoprof show --level warning)")
    lines.append(f"records   {rec.get('records') or '-'}")
    if rec.get("trace_dir"):
        lines.append(f"traces    {rec['trace_dir']} ({rec.get('traces_kept', 0)} kept)")
    if rec.get("report"):
        lines.append(f"report    {rec['report']}")
    lines.append(paint(rule, DIM))
    return lines
