"""Trace inputs: which files a path names, the one gate every trace file passes (a regular file, opened so that
nothing can hang the caller), and :class:`TraceError`, the one error a loader raises for input it cannot read.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

TRACE_SUFFIXES = (".json", ".json.gz")


class TraceError(ValueError):
    """The one error a loader raises for input it cannot read. ``str()`` is one line naming the file."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[object, ...]:  # pickles whole (a file's result crosses processes)
        return (type(self), (self.path, self.problem))


#: The problem of an input that names nothing: ``''`` (an unset variable expanded to nothing) would otherwise read
#: as the current directory (``Path('')`` is ``.``) and be walked.
EMPTY_PATH = "an empty path names no file or directory"


def failed_load(path: str | os.PathLike[str], e: BaseException) -> TraceError:
    """The one-line error of a file whose load raised something other than :class:`TraceError` (a ``MemoryError``
    from a gzip bomb, a loader's bug): that file's error, as any unreadable file's, so the other files go on."""
    if isinstance(e, MemoryError):
        return TraceError(path, "could not be analyzed: out of memory while reading it (MemoryError)")
    detail = str(e).splitlines()[0] if str(e) else ""
    return TraceError(path, f"could not be analyzed: {type(e).__name__}" + (f": {detail}" if detail else ""))


def _os_problem(e: OSError) -> str:
    return f"cannot read: {e.strerror or type(e).__name__}"


def open_regular_file(path: str | os.PathLike[str]) -> io.BufferedReader:
    """Open ``path`` for reading, refusing anything that is not a regular file (the one gate every trace input
    passes). Opened non-blocking first, so a FIFO without a writer cannot hang the caller, then checked with
    ``fstat`` on the open descriptor (no race between a check and the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(path, _os_problem(e)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TraceError(path, "is a directory, not a trace file")
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _not_regular(path: str | os.PathLike[str], mode: int) -> TraceError:
    return TraceError(path, f"not a regular file ({_kind(mode)}): refused")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def iter_trace_inputs(path: str | os.PathLike[str]) -> Iterator[Path | TraceError]:
    """The trace files a path names (the file itself, or the ``*.json(.gz)`` files under a directory, sorted),
    and a :class:`TraceError` for each part of it that cannot be read (the path itself, a subdirectory that
    cannot be listed, an entry that cannot be examined or is not a regular file). Never raises."""
    if os.fspath(path) == "":
        yield TraceError("''", EMPTY_PATH)
        return
    root_path = Path(path)
    try:
        st = os.stat(root_path)
    except FileNotFoundError:
        yield TraceError(root_path, "no such file or directory")
        return
    except (OSError, ValueError) as e:  # ENAMETOOLONG, EACCES, ELOOP; ValueError: a NUL in the path
        yield TraceError(root_path, _os_problem(e) if isinstance(e, OSError) else "not a valid path")
        return
    if not stat.S_ISDIR(st.st_mode):
        yield root_path
        return
    found: list[Path | TraceError] = []
    unlisted: list[OSError] = []
    for root, _dirs, names in os.walk(root_path, onerror=unlisted.append):
        for name in names:
            if name.endswith(TRACE_SUFFIXES):
                f = Path(root, name)
                try:
                    mode = os.stat(f).st_mode
                except FileNotFoundError:
                    continue  # a dangling link or a file removed meanwhile
                except OSError as e:
                    found.append(TraceError(f, _os_problem(e)))
                    continue
                found.append(f if stat.S_ISREG(mode) else _not_regular(f, mode))
    for err in unlisted:
        found.append(TraceError(err.filename if err.filename is not None else root_path, f"cannot list: {err.strerror or err}"))
    if not found:
        yield TraceError(root_path, "directory holds no trace files (*.json, *.json.gz)")
        return
    found.sort(key=lambda x: str(x.path if isinstance(x, TraceError) else x))
    yield from found


def find_trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files a path names; raises the first :class:`TraceError` of :func:`iter_trace_inputs`."""
    files = []
    for file in iter_trace_inputs(path):
        if isinstance(file, TraceError):
            raise file
        files.append(file)
    return files
