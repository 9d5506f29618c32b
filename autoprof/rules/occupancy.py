"""Launches preceded by ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``: libraries (cuBLAS, cuDNN,
CUTLASS) query occupancy before heavyweight GEMM/conv kernels; elementwise launches carry no such query."""

from __future__ import annotations

from collections import Counter
from typing import Any

from autoprof.findings import Finding
from autoprof.rules._common import OCCUPANCY_PREFIX, view
from autoprof.trace.model import CUDA_DRIVER, CUDA_RUNTIME, HOST_CATEGORIES, KERNEL, Trace

RULE = "occupancy_query_launch"
_HEAVY = (
    "gemm", "gemv", "conv", "cutlass", "cudnn", "cublas", "xmma", "wgrad", "dgrad", "fprop", "implicit",
    "winograd", "fft", "sm80_", "sm90_", "ampere_", "volta_", "turing_", "hopper_",
)


def short_kernel_name(name: str) -> str:
    """A readable kernel name: no return type, template arguments or parameter list."""
    if name.startswith("cutlass::Kernel<") or name.startswith("void cutlass::Kernel<"):
        inner = name.split("cutlass::Kernel<", 1)[1]
        return inner.split(">", 1)[0].split("(", 1)[0]
    depth = 0
    out: list[str] = []  # characters at template depth 0, up to the parameter list
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    text = "".join(out).strip()
    tokens = text.split()
    short = tokens[-1] if tokens else ""
    return short or name[:60]


def is_heavy(name: str) -> bool:
    low = name.lower()
    return any(k in low for k in _HEAVY)


def check(trace: Trace, config: Any = None) -> list[Finding]:
    v = view(trace)
    rt = {HOST_CATEGORIES.index(CUDA_RUNTIME), HOST_CATEGORIES.index(CUDA_DRIVER)}
    kernel_of: dict[int, int] = {}
    for d in trace.device_indices(KERNEL):
        h = trace.d_launch_host[d]
        if h >= 0:
            kernel_of[h] = d
    if not kernel_of:
        return []
    queried: Counter[str] = Counter()
    unqueried = 0
    pending: dict[int, int] = {}  # thread -> parent op of an occupancy query not yet followed by a launch
    for i in range(trace.n_host):
        if trace.h_cat[i] not in rt or not v.host_in[i]:
            continue
        tid = trace.h_tid[i]
        if trace.host_name(i).startswith(OCCUPANCY_PREFIX):
            pending[tid] = trace.h_parent[i]
            continue
        k = kernel_of.get(i)
        if k is None:
            continue  # setup calls (cudaFuncSetAttribute, memsets ...) between the query and its launch
        if pending.pop(tid, None) == trace.h_parent[i]:
            queried[short_kernel_name(trace.device_name(k))] += 1
        else:
            unqueried += 1
    if not queried:
        return []
    n = sum(queried.values())
    heavy = sum(c for k, c in queried.items() if is_heavy(k))
    top = [k for k, _ in queried.most_common(8)]
    return [
        Finding(
            RULE,
            "heavyweight-launches",
            "info",
            f"{n} launches are preceded by an occupancy query ({heavy} of them GEMM/conv kernels): "
            + ", ".join(top[:4]),
            "These are library GEMM/conv kernels; the query itself costs ~1 µs of host time per launch, "
            "a reason to prefer fewer, larger GEMMs (or CUDA graphs) when overhead-bound.",
            {"queried_launch_count": n, "gemm_conv_count": heavy, "gemm_conv_share": round(heavy / n, 4),
             "unqueried_launch_count": unqueried, "kernels_count": dict(queried.most_common(8))},
            tuple(top),
        )
    ]
