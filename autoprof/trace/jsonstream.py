"""A chrome-trace JSON document read chunk by chunk (``.json`` or gzipped), never whole: :class:`StreamReader`.

The ``traceEvents`` array can be taken in batches of whole events (:meth:`StreamReader.take_batch`: a batch
is cut after an event's closing brace, and is only a true run of events if it parses whole) or one value at
a time by the exact scanner (:meth:`StreamReader.events`), which names any problem with its position in the
file. What is done with a batch is the caller's (:mod:`autoprof.trace.batches`).
"""

from __future__ import annotations

import gzip
import io
import json
import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from autoprof import _guard
from autoprof.trace.inputs import TraceError, open_regular_file

CHUNK_CHARS = 1 << 20  # characters per read
BATCH_CHARS = 1 << 20  # characters of whole events parsed at once (small enough to stay in the CPU's caches)
_MAX_VALUE = 256 << 20  # one JSON value (an event, a metadata entry) larger than this is not a trace
_WS = re.compile(r"[ \t\n\r]*")
_CUT_REVERSED = re.compile(r"\{[ \t\n\r]*,[ \t\n\r]*\}")  # a cut ('}' ',' '{'), read backwards
_QUICK_CANDIDATES = 64  # '{' tried one by one before the rest of the text goes to _CUT_REVERSED
_COMMA_CANDIDATES = 4096  # ... or, where it has no more commas than this, each comma (the regex reads ~13 ns a '{')


_LONG = 1 << 20  # a value still undecoded past this many characters is skipped by msgspec before json decodes it
_SURROGATE = re.compile(r"\\u[dD][89abAB]")  # an escaped surrogate, which msgspec reports as truncated input

_skip_value: Any
try:
    import msgspec

    _skip_value = msgspec.json.Decoder(msgspec.Raw).decode
except ImportError:  # pragma: no cover - msgspec is a dependency
    _skip_value = None


def _unfinished(buf: str, pos: int) -> bool:
    """Whether the value at ``pos`` certainly runs past the end of ``buf``: msgspec skips it (no objects built,
    far faster than decoding it) and finds the input truncated. Only a hint that saves decoding a long value
    again and again as the buffer grows: ``json`` decodes every value and names every error, and a text
    msgspec reads otherwise (or an escaped surrogate, which it reports as truncated) is left to it."""
    if _skip_value is None:
        return False
    text = buf[pos:] if pos else buf
    with _guard.quiet("stream.hint"):
        try:
            _skip_value(text)
        except msgspec.DecodeError as e:
            return str(e) == "Input data was truncated" and _SURROGATE.search(text) is None
    return False


class Batch(NamedTuple):
    """A run of whole events as taken from the document: its text, the separator after it, and where it starts
    in the document (characters)."""

    text: str
    separator: str
    start: int


class StreamReader:
    """Reads a chrome-trace JSON document chunk by chunk. The ``traceEvents`` array is parsed in batches of
    whole events: a batch is cut after an event's closing brace, and only a batch that parses whole as a run
    of values is taken. The scanner (``raw_decode``, one value at a time) reads the top-level keys, the last
    events, and everything from a batch that does not parse whole: it is exact and names the problem.

    Why a cut that parses is a true event boundary: the batch starts at a true boundary (outside any
    string, inside the array), so the parser sees the same tokens as a reader of the whole file; a cut
    inside a string leaves an odd number of quotes and cannot parse, and a cut after the array's end leaves
    data after the closing bracket.
    """

    def __init__(self, path: Path, chunk_chars: int = CHUNK_CHARS, batch_chars: int = BATCH_CHARS) -> None:
        self.path = path
        self.src = str(path)
        self.chunk_chars = chunk_chars
        self.batch_chars = batch_chars  # 0: no batches (every event goes through the scanner)
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters of the document before ``buf``: error positions are in the whole file
        self.eof = False
        self._raw: Any = None
        self._text: Any = None
        decoder = json.JSONDecoder()
        self._dec = decoder.raw_decode
        self._scan = decoder.scan_once  # type: ignore[attr-defined]  # the C scanner raw_decode wraps: (value, end) or StopIteration
        self._last: Any = None
        self._prefetch: Prefetch | None = None

    def __enter__(self) -> StreamReader:
        raw = open_regular_file(self.path)
        self._raw = raw
        head = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if head == b"\x1f\x8b" else raw
        self._text = io.TextIOWrapper(stream, encoding="utf-8", errors="strict")
        self._prefetch = Prefetch(self._text, self.chunk_chars)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._prefetch is not None:
            self._prefetch.stop()
        if self._raw is not None:
            self._raw.close()

    # -- buffer ----------------------------------------------------------------------------------
    def _more(self, at_least: int = 1) -> bool:
        """Append at least ``at_least`` more characters to the buffer (fewer at the end); False at the end."""
        if self.eof:
            return False
        pieces = []
        got = 0
        while got < at_least:
            try:
                piece = self._prefetch.get() if self._prefetch else self._text.read(self.chunk_chars)
            except (OSError, EOFError, zlib.error) as e:
                raise TraceError(self.path, f"corrupt or truncated gzip ({e})") from None
            except UnicodeDecodeError:
                raise TraceError(self.path, "not UTF-8 text") from None
            if not piece:
                self.eof = True
                break
            pieces.append(piece)
            got += len(piece)
        if not pieces:
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos :] + "".join(pieces)
        self.pos = 0
        return True

    def _skip(self) -> str:
        """Skip whitespace; the next character ('' at the end of input)."""
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        self._skip()
        while True:
            if len(self.buf) - self.pos < 65536 and not self.eof:
                self._more()
                continue
            held = len(self.buf) - self.pos
            if not self.eof and _LONG < held <= _MAX_VALUE and _unfinished(self.buf, self.pos):
                # Certainly unfinished: read more as below, without decoding it first (the lengths tried are
                # the same, so is the outcome; a long value is decoded once, not once per doubling).
                self._more(max(1, min(held, _MAX_VALUE + 1 - held)))
                continue
            try:
                v, self.pos = self._dec(self.buf, self.pos)
                self._last = v
                return v
            except json.JSONDecodeError as e:
                if self.eof:
                    problem = "truncated JSON" if e.pos >= len(self.buf) - 1 else "not valid JSON"
                    raise TraceError(self.path, f"{problem} ({e.msg} at char {self.base + e.pos})") from None
                held = len(self.buf) - self.pos
                if held > _MAX_VALUE:
                    raise TraceError(self.path, f"not valid JSON ({e.msg})") from None
                # Read as much again as is held (each retry decodes the value from its start: growing by one
                # chunk made a long value quadratic), but not past the first chunk that holds more than
                # _MAX_VALUE: chunks are whole, so every retry is at a length the chunk-by-chunk reading
                # also tried, and the outcome (value, error message, position) is the same.
                self._more(max(1, min(held, _MAX_VALUE + 1 - held)))
            except RecursionError:
                raise TraceError(self.path, "not valid JSON (nested too deeply)") from None

    def _expect(self, ch: str, what: str) -> None:
        c = self._skip()
        if c != ch:
            if c == "":
                raise TraceError(self.path, f"truncated JSON (expected {what})")
            raise TraceError(self.path, f"not valid JSON (expected {what}, found {c!r})")
        self.pos += 1

    # -- the event array -------------------------------------------------------------------------
    def take_batch(self) -> Batch | None:
        """The next run of whole events (about ``batch_chars`` characters, cut after a closing brace that a comma
        and an opening brace follow); None when the buffer holds no such cut (the array's last event, one event
        longer than several batches, or batches are off)."""
        if self.batch_chars <= 0:
            return None
        seen = 0  # characters after pos already searched (no cut there): a retry searches only what it read
        for _ in range(8):
            if len(self.buf) - self.pos < self.batch_chars and not self.eof:
                self._more(self.batch_chars)
            buf, pos = self.buf, self.pos
            # The last cut within a batch's length, else (an event longer than that) the last in the buffer.
            end = min(len(buf), pos + self.batch_chars)
            cut = last_cut(buf, pos, end, pos + seen) if pos + seen < end else None
            if cut is None and end < len(buf):
                cut = last_cut(buf, pos, len(buf), max(end, pos + seen))
            if cut is not None:
                k, j = cut
                self.pos = j
                return Batch(buf[pos : k + 1], buf[k + 1 : j], self.base + pos)
            seen = len(buf) - pos
            if self.eof or not self._more(self.batch_chars):
                return None
        return None

    def rewind(self, batches: list[Batch]) -> None:
        """Put taken batches back in front of the unread text (the first of them starts the rest of the array), so
        that :meth:`events` reads them again: the scanner's exact reading, which names any problem."""
        self.buf = "".join(batch.text + batch.separator for batch in batches) + self.buf[self.pos :]
        self.base = batches[0].start
        self.pos = 0

    def events(self) -> Iterator[Any]:
        """The remaining elements of the ``traceEvents`` array, one at a time, up to its ']'.

        State is kept in locals and the C scanner is called directly.
        """
        scan = self._scan
        ws = _WS.match
        c = self._skip()
        if c == "]":
            self.pos += 1
            return
        buf, pos = self.buf, self.pos
        while True:
            if len(buf) - pos < 65536 and not self.eof:
                self.pos = pos
                self._more()
                buf, pos = self.buf, self.pos
            try:
                ev, pos = scan(buf, pos)
            except (StopIteration, json.JSONDecodeError):
                self.buf, self.pos = buf, pos
                self._value()  # re-decode for a precise error, or after reading more input
                ev, pos = self._last, self.pos
                buf = self.buf
            yield ev
            pos = ws(buf, pos).end()  # type: ignore[union-attr]  # the pattern always matches
            if pos >= len(buf):
                self.buf, self.pos = buf, pos
                c = self._skip()
                buf, pos = self.buf, self.pos
            else:
                c = buf[pos]
            if c == ",":
                pos = ws(buf, pos + 1).end()  # type: ignore[union-attr]
                if pos >= len(buf):
                    self.buf, self.pos = buf, pos
                    self._skip()
                    buf, pos = self.buf, self.pos
                continue
            self.buf, self.pos = buf, pos
            if c == "]":
                self.pos = pos + 1
                return
            if c == "":
                raise TraceError(self.path, "truncated JSON (traceEvents never closed)")
            raise TraceError(self.path, f"not valid JSON (expected ',' or ']' in traceEvents, found {c!r})")

    def parse(self, read_array: Callable[[StreamReader], None]) -> dict[str, Any]:
        """Parse the document; ``read_array`` reads the elements of the ``traceEvents`` array once its '[' is
        consumed (with :meth:`take_batch` and :meth:`events`, which stops after the closing ']'). Returns the
        other top-level keys."""
        c = self._skip()
        if c == "":
            raise TraceError(self.path, "empty file")
        if c == "[":  # a bare array of events
            self.pos += 1
            read_array(self)
            if self._skip() != "":
                raise TraceError(self.path, "not valid JSON (data after the event array)")
            return {}
        if c != "{":
            try:
                self._value()
            except TraceError as e:
                raise TraceError(self.path, e.problem) from None
            raise TraceError(self.path, "not a chrome trace: the document is not an object")
        self.pos += 1
        meta, seen_events = self._members(read_array)
        if self._skip() != "":
            raise TraceError(self.path, "not valid JSON (data after the document)")
        if not seen_events:
            raise TraceError(self.path, "not a chrome trace: no 'traceEvents'")
        return meta

    def _members(self, read_array: Callable[[StreamReader], None]) -> tuple[dict[str, Any], bool]:
        """The top-level object's members up to its '}' (its '{' consumed): the other keys, and whether
        ``traceEvents`` was among them (its array goes to ``read_array``)."""
        meta: dict[str, Any] = {}
        seen_events = False
        first = True
        while True:
            c = self._skip()
            if c == "}":
                self.pos += 1
                return meta, seen_events
            if c == "":
                raise TraceError(self.path, "truncated JSON (the document never closed)")
            if not first:
                if c != ",":
                    raise TraceError(self.path, f"not valid JSON (expected ',' or '}}', found {c!r})")
                self.pos += 1
                c = self._skip()
            if c != '"':
                raise TraceError(self.path, f"not valid JSON (expected a key, found {c!r})")
            first = False
            key = self._value()
            self._expect(":", "':'")
            if key != "traceEvents":
                meta[key] = self._value()
                continue
            if self._skip() != "[":
                self._value()
                raise TraceError(self.path, "not a chrome trace: 'traceEvents' is not a list")
            self.pos += 1
            read_array(self)
            seen_events = True


def last_cut(buf: str, pos: int, end: int, lo: int = 0) -> tuple[int, int] | None:
    """The last ``}`` (at k) followed by a comma and ``{`` (at j) in ``buf[pos:end]``, as (k, j); only a ``{`` at
    ``lo`` or later counts (the text before it was searched already)."""
    lo = max(lo, pos + 1)
    j = buf.rfind("{", lo, end)
    k = end - 1
    for _ in range(_QUICK_CANDIDATES):
        if j < lo:
            return None
        k = j - 1
        while k > pos and buf[k] in " \t\n\r":
            k -= 1
        if buf[k] == "," and k > pos:
            k -= 1
            while k > pos and buf[k] in " \t\n\r":
                k -= 1
            if buf[k] == "}" and k > pos:
                return k, j
        j = buf.rfind("{", lo, k + 1)
    return _last_cut_reversed(buf, pos, k + 1, lo) if j >= lo else None


def _last_cut_reversed(buf: str, pos: int, end: int, lo: int) -> tuple[int, int] | None:
    """:func:`last_cut` for text with many ``{`` that start no cut (a long value full of them): the regex reads
    the text backwards at C speed rather than one candidate at a time."""
    # A cut whose '{' is at lo or later starts at most at the '}' before the whitespace and commas before lo.
    start = max(pos + 1, pos + len(buf[pos + 1 : lo].rstrip(" \t\n\r,")))
    if buf.count(",", start, end) <= _COMMA_CANDIDATES:  # few commas (a long string of '{'): try each one
        return _last_cut_commas(buf, start, end)
    m = _CUT_REVERSED.search(buf[start:end][::-1])
    if m is None:
        return None
    return end - m.end(), end - 1 - m.start()


def _last_cut_commas(buf: str, start: int, end: int) -> tuple[int, int] | None:
    """The last cut (``}`` at k, a comma, ``{`` at j) within ``buf[start:end]``, found from its comma: each comma
    from the last one back (a cut's comma is the only one between its braces, so a later comma is a later cut)."""
    ws = " \t\n\r"
    c = buf.rfind(",", start, end)
    while c >= start:
        j = c + 1
        while j < end and buf[j] in ws:
            j += 1
        if j < end and buf[j] == "{":
            k = c - 1
            while k >= start and buf[k] in ws:
                k -= 1
            if k >= start and buf[k] == "}":
                return k, j
        c = buf.rfind(",", start, c)
    return None


class Prefetch:
    """Reads (and gunzips: zlib lets other threads run meanwhile) the next pieces of text on a thread."""

    def __init__(self, text: Any, chunk_chars: int) -> None:
        self._text = text
        self._chunk = chunk_chars
        self._q: queue.Queue[Any] = queue.Queue(maxsize=8)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="autoprof-read", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            # what reading raised is handed to the reading thread, which turns it into a TraceError
            _, piece = _guard.outcome(self._text.read, self._chunk, catches=BaseException)
            while not self._stopped:
                try:
                    self._q.put(piece, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if not isinstance(piece, str) or not piece:
                return

    def get(self) -> str:
        piece = self._q.get()
        if isinstance(piece, BaseException):
            self._stopped = True
            raise piece
        if not piece:
            self._stopped = True
        return piece  # type: ignore[no-any-return]

    def stop(self) -> None:
        self._stopped = True
        self._thread.join()
