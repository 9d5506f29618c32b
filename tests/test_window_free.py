"""A closed window's kineto results are freed as soon as its raw events are read, before the trace is built and
the rules run (issue 50, item 2): held until the job's end, they left the next window's ``stop_trace`` no freed
memory to reuse, and it faulted in fresh pages (~5,600 for a 6k-event window) whenever the analysis of the window
before was still running at that stop."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
import torch
import torch.autograd.profiler as torch_profiler

import autoprof
from autoprof.analysis import engine


@pytest.mark.parametrize("background", [False, True])
def test_the_results_are_freed_once_read_before_the_trace_is_built(records: Any, monkeypatch: Any, background: bool) -> None:
    autoprof.configure(background=background)
    results: list[weakref.ref[Any]] = []
    disable = torch_profiler._disable_profiler

    def disabled() -> Any:  # each stop's results, watched
        out = disable()
        results.append(weakref.ref(out))
        return out

    alive_at_build: list[bool] = []
    build = engine.window_trace

    def window_trace(*args: Any, **kwargs: Any) -> Any:
        alive_at_build.append(results[-1]() is not None)
        return build(*args, **kwargs)

    monkeypatch.setattr(torch_profiler, "_disable_profiler", disabled)
    monkeypatch.setattr(engine, "window_trace", window_trace)
    step = autoprof(name="freed", skip_first=0, wait=0, warmup=1, active=2, repeat=1)(lambda x: x * 2)
    for _ in range(5):
        step(torch.ones(8))
    autoprof.flush()
    assert len(results) == 1 and alive_at_build == [False]  # read, then freed: the build works on the Python copies
    assert [r["event"] for r in records.of("autoprof.window")] == ["autoprof.window"]  # and the window is whole
