"""A fork waits for the threads that opened autoprof's windows while their native exit is under way
(autoprof/live/_exiting.py): a fork right after joining a window's owner thread handed the child MKL's allocator
mid-update, and the child's first matmul spun forever (9-11 of 16 runs, torch 2.13 CPU).

The wait's logic runs on a fake ``/proc`` and a fake clock; the hang itself, in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from autoprof.live import _exiting


class _FakeProc:
    """``/proc/self/task``: each tid's start ticks, on a fake clock that each sleep moves."""

    def __init__(self) -> None:
        self.ticks: dict[int, int] = {}
        self.now = 0.0
        self.sleeps = 0
        self.gone_after: dict[int, int] = {}  # tid -> the sleeps after which its task is gone
        self.tid_of: dict[int, int] = {}  # a thread's ident -> its fake native id

    def native_id(self) -> int:
        return self.tid_of.get(threading.get_ident(), threading.get_native_id())

    def start_ticks(self, tid: int) -> int | None:
        if tid in self.gone_after and self.sleeps >= self.gone_after[tid]:
            return None
        return self.ticks.get(tid)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps += 1
        self.now += s


@pytest.fixture
def proc(monkeypatch: pytest.MonkeyPatch) -> _FakeProc:
    fake = _FakeProc()
    monkeypatch.setattr(_exiting, "_threads", {})
    monkeypatch.setattr(_exiting, "start_ticks", fake.start_ticks)
    monkeypatch.setattr(_exiting, "monotonic", fake.monotonic)
    monkeypatch.setattr(_exiting, "sleep", fake.sleep)
    monkeypatch.setattr(_exiting, "native_id", fake.native_id)
    return fake


def _noted_thread(proc: _FakeProc, tid_of: dict[str, int]) -> threading.Thread:
    """A thread that notes itself (as a window's open does) under a fake tid, and has ended (its Python part)."""

    def body() -> None:
        tid = tid_of["tid"]
        proc.ticks[tid] = 1000 + tid
        proc.tid_of[threading.get_ident()] = tid
        _exiting.note()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return t


def test_a_fork_waits_for_an_ended_window_thread_until_its_task_is_gone(proc: _FakeProc) -> None:
    t = _noted_thread(proc, {"tid": 4242})
    assert not t.is_alive() and 4242 in _exiting._threads
    proc.gone_after[4242] = 7  # its native exit ends after 7 polls
    waited = _exiting.wait_for_exits()
    assert proc.sleeps == 7 and waited == pytest.approx(7 * _exiting.POLL_S)
    assert 4242 not in _exiting._threads  # forgotten once gone: the next fork does not look again
    assert _exiting.wait_for_exits() == 0.0 and proc.sleeps == 7


def test_the_wait_is_bounded_when_a_task_never_goes(proc: _FakeProc) -> None:
    _noted_thread(proc, {"tid": 7})
    _noted_thread(proc, {"tid": 8})
    waited = _exiting.wait_for_exits()
    assert _exiting.MAX_WAIT_S <= waited < _exiting.MAX_WAIT_S + 2 * _exiting.POLL_S  # both together, not each


def test_a_running_thread_and_a_reused_id_are_not_waited_for(proc: _FakeProc) -> None:
    _noted_thread(proc, {"tid": 11})
    proc.ticks[11] = 5  # another thread took its id since (a different start time)
    proc.ticks[threading.get_native_id()] = 1
    _exiting.note()  # the calling thread, running: never waited for (it is the one that forks)
    assert _exiting.wait_for_exits() == 0.0 and proc.sleeps == 0
    assert 11 not in _exiting._threads and threading.get_native_id() in _exiting._threads


def test_no_proc_notes_nothing_and_a_forked_child_forgets(proc: _FakeProc) -> None:
    _exiting.note()  # no start ticks for this thread: /proc says nothing here
    assert not _exiting._threads
    _noted_thread(proc, {"tid": 3})
    _exiting._after_fork_in_child()
    assert not _exiting._threads


def test_the_kept_threads_are_bounded(proc: _FakeProc) -> None:
    for tid in range(_exiting.KEEP + 5):
        _noted_thread(proc, {"tid": 100 + tid})
    assert len(_exiting._threads) == _exiting.KEEP and 100 not in _exiting._threads


def test_a_ctrl_c_in_the_wait_ends_it_and_reaches_the_main_thread(proc: _FakeProc, monkeypatch: pytest.MonkeyPatch) -> None:
    _noted_thread(proc, {"tid": 9})

    def interrupted(s: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_exiting, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):  # raised in the main thread by interrupt_main, right after the handler
        _exiting._before_fork()
        for _ in range(1000):
            pass


# A window's owner thread whose native exit waits on a semaphore (a thread-local destructor of its own: libc's sem_wait,
# called with the key's value) that another thread posts 200 ms after the fork began; its Python part over, then fork:
# with the wait, its task is gone by the fork; without, it is still there (the hang came from MKL's destructors in that
# stretch, on a busy machine: 9-11 of 16 children). Before, the exit lasted a fixed 150 ms (usleep): on a loaded machine
# the main thread could wake after it, and the script found nothing to show (CI, beside the installer of other torch
# releases).
_SLOW_EXIT = """
import ctypes, os, sys, threading, time, torch
import autoprof
from autoprof.live import calibrate
calibrate.CALIBRATION.failed = True
autoprof.configure(sink=os.devnull, background=False)
libc = ctypes.CDLL(None, use_errno=True)
sem = ctypes.create_string_buffer(128)  # a sem_t (32 bytes on glibc), zeroed
assert libc.sem_init(sem, 0, 0) == 0
key = ctypes.c_uint()
assert libc.pthread_key_create(ctypes.byref(key), ctypes.cast(libc.sem_wait, ctypes.c_void_p)) == 0
step = autoprof.autoprof(skip_first=0, wait=0, warmup=0, active=1)(lambda x: (x @ x).sum())
x = torch.randn(8, 8)
tid = {}
def owner():
    tid["tid"] = threading.get_native_id()
    step(x)  # its window: opened and closed on this thread
    libc.pthread_setspecific(key, ctypes.cast(sem, ctypes.c_void_p))  # at its native exit: sem_wait(sem)
t = threading.Thread(target=owner)
t.start()
while t.is_alive():  # its Python part over (not join(): from Python 3.13 join() waits for the native exit too)
    time.sleep(0.001)
task = f"/proc/self/task/{tid['tid']}"
assert os.path.exists(task), "the thread's native exit ended before the fork: the test shows nothing"
def post():
    time.sleep(0.2)
    libc.sem_post(sem)
poster = threading.Thread(target=post)
t0 = time.monotonic()
poster.start()
pid = os.fork()
if pid == 0:
    os._exit(0)
waited = time.monotonic() - t0
there = os.path.exists(task)
os.waitpid(pid, 0)
poster.join()
t.join()
print(there, round(waited, 3))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="no /proc/self/task: the wait does nothing here")
def test_a_fork_waits_for_a_windows_owner_thread_whose_native_exit_is_under_way(tmp_path: Path) -> None:
    script = tmp_path / "slow_exit.py"
    script.write_text(textwrap.dedent(_SLOW_EXIT))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    there, waited = run.stdout.split()
    # the fork waited for the thread's exit: gone by then, or (a machine so loaded that the post came late) the wait
    # reached its bound; without the wait it returns at once with the thread still there
    assert float(waited) >= 0.15, run.stdout
    assert there == "False" or float(waited) >= _exiting.MAX_WAIT_S, run.stdout
