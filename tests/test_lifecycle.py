"""Never harm the training it watches (issue 31, items 2-5, 14, 15): however a run ends (it returns, stops early at
``max_steps``, raises), autoprof's profiler is off after it, its window is never mixed into the next run's, a failure in
one step never turns profiling off for later steps or other targets, a forked pool worker records, and a script that
ends before its first window is told so.

The trainers run for real, in this process (Lightning and the Hugging Face Trainer on tiny models, the CPU); the
property tests drive them with exceptions at random steps, random ``max_steps`` and repeated runs, and check after
each run: no profiler records, no autoprof window is held, the thread's depth is clean, RSS stays flat, the next run
records, and every window record holds the consecutive steps of one run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records, lightning_trainer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autoprof
from autoprof.live import instrument
from autoprof.live.instrument import Steps
from autoprof.live.session import SESSION, profiler_recording


def _work(n: int = 32) -> torch.Tensor:
    x = torch.randn(n, n)
    return torch.add(torch.matmul(x, x), 1.0)


def _quiet() -> None:
    """No profiler of autoprof's (or anyone's) records, none is held, and this thread is at depth 0."""
    assert not profiler_recording(), "a profiler still records after the run"
    assert SESSION.window is None, f"autoprof still holds a window of {SESSION.window.target.name}"
    assert SESSION._live is None
    assert getattr(instrument._tls, "d", 0) == 0, "the thread's depth was left set: later @autoprof calls are not steps"


def _whole_runs(windows: list[dict[str, Any]]) -> None:
    """Each window holds consecutive steps of one run (a window mixing runs reads like [3, 4, 0])."""
    for w in windows:
        steps = w["steps"]
        assert steps == list(range(steps[0], steps[0] + len(steps))), f"a window mixes steps: {w['steps']}"


# -- Steps, the driver of every integration ------------------------------------------------------------


def test_stop_ends_a_window_cut_short_and_the_next_run_records_whole(records: Records) -> None:
    steps = Steps("run.step", skip_first=0, wait=0, warmup=1, active=3)
    for k in range(3):  # warmup + 2 of 3 active steps: the run ends (max_steps) inside the window
        steps.begin(k)
        _work()
        steps.end()
    assert profiler_recording()
    steps.stop("max_steps reached")
    _quiet()
    (cut,) = records.of("autoprof.warning", reason="window_incomplete")
    assert cut["steps_recorded"] == 2 and cut["steps_needed"] == 3 and "max_steps reached" in cut["message"]
    assert not records.of("autoprof.window")
    steps.restart()  # a second run: the schedule starts over
    for k in range(4):
        steps.begin(k)
        _work()
        steps.end()
    (window,) = records.of("autoprof.window")
    assert window["steps"] == [1, 2, 3]  # the second run's own steps
    _quiet()


def test_a_step_that_raises_in_a_with_block_leaves_nothing_open(records: Records) -> None:
    steps = Steps("loop", skip_first=0, wait=0, warmup=1, active=2)
    with pytest.raises(ZeroDivisionError), steps.step(0):
        1 / 0  # noqa: B018
    _quiet()
    with pytest.raises(ValueError), steps.step(1):
        raise ValueError("in the window")
    _quiet()

    @autoprof.autoprof(name="later", skip_first=0, wait=0, warmup=0, active=1)
    def later() -> torch.Tensor:
        return _work()

    later()  # a later target in the thread is profiled
    assert [w["target"] for w in records.of("autoprof.window")] == ["later"]
    for k in range(2, 6):
        with steps.step(k):
            _work()
    assert [w["steps"] for w in records.of("autoprof.window", target="loop")] == [[3, 4]]


def test_a_driver_left_open_by_its_loop_is_stopped_when_another_loop_begins(records: Records) -> None:
    first = Steps("first", skip_first=0, wait=0, warmup=1, active=3)
    first.begin(0)
    first.end()
    first.begin(1)  # the loop raised here: no end(), no stop()
    _work()
    second = Steps("second", skip_first=0, wait=0, warmup=0, active=2)
    for k in range(2):
        second.begin(k)
        _work()
        second.end()
    assert [w["target"] for w in records.of("autoprof.window")] == ["second"]
    assert not first.in_step
    _quiet()


def test_end_from_another_thread_changes_nothing_and_says_so(records: Records, capfd: pytest.CaptureFixture[str]) -> None:
    steps = Steps("threaded", skip_first=0, wait=0, warmup=1, active=2)
    steps.begin(0)
    _work()
    steps.end()
    steps.begin(1)
    worker = threading.Thread(target=steps.end)
    worker.start()
    worker.join()
    assert steps.in_step  # refused: the step is the training thread's
    (said,) = records.of("autoprof.warning", reason="wrong_thread")
    assert "another thread" in said["message"]
    steps.end()
    steps.begin(2)
    steps.end()
    assert records.of("autoprof.window", target="threaded")[0]["steps"] == [1, 2]

    @autoprof.autoprof(name="after", skip_first=0, wait=0, warmup=0, active=1)
    def after() -> torch.Tensor:
        return _work()

    after()
    assert records.of("autoprof.window", target="after")
    assert "Leaked callback handle" not in capfd.readouterr().err
    _quiet()


def test_end_from_a_callback_thread_is_done_by_the_steps_thread_and_later_targets_record(
    records: Records, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 45: a trainer whose step-end callback fires off the training thread. Each ``end()`` from that thread is done
    by the training thread at its next call into autoprof (its next ``begin()``, an ``@autoprof`` call), with the step's
    time ending at the ``end()``. Before, the last step stayed open on the training thread for good: its later
    ``@autoprof`` function was an annotation inside it, never a step, and recorded no window."""
    steps = Steps("callback_thread", skip_first=0, wait=0, warmup=1, active=2)
    for i in range(4):
        steps.begin(i)
        _work()
        callback = threading.Thread(target=steps.end)  # the trainer's on_step_end, on its own thread
        callback.start()
        callback.join()
    assert [w["steps"] for w in records.of("autoprof.window", target="callback_thread")] == [[1, 2]]

    @autoprof.autoprof(name="after_callbacks", skip_first=0, wait=0, warmup=0, active=1)
    def after() -> torch.Tensor:
        return _work()

    for _ in range(3):
        after()
    assert records.of("autoprof.window", target="after_callbacks")  # before: none (still inside step 3)
    assert not steps.in_step
    (said,) = records.of("autoprof.warning", reason="wrong_thread")
    assert "ends it at its next call into autoprof" in said["message"]
    assert "Leaked callback handle" not in capfd.readouterr().err
    _quiet()


def test_stop_from_another_thread_is_done_by_the_steps_thread(records: Records) -> None:
    """A run's end heard on another thread (``stop()``) while the training thread is inside a step of its window: the
    training thread stops it at its next call into autoprof; nothing records after."""
    steps = Steps("stopped_elsewhere", skip_first=0, wait=0, warmup=1, active=3)
    for i in range(2):
        steps.begin(i)
        _work()
        steps.end()
    steps.begin(2)  # in the window
    stopper = threading.Thread(target=steps.stop)
    stopper.start()
    stopper.join()
    assert steps.in_step and SESSION.window is not None  # not done there: the window's profiler is this thread's

    @autoprof.autoprof(name="after_stop", skip_first=0, wait=0, warmup=0, active=1)
    def after() -> torch.Tensor:
        return _work()

    after()
    assert not steps.in_step
    assert records.of("autoprof.warning", reason="window_incomplete", target="stopped_elsewhere")
    assert records.of("autoprof.window", target="after_stop")
    _quiet()


def _script_records(tmp_path: Path, name: str, body: str) -> list[dict[str, Any]]:
    """Run ``body`` as a script of its own (``SINK``: the records' path, defined for it); its records, in order."""
    sink = tmp_path / "r.jsonl"
    script = tmp_path / f"{name}.py"
    script.write_text(f"SINK = {str(sink)!r}\n" + textwrap.dedent(body))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return [json.loads(line) for line in sink.read_text().splitlines()]


#: How ``main`` (the decorated call the pool is made in) stands when it forks: inside its skip_first (the child forks at
#: depth 1), or on its plain idle path (the parent's plain call is on the worker's stack, below the fork: it holds
#: nothing there; the plain path counts nothing a child could reset, the stack is looked up down to the frame that
#: forked).
_POOL_MAIN = {
    "skipped": ("skip_first=5", "main(POOL=True)"),
    "plain_idle": (
        "skip_first=0, wait=0, warmup=0, active=1",
        "main(); main()\n"
        "from autoprof.live.session import PLAIN, SESSION\n"
        "assert SESSION.targets['main'].idle and PLAIN.seen\n"
        "main(POOL=True)",
    ),
}


@pytest.mark.parametrize("how", sorted(_POOL_MAIN))
def test_a_forked_pool_worker_records_after_the_parent_recorded(tmp_path: Path, how: str) -> None:
    schedule, calls = _POOL_MAIN[how]
    recs = _script_records(
        tmp_path,
        "pool",
        textwrap.dedent(f"""
        import multiprocessing, os, torch, autoprof
        autoprof.configure(sink=SINK, background=False)

        @autoprof.autoprof(name="work", skip_first=0, wait=0, warmup=0, active=2)
        def work(i):
            x = torch.randn(16, 16)
            return float((x @ x).sum())

        @autoprof.autoprof(name="main", {schedule})
        def main(POOL=False):  # the pool is made inside a decorated call (not in a window)
            if POOL:
                with multiprocessing.get_context("fork").Pool(1) as pool:
                    pool.map(work, range(4))

        work(0); work(1)  # the parent records work's window: its schedule is over in the parent
        """)
        + calls
        + "\n",
    )
    windows = [r for r in recs if r["event"] == "autoprof.window"]
    pids = {w["pid"] for w in windows if w["target"] == "work"}
    assert len(pids) == 2, f"the pool worker recorded no window of its own: {windows}"


@pytest.mark.parametrize("how", ["process", "executor"])
def test_a_forked_multiprocessing_child_writes_its_window_its_trace_and_its_page(tmp_path: Path, how: str) -> None:
    """Issue 45: a training child made by ``multiprocessing.Process`` or a ``ProcessPoolExecutor`` under fork, with
    ``trace_dir`` and ``report=True``: the child leaves through ``os._exit`` (no ``atexit``), and its window queued for
    the background analysis was dropped without a word: no record, no trace, no page. multiprocessing's finalizers run
    before that exit: the child's drain is one of them."""
    traces = tmp_path / "traces"
    recs = _script_records(
        tmp_path,
        "child",
        f"""
        import concurrent.futures, multiprocessing, os, torch, autoprof
        autoprof.configure(sink=SINK, trace_dir={str(traces)!r}, report=True)  # the background analysis: the default

        @autoprof.autoprof(name="child_step", skip_first=0, wait=0, warmup=1, active=2)
        def step(x):
            return x @ x

        def train():
            x = torch.ones(16, 16)
            for _ in range(5):
                step(x)
            return os.getpid()

        ctx = multiprocessing.get_context("fork")
        if {how!r} == "process":
            p = ctx.Process(target=train)
            p.start()
            p.join()
            assert p.exitcode == 0
        else:
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
                pool.submit(train).result()
        """,
    )
    windows = [r for r in recs if r["event"] == "autoprof.window" and r["target"] == "child_step"]
    assert len(windows) == 1, recs  # before: none
    (child,) = {w["pid"] for w in windows}
    assert windows[0]["trace_path"] and os.path.exists(windows[0]["trace_path"])
    assert (traces / f"autoprof-report.rank0.pid{child}.html").exists(), sorted(os.listdir(traces))


def test_a_script_that_ends_before_its_first_window_is_told_so(tmp_path: Path) -> None:
    recs = _script_records(
        tmp_path,
        "short",
        """
        import torch, autoprof
        autoprof.configure(sink=SINK)

        @autoprof.autoprof(skip_first=1, wait=1, warmup=1, active=2)
        def step():
            return torch.randn(8, 8).sum()

        @autoprof.autoprof(name="other")
        def other():
            return 1

        for _ in range(4):
            step()
        """,
    )
    (said,) = [r for r in recs if r.get("reason") == "no_window"]  # "other" was never called: nothing to say
    assert said["target"] == "step" and said["calls"] == 4 and said["calls_needed"] == 5 and said["calls_deferred"] == 0
    assert "4 time(s)" in said["message"] and "5 calls" in said["message"] and "a shorter schedule fits" in said["message"]


def test_a_target_held_off_by_another_targets_window_is_not_told_its_run_was_short(tmp_path: Path) -> None:
    recs = _script_records(
        tmp_path,
        "held",
        """
        import torch, autoprof
        autoprof.configure(sink=SINK)
        x = torch.randn(8, 8)

        @autoprof.autoprof(name="a", skip_first=0, wait=0, warmup=1, active=2)
        def a():
            return x @ x

        @autoprof.autoprof(name="b", skip_first=0, wait=0, warmup=1, active=3)
        def b():
            return x + 1

        for _ in range(4):  # b's first 2 calls find a's window open; its last 2 start its own, which the exit cuts
            a(); b()
        """,
    )
    assert [r["target"] for r in recs if r["event"] == "autoprof.window"] == ["a"]
    (said,) = [r for r in recs if r.get("reason") == "no_window"]
    assert said["target"] == "b" and said["calls"] == 4 and said["calls_needed"] == 4 and said["calls_deferred"] == 2
    assert "2 of its calls found the profiler taken" in said["message"], said["message"]
    assert "shorter schedule" not in said["message"], said["message"]  # 4 calls were enough: a's window was the cause


def test_a_window_open_at_exit_is_said_to_be_cut(tmp_path: Path) -> None:
    sink = tmp_path / "r.jsonl"
    code = (
        f"import torch, autoprof\nautoprof.configure(sink={str(sink)!r})\n"
        "@autoprof.autoprof(skip_first=0, wait=0, warmup=0, active=5, repeat=2)\ndef s(): return torch.randn(8, 8).sum()\n"
        "s(); s(); s(); s(); s(); s(); s()\n"  # one whole window, then two steps of the next
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (cut,) = [json.loads(line) for line in sink.read_text().splitlines() if "window_incomplete" in line]
    assert cut["steps_recorded"] == 2 and "the process exited" in cut["message"]


def test_the_lightning_profiler_with_a_bad_option_is_one_clean_error() -> None:
    pytest.importorskip("lightning")
    code = (
        "import gc\nfrom autoprof.integrations.lightning import AutoprofProfiler\nfrom autoprof import ConfigError\n"
        "try:\n    AutoprofProfiler(active=0)\nexcept ConfigError as e:\n    print('ConfigError', e)\ngc.collect()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.startswith("ConfigError") and "active" in run.stdout
    assert "Exception ignored" not in run.stderr and "Traceback" not in run.stderr, run.stderr


# -- Lightning, for real --------------------------------------------------------------------------------

pl = pytest.importorskip("lightning.pytorch")
SCHEDULE = {"skip_first": 1, "wait": 0, "warmup": 1, "active": 3, "repeat": 1}


class BoomError(RuntimeError):
    pass


class _Regressor(pl.LightningModule):  # type: ignore[misc,name-defined]
    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.fail_at = fail_at
        self.calls = 0
        self.hook: tuple[int, Any] | None = None  # (the call it runs before, a callable)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.hook is not None and self.hook[0] == self.calls:
            self.hook[1]()
        self.calls += 1
        if self.calls - 1 == self.fail_at:
            raise BoomError(f"training_step {self.fail_at}")
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _loader() -> Any:
    data = torch.utils.data.TensorDataset(torch.randn(128, 16), torch.randn(128, 1))
    return torch.utils.data.DataLoader(data, batch_size=8)


def _fit(*, max_steps: int, fail_at: int | None, callback: bool) -> bool:
    """One fit; True when it raised BoomError (as it should have, at ``fail_at`` < ``max_steps``)."""
    trainer = lightning_trainer(max_steps, SCHEDULE, callback)
    try:
        trainer.fit(_Regressor(fail_at), _loader())
    except BoomError:
        return True
    return False


@pytest.mark.parametrize("callback", [False, True])
def test_lightning_a_step_that_raises_in_the_window_stops_the_profiler_and_the_next_fit_records_whole(
    records: Records, callback: bool
) -> None:
    assert _fit(max_steps=10, fail_at=3, callback=callback)  # skip 0, warmup 1, active 2, 3 (raises), 4
    _quiet()
    assert not records.of("autoprof.window")
    assert records.of("autoprof.warning", reason="window_incomplete")
    assert not _fit(max_steps=8, fail_at=None, callback=callback)
    _quiet()
    (window,) = records.of("autoprof.window")
    assert window["steps"] == [2, 3, 4]  # the second fit's own global steps, never [3, 4, 0]


@pytest.mark.parametrize("at", [1, 2, 3])  # the window's warmup step, its first and its second active step
@pytest.mark.parametrize("how", ["profiler teardown", "callback teardown", "garbage collection", "garbage collection on another thread"])
def test_lightning_an_earlier_trainer_torn_down_during_the_next_fit_cuts_nothing_of_it(records: Records, how: str, at: int) -> None:
    # Lightning's Profiler.__del__ tears the profiler down: the first trainer's, collected by the cyclic GC at whatever
    # step of the second fit the collection falls on (it read [3, 4, 5] for [2, 3, 4] under load). Its stop is that
    # stale run's own: the target's window belongs to the second fit's run.
    import gc

    from autoprof.integrations.lightning import AutoprofCallback

    callback = how == "callback teardown"
    gc_was = gc.isenabled()
    gc.disable()  # the first trainer lives until the chosen step collects it
    try:
        first = lightning_trainer(10, SCHEDULE, callback)
        with pytest.raises(BoomError):
            first.fit(_Regressor(3), _loader())
        _quiet()
        if how == "profiler teardown":
            old = first.profiler
            hook = lambda: old.teardown(None)  # noqa: E731
        elif how == "callback teardown":
            (old,) = [c for c in first.callbacks if isinstance(c, AutoprofCallback)]
            hook = lambda: old.teardown(None, None, "fit")  # noqa: E731
        elif how == "garbage collection":
            hook = gc.collect
        else:

            def hook() -> None:
                collector = threading.Thread(target=gc.collect)
                collector.start()
                collector.join()

        del first
        second = lightning_trainer(8, SCHEDULE, callback)
        model = _Regressor(None)  # the same class: the same target as the first fit's
        model.hook = (at, hook)
        second.fit(model, _loader())
    finally:
        if gc_was:
            gc.enable()
    _quiet()
    (window,) = records.of("autoprof.window")
    assert window["steps"] == [2, 3, 4]
    (cut,) = records.of("autoprof.warning", reason="window_incomplete")  # the first fit's, only
    assert "raised" in cut["message"]
    assert not records.of("autoprof.warning", reason="wrong_thread")  # a stale run's stop from the GC's thread is no misuse


@pytest.mark.parametrize("callback", [False, True])
def test_lightning_max_steps_inside_the_window_stops_the_profiler(records: Records, callback: bool) -> None:
    assert not _fit(max_steps=4, fail_at=None, callback=callback)  # the window needs 5 steps
    _quiet()
    (cut,) = records.of("autoprof.warning", reason="window_incomplete")
    assert cut["steps_recorded"] == 2
    with torch.profiler.profile() as mine:  # the user's own profiler later: no foreign_profiler warning, it works
        _work()
    assert any(e.name == "aten::mm" for e in mine.events())
    assert not records.of("autoprof.warning", reason="foreign_profiler")


# -- the Hugging Face Trainer, for real ------------------------------------------------------------------

transformers = pytest.importorskip("transformers")


class _Tiny(torch.nn.Module):
    def __init__(self, fail_at: int | None) -> None:
        super().__init__()
        self.net = torch.nn.Linear(16, 1)
        self.fail_at = fail_at
        self.calls = 0

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        self.calls += 1
        if self.calls - 1 == self.fail_at:
            raise BoomError(f"forward {self.fail_at}")
        return {"loss": torch.nn.functional.mse_loss(self.net(x), labels)}


class _Data(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(16, generator=g), "labels": torch.randn(1, generator=g)}


def _train(tmp: Path, *, max_steps: int, fail_at: int | None, callback: Any = None) -> bool:
    from autoprof.integrations.transformers import AutoprofCallback

    args = transformers.TrainingArguments(
        output_dir=str(tmp),
        max_steps=max_steps,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    cb = callback if callback is not None else AutoprofCallback(**SCHEDULE)
    trainer = transformers.Trainer(model=_Tiny(fail_at), args=args, train_dataset=_Data(), callbacks=[cb])
    try:
        trainer.train()
    except BoomError:
        return True
    return False


@pytest.mark.parametrize("fail_at", [2, 5])
def test_hf_a_forward_that_raises_never_turns_profiling_off(records: Records, tmp_path: Path, fail_at: int) -> None:
    assert _train(tmp_path, max_steps=10, fail_at=fail_at)
    _quiet()
    assert not _train(tmp_path, max_steps=8, fail_at=None)  # a new train() records
    windows = records.of("autoprof.window")
    # at 2 the forward raises in the window's warmup (nothing recorded); at 5 after the first run's window closed
    assert [w["steps"] for w in windows] == [[2, 3, 4]] * (1 if fail_at == 2 else 2)

    @autoprof.autoprof(name="later", skip_first=0, wait=0, warmup=0, active=1)
    def later() -> torch.Tensor:
        return _work()

    later()  # and a later @autoprof function in the thread
    assert records.of("autoprof.window", target="later")
    _quiet()


def test_hf_max_steps_inside_the_window_and_a_second_train_with_the_same_callback(records: Records, tmp_path: Path) -> None:
    from autoprof.integrations.transformers import AutoprofCallback

    cb = AutoprofCallback(**SCHEDULE)
    assert not _train(tmp_path, max_steps=4, fail_at=None, callback=cb)
    _quiet()
    assert records.of("autoprof.warning", reason="window_incomplete")
    assert not _train(tmp_path, max_steps=6, fail_at=None, callback=cb)
    (window,) = records.of("autoprof.window")
    assert window["steps"] == [2, 3, 4]
    _quiet()


# -- property: random failures, early stops and repeated runs ---------------------------------------------


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


RUNS = st.lists(st.tuples(st.integers(1, 9), st.one_of(st.none(), st.integers(0, 8))), min_size=2, max_size=4)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=RUNS, trainer=st.sampled_from(["lightning", "lightning-callback", "hf"]))
def test_property_runs_that_fail_or_stop_early_never_leave_the_profiler_on(
    tmp_path_factory: pytest.TempPathFactory, runs: list[tuple[int, int | None]], trainer: str
) -> None:
    tmp = tmp_path_factory.mktemp("runs")
    sink = tmp / "r.jsonl"
    autoprof.configure(sink=str(sink), background=False)
    SESSION.targets.clear()
    rss = []
    for max_steps, fail_at in runs:
        fails = fail_at is not None and fail_at < max_steps
        if trainer == "hf":
            raised = _train(tmp, max_steps=max_steps, fail_at=fail_at)
        else:
            raised = _fit(max_steps=max_steps, fail_at=fail_at, callback=trainer == "lightning-callback")
        assert raised == fails
        _quiet()
        rss.append(_rss_mb())
    # the last run is a clean one that is long enough: it records one whole window
    before = len(Records(sink).of("autoprof.window"))
    if trainer == "hf":
        _train(tmp, max_steps=6, fail_at=None)
    else:
        _fit(max_steps=6, fail_at=None, callback=trainer == "lightning-callback")
    _quiet()
    recs = Records(sink)
    windows = recs.of("autoprof.window")
    # the last run records one whole window of its own (3 consecutive steps; its exact numbers are the unit tests')
    assert len(windows) == before + 1 and len(windows[-1]["steps"]) == 3, windows
    _whole_runs(windows)
    assert max(rss) - rss[0] < 200, f"RSS grew over the runs: {rss}"


def test_concurrent_async_steps_leave_no_torch_line_on_stderr(tmp_path: Path) -> None:
    sink = tmp_path / "r.jsonl"
    code = textwrap.dedent(
        f"""
        import asyncio, torch, autoprof
        autoprof.configure(sink={str(sink)!r}, background=False)
        x = torch.randn(32, 32)

        @autoprof.autoprof(skip_first=0, wait=0, warmup=1, active=3)
        async def step(i):
            y = x @ x
            await asyncio.sleep(0.001)
            return (y @ x).sum().item()

        async def main():
            for _ in range(8):
                await asyncio.gather(*(step(i) for i in range(8)))

        asyncio.run(main())
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    stray = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert not stray, f"non-JSON lines on stderr: {stray[:3]}"
    (window,) = [json.loads(line) for line in sink.read_text().splitlines() if '"autoprof.window"' in line]
    assert window["steps"] == [1, 2, 3]  # one step a round: the first call in flight; the others ran bare meanwhile


@pytest.mark.parametrize("how", ["direct", "task", "thread"])
def test_a_sync_target_inside_a_concurrent_tasks_bare_call_is_nested_only_in_its_own_task(tmp_path: Path, how: str) -> None:
    # a(1) runs bare (a(0) was in flight when it began, asyncio.gather) and reaches inner after a(0) ended: the thread's
    # depth is 0 then. Called from a(1) itself (direct), inner took that call as a step of its own, with a window,
    # though it only ever runs nested in a (docs/usage.md: calls nested in a target's are annotations): it is nested
    # now. From a task a(1) created, or a thread it handed inner to (asyncio.to_thread), inner is no more nested in a(1)
    # than on a's idle path once a's windows are over (which marks nothing): a step, as there. Nested on one path and
    # a step on the other, inner's window opened by a step on the idle path never closed: torch's profiler recorded
    # to the end of the run, and was stopped by the main thread at exit ("disableProfiler called but no active
    # profiling session found" on stderr, in the thread case).
    call = {
        "direct": "inner(v)",
        "task": "await asyncio.create_task(child(v))",
        "thread": "await asyncio.to_thread(inner, v)",
    }[how]
    recs = _script_records(
        tmp_path,
        "bare_nested",
        f"""
        import asyncio, torch, autoprof
        autoprof.configure(sink=SINK, background=False)

        @autoprof.autoprof(name="inner", skip_first=0, wait=0, warmup=1, active=2)
        def inner(v):
            return v + 1

        async def child(v):
            return inner(v)

        @autoprof.autoprof(name="a", skip_first=0, wait=0, warmup=1, active=2)
        async def a(v, delay):
            await asyncio.sleep(delay)
            return {call} if v else v + 1

        async def main():
            return await asyncio.gather(a(0, 0), a(1, 0.01))

        for _ in range(12):
            assert asyncio.run(main()) == [1, 2]
        assert not torch.autograd.profiler._is_profiler_enabled, "a window left recording"
        """,
    )
    windows = [(w["target"], w["steps"]) for w in recs if w["event"] == "autoprof.window"]
    if how == "direct":
        assert not [r for r in recs if r.get("target") == "inner"], [r for r in recs if r.get("target") == "inner"][:2]
        assert windows == [("a", [1, 2])], windows
    elif how == "task":  # a step of inner's on both of a's paths: a window of its own, whole (its steps wait while a's records)
        assert ("a", [1, 2]) in windows, windows
        assert [len(steps) for target, steps in windows if target == "inner"] == [2], windows
    else:  # a step too, but each asyncio.run's executor thread makes one call and ends: each window of inner is cut as its
        # thread ends, and given up after a few (this passed on torch 2.13 only where the next thread reused the dead
        # one's id: it took that thread's window on and stopped a profiler it never started; torch 2.4 raised there)
        assert windows == [("a", [1, 2])], windows
        (given_up,) = [r for r in recs if r.get("reason") == "window_given_up"]
        assert given_up["target"] == "inner" and "thread that called it ended" in given_up["message"], given_up
        return
    assert not [r for r in recs if r["event"] == "autoprof.warning" and r.get("reason") == "window_incomplete"], recs


def test_a_target_whose_windows_were_skipped_because_the_analysis_was_behind_is_told_why(tmp_path: Path) -> None:
    # the analysis is held "behind" (MAX_PENDING windows queued) for the whole run, injected rather than raced: every
    # cycle's window is skipped before it opens
    recs = _script_records(
        tmp_path,
        "behind",
        """
        import torch, autoprof
        from autoprof.live.session import SESSION
        type(SESSION).behind = lambda self, cfg: True
        autoprof.configure(sink=SINK)

        @autoprof.autoprof(name="forever", skip_first=0, wait=0, warmup=1, active=1, repeat=0)
        def forever():
            return torch.randn(8, 8).sum()

        @autoprof.autoprof(name="once", skip_first=0, wait=0, warmup=1, active=1, repeat=1)
        def once():
            return torch.randn(8, 8).sum()

        @autoprof.autoprof(name="longer", skip_first=1, wait=1, warmup=1, active=2, repeat=1)
        def longer():
            return torch.randn(8, 8).sum()

        for _ in range(10):
            forever(); once(); longer()
        """,
    )
    assert not [r for r in recs if r["event"] == "autoprof.window"]
    said = {r["target"]: r for r in recs if r.get("reason") == "no_window"}
    assert set(said) == {"forever", "once", "longer"}, recs  # "once", its one cycle skipped, said nothing before
    # "longer" was called 10 times; its schedule ended (its one window skipped) at fewer calls than it needs for a
    # window, and counted no more: neither its count nor "a run this short" is said as if the run had ended there
    assert said["longer"]["calls"] < said["longer"]["calls_needed"] == 5 and said["longer"]["windows_skipped"] == 1
    assert f"at least {said['longer']['calls']} time(s)" in said["longer"]["message"], said["longer"]["message"]
    assert said["forever"]["calls"] == 10 and said["forever"]["windows_skipped"] == 10 and said["forever"]["calls_deferred"] == 0
    assert said["once"]["calls"] == 2 and said["once"]["windows_skipped"] == 1  # (a schedule over counts no more calls)
    for r in said.values():
        assert "were skipped before they opened: the background analysis was 4 windows behind" in r["message"], r["message"]
        assert "shorter schedule" not in r["message"]
