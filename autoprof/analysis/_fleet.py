"""``FilePool``: a ``concurrent.futures.Executor`` of fresh interpreters, one file's analysis per task.

Why not ``ProcessPoolExecutor``: multiprocessing's children re-import the caller's ``__main__`` (a user script
without an ``if __name__ == "__main__"`` guard would run again in every child), and one child that dies (the
kernel's OOM killer) breaks the whole pool, failing every file still in it. Here each worker is
``sys.executable -c`` importing only autoprof, talking over two pipes (pickled ``(fn, args)`` in, ``(ok, value)``
out); a worker that dies fails only the task it held (``WorkerDiedError``) and is replaced for the next one.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

from autoprof import _guard
from autoprof.trace._pool import spawn

#: What a worker runs: ``python -c SERVE_CODE <package parent> <fd in> <fd out>``.
SERVE_CODE = "import sys; sys.path.insert(0, sys.argv[1]); from autoprof.analysis._fleet import serve; serve(sys.argv[2:])"


class WorkerDiedError(RuntimeError):
    """The process running a task exited before it answered (killed, out of memory, a crash)."""


def usable_cpus() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


def serve(argv: Sequence[str]) -> None:
    """A worker's loop: run each pickled ``(fn, args)`` and answer ``(True, value)`` or ``(False, exception)``
    until the input pipe closes."""
    import gc

    gc.disable()  # many short-lived containers, no cycles: reference counting frees everything
    with os.fdopen(int(argv[0]), "rb") as fin, os.fdopen(int(argv[1]), "wb") as fout:
        while True:
            try:
                fn, args = pickle.load(fin)
            except EOFError:
                return
            answer = _guard.outcome(fn, *args)  # (True, its value) or (False, what it raised)
            pickled, data = _guard.outcome(pickle.dumps, answer, pickle.HIGHEST_PROTOCOL)
            if not pickled:  # an answer that does not pickle: say so rather than die
                data = pickle.dumps((False, RuntimeError(f"{type(data).__name__}: {data}")), protocol=pickle.HIGHEST_PROTOCOL)
            fout.write(data)
            fout.flush()


class _Worker:
    """One interpreter and the pipes to it."""

    def __init__(self) -> None:
        self.proc, self.to_child, self.from_child = spawn(SERVE_CODE, stderr=None)  # its complaints reach the terminal

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
        pickle.dump((fn, args), self.to_child, protocol=pickle.HIGHEST_PROTOCOL)
        self.to_child.flush()
        ok, value = pickle.load(self.from_child)
        return bool(ok), value

    def close(self) -> None:
        for f in (self.to_child, self.from_child):
            with _guard.quiet("pool.pipe_close"):
                f.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class FilePool(Executor):
    """``n`` fresh interpreters; tasks run in submission order as workers free up. ``fn`` must be importable by
    name (a module-level function), its arguments and result picklable."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a pool needs at least one worker, not {n}")
        self._tasks: queue.Queue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._run, name=f"autoprof-fleet-{k}", daemon=True) for k in range(n)]
        self._closed = False
        self._terminated = False  # terminate(): no worker starts any more
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if kwargs:
            raise TypeError("FilePool tasks take positional arguments only")
        if self._closed:
            raise RuntimeError("cannot submit to a FilePool after shutdown")
        future: Future[Any] = Future()
        self._tasks.put((future, fn, args))
        return future

    def _run(self) -> None:
        worker: _Worker | None = None
        try:
            while True:
                task = self._tasks.get()
                if task is None:
                    return
                future, fn, args = task
                if not future.set_running_or_notify_cancel():
                    continue
                # whatever this thread catches is the task's: the thread that waits on the future raises it
                with _guard.worker(future.set_exception, catches=BaseException):
                    try:
                        if worker is None:
                            with self._lock:  # started under the lock: terminate() kills every worker that started
                                if self._terminated:
                                    raise WorkerDiedError("the pool was stopped")
                                worker = _Worker()
                                self._live.add(worker)
                        ok, value = worker.call(fn, args)
                    except (EOFError, OSError, pickle.UnpicklingError) as e:
                        code = None
                        if worker is not None:
                            worker.close()
                            code = worker.proc.returncode
                            with self._lock:
                                self._live.discard(worker)
                        worker = None  # the next task gets a fresh one
                        future.set_exception(WorkerDiedError(_death(code, e)))
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            if worker is not None:
                worker.close()
                with self._lock:
                    self._live.discard(worker)

    def terminate(self) -> None:
        """Stop now: cancel what has not started and kill the workers (their tasks fail with ``WorkerDiedError``)."""
        with self._lock:
            self._terminated = True
            live = list(self._live)
        self.shutdown(wait=False, cancel_futures=True)
        for worker in live:
            try:
                worker.proc.kill()
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=10)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    task = self._tasks.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    task[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)
        if wait:
            for t in self._threads:
                t.join()


def _death(code: int | None, e: BaseException) -> str:
    if code is not None and code < 0:
        return f"the process analyzing it was killed by signal {-code} (out of memory?)"
    if code is not None:
        return f"the process analyzing it exited with code {code}"
    return f"the process analyzing it stopped answering ({type(e).__name__})"
