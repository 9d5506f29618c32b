"""The fault matrix (issue 14), one test per case: crafted traces, non-regular files, Ctrl-C inside autoprof,
a user's profiler started second, bad options, planted links in trace_dir, threads, stalled sinks, recursion."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO
from test_cli import cli

import autoprof
from autoprof import config
from autoprof.live import calibrate, instrument, session
from autoprof.live.session import SESSION

FAST = dict(skip_first=0, wait=0, warmup=1, active=2)


def _one_op_trace(**doc: Any) -> dict[str, Any]:
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 5, "pid": 1, "tid": 1}
    return {"traceEvents": [ev], **doc}


def _good(tmp_path: Path) -> Path:
    p = tmp_path / "good.json"
    p.write_text(json.dumps(_one_op_trace()))
    return p


# -- 1. crafted traces: every value read from a trace is untrusted ---------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {
            "traceEvents": [
                {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000, "ts": 1, "dur": 50, "pid": 1, "tid": 1},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 2, "dur": 5, "pid": 1, "tid": 1},
            ]
        },
        _one_op_trace(distributedInfo={"rank": "²", "world_size": 2}),
        _one_op_trace(distributedInfo={"rank": "9" * 5000, "world_size": "7" * 5000}),
        _one_op_trace(distributedInfo={"rank": 10**40, "world_size": -3}),
        {
            "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: " + "1" * 5000 + "/0", "ts": 1, "dur": 5, "pid": 1, "tid": 1}
            ]
        },
        {
            "traceEvents": [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "ts": 1,
                    "dur": 5,
                    "pid": 0,
                    "tid": 7,
                    "args": {"device": "²", "stream": "9" * 5000, "correlation": "٣"},
                }
            ]
        },
    ],
    ids=["step-digits", "rank-superscript", "rank-5000-digits", "rank-huge-int", "region-digits", "device-args"],
)
def test_crafted_values_never_crash_and_good_files_are_still_analyzed(tmp_path: Path, doc: dict[str, Any]) -> None:
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(doc))
    good = _good(tmp_path)
    out = cli("analyze", "--json", str(crafted), str(good))
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode in (0, 2), out.stderr
    sources = {json.loads(x)["source"] for x in out.stdout.splitlines()}
    assert str(good) in sources  # the good file given in the same run is analyzed
    if out.returncode == 2:  # refused: one line naming the file
        lines = [x for x in out.stderr.splitlines() if x.startswith("autoprof:")]
        assert len(lines) == 1 and str(crafted) in lines[0]


def test_untrusted_ranks_fall_back_to_defaults() -> None:
    from autoprof.trace import chrome

    t = chrome.from_document(_one_op_trace(distributedInfo={"rank": "²", "world_size": "9" * 5000}))
    assert (t.rank, t.world_size) == (0, 1)
    t = chrome.from_document(_one_op_trace(distributedInfo={"rank": "3", "world_size": 8}))
    assert (t.rank, t.world_size) == (3, 8)


def test_a_path_longer_than_the_name_limit_is_one_line(tmp_path: Path) -> None:
    good = _good(tmp_path)
    long = str(tmp_path / ("a" * 300 + ".json"))
    out = cli("analyze", long, str(good))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "File name too long" in out.stderr
    assert str(good) in out.stdout


def _without_root_file_powers() -> None:
    """In the child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the capability bounding set,
    so that root, too, meets file permissions in the program it then runs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_unreadable_entries_are_reported_per_file(tmp_path: Path) -> None:
    """A directory the user cannot enter or list: one line for what cannot be read, the rest analyzed. As root
    (who may enter anything), the CLI runs without root's file-permission powers."""
    root = tmp_path / "runs"
    (root / "locked").mkdir(parents=True)
    (root / "open").mkdir()
    (root / "open" / "r0.json").write_text(json.dumps(_one_op_trace()))
    (root / "locked" / "r1.json").write_text(json.dumps(_one_op_trace()))
    (root / "noexec").mkdir()
    (root / "noexec" / "r2.json").write_text(json.dumps(_one_op_trace()))
    os.chmod(root / "locked", 0)
    os.chmod(root / "noexec", stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # listable, not enterable
    inside = root / "noexec" / "r2.json"
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
        env["PYTHONPATH"] = str(REPO)
        as_user: dict[str, Any] = {"preexec_fn": _without_root_file_powers} if os.geteuid() == 0 else {}
        cmd = [sys.executable, "-m", "autoprof", "analyze", "--json", str(root), str(inside)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, **as_user)
    finally:
        os.chmod(root / "locked", 0o755)
        os.chmod(root / "noexec", 0o755)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("autoprof:")]
    assert any("locked" in x and "Permission denied" in x for x in lines), lines
    assert any(str(inside) in x and "Permission denied" in x for x in lines), lines
    assert {json.loads(x)["source"] for x in out.stdout.splitlines()} == {str(root / "open" / "r0.json")}


# -- 2. anything that is not a regular file is refused before it is read --------------------------------------


def test_a_fifo_named_like_a_trace_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    good = _good(tmp_path)
    t0 = time.monotonic()
    out = cli("analyze", str(fifo), str(good), timeout=60)
    assert time.monotonic() - t0 < 30
    assert out.returncode == 2
    assert f"autoprof: {fifo}: not a regular file (a FIFO): refused" in out.stderr
    assert str(good) in out.stdout
    out = cli("analyze", str(tmp_path), timeout=60)  # the same inside a directory
    assert out.returncode == 2 and "not a regular file (a FIFO)" in out.stderr
    assert "good.json" in out.stdout


def test_a_character_device_is_refused() -> None:
    out = cli("analyze", "/dev/null", timeout=60)
    assert out.returncode == 2 and "not a regular file (a character device)" in out.stderr


# -- 3. Ctrl-C inside autoprof leaves it consistent, and the user's KeyboardInterrupt propagates ---------------


def test_ctrl_c_while_a_window_opens_does_not_disable_autoprof(records: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    real = calibrate.cpu_peaks
    hits = {"n": 0}

    def interrupted_calibration(*args: Any) -> Any:
        hits["n"] += 1
        if hits["n"] == 1:
            raise KeyboardInterrupt  # a SIGINT landing in the ~100 ms calibration
        return real(*args)

    monkeypatch.setattr(calibrate, "cpu_peaks", interrupted_calibration)

    @autoprof(name="interrupted", **FAST)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    with pytest.raises(KeyboardInterrupt):
        f(torch.ones(2))
    assert instrument._tls.d == 0
    assert SESSION.window is None and not torch.autograd.profiler._is_profiler_enabled
    for _ in range(4):
        assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))
    wins = records.of("autoprof.window", target="interrupted")
    assert len(wins) == 1 and len(wins[0]["steps"]) == 2


def test_ctrl_c_in_the_users_function_propagates_and_its_window_is_recorded_again(records: Any) -> None:
    calls = {"n": 0}

    @autoprof(name="user_ctrl_c", **FAST)
    def f(x: int) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return x

    assert f(1) == 1
    with pytest.raises(KeyboardInterrupt):
        f(2)  # the window's first active step: the window is cut (a step that raised is no step of a window)
    assert SESSION.window is None and not torch.autograd.profiler._is_profiler_enabled
    assert f(3) == 3 and f(4) == 4 and f(5) == 5  # its cycle again: warmup, then two active steps
    assert instrument._tls.d == 0
    assert SESSION.window is None and not torch.autograd.profiler._is_profiler_enabled
    (window,) = records.of("autoprof.window", target="user_ctrl_c")
    assert window["steps"] == [3, 4]  # 0-based call indices: never the call that raised (1)
    (cut,) = records.of("autoprof.warning", reason="window_incomplete")
    assert "a step raised" in cut["message"]


# -- 4. a user's profiler started while autoprof records wins ----------------------------------------------------


@pytest.mark.parametrize("where", ["inside_a_step", "between_steps"])
def test_a_users_profiler_started_second_keeps_its_events(records: Any, where: str) -> None:
    @autoprof(name="yielding", skip_first=0, wait=0, warmup=1, active=3)
    def f(x: torch.Tensor, nested_profile: bool = False) -> torch.Tensor:
        if nested_profile:
            with torch.profiler.profile() as p:
                x.mul(3)
            holder.append(p)
        return x.mul(2)

    holder: list[Any] = []
    f(torch.ones(3))
    f(torch.ones(3))  # the window records (first active step)
    assert torch.autograd.profiler._is_profiler_enabled
    if where == "inside_a_step":
        f(torch.ones(3), nested_profile=True)
        user = holder[0]
        expect = {"aten::mul": 1}
    else:
        with torch.profiler.profile() as user:
            for _ in range(4):
                f(torch.ones(3))
        expect = {"aten::mul": 4, "yielding": 4}
    names = [e.name() for e in user.profiler.kineto_results.events()]
    for name, n in expect.items():
        assert names.count(name) == n, (name, names)
    warns = records.of("autoprof.warning", target="yielding")
    assert len(warns) == 1 and warns[0]["reason"] == "foreign_profiler" and "dropped its window" in warns[0]["message"]
    assert records.of("autoprof.window", target="yielding") == []
    assert not torch.autograd.profiler._is_profiler_enabled
    for _ in range(4):  # the cycle is recorded again, whole, once the user's profiler is done
        f(torch.ones(3))
    wins = records.of("autoprof.window", target="yielding")
    assert len(wins) == 1 and len(wins[0]["steps"]) == 3
    assert len(records.of("autoprof.warning", target="yielding")) == 1


# -- 5. every option is validated ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"top_ops": "ten"},
        {"top_ops": -5},
        {"top_ops": True},
        {"record_shapes": "false"},
        {"background": "false"},
        {"enabled": 1},
        {"logger": 42},
        {"logger": "root"},
        {"peaks": {"flops_per_s": float("inf"), "bytes_per_s": 1.0}},
        {"peaks": {"flops_per_s": True, "bytes_per_s": 1.0}},
        {"peaks": {"flops_per_s": 1e12}},
        {"peaks": {"flops_per_s": float("nan"), "bytes_per_s": 1.0}},
        {"cross_rank_timeout_s": float("nan")},
        {"cross_rank_timeout_s": float("inf")},
        {"cross_rank_timeout_s": -1},
        {"active": 10**100},
        {"wait": 10**100},
        {"repeat": -1},
        {"sink": ""},
        {"trace_dir": 3},
        {"ranks": [-1]},
        {"ranks": ["0"]},
    ],
    ids=repr,
)
def test_configure_rejects_every_bad_value_with_one_line(options: dict[str, Any]) -> None:
    before = config.SWITCH.config
    with pytest.raises(autoprof.ConfigError) as e:
        autoprof.configure(**options)
    assert "\n" not in str(e.value) and next(iter(options)) in str(e.value) and len(str(e.value)) < 300
    assert config.SWITCH.config is before


def test_configure_accepts_good_values() -> None:
    import logging

    import structlog

    autoprof.configure(
        top_ops=0,
        record_shapes=False,
        background=False,
        logger=logging.getLogger("x"),
        peaks={"flops_per_s": 1e12, "bytes_per_s": 1e11},
        cross_rank_timeout_s=0.5,
        active=1000,
    )
    autoprof.configure(logger=structlog.get_logger())
    assert config.SWITCH.config.active == 1000


def test_env_values_past_the_bounds_warn_and_keep_the_default() -> None:
    config._warned.clear()
    with pytest.warns(RuntimeWarning, match="AUTOPROF_CROSS_RANK_TIMEOUT"):
        cfg = config.from_env({"AUTOPROF_CROSS_RANK_TIMEOUT": "inf"})
    assert cfg.cross_rank_timeout_s == 30.0
    with pytest.warns(RuntimeWarning, match="AUTOPROF_ACTIVE"):
        cfg = config.from_env({"AUTOPROF_ACTIVE": "1" + "0" * 100})
    assert cfg.active == config.DEFAULT_ACTIVE


# -- 6. kept traces: no link followed, no name shared, nothing left behind --------------------------------------


def _run_one_window(name: str) -> None:
    @autoprof(name=name, **FAST)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    for _ in range(3):
        f(torch.ones(2))
    autoprof.flush()


def test_a_planted_link_in_trace_dir_is_never_followed(records: Any, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    d = tmp_path / "traces"
    d.mkdir()
    os.chmod(d, 0o1777)  # a shared, world-writable directory
    autoprof.configure(trace_dir=str(d))
    final = d / "planted.window0.rank0.pt.trace.json.gz"
    for link in (Path(str(final) + ".part"), Path(str(final) + ".tmp"), d / "window.json", final):
        link.symlink_to(victim)
    _run_one_window("planted")
    assert victim.read_text() == "precious"
    win = records.of("autoprof.window", target="planted")[0]
    assert win["trace_path"] == str(final)
    assert not final.is_symlink()
    with gzip.open(final, "rt") as f:
        assert "traceEvents" in json.load(f)
    leftovers = sorted(p.name for p in d.iterdir() if ".autoprof-" in p.name)
    assert leftovers == []


def test_a_full_disk_leaves_no_temporary_file(records: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import shutil

    from autoprof.live import _files

    def disk_full(*a: Any, **k: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.shutil, "copyfileobj", disk_full)
    d = tmp_path / "traces"
    autoprof.configure(trace_dir=str(d))
    _run_one_window("full")
    errs = records.of("autoprof.error", target="full")
    assert errs and errs[0]["reason"] == "trace_dir" and "No space left" in errs[0]["message"]
    assert list(d.iterdir()) == []
    assert records.of("autoprof.window", target="full")[0]["trace_path"] is None
    assert shutil is not None


def test_target_names_map_to_distinct_short_safe_file_names() -> None:
    from autoprof.live._files import safe_name

    names = [
        "../evil",
        "\u202eevil",
        "_evil",
        "evil",
        "a/b",
        "a_b",
        "a%2Fb",
        ".hidden",
        "%2Ehidden",
        "x" * 5000,
        "x" * 4999 + "y",
        "a~b",
        "a%7Eb",
        "",
        "train.<locals>.step",
    ]
    files = [safe_name(n) for n in names]
    assert len(set(files)) == len(files)
    for f in files:
        assert "/" not in f and not f.startswith(".") and f.isascii() and len(f) <= 120
    assert safe_name("MLP.forward") == "MLP.forward"


def test_long_target_names_still_keep_a_trace(records: Any, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path))
    _run_one_window("n" * 3000)
    path = records.of("autoprof.window")[0]["trace_path"]
    assert path and Path(path).exists()


# -- 7. nested calls are annotations on every thread ---------------------------------------------------------


def test_a_nested_call_in_another_thread_is_not_a_target(records: Any) -> None:
    @autoprof(name="inner", **FAST)
    def inner(x: int) -> int:
        return x + 1

    @autoprof(name="outer", **FAST)
    def outer(x: int) -> int:
        return inner(x)

    assert outer(1) == 2
    assert SESSION.targets["outer"].owner == threading.get_ident()  # this thread owns "outer"
    results: list[int] = []
    th = threading.Thread(target=lambda: results.extend(outer(i) for i in range(5)))
    th.start()
    th.join()
    assert results == [1, 2, 3, 4, 5]
    assert "inner" not in SESSION.targets
    assert records.of("autoprof.window", target="inner") == []


# -- 8. a sink that takes no data never blocks the program; recursion keeps half the limit ---------------------


def test_a_fifo_sink_nobody_reads_does_not_block(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    os.mkfifo(sink)
    code = (
        "import torch, autoprof\n"
        "@autoprof(skip_first=0, wait=0, warmup=1, active=2)\n"
        "def f(x): return x + 1\n"
        "for _ in range(6): f(torch.ones(2))\n"
        "print('returned')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO), AUTOPROF_LOG=str(sink), AUTOPROF_BACKGROUND="false")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    took = time.monotonic() - t0
    assert out.returncode == 0 and "returned" in out.stdout, out.stderr
    # one bounded wait (about 1 s), not a hang: a hang meets the 120 s timeout; the bound is loose because a loaded
    # machine took 30 s to start torch and run six steps (found running the README's test command beside busy work)
    assert took < 100, took
    notes = [x for x in out.stderr.splitlines() if x.startswith("autoprof:")]
    assert any("dropped while it takes no data" in x for x in notes), out.stderr
    assert any("could not be written" in x and "dropped" in x for x in notes), out.stderr


def test_decorating_keeps_half_of_the_recursion_limit() -> None:
    deepest = {"n": 0}

    @autoprof
    def down(k: int) -> int:
        deepest["n"] = k
        return down(k + 1)

    with pytest.raises(RecursionError):
        down(0)
    # one wrapper frame per call: at least 45% of the limit (the bare function reaches ~99%)
    assert deepest["n"] >= 0.45 * sys.getrecursionlimit(), deepest["n"]
    assert instrument._tls.d == 0


# -- the matrix, permanent: random interleavings of calls, exceptions, Ctrl-C, threads and profilers --------------

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ACTIONS = st.one_of(
    st.tuples(st.just("call"), st.sampled_from([None, "error", "ctrl-c"])),
    st.tuples(st.just("interrupt"), st.integers(1, 40)),
    st.tuples(st.just("thread"), st.integers(1, 4)),
    st.tuples(st.just("user_profile"), st.integers(0, 3)),
    st.tuples(st.just("nested"), st.integers(1, 3)),
)


_FIRED: list[int] = []  # interrupts fired per example (a check that the injection reaches autoprof at all)


class _Injector:
    """Raises KeyboardInterrupt at the N-th passage through any of autoprof's collaborators (before or after the
    call, so both 'nothing done yet' and 'state already changed' are hit), the way a SIGINT lands."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.count = 0
        self.fired = 0

    def hit(self) -> None:
        if self.at is None:
            return
        self.count += 1
        if self.count >= self.at:
            self.at = None
            self.fired += 1
            raise KeyboardInterrupt

    def wrap(self, fn: Any) -> Any:
        def injected(*args: Any, **kwargs: Any) -> Any:
            self.hit()
            out = fn(*args, **kwargs)
            self.hit()
            return out

        return injected


def _check_invariants(t: Any, heal: Any = None) -> None:
    assert instrument._tls.d == 0, "nesting depth left set"
    if t.current is not None or (SESSION.window is None and torch.autograd.profiler._is_profiler_enabled):
        # an interrupt landed as autoprof's own end-of-call was entered: the next call heals what it skipped
        assert heal is not None, "a step left in progress"
        heal()
    assert t.current is None, "a step left in progress after the next call"
    w = SESSION.window
    recording = torch.autograd.profiler._is_profiler_enabled
    if w is None:
        assert not recording, "a profiler left running with no window"
    else:
        assert w.target is t and w.started == recording and not w.dropped


@settings(
    max_examples=int(os.environ.get("AUTOPROF_FUZZ_EXAMPLES", "25")),  # 300 run once locally (see CHANGELOG)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=st.lists(_ACTIONS, min_size=1, max_size=12))
# drawn once under load (stop 59): the second interrupt cut a dropped window's stop before torch's; its profiler was
# healed only at the next window's open, and the next call was a wait step: left running with no window
@example(actions=[("call", None), ("call", None), ("interrupt", 15), ("interrupt", 2)])
def test_random_faults_keep_autoprof_consistent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actions: list[Any]) -> None:
    try:
        _chaos(tmp_path, monkeypatch, actions)
    finally:  # every example starts clean, even after a failing one
        SESSION.shutdown()
        instrument._tls.d = 0


def _chaos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actions: list[Any]) -> None:
    sink = tmp_path / f"r{time.monotonic_ns()}.jsonl"
    autoprof.configure(sink=str(sink), background=False)
    inj = _Injector()
    with monkeypatch.context() as m:
        m.setattr(instrument, "_record_function", inj.wrap(instrument._record_function))
        m.setattr(instrument, "_now", inj.wrap(instrument._now))
        m.setattr(calibrate, "cpu_peaks", inj.wrap(calibrate.cpu_peaks))
        for name in ("open", "start", "close", "drop"):
            m.setattr(session.Session, name, inj.wrap(getattr(session.Session, name)))
        # as a signal lands when a function is entered: autoprof's own call end and step end
        m.setattr(instrument._Instrument, "end", inj.wrap(instrument._Instrument.end))
        m.setattr(instrument._Step, "finish", inj.wrap(instrument._Step.finish))
        for name in ("prepare_trace", "start_trace", "stop_trace"):
            m.setattr(torch.profiler.profile, name, inj.wrap(getattr(torch.profiler.profile, name)))
        name = f"chaos{time.monotonic_ns()}"

        @autoprof(name="inner_" + name, skip_first=0, wait=0, warmup=1, active=1)
        def inner(x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @autoprof(name=name, skip_first=0, wait=1, warmup=1, active=2, repeat=0)
        def f(x: torch.Tensor, fail: str | None = None, nested: int = 0) -> torch.Tensor:
            for _ in range(nested):
                x = inner(x)
            if fail == "error":
                raise ValueError("user error")
            if fail == "ctrl-c":
                raise KeyboardInterrupt
            return x + 1

        f(torch.ones(2))
        t = SESSION.targets[name]
        for kind, arg in actions:
            try:
                if kind == "call":
                    f(torch.ones(2), fail=arg)
                elif kind == "interrupt":
                    inj.at, inj.count = arg, 0
                    for _ in range(4):
                        f(torch.ones(2))
                elif kind == "nested":
                    assert torch.equal(f(torch.ones(2), nested=arg), torch.full((2,), 2.0**arg + 1))
                elif kind == "thread":
                    th = threading.Thread(target=lambda n=arg: [f(torch.ones(2), nested=1) for _ in range(n)])
                    th.start()
                    th.join()
                else:
                    inj.at = None  # a user's profiler is the user's code: no injection inside it
                    with torch.profiler.profile() as user:
                        for _ in range(arg):
                            f(torch.ones(2))
                        torch.ones(2).mul(3)
                    assert [e.name() for e in user.profiler.kineto_results.events()].count("aten::mul") == 1
            except (KeyboardInterrupt, ValueError):
                pass
            inj.at = None
            _check_invariants(t, lambda: f(torch.ones(2)))
        assert "inner_" + name not in SESSION.targets or SESSION.targets["inner_" + name].owner == t.owner
        before = sink.read_text().count('"autoprof.window"') if sink.exists() else 0
        for _ in range(12):  # windows are still recorded
            f(torch.ones(2))
        _check_invariants(t)
    autoprof.flush()
    text = sink.read_text()
    after = text.count('"autoprof.window"')
    _FIRED.append(inj.fired)
    if '"window_given_up"' in text:  # its window was cut 3 times in a row by a step that raised: given up, said once
        assert t.done and after == before and text.count('"window_given_up"') == 1, (before, after, actions)
    else:
        assert after >= before + 2, (before, after, actions)


def test_real_sigints_at_random_moments_leave_autoprof_working(tmp_path: Path) -> None:
    """The fault as a user meets it: SIGINTs from outside, every few ms, landing anywhere inside the decorated call
    (autoprof's own bookkeeping included) of a loop that catches them and goes on."""
    import signal

    sink = tmp_path / "records.jsonl"
    code = (
        "import sys, time, torch, autoprof\n"
        "import torch.autograd.profiler as ap\n"
        "from autoprof.live import instrument\n"
        "@autoprof(skip_first=0, wait=0, warmup=1, active=2, repeat=0)\n"
        "def f(x):\n"
        "    with autoprof.section('s'):\n"
        "        return x @ x\n"
        "x = torch.ones(32, 32)\n"
        "import signal\n"
        "armed = False\n"
        "def on_sigint(signum, frame):  # Python's own behaviour, but only inside the decorated call, once per call:\n"
        "    global armed                # a second one while the first unwinds would land in the harness's own\n"
        "    if armed:                   # except clause (seen on Python 3.10), which is not autoprof's to survive\n"
        "        armed = False\n"
        "        raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGINT, on_sigint)\n"
        "print('ready', flush=True)\n"
        "interrupts, t0 = 0, time.time()\n"
        "while time.time() - t0 < 3:\n"
        "    try:\n"
        "        armed = True\n"
        "        f(x)\n"
        "    except KeyboardInterrupt:\n"
        "        interrupts += 1\n"
        "    finally:\n"
        "        armed = False\n"
        "sys.stdin.readline()  # the storm is over\n"
        "def windows():\n"
        "    autoprof.flush()\n"
        "    try:\n"
        "        return open(sys.argv[1]).read().count('\"autoprof.window\"')\n"
        "    except FileNotFoundError:\n"
        "        return 0\n"
        "from autoprof.live.session import SESSION\n"
        "before, skipped = windows(), SESSION.skipped_total\n"
        "for _ in range(30):\n"
        "    f(x)\n"
        "autoprof.flush()\n"
        "print('interrupts', interrupts, 'depth', instrument._tls.d, 'recording', ap._is_profiler_enabled,\n"
        "      'new_windows', windows() - before + SESSION.skipped_total - skipped, flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO), AUTOPROF_LOG=str(sink))  # the default: analysis in the background
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(sink)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    import random

    rng = random.Random(7)
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.002, 0.02))
        p.send_signal(signal.SIGINT)
    time.sleep(0.7)  # past the child's 3 s loop: no more signals
    out, err = p.communicate("\n", timeout=120)
    assert p.returncode == 0, err[-2000:]
    words = out.split()
    got = {words[i]: words[i + 1] for i in range(0, len(words) - 1, 2)}
    # the storm reached the loop: signals that come while autoprof holds them (its profiler calls, each timed run of
    # the CPU calibration: long on a loaded machine) are one interrupt when that call returns, as Python's own pending
    # signals are, so the count depends on the machine's load (19-22 under a load of 8 on 2 cores, 80-90 before the
    # calibration held its runs, when every one of them was interrupted and the calibration never advanced)
    assert int(got["interrupts"]) >= 5, out
    assert got["depth"] == "0" and got["recording"] in ("False", "True"), out
    # 30 calls after the storm: a window every 3 calls (warmup + 2 recorded), so 9 or 10 new windows, each written
    # or, while the paced analysis is 4 windows behind, skipped and counted (a skipped cycle is 2 calls: up to 15)
    assert int(got["new_windows"]) >= 9, out


# -- Ctrl-C between torch's own profiler calls (issue 45, item 1) ------------------------------------------------------

#: torch's profiler is Python code around C++ calls: each of these is called by name from that code, and a Ctrl-C that
#: lands right after one returns tears what torch does around it (the start stamped or not, the module's flag set or
#: not). autoprof's own profiler calls hold signals until the change is whole.
_TORN_AT = ("_prepare_profiler", "_run_on_profiler_start", "_enable_profiler", "_disable_profiler", "_run_on_profiler_stop")
#: What torch and kineto print when a profiler is stopped twice or left half-started (before the fix, then exit -11).
_TORCH_PROFILER_LINES = (
    "Requested callback is not found",
    "disableProfiler called but no active profiling session found",
    "Profiler is already enabled",
    "Leaked callback handle",
)

_TORN_SCRIPT = """
import json, signal, sys
import torch, autoprof
import torch.autograd.profiler as ap
from autoprof.live.session import SESSION

schedule, points = json.loads(sys.argv[1]), sys.argv[2].split(",")

@autoprof(name="storm", **schedule)
def step(x):
    return x @ x

def windows():
    autoprof.flush()
    try:
        return open(sys.argv[3]).read().count('"autoprof.window"') + SESSION.skipped_total
    except FileNotFoundError:
        return SESSION.skipped_total

def torn():  # what autoprof holds and what torch says (its Python flag and its C++ state) must agree
    window = SESSION.window
    running = window is not None and window.started
    return [running, bool(ap._is_profiler_enabled), bool(torch._C._autograd._profiler_enabled())]

x = torch.ones(8, 8)
for _ in range(4):
    step(x)  # a first window: the calibration done, autoprof's guards in place
interrupts, bad = 0, []
for point in points:
    orig, calls = getattr(ap, point), [0]
    def hooked(*args, _orig=orig, _calls=calls, **kwargs):
        out = _orig(*args, **kwargs)
        _calls[0] += 1
        if _calls[0] <= 3:
            signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, the moment torch's call returned
        return out
    setattr(ap, point, hooked)
    try:
        for _ in range(20):
            autoprof.flush()  # no window skipped because the analysis is behind: each opens and closes
            try:
                step(x)
            except KeyboardInterrupt:
                interrupts += 1
            state = torn()
            if len(set(state)) != 1:
                bad.append([point, state])
    finally:
        setattr(ap, point, orig)
before = windows()
for _ in range(12):
    step(x)
after = windows()
print(json.dumps({"interrupts": interrupts, "bad": bad, "new_windows": after - before, "end": torn()}), flush=True)
"""


@pytest.mark.parametrize(
    "schedule",
    [dict(skip_first=0, wait=0, warmup=0, active=1, repeat=0), dict(skip_first=0, wait=0, warmup=1, active=2, repeat=0)],
    ids=["one-step-windows", "warmup-and-two"],
)
def test_a_ctrl_c_right_after_each_of_torchs_profiler_calls_leaves_autoprof_and_torch_agreeing(
    tmp_path: Path, schedule: dict[str, int]
) -> None:
    """A real SIGINT raised the moment each of torch's profiler calls returns, inside autoprof's prepare, start and stop.
    Before the fix: the profiler left enabled with no window (then a ``foreign_profiler`` warning with no profiler of
    the user's, and exit -11 at exit), or stopped twice (kineto's "disableProfiler called but no active profiling
    session found"), and no window recorded after."""
    sink = tmp_path / "records.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO), AUTOPROF_LOG=str(sink))
    p = subprocess.run(
        [sys.executable, "-c", _TORN_SCRIPT, json.dumps(schedule), ",".join(_TORN_AT), str(sink)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["interrupts"] == 3 * len(_TORN_AT), got  # each Ctrl-C reached the loop, none was lost
    assert got["bad"] == [], got  # [autoprof's window records, torch's flag, torch's C++ state] after each call
    assert len(set(got["end"])) == 1, got
    assert got["new_windows"] >= 12 // (schedule["warmup"] + schedule["active"]) - 1, got
    records = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()]
    assert not [r for r in records if r.get("reason") in ("foreign_profiler", "foreign_profiler_thread")], records
    for line in _TORCH_PROFILER_LINES:
        assert line not in p.stderr, p.stderr[-3000:]


_STORM_SCRIPT = """
import json, os, random, signal, sys, threading, time
import torch, autoprof
import torch.autograd.profiler as ap

mode, seed = sys.argv[1], int(sys.argv[2])
if mode == "one-step":
    options = dict(skip_first=0, wait=0, warmup=0, active=1, repeat=0)
else:  # the trigger, on a run that slows down every third step
    options = dict(trigger=True, trigger_min_steps=10, trigger_interval=1, trigger_budget=0.5, trigger_floor_ms=0.5)
calls = [0]

@autoprof(name="storm", **options)
def step(x):
    calls[0] += 1
    if mode == "trigger" and calls[0] > 40 and calls[0] % 3 == 0:
        time.sleep(0.002)
    return x @ x

LOOP, armed, over = None, False, False
def on_sigint(signum, frame):  # Python's own KeyboardInterrupt, anywhere but in this harness's loop itself
    if armed and not over and (frame is None or frame.f_code is not LOOP):
        raise KeyboardInterrupt
signal.signal(signal.SIGINT, on_sigint)

def ctrl_c_held_down():
    global over
    rng = random.Random(seed)
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.002, 0.010))
        os.kill(os.getpid(), signal.SIGINT)
    over = True

def loop():
    global armed
    interrupts = 0
    threading.Thread(target=ctrl_c_held_down).start()
    armed = True
    while not over:
        try:
            autoprof.flush()  # each window opens and closes: none skipped because the analysis is behind
            step(x)
        except KeyboardInterrupt:
            interrupts += 1
    return interrupts

x = torch.ones(16, 16)
LOOP = loop.__code__
interrupts = loop()
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the storm is over
for _ in range(10):
    step(x)
autoprof.flush()
from autoprof.live.session import SESSION
window = SESSION.window
print(json.dumps({
    "interrupts": interrupts,
    "autoprof": window is not None and window.started,
    "flag": bool(ap._is_profiler_enabled),
    "torch": bool(torch._C._autograd._profiler_enabled()),
}), flush=True)
"""


@pytest.mark.parametrize("mode", ["one-step", "trigger"])
def test_ctrl_c_held_down_never_crashes_nor_leaves_a_profiler_running(tmp_path: Path, mode: str) -> None:
    """The case as a user meets it: a real SIGINT every 2-10 ms for 1.5 s (a thread of the program sends them) into a
    loop that catches KeyboardInterrupt, on one-step windows or the trigger. Before the fix it ended in exit -11 (a
    profiler stopped twice), or with the profiler still enabled after ``flush()`` and a ``foreign_profiler`` warning
    with no profiler of the user's. A storm is random: the exact moments are held by the test above."""
    sink = tmp_path / "records.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO), AUTOPROF_LOG=str(sink))
    p = subprocess.run([sys.executable, "-c", _STORM_SCRIPT, mode, "7"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["interrupts"] >= 10, got
    # what autoprof holds and what torch says agree (a window may be recording at the end: the trigger's)
    assert got["autoprof"] == got["flag"] == got["torch"], got
    if mode == "one-step":  # each call closes its window: nothing records after flush()
        assert got == {**got, "autoprof": False, "flag": False, "torch": False}, got
    records = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()] if sink.exists() else []
    assert not [r for r in records if r.get("reason") in ("foreign_profiler", "foreign_profiler_thread")], records
    for line in _TORCH_PROFILER_LINES:
        assert line not in p.stderr, p.stderr[-3000:]


def test_a_stop_cut_after_torch_disabled_the_profiler_is_never_stopped_twice(tmp_path: Path) -> None:
    """Signals are held across autoprof's own profiler calls, but an exception from elsewhere (another thread's
    ``PyThreadState_SetAsyncExc``) can still cut a stop between torch's C++ disable and its Python stamps: the window
    then looks as if it still recorded. Dropping it asks torch's C++ side first and stops nothing twice (before: kineto's
    "disableProfiler called but no active profiling session found", the road to exit -11)."""
    code = (
        "import json, torch, autoprof\n"
        "import torch.autograd.profiler as ap\n"
        "from autoprof.live.session import SESSION\n"
        "@autoprof(name='t', skip_first=0, wait=0, warmup=0, active=3, repeat=1)\n"
        "def f(x, fail=False):\n"
        "    if fail:\n"
        "        raise KeyboardInterrupt\n"
        "    return x @ x\n"
        "x = torch.ones(4, 4)\n"
        "f(x)  # the window records\n"
        "torch.autograd._disable_profiler()  # torch's stop ran, the Python around it did not (cut)\n"
        "try:\n"
        "    f(x, fail=True)  # a step that raised: the window is cut, its profiler stopped if it runs\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
        "print(json.dumps([SESSION.window is None, ap._is_profiler_enabled, torch._C._autograd._profiler_enabled()]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(PYTHONPATH=str(REPO), AUTOPROF_LOG=str(tmp_path / "records.jsonl"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [True, False, False], p.stdout
    for line in _TORCH_PROFILER_LINES:
        assert line not in p.stderr, p.stderr[-3000:]
