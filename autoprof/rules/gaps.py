"""Device idle gaps between consecutive kernels on a stream, split as HolisticTraceAnalysis's idle-time
breakdown does: *host wait* when the next kernel was launched only after the previous one had finished
(the device waited for the host), *other wait* when it was launched earlier but started late (waiting on
another stream, an event, a copy)."""

from __future__ import annotations

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules._common import share, us, view
from autoprof.trace.model import DEVICE_CODE, GPU_MEMCPY, GPU_MEMSET, KERNEL, Trace

RULE = "device_idle_gaps"
DEVICE_IDLE = "device-idle"
VERDICTS = {RULE: (DEVICE_IDLE,)}
IDLE_SHARE = 0.30
MIN_GAP_NS = 1_000


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    v = view(trace)
    if not v.device_busy:
        return []
    work = {DEVICE_CODE[c] for c in (KERNEL, GPU_MEMCPY, GPU_MEMSET)}
    streams: dict[tuple[int, int], list[int]] = {}
    for d, (c, inside, dev, stream) in enumerate(zip(trace.d_cat, v.device_in, trace.d_device, trace.d_stream)):
        if inside and c in work:
            streams.setdefault((dev, stream), []).append(d)
    span_start = min(s for s, _ in v.device_busy)
    span_end = max(e for _, e in v.device_busy)
    span = span_end - span_start
    busy = sum(e - s for s, e in v.device_busy)
    idle = span - busy
    host_wait = other_wait = 0
    gaps = 0
    d_ts, d_dur, launch_host, h_ts = trace.d_ts, trace.d_dur, trace.d_launch_host, trace.h_ts
    for evs in streams.values():
        for a, b in zip(evs, evs[1:]):
            end_a = d_ts[a] + d_dur[a]
            gap = d_ts[b] - end_a
            if gap < MIN_GAP_NS:
                continue
            gaps += 1
            h = launch_host[b]
            if h >= 0 and h_ts[h] >= end_a:
                host_wait += gap
            else:
                other_wait += gap
    if span <= 0 or idle < IDLE_SHARE * span:
        return []
    split = host_wait + other_wait
    hw_share = host_wait / split if split else 0.0
    cause = "waiting for the host to launch work" if hw_share >= 0.5 else "waiting on other streams, events or copies"
    return [
        Finding(
            RULE,
            DEVICE_IDLE,
            "warning",
            f"the device is idle {share(idle, span):.0%} of its active span, mostly {cause}",
            "Host-wait gaps shrink with less per-op host work (larger ops, torch.compile, CUDA graphs); "
            "other-wait gaps with fewer cross-stream syncs and overlapped copies.",
            {"device_span_us": us(span), "device_idle_us": us(idle), "device_idle_share": share(idle, span),
             "host_wait_us": us(host_wait), "other_wait_us": us(other_wait), "gap_count": gaps,
             "stream_count": len(streams)},
        )
    ]
