"""Host waits: the blocking calls (CUDA and HIP, :data:`autoprof.measure.runtime.BLOCKING_CALLS`) the host spends the
most time in, counted only while the device is idle: a wait during which the device stays busy costs nothing (the
host waits for work that runs anyway). Pinned-memory advice only for copies long enough to gain from it. The final
``cudaDeviceSynchronize`` (``hipDeviceSynchronize`` on ROCm) that torch's profiler issues when it stops (its flush of
the queued device work) is the profiler's, not the model's: no finding, and no share of the window's figures;
:func:`profiler_flush_ns` measures it for the window record."""

from __future__ import annotations

from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure import runtime
from autoprof.measure.units import duration, ms, percent, share
from autoprof.measure.views import Intervals, merge, profiler_flush_index, subtract, total, view
from autoprof.trace.model import GPU_MEMCPY, LAUNCH_CODES, Trace

RULE_BLOCKING = "blocking_calls"
HOST_BLOCKED = "host-blocked"
VERDICTS = {RULE_BLOCKING: (HOST_BLOCKED,)}
BLOCKING_SHARE = 0.10  # of the window, waiting with the device idle
#: A copy shorter than this on the device (a few hundred KB at PCIe rates) gains nothing from pinned memory: the host's
#: wait in its call is for the work queued before it (``.item()``, ``.cpu()`` of a small tensor), a synchronization.
COPY_ADVICE_FLOOR_NS = 20_000

_ADVICE = {  # by the call's kind in the runtime table
    runtime.ASYNC_COPY: "Device→host copies block when the destination is pageable: avoid .item()/.cpu() "
    "in the step, copy into pinned memory with non_blocking=True.",
    runtime.COPY: "A synchronous copy: use pinned memory and non_blocking=True, or move the copy out of the step.",
    runtime.FREE: "{call} synchronizes the device: the caching allocator is releasing memory "
    "(torch.cuda.empty_cache, fragmentation, or allocator settings); keep memory cached between steps.",
    runtime.STREAM_COPY: "torch's blocking copy on ROCm (.item(), .cpu(), .tolist(), printing a device tensor, a "
    "copy with non_blocking=False): keep values on the device in the step, copy with pinned memory and non_blocking=True.",
    runtime.FREE_HOST: "Freeing pinned memory synchronizes: reuse pinned buffers.",
}
_SMALL_COPY_ADVICE = (
    "{what}the copies are small ({copy} each on the device): the host waits for the work queued before them, as a "
    "synchronization does (.item(), .cpu(), printing a device tensor, a Python branch on a device value); keep the "
    "value on the device, or read it less often."
)
_DEFAULT_ADVICE = "Remove explicit synchronizations (torch.cuda.synchronize, .item(), printing device tensors) from the step."


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    blocked = _blocked(trace)
    return [blocked] if blocked is not None else []


def profiler_flush_ns(trace: Trace) -> int:
    """The profiler's flush (:func:`autoprof.measure.views.profiler_flush_index`: the last ``cudaDeviceSynchronize``
    or ``hipDeviceSynchronize``, after the steps and with no device work launched after it), its time; 0 when there
    is none."""
    flush = profiler_flush_index(trace)
    return int(trace.h_dur[flush]) if flush >= 0 else 0


def _blocked(trace: Trace) -> Finding | None:
    """The host blocked in synchronizing calls, while the device had nothing to run, for a share of the window worth
    naming."""
    window = view(trace).window_ns
    spans = _blocking_spans(trace)
    if not spans or window <= 0:
        return None
    win = view(trace)
    # the device is not idle while it runs work queued before the window either (the wait is for that work)
    busy = merge(win.device_busy + win.device_foreign)
    by_call = {name: total(iv) for name, iv in spans.items()}
    idle_by_call = {name: total(subtract(iv, busy)) for name, iv in spans.items()}
    total_blocked = total(merge([s for iv in spans.values() for s in iv]))
    idle = total(subtract(merge([s for iv in spans.values() for s in iv]), busy))
    if idle < BLOCKING_SHARE * window:
        return None
    name, t = max(idle_by_call.items(), key=lambda item: item[1])
    evidence: dict[str, Any] = {
        "blocked_ms": ms(total_blocked),
        "blocked_share": share(total_blocked, window),
        "idle_wait_ms": ms(idle),
        "idle_wait_share": share(idle, window),
        "busy_wait_ms": ms(total_blocked - idle),
        "top_call_ms": ms(t),
        "by_call_ms": {k: ms(n) for k, n in sorted(by_call.items(), key=lambda item: -item[1])},
        "idle_by_call_ms": {k: ms(n) for k, n in sorted(idle_by_call.items(), key=lambda item: -item[1])},
    }
    copy_ns = -1.0
    if name in runtime.COPY_CALLS:
        evidence["copy_kinds_ms"] = _copy_kinds_ms(trace, name)
        copy_ns = _copy_device_ns(trace, name)
        evidence["copy_device_us_per_copy"] = round(copy_ns / 1e3, 3) if copy_ns >= 0 else None
    overlapped = ""
    if total_blocked - idle >= BLOCKING_SHARE * window:
        overlapped = f"; another {percent(total_blocked - idle, window)} overlapped device work and cost nothing"
    # A trace with no device event recorded (kernels not recorded: a host-only trace) says nothing of the device
    while_ = (
        "while the device is idle" if len(trace.d_dur) else "(the trace recorded no device work: what the device did meanwhile is unknown)"
    )
    return Finding(
        RULE_BLOCKING,
        HOST_BLOCKED,
        "warning",
        f"the host is blocked {percent(idle, window)} of the window in synchronizing calls {while_}, most in {name} "
        f"({duration(t)}){overlapped}",
        _advice(name, copy_ns),
        evidence,
        tuple(k for k, _ in sorted(idle_by_call.items(), key=lambda item: -item[1])[:4]),
    )


def _blocking_spans(trace: Trace) -> dict[str, Intervals]:
    """Per blocking call name, the merged host spans of its calls in the window (the profiler's flush is not in
    it)."""
    win = view(trace)
    idx = trace.host_by_name()
    cat, ts, dur, host_in = trace.h_cat, trace.h_ts, trace.h_dur, win.host_in
    out: dict[str, Intervals] = {}
    for name in sorted(runtime.BLOCKING_CALLS):
        iv = [(ts[i], ts[i] + dur[i]) for i in idx.get(trace.name_id(name), ()) if cat[i] in LAUNCH_CODES and host_in[i]]
        if iv:
            out[name] = merge(win.clip(iv))  # a call that runs past the window counts only inside it
    return out


def _advice(call: str, copy_ns: float = -1.0) -> str:
    kind = runtime.RUNTIME_CALLS[call].kind if call in runtime.RUNTIME_CALLS else ""
    if call in runtime.COPY_CALLS and 0 <= copy_ns < COPY_ADVICE_FLOOR_NS:
        what = "torch's blocking copy on ROCm: " if kind == runtime.STREAM_COPY else ""
        text = _SMALL_COPY_ADVICE.format(what=what, copy=duration(copy_ns))
        return text[0].upper() + text[1:]
    return _ADVICE.get(kind, _DEFAULT_ADVICE).format(call=call)


def _copy_device_ns(trace: Trace, call: str) -> float:
    """The mean device time of the copies this call made in the window (-1: none linked)."""
    host_in = view(trace).host_in
    times = [
        trace.d_dur[d]
        for d in trace.device_indices(GPU_MEMCPY)
        if (h := trace.d_launch_host[d]) >= 0 and host_in[h] and trace.host_name(h) == call
    ]
    return sum(times) / len(times) if times else -1.0


def _copy_kinds_ms(trace: Trace, call: str) -> dict[str, float]:
    """The copies (Memcpy HtoD, DtoH, ...) a blocking copy call made, and the host time blocked in each."""
    host_in = view(trace).host_in
    kinds: dict[str, int] = {}
    for d in trace.device_indices(GPU_MEMCPY):
        h = trace.d_launch_host[d]
        if h >= 0 and trace.host_name(h) == call and host_in[h]:
            kinds[trace.device_name(d)] = kinds.get(trace.device_name(d), 0) + trace.h_dur[h]
    return {k: ms(n) for k, n in sorted(kinds.items(), key=lambda item: -item[1])[:4]}
