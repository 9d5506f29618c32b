"""autoprof._guard on the live side: the places of the decorator, the session and the live window converted to it
still do what they did (one record, a fallback, an interrupt that goes through), now counting what they swallow.
Apart from tests/test_guard.py because these import torch (that file's tests are marked offline)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoprof import _guard


@pytest.fixture(autouse=True)
def _fresh_counts() -> Iterator[None]:
    _guard._reset_for_tests()
    yield
    _guard._reset_for_tests()


def _boom() -> None:
    raise ValueError("boom")


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_the_live_probes_fall_back_and_count_their_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import torch.autograd.profiler as ap

    from autoprof.live import instrument, session

    instrument._close_rf(ap.record_function("never_entered"))  # nothing to exit: skipped
    prof = type("Prof", (), {"_autoprof_thread": __import__("threading").get_ident()})()
    monkeypatch.setattr(torch._C._autograd, "_profiler_enabled", _boom)
    assert session._stopped_in_torch(prof) is False  # cannot say: not known to be stopped
    monkeypatch.setattr(session, "_DEVICES", None)
    monkeypatch.setattr(torch.cuda, "device_count", _boom)
    assert session.device_properties() == []
    assert _guard.swallowed() == {"live.annotation_exit": 1, "live.profiler_enabled": 1, "live.device_properties": 1}


def test_a_nested_calls_annotation_that_cannot_be_entered_is_one_record_and_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoprof.live import instrument

    errors: list[str] = []
    monkeypatch.setattr(instrument, "_internal_error", lambda where, target, e: errors.append(f"{where} {target}: {e}"))
    monkeypatch.setattr(instrument, "_record_function", lambda name: _boom())
    monkeypatch.setattr(instrument, "SECTIONS_SEEN", set())  # the process' own names stay as they were
    assert instrument._annotation("nested") is None and instrument._section("a_section") is None
    assert errors == ["annotate nested: boom", "section enter a_section: boom"] and _guard.swallowed() == {}


# -- config, the engine, the live window, the GPU database: converted after the others ---------------------------


def _closed(**fields: Any) -> Any:
    from autoprof.config import Config
    from autoprof.live import window

    given: dict[str, Any] = {
        "target": "train",
        "window": 2,
        "framework": None,
        "config": Config(),
        "steps": [0],
        "walls": [1000],
        "calls": 1,
        "first_call_ns": None,
        "steady_ns": None,
        "stall_ns": 0,
        "stop_ns": 0,
        "cpu_peaks": None,
        "devices": [],
        "sections": [],
        "prof": None,
        "events": None,
    }
    return window.ClosedWindow(**{**given, **fields})


@pytest.fixture()
def errors(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    from autoprof.render import emit

    said: list[tuple[Any, ...]] = []
    monkeypatch.setattr(emit, "error", lambda message, reason, exc=None, **ctx: said.append((message, reason, type(exc).__name__, ctx)))
    return said


def test_a_window_whose_analysis_fails_is_one_error_record_and_an_interrupt_is_said_and_raised(
    monkeypatch: pytest.MonkeyPatch, errors: list[tuple[Any, ...]]
) -> None:
    from autoprof.live import window

    def fails(job: Any, rank: int, world: int) -> Any:
        raise ValueError("no steps")

    def unreadable(job: Any, rank: int, world: int) -> Any:
        raise window._ReadError(OSError("kineto gone")) from OSError("kineto gone")

    ctx = {"target": "train", "window": 2}
    for analyze, said in (
        (fails, ("window analysis failed: no steps", "analysis", "ValueError", ctx)),
        (unreadable, ("reading the window failed: kineto gone", "profiler", "OSError", ctx)),
        (
            lambda job, rank, world: _interrupt(),
            ("window analysis interrupted: the window is dropped", "interrupted", "KeyboardInterrupt", ctx),
        ),
    ):
        monkeypatch.setattr(window, "_analyze", analyze)
        job = _closed()
        if said[1] == "interrupted":
            with pytest.raises(KeyboardInterrupt):
                window.run(job)
        else:
            window.run(job)
        assert errors.pop() == said and errors == []
        assert job.go.is_set()  # the finally still ran
    assert _guard.swallowed() == {}


def test_a_trace_that_cannot_be_kept_is_one_error_record_and_no_path(tmp_path: Path, errors: list[tuple[Any, ...]]) -> None:
    from autoprof.config import Config
    from autoprof.live import window

    class Prof:
        def export_chrome_trace(self, path: str) -> None:
            raise OSError("disk full")

    job = _closed(config=Config(trace_dir=str(tmp_path)), prof=Prof())
    assert window._keep_trace(job, 0) is None
    assert errors == [(f"could not keep the trace in {tmp_path}: disk full", "trace_dir", "OSError", {"target": "train", "window": 2})]
    assert _guard.swallowed() == {}


def test_the_reader_thread_hands_what_it_caught_to_the_job_even_an_interrupt() -> None:
    from autoprof.live import window

    class Results:
        def __init__(self, error: BaseException) -> None:
            self.error = error

        def events(self) -> Any:
            raise self.error

    reader = window.Reader()
    cause = OSError("kineto gone")
    for error, expected in ((cause, cause), (KeyboardInterrupt(), None)):
        job = _closed(results=Results(error))
        reader.submit(job)
        job.go.set()
        assert job.read.wait(60)  # an event, not a clock: the reader sets it once it is done with the job
        assert job.events is None
        assert job.read_error is (expected if expected is not None else error)
    assert reader.alive() and _guard.swallowed() == {}
