"""Helper processes that parse and consume batches of a large trace file's events.

A worker is a fresh interpreter (``sys.executable``) that imports only autoprof's loader; it talks over two
pipes (pickled ``(id, text)`` in, ``(id, result)`` out) and exits when its input pipe closes. Nothing here
may fail a load: a worker that cannot start, dies, or stalls has its batches redone in the calling process.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import BinaryIO

from autoprof import _guard
from autoprof.trace.events import BatchResult, BatchStatus

#: What a helper runs: ``python -c WORKER_CODE <package parent> <fd in> <fd out>``.
WORKER_CODE = "import sys; sys.path.insert(0, sys.argv[1]); from autoprof.trace._worker import main; main(sys.argv[2:])"
PER_WORKER = 8  # batches queued per worker: enough that the caller rarely parses one itself (it has
# reading, cutting and merging to do; measured on 2 CPUs: 2.5 s to read a 1M-event file vs 2.7 s with 4)
_STALL_S = 120.0  # a batch (a few MB) takes well under a second; a worker silent this long is given up


def _is_python(path: str | None) -> bool:
    """Whether ``path`` looks like a Python interpreter (an embedding program, uwsgi say, sets
    ``sys.executable`` to itself: starting that with ``-c`` would run something else entirely)."""
    if not path:
        return False
    name = os.path.basename(path).lower()
    return name.startswith(("python", "pypy")) and os.access(path, os.X_OK)


def default_workers() -> int:
    """As many as the CPUs this process may use, at most 4; 0 with one CPU or where workers are not possible.

    Not one fewer: the calling process spends much of a load waiting (on the gunzip thread, on results)
    and parses batches itself only while every worker is busy; measured on 2 CPUs, 2 workers load a 1M-event
    file ~0.5 s faster than 1."""
    if os.name != "posix" or not _is_python(sys.executable):
        return 0
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        n = os.cpu_count() or 1
    return min(n, 4) if n > 1 else 0


def spawn(code: str, stderr: int | None = subprocess.DEVNULL) -> tuple[subprocess.Popen[bytes], BinaryIO, BinaryIO]:
    """A fresh interpreter running ``python -c code <package parent> <fd in> <fd out>``, its standard streams closed
    (``stderr``: where its own complaints go): the process, the pipe to it and the pipe from it."""
    r_in, w_in = os.pipe()  # we write, it reads
    r_out, w_out = os.pipe()  # it writes, we read
    pkg_parent = str(Path(__file__).resolve().parents[2])
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, pkg_parent, str(r_in), str(w_out)],
            pass_fds=(r_in, w_out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            close_fds=True,
        )
    except BaseException:
        os.close(w_in)
        os.close(r_out)
        raise
    finally:
        os.close(r_in)
        os.close(w_out)
    return proc, os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb")


class _Worker:
    def __init__(self, pool: Pool, source: str, code: str) -> None:
        self.pool = pool
        self.source = source
        self.outstanding = 0
        self.dead = False
        self.proc, self.to_child, self.from_child = spawn(code)
        self.q: queue.Queue[tuple[int, str] | None] = queue.Queue()
        self.writer = threading.Thread(target=self._write, name="autoprof-load-send", daemon=True)
        self.reader = threading.Thread(target=self._read, name="autoprof-load-recv", daemon=True)
        self.writer.start()
        self.reader.start()

    def _write(self) -> None:
        try:
            with _guard.worker(self.pool._died, self):
                while True:
                    item = self.q.get()
                    if item is None:
                        break
                    pickle.dump((item[0], item[1], self.source), self.to_child, protocol=pickle.HIGHEST_PROTOCOL)
                    self.to_child.flush()
        finally:
            with _guard.quiet("pool.pipe_close"):
                self.to_child.close()

    def _read(self) -> None:
        try:
            with _guard.worker(self.pool._died, self):  # EOF when it exits; else a broken worker: its batches are redone
                while True:
                    bid, result = pickle.load(self.from_child)
                    self.pool._arrived(self, bid, result)
        finally:
            self.from_child.close()


def _started(pool: Pool, source: str, code: str) -> _Worker | None:
    """A new helper of ``pool``, or None where one cannot start."""
    with _guard.quiet("pool.spawn"):
        return _Worker(pool, source, code)
    return None


class Pool:
    """Up to ``n`` workers; each takes at most ``PER_WORKER`` batches at a time (the caller parses the
    rest itself)."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.results: dict[int, BatchResult] = {}
        self.owner: dict[int, _Worker] = {}
        self.workers: list[_Worker] = []

    @classmethod
    def start(cls, n: int, source: str, code: str = WORKER_CODE) -> Pool | None:
        """Start up to ``n`` helpers running ``code``; None when none could start (or helpers are not possible)."""
        if os.name != "posix" or not _is_python(sys.executable):
            return None
        pool = cls()
        for _ in range(n):
            worker = _started(pool, source, code)
            if worker is None:
                break
            pool.workers.append(worker)
        if not pool.workers:
            return None
        return pool

    def submit(self, bid: int, text: str) -> bool:
        """Hand a batch to the least busy worker; False when all are busy or gone."""
        with self.cv:
            live = [w for w in self.workers if not w.dead and w.outstanding < PER_WORKER]
            if not live:
                return False
            w = min(live, key=lambda w: w.outstanding)
            w.outstanding += 1
            self.owner[bid] = w
        w.q.put((bid, text))
        return True

    def result(self, bid: int, wait: bool) -> BatchResult | None:
        """The result of batch ``bid`` (FAILED if its worker is gone), or None if not there yet."""
        with self.cv:
            while True:
                if bid in self.results:
                    self.owner.pop(bid, None)
                    return self.results.pop(bid)
                w = self.owner.get(bid)
                if w is None or w.dead:
                    self.owner.pop(bid, None)
                    return BatchResult(BatchStatus.FAILED)
                if not wait:
                    return None
                if not self.cv.wait(_STALL_S) and bid not in self.results:
                    w.dead = True
                    w.proc.kill()

    def _arrived(self, w: _Worker, bid: int, result: BatchResult) -> None:
        with self.cv:
            self.results[bid] = result
            w.outstanding -= 1
            self.cv.notify_all()

    def _died(self, worker: _Worker, _error: BaseException | None = None) -> None:
        """``worker`` is gone (``_error``: what its thread caught, if anything): its batches are redone here."""
        with self.cv:
            worker.dead = True
            self.cv.notify_all()

    def close(self) -> None:
        """Stop every worker (batches not yet sent are dropped: the load is over or failed) and reap it."""
        for worker in self.workers:
            worker.dead = True
            while True:
                try:
                    worker.q.get_nowait()
                except queue.Empty:
                    break
            worker.q.put(None)
        for worker in self.workers:
            try:
                worker.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
            worker.writer.join(timeout=5)
            worker.reader.join(timeout=5)
