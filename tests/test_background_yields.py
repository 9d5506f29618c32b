"""The background's work on a closed window (the read of its raw events, the analysis's slices) never runs while another
window closes: it took the GIL from that window's ``stop_trace`` (issue 50: the stop 15 % dearer than with the first
window's analysis over). Checked by what the background sees when it works, never by timing: the second window's stop
is made long here (it sleeps first, releasing the GIL), and the background must not work meanwhile."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import autoprof
from autoprof.analysis import engine
from autoprof.live import _pace, session, window


def _windows(sink: Path) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, sink.read_text().splitlines()) if r.get("event") in ("autoprof.window", "autoprof.warning")]


@pytest.mark.parametrize("read_ends_in_the_next_close", [False, True])
def test_the_background_does_not_work_while_a_window_closes(tmp_path: Path, monkeypatch: Any, read_ends_in_the_next_close: bool) -> None:
    """``read_ends_in_the_next_close``: the first window's read ends only once the second window's stop has begun (a
    race seen in CI, on torch 2.4.1: the analysis built the trace right after the read, in that stop)."""
    sink = tmp_path / "records.jsonl"
    autoprof.configure(sink=str(sink), background=True)
    stopping = {"now": False, "stops": 0}
    seen: list[tuple[str, bool]] = []  # (what the background did, whether a window's stop was in progress)
    real_stop, real_read, real_build, real_tick = session._stop, window._read_events, engine.window_trace, _pace.Pacer.tick

    def stop(prof: Any) -> None:
        stopping["stops"] += 1
        stopping["now"] = True
        try:
            if stopping["stops"] == 2:  # the second window's: long, the GIL free meanwhile
                time.sleep(0.4)
            real_stop(prof)
        finally:
            stopping["now"] = False

    def read(job: Any) -> Any:
        seen.append(("read", stopping["now"]))
        events = real_read(job)
        if read_ends_in_the_next_close and stopping["stops"] < 2:
            deadline = time.monotonic() + 30
            while not (stopping["stops"] == 2 and stopping["now"]) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert stopping["now"], "the second window's stop never began while the first window's read waited"
        return events

    def build(*args: Any, **kwargs: Any) -> Any:
        seen.append(("build", stopping["now"]))
        return real_build(*args, **kwargs)

    def tick(self: _pace.Pacer) -> None:
        real_tick(self)
        seen.append(("slice", stopping["now"]))  # a slice of the analysis begins here

    monkeypatch.setattr(session, "_stop", stop)
    monkeypatch.setattr(window, "_read_events", read)
    monkeypatch.setattr(engine, "window_trace", build)
    monkeypatch.setattr(_pace.Pacer, "tick", tick)
    x = torch.randn(32, 32)

    def body() -> None:
        for _ in range(300):  # a window of a few thousand raw events: its paced analysis outlasts the next window
            x.mul(1.0001)

    step = autoprof.autoprof(name="yields", skip_first=0, wait=0, warmup=0, active=1, repeat=2)(body)
    for _ in range(3):
        step()
    assert autoprof.flush(timeout=120)
    autoprof.configure(background=False)
    windows = [r for r in _windows(sink) if r["event"] == "autoprof.window"]
    assert len(windows) == 2 and stopping["stops"] == 2, _windows(sink)
    assert ("read", False) in seen and ("build", False) in seen and ("slice", False) in seen
    assert not [what for what, during in seen if during], seen  # nothing while a window's stop ran
