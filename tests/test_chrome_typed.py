"""The chrome loader's typed reading (msgspec records, only the fields the consumer reads) against its dict
reading (orjson/json, the fallback): the same model, the same errors, shared copies of repeated shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chrome import SCANNER_ONLY, _model

from autoprof.trace import chrome, events
from autoprof.trace.chrome import TraceError

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

BATCHES = chrome.ReadSizes(chunk_chars=2048, batch_chars=1500, pool_after=0)  # many batches of a few events


def _odd_events() -> list[Any]:
    """Every shape of event the consumer has a branch for, 12 times over (so that most land in whole batches)."""
    one: list[Any] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 10_000},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 1.5,
            "dur": 2.25,
            "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "External id": 4},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 5,
            "dur": 1,
            "args": {"Input Dims": [[8, 8], [8, 8]], "Input type": ["c10::BFloat16", "c10::BFloat16"]},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 6,
            "dur": 1,
            "args": {"Input Dims": [[8, 8], [8, 8], []]},
        },  # no types
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 6.5,
            "dur": 0.1,
            "args": {"Input Dims": None, "Input type": None},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::relu",
            "pid": 1,
            "tid": 1,
            "ts": 7,
            "dur": 1,
            "args": {"Input Dims": [[1e400]]},
        },  # msgspec refuses, json: inf
        {"ph": "X", "cat": "cpu_op", "name": "aten::resolve_conj", "pid": 1, "tid": 1, "ts": 8, "dur": 1},  # dropped
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::convolution",
            "pid": 1,
            "tid": 1,
            "ts": 9,
            "dur": 3,
            "args": {
                "Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [4]],
                "Input type": ["float", "float", "float"],
                "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"],
            },
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::scaled_dot_product_attention",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "dur": 2,
            "args": {"Input Dims": [[1, 2, 4, 8]] * 3, "Input type": ["float"] * 3, "Concrete Inputs": ["", "", "", "", "0.", "True"]},
        },
        {"ph": "X", "cat": "cpu_op", "name": 17, "pid": 1, "tid": 1, "ts": 14, "dur": None},  # name not a string, null dur
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": "python 1", "tid": "thread 2", "ts": 15, "dur": -3},  # 2021 name
        {
            "ph": "X",
            "cat": "python_function",
            "name": "nn.Module: Linear_0",
            "pid": 1,
            "tid": 1,
            "ts": 16,
            "dur": 1,
            "args": {"Python id": 3},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 17,
            "dur": 1,
            "args": {"correlation": 5, "cbid": 211},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 18,
            "dur": 1,
            "args": {"correlation": "7"},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 4,
            "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 2, 1], "block": [32, 1, 1]},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 25,
            "dur": 4,
            "args": {"device": "0", "stream": "stream 9", "grid": [1, [2]], "block": [32]},
        },  # no correlation
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 8, "ts": 30, "dur": 1},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 0, "tid": 7, "ts": 19, "dur": 12, "args": {"correlation": 99}},
        {"ph": "s", "cat": "ac2g", "name": "flow", "id": 5, "pid": 1, "tid": 1, "ts": 17},
        {"ph": "f", "cat": "ac2g", "name": "flow", "id": 5, "pid": 0, "tid": 7, "ts": 20, "bp": "e"},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 6, "pid": 1, "tid": 1, "ts": 17},  # not a launch flow
        {"ph": "s", "cat": "async", "name": "flow", "id": "11", "pid": [1], "tid": 1, "ts": 18.5},  # unhashable pid
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 21,
            "args": {"Total Reserved": 2048, "Total Allocated": 512, "Bytes": 512, "Addr": 94000, "Device Type": 1, "Device Id": 0},
        },
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 22, "args": {"Bytes": 0}},
        {"ph": "i", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 23, "s": "t"},  # an instant op
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"name": "no phase, no time"},
        {"cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 24, "dur": 987},  # written with a repeated key
        {"ph": "X", "cat": ["odd"], "name": "unhashable category", "pid": 1, "tid": 1, "ts": 26},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 27,
            "args": {"Sequence number": 2**70, "Input Dims": [[2**70]]},
        },
    ]
    out = []
    for r in range(12):
        for ev in one:
            ev = dict(ev)
            if isinstance(ev.get("ts"), (int, float)):
                ev["ts"] = ev["ts"] + 100_000 * r
            out.append(ev)
    return out


def _odd_text(evs: list[Any] | None = None) -> str:
    """The odd events as a document, with a repeated key (json keeps the last) and 1e400 as written (which
    json reads as inf and msgspec refuses)."""
    text = json.dumps({"traceEvents": _odd_events() if evs is None else evs})
    return text.replace('"dur": 987', '"dur": 1, "dur": 2').replace("Infinity", "1e400")


def _dict_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "_decode_events", None)  # as where msgspec is not installed


def _typed_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    taken: list[int] = []
    real = events.EventConsumer.consume_typed

    def spy(self: events.EventConsumer, evs: Any) -> None:
        taken.append(len(evs))
        real(self, evs)

    monkeypatch.setattr(events.EventConsumer, "consume_typed", spy)
    return taken


def test_odd_events_build_the_same_model_typed_as_dict_and_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "odd.json"
    p.write_text(_odd_text())
    reference = _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = _model(chrome.load(p, workers=0, sizes=BATCHES))
        pooled = _model(chrome.load(p, workers=1, sizes=BATCHES))
    assert sum(taken) > len(_odd_events()) // 2  # most events went the typed way, here
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert typed == reference
    assert pooled == reference
    assert plain == reference
    # what the branches read: shapes (1e400 read as the stdlib does), a conv's arguments, attention causal,
    # memory events, the flow-linked kernel, a string correlation id
    shapes = list(reference["shapes"].values())
    assert [[float("inf")]] in [s[0] for s in shapes]
    assert any(len(s) == 4 and s[3] is not None for s in shapes)
    assert any(len(s) == 3 and s[2] is True for s in shapes)
    assert 7 in reference["h_corr"] and "17" in reference["names"]
    copies = [i for i, n in enumerate(reference["h_name"]) if reference["names"][n] == "aten::copy_"]
    assert copies and all(reference["h_dur"][i] == 2000 for i in copies)


def test_repeated_shapes_and_launches_are_one_copy(tmp_path: Path) -> None:
    p = tmp_path / "odd.json"
    p.write_text(_odd_text())
    t = chrome.load(p, workers=0, sizes=BATCHES)
    mm = [v for i, v in t.shapes.items() if t.names[t.h_name[i]] == "aten::mm" and v[0] == [[2, 3], [3, 4]]]
    assert len(mm) >= 10 and len({id(v) for v in mm}) <= 2  # 12 equal shapes: shared (the scanner's tail aside)
    grids = [v for v in t.launch_config.values() if v == ((1, 2, 1), (32, 1, 1))]
    assert len(grids) >= 10 and len({id(v) for v in grids}) <= 2


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"ts": "soon"}, "event 181 (cpu_op) has a non-numeric 'ts'"),
        ({"ts": None}, "event 181 (cpu_op) has no 'ts'"),
        ({"dur": "long"}, "event 181 (cpu_op) has a non-numeric 'dur'"),
        ({"ph": "s", "cat": "ac2g", "ts": [1]}, "event 181: flow event without a numeric 'ts'"),
        (7, "event 181 is not an object"),
        ({"args": [1, 2]}, None),  # args not an object: read as none (the dict way)
        ({"ts": 1e300}, "malformed trace event (OverflowError"),
    ],
)
def test_a_bad_event_is_named_the_same_typed_and_dict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, problem: str | None
) -> None:
    ev: list[Any] = _odd_events()
    index = 30 * 6 + 1  # an aten::mm in the 7th repetition, batches away from the array's end
    assert ev[index]["name"] == "aten::mm"
    if isinstance(change, dict):
        ev[index] = {**ev[index], **change}
    else:
        ev[index] = change
    p = tmp_path / "bad.json"
    p.write_text(_odd_text(ev))

    def read(**kw: Any) -> str:
        try:
            return f"loaded {chrome.load(p, **kw).n_events}"
        except TraceError as e:
            return str(e)

    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = read(workers=0, sizes=BATCHES)
    assert taken  # the batches around the bad one were read typed
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = read(workers=0, sizes=BATCHES)
    scanner = read(workers=0, sizes=SCANNER_ONLY)
    assert typed == plain == scanner
    if problem is None:
        assert typed.startswith("loaded")
    else:
        assert problem in typed and "\n" not in typed


@pytest.mark.parametrize(
    "rel", ["h200/gpt2_train.chrome.json.gz", "hta/a100_rank0_of2_convnet.json.gz", "amd/mi300x_qwen05b_inference.json.gz"]
)
def test_real_traces_read_typed_as_dict(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    p = shared_trace(rel)
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = _model(chrome.load(p, workers=0))
    assert taken
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = _model(chrome.load(p, workers=0))
    assert typed == plain


def test_device_values_past_their_columns_read_the_same_typed_as_dict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed loop reads a device event's values itself (no call per event): a device or stream past int64, a
    float one, a negative duration, a span's correlation id and a missing one give what the dict reading gives."""
    odd = [
        {"device": 2**63, "stream": -(2**63), "correlation": 3},
        {"device": 1.0, "stream": 2.5, "correlation": 4},
        {"device": True, "stream": None},
        {"device": "gpu 3", "stream": [1], "correlation": "8"},
    ]
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 50}
    evs: list[Any] = [{**launch, "args": {"correlation": 3}}]
    for k in range(30):
        args = odd[k % len(odd)]
        cat = "gpu_user_annotation" if k % 5 == 4 else "kernel"
        evs.append({"ph": "X", "cat": cat, "name": f"k{k % 3}", "pid": 7, "tid": 9, "ts": 1 + k, "dur": -2 if k % 3 else 1.5, "args": args})
    p = tmp_path / "device.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    reference = _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert sum(taken) > len(evs) // 2
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert typed == plain == reference
    assert 7 in reference["d_device"] and 9 in reference["d_stream"]  # past int64 or no number: the event's pid/tid
    assert 3 in reference["d_device"] and min(reference["d_dur"]) == 0


_odd_value = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 2**64, -1, 0, 7]),  # int64's edges, and past them
    st.integers(-(2**64), 2**64),
    st.sampled_from([1.0, 2.5, -3.0, 1e300]),
    st.sampled_from(["7", "stream 3", "", "x"]),
    st.lists(st.integers(-2, 2**40), max_size=3),
)
_typed_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "s", "f", "i", "M"]),
        "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "gpu_user_annotation", "user_annotation", "ac2g"]),
        "name": st.sampled_from(["aten::mm", "aten::add", "aten::conv2d", "aten::resolve_conj", "k0", "cudaLaunchKernel"]),
        "pid": st.one_of(st.integers(0, 3), st.sampled_from(["p", None])),
        "tid": st.one_of(st.integers(0, 3), st.sampled_from(["stream 7", None])),
        "ts": st.one_of(st.integers(0, 10**6), st.floats(0, 10**6, allow_nan=False)),
        "dur": st.one_of(st.sampled_from([-5, -0.5, 0, 0.25, None]), st.integers(0, 10**4), st.floats(0, 10**4, allow_nan=False)),
    },
    optional={
        "id": _odd_value,
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": _odd_value,
                "device": _odd_value,
                "stream": _odd_value,
                "grid": st.one_of(st.lists(st.integers(0, 4), max_size=3), _odd_value),
                "block": st.one_of(st.lists(st.integers(0, 4), max_size=3), _odd_value),
                "Input Dims": st.sampled_from([[[2, 3], [3, 4]], [[8, 8]], [], [[1]]]),
                "Input type": st.sampled_from([["float", "float"], ["c10::BFloat16"], []]),
            },
        ),
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(evs=st.lists(_typed_event, min_size=1, max_size=40))
def test_generated_events_read_the_same_typed_as_dict_and_scanner(evs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events of every lane with odd values in each field the typed loop reads itself (ints past int64, floats,
    strings, lists where a number goes): the same model, or the same one-line error, typed, as dicts and by the
    scanner."""
    p = tmp_path / "gen.json"
    p.write_text(json.dumps({"traceEvents": evs}))

    def read(sizes: chrome.ReadSizes) -> Any:
        try:
            return _model(chrome.load(p, workers=0, sizes=sizes))
        except TraceError as e:
            assert "\n" not in str(e)
            return str(e)

    small = chrome.ReadSizes(chunk_chars=1024, batch_chars=600, pool_after=0)
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = read(small)
    if len(evs) >= 20 and not isinstance(typed, str):
        assert taken  # a few batches went the typed way (the last events always go through the scanner)
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = read(small)
    assert typed == plain == read(SCANNER_ONLY)


@pytest.mark.parametrize("value", [2**64, 2**70, -(2**63) - 1, 2**63, -(2**63)])
def test_ids_past_int64_are_no_ids_typed_as_dict_and_scanner(value: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A correlation or flow id past int64 is no id, whichever reader reads it (orjson reads an integer past 64 bits
    as a float; the stdlib and msgspec as an int, which no column holds): the file loads, the same way each time."""
    e = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    evs: list[Any] = [{**e, "ts": k, "args": {"correlation": value if k % 3 == 0 else k}} for k in range(40)]
    evs += [{"ph": "s", "cat": "ac2g", "id": value, "pid": 1, "tid": 1, "ts": 5}, {**e, "ts": 50}] * 10
    p = tmp_path / "ids.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert taken
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert typed == plain == _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    assert typed["h_corr"][:4] == [-1, 1, 2, -1]


def test_runs_of_one_thread_and_repeated_texts_read_the_same_typed_as_dict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed loop's short cuts give what the dict reading gives: a run of events on one thread finds its row
    without a key (pids and tids that are equal but of other types, 1, 1.0 and true, are one thread as a dict key
    has them; unhashable ones, [1] and [1.0], are two), an op's name is looked up once (a name that is no string,
    a dropped op, a shaped one), an op's shapes and a kernel's launch configuration are taken from its last event
    where the texts are equal (and only there: the shapes alternate, the grid turns float or unhashable)."""
    evs: list[Any] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10_000}]
    pids: list[Any] = [1, 1.0, True, [1], [1.0], "1", 2]
    dims = [[[2, 3], [3, 4]], [[2, 3], [3, 4]], [[8, 8], [8, 8]], [[2, 3], [3, 4]]]
    types = [["float", "float"], ["c10::BFloat16", "c10::BFloat16"], ["float", "float"], ["float", "float"]]
    grids: list[Any] = [[1, 2, 1], [1, 2, 1], [1.0, 2, 1], [[1], 2, 1], [1, 2, 1], [4, 1, 1]]
    for k in range(120):
        pid = pids[(k // 3) % len(pids)]
        args = {"Input Dims": dims[k % 4], "Input type": types[(k // 4) % 4], "correlation": 1000 + k}
        name: Any = ["aten::mm", "aten::add", "aten::resolve_conj", "aten::view", 5, None][k % 6]
        evs.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": [1, 1.0, 2][k % 3], "ts": 1 + k, "dur": 0.5, "args": args})
        evs.append({"ph": "s", "cat": "ac2g", "id": k, "pid": pid, "tid": 1 if k % 2 else 3, "ts": 1 + k})
        block = [[32, 1, 1], [32.0, 1, 1], [64, 1, 1]][(k // 2) % 3]
        launch = {"grid": grids[k % len(grids)], "block": block, "correlation": 1000 + k}
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{k % 2}", "pid": 9, "tid": 7, "ts": 2 + k, "dur": 0.25, "args": launch})
        evs.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy", "pid": 9, "tid": 8 + k % 2, "ts": 2 + k, "dur": 0.25})
    p = tmp_path / "runs.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    reference = _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    with monkeypatch.context() as m:
        taken = _typed_batches(m)
        typed = _model(chrome.load(p, workers=0, sizes=BATCHES))
        pooled = _model(chrome.load(p, workers=1, sizes=BATCHES))
    assert sum(taken) > len(evs) // 2
    with monkeypatch.context() as m:
        _dict_only(m)
        plain = _model(chrome.load(p, workers=0, sizes=BATCHES))
    assert typed == plain == pooled == reference
    assert {"5", "None", "aten::view"} <= set(reference["names"]) and "aten::resolve_conj" not in reference["names"]
    assert ("[1]", "1") in reference["threads"] and ("[1.0]", "1") in reference["threads"] and (9, 9) in reference["threads"]
    assert (2, 3) in reference["threads"]  # a thread of flow events only
    assert len({key for key in reference["threads"] if key[0] == 1 and key[1] == 1}) == 1  # 1, 1.0 and true: one thread
    assert ((1, 2, 1), (64, 1, 1)) in reference["launch"].values() and any(type(v[0][0]) is list for v in reference["launch"].values())
    assert len({str(v) for v in reference["shapes"].values()}) == 4  # (2x3, 3x4) and (8x8, 8x8), in float and bf16
