"""Memory verdicts (issue 36): the ``profile_memory`` option, the allocator's ``[memory]`` events in both loaders, and
the ``memory_peak``, ``allocator_churn`` and ``memory_creep`` rules, on synthetic traces and live CPU windows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import Records, validate_record
from synth import Synth

import autoprof
from autoprof import config
from autoprof.analysis import engine
from autoprof.config import ConfigError
from autoprof.findings import Finding
from autoprof.render.emit import finding_record
from autoprof.rules import memory
from autoprof.trace import chrome

MB = 10_000_000
GPU = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 80 * (1 << 30)}]
MEMORY_RULES = (memory.RULE_PEAK, memory.RULE_CHURN, memory.RULE_CREEP)


class Mem(Synth):
    """A synthetic trace with allocator instants, as torch's chrome export writes them."""

    def __init__(self, gpu: list[dict[str, Any]] | None = None, baseline: int = 0) -> None:
        super().__init__(gpu=None)
        if gpu:
            self.meta["deviceProperties"] = gpu
        self.total: dict[tuple[int, int], int] = {}
        self.baseline = baseline
        self._addr = 1 << 20

    def mem(self, ts: float, nbytes: int, addr: int | None = None, dtype: int = 0, did: int = -1, tid: int = 1) -> int:
        if addr is None:
            self._addr += 1 << 12
            addr = self._addr
        key = (dtype, did)
        self.total[key] = self.total.get(key, self.baseline) + nbytes
        args = {
            "Device Type": dtype,
            "Device Id": did,
            "Addr": addr,
            "Bytes": nbytes,
            "Total Allocated": self.total[key],
            "Total Reserved": 0,
        }
        self.events.append(
            {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts, "args": args}
        )
        return addr

    def found(self) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {}
        for f in memory.check(self.trace()):
            out.setdefault(f.rule, []).append(f)
            validate_record(finding_record(f, target="t", window=None, source="synth"))
        return out


def steps(s: Synth, n: int, dur: float = 1000.0) -> None:
    for k in range(n):
        s.step(k, k * dur, dur)


# -- the loaders ----------------------------------------------------------------------------------------------


def test_chrome_loader_keeps_memory_columns_and_traces_without_them_have_none() -> None:
    s = Mem()
    steps(s, 1)
    s.op("aten::ones", 100, 50)
    a = s.mem(120, 4096)
    s.mem(900, -4096, addr=a)
    t = s.trace()
    assert t.n_memory == 2
    assert list(t.m_bytes) == [4096, -4096] and list(t.m_addr) == [a, a] and list(t.m_total) == [4096, 0]
    assert list(t.m_ts) == [120_000, 900_000] and list(t.m_dtype) == [0, 0] and list(t.m_dindex) == [-1, -1]
    assert t.m_tid[0] == t.h_tid[0]  # the ops' thread row
    plain = Synth(gpu=None)
    steps(plain, 1)
    assert plain.trace().n_memory == 0
    assert memory.check(plain.trace()) == [] and memory.step_peaks(plain.trace()) is None


# -- memory_peak ----------------------------------------------------------------------------------------------


def test_peak_names_the_holders_and_the_share_of_capacity() -> None:
    s = Mem(gpu=GPU, baseline=1 << 30)
    steps(s, 3)
    for k in range(3):
        t0 = k * 1000
        s.op("aten::ones", t0 + 100, 100)
        s.op("aten::empty", t0 + 110, 10)  # allocates for aten::ones: named after it
        big = s.mem(t0 + 115, 4 * MB, dtype=1, did=0)
        s.op("aten::mul", t0 + 300, 50)
        small = s.mem(t0 + 310, MB, dtype=1, did=0)
        s.mem(t0 + 800, -MB, addr=small, dtype=1, did=0)
        s.mem(t0 + 900, -4 * MB, addr=big, dtype=1, did=0)
    found = s.found()
    (peak,) = found[memory.RULE_PEAK]
    assert peak.verdict == memory.PEAK and peak.severity == "info"
    ev = peak.evidence
    assert ev["device"] == "cuda:0" and ev["peak_bytes"] == 5 * MB and ev["step_peak_bytes"] == [5 * MB] * 3
    assert ev["holders"] == [{"op": "aten::ones", "bytes": 4 * MB}, {"op": "aten::mul", "bytes": MB}]
    assert ev["baseline_bytes"] == 1 << 30 and ev["capacity_bytes"] == 80 * (1 << 30)
    assert ev["capacity_share"] == round(((1 << 30) + 5 * MB) / (80 * (1 << 30)), 4)
    assert "above what was held at its start" in peak.message and peak.subjects[0] == "aten::ones"
    assert memory.RULE_CHURN not in found and memory.RULE_CREEP not in found
    assert memory.step_peaks(s.trace()) == {"cuda:0": [5 * MB] * 3}


def test_peak_near_capacity_is_a_warning_and_a_small_peak_is_silent() -> None:
    s = Mem(gpu=[{"id": 0, "name": "x", "totalGlobalMem": 5 * MB}])
    steps(s, 1)
    s.op("aten::mm", 100, 100)
    s.mem(150, int(4.7 * MB), dtype=1, did=0)
    (peak,) = s.found()[memory.RULE_PEAK]
    assert peak.verdict == memory.NEAR_CAPACITY and peak.severity == "warning"
    small = Mem()
    steps(small, 3)
    for k in range(3):
        a = small.mem(k * 1000 + 10, 1000)
        small.mem(k * 1000 + 20, -1000, addr=a)
    assert small.found() == {}
    assert memory.step_peaks(small.trace()) == {"cpu": [1000, 1000, 1000]}


# -- allocator_churn ------------------------------------------------------------------------------------------


def churn_trace(step_us: float, n: int = 600, freed: bool = True) -> Mem:
    s = Mem()
    steps(s, 3, step_us)
    for k in range(3):
        t0 = k * step_us
        for j in range(n):
            t = t0 + 1 + j * (step_us * 0.9 / n)
            s.op("aten::mul", t, 0.5)
            a = s.mem(t + 0.1, 256)
            if freed:
                s.mem(t + 0.4, -256, addr=a)
    return s


def test_many_short_temporaries_are_churn() -> None:
    (churn,) = churn_trace(1000).found()[memory.RULE_CHURN]
    assert churn.verdict == memory.TEMPORARIES and churn.severity == "warning"
    assert churn.evidence["allocs_per_step_count"] == [600] * 3 and churn.evidence["temporary_share"] == 1.0
    assert "torch.compile" in churn.advice


def test_no_churn_when_slow_or_kept() -> None:
    assert memory.RULE_CHURN not in churn_trace(100_000).found()  # 6 allocations a ms: a large step's many
    assert memory.RULE_CHURN not in churn_trace(1000, freed=False).found()  # kept, not temporaries
    assert memory.RULE_CHURN not in churn_trace(1000, n=100).found()


def test_device_mallocs_in_steps_need_memory_events() -> None:
    def build(with_memory: bool) -> Mem:
        s = Mem()
        steps(s, 3)
        for k in range(3):
            s.runtime("cudaMalloc", k * 1000 + 50, 30)
            if with_memory:
                s.mem(k * 1000 + 60, 2 * MB, dtype=1, did=0)
        return s

    (mallocs,) = build(True).found()[memory.RULE_CHURN]
    assert mallocs.verdict == memory.DEVICE_MALLOCS and mallocs.evidence["malloc_per_step_count"] == [1, 1, 1]
    assert "expandable_segments" in mallocs.advice
    assert build(False).found() == {}


# -- memory_creep ---------------------------------------------------------------------------------------------


def test_creep_rate_and_forecast_to_capacity() -> None:
    s = Mem(gpu=GPU, baseline=10 * (1 << 30))
    steps(s, 4)
    for k in range(4):
        s.op("aten::zeros", k * 1000 + 100, 50)
        s.mem(k * 1000 + 120, 10 * MB + k * 100_000, dtype=1, did=0)  # kept: a little more each step
    (creep,) = s.found()[memory.RULE_CREEP]
    ev = creep.evidence
    assert creep.severity == "warning"
    assert ev["rate_low_bytes_per_step"] <= ev["rate_bytes_per_step"] <= ev["rate_high_bytes_per_step"]
    assert abs(ev["rate_bytes_per_step"] - (10 * MB + 150_000)) <= 50_000
    held = 10 * (1 << 30) + ev["boundary_bytes"][-1]
    assert ev["forecast_steps"] == round((80 * (1 << 30) - held) / ev["rate_bytes_per_step"])
    assert ev["forecast_steps_low"] <= ev["forecast_steps"] <= ev["forecast_steps_high"]
    assert "more steps" in creep.message


def test_no_creep_when_freed_or_grown_once() -> None:
    s = Mem()
    steps(s, 4)
    for k in range(4):
        a = s.mem(k * 1000 + 100, 10 * MB)
        s.mem(k * 1000 + 900, -10 * MB, addr=a)
    assert memory.RULE_CREEP not in s.found()
    once = Mem()
    steps(once, 4)
    once.mem(100, 50 * MB)  # the first step's buffer, kept: one growth, then steady
    assert memory.RULE_CREEP not in once.found()
    cpu = Mem()
    steps(cpu, 4)
    for k in range(4):
        cpu.mem(k * 1000 + 100, 10 * MB)
    (creep,) = cpu.found()[memory.RULE_CREEP]
    assert creep.evidence["forecast_steps"] is None and "no forecast" in creep.message


def test_theil_sen_ignores_one_outlier() -> None:
    slope, low, high = memory.theil_sen([(0, 0), (1, 10), (2, 20), (3, 300), (4, 40), (5, 50)])
    assert slope == 10 and low < slope < high


# -- the option ----------------------------------------------------------------------------------------------


def test_profile_memory_option_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.Config().profile_memory is False
    monkeypatch.setenv("AUTOPROF_PROFILE_MEMORY", "true")
    assert config.from_env().profile_memory is True
    monkeypatch.setenv("AUTOPROF_PROFILE_MEMORY", "yes")
    with pytest.warns(RuntimeWarning, match="AUTOPROF_PROFILE_MEMORY"):
        assert config.from_env().profile_memory is False
    monkeypatch.delenv("AUTOPROF_PROFILE_MEMORY")
    with pytest.raises(ConfigError, match=r"^profile_memory must be True or False, not 'on'$"):
        autoprof.configure(profile_memory="on")  # type: ignore[typeddict-item]
    with pytest.raises(ConfigError, match="profile_memory must be True or False"):
        autoprof.autoprof(lambda: None, profile_memory=1)  # type: ignore[call-overload]
    assert autoprof.configure(profile_memory=True).profile_memory is True


# -- live CPU windows -----------------------------------------------------------------------------------------

FAST: dict[str, Any] = dict(skip_first=1, wait=0, warmup=1, active=3)


def _live(records: Records, name: str, step: Any, calls: int = 6) -> dict[str, dict[str, Any]]:
    for _ in range(calls):
        step()
    return records.findings(name)


def test_live_creep_on_the_host_is_forecast_against_its_available_memory(records: Records) -> None:
    kept: list[torch.Tensor] = []
    x = torch.ones(64)

    @autoprof.autoprof(name="creep", profile_memory=True, **FAST)
    def step() -> torch.Tensor:
        kept.append(torch.zeros(MB // 4))  # 10 MB kept per step
        return x.sum()

    found = _live(records, "creep", step)
    creep = found[memory.RULE_CREEP]
    assert abs(creep["evidence"]["rate_bytes_per_step"] - MB) <= 0.1 * MB
    ev = creep["evidence"]
    assert ev["capacity_bytes"] and ev["available_bytes"] and ev["available_bytes"] <= ev["capacity_bytes"]
    assert ev["forecast_steps"] == round(ev["available_bytes"] / ev["rate_bytes_per_step"])
    assert "the host had available" in creep["message"]
    (window,) = records.of("autoprof.window", target="creep")
    peaks = window["step_memory_peak_bytes"]["cpu"]
    assert len(peaks) == 3 and peaks[0] < peaks[1] < peaks[2]


def test_live_peak_names_the_large_temporary(records: Records) -> None:
    autoprof.configure(profile_memory=True)
    x = torch.ones(64)

    @autoprof.autoprof(name="peak", **FAST)
    def step() -> torch.Tensor:
        t = torch.ones(MB // 4)  # a 10 MB temporary
        return t.sum() + x.sum()

    found = _live(records, "peak", step)
    peak = found[memory.RULE_PEAK]
    top = peak["evidence"]["holders"][0]
    assert top["op"] == "aten::ones" and abs(top["bytes"] - MB) <= 0.05 * MB
    assert abs(peak["evidence"]["peak_bytes"] - MB) <= 0.05 * MB
    assert memory.RULE_CREEP not in found and memory.RULE_CHURN not in found


def test_live_many_small_temporaries_are_churn(records: Records) -> None:
    x = torch.ones(16)

    @autoprof.autoprof(name="churn", profile_memory=True, **FAST)
    def step() -> torch.Tensor:
        y = x
        for _ in range(800):
            y = y * 1.0001
        return y

    found = _live(records, "churn", step)
    assert found[memory.RULE_CHURN]["verdict"] == memory.TEMPORARIES


def test_live_steady_step_has_no_memory_warning(records: Records) -> None:
    lin = torch.nn.Linear(32, 32)
    x = torch.randn(8, 32)

    @autoprof.autoprof(name="steady", profile_memory=True, **FAST)
    def step() -> torch.Tensor:
        loss = lin(x).relu().sum()
        loss.backward()
        return loss.detach()

    found = _live(records, "steady", step)
    assert not [f for rule, f in found.items() if rule in MEMORY_RULES and f["severity"] == "warning"], found
    (window,) = records.of("autoprof.window", target="steady")
    assert window["step_memory_peak_bytes"] is not None


def test_live_window_without_memory_records_none(records: Records, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path))
    x = torch.ones(64)

    @autoprof.autoprof(name="plain", **FAST)
    def step() -> torch.Tensor:
        return torch.ones(MB // 4).sum() + x.sum()

    found = _live(records, "plain", step)
    assert not set(found) & set(MEMORY_RULES)
    (window,) = records.of("autoprof.window", target="plain")
    assert window["step_memory_peak_bytes"] is None
    kept = chrome.load(window["trace_path"])
    assert kept.n_memory == 0


def test_live_and_kept_trace_agree(records: Records, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path), profile_memory=True)
    kept: list[torch.Tensor] = []

    @autoprof.autoprof(name="both", **FAST)
    def step() -> torch.Tensor:
        kept.append(torch.zeros(MB // 4))
        return torch.ones(MB // 8).sum()

    live = _live(records, "both", step)
    (window,) = records.of("autoprof.window", target="both")
    offline = {f.rule: f for f in engine.analyze(window["trace_path"], workers=0)}
    for rule in (memory.RULE_PEAK, memory.RULE_CREEP):
        assert offline[rule].verdict == live[rule]["verdict"]
        assert offline[rule].evidence["device"] == live[rule]["evidence"]["device"]
    assert offline[memory.RULE_PEAK].evidence["peak_bytes"] == live[memory.RULE_PEAK]["evidence"]["peak_bytes"]
    assert json.dumps(window["step_memory_peak_bytes"])


def test_a_training_loop_that_keeps_2_mib_a_step_reads_2_mib_a_step(records: Records) -> None:
    # issue 46: on the CPU the profiler reports no free of what was allocated before it started, so the first recorded
    # step's zero_grad(set_to_none=True) frees were invisible while its new gradients counted: 7.34 MiB a step read
    # for 2.0 with the default 3-step window
    model = torch.nn.Linear(512, 512)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept: list[torch.Tensor] = []
    x = torch.randn(8, 512)

    @autoprof.autoprof(name="keeps", profile_memory=True, **FAST)
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
        kept.append(torch.zeros(1 << 19))  # 2 MiB kept per step

    found = _live(records, "keeps", step)
    creep = found[memory.RULE_CREEP]
    assert creep["evidence"]["rate_bytes_per_step"] == 2 << 20, creep["evidence"]


def test_a_kept_trace_carries_the_hosts_memory_for_the_forecast() -> None:
    doc = {"traceEvents": [], "autoprof_host_memory_bytes": 64 << 30, "autoprof_host_memory_available_bytes": 40 << 30}
    trace = chrome.from_document(doc)
    assert trace.metadata["host_memory_bytes"] == 64 << 30 and trace.metadata["host_memory_available_bytes"] == 40 << 30
    bad = chrome.from_document({"traceEvents": [], "autoprof_host_memory_bytes": "lots", "autoprof_host_memory_available_bytes": -1})
    assert "host_memory_bytes" not in bad.metadata and "host_memory_available_bytes" not in bad.metadata


def test_live_peak_and_its_kept_trace_say_which_pairing_they_read(records: Records, tmp_path: Path) -> None:
    # issue 45, item 8: b = a * 2; del a; then a larger buffer: at the peak b (aten::mul) is alive, a (aten::randn) is
    # not. The kept trace pairs a's free with a by address; a live window's raw events carry no address, so it pairs
    # the free by size with the latest allocation of that size (b): the two readings name different holders, and
    # each record says which pairing it read.
    autoprof.configure(trace_dir=str(tmp_path), profile_memory=True)
    n = 4 << 20  # floats: 16 MiB

    @autoprof.autoprof(name="pairs", **FAST)
    def step() -> torch.Tensor:
        a = torch.randn(n)
        b = a * 2
        del a
        c = torch.zeros(2 * n)
        return b[0] + c[0]

    live = _live(records, "pairs", step)[memory.RULE_PEAK]
    (window,) = records.of("autoprof.window", target="pairs")
    offline = {f.rule: f for f in engine.analyze(window["trace_path"], workers=0)}[memory.RULE_PEAK]
    assert live["evidence"]["pairing"] == "size" and offline.evidence["pairing"] == "address"
    assert "matched to their frees by size" in live["message"] and "by size" not in offline.message
    live_holders = {h["op"]: h["bytes"] for h in live["evidence"]["holders"]}
    offline_holders = {h["op"]: h["bytes"] for h in offline.evidence["holders"]}
    assert offline_holders.get("aten::mul") == 4 * n and "aten::randn" not in offline_holders  # the truth
    assert live_holders.get("aten::randn") == 4 * n and "aten::mul" not in live_holders  # the size reading
    assert live["evidence"]["peak_bytes"] == offline.evidence["peak_bytes"]  # the levels do not depend on pairing
    # one reading of the same events: the kept trace read without its addresses gives the live record's holders
    kept = chrome.load(window["trace_path"])
    kept.m_addr = type(kept.m_addr)("q", [-1]) * kept.n_memory
    (by_size,) = [f for f in memory.check(kept) if f.rule == memory.RULE_PEAK]
    assert by_size.evidence["holders"] == live["evidence"]["holders"] and by_size.evidence["pairing"] == "size"


def test_a_leak_free_training_loop_has_no_host_peak_from_its_regrown_gradients(records: Records) -> None:
    # issue 46: the first recorded step's zero_grad(set_to_none=True) frees gradients allocated before the window, which
    # a CPU profiler does not report, while the gradients it grows again count: memory_peak read "37 MiB above what was
    # held at its start" on a leak-free run. What the first step carries into the second stands for what it freed unseen.
    model = torch.nn.Linear(2048, 2048)  # 16 MiB of weight gradients a step
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 2048)

    @autoprof.autoprof(name="leakfree", profile_memory=True, **FAST)
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    found = _live(records, "leakfree", step)
    peak = found.get(memory.RULE_PEAK)
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    assert peak is None or peak["evidence"]["peak_bytes"] < grads // 4, peak and peak["evidence"]
    assert memory.RULE_CREEP not in found
