"""Compile overhead: per compiled-region call, the wrapper's cost against the compute it wraps;
recompilations; compilation work inside the window.

Wrapper per call = ``TorchDynamo Cache Lookup`` before the region + the region's span − the span of
``## Call CompiledFxGraph <hash> ##`` inside it (everything that is not the compiled graph: Pregraph
bytecode, AOTDispatcher Runtime Wrapper Prologue/Epilogue, guards). Without that annotation the
kernel-launching ops inside the region stand for the graph. Compute = device time launched from the
region where there is a device, else the self time of the ops inside the graph call.
"""

from __future__ import annotations

import bisect
import re

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules._common import (
    COMPILE_WRAPPER_PREFIXES,
    descendants,
    duration,
    has_ancestor,
    launched_under,
    launches_by_host,
    us,
    view,
)
from autoprof.trace.model import CPU_OP, HOST_CODE, Trace

RULE_OVERHEAD = "compile_overhead"
RULE_RECOMPILE = "recompilation"
RULE_COMPILING = "compilation_in_window"
WRAPPER_EXCEEDS_COMPUTE = "wrapper-exceeds-compute"
RECOMPILED = "recompiled"
COMPILING = "compiling"
VERDICTS = {RULE_OVERHEAD: (WRAPPER_EXCEEDS_COMPUTE,), RULE_RECOMPILE: (RECOMPILED,), RULE_COMPILING: (COMPILING,)}

_REGION = re.compile(r"^Torch-Compiled Region: ([0-9]{1,18})/([0-9]{1,18})$")
_LOOKUP = "TorchDynamo Cache Lookup"
_CALL = "## Call CompiledFxGraph"
_COMPILE_WORK = (
    "entire_frame_compile",
    "inductor_compile",
    "backend_compile",
    "compile_fx",
    "create_aot_dispatcher_function",
    "_compile.compile_inner",
    "OutputGraph.call_user_compiler",
)


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    v = view(trace)
    kcpu = HOST_CODE[CPU_OP]
    regions: list[tuple[int, int, int]] = []  # (index, frame, compile id)
    lookups: dict[int, list[int]] = {}
    compile_work: list[int] = []
    # Match names once per distinct name, then compare interned ids per event.
    region_ids: dict[int, tuple[int, int]] = {}
    work_ids: set[int] = set()
    for nid, n in enumerate(trace.names):
        m = _REGION.match(n)
        if m:
            region_ids[nid] = (int(m.group(1)), int(m.group(2)))
        elif n.startswith(_COMPILE_WORK):
            work_ids.add(nid)
    lookup_id = trace.name_id(_LOOKUP)
    if not region_ids and not work_ids:
        return []
    for i in range(trace.n_host):
        nid = trace.h_name[i]
        if not v.host_in[i]:
            continue
        if nid in region_ids:
            f, c = region_ids[nid]
            regions.append((i, f, c))
        elif nid == lookup_id:
            lookups.setdefault(trace.h_tid[i], []).append(i)
        elif nid in work_ids and not has_ancestor(trace, i, work_ids):
            compile_work.append(i)
    findings: list[Finding] = []
    if regions:
        by_device = launches_by_host(trace) if trace.n_device else {}
        lookup_ts = {t: [trace.h_ts[j] for j in ls] for t, ls in lookups.items()}
        wrapper_total = compute_total = 0
        calls = 0
        for i, _f, _c in regions:
            lk = 0
            tl = lookups.get(trace.h_tid[i], [])
            k = bisect.bisect_right(lookup_ts[trace.h_tid[i]], trace.h_ts[i]) if tl else 0
            if k:
                j = tl[k - 1]
                if trace.h_ts[i] - (trace.h_ts[j] + trace.h_dur[j]) < 1_000_000:  # within 1 ms
                    lk = trace.h_dur[j]
            desc = descendants(trace, i)
            call = next((j for j in desc if trace.host_name(j).startswith(_CALL)), -1)
            if call >= 0:
                graph_host = trace.h_dur[call]
                graph = descendants(trace, call)
            else:
                graph = desc
                graph_host = sum(
                    trace.h_dur[j] for j in desc
                    if trace.h_parent[j] == i and trace.h_cat[j] == kcpu
                    and not trace.host_name(j).startswith(COMPILE_WRAPPER_PREFIXES)
                )
            if by_device:
                compute = sum(trace.d_dur[d] for d in launched_under(trace, i, by_device))
            else:
                compute = sum(
                    trace.h_self[j] for j in graph
                    if trace.h_cat[j] == kcpu and not trace.host_name(j).startswith(COMPILE_WRAPPER_PREFIXES)
                )
            wrapper_total += lk + max(trace.h_dur[i] - graph_host, 0)
            compute_total += compute
            calls += 1
        wrapper = wrapper_total / calls
        compute_avg = compute_total / calls
        frames = sorted({f"{f}/{c}" for _, f, c in regions})
        evidence = {
            "compiled_calls_count": calls,
            "wrapper_per_call_us": us(wrapper),
            "compute_per_call_us": us(compute_avg),
            "wrapper_to_compute_ratio": round(wrapper / compute_avg, 3) if compute_avg else None,
            "compute_side": "device" if by_device else "cpu",
            "regions": frames[:10],
        }
        if wrapper > compute_avg:
            findings.append(
                Finding(
                    RULE_OVERHEAD,
                    WRAPPER_EXCEEDS_COMPUTE,
                    "warning",
                    f"compile overhead: each compiled call spends {duration(wrapper)} in the compiled-region "
                    f"wrapper (cache lookup, guards, AOT wrappers) against {duration(compute_avg)} of compute it wraps",
                    "The ops are too small for torch.compile to pay off: compile a larger region (the whole "
                    "step or model), batch more work per call, or leave this function eager.",
                    evidence,
                    tuple(frames[:5]),
                )
            )
        recompiled: dict[int, set[int]] = {}
        for _, f, c in regions:
            recompiled.setdefault(f, set()).add(c)
        many = {f: sorted(cs) for f, cs in recompiled.items() if len(cs) > 1 or max(cs) > 0}
        if many:
            findings.append(
                Finding(
                    RULE_RECOMPILE,
                    RECOMPILED,
                    "warning",
                    "recompilation: "
                    + ", ".join(f"frame {f} ran compiled versions {cs}" for f, cs in sorted(many.items())),
                    "Find the guard that fails with TORCH_LOGS=recompiles; mark changing sizes dynamic "
                    "(torch._dynamo.mark_dynamic) or keep Python values that change out of the graph.",
                    {"recompiled_frames_count": len(many), "max_compile_id": max(max(c) for c in many.values())},
                    tuple(f"Torch-Compiled Region: {f}/{max(cs)}" for f, cs in sorted(many.items())),
                )
            )
    if compile_work:
        t = sum(trace.h_dur[i] for i in compile_work)
        names = sorted({trace.host_name(i) for i in compile_work})
        findings.append(
            Finding(
                RULE_COMPILING,
                COMPILING,
                "warning",
                f"compilation inside the window: {duration(t)} in {', '.join(names[:3])}",
                "Warm up compiled code before measuring (more wait/warmup steps), and check for recompiles.",
                {"compile_time_us": us(t), "compile_events_count": len(compile_work)},
                tuple(names[:5]),
            )
        )
    return findings

