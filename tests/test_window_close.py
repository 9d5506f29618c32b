"""Closing a window (issue 37): the training thread only stops the profiler; the raw events are read by the window's
analysis, on a thread of their own with the training thread's priority (on the calling thread with
``background=False``), and a read that fails is one record, never an exception in the user's code."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records

import autoprof
from autoprof.live import window


def _step() -> torch.Tensor:
    x = torch.randn(8, 8)
    return torch.add(torch.matmul(x, x), 1.0)


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if hasattr(os, "getpriority") else 0


def _readers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, int]]:
    """The threads that read a window's raw events (id, name, CPU priority), as they read them."""
    seen: list[tuple[int, str, int]] = []
    real = window._read_events

    def reading(job: Any) -> Any:
        seen.append((threading.get_ident(), threading.current_thread().name, _priority()))
        return real(job)

    monkeypatch.setattr(window, "_read_events", reading)
    return seen


@pytest.mark.parametrize("background", [True, False])
def test_the_raw_events_are_read_by_the_analysis_not_the_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool) -> None:
    sink = tmp_path / "records.jsonl"
    autoprof.configure(sink=str(sink), background=background)
    seen = _readers(monkeypatch)
    step = autoprof.autoprof(name="close", skip_first=0, wait=0, warmup=1, active=2)(_step)
    for _ in range(3):
        step()
    records = Records(sink)
    (rec,) = records.of("autoprof.window")
    assert rec["event_count"] > 0 and "aten::matmul" in {op["name"] for op in rec["top_ops"]}
    assert 0 <= rec["stall_stop_ms"] <= rec["stall_ms"] <= rec["autoprof_overhead_ms"]
    # the read of the raw events is timed apart, and within what autoprof spent on the window
    assert 0 < rec["read_ms"] <= rec["autoprof_overhead_ms"]
    if background:  # the read is not the close's: it can outlast the stall only because it is not part of it
        assert rec["read_ms"] + rec["stall_ms"] <= rec["autoprof_overhead_ms"] + 0.002
    else:  # on the calling thread the whole analysis is the close's: what the training thread paid
        assert rec["stall_ms"] == rec["autoprof_overhead_ms"] >= rec["stall_stop_ms"] + rec["read_ms"]
    ((ident, name, priority),) = seen
    assert (ident == threading.get_ident()) is not background, "the events were read on the wrong thread"
    # never on the analysis thread's lowest priority: the read holds the GIL, and the training thread waits for it
    assert priority == _priority() and (name == "autoprof-read") is background


class _Broken:
    def events(self) -> list[Any]:
        raise RuntimeError("kineto lost the window")


def test_a_read_that_fails_is_one_profiler_error_and_the_step_returns(records: Records, monkeypatch: pytest.MonkeyPatch) -> None:
    real = window._read_events

    def broken(job: Any) -> Any:
        job.results = _Broken()
        return real(job)

    monkeypatch.setattr(window, "_read_events", broken)
    step = autoprof.autoprof(name="broken", skip_first=0, wait=0, warmup=1, active=1)(_step)
    results = [step() for _ in range(2)]
    assert all(r.shape == (8, 8) for r in results)
    (err,) = records.of("autoprof.error")
    assert err["reason"] == "profiler" and err["error_type"] == "RuntimeError"
    assert err["message"] == "reading the window failed: kineto lost the window" and err["target"] == "broken"
    assert records.of("autoprof.window") == []


def test_a_stop_that_fails_is_one_profiler_error_and_no_profiler_is_left_recording(
    records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch.autograd import profiler as ap

    from autoprof.live import session

    real, failed = session._stop, []

    def stop_once(prof: Any) -> None:
        if not failed:
            failed.append(prof)
            raise RuntimeError("kineto refused to stop")
        real(prof)  # the heal after the failure stops it

    monkeypatch.setattr(session, "_stop", stop_once)
    step = autoprof.autoprof(name="unstoppable", skip_first=0, wait=0, warmup=1, active=1)(_step)
    results = [step() for _ in range(3)]
    assert all(r.shape == (8, 8) for r in results) and failed
    (err,) = records.of("autoprof.error")
    assert err["reason"] == "profiler" and err["error_type"] == "RuntimeError" and err["target"] == "unstoppable"
    assert err["message"] == "profiler stop failed: kineto refused to stop" and err["window"] == 0
    assert not ap._is_profiler_enabled and records.of("autoprof.window") == []


@pytest.mark.parametrize("background", [True, False])
def test_a_closed_windows_results_are_freed_when_its_record_is_written_not_at_the_next_gc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    # torch.profiler.profile is in a reference cycle (its action map holds its bound methods): without a release,
    # each window's kineto results lived on until the cyclic GC's next full pass
    import gc
    import weakref

    from torch.profiler import profile

    stopped: list[weakref.ref[Any]] = []
    real = profile.stop_trace

    def stop_trace(self: Any) -> None:
        real(self)
        stopped.append(weakref.ref(self.profiler))

    monkeypatch.setattr(profile, "stop_trace", stop_trace)
    autoprof.configure(sink=str(tmp_path / "r.jsonl"), background=background)
    step = autoprof.autoprof(name="freed", skip_first=0, wait=0, warmup=1, active=2, repeat=2)(_step)
    gc.disable()
    try:
        for _ in range(6):
            step()
        autoprof.flush()
        assert len(stopped) == 2 and len(Records(tmp_path / "r.jsonl").of("autoprof.window")) == 2
        assert [ref() is None for ref in stopped] == [True, True], "a window's results outlived its record"
    finally:
        gc.enable()
