"""Launches preceded by an occupancy query (``cudaOccupancyMaxActiveBlocksPerMultiprocessor``, its HIP twin
``hipOccupancyMaxActiveBlocksPerMultiprocessor``: :func:`autoprof.measure.runtime.is_occupancy_query`): libraries
(cuBLAS, cuDNN, CUTLASS; MIOpen, rocBLAS) query occupancy before heavyweight GEMM/conv kernels; elementwise launches
carry no such query."""

from __future__ import annotations

from collections import Counter

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.kernels import short_kernel_name
from autoprof.measure.runtime import is_occupancy_query
from autoprof.measure.views import view
from autoprof.rules import regime
from autoprof.trace.model import KERNEL_CODE, LAUNCH_CODES, Trace

RULE = "occupancy_query_launch"
HEAVYWEIGHT = "heavyweight-launches"
VERDICTS = {RULE: (HEAVYWEIGHT,)}
_HEAVY = (
    "gemm",
    "gemv",
    "conv",
    "cutlass",
    "cudnn",
    "cublas",
    "xmma",
    "wgrad",
    "dgrad",
    "fprop",
    "implicit",
    "winograd",
    "fft",
    "sm80_",
    "sm90_",
    "ampere_",
    "volta_",
    "turing_",
    "hopper_",
    # AMD: Tensile/hipBLASLt GEMMs (Cijk_Alik_Bljk_...), rocBLAS, hipBLASLt, MIOpen (igemm_* convolutions match "gemm")
    "cijk_",
    "rocblas",
    "hipblaslt",
    "miopen",
)


def is_heavy(name: str) -> bool:
    low = name.lower()
    return any(k in low for k in _HEAVY)


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    kernel_of = {h: d for d, (h, c) in enumerate(zip(trace.d_launch_host, trace.d_cat)) if h >= 0 and c == KERNEL_CODE}
    if not kernel_of:
        return []
    queries = trace.host_named([nid for nid, name in enumerate(trace.names) if is_occupancy_query(name)])
    if not queries:
        return []
    queried, unqueried = _pair_queries(trace, queries, kernel_of)
    heavy_kernels = Counter({k: c for k, c in queried.items() if is_heavy(k)})
    if not heavy_kernels:
        return []  # queries before other kernels (a sort, a scan): nothing a user can act on
    regime_finding = next(iter(regime.check(trace, config)), None)
    if regime_finding is None or regime_finding.verdict != regime.OVERHEAD_BOUND:
        return []  # ~1 µs of host time a launch matters only where the host is what limits the step
    launches = sum(queried.values())
    heavy = sum(heavy_kernels.values())
    top = [k for k, _ in heavy_kernels.most_common(8)]
    return [
        Finding(
            RULE,
            HEAVYWEIGHT,
            "info",
            f"{heavy} GEMM/conv launches are preceded by an occupancy query (~1 µs of host time each) in an "
            f"overhead-bound window: " + ", ".join(top[:4]),
            "The host limits this window, and each library GEMM/conv launch costs it an occupancy query besides "
            "the launch: fewer, larger GEMMs (batch them, fuse layers) or CUDA graphs remove both.",
            {
                "queried_launch_count": launches,
                "gemm_conv_count": heavy,
                "gemm_conv_share": round(heavy / launches, 4),
                "unqueried_launch_count": unqueried,
                "kernels_count": dict(heavy_kernels.most_common(8)),
            },
            tuple(top),
        )
    ]


def _pair_queries(trace: Trace, queries: list[int], kernel_of: dict[int, int]) -> tuple[Counter[str], int]:
    """Launches that follow an occupancy query from the same op on the same thread, counted per kernel (short
    name), and the number of launches without one. Only queries and launches matter: other calls between a
    query and its launch (cudaFuncSetAttribute, memsets ...) are setup."""
    host_in = view(trace).host_in
    cat, tids, parent, names = trace.h_cat, trace.h_tid, trace.h_parent, trace.h_name
    query_ids = {names[i] for i in queries}
    queried_ids: Counter[int] = Counter()
    unqueried = 0
    pending: dict[int, int] = {}  # thread -> parent op of an occupancy query not yet followed by a launch
    for i in sorted(queries + list(kernel_of)):
        if cat[i] not in LAUNCH_CODES or not host_in[i]:
            continue
        tid = tids[i]
        if names[i] in query_ids:
            pending[tid] = parent[i]
        elif pending.pop(tid, None) == parent[i]:
            queried_ids[trace.d_name[kernel_of[i]]] += 1
        else:
            unqueried += 1
    queried: Counter[str] = Counter()
    for nid, c in queried_ids.items():
        queried[short_kernel_name(trace.names[nid])] += c
    return queried, unqueried
