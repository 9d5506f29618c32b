"""A hostile user against the memory verdicts (issue 36): ``profile_memory`` given as anything but a bool, live CPU
windows with steps that allocate nothing, free, hold, creep, raise, compile or run a profiler of their own, and
hand-written chrome traces whose ``[memory]`` events are broken. Every record is validated against the schema."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records, validate_record

import autoprof
from autoprof import config
from autoprof.analysis import engine
from autoprof.config import ConfigError
from autoprof.render.emit import finding_record
from autoprof.rules import memory, run_rules
from autoprof.trace import chrome
from autoprof.trace.model import Trace

torch.set_num_threads(1)

MB = 10_000_000
FLOAT = 4
MEMORY_RULES = (memory.RULE_PEAK, memory.RULE_CHURN, memory.RULE_CREEP)
FAST: dict[str, Any] = dict(skip_first=1, wait=0, warmup=1, active=3)


def mem_findings(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule: f for rule, f in found.items() if rule in MEMORY_RULES}


def live(records: Records, name: str, step: Any, calls: int = 6, **options: Any) -> dict[str, dict[str, Any]]:
    wrapped = autoprof.autoprof(step, name=name, **{**FAST, **options})
    for _ in range(calls):
        wrapped()
    return records.findings(name)


def window(records: Records, name: str) -> dict[str, Any]:
    (w,) = records.of("autoprof.window", target=name)
    return w


# -- the option ----------------------------------------------------------------------------------------------

TRUTHY = ["yes", 1, "1", "true", "TRUE", 2, 1.0, 0]


@pytest.mark.parametrize("value", [*TRUTHY, None])
def test_configure_takes_only_a_bool(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^profile_memory must be True or False, not "):
        autoprof.configure(profile_memory=value)
    assert config.SWITCH.config.profile_memory is False  # a refused value changes nothing


@pytest.mark.parametrize("value", TRUTHY)
def test_decorator_takes_only_a_bool(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^profile_memory must be True or False, not "):
        autoprof.autoprof(lambda: None, profile_memory=value)


@pytest.mark.parametrize(
    ("raw", "expected", "warns"),
    [("TRUE", True, False), (" true ", True, False), ("False", False, False), ("", False, False), ("1", False, True), ("on", False, True)],
)
def test_env_junk_warns_and_keeps_the_default(raw: str, expected: bool, warns: bool) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert config.from_env({"AUTOPROF_PROFILE_MEMORY": raw}).profile_memory is expected
    said = [str(w.message) for w in caught if "AUTOPROF_PROFILE_MEMORY" in str(w.message)]
    assert bool(said) is warns, said


def test_decorator_false_beats_configure_true_and_none_defers(records: Records) -> None:
    autoprof.configure(profile_memory=True)
    x = torch.ones(8)
    live(records, "off", lambda: torch.ones(MB // 4).sum() + x.sum(), profile_memory=False)
    assert window(records, "off")["step_memory_peak_bytes"] is None
    found = live(records, "deferred", lambda: torch.ones(MB // 4).sum() + x.sum(), profile_memory=None)
    assert window(records, "deferred")["step_memory_peak_bytes"] is not None and memory.RULE_PEAK in found


# -- live CPU windows: steps that do little ---------------------------------------------------------------------


def test_step_that_allocates_nothing(records: Records) -> None:
    autoprof.configure(profile_memory=True)
    found = live(records, "nothing", lambda: None)
    assert not mem_findings(found)
    # no allocator event in the window: the same null as a window that did not record memory
    assert window(records, "nothing")["step_memory_peak_bytes"] is None


def test_step_freeing_memory_made_before_the_window(records: Records) -> None:
    made_before = [torch.zeros(MB // 4) for _ in range(8)]  # 10 MB each, long before the window
    x = torch.ones(8)

    def step() -> torch.Tensor:
        if made_before:
            made_before.pop()  # freed in the step: the window never saw it allocated
        return x.sum()

    found = live(records, "frees", step, profile_memory=True)
    assert not mem_findings(found)
    peaks = window(records, "frees")["step_memory_peak_bytes"]["cpu"]
    assert all(0 <= p < 1024 for p in peaks), peaks  # never negative, never the freed 10 MB


def test_huge_tensor_held_from_before_the_window_is_not_a_peak(records: Records) -> None:
    huge = torch.zeros(MB)  # 40 MB, held across the window

    found = live(records, "huge", lambda: huge[:16].sum(), profile_memory=True)
    assert not mem_findings(found)
    assert max(window(records, "huge")["step_memory_peak_bytes"]["cpu"]) < 1024


def test_in_place_ops_only(records: Records) -> None:
    buf = torch.zeros(MB // 4)

    def step() -> None:
        buf.mul_(0.5).add_(1.0).clamp_(max=3.0)

    found = live(records, "inplace", step, profile_memory=True)
    assert not mem_findings(found)


def test_generator_step_is_left_alone_with_memory_on(records: Records) -> None:
    with pytest.warns(UserWarning, match="generator function"):

        @autoprof.autoprof(name="gen", profile_memory=True, **FAST)
        def gen() -> Any:
            yield torch.ones(MB // 4)

    for _ in range(6):
        (t,) = list(gen())
        assert t.numel() == MB // 4
    assert records.of("autoprof.window", target="gen") == []
    assert records.of("autoprof.error") == []


class MineError(Exception):
    pass


def test_exception_in_a_step_with_memory_on_propagates_unchanged(records: Records) -> None:
    calls = [0]
    raised = MineError("the user's own")
    x = torch.ones(8)

    @autoprof.autoprof(name="raises", profile_memory=True, **FAST)
    def step() -> torch.Tensor:
        calls[0] += 1
        t = torch.ones(MB // 4)
        if calls[0] == 4:  # an active step
            raise raised
        return t.sum() + x.sum()

    for _ in range(12):
        try:
            step()
        except MineError as e:
            assert e is raised and e.__traceback__ is not None
    assert records.of("autoprof.error") == []
    assert [r["reason"] for r in records.of("autoprof.warning", target="raises")] == ["window_incomplete"]
    w = window(records, "raises")
    assert len(w["steps"]) == 3 and len(w["step_memory_peak_bytes"]["cpu"]) == 3
    peak = records.findings("raises")[memory.RULE_PEAK]
    assert MB <= peak["evidence"]["peak_bytes"] <= MB + 64 and peak["evidence"]["holders"][0]["op"] == "aten::ones"


def test_threads_allocating_are_not_seen(records: Records) -> None:
    """torch's profiler records no op and no allocator event on a thread the step starts: a creep made there is
    invisible (no finding, no crash)."""
    kept: list[torch.Tensor] = []

    def step() -> None:
        workers = [threading.Thread(target=lambda: kept.append(torch.zeros(MB // 8))) for _ in range(2)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()

    found = live(records, "threads", step, profile_memory=True)
    assert len(kept) == 12
    assert not mem_findings(found)
    assert records.of("autoprof.error") == []


# -- live CPU windows: peaks and creeps, against what the step allocated ------------------------------------------


def test_allocate_then_free_a_big_tensor_names_the_peak_and_no_creep(records: Records) -> None:
    x = torch.ones(8)

    def step() -> torch.Tensor:
        big = torch.ones(3 * MB // 4)  # 30 MB
        s = big.sum()
        del big
        return s + x.sum()

    found = live(records, "bigfree", step, profile_memory=True)
    peak = found[memory.RULE_PEAK]
    ev = peak["evidence"]
    assert 3 * MB <= ev["peak_bytes"] <= 3 * MB + 64  # the 30 MB and a scalar or two
    assert ev["holders"][0] == {"op": "aten::ones", "bytes": 3 * MB}
    assert ev["step_peak_bytes"] == window(records, "bigfree")["step_memory_peak_bytes"]["cpu"]
    assert peak["severity"] == "info" and memory.RULE_CREEP not in found


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_creep_through_a_list_or_a_dict_cache(records: Records, kind: str) -> None:
    kept_list: list[torch.Tensor] = []
    kept_dict: dict[int, torch.Tensor] = {}

    def step() -> None:
        t = torch.zeros(MB // 4)  # 10 MB kept a step
        if kind == "list":
            kept_list.append(t)
        else:
            kept_dict[len(kept_dict)] = t

    found = live(records, f"creep_{kind}", step, profile_memory=True)
    ev = found[memory.RULE_CREEP]["evidence"]
    # the host's boundaries are the steps' ends (issue 46: the window's start misses the frees of what was held)
    assert ev["rate_bytes_per_step"] == MB and ev["boundary_bytes"] == [MB, 2 * MB, 3 * MB]
    # a live window forecasts against what the host had available (issue 46); what it held before is not recorded
    assert ev["forecast_steps"] == round(ev["available_bytes"] / MB) and ev["baseline_bytes"] is None
    assert found[memory.RULE_PEAK]["evidence"]["peak_bytes"] == 3 * MB


def test_creep_of_a_kilobyte_a_step_is_below_the_threshold(records: Records) -> None:
    kept: list[torch.Tensor] = []

    found = live(records, "kb", lambda: kept.append(torch.zeros(1024 // FLOAT)), profile_memory=True)
    assert not mem_findings(found)
    assert window(records, "kb")["step_memory_peak_bytes"]["cpu"] == [1024, 2048, 3072]


def test_alternating_grow_and_shrink_is_no_creep(records: Records) -> None:
    held: list[torch.Tensor] = []

    def step() -> None:
        if held:
            held.pop()
        else:
            held.append(torch.zeros(MB // 4))

    found = live(records, "alternating", step, profile_memory=True)
    assert memory.RULE_CREEP not in found


def test_creep_that_stops_half_way_through_a_long_window(records: Records) -> None:
    kept: list[torch.Tensor] = []

    def step() -> None:
        if len(kept) < 5:  # 2 calls before the window, then 3 growing active steps, then 5 flat ones
            kept.append(torch.zeros(MB // 4))

    found = live(records, "stops", step, calls=10, active=8, profile_memory=True)
    assert window(records, "stops")["step_memory_peak_bytes"]["cpu"] == [MB, 2 * MB, 3 * MB] + [3 * MB] * 5
    assert memory.RULE_CREEP not in found


def test_creep_that_stops_in_the_last_of_three_steps_is_still_creep(records: Records) -> None:
    kept: list[torch.Tensor] = []

    def step() -> None:
        if len(kept) < 4:
            kept.append(torch.zeros(MB // 4))

    found = live(records, "stops_late", step, profile_memory=True)
    assert found[memory.RULE_CREEP]["evidence"]["boundary_bytes"] == [MB, 2 * MB, 2 * MB]


def test_many_small_temporaries_in_a_tiny_step_but_not_in_a_model_step(records: Records) -> None:
    y0 = torch.ones(16)

    def tiny() -> torch.Tensor:
        y = y0
        for _ in range(600):
            y = y + 1
        return y

    churn = live(records, "tiny", tiny, profile_memory=True)[memory.RULE_CHURN]
    assert churn["verdict"] == memory.TEMPORARIES
    assert all(n >= 600 for n in churn["evidence"]["allocs_per_step_count"])
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(4)])
    xb = torch.randn(32, 128)

    def big() -> torch.Tensor:
        loss = model(xb).sum()
        loss.backward()
        return loss.detach()

    found = live(records, "model", big, profile_memory=True)
    assert memory.RULE_CHURN not in found and memory.RULE_CREEP not in found


def test_memory_with_torch_compile(records: Records) -> None:
    compiled = torch.compile(torch.nn.Linear(16, 16))
    x = torch.randn(4, 16)
    found = live(records, "compiled", lambda: compiled(x).sum(), profile_memory=True)
    assert not [f for f in mem_findings(found).values() if f["severity"] == "warning"]
    assert window(records, "compiled")["step_memory_peak_bytes"] is not None
    assert records.of("autoprof.error") == []


def test_repeat_two_windows_both_see_the_creep(records: Records) -> None:
    kept: list[torch.Tensor] = []

    live(records, "repeat", lambda: kept.append(torch.zeros(MB // 4)), calls=12, repeat=2, profile_memory=True)
    windows = records.of("autoprof.window", target="repeat")
    creeps = records.of("autoprof.finding", target="repeat", rule=memory.RULE_CREEP)
    assert len(windows) == 2 and len(creeps) == 2
    for w, c in zip(windows, creeps):
        assert w["step_memory_peak_bytes"]["cpu"] == [MB, 2 * MB, 3 * MB]  # counted from each window's start
        assert c["evidence"]["rate_bytes_per_step"] == MB


def test_kept_trace_gives_the_live_verdicts_and_evidence(records: Records, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path), profile_memory=True)
    kept: list[torch.Tensor] = []
    y0 = torch.ones(16)

    def step() -> torch.Tensor:
        kept.append(torch.zeros(MB // 4))
        y = y0
        for _ in range(600):
            y = y + 1
        return y

    found = mem_findings(live(records, "kept", step))
    assert set(found) == set(MEMORY_RULES)
    path = window(records, "kept")["trace_path"]
    offline = {f.rule: f for f in engine.analyze(path, workers=0) if f.rule in MEMORY_RULES}
    assert set(offline) == set(found)
    for rule, f in offline.items():
        assert f.verdict == found[rule]["verdict"]
        # the host's totals in the export are the profiler's count since its warmup, not what was held: the same
        # unknown baseline as live (it was 10 MB while 20 MB was held)
        # (the churn's lifetime is read apart: test_live_churn_lifetime_matches_the_kept_trace; the peak's pairing
        # says which reading each side made: by size live, by address in the kept trace)
        apart = ("temporary_lifetime_us", "pairing")
        ev = {k: v for k, v in f.evidence.items() if k not in apart}
        assert ev == {k: v for k, v in found[rule]["evidence"].items() if k not in apart}, rule
        if rule == "memory_peak":
            assert (f.evidence["pairing"], found[rule]["evidence"]["pairing"]) == ("address", "size")
    cli = subprocess.run(
        [sys.executable, "-m", "autoprof", "analyze", "--json", "--jobs", "1", path], capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 0, cli.stderr
    recs = [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")]
    for r in recs:
        validate_record(r)
    by_rule = {r["rule"]: r for r in recs if r.get("event") == "autoprof.finding" and r["rule"] in MEMORY_RULES}
    assert {rule: r["verdict"] for rule, r in by_rule.items()} == {rule: f["verdict"] for rule, f in found.items()}


@pytest.mark.xfail(
    strict=True,
    reason="a live window pairs frees by size, latest first (no addresses): in y = y + 1 the old y's free pairs with "
    "the new y, so live lifetimes are a few times shorter than the kept trace's (paired by address)",
)
def test_live_churn_lifetime_matches_the_kept_trace(records: Records, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path), profile_memory=True)
    y0 = torch.ones(16)

    def step() -> torch.Tensor:
        y = y0
        for _ in range(600):
            y = y + 1
        return y

    churn = live(records, "lifetime", step)[memory.RULE_CHURN]
    offline = {f.rule: f for f in engine.analyze(window(records, "lifetime")["trace_path"], workers=0)}
    kept = offline[memory.RULE_CHURN].evidence["temporary_lifetime_us"]
    assert abs(churn["evidence"]["temporary_lifetime_us"] - kept) <= 0.5 * kept


def test_a_users_own_memory_profiler_inside_a_step(records: Records) -> None:
    kept: list[torch.Tensor] = []

    @autoprof.autoprof(name="foreign", profile_memory=True, **FAST)
    def step() -> torch.Tensor:
        kept.append(torch.zeros(MB // 4))
        return torch.ones(8).sum()

    for i in range(12):
        if i == 3:  # autoprof's window records: the user's profiler takes over
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
                step()
            names = [e.name for e in prof.events()]
            assert "aten::zeros" in names
            assert any(e.cpu_memory_usage >= MB // 4 * FLOAT for e in prof.key_averages() if e.key == "aten::zeros")
        else:
            step()
    assert [r["reason"] for r in records.of("autoprof.warning", target="foreign")] == ["foreign_profiler"]
    w = window(records, "foreign")
    assert len(w["steps"]) == 3
    creep = records.findings("foreign")[memory.RULE_CREEP]
    assert abs(creep["evidence"]["rate_bytes_per_step"] - MB) <= 64


# -- hand-written chrome traces --------------------------------------------------------------------------------


def step_events(n: int = 3, dur: float = 1000.0) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": k * dur, "dur": dur, "pid": 1, "tid": 1, "args": {}}
        for k in range(n)
    ]


def op_event(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": {}}


def mem_event(ts: Any, **args: Any) -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args}


def cuda(nbytes: Any, total: Any = None, device: Any = 0, **more: Any) -> dict[str, Any]:
    args = {"Device Type": 1, "Device Id": device, "Bytes": nbytes, **more}
    if total is not None:
        args["Total Allocated"] = total
    return args


def load(events: list[dict[str, Any]], **meta: Any) -> tuple[Trace, dict[str, Any]]:
    trace = chrome.from_document({"traceEvents": events, **meta})
    found, failures = run_rules(trace)
    assert failures == [], failures
    out: dict[str, Any] = {}
    for f in found:
        validate_record(finding_record(f, target="t", window=None, source="hostile"))
        if f.rule in MEMORY_RULES:
            out[f.rule] = f
    return trace, out


def test_memory_events_missing_fields() -> None:
    events = [*step_events(), mem_event(100), mem_event(200, Bytes=5 * MB), mem_event(300, **{"Device Type": 1})]
    trace, found = load(events)
    assert trace.n_memory == 1  # the byte-less ones skipped; no device type: the host
    assert memory.step_peaks(trace) == {"cpu": [5 * MB] * 3}
    assert found[memory.RULE_PEAK].evidence["baseline_bytes"] is None


def test_bytes_as_strings_floats_and_junk() -> None:
    junk = [True, None, [1], {"n": 1}, "abc", float("nan"), float("inf"), 2**80, -(2**80)]
    events = [*step_events(), mem_event(100, Bytes="5000000"), mem_event(110, Bytes=5.5e6)]
    events += [mem_event(120 + k, Bytes=b) for k, b in enumerate(junk)]
    trace, found = load(events)
    assert list(trace.m_bytes) == [5_000_000, 5_500_000]
    assert found[memory.RULE_PEAK].evidence["peak_bytes"] == 10_500_000


@pytest.mark.parametrize("ts", [float("nan"), float("inf"), float("-inf"), "12", None])
def test_a_memory_event_without_a_finite_time_is_skipped(ts: Any) -> None:
    trace, found = load([*step_events(), mem_event(ts, Bytes=5 * MB), mem_event(100, Bytes=2 * MB)])
    assert trace.n_memory == 1 and found[memory.RULE_PEAK].evidence["peak_bytes"] == 2 * MB


def test_negative_levels_from_frees_of_memory_made_before_the_window() -> None:
    gpu = [{"id": 0, "name": "x", "totalGlobalMem": 100 * MB}]
    events = [*step_events(), mem_event(100, **cuda(-50 * MB, total=0, Addr=7))]  # held 50 MB before, freed
    for k in range(3):
        a = 100 + k
        events += [
            mem_event(k * 1000 + 200, **cuda(5 * MB, total=5 * MB, Addr=a)),
            mem_event(k * 1000 + 800, **cuda(-5 * MB, total=0, Addr=a)),
        ]
    trace, found = load(events, deviceProperties=gpu)
    assert memory.step_peaks(trace) == {"cuda:0": [0, 0, 0]}  # never negative: below the window's start
    assert memory.RULE_PEAK not in found and memory.RULE_CREEP not in found
    assert memory.memory_of(trace).devices[0].baseline == 50 * MB


def test_total_allocated_missing_on_a_device_with_a_capacity() -> None:
    gpu = [{"id": 0, "name": "x", "totalGlobalMem": 100 * MB}]
    events = [*step_events(4), *[mem_event(k * 1000 + 100, **cuda(5 * MB)) for k in range(4)]]
    _, found = load(events, deviceProperties=gpu)
    creep = found[memory.RULE_CREEP]
    assert creep.evidence["baseline_bytes"] is None and "latest estimate" in creep.message
    assert creep.evidence["forecast_steps"] == 16  # (100 - 20) / 5 MB a step
    assert found[memory.RULE_PEAK].evidence["capacity_share"] == 0.2


def test_unknown_device_type_is_named_and_valid() -> None:
    events = [*step_events(), *[mem_event(k * 1000 + 100, **{"Device Type": 99, "Device Id": 3, "Bytes": 5 * MB}) for k in range(3)]]
    _, found = load(events)
    assert found[memory.RULE_PEAK].evidence["device"] == "device99:3"
    assert found[memory.RULE_CREEP].evidence["device"] == "device99:3"


def test_memory_events_outside_any_step() -> None:
    events = [*step_events(), op_event("aten::empty", -600, 200), mem_event(-500, Bytes=5 * MB)]  # before the steps
    events += [mem_event(5000, Bytes=7 * MB), mem_event(6000, Bytes=-7 * MB)]  # after them
    trace, found = load(events)
    assert memory.step_peaks(trace) == {"cpu": [5 * MB] * 3}
    peak = found[memory.RULE_PEAK]
    # the level held through step 0 was made before it: its holder is named all the same
    assert peak.evidence["holders"] == [{"op": "aten::empty", "bytes": 5 * MB}]
    assert memory.RULE_CHURN not in found and memory.RULE_CREEP not in found


def test_memory_events_and_no_steps() -> None:
    trace, found = load([op_event("aten::ones", 0, 100), mem_event(10, Bytes=50 * MB), mem_event(90, Bytes=-50 * MB)])
    assert trace.n_memory == 2 and found == {} and memory.step_peaks(trace) is None


def test_host_totals_are_not_a_baseline() -> None:
    """A CPU export's Total Allocated counts from the profiler's start, not what the process holds."""
    events = [
        *step_events(),
        *[mem_event(k * 1000 + 100, **{"Device Type": 0, "Bytes": 5 * MB, "Total Allocated": (k + 2) * 5 * MB}) for k in range(3)],
    ]
    _, found = load(events)
    assert found[memory.RULE_PEAK].evidence["baseline_bytes"] is None
    assert found[memory.RULE_CREEP].evidence["baseline_bytes"] is None


def test_a_capacity_smaller_than_what_the_window_held_is_not_trusted() -> None:
    gpu = [{"id": 0, "name": "x", "totalGlobalMem": 1}]  # 1 B: another device's properties, or wrong
    events = [*step_events(4), *[mem_event(k * 1000 + 100, **cuda(5 * MB)) for k in range(4)]]
    _, found = load(events, deviceProperties=gpu)
    assert found[memory.RULE_PEAK].evidence["capacity_share"] is None
    assert found[memory.RULE_CREEP].evidence["forecast_steps"] is None and "no forecast" in found[memory.RULE_CREEP].message


def test_an_unknown_device_type_takes_no_gpu_capacity() -> None:
    gpu = [{"id": 3, "name": "x", "totalGlobalMem": 100 * MB}]
    events = [*step_events(), *[mem_event(k * 1000 + 100, **{"Device Type": 99, "Device Id": 3, "Bytes": 5 * MB}) for k in range(3)]]
    _, found = load(events, deviceProperties=gpu)
    assert found[memory.RULE_PEAK].evidence["capacity_bytes"] is None


def test_a_creep_with_under_a_step_of_room_left_says_the_next_step() -> None:
    gpu = [{"id": 0, "name": "x", "totalGlobalMem": 22 * MB}]
    events = [*step_events(4), *[mem_event(k * 1000 + 100, **cuda(5 * MB)) for k in range(4)]]
    _, found = load(events, deviceProperties=gpu)
    creep = found[memory.RULE_CREEP]
    assert "within the next step" in creep.message and creep.evidence["forecast_steps"] == 0, creep.message
