"""Bound regime: is the window limited by the host (overhead), the device (compute), input or syncs?

Device windows (kernels present) compare, over the window extended to the end of the device work it
launched (the GPU lane runs behind the host):

- ``device_busy_share``: union of kernels, memcpys and memsets launched from the window's steps;
- ``input_share``: host time in ``enumerate(DataLoader)``;
- ``blocked_share``: host time waiting in synchronizing calls (``BLOCKING_CALLS``), reported apart;
- ``host_active_share``: union of host ops and runtime calls, less blocked and input time.

Verdicts, first match wins: input-bound (input ≥ 25 %); compute-bound (device busy ≥ 60 %);
overhead-bound (the host is active for longer than the device is busy); sync-bound (blocked ≥ 30 %);
otherwise ``mixed``.

CPU-only windows have no device column. Where matmul-family ops dominate the window and a calibrated
peak is known (the live path measures one matmul per process), the achieved FLOP/s over the whole step
time decides: ≥ 50 % of the peak compute-bound, < 20 % overhead-bound, mixed between. Otherwise the op
kernels' own time (self time of ``cpu_op`` events) is compared with the step time: ≥ 70 % compute-bound,
< 50 % overhead-bound (see docs/rules.md for why).
"""

from __future__ import annotations

from itertools import compress
from typing import Any

from autoprof.findings import Finding
from autoprof.rules import roofline
from autoprof.rules._common import (
    BLOCKING_CALLS,
    DATALOADER_PREFIX,
    blocked_by_call,
    merge,
    op_self_ns,
    shape_of,
    share,
    subtract,
    total,
    us,
    view,
)
from autoprof.rules._flops import MATMUL_FAMILY, matmul_flops
from autoprof.trace.model import CPU_OP, CUDA_RUNTIME, HOST_CATEGORIES, PYTHON_FUNCTION, Trace

RULE = "bound_regime"

DEVICE_BUSY_COMPUTE = 0.60
INPUT_BOUND = 0.25
SYNC_BOUND = 0.30
CPU_COMPUTE = 0.70
CPU_OVERHEAD = 0.50
CPU_EFF_COMPUTE = 0.50
CPU_EFF_OVERHEAD = 0.20
MATMUL_DOMINATES = 0.50

_ADVICE = {
    "compute-bound": "The device is the bottleneck: reduce or speed up its work (mixed precision, fused "
    "kernels, better shapes); host-side tuning will not help.",
    "overhead-bound": "The host cannot feed the device: batch more work per op (bigger tensors, fewer small "
    "ops), fuse ops (torch.compile), or capture with CUDA graphs.",
    "input-bound": "Data loading stalls the step: use DataLoader(num_workers>0, pin_memory=True, "
    "prefetch_factor) or move preprocessing off the training loop.",
    "sync-bound": "The host waits in synchronizing calls: remove .item()/.cpu()/print of device tensors "
    "from the step, use non_blocking copies from pinned memory.",
    "mixed": "No single limit dominates: look at the other findings for this window.",
}
_CPU_ADVICE = {
    "compute-bound": "The ops' own math dominates the step: larger gains need less work (smaller dtype, "
    "better algorithms) or faster hardware, not less Python.",
    "overhead-bound": "Most of the step is Python and dispatch around small ops: batch work into fewer, "
    "larger ops, or try torch.compile.",
    "mixed": "Op math and framework overhead are of similar size: look at the other findings.",
}


def _self_totals(trace: Trace, v: Any) -> tuple[int, int]:
    return sum(compress(trace.h_self, v.host_in)), sum(compress(trace.d_dur, v.device_in))


def check(trace: Trace, config: Any = None) -> list[Finding]:
    v = view(trace)
    if v.host_window_ns <= 0:
        return []
    self_cpu, self_dev = _self_totals(trace, v)
    evidence: dict[str, Any] = {
        "self_cpu_total_us": us(self_cpu),
        "self_device_total_us": us(self_dev),
        "cpu_to_device_ratio": round(self_cpu / self_dev, 3) if self_dev else None,
        "step_count": len(trace.steps),
    }
    if v.device_busy:
        return [_device_verdict(trace, v, evidence, config)]
    return [_cpu_verdict(trace, v, evidence, config)]


def _host_spans(trace: Trace, v: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]:
    """One pass: merged spans of blocking runtime calls, of data loading, and of host activity (ops, runtime
    calls, Python functions). Only top-level activity spans are kept: a child lies inside its parent."""
    blocking = [nid for nid, n in enumerate(trace.names) if n in BLOCKING_CALLS]
    loading = [nid for nid, n in enumerate(trace.names) if n.startswith(DATALOADER_PREFIX)]
    kop, krt, kpy = (HOST_CATEGORIES.index(c) for c in (CPU_OP, CUDA_RUNTIME, PYTHON_FUNCTION))
    active_cats = {kop, krt, kpy}
    ts, dur, parent, cat, host_in = trace.h_ts, trace.h_dur, trace.h_parent, trace.h_cat, v.host_in
    blocked = [(ts[i], ts[i] + dur[i]) for i in trace.host_named(blocking) if cat[i] == krt and host_in[i]]
    inp = [(ts[i], ts[i] + dur[i]) for i in trace.host_named(loading) if host_in[i]]
    active = [
        (t, t + d)
        for t, d, c, p, inside in zip(ts, dur, cat, parent, host_in)
        if inside and c in active_cats and (p < 0 or cat[p] not in active_cats)
    ]
    return merge(blocked), merge(inp), merge(active)


def _device_verdict(trace: Trace, v: Any, evidence: dict[str, Any], config: Any = None) -> Finding:
    window = v.window_ns
    busy = total(v.device_busy)
    blocked_iv, input_iv, active_iv = _host_spans(trace, v)
    active = total(subtract(active_iv, merge(blocked_iv + input_iv)))
    blocked, inp = total(blocked_iv), total(input_iv)
    by_call = blocked_by_call(trace, v)
    evidence.update(
        window_us=us(window),
        device_busy_us=us(busy),
        device_busy_share=share(busy, window),
        host_active_us=us(active),
        host_active_share=share(active, window),
        blocked_us=us(blocked),
        blocked_share=share(blocked, window),
        blocked_by_call_us={k: us(n) for k, n in sorted(by_call.items(), key=lambda kv: -kv[1])},
        input_us=us(inp),
        input_share=share(inp, window),
    )
    if inp >= INPUT_BOUND * window:
        verdict = "input-bound"
        msg = f"input-bound: data loading takes {share(inp, window):.0%} of the window"
    elif busy >= DEVICE_BUSY_COMPUTE * window:
        verdict = "compute-bound"
        msg = f"compute-bound: the device is busy {share(busy, window):.0%} of the window"
    elif active > busy:
        verdict = "overhead-bound"
        msg = (
            f"overhead-bound: the host works {share(active, window):.0%} of the window preparing and "
            f"launching work, the device is busy only {share(busy, window):.0%}"
        )
    elif blocked >= SYNC_BOUND * window:
        top = max(by_call.items(), key=lambda kv: kv[1])[0] if by_call else "synchronizing calls"
        verdict = "sync-bound"
        msg = (
            f"sync-bound: the host waits {share(blocked, window):.0%} of the window in synchronizing calls "
            f"(most in {top}) while the device is busy only {share(busy, window):.0%}"
        )
    else:
        verdict = "mixed"
        msg = f"mixed: device busy {share(busy, window):.0%}, host active {share(active, window):.0%}"
    severity = "info" if verdict in ("compute-bound", "mixed") else "warning"
    advice = _ADVICE[verdict]
    if verdict == "compute-bound":
        msg, advice = _roofline_split(trace, config, evidence, msg, advice)
    return Finding(RULE, verdict, severity, msg, advice, evidence)


def _roofline_split(trace: Trace, config: Any, evidence: dict[str, Any], msg: str, advice: str) -> tuple[str, str]:
    """A device-bound window: say whether compute or memory bandwidth limits it, when the roofline decides."""
    rf = roofline.analyse(trace, config)
    decided = rf.decided() if rf else None
    evidence["roofline_bound"] = decided or "unknown"
    if rf is None:
        return msg, advice
    evidence["memory_bound_share"] = share(rf.memory_ns, rf.total_ns)
    evidence["compute_bound_share"] = share(rf.compute_ns, rf.total_ns)
    if decided == "memory":
        return (msg + f"; memory-bandwidth-bound by the roofline ({share(rf.memory_ns, rf.total_ns):.0%} of op time "
                "in memory-bound ops)", "Bandwidth, not FLOPs, is the limit: fuse elementwise chains "
                "(torch.compile), use bf16/fp16, avoid materialising intermediates.")
    if decided == "compute":
        extra = f"; FLOP-bound by the roofline ({share(rf.compute_ns, rf.total_ns):.0%} of op time in compute-bound ops)"
        return msg + extra, advice
    return msg, advice


def _matmul_work(trace: Trace, v: Any) -> tuple[int, int]:
    """(FLOPs, self ns) of the outermost matmul-family ops in the window whose shapes were recorded."""
    kcpu = HOST_CATEGORIES.index(CPU_OP)
    fam = {trace.name_id(n) for n in MATMUL_FAMILY} - {-1}
    flops = t = 0
    for i in trace.host_named(fam):
        if trace.h_cat[i] != kcpu or not v.host_in[i]:
            continue
        p = trace.h_parent[i]
        if p >= 0 and trace.h_name[p] in fam:
            continue  # counted at the outermost matmul op (matmul → mm, linear → addmm)
        dims, _ = shape_of(trace, i)
        f = matmul_flops(trace.host_name(i), dims) if dims else None
        if f:
            flops += f
            t += trace.h_dur[i]
    return flops, t


def _cpu_verdict(trace: Trace, v: Any, evidence: dict[str, Any], config: Any = None) -> Finding:
    window = v.host_window_ns
    if trace.steps:
        window = sum(s.dur_ns for s in trace.steps)
        # Live windows: the decorated target's own annotation inside each step is the user's code, without
        # the step marker's bookkeeping around it.
        tid_ = trace.name_id(trace.target) if trace.target else -1
        step_idx = {s.host_index for s in trace.steps}
        spans = [trace.h_dur[i] for i in trace.host_named([tid_]) if trace.h_parent[i] in step_idx]
        if len(spans) == len(trace.steps):
            window = sum(spans)
    ops = op_self_ns(trace, v)
    ratio = ops / window if window else 0.0
    evidence.update(window_us=us(window), op_self_us=us(ops), op_self_share=round(ratio, 4), device="cpu")
    peak = trace.metadata.get("cpu_peak_flops")
    rf = roofline.analyse(trace, config)
    if rf is not None:  # the roofline pass already has each outermost op's FLOPs and time
        mm = [st for st in rf.ops.values() if st.name in MATMUL_FAMILY]
        flops, mm_ns = int(sum(st.flops for st in mm)), sum(st.time_ns for st in mm)
    else:
        flops, mm_ns = _matmul_work(trace, v)
    if isinstance(peak, (int, float)) and peak > 0 and flops and window and mm_ns >= MATMUL_DOMINATES * ops:
        # Matmul-dominated window with a calibrated peak: achieved FLOP/s over the whole step time.
        eff = flops / (window / 1e9) / peak
        evidence.update(matmul_flop_count=flops, achieved_flops_per_s=round(flops / (window / 1e9), 1),
                        peak_flops_per_s=round(float(peak), 1), flop_efficiency_ratio=round(eff, 4), method="flops")
        if eff >= CPU_EFF_COMPUTE:
            verdict, msg = "compute-bound", f"compute-bound (CPU): the step reaches {eff:.0%} of the calibrated matmul peak"
        elif eff < CPU_EFF_OVERHEAD:
            verdict = "overhead-bound"
            msg = (f"overhead-bound (CPU): the step reaches only {eff:.0%} of the calibrated matmul peak; op kernels "
                   f"take {ratio:.0%} of the step, the rest is Python and dispatch")
        else:
            verdict, msg = "mixed", f"mixed (CPU): the step reaches {eff:.0%} of the calibrated matmul peak"
    else:
        evidence["method"] = "op_share"
        if ratio >= CPU_COMPUTE:
            verdict = "compute-bound"
            msg = f"compute-bound (CPU): op kernels take {ratio:.0%} of the step time"
        elif ratio < CPU_OVERHEAD:
            verdict = "overhead-bound"
            msg = f"overhead-bound (CPU): op kernels take only {ratio:.0%} of the step time; the rest is Python and dispatch"
        else:
            verdict = "mixed"
            msg = f"mixed (CPU): op kernels take {ratio:.0%} of the step time"
    severity = "warning" if verdict == "overhead-bound" else "info"
    advice = _CPU_ADVICE[verdict]
    if verdict == "compute-bound":
        msg, advice = _roofline_split(trace, config, evidence, msg, advice)
    return Finding(RULE, verdict, severity, msg, advice, evidence)
