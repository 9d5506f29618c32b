"""``autoprof show FILE...``: records files (a sink: JSON lines, several runs, several ranks) read back and printed as
the text a terminal shows live (:mod:`autoprof.render.text`), grouped by run, rank, target and window; or, with
``--json``, the records' own lines passed through. A run is what an ``autoprof.run`` record starts: the records after
it with its host and pid are its own (records without one, from before it existed, group by host and pid)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from autoprof.render import text as _text

LEVELS = ("debug", "info", "warning", "error", "critical")
#: Bad lines named in a file's one-line error, at most.
NAMED_BAD_LINES = 5


@dataclass
class Entry:
    """One record as read: the record (its strings :func:`~autoprof.render.text.clean`: no control character of a
    trace's reaches the terminal), its line as it was in the file (``--json`` passes it on unchanged), where."""

    record: dict[str, Any]
    line: str
    path: str
    number: int
    run: str = ""


def read(paths: Sequence[str], stdin: IO[str] | None = None) -> tuple[list[Entry], list[str]]:
    """Every record of ``paths`` in order (``-``: standard input), and one line per file that could not be read or held
    lines that are not autoprof records (the good lines of such a file are kept)."""
    entries: list[Entry] = []
    problems: list[str] = []
    for path in paths:
        try:
            stream = (stdin or sys.stdin) if path == "-" else open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError as e:
            problems.append(f"{path or repr(path)}: {e.strerror or e}")
            continue
        bad: list[tuple[int, str, str]] = []  # (line number, what it is, the parser's words)
        try:
            for number, raw in enumerate(stream, 1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    bad.append((number, "not JSON", str(e)))
                    continue
                if not isinstance(rec, dict) or not str(rec.get("event", "")).startswith("autoprof."):
                    bad.append((number, "not an autoprof record (no autoprof.* event)", ""))
                    continue
                entries.append(Entry(_text.clean_record(rec), line, path, number))  # --json: the line, unchanged
        except OSError as e:  # a directory, a read error midway: what was read is kept
            problems.append(f"{path}: {e.strerror or e}")
        finally:
            if stream is not stdin and stream is not sys.stdin:
                stream.close()
        if bad:
            problems.append(f"{path}: {_bad_lines(bad)}")
    _assign_runs(entries)
    return entries, problems


def _bad_lines(bad: Sequence[tuple[int, str, str]]) -> str:
    """A file's bad lines in a few words, each kind named for what it is: ``line 2 is not JSON: ...; lines 4, 6 are not
    an autoprof record (...); 3 lines skipped`` (the first :data:`NAMED_BAD_LINES` of a kind by number)."""
    kinds: dict[str, list[tuple[int, str]]] = {}
    for number, what, detail in bad:
        kinds.setdefault(what, []).append((number, detail))
    parts = []
    for what, lines in kinds.items():
        (first, detail), *rest = lines
        if not rest:
            parts.append(f"line {first} is {what}" + (f": {detail}" if detail else ""))
            continue
        numbers = ", ".join(str(n) for n, _ in lines[:NAMED_BAD_LINES]) + (", …" if len(lines) > NAMED_BAD_LINES else "")
        parts.append(f"lines {numbers} are {what}" + (f" (line {first}: {detail})" if detail else ""))
    return "; ".join(parts) + ("; it is skipped" if len(bad) == 1 else f"; {len(bad)} lines skipped")


def _assign_runs(entries: Iterable[Entry]) -> None:
    """Each entry's run: the run id of the last ``autoprof.run`` record of its host and pid before it."""
    current: dict[tuple[Any, Any], str] = {}
    for e in entries:
        key = (e.record.get("host"), e.record.get("pid"))
        if e.record.get("event") == "autoprof.run" and e.record.get("run_id"):
            current[key] = str(e.record["run_id"])
        e.run = current.get(key) or f"? (host {key[0]}, pid {key[1]}: no autoprof.run record)"


@dataclass
class Filters:
    rules: Sequence[str] = ()
    level: str | None = None
    last: int | None = None
    _windows: dict[tuple[str, Any, Any], set[Any]] = field(default_factory=dict)

    def prepare(self, entries: Sequence[Entry]) -> None:
        """``--last N``: each (run, rank, target)'s last N windows, from every record read."""
        if self.last is None:
            return
        seen: dict[tuple[str, Any, Any], set[Any]] = {}
        for e in entries:
            w = e.record.get("window")
            if isinstance(w, int):
                seen.setdefault((e.run, e.record.get("rank"), e.record.get("target")), set()).add(w)
        self._windows = {k: set(sorted(ws)[-self.last :]) for k, ws in seen.items()}

    def keep(self, e: Entry) -> bool:
        rec = e.record
        if self.rules and not (rec.get("event") == "autoprof.finding" and rec.get("rule") in self.rules):
            return False
        if self.level is not None:
            level = rec.get("level")
            if level not in LEVELS or LEVELS.index(level) < LEVELS.index(self.level):
                return False
        if self.last is not None and isinstance(rec.get("window"), int):
            kept = self._windows.get((e.run, rec.get("rank"), rec.get("target")), set())
            if rec["window"] not in kept:
                return False
        return True


def _window_key(w: Any) -> tuple[int, int]:
    return (0, -1) if not isinstance(w, int) else (1, w)


def write_text(entries: Sequence[Entry], kept: Sequence[Entry], out: IO[str], color: bool) -> None:
    """``kept`` grouped by run (in the order runs first appear), rank, target (in order of appearance) and window;
    each run's header from its ``autoprof.run`` record (in ``entries``, filtered out or not)."""
    paint = _text._Paint(color)
    starts: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e.record.get("event") == "autoprof.run":
            starts.setdefault(e.run, e.record)
    runs: dict[str, dict[Any, list[Entry]]] = {}
    for e in kept:
        if e.record.get("event") == "autoprof.run":
            continue
        runs.setdefault(e.run, {}).setdefault(e.record.get("rank"), []).append(e)
    for run, ranks in runs.items():
        start = starts.get(run)
        head = f"run {run}"
        if start is not None:
            head += f" · {start.get('program') or '?'} · started {start.get('timestamp')} on {start.get('host')}"
        out.write(paint(head, _text.BOLD) + "\n")
        for rank in sorted(ranks, key=lambda r: (not isinstance(r, int), r if isinstance(r, int) else 0)):
            group = ranks[rank]
            pids = sorted({str(e.record.get("pid")) for e in group})
            world = next((e.record.get("world_size") for e in group if e.record.get("world_size") is not None), "?")
            out.write(f"  rank {rank} of {world} (pid {', '.join(pids)})\n")
            targets: dict[Any, list[Entry]] = {}
            for e in group:
                targets.setdefault(e.record.get("target"), []).append(e)
            summaries = [e for e in targets.get(None, []) if e.record.get("event") == "autoprof.summary"]
            for target, items in targets.items():
                by_window: dict[Any, list[Entry]] = {}
                for e in items:
                    if e.record.get("event") != "autoprof.summary":
                        by_window.setdefault(e.record.get("window"), []).append(e)
                for window in sorted(by_window, key=_window_key):
                    block = by_window[window]
                    if target is not None and window is not None and not any(e.record.get("event") == "autoprof.window" for e in block):
                        out.write(f"    {paint(f'{target} w{window}', _text.BOLD)}\n")
                    for e in block:
                        for line in _text.record_lines(e.record, color):
                            out.write(f"    {line}\n")
            for e in summaries:
                for line in _text.summary_lines(e.record, color):
                    out.write(f"    {line}\n")
        out.write("\n")
