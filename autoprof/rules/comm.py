"""Communication not hidden behind compute: time in NCCL (or RCCL) kernels during which no compute kernel runs; the
kernels are the runtime table's (:func:`autoprof.measure.runtime.is_collective_kernel`, every naming in use)."""

from __future__ import annotations

from dataclasses import dataclass

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.runtime import collective_kind, is_collective_kernel
from autoprof.measure.units import duration, percent, share, us
from autoprof.measure.views import Intervals, merge, subtract, total, view
from autoprof.rules._common import noise_floor
from autoprof.trace.model import KERNEL_CODE, Trace

RULE = "exposed_communication"
EXPOSED = "exposed-communication"
OVERLAPPED = "communication"  # most of it overlapped by compute
WAITING_FOR_PEER = "waiting-for-peer"  # set by the cross-rank comparison: the time waits for a straggler
VERDICTS = {RULE: (EXPOSED, OVERLAPPED, WAITING_FOR_PEER)}
EXPOSED_WARN = 0.20  # of the window


@dataclass(frozen=True)
class Exposure:
    """The window's collective kernels on the device: their merged spans, the part of them no compute kernel
    overlaps (``exposed``: the device runs nothing but communication), and their time per collective kind."""

    comm: Intervals
    exposed: Intervals
    by_kind: dict[str, int]
    kernel_names: tuple[str, ...]

    @property
    def comm_ns(self) -> int:
        return total(self.comm)

    @property
    def exposed_ns(self) -> int:
        return total(self.exposed)


def exposure(trace: Trace) -> Exposure:
    """The window's collective kernels and their exposed time (computed once per trace: the regime's device
    reading counts the exposed time as communication)."""
    return trace.derive(_exposure_of)


def _exposure_of(trace: Trace) -> Exposure:
    win = view(trace)
    nccl = {nid for nid, name in enumerate(trace.names) if is_collective_kernel(name)}
    comm, compute, by_kind = _kernel_spans(trace, win.device_in, nccl)
    kernel_ids = {nid for nid, c in zip(trace.d_name, trace.d_cat) if c == KERNEL_CODE}
    comm_m = merge(comm)
    names = tuple(sorted({trace.names[nid].split("(")[0][:60] for nid in kernel_ids & nccl})[:4])
    return Exposure(comm_m, subtract(comm_m, merge(compute)), by_kind, names)


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    found = exposure(trace)
    if not found.comm:
        return []
    exposed = found.exposed_ns
    comm_t = found.comm_ns
    window = view(trace).device_window_ns  # the window on the device: the regime's device reading's too
    if comm_t <= 0 or window <= 0 or comm_t < noise_floor(config) * window:
        return []  # a finding about nothing (22 µs of NCCL in a 66 ms window) is noise in a log pipeline
    warn = exposed >= EXPOSED_WARN * window
    return [
        Finding(
            RULE,
            EXPOSED if warn else OVERLAPPED,
            "warning" if warn else "info",
            f"communication (NCCL) takes {duration(comm_t)}; {percent(exposed, comm_t)} of it is not "
            f"overlapped by compute ({percent(exposed, window)} of the window)",
            "Overlap communication with compute: DDP bucket sizes (bucket_cap_mb), FSDP prefetching, or fewer, larger collectives.",
            {
                "comm_us": us(comm_t),
                "exposed_comm_us": us(exposed),
                "exposed_comm_share": share(exposed, comm_t),
                "exposed_window_share": share(exposed, window),
                "rank": trace.rank,
                "collectives_us": {kind: us(ns) for kind, ns in sorted(found.by_kind.items(), key=lambda item: -item[1])},
            },
            found.kernel_names,
        )
    ]


def _kernel_spans(
    trace: Trace, device_in: list[bool], nccl: set[int]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], dict[str, int]]:
    """The window's collective kernels' spans, its other kernels' spans, and the collectives' time per kind."""
    comm: list[tuple[int, int]] = []
    compute: list[tuple[int, int]] = []
    by_kind: dict[str, int] = {}
    for ts, dur, code, nid, inside in zip(trace.d_ts, trace.d_dur, trace.d_cat, trace.d_name, device_in):
        if not inside or code != KERNEL_CODE:
            continue
        if nid in nccl:
            comm.append((ts, ts + dur))
            kind = collective_kind(trace.names[nid])
            by_kind[kind] = by_kind.get(kind, 0) + dur
        else:
            compute.append((ts, ts + dur))
    return comm, compute, by_kind
