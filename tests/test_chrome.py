"""The chrome loader: old and new schemas, ns fractions, instants, flows, and bad input (incl. fuzzing)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoprof.trace import chrome, jsonstream
from autoprof.trace.chrome import TraceError
from autoprof.trace.model import Trace

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)


def _write(tmp_path: Path, doc: Any, name: str = "t.json", gz: bool = False) -> Path:
    p = tmp_path / name
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def _events() -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 100.0, "dur": 50.5},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 101.25,
            "dur": 10.125,
            "args": {"Input Dims": [[4, 4], [4, 4]], "Input type": ["float", "float"]},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 102.0,
            "dur": 3,
            "args": {"correlation": 9},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 160.0,
            "dur": 4,
            "args": {"correlation": 9, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [32, 1, 1]},
        },
        {"ph": "i", "name": "Iteration Start", "pid": 1, "tid": 1, "ts": 99, "s": "t"},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    ]


def test_minimal_trace_tree_self_times_and_links(tmp_path: Path) -> None:
    t = chrome.load(_write(tmp_path, {"traceEvents": _events(), "distributedInfo": {"rank": 2, "world_size": 4}}))
    assert (t.rank, t.world_size) == (2, 4)
    assert [s.number for s in t.steps] == [7]
    mm = next(i for i in range(t.n_host) if t.host_name(i) == "aten::mm")
    assert t.h_ts[mm] == 101_250 and t.h_dur[mm] == 10_125  # integer ns, fractions kept
    assert t.h_self[mm] == 10_125 - 3_000  # the launch inside it is a child
    assert t.host_name(t.h_parent[mm]) == "ProfilerStep#7"
    assert t.shapes[mm][0] == [[4, 4], [4, 4]]
    assert t.device_name(0) == "gemm" and t.host_name(t.d_launch_host[0]) == "cudaLaunchKernel"
    # device work ran after the step ended, yet belongs to it by launch
    assert t.d_ts[0] > t.steps[0].end_ns and t.step_of_device()[0] == 0


def test_flow_events_link_when_correlation_is_missing(tmp_path: Path) -> None:
    ev = _events()
    del ev[2]["args"]["correlation"]
    del ev[3]["args"]["correlation"]
    ev += [
        {"ph": "s", "id": 42, "pid": 1, "tid": 1, "ts": 102.0, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 42, "pid": 0, "tid": 7, "ts": 160.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    t = chrome.load(_write(tmp_path, {"traceEvents": ev}))
    assert t.host_name(t.d_launch_host[0]) == "cudaLaunchKernel"


def test_2021_category_names_and_string_tids() -> None:
    t = chrome.load(shared_trace("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz"))
    cats = {t.host_cat(i) for i in range(t.n_host)}
    assert {"cpu_op", "cuda_runtime"} <= cats
    assert {t.device_cat(d) for d in range(t.n_device)} >= {"kernel", "gpu_memset", "gpu_memcpy"}


def test_plain_json_and_bare_event_list(tmp_path: Path) -> None:
    a = chrome.load(_write(tmp_path, {"traceEvents": _events()}, "a.json"))
    b = chrome.load(_write(tmp_path, _events(), "b.json.gz", gz=True))
    assert a.n_events == b.n_events == 4


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b'{"traceEvents": [', "truncated JSON"),
        (b'{"traceEvents": [{"ph": "X",, }]}', "not valid JSON"),
        (b'{"foo": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": {"a": 1}}', "'traceEvents' is not a list"),
        (b'{"traceEvents": [1, 2]}', "event 0 is not an object"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a"}]}', "has no 'ts'"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x"}]}', "non-numeric 'ts'"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": "x"}]}', "non-numeric 'dur'"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt or truncated gzip"),
    ],
)
def test_bad_input_raises_one_line_naming_the_file(tmp_path: Path, content: bytes, problem: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceError) as e:
        chrome.load(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p)) and problem in msg


def test_truncated_gzip_of_a_real_trace(tmp_path: Path) -> None:
    data = shared_trace("hta/a100_triton_compiled_tiny.json.gz").read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="corrupt or truncated gzip"):
        chrome.load(p)


def test_missing_file_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        chrome.load(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="no trace files"):
        chrome.find_trace_files(tmp_path)


def test_open_step_is_clamped_to_the_last_activity() -> None:
    t = chrome.load(shared_trace("hta/a100_triton_compiled_tiny.json.gz"))
    (step,) = t.steps
    assert step.dur_ns < 5_000_000  # the file says 13.3 s; its activity ends ~1.8 ms after the step starts


# -- fuzzing: the loader returns a Trace or raises TraceError, nothing else ---------------------------

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(10**18), 10**18), st.floats(allow_nan=True), st.text(max_size=8))
_event = st.dictionaries(
    st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"]),
    st.one_of(
        _scalar,
        st.sampled_from(["X", "i", "s", "f", "M", "cpu_op", "kernel", "Runtime", "ac2g"]),
        st.dictionaries(
            st.sampled_from(["correlation", "Input Dims", "grid", "block", "device", "stream"]),
            st.one_of(_scalar, st.lists(st.integers(0, 4), max_size=3)),
            max_size=4,
        ),
    ),
    max_size=9,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.one_of(_event, _scalar), max_size=30), top=st.sampled_from(["dict", "list", "other"]))
def test_fuzz_generated_event_lists(events: list[Any], top: str) -> None:
    doc: Any = {"traceEvents": events} if top == "dict" else events if top == "list" else {"x": events}
    try:
        text = json.dumps(doc, allow_nan=True)
    except (TypeError, ValueError):
        return
    _load_bytes(text.encode())


_REAL: list[bytes] = []


def _real_bytes() -> bytes:
    if not _REAL:
        _REAL.append(gzip.decompress(shared_trace("hta/a100_triton_compiled_tiny.json.gz").read_bytes()))
    return _REAL[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_real_trace(data: Any) -> None:
    raw = bytearray(_real_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "cut", "dup", "del"]))
        pos = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[pos:]
        elif op == "dup":
            raw[pos:pos] = raw[pos : pos + data.draw(st.integers(1, 64))]
        elif op == "del" and raw:
            del raw[pos : pos + data.draw(st.integers(1, 64))]
    _load_bytes(bytes(raw))
    _load_bytes(gzip.compress(bytes(raw)))


def _load_bytes(b: bytes) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(b)
        f.flush()
        try:
            t = chrome.load(f.name)
        except TraceError as e:
            assert "\n" not in str(e)
            return
        assert isinstance(t, Trace)
        from autoprof.rules import run_rules

        _findings, failures = run_rules(t)
        assert failures == [], failures


def test_streaming_across_tiny_chunks_matches_a_whole_read() -> None:
    p = shared_trace("hta/a100_alexnet_cuda_sync.json.gz")
    whole = chrome.load(p)
    small = chrome.load(p, sizes=chrome.ReadSizes(chunk_chars=777))  # events and long kernel names straddle chunk borders
    assert small.n_events == whole.n_events
    assert list(small.h_ts) == list(whole.h_ts) and list(small.d_launch_host) == list(whole.d_launch_host)
    assert small.rank == whole.rank and small.device_properties == whole.device_properties


def test_metadata_after_the_events_and_compact_json(tmp_path: Path) -> None:
    ev = _events()
    text = '{"traceEvents":' + json.dumps(ev, separators=(",", ":")) + ',"distributedInfo":{"rank":5,"world_size":8}}'
    p = tmp_path / "c.json"
    p.write_text(text)
    t = chrome.load(p)
    assert (t.rank, t.world_size) == (5, 8) and t.n_events == 4
    p.write_text(text + "garbage")
    with pytest.raises(TraceError, match="data after the document"):
        chrome.load(p)


def test_compiled_addmm_dtod_then_gemm_is_dispatcher_fusion(tmp_path: Path) -> None:
    """A hand-made shape of the compiled-addmm launch sequence (no shared trace has one: issue 7)."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/0", "pid": 1, "tid": 1, "ts": 1, "dur": 60},
        {"ph": "X", "cat": "user_annotation", "name": "## Call CompiledFxGraph abc ##", "pid": 1, "tid": 1, "ts": 5, "dur": 50},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::addmm",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 40,
            "args": {"Input Dims": [[64], [64, 64], [64, 64]], "Input type": ["float", "float", "float"]},
        },
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 12, "dur": 5, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 2}},
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD (Device -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 2,
            "args": {"correlation": 1, "device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_bias",
            "pid": 0,
            "tid": 7,
            "ts": 33,
            "dur": 8,
            "args": {"correlation": 2, "device": 0, "stream": 7},
        },
    ]
    from autoprof.rules import fusion

    t = chrome.load(_write(tmp_path, {"traceEvents": ev}))
    (f,) = [x for x in fusion.check(t) if x.rule == "compiled_addmm"]
    assert f.severity == "info" and f.evidence["dtod_seeded_count"] == 1
    assert "Memcpy DtoD" in f.message and f.subjects[0].startswith("sm90_xmma_gemm")


# -- batches and worker processes: the same model as the one-event-at-a-time scanner ---------------------

_COLUMNS = (
    "h_name",
    "h_cat",
    "h_ts",
    "h_dur",
    "h_tid",
    "h_corr",
    "h_parent",
    "h_self",
    "d_name",
    "d_cat",
    "d_ts",
    "d_dur",
    "d_device",
    "d_stream",
    "d_corr",
    "d_launch_host",
)


def _model(t: Trace) -> dict[str, Any]:
    out: dict[str, Any] = {c: list(getattr(t, c)) for c in _COLUMNS}
    out.update(
        names=t.names,
        threads=t.threads,
        shapes=t.shapes,
        launch=t.launch_config,
        steps=t.steps,
        rank=(t.rank, t.world_size),
        props=t.device_properties,
        meta=dict(t.metadata),
    )
    return out


SCANNER_ONLY = chrome.ReadSizes(batch_chars=0)  # no batches: the whole array through the scanner (the reference)
SMALL_BATCHES = chrome.ReadSizes(chunk_chars=4096, batch_chars=8192, pool_after=0)  # helpers from the first batch on


@pytest.mark.parametrize(
    "rel",
    [
        "hta/a100_alexnet_cuda_sync.json.gz",
        "kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz",
        "param/rtx2080ti_stacked_linear.json.gz",
    ],
)
def test_batches_and_workers_build_the_scanners_model(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    p = shared_trace(rel)
    default = _model(chrome.load(p, workers=0))
    reference = _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    from autoprof.trace import _pool

    arrived: list[int] = []
    real_arrived = _pool.Pool._arrived

    def spy(self: Any, w: Any, bid: int, result: Any) -> None:
        arrived.append(bid)
        real_arrived(self, w, bid, result)

    with monkeypatch.context() as m:
        m.setattr(_pool.Pool, "_arrived", spy)
        pooled = _model(chrome.load(p, workers=2, sizes=SMALL_BATCHES))
        local = _model(chrome.load(p, workers=0, sizes=SMALL_BATCHES))
    assert default == reference
    assert pooled == reference
    assert local == reference
    assert len(arrived) >= 5  # the workers did take batches


def _tricky_events(n: int = 400) -> list[dict[str, Any]]:
    """Names that look like event boundaries, in every layout a cut could find."""
    ev: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10 * n}]
    for k in range(n):
        trap = ["}, {", "},\n  {", '"}, {"ph": "X"', '\\"}, {', "{}", "}}, {{"][k % 6]
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"op{k % 7} {trap}",
                "pid": 1,
                "tid": 1,
                "ts": 10 * k + 1,
                "dur": 5,
                "args": {"note": trap * (k % 3), "Input Dims": [[k % 5 + 1]]},
            }
        )
    return ev


@pytest.mark.parametrize("indent", [None, 2])
def test_a_cut_inside_a_string_is_never_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | None) -> None:
    p = tmp_path / "tricky.json"
    p.write_text(json.dumps({"traceEvents": _tricky_events(), "deviceProperties": [{"id": 0}, {"id": 1}]}, indent=indent))
    reference = _model(chrome.load(p, workers=0, sizes=SCANNER_ONLY))
    assert len(reference["h_ts"]) == 401 and any("}, {" in n for n in reference["names"])
    tiny = chrome.ReadSizes(chunk_chars=256, batch_chars=300, pool_after=0)
    assert _model(chrome.load(p, workers=0, sizes=tiny)) == reference
    assert _model(chrome.load(p, workers=1, sizes=tiny)) == reference


def test_a_worker_that_dies_or_never_starts_loses_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from autoprof.trace import _pool

    p = shared_trace("hta/a100_alexnet_cuda_sync.json.gz")
    reference = _model(chrome.load(p, workers=0))
    started: list[_pool.Pool] = []
    real_start = _pool.Pool.start
    helper = {"code": _pool.WORKER_CODE}

    def record(n: int, source: str, code: str = _pool.WORKER_CODE) -> _pool.Pool | None:
        pool = real_start(n, source, helper["code"])  # the helpers this test chose
        if pool is not None:
            started.append(pool)
        return pool

    with monkeypatch.context() as m:
        m.setattr(_pool.Pool, "start", staticmethod(record))
        helper["code"] = "import sys; sys.exit(3)"  # dies at once: every batch is redone here
        assert _model(chrome.load(p, workers=2, sizes=SMALL_BATCHES)) == reference
        helper["code"] = "import os, sys, time; r = os.fdopen(int(sys.argv[2]), 'rb'); r.read(100); os._exit(9)"
        assert _model(chrome.load(p, workers=1, sizes=SMALL_BATCHES)) == reference  # dies holding a batch
        fake = tmp_path / "python3"
        fake.write_text("not a program")
        fake.chmod(0o755)
        m.setattr(_pool.sys, "executable", str(fake))
        fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        assert _model(chrome.load(p, workers=1, sizes=SMALL_BATCHES)) == reference  # cannot start at all (exec fails)
        if fds is not None:
            assert len(os.listdir("/proc/self/fd")) == fds  # and leaves no pipe open
        m.setattr(_pool.sys, "executable", "/usr/sbin/uwsgi")  # an embedding program: never started
        assert _pool.default_workers() == 0
        assert _model(chrome.load(p, workers=1, sizes=SMALL_BATCHES)) == reference
    assert len(started) == 2
    for pool in started:  # every started worker was reaped
        assert all(w.proc.poll() is not None for w in pool.workers)


def test_a_bad_event_in_a_worker_batch_is_named_as_in_a_plain_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = _tricky_events()
    ev[333]["ts"] = "soon"
    p = _write(tmp_path, {"traceEvents": ev})
    with pytest.raises(TraceError) as plain:
        chrome.load(p, workers=0)
    assert "event 333 (cpu_op) has a non-numeric 'ts'" in str(plain.value)
    with pytest.raises(TraceError) as pooled:
        chrome.load(p, workers=1, sizes=chrome.ReadSizes(chunk_chars=1000, batch_chars=2000, pool_after=0))
    assert str(pooled.value) == str(plain.value)


def test_values_only_the_stdlib_reads_still_take_the_batch_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = _events()
    ev[1]["args"]["Sequence number"] = 2**70  # orjson rejects integers this large; json reads them
    ev[2]["args"]["weird"] = float("nan")
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev * 3}))
    rescans: list[int] = []
    real = jsonstream.StreamReader.rewind

    def spy(self: Any, taken: Any) -> None:
        rescans.append(1)
        real(self, taken)

    monkeypatch.setattr(jsonstream.StreamReader, "rewind", spy)
    t = chrome.load(p, workers=0)
    assert t.n_events == 12 and rescans == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_workers_read_what_one_process_reads(data: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutated real traces through small batches and a helper process: the same model, or the same error."""
    raw = bytearray(_real_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[pos] = data.draw(st.sampled_from(list(b'{}[],:"\\ x0')))
        else:
            del raw[pos : pos + data.draw(st.integers(1, 64))]
    p = tmp_path / "m.json"
    p.write_bytes(bytes(raw))

    def read(workers: int, sizes: chrome.ReadSizes = chrome.DEFAULT_SIZES) -> Any:
        try:
            return _model(chrome.load(p, workers=workers, sizes=sizes))
        except TraceError as e:
            assert "\n" not in str(e)
            return str(e)

    one = read(0)
    assert read(1, chrome.ReadSizes(chunk_chars=1000, batch_chars=2000, pool_after=0)) == one  # ~8 batches of 16 kB


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 14])
def test_host_and_device_columns_are_sorted_whatever_the_permutation_chunk(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build permutes each column by chunks of indices (the last chunk may hold one): the columns are the
    events' own values in (thread, start, longest first) order, each event's shapes and launch config with it."""
    from autoprof.trace import model

    monkeypatch.setattr(model, "_PERMUTE_CHUNK", chunk)
    b = model.TraceBuilder()
    rows = [(2, 50, 5), (1, 30, 10), (1, 10, 40), (2, 10, 1), (1, 10, 50), (1, 20, 3), (2, 40, 9)]  # (thread, ts, dur)
    for k, (tid, ts, dur) in enumerate(rows):
        b.h_name.append(b.intern(f"op{k}"))
        b.h_cat.append(model.CPU_OP_CODE)
        b.h_ts.append(ts)
        b.h_dur.append(dur)
        b.h_tid.append(b.thread(0, tid))
        b.h_corr.append(100 + k)
        b.h_shapes[k] = ([[k]], ["float"])
    for k, ts in enumerate([9, 3, 7, 1, 5]):
        b.add_device(model.KERNEL, f"k{k}", ts, 1, 0, 7, -1, ((k, 1, 1), (32, 1, 1)))
    t = b.build()
    want = sorted(range(len(rows)), key=lambda k: (b.h_tid[k], rows[k][1], -rows[k][2]))
    assert list(t.h_corr) == [100 + k for k in want]
    assert list(t.h_ts) == [rows[k][1] for k in want]
    assert [t.names[n] for n in t.h_name] == [f"op{k}" for k in want]
    assert [t.shapes[i][0] for i in range(len(rows))] == [[[k]] for k in want]
    assert list(t.d_ts) == [1, 3, 5, 7, 9]
    assert [t.device_name(j) for j in range(5)] == ["k3", "k1", "k4", "k2", "k0"]
    assert [t.launch_config[j][0][0] for j in range(5)] == [3, 1, 4, 2, 0]


@pytest.mark.parametrize(
    "rows",
    [
        [(1, 5, 3), (0, 5, 1), (0, 5, 9), (1, -7, 0), (0, -7, 2), (2, 0, 0)],  # ties on ts: the longer first
        [(0, -(2**62), 1), (0, 2**62, 5), (1, 0, 2**62), (0, 0, 0)],  # past the packed key's range: tuples
    ],
)
def test_host_sort_keys_order_as_thread_start_and_longest_first(rows: list[tuple[int, int, int]]) -> None:
    from autoprof.trace import model

    b = model.TraceBuilder()
    for tid, ts, dur in rows:
        b.h_tid.append(tid)
        b.h_ts.append(ts)
        b.h_dur.append(dur)
    keys = model._host_keys(b)
    got = sorted(range(len(rows)), key=keys.__getitem__)
    assert got == sorted(range(len(rows)), key=lambda k: (rows[k][0], rows[k][1], -rows[k][2]))
    assert isinstance(keys[0], tuple) == (rows[0][1] == -(2**62))


def test_events_ending_past_int64_load_and_are_analyzed(tmp_path: Path) -> None:
    """Times near int64's limit (an untrusted file's): an event's end past it is no error of the build's."""
    from autoprof.analysis import engine

    big = (2**63 - 1) // 1000  # µs: the largest start the ns columns hold
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": big - 5, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": big - 10, "dur": 1000},
    ]
    p = tmp_path / "late.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = chrome.load(p)
    assert t.n_host == 2 and t.h_parent[1] == 0  # the op nests in its step
    findings, failures = engine.analyze_trace(t)
    assert not failures and findings
