"""A target's owner thread ends (autoprof/live/session.py, ``_ThreadEnd``): torch keeps a profiler's state per
thread, so a window left recording when the thread that started it ended died with that thread. torch 2.13 then
warned on stderr ("disableProfiler called but no active profiling session found") at the next profiler's start; 2.4
refused every later profiler in the process, a user's too ("Can't disable Kineto profiler when it's not running").
And the target stayed the dead thread's: a later thread's calls were never steps (or were, where the new thread
reused the dead one's id, and stopped a profiler it never started).

Each case runs in a fresh interpreter (a profiler's state is the process's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from autoprof.live import session


def _run(tmp_path: Path, body: str) -> tuple[list[dict[str, Any]], str]:
    """Run ``body`` (``SINK``: the records' path) in a fresh interpreter; its records and its non-JSON stderr lines."""
    sink = tmp_path / "r.jsonl"
    script = tmp_path / "s.py"
    script.write_text(f"SINK = {str(sink)!r}\n" + textwrap.dedent(body))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    stray = "\n".join(line for line in run.stderr.splitlines() if line.strip() and not line.startswith("{"))
    return [json.loads(line) for line in sink.read_text().splitlines()], stray


_PRELUDE = """
import os, threading
os.environ["KINETO_LOG_LEVEL"] = "6"  # as autoprof sets it: kineto's USDT lines off (the user's profiler starts first)
import torch, autoprof
from autoprof.live import calibrate
calibrate.CALIBRATION.failed = True  # no CPU calibration: the windows' verdicts are not what is tested
autoprof.configure(sink=SINK, background=False)

@autoprof.autoprof(name="step", skip_first=0, wait=0, warmup=1, active=2)
def step(x):
    return (x @ x).sum()

x = torch.randn(16, 16)

def in_a_thread(calls):
    t = threading.Thread(target=lambda: [step(x) for _ in range(calls)])
    t.start()
    t.join()
    # the window it left open is cut by the time join returns (the thread's state is cleared before)
    assert not torch.autograd.profiler._is_profiler_enabled, "the thread's window left recording"

def users_profiler_records():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.randn(8, 8) + 1
    assert any(e.name == "aten::add" for e in prof.events()), "the user's profiler recorded nothing"

# kineto's first profiler on the main thread: one started first on another thread prints kineto's own "External init
# callback" line (tests/test_hostile_issue46_48.py), which is not what these tests look for. torch 2.10-2.11 warns
# once per process at a profiler's prepare ("Profiler clears events at the end of each cycle", gone by 2.13): here
# it is this first profiler's, the user's own, so it is silenced for it (torch then never says it again)
import warnings
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
    users_profiler_records()
"""


def test_a_thread_that_ends_inside_its_window_cuts_it_and_the_next_thread_records_whole(tmp_path: Path) -> None:
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
in_a_thread(2)  # steps 0 (warmup) and 1 (the first of two active): its window is open as the thread ends
users_profiler_records()  # torch 2.4: "Can't disable Kineto profiler when it's not running" before
in_a_thread(5)  # steps 2 (warmup), 3, 4: a whole window
""",
    )
    assert not stray, stray  # torch 2.13: "disableProfiler called but no active profiling session found" before
    (cut,) = [r for r in recs if r.get("reason") == "window_incomplete"]
    assert "the thread that called it ended" in cut["message"] and cut["steps_recorded"] == 1, cut
    assert "calls of one thread" in cut["message"] and "run this short" not in cut["message"], cut["message"]
    windows = [w["steps"] for w in recs if w["event"] == "autoprof.window"]
    assert windows == [[3, 4]], windows  # the second thread took the target on (before: its calls were no steps)


def test_the_next_thread_takes_on_a_target_whose_thread_ended_between_windows(tmp_path: Path) -> None:
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
in_a_thread(1)  # its warmup: prepared, not started
for _ in range(3):  # the main thread's calls: steps (before: another thread's calls, no steps, no window)
    step(x)
""",
    )
    assert not stray, stray
    windows = [w["steps"] for w in recs if w["event"] == "autoprof.window"]
    assert windows == [[2, 3]], windows  # step 0's window cut (at its warmup), then 1 (warmup), 2, 3
    assert [r["steps_recorded"] for r in recs if r.get("reason") == "window_incomplete"] == [0]


def test_a_target_called_from_a_new_thread_each_time_is_given_up_after_a_few_cuts(tmp_path: Path) -> None:
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
for _ in range(12):
    in_a_thread(1)
from autoprof.live.session import SESSION
assert SESSION.targets["step"].idle  # given up: the idle path, no profiler prepared a call
users_profiler_records()
""",
    )
    assert not stray, stray
    assert not [w for w in recs if w["event"] == "autoprof.window"]
    (given_up,) = [r for r in recs if r.get("reason") == "window_given_up"]
    assert given_up["tries"] == session.MAX_CUT_TRIES and given_up["error"] is None, given_up
    assert "thread that called it ended" in given_up["message"], given_up["message"]
    assert len([r for r in recs if r.get("reason") == "window_incomplete"]) == 1  # said once a run


def test_a_thread_end_in_a_forked_child_or_for_another_thread_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[Any] = []
    monkeypatch.setattr(session.SESSION, "owner_ended", lambda targets, ident: ended.append(ident))
    end = session._ThreadEnd()
    end.pid = -1  # the parent's, seen in a forked child (its other threads' states are cleared there, on its thread)
    del end
    other = session._ThreadEnd()
    other.ident += 1  # not this thread's
    del other
    assert ended == []
    mine = session._ThreadEnd()
    del mine
    assert ended == [threading.get_ident()]


def test_a_failure_at_a_thread_end_is_not_printed(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    def boom(targets: Any, ident: int) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(session.SESSION, "owner_ended", boom)
    end = session._ThreadEnd()
    del end
    assert "boom" not in capfd.readouterr().err


def test_an_async_step_left_suspended_when_its_threads_loop_closed_leaves_nothing_behind(tmp_path: Path) -> None:
    # a thread runs its own event loop, closes it with a call of the target suspended (its step in progress, inside the
    # window), and ends; the garbage collector finalizes that coroutine later, on the main thread, in another context
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
import asyncio, gc

@autoprof.autoprof(name="a", skip_first=0, wait=0, warmup=1, active=2)
async def a(x, ev):
    y = (x @ x).sum()
    await ev.wait()
    return y

def th():
    loop = asyncio.new_event_loop()
    async def m():
        ev = asyncio.Event()
        ev.set()
        await a(x, ev)
        await a(x, ev)  # warmup, then the first active step
        asyncio.ensure_future(a(x, asyncio.Event()))  # the second: left suspended
        await asyncio.sleep(0.01)
    loop.run_until_complete(m())
    loop.close()
t = threading.Thread(target=th)
t.start()
t.join()
assert not torch.autograd.profiler._is_profiler_enabled, "the thread's window left recording"
gc.collect()  # the suspended call's coroutine is closed here, on the main thread

async def main():
    ev = asyncio.Event()
    ev.set()
    for _ in range(4):
        await a(x, ev)
asyncio.run(main())
""",
    )
    # asyncio says "Task was destroyed but it is pending!" (the user's task); nothing of autoprof's
    ours = [line for line in stray.splitlines() if not line.startswith(("Task was destroyed", "task: <Task pending"))]
    assert not ours, stray
    assert [r["steps_recorded"] for r in recs if r.get("reason") == "window_incomplete"] == [1], recs
    # the suspended call never ended: not counted, and its step number is the main thread's first call's (2, a warmup)
    assert [w["steps"] for w in recs if w["event"] == "autoprof.window"] == [[3, 4]], recs


def test_the_triggers_timing_goes_on_in_the_next_thread(tmp_path: Path) -> None:
    # a target whose window is over, watched by the trigger (the idle path times the owner's calls only): its owner
    # thread ends, and the next thread's calls are timed (before: nobody's, the trigger was off for it for good)
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
autoprof.configure(trigger=True)

@autoprof.autoprof(name="watched", skip_first=0, wait=0, warmup=0, active=1)
def watched(x):
    return (x @ x).sum()

t = threading.Thread(target=lambda: [watched(x) for _ in range(4)])
t.start()
t.join()
from autoprof.live.session import SESSION
target = SESSION.targets["watched"]
assert target.idle and target.owner is None and target.watch is not None, (target.idle, target.owner)
before = target.calls
for _ in range(5):
    watched(x)
assert target.owner == threading.get_ident(), target.owner
assert target.calls - before == 5, (before, target.calls)  # each of the main thread's calls timed by the watch
""",
    )
    assert not stray, stray
    assert [w["steps"] for w in recs if w["event"] == "autoprof.window"] == [[0]], recs


def test_a_threads_end_leaves_no_dummy_thread_behind(tmp_path: Path) -> None:
    # the cut ran on a thread Python had already forgotten: threading.current_thread() made a _DummyThread there, which
    # stayed in threading.enumerate(), and the usual join-every-thread loop raised "cannot join a dummy thread"
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
in_a_thread(2)
assert threading.enumerate() == [threading.main_thread()], threading.enumerate()
for th in threading.enumerate():
    if th is not threading.main_thread():
        th.join(timeout=1)
""",
    )
    assert not stray, stray
    assert [r["reason"] for r in recs if r.get("reason") == "window_incomplete"] == ["window_incomplete"]


def test_a_thread_python_did_not_start_keeps_its_targets() -> None:
    # a thread started in C (here: _thread's, unknown to threading as C's are) gets a Python state per call into
    # Python and loses it after: each callback's end was taken for the thread's, every window cut and then given up
    import _thread

    done = threading.Event()
    noted: list[object] = []

    def body() -> None:
        session._at_thread_end(session.Target.__new__(session.Target))
        noted.append(getattr(session._THREAD_ENDS, "end", None))
        done.set()

    _thread.start_new_thread(body, ())
    assert done.wait(10)
    assert noted == [None]


def test_a_coroutine_finalized_on_another_thread_leaves_that_threads_async_calls_alone(tmp_path: Path) -> None:
    # the main thread already ran an async target (its count of calls in flight: 0); a worker's event loop closes with a
    # call of another target suspended in its step, finalized later on the main thread: its bookkeeping lowered the
    # main thread's count to -1, and every later async call there ran bare (b: no window, "never recorded")
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + """
import asyncio, gc
from autoprof.live import instrument

@autoprof.autoprof(name="a", skip_first=0, wait=0, warmup=1, active=2, repeat=0)
async def a(i, ev=None):
    if ev is not None:
        await ev.wait()
    return i

@autoprof.autoprof(name="b", skip_first=0, wait=0, warmup=1, active=2)
async def b(i):
    return i

asyncio.run(b(0))
held = []
def th():
    loop = asyncio.new_event_loop()
    async def m():
        await a(0)
        await a(1)
        held.append(asyncio.ensure_future(a(2, asyncio.Event())))
        await asyncio.sleep(0.01)
    loop.run_until_complete(m())
t = threading.Thread(target=th)
t.start()
t.join()
held.clear()
gc.collect()  # the suspended call of a is closed here, on the main thread
assert getattr(instrument._tls, "a", 0) == 0, instrument._tls.a

async def main():
    for i in range(1, 4):
        assert await b(i) == i
asyncio.run(main())
""",
    )
    ours = [line for line in stray.splitlines() if not line.startswith(("Task was destroyed", "task: <Task pending"))]
    assert not ours, stray
    assert [w["steps"] for w in recs if w["event"] == "autoprof.window" and w["target"] == "b"] == [[1, 2]], recs


@pytest.mark.parametrize("where", ["between_steps", "in_a_step"])
def test_a_daemon_thread_inside_its_window_at_exit_is_left_to_the_exit(tmp_path: Path, where: str) -> None:
    # a daemon thread that lives on inside its window as the program ends: the exit stopped its profiler from the main
    # thread, where torch cannot (2.13: "disableProfiler called but no active profiling session found"; 2.4 raised,
    # quietly); the window is dropped and said, and its profiler ends with the process
    recs, stray = _run(
        tmp_path,
        _PRELUDE
        + f"""
import time
WHERE = {where!r}
ready = threading.Event()

@autoprof.autoprof(name="daemon", skip_first=0, wait=0, warmup=1, active=3)
def daemon_step(i):
    if WHERE == "in_a_step" and i == 2:
        ready.set()
        time.sleep(60)
    return (x @ x).sum()

def body():
    for i in range(3):
        daemon_step(i)
    ready.set()
    time.sleep(60)
threading.Thread(target=body, daemon=True).start()
assert ready.wait(60)
assert torch.autograd.profiler._is_profiler_enabled  # the daemon's window records as the program ends
""",
    )
    assert not stray, stray
    assert [r.get("reason") for r in recs if r["event"] == "autoprof.warning"] == ["no_window"], recs


def test_a_daemon_thread_whose_steps_go_on_at_exit_cuts_its_window_on_its_own_thread(tmp_path: Path) -> None:
    # the daemon's steps go on as the program exits: the exit waits for its next step's end, where the window is cut on
    # its own thread. Stopped from the main thread, torch printed "disableProfiler called but no active profiling
    # session found" (and the process sometimes crashed, -11); left running while its ops went on, it crashed always
    sink = tmp_path / "r.jsonl"
    script = tmp_path / "s.py"
    script.write_text(
        f"SINK = {str(sink)!r}\n"
        + textwrap.dedent(_PRELUDE)
        + textwrap.dedent(
            """
            import time
            started = threading.Event()

            @autoprof.autoprof(name="daemon", skip_first=0, wait=0, warmup=1, active=1000)
            def daemon_step(i):
                return (x @ x).sum()

            def body():
                i = 0
                while True:
                    daemon_step(i)
                    i += 1
                    if i == 5:
                        started.set()
                    time.sleep(0.001)
            threading.Thread(target=body, daemon=True).start()
            assert started.wait(60)
            """
        )
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    # torch's own: a daemon thread running ops while the interpreter ends can abort (-6), with or without autoprof
    torch_own = "terminate called without an active exception"
    assert run.returncode == 0 or (run.returncode in (-6, 134) and torch_own in run.stderr), (run.returncode, run.stderr[-2000:])
    stray = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("{") and torch_own not in line]
    assert not stray, stray
    recs = [json.loads(line) for line in sink.read_text().splitlines()]
    (cut,) = [r for r in recs if r.get("reason") == "window_incomplete"]
    assert "the process exited" in cut["message"], cut
