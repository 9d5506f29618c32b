"""The CPU reading of the bound regime on small synthetic traces (no torch work, no ../shared): each share,
each verdict, the margin that makes ``mixed``, and that waits are never called overhead."""

from __future__ import annotations

from typing import Any

import pytest

from autoprof.rules import regime
from autoprof.trace import chrome

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

PEAK = {"autoprof_cpu_peak_flops": 100e9, "autoprof_cpu_peak_bytes_per_s": 20e9}  # ridge: 5 FLOP/byte


class Doc:
    """A chrome trace built event by event: three steps on one thread, times in µs."""

    def __init__(self, step_us: float = 1000.0, steps: int = 3) -> None:
        self.events: list[dict[str, Any]] = []
        self.step_us = step_us
        for k in range(steps):
            self.x("user_annotation", f"ProfilerStep#{k}", k * step_us, step_us - 1)

    def x(self, cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args})

    def op(self, name: str, ts: float, dur: float, dims: list[Any] | None = None, types: list[Any] | None = None, tid: int = 1) -> None:
        extra = {"Input Dims": dims, "Input type": types} if dims is not None else {}
        self.x("cpu_op", name, ts, dur, tid=tid, **extra)

    def each_step(self, fn: Any) -> None:
        for k in range(3):
            fn(k * self.step_us)

    def verdict(self, peaks: bool = True) -> tuple[str, dict[str, Any], str]:
        doc = {"traceEvents": self.events, **(PEAK if peaks else {})}
        (f,) = regime.check(chrome.from_document(doc))
        return f.verdict, f.evidence, f.message


def test_big_matmuls_are_compute_bound() -> None:
    d = Doc()
    d.each_step(lambda t: d.op("aten::mm", t + 10, 950, [[512, 512], [512, 512]], ["float", "float"]))
    verdict, ev, msg = d.verdict()  # 268 MFLOP: 2.7 ms at the peak, well past a call's fixed cost
    assert verdict == "compute-bound" and ev["compute_work_share"] > 0.9 and ev["roofline_bound"] == "compute"
    assert "FLOP-bound ops" in msg


def test_big_elementwise_ops_are_memory_bound() -> None:
    d = Doc()
    d.each_step(lambda t: d.op("aten::add", t + 10, 950, [[4096, 4096], [4096, 4096], []], ["float", "float", "Scalar"]))
    verdict, ev, _ = d.verdict()
    assert verdict == "memory-bound" and ev["memory_work_share"] > 0.9 and ev["roofline_bound"] == "memory"


def test_many_tiny_ops_are_overhead_bound_even_when_op_time_is_most_of_the_step() -> None:
    d = Doc()

    def tiny(t: float) -> None:
        for j in range(200):  # 200 calls of 4 µs: 80% of the step inside ops, nanoseconds of math each
            d.op("aten::mul", t + 50 + j * 4.5, 4.0, [[16], []], ["float", "Scalar"])

    d.each_step(tiny)
    verdict, ev, msg = d.verdict()
    assert ev["op_self_share"] > 0.75
    assert verdict == "overhead-bound" and ev["overhead_share"] > 0.9 and ev["small_op_call_count"] == 600
    assert "framework overhead" in msg


def test_waiting_for_data_is_input_bound_and_never_overhead() -> None:
    d = Doc()

    def step(t: float) -> None:
        d.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 5, 800)
        d.op("aten::stack", t + 10, 700, [[3, 32, 32]], ["float"])  # collating: inside the wait
        d.op("aten::mm", t + 820, 150, [[256, 256], [256, 256]], ["float", "float"])

    d.each_step(step)
    verdict, ev, msg = d.verdict()
    assert verdict == "input-bound" and 0.75 < ev["input_share"] < 0.85
    assert "Python" not in msg and "overhead" not in msg
    assert ev["overhead_share"] < 0.1  # the loader's own ops count as input, not as overhead or work


def test_collectives_on_the_step_thread_are_communication_bound() -> None:
    d = Doc()

    def step(t: float) -> None:
        d.op("aten::mm", t + 10, 100, [[256, 256], [256, 256]], ["float", "float"])
        d.x("user_annotation", "gloo:all_reduce", t + 120, 850)

    d.each_step(step)
    verdict, ev, _ = d.verdict()
    assert verdict == "communication-bound" and ev["comm_share"] > 0.8


def test_a_collective_on_a_helper_thread_is_not_the_steps_wait() -> None:
    d = Doc()

    def step(t: float) -> None:
        d.op("aten::mm", t + 10, 950, [[512, 512], [512, 512]], ["float", "float"])
        d.x("user_annotation", "gloo:all_reduce", t + 10, 900, tid=7)  # overlapped on the backend's thread

    d.each_step(step)
    verdict, ev, _ = d.verdict()
    assert verdict == "compute-bound" and ev["comm_share"] == 0


@pytest.mark.parametrize("peak", [95e9, 110e9])  # the 64x64 matmul's work at the peak: 5.5 µs, 4.8 µs
def test_a_matmul_at_the_call_floor_reads_the_same_on_either_side_of_it(peak: float) -> None:
    # CI's CPU: a 16 µs step, 64x64 matmul 10 µs at half its calibrated peak, the bias add 2.5 µs, Python the rest.
    # Its whole time was credited as work once its work at the peak passed a call's fixed cost: 62 % against 38 %,
    # compute-bound, where a slightly faster peak read the same step all overhead. The fixed cost is overhead in
    # every call, costed or not: the matmul's work is its time past it.
    d = Doc(step_us=16.0)

    def step(t: float) -> None:
        d.op("aten::mm", t + 1, 10.0, [[64, 64], [64, 64]], ["float", "float"])
        d.op("aten::add", t + 12, 2.5, [[64, 64], [64], []], ["float", "float", "Scalar"])

    d.each_step(step)
    doc = {"traceEvents": d.events, "autoprof_cpu_peak_flops": peak, "autoprof_cpu_peak_bytes_per_s": 20e9}
    (f,) = regime.check(chrome.from_document(doc))
    ev = f.evidence
    assert f.verdict == "overhead-bound", (f.verdict, ev)
    assert ev["overhead_share"] >= 0.65, ev
    if peak < 100e9:  # past the floor: work, its fixed cost not
        assert ev["compute_work_share"] == pytest.approx(5.0 / 15.0, abs=0.01), ev
        assert ev["op_call_count"] == 6 and ev["small_op_call_count"] == 3, ev
    else:
        assert ev["compute_work_share"] == 0 and ev["small_op_call_count"] == 6, ev


def test_no_share_leading_clearly_is_mixed() -> None:
    d = Doc()

    def step(t: float) -> None:
        d.op("aten::mm", t + 10, 450, [[512, 512], [512, 512]], ["float", "float"])  # ~45% op work
        # ~55% left to overhead: less than 1.5 times the work share

    d.each_step(step)
    verdict, ev, msg = d.verdict()
    assert verdict == "mixed", (verdict, ev)
    assert msg.startswith("mixed (CPU): no share of the step leads")


def test_without_a_calibrated_peak_op_work_is_read_by_op_family() -> None:
    # issue 46: a CPU trace from another machine carries no calibration; its matmuls are FLOP work by their kind
    # (was `mixed`, "100% in ops the roofline cannot cost"), its elementwise ops bandwidth work, and ops of no
    # known family stay uncosted (never called compute: issue 21)
    big, elem, opaque, tiny = Doc(), Doc(), Doc(), Doc()
    big.each_step(lambda t: big.op("aten::mm", t + 10, 950, [[512, 512], [512, 512]], ["float", "float"]))
    elem.each_step(lambda t: elem.op("aten::mul", t + 10, 950, [[4096, 4096], [4096, 4096]], ["float", "float"]))
    opaque.each_step(lambda t: opaque.op("aten::custom_thing", t + 10, 950))
    tiny.each_step(lambda t: [tiny.op("aten::mul", t + 50 + j * 4.5, 4.0) for j in range(200)])
    v_big, ev_big, msg_big = big.verdict(peaks=False)
    assert v_big == "compute-bound" and ev_big["roofline_bound"] == "compute" and ev_big["work_share"] > 0.8, ev_big
    assert ev_big["basis"] == "op families" and ev_big["family_work_share"] > 0.8
    assert "by op family" in msg_big and "no CPU peak calibration" in msg_big, msg_big
    v_elem, ev_elem, _ = elem.verdict(peaks=False)
    assert v_elem == "memory-bound" and ev_elem["basis"] == "op families", ev_elem
    v_opaque, ev_opaque, msg_opaque = opaque.verdict(peaks=False)
    assert v_opaque == "mixed" and ev_opaque["roofline_bound"] == "unknown" and "of no known family" in msg_opaque
    assert tiny.verdict(peaks=False)[0] == "overhead-bound"
    # with the calibration, the roofline reads the same matmul, and says so
    v_cal, ev_cal, _ = big.verdict()
    assert v_cal == "compute-bound" and ev_cal["basis"] == "roofline" and ev_cal["family_work_share"] == 0.0


def test_a_calibrated_trace_recorded_without_shapes_reads_its_matmuls_by_family() -> None:
    # issue 46: mm/addmm without recorded shapes cannot be costed; their time was overhead (the roofline skipped
    # them and nothing else counted them): they are FLOP work by their kind
    d = Doc()
    d.each_step(lambda t: d.op("aten::addmm", t + 10, 950))
    verdict, ev, _ = d.verdict()
    assert verdict == "compute-bound" and ev["basis"] == "roofline" and ev["family_work_share"] > 0.8, ev


def test_every_cpu_verdict_has_its_advice() -> None:
    for verdict in ("compute-bound", "memory-bound", "overhead-bound", "input-bound", "sync-bound", "communication-bound", "mixed"):
        assert regime._CPU_ADVICE[verdict]


def test_metadata_ops_are_overhead_however_long_they_take() -> None:
    # issue 33: views, slices, selects, scalar reads and allocations move no data; at 9 µs a call on a loaded machine
    # their time beyond the call floor was read as op work (40% of the step here: mixed)
    d = Doc()
    names = ("aten::view", "aten::slice", "aten::select", "aten::as_strided", "aten::item", "aten::empty", "aten::resize_")

    def step(t: float) -> None:
        for j in range(100):
            d.op(names[j % len(names)], t + 10 + j * 9.5, 9.0)

    d.each_step(step)
    verdict, ev, msg = d.verdict()
    assert verdict == "overhead-bound" and ev["work_share"] == 0 and ev["overhead_share"] > 0.95
    assert ev["op_call_count"] == ev["small_op_call_count"] == 300 and "300 of the window's 300 op calls" in msg


def test_a_gather_the_roofline_cannot_cost_is_bandwidth_bound_work() -> None:
    d = Doc()
    d.each_step(lambda t: d.op("aten::index", t + 10, 900, [[4096, 1024], []], ["float", "TensorList"]))
    verdict, ev, _ = d.verdict()
    assert verdict == "memory-bound" and ev["memory_work_share"] > 0.85 and ev["unknown_work_share"] == 0


def test_small_calls_count_every_op_call_below_the_floor_costed_or_not() -> None:
    # issue 33: "75 op calls below a call's fixed cost" in a window of 12,084 calls counted only the costed ones
    d = Doc()

    def step(t: float) -> None:
        for j in range(50):  # costed: 16-element muls, nanoseconds of math each
            d.op("aten::mul", t + 10 + j * 9, 4.0, [[16], []], ["float", "Scalar"])
        for j in range(100):  # not costed, each within the call floor
            d.op("aten::ones_like", t + 500 + j * 4.5, 4.0)
        d.op("aten::_cdist_forward", t + 960, 30.0)  # not costed, 25 µs beyond the floor: op work

    d.each_step(step)
    verdict, ev, msg = d.verdict()
    assert ev["op_call_count"] == 3 * 151 and ev["small_op_call_count"] == 3 * 150
    assert verdict == "overhead-bound" and "450 of the window's 453 op calls" in msg
