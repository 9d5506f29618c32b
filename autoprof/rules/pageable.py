"""Host-to-device copies from pageable memory (``Memcpy HtoD (Pageable -> Device)``).

A copy from pageable (not pinned) host memory cannot be a DMA from where the data lies: the driver stages it
through a pinned buffer, and ``cudaMemcpyAsync`` returns only once the data is staged, so the host waits for it
and the copy cannot overlap the host's next work. The cost read here is the host time in the calls that launched
those copies (or their device time where longer), as a share of the window.
"""

from __future__ import annotations

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.units import duration, percent, share, us
from autoprof.measure.views import view
from autoprof.rules._common import noise_floor
from autoprof.trace.model import DEVICE_CODE, GPU_MEMCPY, Trace

RULE = "pageable_copies"
PAGEABLE = "pageable-host-memory"
VERDICTS = {RULE: (PAGEABLE,)}
_MEMCPY = DEVICE_CODE[GPU_MEMCPY]
WARN_SHARE = 0.05  # a warning from this share of the window on; below it, information


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    ids = {nid for nid, name in enumerate(trace.names) if name.startswith("Memcpy HtoD") and "Pageable" in name}
    if not ids:
        return []
    win = view(trace)
    copies = [
        d for d, (nid, cat, inside) in enumerate(zip(trace.d_name, trace.d_cat, win.device_in)) if inside and cat == _MEMCPY and nid in ids
    ]
    if not copies:
        return []
    device_ns = sum(trace.d_dur[d] for d in copies)
    launches = {trace.d_launch_host[d] for d in copies} - {-1}
    host_ns = sum(trace.h_dur[h] for h in launches)
    cost = max(host_ns, device_ns)
    window = win.window_ns
    if share(cost, window) < noise_floor(config):
        return []
    return [
        Finding(
            RULE,
            PAGEABLE,
            "warning" if share(cost, window) >= WARN_SHARE else "info",
            f"{len(copies)} host-to-device copies from pageable memory: the host waits {duration(host_ns)} in their "
            f"launches ({percent(host_ns, window)} of the window); they cannot overlap its work",
            "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True).",
            {
                "pageable_copy_count": len(copies),
                "pageable_copy_us": us(device_ns),
                "host_wait_us": us(host_ns),
                "window_share": share(cost, window),
            },
        )
    ]
