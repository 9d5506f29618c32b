"""Knowing when the machine disturbed a step (issue 49, item 1): a live window records each step's thread CPU time and
run-queue wait (runnable, waiting for a CPU other work held); that time is the machine's, taken out of op work and
overhead, never read as framework overhead, and said once in a ``machine_busy`` warning. The clocks are injected:
nothing here depends on how busy the machine running the tests is."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from conftest import Records
from synth import Synth, small_launches
from test_rules_synthetic import _bias_steps

import autoprof
from autoprof.live import _cpu
from autoprof.rules import regime

STEP_US = 10_000.0


def _cpu_window(cpu_ns: int, runqueue_ns: int, ops: int = 20) -> Any:
    """Three 10 ms CPU steps of ``ops`` small adds (5 µs each: overhead when the thread runs), with the per-step CPU
    time and run-queue wait as a live window's metadata gives them."""
    s = Synth(gpu=None)
    for k in range(3):
        b = k * STEP_US
        s.step(k, b, STEP_US)
        for j in range(ops):
            s.op("aten::add", b + 10 + j * 495, 5, [[16], [16]], ["float", "float"])
    trace = s.trace()
    trace.metadata["step_cpu"] = {"wall_ns": [int(STEP_US * 1000)] * 3, "cpu_ns": [cpu_ns] * 3, "runqueue_ns": [runqueue_ns] * 3}
    (f,) = regime.check(trace)
    return f


def test_a_preempted_thread_is_not_framework_overhead() -> None:
    f = _cpu_window(cpu_ns=2_000_000, runqueue_ns=8_000_000)  # ran 2 of each 10 ms, waited 8 for a CPU
    assert f.verdict == "mixed" and "the machine was busy" in f.message, f.message
    ev = f.evidence
    assert ev["cpu_share"] == 0.2 and ev["preempted_steps"] == 3
    assert ev["descheduled_share"] >= 0.75 and ev["overhead_share"] < 0.25  # 8 of each step's 10 ms, of the steps as clamped


def test_a_thread_that_gave_the_cpu_up_itself_is_read_as_before() -> None:
    f = _cpu_window(cpu_ns=2_000_000, runqueue_ns=0)  # off the CPU by its own doing (a sleep, a lock): never waited for one
    assert f.verdict == "overhead-bound" and f.evidence["descheduled_share"] == 0.0, f.message
    assert f.evidence["cpu_share"] == 0.2


def test_without_the_run_queue_wait_nothing_is_taken_out() -> None:
    f = _cpu_window(cpu_ns=2_000_000, runqueue_ns=-1)  # a platform that does not give it
    assert f.verdict == "overhead-bound" and f.evidence["descheduled_share"] == 0.0


def test_an_offline_trace_has_no_cpu_reading() -> None:
    s = Synth(gpu=None)
    for k in range(3):
        s.step(k, k * STEP_US, STEP_US).op("aten::add", k * STEP_US + 10, 5)
    (f,) = regime.check(s.trace())
    assert "cpu_share" not in f.evidence and f.evidence["descheduled_share"] == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        {"wall_ns": [1], "cpu_ns": [1, 2], "runqueue_ns": [1]},
        {"wall_ns": "x"},
        ["no"],
        {"wall_ns": [1.5], "cpu_ns": [1], "runqueue_ns": [1]},
    ],
)
def test_a_malformed_cpu_reading_is_ignored(bad: Any) -> None:
    s = Synth(gpu=None)
    for k in range(3):
        s.step(k, k * STEP_US, STEP_US).op("aten::add", k * STEP_US + 10, 5)
    trace = s.trace()
    trace.metadata["step_cpu"] = bad
    (f,) = regime.check(trace)
    assert f.evidence["descheduled_share"] == 0.0 and "cpu_share" not in f.evidence


class _FakeThread:
    """An injected thread clock, in proportion to the wall clock whatever the machine's speed: the thread ran ``ran`` of
    each step's wall time and waited, runnable, ``waited`` of it for a CPU."""

    def __init__(self, ran: float, waited: float) -> None:
        self.ran, self.waited = ran, waited

    def thread_ns(self) -> int:
        return int(self.ran * time.perf_counter_ns())

    def runqueue_ns(self) -> int:
        return int(self.waited * time.perf_counter_ns())


def _live_steps(monkeypatch: pytest.MonkeyPatch, fake: _FakeThread) -> None:
    monkeypatch.setattr(_cpu, "thread_ns", fake.thread_ns)
    monkeypatch.setattr(_cpu, "runqueue_ns", fake.runqueue_ns)
    x = torch.ones(16)

    @autoprof.autoprof(name="busy", skip_first=1, wait=0, warmup=1, active=3, repeat=1)
    def step() -> None:
        for _ in range(20):
            x.add(1.0)
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        time.sleep(0.004)  # 4 ms off the CPU a step: the injected counts say whether the machine took it

    for _ in range(6):
        step()
    autoprof.flush()


def test_a_live_window_on_a_busy_machine_says_so(records: Records, monkeypatch: pytest.MonkeyPatch) -> None:
    _live_steps(monkeypatch, _FakeThread(ran=0.05, waited=0.9))  # ran 5% of each step, waited for a CPU 90% of it
    (window,) = records.of("autoprof.window", target="busy")
    assert window["cpu_share"] == pytest.approx(0.05, abs=0.01)
    found = records.findings("busy")["bound_regime"]
    assert found["verdict"] == "mixed" and found["evidence"]["descheduled_share"] > 0.5, found["evidence"]
    assert "the machine was busy" in found["message"]
    (warning,) = records.of("autoprof.warning", target="busy", reason="machine_busy")
    assert "busy machine" in warning["message"] and warning["descheduled_share"] == found["evidence"]["descheduled_share"]


def test_a_live_window_on_a_quiet_machine_has_no_warning(records: Records, monkeypatch: pytest.MonkeyPatch) -> None:
    _live_steps(monkeypatch, _FakeThread(ran=0.05, waited=0.0))  # off the CPU only by its own sleep
    (window,) = records.of("autoprof.window", target="busy")
    assert window["cpu_share"] is not None
    assert records.findings("busy")["bound_regime"]["evidence"]["descheduled_share"] == 0.0
    assert not records.of("autoprof.warning", target="busy", reason="machine_busy")


def test_a_kept_trace_carries_the_cpu_reading_and_reads_offline_as_live(
    records: Records, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # the same analysis offline: a kept window's file says how long the machine kept its steps off the CPU (for the
    # gate's and a later reading's sake), and the offline regime takes that time out as the live one did
    autoprof.configure(trace_dir=str(tmp_path / "kept"))
    _live_steps(monkeypatch, _FakeThread(ran=0.05, waited=0.9))
    live = records.findings("busy")["bound_regime"]["evidence"]
    (kept,) = (tmp_path / "kept").glob("busy.window*.pt.trace.json.gz")
    from autoprof.trace import chrome

    trace = chrome.load(str(kept))
    step_cpu = trace.metadata["step_cpu"]
    assert len(step_cpu["wall_ns"]) == len(step_cpu["cpu_ns"]) == len(step_cpu["runqueue_ns"]) == 3
    assert all(w > 0 for w in step_cpu["runqueue_ns"])
    (offline,) = [f for f in autoprof.analyze(str(kept), workers=0, jobs=1) if f.rule == "bound_regime"]
    assert offline.evidence["descheduled_share"] == live["descheduled_share"] > 0.5
    assert offline.verdict == "mixed" and "the machine was busy" in offline.message


def test_the_run_queue_reader_on_this_platform() -> None:
    cpu, waited = _cpu.read()
    assert cpu >= 0 and (waited >= 0 or waited == -1)
    later = _cpu.since((cpu, waited))
    assert later[0] >= 0 and (later[1] >= 0 or waited == -1)
    assert _cpu.since((cpu, -1))[1] == -1  # a start that did not know it: not known


def test_a_step_half_preempted_is_judged_on_its_own_time() -> None:
    # a 10 ms step: 4 ms waiting for data, then small ops whose 6 ms hold 5 ms the thread waited for a CPU other work
    # held. Without the run-queue wait it reads mixed (overhead 60%, input 40%); the step's own time is 80% input.
    s = Synth(gpu=None)
    for k in range(3):
        b = k * STEP_US
        s.step(k, b, STEP_US).x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", b + 10, 4_000)
        for j in range(10):
            s.op("aten::add", b + 4_100 + j * 580, 5, [[16], [16]], ["float", "float"])
    wall = int(STEP_US * 1000)
    trace = s.trace()
    trace.metadata["step_cpu"] = {"wall_ns": [wall] * 3, "cpu_ns": [wall // 2] * 3, "runqueue_ns": [wall // 2] * 3}
    (f,) = regime.check(trace)
    assert f.verdict == "input-bound", f.message
    assert "the machine kept its thread waiting for a CPU 5" in f.message  # ~50% of the step (of the steps as clamped)
    assert f.evidence["descheduled_share"] == pytest.approx(0.5, abs=0.05)
    (g,) = regime.check(s.trace())  # the same window without the reading
    assert g.verdict != "input-bound", g.message


def _gpu_window(runqueue_us: float | None) -> Any:
    """Three 1 ms GPU steps whose host launches small kernels for 630 µs of each (30 ops, 2 µs kernels): the device
    waits for the host, overhead-bound on a quiet machine; ``runqueue_us`` of each step the thread waited for a CPU (a
    live window's reading; None: an offline trace)."""
    s = Synth()
    for k in range(3):
        b = k * 1000
        s.step(k, b, 1000)
        small_launches(s, b + 10)
    trace = s.trace()
    if runqueue_us is not None:
        wait = int(runqueue_us * 1000)
        trace.metadata["step_cpu"] = {"wall_ns": [1_000_000] * 3, "cpu_ns": [1_000_000 - wait] * 3, "runqueue_ns": [wait] * 3}
    (f,) = regime.check(trace)
    return f


def test_a_gpu_window_without_a_cpu_reading_reads_as_before() -> None:
    f = _gpu_window(None)
    assert f.verdict == "overhead-bound" and "descheduled_share" not in f.evidence, f.message


def test_a_gpu_window_whose_host_the_machine_took_is_not_overhead_bound() -> None:
    # the device's time is the program's own; the host's active time held the thread's preemptions (an op's span goes
    # on while its thread waits for a CPU): 80% of each step off the CPU is the machine's, not the framework's
    quiet, busy = _gpu_window(0.0), _gpu_window(800.0)
    assert quiet.verdict == "overhead-bound" and quiet.evidence["descheduled_share"] == 0.0, quiet.message
    assert busy.verdict == "mixed" and "the machine was busy" in busy.message, busy.message
    assert busy.evidence["descheduled_share"] == pytest.approx(0.8, abs=0.01)
    assert busy.evidence["host_active_share"] < quiet.evidence["host_active_share"] * 0.3


# -- host-side noise floors: of the steps' own time ------------------------------------------------------------------


def _preempted(s: Synth, step_us: float, waited: float) -> dict[str, Any]:
    """The findings of ``s``'s three steps of ``step_us`` whose thread waited ``waited`` of each for a CPU."""
    from autoprof.rules import run_rules

    trace = s.trace()
    wall = int(step_us * 1000)
    trace.metadata["step_cpu"] = {"wall_ns": [wall] * 3, "cpu_ns": [int(wall * (1 - waited))] * 3, "runqueue_ns": [int(wall * waited)] * 3}
    found, failures = run_rules(trace)
    assert failures == []
    return {f.rule: f for f in found}


def test_a_separate_add_is_judged_against_the_steps_own_time_not_the_machines() -> None:
    # 1,700 µs steps of which the thread waited 90% for a CPU: 170 µs of its own, where the add is worth a finding
    # (test_rules_synthetic: 170 µs steps fire); beside the run-queue wait it sat under 1% of the wall time
    # (a 12 µs add: 7 µs a call past a call's fixed cost, 21 µs of the three steps that fusing could save)
    assert "unfused_bias_add" in _preempted(_bias_steps(12, 1700), 1700, 0.9)
    assert "unfused_bias_add" not in _preempted(_bias_steps(12, 1700), 1700, 0.0)  # the thread's own 1,700 µs: below it
    assert "unfused_bias_add" not in _bias_steps(12, 1700).findings()  # offline: no CPU reading, the steps as they are


def test_a_matmul_run_as_bmm_is_judged_against_the_steps_own_time() -> None:
    def steps() -> Synth:  # three 100 ms steps, each with one 870 µs bmm under a matmul: 0.87% of the wall time
        s = Synth(gpu=None)
        for k in range(3):
            base = k * 100_000
            s.step(k, base, 100_000).op("aten::matmul", base + 10, 900, [[8, 64, 64], [8, 64, 64]], ["float", "float"])
            s.op("aten::bmm", base + 20, 870, [[8, 64, 64], [8, 64, 64]], ["float", "float"])
        return s

    assert "batched_matmul" in _preempted(steps(), 100_000, 0.5)  # 1.7% of the steps' own time
    assert "batched_matmul" not in _preempted(steps(), 100_000, 0.0)


# -- a stall in autoprof's own bookkeeping is not the program's --------------------------------------------------------


def _stalled(stall_us: float, walls: bool) -> dict[str, Any]:
    """Three steps of ``x @ w + b`` on [4096, 16] x [16, 16] as a kept live window holds them: the step marker, the
    target's annotation inside it, the call (140 µs: a 60 µs mm, a 30 µs add). The first step stalled ``stall_us``
    after its annotations were entered, before the call (a loaded 2-core machine: 2.6-5.4 ms in 16 windows of 100,
    the thread neither on the CPU nor in the run queue). ``walls``: the window's per-step readings (the call as the
    wrapper timed it) are kept with it."""
    s = Synth(gpu=None)
    base = 0.0
    for k in range(3):
        pre = 20 + (stall_us if k == 0 else 0)  # autoprof's bookkeeping before the call
        s.step(k, base, pre + 150).x("user_annotation", "kept/step", base + 5, pre + 140)
        s.op("aten::matmul", base + pre + 5, 62, [[4096, 16], [16, 16]], ["float", "float"])
        s.op("aten::mm", base + pre + 7, 60, [[4096, 16], [16, 16]], ["float", "float"])
        s.op("aten::add", base + pre + 80, 30, [[4096, 16], [16], []], ["float", "float", "Scalar"])
        base += pre + 200
    doc: dict[str, Any] = {"traceEvents": s.events, "autoprof_target": "kept/step"}
    if walls:
        doc["autoprof_step_cpu"] = {"wall_ns": [140_000] * 3, "cpu_ns": [140_000] * 3, "runqueue_ns": [0] * 3}
    from autoprof.rules import run_rules
    from autoprof.trace import chrome

    found, failures = run_rules(chrome.from_document(doc))
    assert failures == []
    return {f.rule: f for f in found}


def test_a_stall_before_the_call_inside_the_step_is_not_the_programs_overhead() -> None:
    # the loaded suite's kept window: one 5.6 ms stall in the first of two 0.1 ms steps read "overhead-bound 97%" and
    # left the separate add under 1% of the steps' time (1 window in 3 read overhead-bound beside two busy loops)
    quiet, stalled = _stalled(0, walls=True), _stalled(5_600, walls=True)
    assert "unfused_bias_add" in stalled and "unfused_bias_add" in quiet
    assert stalled["unfused_bias_add"].evidence["fusion_saves_share"] == quiet["unfused_bias_add"].evidence["fusion_saves_share"]
    assert stalled["bound_regime"].verdict == quiet["bound_regime"].verdict != "overhead-bound", stalled["bound_regime"].message
    assert stalled["bound_regime"].evidence["window_us"] == pytest.approx(3 * 140)
    assert "cold_first_step" not in stalled  # the call was not slower: its step held autoprof's stall
    # a trace without the readings (from another machine, or torch's own profiler) is read as its spans say: the
    # first step was slow, and the median of three steps keeps the add's floor
    offline = _stalled(5_600, walls=False)
    assert offline["bound_regime"].verdict == "overhead-bound" and offline["cold_first_step"].verdict == "cold-start"
    assert "unfused_bias_add" in offline
