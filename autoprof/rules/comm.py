"""Communication not hidden behind compute: time in NCCL kernels during which no compute kernel runs."""

from __future__ import annotations

from typing import Any

from autoprof.findings import Finding
from autoprof.rules._common import duration, merge, noise_floor, percent, share, subtract, total, us, view
from autoprof.trace.model import DEVICE_CATEGORIES, KERNEL, Trace

RULE = "exposed_communication"
EXPOSED = "exposed-communication"
OVERLAPPED = "communication"  # most of it overlapped by compute
VERDICTS = {RULE: (EXPOSED, OVERLAPPED)}
EXPOSED_WARN = 0.20  # of the window


def check(trace: Trace, config: Any = None) -> list[Finding]:
    v = view(trace)
    kd = DEVICE_CATEGORIES.index(KERNEL)
    nccl = {nid for nid, n in enumerate(trace.names) if "nccl" in n.lower()}
    comm: list[tuple[int, int]] = []
    compute: list[tuple[int, int]] = []
    for t, d, c, nid, inside in zip(trace.d_ts, trace.d_dur, trace.d_cat, trace.d_name, v.device_in):
        if inside and c == kd:
            (comm if nid in nccl else compute).append((t, t + d))
    if not comm:
        return []
    kernel_ids = {nid for nid, c in zip(trace.d_name, trace.d_cat) if c == kd}
    comm_m = merge(comm)
    exposed = total(subtract(comm_m, merge(compute)))
    comm_t = total(comm_m)
    window = v.window_ns
    if comm_t < noise_floor(config) * window:
        return []  # a finding about nothing (22 µs of NCCL in a 66 ms window) is noise in a log pipeline
    warn = exposed >= EXPOSED_WARN * window
    return [
        Finding(
            RULE,
            EXPOSED if warn else OVERLAPPED,
            "warning" if warn else "info",
            f"communication (NCCL) takes {duration(comm_t)}; {percent(exposed, comm_t)} of it is not "
            f"overlapped by compute ({percent(exposed, window)} of the window)",
            "Overlap communication with compute: DDP bucket sizes (bucket_cap_mb), FSDP prefetching, or fewer, "
            "larger collectives.",
            {"comm_us": us(comm_t), "exposed_comm_us": us(exposed), "exposed_comm_share": share(exposed, comm_t),
             "exposed_window_share": share(exposed, window), "rank": trace.rank},
            tuple(sorted({trace.names[nid].split("(")[0][:60] for nid in kernel_ids & nccl})[:4]),
        )
    ]
