"""The trace build's numpy way (autoprof.trace._columns) against its pure-Python way: the same order, columns, tree,
launch links, shapes and name index on any columns, and the Python way where numpy is missing or off."""

from __future__ import annotations

import builtins
import os
from array import array
from typing import Any

import pytest
from conftest import SHARED_TRACES as SHARED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import Synth

from autoprof.trace import _columns, chrome
from autoprof.trace.model import HOST_CODE, LAUNCH_CODES, Trace, TraceBuilder

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

_INT64_MAX = (1 << 63) - 1
_CATS = sorted(set(HOST_CODE.values()))


def _state(trace: Trace) -> dict[str, Any]:
    """Everything a build derives from its builder, as plain values."""
    out: dict[str, Any] = {}
    for name, value in vars(trace).items():
        if type(value) is array:
            out[name] = (value.typecode, value.tolist())
    out["shapes"] = sorted(trace.shapes.items(), key=repr)
    out["launch_config"] = sorted(trace.launch_config.items())
    out["steps"] = trace.steps
    out["by_name"] = list(trace.host_by_name().items())  # the keys' order too: a user's rule may iterate it
    return out


def _both(make: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """The state of ``make()``'s trace built the numpy way (every size) and the Python way."""
    pytest.importorskip("numpy", reason="the numpy way needs numpy (the Python way is tested without it, below)")
    monkeypatch.setattr(_columns, "MIN_ROWS", 0)
    monkeypatch.setattr(_columns, "ENABLED", True)
    fast = _state(make())
    monkeypatch.setattr(_columns, "ENABLED", False)
    slow = _state(make())
    return fast, slow


def _builder(host: list[tuple[int, int, int, int, int, int]], device: list[tuple[int, int, int, int]], shaped: list[int]) -> TraceBuilder:
    b = TraceBuilder(source="t")
    for t in range(4):
        b.thread(1, t)
    for k, name in enumerate(("ProfilerStep#1", "aten::mm", "aten::add", "cudaLaunchKernel", "k0", "k1")):
        assert b.intern(name) == k
    for name, cat, ts, dur, tid, corr in host:
        b.h_name.append(name)
        b.h_cat.append(cat)
        b.h_ts.append(ts)
        b.h_dur.append(dur)
        b.h_tid.append(tid)
        b.h_corr.append(corr)
    for k in shaped:
        if k < len(host):
            b.h_shapes[k] = ((k, 1), ("float",))
    for j, (ts, dur, corr, name) in enumerate(device):
        b.d_name.append(name)
        b.d_cat.append(0)
        b.d_ts.append(ts)
        b.d_dur.append(dur)
        b.d_device.append(0)
        b.d_stream.append(7)
        b.d_corr.append(corr)
        if j % 3 == 0:
            b.d_launch[j] = ((j, 1, 1), (128, 1, 1))
    return b


_small = st.integers(0, 6)
_host_event = st.tuples(
    st.integers(0, 5), st.sampled_from(_CATS), _small, st.sampled_from([0, 1, 2, 5, _INT64_MAX]), st.integers(0, 3), st.integers(-2, 5)
)
_device_event = st.tuples(_small, st.sampled_from([0, 1, 3]), st.integers(-2, 6), st.integers(4, 5))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    host=st.lists(_host_event, max_size=40), device=st.lists(_device_event, max_size=20), shaped=st.lists(st.integers(0, 40), max_size=10)
)
def test_the_numpy_way_builds_the_trace_the_python_way_does(
    host: list[Any], device: list[Any], shaped: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ties in time (an order kept stable), durations up to int64's largest (negated in the sort key), duplicate and
    negative correlation ids (the last launch of an id wins; no link below 0), rows already in order, empty lanes."""
    fast, slow = _both(lambda: _builder(host, device, shaped).build(), monkeypatch)
    assert fast == slow


def test_a_trace_built_the_numpy_way_is_really_reordered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above compares two ways: this pins one result, so both cannot be wrong alike (two threads in
    reverse, a parent after its child in the file, a launch id used twice)."""
    launch = next(iter(LAUNCH_CODES))
    host = [(1, 0, 5, 1, 1, -1), (3, launch, 2, 1, 0, 9), (0, 0, 2, 4, 0, -1), (3, launch, 3, 1, 0, 9)]
    device = [(6, 1, 9, 4), (4, 1, -1, 5)]
    fast, slow = _both(lambda: _builder(host, device, [0, 1]).build(), monkeypatch)
    assert fast == slow
    assert fast["h_ts"][1] == [2, 2, 3, 5] and fast["h_tid"][1] == [0, 0, 0, 1]
    assert fast["h_parent"][1] == [-1, 0, 0, -1]  # the step encloses both launches of its thread
    assert fast["d_ts"][1] == [4, 6] and fast["d_launch_host"][1] == [-1, 2]  # id 9's last launch (ts 3: row 2)
    assert fast["shapes"] == [(1, ((1, 1), ("float",))), (3, ((0, 1), ("float",)))]
    assert [k for k, _ in fast["by_name"]] == [0, 3, 1]  # first seen: the step, the launch, the op


def test_without_numpy_the_build_takes_the_python_way(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_numpy(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "numpy" or name.startswith("numpy."):
            raise ImportError("No module named 'numpy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_numpy)
    monkeypatch.setattr(_columns, "_tried", False)
    monkeypatch.setattr(_columns, "_np", None)
    monkeypatch.setattr(_columns, "MIN_ROWS", 0)
    assert _columns.numpy(1) is None
    trace = _builder([(1, 0, 5, 1, 1, -1), (0, 0, 2, 4, 0, -1)], [(6, 1, -1, 4)], [0]).build()
    assert list(trace.h_ts) == [2, 5] and trace.shapes == {1: ((0, 1), ("float",))}
    monkeypatch.setattr(_columns, "_tried", False)  # asked again once numpy is back


@pytest.mark.parametrize(
    "name", ["hta/a100_rank3_of8_train.json.gz", "h200/gpt2_train.chrome.json.gz", "amd/mi300x_qwen05b_inference.json.gz"]
)
def test_a_shared_trace_loads_alike_both_ways(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/traces: see its MANIFEST.md)")
    fast, slow = _both(lambda: chrome.load(os.fspath(path)), monkeypatch)
    assert fast == slow


# -- the rules' numpy helpers, each against the Python expression it stands for --------------------------------------

_col = st.lists(st.integers(-3, 9), max_size=30)


@settings(max_examples=200, deadline=None)
@given(values=_col, floor=st.integers(-2, 4))
def test_at_least_is_the_comparison_of_each_value(values: list[int], floor: int) -> None:
    np = pytest.importorskip("numpy")
    assert _columns.at_least(np, array("l", values), floor) == [v >= floor for v in values]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-3, 9), st.integers(-1, 2), st.integers(0, 4)), max_size=30))
def test_first_launch_id_is_the_least_positive_id_of_a_launch_in_a_step(rows: list[tuple[int, int, int]]) -> None:
    np = pytest.importorskip("numpy")
    corr, step, cat = (array("q", [r[0] for r in rows]), array("l", [r[1] for r in rows]), array("b", [r[2] for r in rows]))
    codes = {1, 3}
    want = min((c for c, k, t in zip(corr, step, cat) if k >= 0 and c > 0 and t in codes), default=0)
    assert _columns.first_launch_id(np, corr, step, cat, codes) == want


def _tree(draw: Any, n: int) -> list[int]:
    return [draw(st.integers(-1, i - 1)) for i in range(n)]  # a parent precedes its child


@st.composite
def _events(draw: Any) -> tuple[list[int], list[int], list[int], list[int], list[bool]]:
    n = draw(st.integers(0, 30))
    ts = [draw(st.integers(0, 50)) for _ in range(n)]
    dur = [draw(st.sampled_from([0, 1, 7, _INT64_MAX])) for _ in range(n)]
    cat = [draw(st.integers(0, 4)) for _ in range(n)]
    inside = [draw(st.booleans()) for _ in range(n)]
    return ts, dur, cat, _tree(draw, n), inside


@settings(max_examples=300, deadline=None)
@given(events=_events())
def test_top_level_spans_are_the_listed_spans_or_none_past_int64(events: Any) -> None:
    np = pytest.importorskip("numpy")
    ts, dur, cat, parent, inside = events
    codes = {1, 2}
    want = [(t, t + d) for t, d, c, p, i in zip(ts, dur, cat, parent, inside) if i and c in codes and (p < 0 or cat[p] not in codes)]
    got = _columns.top_level_spans(np, array("q", ts), array("q", dur), array("b", cat), array("l", parent), inside, codes)
    if got is None:
        assert any(e > _INT64_MAX for _, e in want) or any(t + d > _INT64_MAX for t, d in zip(ts, dur))
    else:
        assert got == want


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(0, 30))
def test_ancestors_of_marks_every_proper_ancestor_of_the_rows(data: Any, n: int) -> None:
    np = pytest.importorskip("numpy")
    parent = _tree(data.draw, n)
    rows = sorted(set(data.draw(st.lists(st.integers(0, n - 1), max_size=8)))) if n else []
    want = [False] * n
    for i in rows:
        p = parent[i]
        while p >= 0:
            want[p] = True
            p = parent[p]
    assert _columns.ancestors_mask(np, array("l", parent), rows).tolist() == want


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from([0, 3, -5, _INT64_MAX, -_INT64_MAX]), max_size=12), data=st.data())
def test_total_of_is_pythons_exact_sum_even_past_int64(values: list[int], data: Any) -> None:
    np = pytest.importorskip("numpy")
    inside = [data.draw(st.booleans()) for _ in values]
    assert _columns.total_of(np, array("q", values), inside) == sum(v for v, i in zip(values, inside) if i)


def test_ends_and_self_times_hand_int64_overflow_back_to_python() -> None:
    np = pytest.importorskip("numpy")
    assert _columns.ends(np, array("q", [1, 2]), array("q", [3, 4])) == array("q", [4, 6])
    assert _columns.ends(np, array("q", [1, 2]), array("q", [3, _INT64_MAX])) is None
    assert _columns.ends(np, array("q", [1, 2]), array("q", [3, -1])) is None  # a negative duration: Python's way
    assert _columns.self_times(np, array("q", [5, 2]), [3, 4]) == array("q", [2, 0])
    assert _columns.self_times(np, array("q", [5, 2]), [1 << 64, 0]) is None


def _findings(trace: Trace) -> list[dict[str, Any]]:
    from autoprof.analysis import engine

    found, failed = engine.analyze_trace(trace)
    assert failed == []
    return [f.to_record() for f in found]


@pytest.mark.parametrize("seed", range(4))
def test_a_synthetic_windows_findings_are_the_same_both_ways(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule on a small GPU window (steps on two threads, launches, kernels, a sync, a collective), read the numpy
    way at every size and the Python way."""
    pytest.importorskip("numpy")

    def make() -> Trace:
        s = Synth()
        t = 0.0
        for k in range(3):
            s.step(k, t, 400)
            s.op("aten::mm", t + 5, 30, dims=[[64, 64], [64, 64]], types=["float", "float"])
            s.launch("ampere_sgemm_64x64_nn", t + 10, t + 40 + seed, 60 + 10 * seed)
            s.op("aten::add", t + 50, 10, tid=2 + seed % 2)
            s.launch("vectorized_elementwise_kernel", t + 52, t + 110, 20, tid=2 + seed % 2)
            s.runtime("cudaStreamSynchronize", t + 200, 120 + seed)
            s.op("nccl:all_reduce", t + 330, 40)
            t += 400 + 50 * seed
        return s.trace()

    monkeypatch.setattr(_columns, "MIN_ROWS", 0)
    fast = _findings(make())
    monkeypatch.setattr(_columns, "ENABLED", False)
    slow = _findings(make())
    assert fast == slow and fast


@pytest.mark.parametrize("name", ["hta/a100_rank3_of8_train.json.gz", "kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz"])
def test_a_shared_traces_findings_are_the_same_both_ways(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/traces: see its MANIFEST.md)")
    monkeypatch.setattr(_columns, "MIN_ROWS", 0)
    fast = _findings(chrome.load(os.fspath(path)))
    monkeypatch.setattr(_columns, "ENABLED", False)
    slow = _findings(chrome.load(os.fspath(path)))
    assert fast == slow and fast


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.sampled_from([0, 1, 9, _INT64_MAX])), max_size=30))
def test_totals_by_key_are_each_keys_sum_and_count_in_first_seen_order(rows: list[tuple[int, int, int]]) -> None:
    np = pytest.importorskip("numpy")
    keys, cats, values = array("l", [r[0] for r in rows]), array("b", [r[1] for r in rows]), array("q", [r[2] for r in rows])
    sums: dict[int, int] = {}
    counts: dict[int, int] = {}
    for k, c, v in rows:
        if c == 1:
            sums[k] = sums.get(k, 0) + v
            counts[k] = counts.get(k, 0) + 1
    got = _columns.totals_by_key(np, keys, cats, 1, values)
    if got is None:
        assert any(t > _INT64_MAX for t in sums.values()) or sum(v == _INT64_MAX for _, c, v in rows if c == 1) >= 1
    else:
        assert got == [(k, sums[k], counts[k]) for k in sums]


def test_top_ops_are_the_same_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    from autoprof.analysis.engine import top_ops

    s = Synth()
    for k, name in enumerate(["aten::mm", "aten::add", "aten::mm", "aten::relu", "aten::add", "aten::mm"]):
        s.op(name, 10 * k, 3 + k % 3)
    monkeypatch.setattr(_columns, "MIN_ROWS", 0)
    fast = top_ops(s.trace(), 2)
    monkeypatch.setattr(_columns, "ENABLED", False)
    assert (
        top_ops(s.trace(), 2)
        == fast
        == [
            {"name": "aten::mm", "self_cpu_us": 13.0, "calls": 3},
            {"name": "aten::add", "self_cpu_us": 8.0, "calls": 2},
        ]
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host=st.lists(_host_event, max_size=40), data=st.data())
def test_the_hosts_own_work_rows_are_the_same_both_ways(host: list[Any], data: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The regime's own-work rows (long ops and spans of the steps' threads that launch nothing, nor does another thread
    meanwhile), over random trees, threads, steps (``ProfilerStep#1`` annotations), launches and durations past
    int64's end."""
    np = pytest.importorskip("numpy")
    from autoprof.rules import regime
    from autoprof.trace.model import CPU_OP_CODE, PYTHON_FUNCTION_CODE, USER_ANNOTATION_CODE

    monkeypatch.setattr(_columns, "ENABLED", False)
    trace = _builder(host, [], []).build()
    inside = [data.draw(st.booleans()) for _ in range(trace.n_host)]
    floor = {CPU_OP_CODE: 2, PYTHON_FUNCTION_CODE: 3, USER_ANNOTATION_CODE: 3}
    want = regime._own_rows(trace, inside, floor)
    got = regime._own_rows_numpy(np, trace, inside, floor)
    assert got == want or (got is None and any(t + d > _INT64_MAX for t, d in zip(trace.h_ts, trace.h_dur)))


@pytest.mark.parametrize("launch_at", [4, 5, 10, 11])
def test_an_op_is_no_own_work_while_another_thread_launches_its_ends_included(launch_at: int) -> None:
    """An op of the step's thread over [5, 10], another thread launching at ``launch_at``: the op is that thread's wait
    when the launch falls within its span, ends included (both ways)."""
    np = pytest.importorskip("numpy")
    from autoprof.rules import regime
    from autoprof.trace.model import CPU_OP_CODE, USER_ANNOTATION_CODE

    launch = next(iter(LAUNCH_CODES))
    host = [(0, USER_ANNOTATION_CODE, 0, 20, 0, -1), (1, CPU_OP_CODE, 5, 5, 0, -1), (3, launch, launch_at, 1, 1, 1)]
    trace = _builder(host, [], []).build()
    floor = {CPU_OP_CODE: 2}
    want = [] if 5 <= launch_at <= 10 else [1]
    assert regime._own_rows(trace, [True] * 3, floor) == want
    assert regime._own_rows_numpy(np, trace, [True] * 3, floor) == want


@settings(max_examples=300, deadline=None)
@given(events=_events(), data=st.data())
def test_top_level_spans_of_a_thread_run_skip_names(events: Any, data: Any) -> None:
    np = pytest.importorskip("numpy")
    ts, dur, cat, parent, inside = events
    n = len(ts)
    names = [data.draw(st.integers(0, 3)) for _ in range(n)]
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    skipped = set(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    want = [
        (ts[i], ts[i] + dur[i])
        for i in range(lo, hi)
        if cat[i] == 1 and inside[i] and names[i] not in skipped and (parent[i] < 0 or cat[parent[i]] != 1)
    ]
    cols = (array("q", ts), array("q", dur), array("b", cat), array("l", parent), array("l", names))
    got = _columns.top_level_spans(np, *cols[:4], inside, {1}, (lo, hi), cols[4], skipped)
    assert got == want or (got is None and any(e > _INT64_MAX for _, e in want))
