"""Device idle gaps between consecutive kernels on a stream, split as HolisticTraceAnalysis's idle-time
breakdown does: *host wait* when the next kernel was launched only after the previous one had finished
(the device waited for the host), *other wait* when it was launched earlier but started late (waiting on
another stream, an event, a copy)."""

from __future__ import annotations

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.units import share, us
from autoprof.measure.views import View, view
from autoprof.trace.model import DEVICE_WORK_CODES, Trace

RULE = "device_idle_gaps"
DEVICE_IDLE = "device-idle"
VERDICTS = {RULE: (DEVICE_IDLE,)}
IDLE_SHARE = 0.30
MIN_GAP_NS = 1_000


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    win = view(trace)
    if not win.device_busy:
        return []
    span = max(e for _, e in win.device_busy) - min(s for s, _ in win.device_busy)
    idle = span - sum(e - s for s, e in win.device_busy)
    if span <= 0 or idle < IDLE_SHARE * span:
        return []
    streams = _streams(trace, win)
    gaps = _Gaps()
    for on_stream in streams.values():
        gaps.read(trace, on_stream)
    cause = _cause(gaps, len(streams))
    return [
        Finding(
            RULE,
            DEVICE_IDLE,
            "warning",
            f"the device is idle {share(idle, span):.0%} of its active span, mostly {cause}",
            "Host-wait gaps shrink with less per-op host work (larger ops, torch.compile, CUDA graphs); "
            "other-wait gaps with fewer cross-stream syncs and overlapped copies.",
            {
                "device_span_us": us(span),
                "device_idle_us": us(idle),
                "device_idle_share": share(idle, span),
                "host_wait_us": us(gaps.host_wait),
                "other_wait_us": us(gaps.other_wait),
                "unlinked_wait_us": us(gaps.unlinked),
                "gap_count": gaps.count,
                "stream_count": len(streams),
            },
        )
    ]


def _cause(gaps: _Gaps, streams: int) -> str:
    """What the gaps mostly wait for, as far as the trace tells: the host (the next work launched after the gap
    opened), something on the device side (launched before it: another stream, an event, a copy; on one stream, an
    event or a sync), or nothing known (the next work's launch is not in the trace)."""
    whole = gaps.host_wait + gaps.other_wait + gaps.unlinked
    if whole and gaps.host_wait >= 0.5 * whole:
        return "waiting for the host to launch work"
    if whole and gaps.other_wait >= 0.5 * whole:
        return (
            "waiting on other streams, events or copies"
            if streams > 1
            else "with its next work already launched (waiting on an event, a copy or a sync)"
        )
    if whole and gaps.unlinked >= 0.5 * whole:
        return "for reasons the trace does not show (the work after those gaps has no recorded launch)"
    return "waiting on the host and on the device's own dependencies alike"


def _streams(trace: Trace, win: View) -> dict[tuple[int, int], list[int]]:
    """The window's device work (kernels, copies, memsets) per (device, stream), in time order."""
    streams: dict[tuple[int, int], list[int]] = {}
    for d, (c, inside, dev, stream) in enumerate(zip(trace.d_cat, win.device_in, trace.d_device, trace.d_stream)):
        if inside and c in DEVICE_WORK_CODES:
            streams.setdefault((dev, stream), []).append(d)
    return streams


class _Gaps:
    """Gaps between consecutive work on a stream, split by cause: the next launch came after the gap opened
    (the device waited for the host), or not (it waited on other streams, events or copies)."""

    def __init__(self) -> None:
        self.count = 0
        self.host_wait = 0
        self.other_wait = 0
        self.unlinked = 0  # gaps whose next work has no recorded launch: their cause is unknown

    def read(self, trace: Trace, on_stream: list[int]) -> None:
        d_ts, d_dur, launch_host, h_ts = trace.d_ts, trace.d_dur, trace.d_launch_host, trace.h_ts
        for a, b in zip(on_stream, on_stream[1:]):
            end_a = d_ts[a] + d_dur[a]
            gap = d_ts[b] - end_a
            if gap < MIN_GAP_NS:
                continue
            self.count += 1
            h = launch_host[b]
            if h < 0:
                self.unlinked += gap
            elif h_ts[h] >= end_a:
                self.host_wait += gap
            else:
                self.other_wait += gap
