"""Host waits: the blocking calls (CUDA and HIP, :data:`autoprof.rules._runtime.BLOCKING_CALLS`) the host spends the
most time in. The final ``cudaDeviceSynchronize`` (``hipDeviceSynchronize`` on ROCm) that torch's profiler issues when
it stops (its flush of the queued device work) is the profiler's, not the model's: no finding, and no share of the
window's figures; :func:`profiler_flush_ns` measures it for the window record."""

from __future__ import annotations

from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules import _runtime
from autoprof.rules._common import blocked_by_call, duration, ms, profiler_flush_index, share, view
from autoprof.trace.model import GPU_MEMCPY, Trace

RULE_BLOCKING = "blocking_calls"
HOST_BLOCKED = "host-blocked"
VERDICTS = {RULE_BLOCKING: (HOST_BLOCKED,)}
BLOCKING_SHARE = 0.10

_ADVICE = {  # by the call's kind in the runtime table
    _runtime.ASYNC_COPY: "Device→host copies block when the destination is pageable: avoid .item()/.cpu() "
    "in the step, copy into pinned memory with non_blocking=True.",
    _runtime.COPY: "A synchronous copy: use pinned memory and non_blocking=True, or move the copy out of the step.",
    _runtime.FREE: "{call} synchronizes the device: the caching allocator is releasing memory "
    "(torch.cuda.empty_cache, fragmentation, or allocator settings); keep memory cached between steps.",
    _runtime.STREAM_COPY: "torch's blocking copy on ROCm (.item(), .cpu(), .tolist(), printing a device tensor, a "
    "copy with non_blocking=False): keep values on the device in the step, copy with pinned memory and non_blocking=True.",
    _runtime.FREE_HOST: "Freeing pinned memory synchronizes: reuse pinned buffers.",
}
_DEFAULT_ADVICE = "Remove explicit synchronizations (torch.cuda.synchronize, .item(), printing device tensors) from the step."


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    blocked = _blocked(trace)
    return [blocked] if blocked is not None else []


def profiler_flush_ns(trace: Trace) -> int:
    """The profiler's flush (:func:`autoprof.rules._common.profiler_flush_index`: the last ``cudaDeviceSynchronize``
    or ``hipDeviceSynchronize``, after the steps and with no device work launched after it), its time; 0 when there
    is none."""
    flush = profiler_flush_index(trace)
    return int(trace.h_dur[flush]) if flush >= 0 else 0


def _blocked(trace: Trace) -> Finding | None:
    """The host blocked in synchronizing runtime calls for a share of the window worth naming."""
    window = view(trace).window_ns
    by_call = blocked_by_call(trace)
    if not by_call or window <= 0:
        return None
    name, t = max(by_call.items(), key=lambda item: item[1])
    total_blocked = sum(by_call.values())
    if total_blocked < BLOCKING_SHARE * window:
        return None
    evidence: dict[str, Any] = {
        "blocked_ms": ms(total_blocked),
        "blocked_share": share(total_blocked, window),
        "top_call_ms": ms(t),
        "by_call_ms": {k: ms(n) for k, n in sorted(by_call.items(), key=lambda item: -item[1])},
    }
    if name in _runtime.COPY_CALLS:
        evidence["copy_kinds_ms"] = _copy_kinds_ms(trace, name)
    return Finding(
        RULE_BLOCKING,
        HOST_BLOCKED,
        "warning",
        f"the host is blocked {share(total_blocked, window):.0%} of the window in synchronizing calls, most in {name} ({duration(t)})",
        _advice(name),
        evidence,
        tuple(k for k, _ in sorted(by_call.items(), key=lambda item: -item[1])[:4]),
    )


def _advice(call: str) -> str:
    kind = _runtime.RUNTIME_CALLS[call].kind if call in _runtime.RUNTIME_CALLS else ""
    return _ADVICE.get(kind, _DEFAULT_ADVICE).format(call=call)


def _copy_kinds_ms(trace: Trace, call: str) -> dict[str, float]:
    """The copies (Memcpy HtoD, DtoH, ...) a blocking copy call made, and the host time blocked in each."""
    host_in = view(trace).host_in
    kinds: dict[str, int] = {}
    for d in trace.device_indices(GPU_MEMCPY):
        h = trace.d_launch_host[d]
        if h >= 0 and trace.host_name(h) == call and host_in[h]:
            kinds[trace.device_name(d)] = kinds.get(trace.device_name(d), 0) + trace.h_dur[h]
    return {k: ms(n) for k, n in sorted(kinds.items(), key=lambda item: -item[1])[:4]}
