"""Files autoprof writes: kept traces, with names that cannot collide or escape, written so that no path that
already exists is ever followed or reused (a shared or world-writable ``trace_dir`` included).

No torch import here.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from urllib.parse import quote

#: File-name bytes kept for a target's name; longer names keep a prefix and a hash of the whole name.
MAX_NAME = 120


def safe_name(name: str) -> str:
    """A file-name part for ``name``: one-to-one (different names never share a file), ASCII only, no path
    separators, no leading dot, and short enough for any file system (long names: a prefix, ``~`` and a hash
    of the whole name; ``~`` appears nowhere else)."""
    text = quote(name, safe="-_.").replace("~", "%7E")
    if text.startswith("."):
        text = "%2E" + text[1:]
    if len(text) > MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        text = text[: MAX_NAME - 25] + "~" + digest
    return text


@contextlib.contextmanager
def private_dir(parent: str) -> Iterator[str]:
    """A new directory only this user can enter, inside ``parent``, removed with all it holds on exit. On Linux
    its path is given through a descriptor (``/proc/self/fd/N``), so renaming it away and planting another
    in its place cannot redirect what is written there."""
    path = tempfile.mkdtemp(prefix=".autoprof-", dir=parent)
    fd = -1
    try:
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
        via_fd = f"/proc/self/fd/{fd}"
        yield via_fd if os.path.isdir(via_fd) and os.path.samefile(via_fd, path) else path
    finally:
        if fd >= 0:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)


def keep_gzipped(directory: str, final_name: str, export: Callable[[str], None]) -> str:
    """Write ``directory/final_name`` as gzip: ``export(path)`` writes the plain file inside a private
    directory, its bytes are compressed into a new file created exclusively (``mkstemp``: ``O_EXCL``, and
    links are never followed), which is then renamed over the final name. Whatever fails (a full disk), no
    temporary file is left behind. Returns the final path."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, final_name)
    with private_dir(directory) as scratch:
        plain = os.path.join(scratch, "window.json")
        export(plain)
        fd, tmp = tempfile.mkstemp(prefix=".autoprof-", suffix=".part", dir=directory)
        try:
            with (
                open(plain, "rb") as src,
                os.fdopen(fd, "wb") as raw,
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=5) as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 20)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a kept trace is as readable as the program's files
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return final


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, racing other threads); 0o077
    (private) where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o077
