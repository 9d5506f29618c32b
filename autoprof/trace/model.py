"""The one trace model every rule reads. No torch import.

A :class:`Trace` is built by a loader (``live`` from a closed profiler window, ``chrome`` from a saved
file) through a :class:`TraceBuilder`, then frozen: events live in compact columns (``array`` of ints for
times, interned name ids), the host-side op tree gets per-event parents and self times, device work is
linked to the runtime call that launched it, and steps are resolved.
"""

from __future__ import annotations

import gc
import re
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, MutableSequence, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress
from operator import add, itemgetter
from typing import Any, TypeVar

from autoprof.trace import _columns

_T = TypeVar("_T")

# Normalized categories. Host-side ones first, device-side after.
CPU_OP = "cpu_op"
USER_ANNOTATION = "user_annotation"
PYTHON_FUNCTION = "python_function"
CUDA_RUNTIME = "cuda_runtime"
CUDA_DRIVER = "cuda_driver"
KERNEL = "kernel"
GPU_MEMCPY = "gpu_memcpy"
GPU_MEMSET = "gpu_memset"
GPU_USER_ANNOTATION = "gpu_user_annotation"

HOST_CATEGORIES = (CPU_OP, USER_ANNOTATION, PYTHON_FUNCTION, CUDA_RUNTIME, CUDA_DRIVER)
DEVICE_CATEGORIES = (KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_USER_ANNOTATION)
#: Category codes, written once: a host event's ``h_cat`` is its category's index in HOST_CATEGORIES, a device
#: event's ``d_cat`` its index in DEVICE_CATEGORIES.
HOST_CODE: dict[str, int] = {c: k for k, c in enumerate(HOST_CATEGORIES)}
DEVICE_CODE: dict[str, int] = {c: k for k, c in enumerate(DEVICE_CATEGORIES)}
CPU_OP_CODE = HOST_CODE[CPU_OP]
USER_ANNOTATION_CODE = HOST_CODE[USER_ANNOTATION]
PYTHON_FUNCTION_CODE = HOST_CODE[PYTHON_FUNCTION]
CUDA_RUNTIME_CODE = HOST_CODE[CUDA_RUNTIME]
LAUNCH_CODES = frozenset({CUDA_RUNTIME_CODE, HOST_CODE[CUDA_DRIVER]})  # runtime/driver calls: launches
KERNEL_CODE = DEVICE_CODE[KERNEL]
DEVICE_WORK_CODES = frozenset(DEVICE_CODE[c] for c in (KERNEL, GPU_MEMCPY, GPU_MEMSET))  # device time that is work

# Old (2021) and alternative spellings found in real traces, mapped to the current ones.
CATEGORY_ALIASES: dict[str, str] = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": USER_ANNOTATION,
    "python_function": PYTHON_FUNCTION,
    "python": PYTHON_FUNCTION,
    "cuda_runtime": CUDA_RUNTIME,
    "runtime": CUDA_RUNTIME,
    "cuda_driver": CUDA_DRIVER,
    "driver": CUDA_DRIVER,
    "kernel": KERNEL,
    "gpu_memcpy": GPU_MEMCPY,
    "memcpy": GPU_MEMCPY,
    "gpu_memset": GPU_MEMSET,
    "memset": GPU_MEMSET,
    "gpu_user_annotation": GPU_USER_ANNOTATION,
}

#: What the loaders keep of an op, by its name (loading needs no more; what the ops are, their families, is
#: ``autoprof.measure.ops``, and ``tests/test_measure.py`` checks the two agree): its input shapes and dtypes for
#: ``SHAPED_OPS`` only (the live loader asks kineto per event, a round trip each, and most ops' shapes are never
#: read), and its recorded concrete inputs (stride, padding, dilation, groups, transposed flag, output mask:
#: normalized by :func:`conv_args`) for these, the convolutions at every level a call passes through.
ARG_OPS = frozenset(
    {
        "aten::_conv_depthwise2d",
        "aten::_convolution",
        "aten::_convolution_mode",
        "aten::_nnpack_spatial_convolution",
        "aten::_slow_conv2d_backward",
        "aten::_slow_conv2d_forward",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::convolution",
        "aten::convolution_backward",
        "aten::cudnn_convolution",
        "aten::cudnn_convolution_backward",
        "aten::cudnn_convolution_backward_input",
        "aten::cudnn_convolution_backward_weight",
        "aten::cudnn_convolution_transpose",
        "aten::miopen_convolution",
        "aten::miopen_convolution_transpose",
        "aten::miopen_depthwise_convolution",
        "aten::mkldnn_convolution",
        "aten::mkldnn_convolution_backward",
        "aten::slow_conv3d",
        "aten::slow_conv3d_forward",
        "aten::slow_conv_dilated2d",
        "aten::slow_conv_dilated3d",
        "aten::slow_conv_transpose2d",
        "aten::slow_conv_transpose3d",
        "aten::thnn_conv2d",
    }
)
#: The ops whose shapes the loaders keep: the convolutions (``ARG_OPS``) and these.
SHAPED_OPS = ARG_OPS | frozenset(
    {
        "aten::_embedding_bag",
        "aten::_embedding_bag_forward_only",
        "aten::_fused_rms_norm",
        "aten::_fused_rms_norm_backward",
        "aten::_log_softmax",
        "aten::_log_softmax_backward_data",
        "aten::_native_batch_norm_legit",
        "aten::_softmax",
        "aten::_softmax_backward_data",
        "aten::_to_copy",
        "aten::abs",
        "aten::add",
        "aten::add_",
        "aten::addbmm",
        "aten::addcdiv_",
        "aten::addcmul_",
        "aten::addmm",
        "aten::amax",
        "aten::argsort",
        "aten::baddbmm",
        "aten::batch_norm",
        "aten::bmm",
        "aten::cat",
        "aten::clamp",
        "aten::clamp_",
        "aten::clone",
        "aten::contiguous",
        "aten::copy_",
        "aten::cos",
        "aten::div",
        "aten::div_",
        "aten::dropout",
        "aten::embedding",
        "aten::embedding_backward",
        "aten::embedding_bag",
        "aten::embedding_dense_backward",
        "aten::exp",
        "aten::fill_",
        "aten::gather",
        "aten::gelu",
        "aten::gelu_backward",
        "aten::group_norm",
        "aten::hardtanh",
        "aten::index",
        "aten::index_add",
        "aten::index_add_",
        "aten::index_put_",
        "aten::index_select",
        "aten::layer_norm",
        "aten::lerp_",
        "aten::linear",
        "aten::log_softmax",
        "aten::masked_fill",
        "aten::masked_fill_",
        "aten::masked_scatter_",
        "aten::masked_select",
        "aten::matmul",
        "aten::max",
        "aten::mean",
        "aten::mish",
        "aten::mm",
        "aten::msort",
        "aten::mul",
        "aten::mul_",
        "aten::native_batch_norm",
        "aten::native_batch_norm_backward",
        "aten::native_dropout",
        "aten::native_dropout_backward",
        "aten::native_group_norm",
        "aten::native_group_norm_backward",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::neg",
        "aten::nll_loss_backward",
        "aten::nll_loss_forward",
        "aten::norm",
        "aten::pow",
        "aten::relu",
        "aten::relu_",
        "aten::rms_norm",
        "aten::rsqrt",
        "aten::scatter",
        "aten::scatter_",
        "aten::scatter_add",
        "aten::scatter_add_",
        "aten::sigmoid",
        "aten::sigmoid_backward",
        "aten::silu",
        "aten::silu_backward",
        "aten::sin",
        "aten::softmax",
        "aten::sort",
        "aten::sqrt",
        "aten::stack",
        "aten::sub",
        "aten::sub_",
        "aten::sum",
        "aten::take",
        "aten::tanh",
        "aten::tanh_backward",
        "aten::threshold_backward",
        "aten::to",
        "aten::topk",
        "aten::var",
        "aten::where",
        "aten::zero_",
    }
)
#: The argument that says ``is_causal`` in each attention op's recorded concrete inputs.
CAUSAL_ARG = {
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_scaled_dot_product_efficient_attention_backward": 11,
    "aten::_scaled_dot_product_cudnn_attention_backward": 14,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": 7,
}
_ARG_INT = re.compile(r"-?[0-9]{1,18}")


def _conv_arg(v: Any) -> Any:
    """One recorded concrete input, as a value both loaders give alike: an int, a bool, a tuple of those, a short
    word ('same'), or None (a tensor, or anything else). The live profiler hands Python values, a chrome trace
    their text ('[1, 1]', 'False', '1', '')."""
    t = type(v)
    if t is bool or t is int:
        return v if t is bool or -_INT64_MAX <= v <= _INT64_MAX else None
    if t is list or t is tuple:
        if len(v) > 16:
            return None
        items = tuple(x if type(x) is bool or (type(x) is int and -_INT64_MAX <= x <= _INT64_MAX) else None for x in v)
        return None if None in items else items  # (one level: a nested list is no argument a convolution takes)
    if t is not str or not v or len(v) > 200:
        return None
    if v in ("True", "False"):
        return v == "True"
    if _ARG_INT.fullmatch(v):
        return int(v)
    if v[0] == "[" and v[-1] == "]":
        words = [w.strip() for w in v[1:-1].split(",")] if v[1:-1].strip() else []
        return _conv_arg([int(w) if _ARG_INT.fullmatch(w) else (w == "True") if w in ("True", "False") else None for w in words])
    return v if v.isalpha() and len(v) <= 16 else None


def conv_args(concrete: Any) -> tuple[Any, ...] | None:
    """A convolution's recorded concrete inputs (stride, padding, ... by position), normalized (``_conv_arg``), or
    None when the trace has none. Never raises: the values are untrusted input."""
    if not isinstance(concrete, (list, tuple)) or not concrete or len(concrete) > 32:
        return None
    args = tuple(_conv_arg(v) for v in concrete)
    return args if any(a is not None for a in args) else None


def causal_flag(name: str, concrete: Any) -> bool | None:
    """Whether an attention call was causal, from its recorded concrete inputs (None: not said)."""
    k = CAUSAL_ARG.get(name)
    if k is None or not isinstance(concrete, (list, tuple)) or len(concrete) <= k:
        return None
    value = concrete[k]
    if value is True or value == "True":
        return True
    if value is False or value == "False":
        return False
    return None


# No-op ops that return their input for ordinary tensors (three per matmul). Both loaders drop them: they
# carry no work, no rule reads them, and their sub-microsecond spans fold into the parent op's self time.
DROPPED_OPS = frozenset({"aten::resolve_conj", "aten::resolve_neg"})

SHAPED_PREFIXES = ("aten::conv", "aten::_conv", "aten::scaled_dot_product", "aten::_scaled_dot_product")

FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu", "async"})

_STEP_RE = re.compile(r"^ProfilerStep#([0-9]{1,18})$")  # ASCII digits that fit an int64; anything else is no step

_INT64_MAX = (1 << 63) - 1
_DIGITS = re.compile(r"[0-9]{1,18}")


def untrusted_int(v: Any, default: int = -1) -> int:
    """An integer read from a trace file (untrusted input): an int within int64, an integral float, or a string
    whose last word is 1 to 18 ASCII digits ("stream 7"); anything else gives ``default``. Never raises (no
    Unicode digits such as "²", no 5,000-digit numbers past Python's int-string limit)."""
    t = type(v)
    if t is int:
        return v if -_INT64_MAX <= v <= _INT64_MAX else default
    if t is float:
        return int(v) if v.is_integer() and -_INT64_MAX <= v <= _INT64_MAX else default
    if t is str and len(v) <= 256:
        word = v.rsplit(" ", 1)[-1]
        if _DIGITS.fullmatch(word):
            return int(word)
    return default


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a loader builds many small objects.

    Loading creates hundreds of thousands of short-lived containers and no reference cycles; with the
    collector on, repeated full collections over the growing heap cost as much as the load itself
    (measured: 0.35 s → 0.8 s for a 75k-event window). Reference counting still frees everything.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def normalize_category(cat: str | None) -> str | None:
    if not cat:
        return None
    return CATEGORY_ALIASES.get(cat.lower())


_PERMUTE_CHUNK = 1 << 14  # indices taken at a time: the transient tuple of values stays a few MB


def _permuted(cols: Sequence[array[int]], order: list[int]) -> list[array[int]]:
    """Each of ``cols`` in the given order of its indices (one ``itemgetter`` per chunk of the order, shared by the
    columns: measured 2x faster than ``map(col.__getitem__, order)``)."""
    out = [array(col.typecode) for col in cols]
    for at in range(0, len(order), _PERMUTE_CHUNK):
        part = order[at : at + _PERMUTE_CHUNK]
        if len(part) == 1:  # itemgetter of one index gives the value, not a tuple
            for col, new in zip(cols, out):
                new.append(col[part[0]])
            continue
        get = itemgetter(*part)
        for col, new in zip(cols, out):
            new.extend(get(col))
    return out


_KEY_BITS = 62  # each field of a host event's packed sort key: times and durations below 2**62 ns (146 years)


def _host_keys(builder: TraceBuilder) -> list[Any]:
    """Each host event's sort key, (thread, ts, -dur) packed into one int (about 48 bytes an event, against 128 for
    the tuple: the build's peak memory). A trace whose times span 2**62 ns or more, or whose thread rows do not fit
    31 bits, gets the tuples (the same order)."""
    ts, dur, tid = builder.h_ts, builder.h_dur, builder.h_tid
    if not ts:
        return []
    lo, top = min(ts), (1 << _KEY_BITS) - 1
    if max(ts) - lo > top or max(dur) > top or min(dur) < 0 or not 0 <= min(tid) <= max(tid) < 1 << 31:
        return list(zip(tid, ts, [-d for d in dur]))
    bits = _KEY_BITS
    return [((t << bits | (s - lo)) << bits) | (top - d) for t, s, d in zip(tid, ts, dur)]


@dataclass(frozen=True)
class Step:
    """One step: a ``ProfilerStep#N`` span (or a target annotation where a trace has none)."""

    number: int
    start_ns: int
    end_ns: int
    tid: int
    host_index: int  # index of the step's own host event, -1 when synthesized

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class TraceBuilder:
    """Collects events from a loader; :meth:`build` freezes them into a :class:`Trace`."""

    source: str = "<memory>"
    names: list[str] = field(default_factory=list)
    _name_ids: dict[str, int] = field(default_factory=dict)
    threads: list[tuple[Any, Any]] = field(default_factory=list)
    _thread_ids: dict[tuple[Any, Any], int] = field(default_factory=dict)
    # host columns
    h_name: array[int] = field(default_factory=lambda: array("l"))
    h_cat: array[int] = field(default_factory=lambda: array("b"))
    h_ts: array[int] = field(default_factory=lambda: array("q"))
    h_dur: array[int] = field(default_factory=lambda: array("q"))
    h_tid: array[int] = field(default_factory=lambda: array("l"))
    h_corr: array[int] = field(default_factory=lambda: array("q"))
    h_shapes: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    # device columns
    d_name: array[int] = field(default_factory=lambda: array("l"))
    d_cat: array[int] = field(default_factory=lambda: array("b"))
    d_ts: array[int] = field(default_factory=lambda: array("q"))
    d_dur: array[int] = field(default_factory=lambda: array("q"))
    d_device: array[int] = field(default_factory=lambda: array("l"))
    d_stream: array[int] = field(default_factory=lambda: array("q"))
    d_corr: array[int] = field(default_factory=lambda: array("q"))
    d_launch: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # grid/block per kernel
    # memory columns: the allocator's ``[memory]`` instants (``profile_memory=True``), empty without them
    m_ts: array[int] = field(default_factory=lambda: array("q"))
    m_tid: array[int] = field(default_factory=lambda: array("l"))  # thread row (as the host events')
    m_dtype: array[int] = field(default_factory=lambda: array("l"))  # c10 DeviceType: 0 CPU, 1 CUDA, ...
    m_dindex: array[int] = field(default_factory=lambda: array("l"))  # device index (-1: the host's)
    m_addr: array[int] = field(default_factory=lambda: array("q"))  # -1: not recorded (live windows)
    m_bytes: array[int] = field(default_factory=lambda: array("q"))  # > 0 an allocation, < 0 a free
    m_total: array[int] = field(default_factory=lambda: array("q"))  # allocated after it (-1: not recorded)
    m_reserved: array[int] = field(default_factory=lambda: array("q"))  # reserved after it (-1: not recorded)
    rank: int = 0
    world_size: int = 1
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def intern(self, name: str) -> int:
        i = self._name_ids.get(name)
        if i is None:
            i = len(self.names)
            self._name_ids[name] = i
            self.names.append(name)
        return i

    def thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        i = self._thread_ids.get(key)
        if i is None:
            i = len(self.threads)
            self._thread_ids[key] = i
            self.threads.append(key)
        return i

    def add_device(
        self,
        cat: str,
        name: str,
        ts_ns: int,
        dur_ns: int,
        device: int,
        stream: int,
        corr: int = -1,
        launch: tuple[Any, ...] | None = None,
    ) -> int:
        i = len(self.d_ts)
        if cat == GPU_USER_ANNOTATION:
            # A span on the GPU lane, launched by nothing: a correlation id it carries is its annotation's op
            # id (the live loader gets one from every such event), another id space than the launches'.
            corr = -1
        self.d_name.append(self.intern(name))
        self.d_cat.append(DEVICE_CODE[cat])
        self.d_ts.append(ts_ns)
        self.d_dur.append(max(dur_ns, 0))
        self.d_device.append(device)
        self.d_stream.append(stream)
        self.d_corr.append(corr)
        if launch is not None:
            self.d_launch[i] = launch
        return i

    def add_memory(self, ts_ns: int, tid: int, dtype: int, dindex: int, addr: int, nbytes: int, total: int, reserved: int) -> None:
        """One allocator event (``[memory]``): ``nbytes`` > 0 allocated, < 0 freed."""
        self.m_ts.append(ts_ns)
        self.m_tid.append(tid)
        self.m_dtype.append(dtype)
        self.m_dindex.append(dindex)
        self.m_addr.append(addr)
        self.m_bytes.append(nbytes)
        self.m_total.append(total)
        self.m_reserved.append(reserved)

    def build(self, target: str | None = None) -> Trace:
        return Trace(self, target)


#: The memory columns, in the order :meth:`TraceBuilder.add_memory` takes them.
MEMORY_COLUMNS = ("m_ts", "m_tid", "m_dtype", "m_dindex", "m_addr", "m_bytes", "m_total", "m_reserved")


class Derived:
    """The cache of values derived from one trace (the rules' window view, launch links, blocking calls, the
    roofline), owned by the trace and filled on first use: a rule asks with the function that computes the value
    (``trace.derive(make)``), which is also its key. A trace is never changed once built, so a
    value never goes stale; derived values are not part of the trace's data (never in ``metadata``, never
    saved)."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[object, Any] = {}

    def get(self, make: Callable[[Trace], _T], trace: Trace, key: object = None) -> _T:
        """``make(trace)``, computed once; kept under ``key`` (default: ``make`` itself)."""
        key = make if key is None else key
        try:
            return self._values[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._values[key] = make(trace)
            return value

    def __len__(self) -> int:
        return len(self._values)


class Trace:
    """A frozen, analysable trace. Times are integer nanoseconds."""

    def __init__(self, builder: TraceBuilder, target: str | None = None) -> None:
        self.source = builder.source
        self.names = builder.names
        self._name_ids = builder._name_ids
        self.threads = builder.threads
        self.rank = builder.rank
        self.world_size = builder.world_size
        self.device_properties = builder.device_properties
        self.metadata = builder.metadata
        self.shapes = builder.h_shapes
        self._by_name: dict[int, list[int]] | None = None
        self.derived = Derived()
        self._sort_host(builder)
        ends = self._build_tree()
        self._sort_device(builder)
        self._sort_memory(builder)
        self._link_launches()
        self.steps = self._find_steps(target, ends)
        self.target = target

    def derive(self, make: Callable[[Trace], _T], key: object = None) -> _T:
        """A value derived from this trace by ``make``, computed on first use and kept in :attr:`derived` (under
        ``key``, default ``make``)."""
        return self.derived.get(make, self, key)

    # -- construction helpers -------------------------------------------------------------------
    def _sort_host(self, builder: TraceBuilder) -> None:
        """Host columns sorted per thread by (ts, -dur), so that parents precede children; shapes follow."""
        n = len(builder.h_ts)
        cols = (builder.h_name, builder.h_cat, builder.h_ts, builder.h_dur, builder.h_tid, builder.h_corr)
        np = _columns.numpy(n)
        order: Any
        if np is not None:  # the same order and columns as below, over the columns' buffers (see _columns)
            order = _columns.host_order(np, builder.h_ts, builder.h_dur, builder.h_tid)  # (None: in order)
            if order is not None:
                moved = _columns.permuted(np, cols, order)
                where = _columns.inverse(np, order) if builder.h_shapes else []
        else:
            order = sorted(range(n), key=_host_keys(builder).__getitem__)
            if order == list(range(n)):
                order = None
            else:
                moved = _permuted(cols, order)
                where = sorted(range(n), key=order.__getitem__) if builder.h_shapes else []  # the inverse: old -> new
        if order is None:  # already in order (one thread, events in start order)
            self.h_name, self.h_cat, self.h_ts, self.h_dur, self.h_tid, self.h_corr = cols
            self.shapes = dict(builder.h_shapes)
            return
        self.h_name, self.h_cat, self.h_ts, self.h_dur, self.h_tid, self.h_corr = moved
        self.shapes = {where[old]: v for old, v in builder.h_shapes.items()}

    def _sort_device(self, builder: TraceBuilder) -> None:
        """Device columns sorted by time; launch configurations follow."""
        m = len(builder.d_ts)
        cols = (builder.d_name, builder.d_cat, builder.d_ts, builder.d_dur, builder.d_device, builder.d_stream, builder.d_corr)
        launch = builder.d_launch
        np = _columns.numpy(m)
        if np is not None:  # the same order and columns as below (see _columns)
            found = _columns.device_order(np, builder.d_ts, builder.d_dur)
            if found is None:  # already in order: copies, as the permutation below makes
                self.d_name, self.d_cat, self.d_ts, self.d_dur, self.d_device, self.d_stream, self.d_corr = (col[:] for col in cols)
                self.launch_config = dict(launch)
                return
            self.d_name, self.d_cat, self.d_ts, self.d_dur, self.d_device, self.d_stream, self.d_corr = _columns.permuted(np, cols, found)
            dorder = found.tolist()
        else:
            dorder = sorted(range(m), key=list(zip(builder.d_ts, builder.d_dur)).__getitem__)
            self.d_name, self.d_cat, self.d_ts, self.d_dur, self.d_device, self.d_stream, self.d_corr = _permuted(cols, dorder)
        self.launch_config = {new: launch[old] for new, old in enumerate(dorder) if old in launch} if launch else {}

    def _sort_memory(self, builder: TraceBuilder) -> None:
        """Memory columns sorted by time (stable: events of one instant keep their recorded order)."""
        cols = [getattr(builder, name) for name in MEMORY_COLUMNS]
        ts = builder.m_ts
        if any(ts[k] > ts[k + 1] for k in range(len(ts) - 1)):
            order = sorted(range(len(ts)), key=ts.__getitem__)
            cols = _permuted(cols, order)
        self.m_ts: array[int]
        self.m_tid: array[int]
        self.m_dtype: array[int]
        self.m_dindex: array[int]
        self.m_addr: array[int]
        self.m_bytes: array[int]
        self.m_total: array[int]
        self.m_reserved: array[int]
        (self.m_ts, self.m_tid, self.m_dtype, self.m_dindex, self.m_addr, self.m_bytes, self.m_total, self.m_reserved) = cols

    @property
    def n_memory(self) -> int:
        """The allocator events recorded (0 unless the window recorded memory)."""
        return len(self.m_ts)

    def _link_launches(self) -> None:
        """Launch links: device event -> the host runtime/driver call with the same correlation id (-1: none)."""
        h_corr = self.h_corr
        np = _columns.numpy(len(h_corr) + len(self.d_corr))
        if np is not None:  # the same links as below (see _columns)
            cats = _columns.view(np, self.h_cat)
            launches = np.isin(cats, sorted(LAUNCH_CODES)) & (_columns.view(np, h_corr) >= 0)
            self.d_launch_host = _columns.last_index_of(np, h_corr, launches, self.d_corr)
            return
        by_corr = {h_corr[i]: i for i, k in enumerate(self.h_cat) if k in LAUNCH_CODES and h_corr[i] >= 0}
        get = by_corr.get
        self.d_launch_host = array("l", [get(c, -1) if c >= 0 else -1 for c in self.d_corr])

    def _build_tree(self) -> MutableSequence[int]:
        """Parents and self times of the host events; returns each event's end time."""
        n = len(self.h_ts)
        ts, dur, tids = self.h_ts, self.h_dur, self.h_tid
        ends: MutableSequence[int] | None = None
        np = _columns.numpy(n)
        if np is not None:
            ends = _columns.ends(np, ts, dur)  # (None where a sum could pass int64: below)
        if ends is None:
            try:  # an array: a list of them is ~26 MB more at 654k events, the build's peak
                ends = array("q", map(add, ts, dur))
            except OverflowError:  # an end past int64 (a file's times near its limit): Python's ints
                ends = list(map(add, ts, dur))
        parent = [-1] * n
        child_sum = [0] * n
        # The open events on the current thread: the innermost one in locals (top, top_end; -1: none), the
        # ones around it on the stack, each as its index and end (no lookup of ``ends`` per comparison).
        stack: list[int] = []
        push, pop = stack.append, stack.pop
        top, top_end = -1, 0
        cur_tid = None
        i = -1
        for t, start, end in zip(tids, ts, ends):
            i += 1
            if t != cur_tid:
                stack.clear()
                top = -1
                cur_tid = t
            # Only an event that ends within an open one nests in it; a partial overlap is a sibling.
            while top >= 0:
                if top_end <= start or top_end < end:
                    if stack:
                        top_end = pop()
                        top = pop()
                    else:
                        top = -1
                else:
                    parent[i] = top
                    child_sum[top] += end - start
                    push(top)
                    push(top_end)
                    break
            top, top_end = i, end
        self.h_parent = array("l", parent)
        own = _columns.self_times(np, dur, child_sum) if np is not None else None
        self.h_self = own if own is not None else array("q", [d - c if d > c else 0 for d, c in zip(dur, child_sum)])
        return ends

    def _find_steps(self, target: str | None, ends: MutableSequence[int]) -> list[Step]:
        """The ``ProfilerStep#N`` annotations, else the target's outermost calls, in start order; clamped to the
        recorded activity."""
        steps = self._profiler_steps() or (self._target_calls(target) if target else [])
        steps.sort(key=lambda step: step.start_ns)
        return self._clamped(steps, ends) if steps else steps

    def _profiler_steps(self) -> list[Step]:
        step_ids = {}
        for nid, name in enumerate(self.names):  # match each distinct name once
            match = _STEP_RE.match(name)
            if match:
                step_ids[nid] = int(match.group(1))
        if not step_ids:
            return []
        if len(step_ids) == 1:  # (one pass in C: the rows of that name)
            (only,) = step_ids
            rows: Iterable[int] = compress(range(len(self.h_name)), map(only.__eq__, self.h_name))
        else:
            rows = compress(range(len(self.h_name)), map(step_ids.__contains__, self.h_name))
        names = self.h_name
        return [Step(step_ids[names[i]], self.h_ts[i], self.h_ts[i] + self.h_dur[i], self.h_tid[i], i) for i in rows]

    def _target_calls(self, target: str) -> list[Step]:
        """Without step annotations (a trace of a decorated call): the target's outermost calls, numbered."""
        target_id = self._name_ids.get(target)
        calls = [i for i in range(len(self.h_ts)) if self.h_name[i] == target_id and self.h_parent[i] < 0]
        return [Step(k, self.h_ts[i], self.h_ts[i] + self.h_dur[i], self.h_tid[i], i) for k, i in enumerate(calls)]

    def _clamped(self, steps: list[Step], ends: MutableSequence[int]) -> list[Step]:
        """A step left open when the profiler stopped can claim to run far past the trace: clamp each step to the
        last recorded activity that is not itself a step (its host event shortened alike)."""
        for i in {step.host_index for step in steps}:  # ``ends`` is ours to overwrite: a step is no activity
            if i >= 0:
                ends[i] = 0
        last = max(ends, default=0)
        if len(self.d_ts):
            last = max(last, max(ts + dur for ts, dur in zip(self.d_ts, self.d_dur)))
        if not last:
            return steps
        clamped = []
        for step in steps:
            if step.end_ns > last:
                end = max(last, step.start_ns)
                i = step.host_index
                cut = step.end_ns - end
                if i >= 0:
                    self.h_dur[i] -= cut
                    self.h_self[i] = max(self.h_self[i] - cut, 0)
                step = Step(step.number, step.start_ns, end, step.tid, i)
            clamped.append(step)
        return clamped

    # -- queries --------------------------------------------------------------------------------
    @property
    def n_host(self) -> int:
        return len(self.h_ts)

    @property
    def n_device(self) -> int:
        return len(self.d_ts)

    @property
    def n_events(self) -> int:
        return len(self.h_ts) + len(self.d_ts)

    @property
    def has_device(self) -> bool:
        return KERNEL_CODE in self.d_cat

    def name_id(self, name: str) -> int:
        return self._name_ids.get(name, -1)

    def host_by_name(self) -> dict[int, list[int]]:
        """Interned name -> the host events of that name, in index order. Built once, on first use: rules
        that look for a few names read these lists instead of scanning every event."""
        idx = self._by_name
        if idx is None and (np := _columns.numpy(len(self.h_name))) is not None:
            idx = self._by_name = _columns.rows_by_value(np, self.h_name)  # the same lists as below (see _columns)
        if idx is None:
            lists: defaultdict[int, list[int]] = defaultdict(list)
            for i, nid in enumerate(self.h_name):
                lists[nid].append(i)
            idx = self._by_name = dict(lists)
        return idx

    def host_named(self, name_ids: Iterable[int]) -> list[int]:
        """Host events with any of these interned names, in index order (read-only: it may be the index's own
        list)."""
        idx = self.host_by_name()
        lists = [idx[n] for n in set(name_ids) if n in idx]
        if len(lists) == 1:
            return lists[0]
        return sorted(i for lst in lists for i in lst)

    def host_name(self, i: int) -> str:
        return self.names[self.h_name[i]]

    def host_cat(self, i: int) -> str:
        return HOST_CATEGORIES[self.h_cat[i]]

    def device_name(self, i: int) -> str:
        return self.names[self.d_name[i]]

    def device_cat(self, i: int) -> str:
        return DEVICE_CATEGORIES[self.d_cat[i]]

    def host_indices(self, cat: str) -> Iterator[int]:
        code = HOST_CODE[cat]
        return (i for i, c in enumerate(self.h_cat) if c == code)

    def device_indices(self, *cats: str) -> Iterator[int]:
        codes = {DEVICE_CODE[c] for c in cats}
        return (i for i, c in enumerate(self.d_cat) if c in codes)

    def span_ns(self) -> tuple[int, int]:
        """The window: first step start to last step end, or all host events where there are no steps."""
        if self.steps:
            return self.steps[0].start_ns, max(s.end_ns for s in self.steps)
        if not len(self.h_ts):
            if len(self.d_ts):
                return self.d_ts[0], max(t + d for t, d in zip(self.d_ts, self.d_dur))
            return 0, 0
        return min(self.h_ts), max(t + d for t, d in zip(self.h_ts, self.h_dur))

    def step_of_host(self) -> array[int]:
        """For each host event, the index into ``steps`` of the step whose span holds it, else -1.

        A step lies on one thread but other threads (autograd's backward thread, a data loader) work
        inside its time span too, so membership is by time: an event belongs to the step that started
        last at or before it, if that step has not ended.
        """
        n = len(self.h_ts)
        out = array("l", [-1]) * n
        if not self.steps:
            return out
        import bisect

        steps = self.steps
        # Where each step is the last one started: [start, next start), cut at its end.
        regions = []
        for k, s in enumerate(steps):
            stop = min(s.end_ns, steps[k + 1].start_ns) if k + 1 < len(steps) else s.end_ns
            if stop > s.start_ns:
                regions.append((k, s.start_ns, stop))
        # Host events are sorted by time within each thread's contiguous run.
        ts, tids = self.h_ts, self.h_tid
        begin = 0
        while begin < n:
            tid = tids[begin]
            end = bisect.bisect_right(tids, tid, begin)  # threads are sorted: each one's events are one run
            for k, lo_ns, hi_ns in regions:
                lo = bisect.bisect_left(ts, lo_ns, begin, end)
                hi = bisect.bisect_left(ts, hi_ns, lo, end)
                if hi > lo:
                    out[lo:hi] = array("l", [k]) * (hi - lo)
            begin = end
        return out

    def step_of_device(self, host_step: array[int] | None = None) -> array[int]:
        """For each device event, the step whose host code launched it (by correlation). Device work with no
        recorded launch (kernels of driver APIs kineto does not record, such as ``cuGraphLaunch`` or
        ``cuMemsetD*Async``) is placed by time instead: the step that started last at or before it, if that
        step has not ended. Else -1."""
        hs = host_step if host_step is not None else self.step_of_host()
        out = array("l", (hs[h] if h >= 0 else -1 for h in self.d_launch_host))
        if not self.steps:
            return out
        import bisect

        steps = self.steps
        starts = [s.start_ns for s in steps]
        annotation = DEVICE_CODE[GPU_USER_ANNOTATION]  # spans, not work: never placed
        for d, h in enumerate(self.d_launch_host):
            if h >= 0 or self.d_cat[d] == annotation:
                continue
            t = self.d_ts[d]
            k = bisect.bisect_right(starts, t) - 1
            if k >= 0 and t < steps[k].end_ns:
                out[d] = k
        return out


def split_processes(trace: Trace, pids: Iterable[Any]) -> list[Trace]:
    """The trace's processes ``pids``, each as a trace of its own: a file merged from several ranks' windows
    (TraceLens's TraceFuse moves each rank's pids and correlation ids apart) holds several processes' host events.
    A process is a pid of the host's threads; its device work is what its own runtime calls launched (device work
    with no recorded launch is no process's and is left out), its allocator events its threads'. One trace per pid,
    in the order given."""
    parts = []
    for pid in pids:
        b = TraceBuilder(source=trace.source, names=trace.names, _name_ids=trace._name_ids, threads=trace.threads)
        b._thread_ids = {key: i for i, key in enumerate(trace.threads)}
        b.rank, b.world_size = trace.rank, trace.world_size
        b.device_properties, b.metadata = trace.device_properties, dict(trace.metadata)
        host = [i for i, t in enumerate(trace.h_tid) if trace.threads[t][0] == pid]
        mine = set(host)
        for col in ("h_name", "h_cat", "h_ts", "h_dur", "h_tid", "h_corr"):
            src = getattr(trace, col)
            getattr(b, col).extend(src[i] for i in host)
        b.h_shapes = {new: trace.shapes[old] for new, old in enumerate(host) if old in trace.shapes}
        device = [j for j, h in enumerate(trace.d_launch_host) if h in mine]
        for col in ("d_name", "d_cat", "d_ts", "d_dur", "d_device", "d_stream", "d_corr"):
            src = getattr(trace, col)
            getattr(b, col).extend(src[j] for j in device)
        b.d_launch = {new: trace.launch_config[old] for new, old in enumerate(device) if old in trace.launch_config}
        memory = [k for k, t in enumerate(trace.m_tid) if 0 <= t < len(trace.threads) and trace.threads[t][0] == pid]
        for col in MEMORY_COLUMNS:
            src = getattr(trace, col)
            getattr(b, col).extend(src[k] for k in memory)
        parts.append(b.build(trace.target))
    return parts


def step_cpu_of(value: Any) -> dict[str, list[int]] | None:
    """A live window's per-step CPU readings (its metadata's ``step_cpu``; a kept window's ``autoprof_step_cpu``): each
    recorded step's ``wall_ns``, thread ``cpu_ns`` and ``runqueue_ns`` (-1 where the run-queue wait is not known), and where
    recorded its ``minflt`` (minor page faults; left out unless one non-negative integer per step); None
    unless it is three lists of integers of one length (at most 1,000,000 steps), the wall and CPU times not negative."""
    if not isinstance(value, dict):
        return None
    lists = [value.get(k) for k in ("wall_ns", "cpu_ns", "runqueue_ns")]
    if not all(isinstance(v, list) for v in lists):
        return None
    walls, cpus, waits = lists
    assert isinstance(walls, list) and isinstance(cpus, list) and isinstance(waits, list)
    if not walls or len(walls) > 1_000_000 or not len(walls) == len(cpus) == len(waits):
        return None
    if not all(type(v) is int for v in (*walls, *cpus, *waits)) or any(v < 0 for v in (*walls, *cpus)) or any(w < -1 for w in waits):
        return None
    out = {"wall_ns": list(walls), "cpu_ns": list(cpus), "runqueue_ns": list(waits)}
    faults = value.get("minflt")  # optional: left out (the rest kept) unless one non-negative integer per step
    if isinstance(faults, list) and len(faults) == len(walls) and all(type(v) is int and v >= 0 for v in faults):
        out["minflt"] = list(faults)
    return out
