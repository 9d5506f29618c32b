"""A hostile user's inputs: one long JSON value in a trace (issue 12: the streaming reader's work must grow linearly
with the value's length, never quadratically), and hostile values for every configuration option, from
``configure()`` and from the environment (issue 13: a one-line ConfigError, or a warning, never another
exception), and for ``Steps.begin``'s step number."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autoprof
from autoprof import config
from autoprof.config import ConfigError, from_env
from autoprof.trace import chrome, jsonstream
from autoprof.trace.chrome import ReadSizes, TraceError

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

# -- issue 12: one long value --------------------------------------------------------------------------------

_EV = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
_SMALL = ReadSizes(chunk_chars=4096, batch_chars=4096)  # a long value is one of many reads and batches


def _long_value_trace(path: Path, where: str, n: int) -> Path:
    """Three events and a metadata key; the value where ``where`` says is about ``n`` characters long."""
    ev = json.dumps(_EV)
    if where == "metadata":
        text = '{"autoprof_note": "' + "y" * n + '", "traceEvents": [' + ev + ", " + ev + "]}"
    else:
        value = {"string": '"' + "x" * n + '"', "list": "[" + "1," * (n // 2 - 1) + "1]", "braces": '"' + "{" * n + '"'}[where]
        text = '{"traceEvents": [' + ev + ", " + ev[:-1] + ', "args": {"s": ' + value + "}}, " + ev + "]}"
    path.write_text(text)
    return path


class _Work:
    """Characters the reader's decoders read (a value decoded again from its start counts again) and the longest
    text the reader held, over one load."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.chars = 0
        self.held = 0
        real_init, real_more = jsonstream.StreamReader.__init__, jsonstream.StreamReader._more
        work = self

        def counted(decode: Any) -> Any:
            def run(buf: str, pos: int) -> Any:
                try:
                    value, end = decode(buf, pos)
                except BaseException:
                    work.chars += len(buf) - pos  # a failed decode read up to the end of what is held
                    raise
                work.chars += end - pos
                return value, end

            return run

        def init(reader: jsonstream.StreamReader, *args: Any, **kwargs: Any) -> None:
            real_init(reader, *args, **kwargs)
            reader._dec = counted(reader._dec)
            reader._scan = counted(reader._scan)

        def more(reader: jsonstream.StreamReader, at_least: int = 1) -> bool:
            got = real_more(reader, at_least)
            work.held = max(work.held, len(reader.buf))
            return got

        monkeypatch.setattr(jsonstream.StreamReader, "__init__", init)
        monkeypatch.setattr(jsonstream.StreamReader, "_more", more)


def _load_work(monkeypatch: pytest.MonkeyPatch, path: Path) -> _Work:
    with monkeypatch.context() as m:
        work = _Work(m)
        trace = chrome.load(path, workers=0, sizes=_SMALL)
    assert trace.n_events in (2, 3)
    return work


@pytest.mark.parametrize("where", ["string", "metadata", "list"])
def test_a_long_value_is_read_in_work_linear_in_its_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Each retry decodes the value from its start: one more read (4 KiB here, 1 MiB by default) per retry made a
    96 MB value take 20x json.load's time, a 250 MB one 100x. Reading as much again as is held makes the
    characters decoded in all a small multiple of the value's length, whatever its length."""
    n = 128 << 10
    short = _load_work(monkeypatch, _long_value_trace(tmp_path / "short.json", where, n))
    long = _load_work(monkeypatch, _long_value_trace(tmp_path / "long.json", where, 4 * n))
    # Quadratic work grows 16x for a 4x longer value (and was ~70x the value's length at 512 KiB).
    assert long.chars < 6 * short.chars, (short.chars, long.chars)
    assert long.chars < 6 * (4 * n), long.chars
    # The text held stays about twice the value (one read's worth and the look-ahead on top).
    assert long.held < 2 * (4 * n) + 8 * _SMALL.chunk_chars + 65536, long.held


def test_a_normal_trace_is_held_a_few_reads_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [dict(_EV, ts=i, args={"i": i}) for i in range(5000)]}))
    assert path.stat().st_size > 50 * _SMALL.chunk_chars
    work = _load_work_many(monkeypatch, path)
    assert work.held <= 2 * (_SMALL.chunk_chars + _SMALL.batch_chars) + 65536 + _SMALL.chunk_chars, work.held


def _load_work_many(monkeypatch: pytest.MonkeyPatch, path: Path) -> _Work:
    with monkeypatch.context() as m:
        work = _Work(m)
        assert chrome.load(path, workers=0, sizes=_SMALL).n_events == 5000
    return work


def test_a_long_value_full_of_braces_is_searched_for_a_cut_at_c_speed(tmp_path: Path) -> None:
    """Each '{' could begin the next event: trying them one by one in Python, over the whole held text again at
    each read, took 40 s for any value of 9 MB or more full of them. Now a few are tried, the rest go to a
    regular expression, and a retry searches only the text it read."""
    path = _long_value_trace(tmp_path / "braces.json", "braces", 256 << 10)
    lines = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is jsonstream.last_cut.__code__:

            def count(frame: Any, event: str, arg: Any) -> Any:
                nonlocal lines
                lines += event == "line"
                return count

            return count
        return None

    sys.settrace(tracer)
    try:
        trace = chrome.load(path, workers=0, sizes=_SMALL)
    finally:
        sys.settrace(None)
    assert trace.n_events == 3
    assert lines < 20_000, lines  # was about 1.5 million lines of Python for this 256 KiB value


def _reference_last_cut(buf: str, pos: int, end: int) -> tuple[int, int] | None:
    """The last '}' ',' '{' (whitespace around the comma) in buf[pos:end], '}' after pos: one '{' at a time."""
    for j in range(end - 1, pos, -1):
        if buf[j] != "{":
            continue
        k = j - 1
        while k > pos and buf[k] in " \t\n\r":
            k -= 1
        if buf[k] != "," or k <= pos:
            continue
        k -= 1
        while k > pos and buf[k] in " \t\n\r":
            k -= 1
        if buf[k] == "}" and k > pos:
            return k, j
    return None


@settings(max_examples=400, deadline=None)
@given(
    buf=st.text(alphabet="{}, \n,{}x", max_size=60),
    data=st.data(),
    quick=st.integers(0, 3),
)
def test_the_cut_search_finds_what_the_one_by_one_search_finds(buf: str, data: Any, quick: int) -> None:
    pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
    end = data.draw(st.integers(pos, len(buf)))
    lo = data.draw(st.integers(0, len(buf) + 1))
    old = jsonstream._QUICK_CANDIDATES, jsonstream._COMMA_CANDIDATES
    jsonstream._QUICK_CANDIDATES = quick  # the comma search or the regular expression takes over after `quick`
    jsonstream._COMMA_CANDIDATES = data.draw(st.sampled_from([-1, 1, 4096]))  # -1: always the regex; 4096: commas
    try:
        got = jsonstream.last_cut(buf, pos, end, lo)
    finally:
        jsonstream._QUICK_CANDIDATES, jsonstream._COMMA_CANDIDATES = old
    want = _reference_last_cut(buf, pos, end)
    assert got == (want if want is not None and want[1] >= max(lo, pos + 1) else None)


def _malformed(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "body",
    [
        '"' + "x" * 100_000,  # a string never closed (truncated file)
        '"' + "x" * 100_000 + '\\q"}]}',  # a bad escape at the end of a long string
        '"' + "x" * 50_000 + "\n" + "x" * 50_000 + '"}]}',  # a control character inside a long string
        "[" + "1," * 50_000 + "x]}]}",  # a bad token at the end of a long list
        "[" + "1," * 50_000,  # a long list never closed
    ],
)
def test_a_long_malformed_value_is_named_as_when_read_whole(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The message (problem, position in the file) does not depend on how much is read at a time, nor on
    msgspec's skipping a long value before json decodes it (``_LONG``: from what length it does)."""
    path = _malformed(tmp_path / "bad.json", '{"traceEvents": [' + json.dumps(_EV) + ', {"ph": "X", "args": {"s": ' + body)
    messages = []
    for long in (1 << 30, 10_000):
        monkeypatch.setattr(jsonstream, "_LONG", long)
        for sizes in (_SMALL, ReadSizes(chunk_chars=1 << 24, batch_chars=1 << 24), ReadSizes(chunk_chars=4096, batch_chars=0)):
            with pytest.raises(TraceError) as e:
                chrome.load(path, workers=0, sizes=sizes)
            messages.append(str(e.value))
    assert len(set(messages)) == 1 and "at char" in messages[0], messages


def test_a_long_value_is_decoded_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """msgspec skips a long value (building nothing) until the buffer holds its end, and json decodes it then,
    once, rather than once per doubling of the buffer; a lone surrogate (msgspec calls it truncated input)
    still reads as json reads it."""
    monkeypatch.setattr(jsonstream, "_LONG", 10_000)
    decoded: list[int] = []
    real = json.JSONDecoder.raw_decode

    def spy(self: json.JSONDecoder, s: str, idx: int = 0) -> Any:
        if len(s) - idx > 100_000:
            decoded.append(len(s) - idx)
        return real(self, s, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", spy)
    path = _long_value_trace(tmp_path / "long.json", "string", 2_000_000)
    assert chrome.load(path, workers=0, sizes=_SMALL).n_events == 3
    assert len(decoded) == 1, decoded  # without the skip: one decode per doubling from 64 KiB, ~6
    p = tmp_path / "surrogate.json"
    p.write_text(
        '{"traceEvents": [' + json.dumps(_EV) + ', {"ph": "X", "cat": "cpu_op", "name": "' + "y" * 300_000 + '\\ud800", "ts": 1}]}'
    )
    t = chrome.load(p, workers=0, sizes=_SMALL)
    assert "y" * 300_000 + "\ud800" in t.names


def test_a_value_past_the_limit_is_refused_with_the_decoders_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "_MAX_VALUE", 200_000)
    path = _long_value_trace(tmp_path / "big.json", "string", 300_000)
    with pytest.raises(TraceError, match=r"not valid JSON \(Unterminated string starting at\)$"):
        chrome.load(path, workers=0, sizes=_SMALL)
    assert chrome.load(_long_value_trace(tmp_path / "ok.json", "string", 150_000), workers=0, sizes=_SMALL).n_events == 3


# -- issue 13: hostile configuration values -----------------------------------------------------------------


class _HostileError(Exception):
    pass


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise _HostileError("hostile")


class _HostileInt(int):
    """An int whose comparisons, hash, index and conversions raise."""

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __index__ = __int__ = __float__ = __bool__ = _boom


class _HostileFloat(float):
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __float__ = __bool__ = _boom


class _HostileStr(str):
    __eq__ = __ne__ = __hash__ = __contains__ = strip = split = __str__ = __repr__ = _boom


class _KeyStr(str):
    """A str a dict can hold as a key (its hash is a str's), whose comparisons and methods raise."""

    __hash__ = str.__hash__
    __eq__ = __ne__ = __contains__ = strip = split = __str__ = __repr__ = _boom


class _NoEq:
    __eq__ = __hash__ = __index__ = __int__ = __float__ = __bool__ = __repr__ = __iter__ = __len__ = _boom


class _LyingClass:
    """``isinstance`` asks the object its ``__class__``: this one raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise _HostileError("hostile")


class _PretendsInt:
    """``isinstance(x, int)`` is True for this one, and ``int(x)`` raises."""

    __class__ = int  # type: ignore[assignment]
    __int__ = __index__ = _boom


class _BadPath(os.PathLike[str]):
    def __init__(self, result: Any) -> None:
        self.result = result

    def __fspath__(self) -> Any:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class _BadList(list[Any]):
    __iter__ = __len__ = _boom


class _BadDict(dict[Any, Any]):
    items = keys = values = __iter__ = __getitem__ = _boom


class _BadAttrs:
    __getattr__ = __getattribute__ = _boom


class _BadRule:
    """A callable whose rule_id raises."""

    def __call__(self) -> None:
        pass

    @property
    def rule_id(self) -> str:
        raise _HostileError("hostile")


def _deep(n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        out = [out]
    return out


_HOSTILE = [
    None,
    True,
    False,
    0,
    -1,
    2**63,
    2**70,
    10**400,
    -(10**400),
    float("nan"),
    float("inf"),
    -float("inf"),
    -0.0,
    1e-300,
    "",
    " ",
    "\0",
    "x\n",
    b"/tmp/x",
    bytearray(b"x"),
    [],
    [0, "x"],
    [True],
    [[0]],
    [2**70],
    [None],
    [0, 1.5],
    {0, "x"},
    (0, float("nan")),
    frozenset({-1}),
    {},
    {"flops_per_s": 1},
    {"flops_per_s": 10**400, "bytes_per_s": 1},
    {"flops_per_s": float("nan"), "bytes_per_s": 1.0},
    {"flops_per_s": True, "bytes_per_s": 1.0},
    {_KeyStr("flops_per_s"): 1.0, "bytes_per_s": 1.0},
    {"flops_per_s": _HostileFloat(1.0), "bytes_per_s": _HostileInt(1)},
    _HostileInt(3),
    _HostileFloat(0.1),
    _HostileStr("/tmp/x"),
    [_HostileInt(0)],
    _NoEq(),
    [_NoEq()],
    _LyingClass(),
    [_LyingClass()],
    _PretendsInt(),
    [_PretendsInt()],
    _BadPath(_HostileError("hostile")),
    _BadPath(b"/tmp/x"),
    _BadPath(""),
    _BadPath(_HostileStr("/tmp/y")),
    _BadPath(None),
    _BadList([0]),
    _BadDict(flops_per_s=1.0, bytes_per_s=1.0),
    _BadAttrs(),
    [_BadRule()],
    [_BadAttrs()],
    _deep(100_000),
    object(),
    print,
    Path("/tmp/autoprof-hostile"),
    Path(""),
]

_FIELDS = [f.name for f in dataclasses.fields(config.Config)]


def _valid(key: str, value: Any) -> None:
    """What a config may hold in field ``key``: plain types, in range (the field's check returns it unchanged)."""
    kinds: dict[str, tuple[type, ...]] = {
        "sink": (str, type(None)),
        "trace_dir": (str, type(None)),
        "ranks": (tuple, type(None)),
        "peaks": (dict, type(None)),
        "noise_floor": (float,),
        "cross_rank_timeout_s": (float,),
        "rules": (tuple,),
    }
    if key in ("enabled", "record_shapes", "background", "report"):
        assert type(value) is bool
    elif key in (*config.SCHEDULE_KEYS, "top_ops"):
        assert type(value) is int
    elif key in kinds:
        assert type(value) in kinds[key], (key, value)
    if key == "ranks" and value is not None:
        assert all(type(r) is int for r in value) and list(value) == sorted(set(value))
    if key == "peaks" and value is not None:
        assert all(type(k) is str and type(v) is float and math.isfinite(v) for k, v in value.items())
    assert config.CHECKS[key](value) == value or value is None or key == "logger"


def _try_configure(options: dict[str, Any]) -> None:
    """configure(**options) either changes the config to valid values or raises a one-line ConfigError naming
    an option, and changes nothing."""
    before = config.SWITCH.config
    try:
        cfg = autoprof.configure(**options)
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message and len(message) < 400, message
        assert any(message.startswith(k) for k in options) or message.startswith("unknown option"), message
        assert config.SWITCH.config is before
        return
    assert config.SWITCH.config is cfg
    for f in dataclasses.fields(cfg):
        _valid(f.name, getattr(cfg, f.name))
    config.SWITCH.set(before)


@pytest.mark.parametrize("key", _FIELDS)
def test_every_option_takes_hostile_values_with_a_config_error_or_a_valid_value(key: str) -> None:
    for value in _HOSTILE:
        _try_configure({key: value})


def _hostile(i: int) -> Any:
    return _HOSTILE[i]


_ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.integers(0, len(_HOSTILE) - 1).map(_hostile),  # (sampled_from would repr them: some raise)
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers() | st.text(max_size=3), max_size=3)
        | st.dictionaries(st.sampled_from(["flops_per_s", "bytes_per_s", "x"]) | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=st.dictionaries(st.sampled_from(_FIELDS), _ANY, min_size=1, max_size=3))
def test_configure_with_arbitrary_values_is_accepted_valid_or_a_config_error_that_changes_nothing(options: dict[str, Any]) -> None:
    _try_configure(options)


def test_ranks_with_a_string_is_a_config_error_naming_ranks() -> None:
    """Asked three times: configure(ranks=[0, 'x']) sorted the list first, and raised TypeError."""
    before = config.SWITCH.config
    hostile: list[Any] = [[0, "x"], {0, "x"}, [_NoEq(), _NoEq()], [1, None]]
    for ranks in hostile:
        with pytest.raises(ConfigError, match=r"^ranks must be a list of integers from 0 to 10000000, or None, not "):
            autoprof.configure(ranks=ranks, active=2)
        assert config.SWITCH.config is before


@pytest.mark.parametrize(
    "options",
    [
        {"active": True},
        {"top_ops": 2**70},
        {"noise_floor": 10**400},  # was OverflowError
        {"cross_rank_timeout_s": -(10**400)},  # was OverflowError
        {"peaks": {"flops_per_s": 10**400, "bytes_per_s": 1}},  # was OverflowError
        {"sink": _BadPath(_HostileError("hostile"))},  # was _HostileError
        {"sink": b"/tmp/x"},
        {"trace_dir": _LyingClass()},  # was _HostileError (isinstance)
        {"ranks": _BadList([0])},
        {"wait": _PretendsInt()},
        {"rules": [_BadRule()]},
        {"logger": _BadAttrs()},
        {"enabled": _deep(100_000)},
    ],
)
def test_a_hostile_value_is_a_one_line_config_error(options: dict[str, Any]) -> None:
    (key,) = options
    before = config.SWITCH.config
    with pytest.raises(ConfigError) as e:
        autoprof.configure(**options)
    assert str(e.value).startswith(f"{key} must be ") and "\n" not in str(e.value)
    assert config.SWITCH.config is before


def test_subclasses_of_int_float_and_str_are_held_as_plain_values() -> None:
    cfg = autoprof.configure(
        top_ops=_HostileInt(5),
        noise_floor=_HostileFloat(0.25),
        sink=_HostileStr("/tmp/autoprof-hostile.jsonl"),
        trace_dir=_BadPath(_HostileStr("/tmp/autoprof-hostile")),
        ranks=(_HostileInt(3), 1, 3),
        peaks={"flops_per_s": _HostileInt(10), "bytes_per_s": _HostileFloat(2.0)},
    )
    assert (cfg.top_ops, cfg.noise_floor, cfg.sink, cfg.trace_dir) == (5, 0.25, "/tmp/autoprof-hostile.jsonl", "/tmp/autoprof-hostile")
    assert type(cfg.top_ops) is int and type(cfg.noise_floor) is float and type(cfg.sink) is str and type(cfg.trace_dir) is str
    assert cfg.ranks == (1, 3) and all(type(r) is int for r in cfg.ranks)
    assert cfg.peaks == {"flops_per_s": 10.0, "bytes_per_s": 2.0}
    # sorted with their own comparisons, ranks of int subclasses raised _HostileError; a dict subclass is read as a dict
    assert autoprof.configure(ranks=[_HostileInt(2), _HostileInt(1)]).ranks == (1, 2)
    peaks = {"flops_per_s": 1.0, "bytes_per_s": 2.0}
    assert autoprof.configure(peaks=_BadDict(peaks)).peaks == peaks
    assert autoprof.configure(peaks={_KeyStr("flops_per_s"): 1.0, "bytes_per_s": 2.0}).peaks == peaks


def test_a_hostile_option_name_is_one_line() -> None:
    with pytest.raises(ConfigError, match="unknown option") as e:
        options: dict[str, Any] = {"bad\nname": 1}
        autoprof.configure(**options)
    assert "\n" not in str(e.value)


_ENV_NAMES = [*config.ENV, *config._BOOL_ENV, "AUTOPROF_DISABLE"]


def _from_env_warns_at_most(env: dict[str, Any]) -> config.Config:
    config._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = from_env(env)
    for w in caught:
        assert issubclass(w.category, RuntimeWarning) and "\n" not in str(w.message)
    cfg.validate()
    for f in dataclasses.fields(cfg):
        _valid(f.name, getattr(cfg, f.name))
    return cfg


@settings(max_examples=300, deadline=None)
@given(
    env=st.dictionaries(
        st.sampled_from(_ENV_NAMES),
        st.text(max_size=12)
        | st.sampled_from(["nan", "inf", "-0", "1e400", "1" * 5000, "0,x", "1,,2", " 3 ", "all", "True", "\0", "9" * 30, "0x10", "1_0"]),
        max_size=4,
    )
)
def test_environment_values_warn_or_are_valid_never_raise(env: dict[str, str]) -> None:
    _from_env_warns_at_most(env)


@pytest.mark.parametrize("name", _ENV_NAMES)
def test_an_environment_value_that_is_not_text_warns(name: str) -> None:
    """from_env(env) takes any mapping (tests pass dicts): a value that is not a str was AttributeError."""
    config._warned.clear()
    with pytest.warns(RuntimeWarning, match=name):
        env: dict[str, Any] = {name: 3}
        cfg = from_env(env)
    assert cfg == config.Config()
