"""Trace inputs named by URL (``s3://bucket/run/``, ``gs://...``, ``memory://...``): listed and fetched through
fsspec (installed with torch; each cloud protocol needs its own fsspec package). A fetched file is copied to a
private local file, read by the same loader as any local file, and removed; ``file://`` URLs are plain paths.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autoprof.trace.inputs import EMPTY_PATH, TRACE_SUFFIXES, TraceError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL of a protocol other than ``file://``."""
    return isinstance(path, str) and bool(_URL.match(path)) and not path.startswith("file://")


def names_nothing(path: str | os.PathLike[str]) -> TraceError | None:
    """The error of an input that names nothing, else None: ``''``, or a URL with no path (``file://``,
    ``memory://``), which would otherwise read as the current directory (or a file system's root) and be walked."""
    text = os.fspath(path)
    if not isinstance(text, str):
        return None
    if text == "":
        return TraceError("''", EMPTY_PATH)
    if _URL.match(text) and text.split("://", 1)[1] == "":
        return TraceError(text, "a URL with no path names no file or directory")
    return None


def local_path(path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """``file:///x`` as ``/x``; anything else unchanged."""
    if isinstance(path, str) and path.startswith("file://"):
        return path[len("file://") :]
    return path


def _fs(url: str) -> tuple[Any, str]:
    """The fsspec file system of ``url`` and the path in it; a :class:`TraceError` (one line, naming what to install)
    when the protocol cannot be used here."""
    protocol = url.split("://", 1)[0]
    try:
        import fsspec
    except ImportError:
        raise TraceError(url, "reading URLs needs fsspec: pip install fsspec") from None
    try:
        return fsspec.core.url_to_fs(url)  # type: ignore[no-any-return]
    except ImportError as e:  # fsspec names the package: "Install s3fs to access S3"
        raise TraceError(url, f"{protocol}:// needs a package that is not installed: {e}") from None
    except ValueError as e:  # "Protocol not known: ..."
        raise TraceError(url, f"{protocol}:// is not a protocol fsspec knows ({e})") from None


def iter_url_inputs(url: str) -> Iterator[str | TraceError]:
    """The trace files a URL names (the object itself, or the ``*.json(.gz)`` objects under it, sorted), as URLs;
    a :class:`TraceError` for what cannot be listed. Never raises."""
    empty = names_nothing(url)
    if empty is not None:
        yield empty
        return
    try:
        fs, path, names = _listed(url)
    except TraceError as e:
        yield e
        return
    if names is None:
        yield url
        return
    if not names:
        yield TraceError(url, "directory holds no trace files (*.json, *.json.gz)")
        return
    root = path.rstrip("/")
    for name in names:  # named as the user spelled the directory's URL
        inside = name.startswith(root + "/")
        yield f"{url.rstrip('/')}/{name[len(root) + 1 :]}" if inside else fs.unstrip_protocol(name)


def _listed(url: str) -> tuple[Any, str, list[str] | None]:
    """The URL's filesystem and path, and the trace files under it where it is a directory (None: it names one
    object). Raises :class:`TraceError` for what cannot be listed."""
    try:
        fs, path = _fs(url)
        info = fs.info(path)
        if info.get("type") != "directory":
            return fs, path, None
        return fs, path, sorted(p for p in fs.find(path) if p.endswith(TRACE_SUFFIXES))
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(url, "no such file or directory") from None
    except Exception as e:
        raise TraceError(url, f"cannot list: {type(e).__name__}: {e}") from None


@contextlib.contextmanager
def fetched(url: str) -> Iterator[Path]:
    """A private local copy of the object at ``url`` (same suffix), removed on exit. Raises :class:`TraceError`."""
    fs, path = _fs(url)
    suffix = ".json.gz" if path.endswith(".gz") else ".json"
    fd, local = tempfile.mkstemp(prefix="autoprof-", suffix=suffix)
    try:
        try:
            with os.fdopen(fd, "wb") as dst, fs.open(path, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
        except FileNotFoundError:
            raise TraceError(url, "no such file or directory") from None
        except OSError as e:
            raise TraceError(url, f"cannot read: {e.strerror or e}") from None
        except Exception as e:
            raise TraceError(url, f"cannot read: {type(e).__name__}: {e}") from None
        yield Path(local)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(local)
