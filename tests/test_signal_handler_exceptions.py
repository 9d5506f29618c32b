"""An exception that a program's signal handler raises is the program's: no boundary of autoprof's catches it
(autoprof/_guard.py, ``from_signal_handler``). A SIGALRM watchdog's ``TimeoutError`` (an ``Exception``, the classic
timeout idiom) that landed in autoprof's code was taken for autoprof's own failure: the target was given up with an
error record, and the watchdog never reached the program. Two ways it lands there: a signal autoprof held back while it
changed the profiler's state, handed to the handler at the end of that change (the CPU calibration, a window's
start), and a signal Python hands to the handler between two of autoprof's own lines."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoprof import _guard
from autoprof.live.session import SIGNALS_HELD


class WatchdogError(Exception):
    pass


def _watchdog(signum: int, frame: object) -> None:
    raise WatchdogError(signum)


@pytest.fixture
def usr1() -> Iterator[None]:
    old = signal.signal(signal.SIGUSR1, _watchdog)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_an_exception_from_a_handler_python_ran_goes_through_every_boundary(usr1: None) -> None:
    with pytest.raises(WatchdogError), _guard.quiet("live.stack_probe"):
        signal.raise_signal(signal.SIGUSR1)  # the handler runs here, inside the boundary
    with pytest.raises(WatchdogError):
        _guard.hook(lambda e: None)(lambda: signal.raise_signal(signal.SIGUSR1))()


def test_an_exception_from_a_held_signals_handler_goes_through_every_boundary(usr1: None) -> None:
    with pytest.raises(WatchdogError) as caught, _guard.quiet("live.stack_probe"), SIGNALS_HELD:
        signal.raise_signal(signal.SIGUSR1)  # noted; handed to the handler as the section ends
    assert _guard.from_signal_handler(caught.value)


def test_autoprofs_own_failures_are_still_caught(usr1: None) -> None:
    with _guard.quiet("live.stack_probe"):
        raise WatchdogError("autoprof's own, not a handler's")  # the same class, raised by no handler: caught
    assert not _guard.from_signal_handler(ValueError("x"))
    assert not _guard.from_signal_handler(None)


def test_a_callable_objects_handler_is_recognised() -> None:
    class Handler:
        def __call__(self, signum: int, frame: object) -> None:
            raise WatchdogError(signum)

    old = signal.signal(signal.SIGUSR2, Handler())
    try:
        with pytest.raises(WatchdogError), _guard.quiet("live.stack_probe"):
            signal.raise_signal(signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGUSR2, old)


def _raising_usr1(*args: object, **kwargs: object) -> None:
    signal.raise_signal(signal.SIGUSR1)  # the handler runs here, inside the call autoprof makes


def test_an_oserror_from_a_handler_goes_through_autoprofs_narrow_excepts(monkeypatch: pytest.MonkeyPatch) -> None:
    # a watchdog's TimeoutError is an OSError: the reads that give up quietly on an OSError (the run-queue wait, the
    # page faults, the host's memory) dropped it, and the program never saw its watchdog
    from autoprof.live import _cpu, window

    def timeout(signum: int, frame: object) -> None:
        raise TimeoutError("watchdog")

    old = signal.signal(signal.SIGUSR1, timeout)
    try:
        _cpu._runqueue_kept_ns()  # its file kept open on this thread
        monkeypatch.setattr(_cpu.os, "pread", _raising_usr1)
        with pytest.raises(TimeoutError):
            _cpu._runqueue_kept_ns()
        monkeypatch.setattr(window.os, "sysconf", _raising_usr1)
        with pytest.raises(TimeoutError):
            window.host_memory_bytes()
        monkeypatch.setattr(window.os, "sysconf", lambda name: (_ for _ in ()).throw(OSError("no such")))
        assert window.host_memory_bytes() is None  # autoprof's own OSError: still dropped quietly
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_a_handler_exception_during_the_event_read_is_not_autoprofs_read_error(usr1: None) -> None:
    from autoprof.live import window

    class Results:
        def events(self) -> None:
            signal.raise_signal(signal.SIGUSR1)

    class Job:
        results = Results()
        read_ns = 0

    with pytest.raises(WatchdogError):
        window._read_events(Job())  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["partial", "disarms", "sigwinch"])
def test_handlers_of_every_shape_are_recognised(kind: str) -> None:
    import functools

    def raises(tag: str, signum: int, frame: object) -> None:
        if kind == "disarms":
            signal.signal(signum, signal.SIG_IGN)  # a one-shot watchdog: disarmed, then raises
        raise WatchdogError(tag)

    signum = signal.SIGWINCH if kind == "sigwinch" else signal.SIGUSR1  # (not a signal a held section holds)
    old = signal.signal(signum, functools.partial(raises, kind))
    try:
        with SIGNALS_HELD:  # autoprof sees the handler installed once (as each window's change of state does)
            pass
        with pytest.raises(WatchdogError), _guard.quiet("live.stack_probe"):
            signal.raise_signal(signum)
    finally:
        signal.signal(signum, old)


# A live target with a SIGUSR1 watchdog, the signal raised (deterministically, by a patch) at one point of autoprof's
# work on the step: the program gets every watchdog, the function's other calls return their values, and autoprof gives
# nothing up
_LIVE = """
import json, signal, torch, autoprof
from autoprof.live import session
autoprof.configure(sink=SINK, background=False)

class WatchdogError(Exception):
    pass

def on_usr1(signum, frame):
    raise WatchdogError("fired")
signal.signal(signal.SIGUSR1, on_usr1)

fire = {"left": 0}
def patch(owner, name):
    orig = getattr(owner, name)
    def patched(*args, **kwargs):
        if fire["left"]:
            fire["left"] -= 1
            signal.raise_signal(signal.SIGUSR1)
        return orig(*args, **kwargs)
    setattr(owner, name, patched)
patch(*WHERE)

@autoprof.autoprof(name="step", skip_first=0, wait=0, warmup=1, active=2)
def step(x):
    return (x @ x).sum().item()

x = torch.ones(8, 8)
results = []
for i in range(6):
    fire["left"] = 1 if i == AT else 0
    try:
        results.append(step(x))
    except WatchdogError:
        results.append("watchdog")
print(json.dumps(results))
"""

_WHERE = {
    # between two of autoprof's lines: the step's place in its schedule (Python runs the handler there)
    "place": ("session.Schedule", "place", 0),
    # inside a held section: the window's prepare (the signal is noted, handed to the handler as the change is whole)
    "prepare": ("torch.profiler.profile", "prepare_trace", 0),
    # inside a held section: the window's start, at its first active step
    "start": ("torch.profiler.profile", "start_trace", 1),
}


@pytest.mark.parametrize("where", sorted(_WHERE))
def test_a_watchdog_that_fires_in_autoprofs_work_reaches_the_program(tmp_path: Path, where: str) -> None:
    owner, name, at = _WHERE[where]
    sink = tmp_path / "r.jsonl"
    script = tmp_path / "s.py"
    body = textwrap.dedent(_LIVE).replace("patch(*WHERE)", f"patch({owner}, {name!r})").replace("AT", str(at))
    script.write_text(f"SINK = {str(sink)!r}\nimport torch.profiler\n" + body)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert results.count("watchdog") == 1 and results.count(512.0) == 5, results
    recs = [json.loads(line) for line in sink.read_text().splitlines()]
    assert not [r for r in recs if r["event"] == "autoprof.error"], [r for r in recs if r["event"] == "autoprof.error"]
    assert len([r for r in recs if r["event"] == "autoprof.window"]) == 1, recs  # nothing given up: a window, whole
