"""The runtime vocabulary: what each CUDA and HIP (ROCm) runtime or driver call the profiler records does, and the
collective libraries' kernels (NCCL, and RCCL, which keeps NCCL's names). One table: every rule that reads a runtime
call or a collective kernel by its name asks here, so a call added once is read alike by all of them.

The profiler records HIP calls under the same category as CUDA's (``cuda_runtime``); torch's ROCm build is the
CUDA code hipified, so each CUDA call it makes has its HIP twin (``cudaMemcpyAsync`` → ``hipMemcpyAsync``), and
a few of its own: ``hipMemcpyWithStream`` is torch's synchronous copy on ROCm (``.item()``, ``.cpu()``, what
``cudaMemcpyAsync`` + ``cudaStreamSynchronize`` do on CUDA); ``hipExtModuleLaunchKernel`` and
``hipModuleLaunchKernel`` are the launches of hipBLASLt, rocBLAS and Triton kernels.
"""

from __future__ import annotations

from typing import NamedTuple


class Call(NamedTuple):
    """One runtime or driver call: its ``kind`` (below), whether the host waits in it (``blocking``), and its API."""

    kind: str
    blocking: bool
    api: str


LAUNCH = "launch"  # enqueues a kernel
GRAPH_LAUNCH = "graph-launch"  # enqueues a captured graph's kernels
DEVICE_SYNC = "device-sync"  # waits for all the device's work
STREAM_SYNC = "stream-sync"  # waits for one stream's work
EVENT_SYNC = "event-sync"  # waits for an event
STREAM_WAIT = "stream-wait"  # makes a stream wait for an event (the host returns once it is queued)
COPY = "copy"  # a copy the host waits for
ASYNC_COPY = "async-copy"  # a copy the host waits for only while it stages pageable memory
STREAM_COPY = "stream-copy"  # a copy, then a wait for its stream (torch's blocking copy on ROCm)
FREE = "free"  # frees device memory (synchronizes the device)
FREE_HOST = "free-host"  # frees pinned host memory (synchronizes the device)
OCCUPANCY = "occupancy"  # an occupancy query before a launch
MALLOC = "malloc"  # asks the driver for device memory (the caching allocator growing)

CUDA, CUDA_DRIVER, HIP = "CUDA runtime", "CUDA driver", "HIP"
_WAITS = frozenset({DEVICE_SYNC, STREAM_SYNC, EVENT_SYNC, STREAM_WAIT, COPY, ASYNC_COPY, STREAM_COPY, FREE, FREE_HOST})


def _calls(api: str, kinds: dict[str, tuple[str, ...]]) -> dict[str, Call]:
    return {name: Call(kind, kind in _WAITS, api) for kind, names in kinds.items() for name in names}


#: Every runtime and driver call a rule reads, CUDA and HIP side by side. ``cudaMemcpyAsync``/``hipMemcpyAsync`` count
#: as waiting: an asynchronous copy returns at once unless it waits (staging pageable memory, a device→host copy
#: into pageable memory), so the host time in it is waiting whenever it is long enough to matter.
RUNTIME_CALLS: dict[str, Call] = {
    **_calls(
        CUDA,
        {
            LAUNCH: ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel"),
            GRAPH_LAUNCH: ("cudaGraphLaunch",),
            DEVICE_SYNC: ("cudaDeviceSynchronize",),
            STREAM_SYNC: ("cudaStreamSynchronize",),
            EVENT_SYNC: ("cudaEventSynchronize",),
            STREAM_WAIT: ("cudaStreamWaitEvent",),
            COPY: ("cudaMemcpy", "cudaMemcpy2D"),
            ASYNC_COPY: ("cudaMemcpyAsync", "cudaMemcpy2DAsync"),
            FREE: ("cudaFree",),
            FREE_HOST: ("cudaFreeHost",),
            MALLOC: ("cudaMalloc",),
            OCCUPANCY: ("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"),
        },
    ),
    **_calls(
        CUDA_DRIVER,
        {
            LAUNCH: ("cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"),
            GRAPH_LAUNCH: ("cuGraphLaunch",),
            DEVICE_SYNC: ("cuCtxSynchronize",),
            STREAM_SYNC: ("cuStreamSynchronize",),
            OCCUPANCY: ("cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"),
        },
    ),
    **_calls(
        HIP,
        {
            LAUNCH: (
                "hipLaunchKernel",
                "hipExtLaunchKernel",
                "hipModuleLaunchKernel",
                "hipExtModuleLaunchKernel",
                "hipHccModuleLaunchKernel",
                "hipLaunchCooperativeKernel",
            ),
            GRAPH_LAUNCH: ("hipGraphLaunch",),
            DEVICE_SYNC: ("hipDeviceSynchronize", "hipCtxSynchronize"),
            STREAM_SYNC: ("hipStreamSynchronize",),
            EVENT_SYNC: ("hipEventSynchronize",),
            STREAM_WAIT: ("hipStreamWaitEvent",),
            COPY: ("hipMemcpy", "hipMemcpy2D", "hipMemcpyDtoH", "hipMemcpyHtoD"),
            ASYNC_COPY: ("hipMemcpyAsync", "hipMemcpy2DAsync"),
            STREAM_COPY: ("hipMemcpyWithStream",),
            FREE: ("hipFree",),
            MALLOC: ("hipMalloc", "hipExtMallocWithFlags"),
            FREE_HOST: ("hipHostFree", "hipFreeHost"),
            OCCUPANCY: (
                "hipOccupancyMaxActiveBlocksPerMultiprocessor",
                "hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
                "hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
            ),
        },
    ),
}


def calls_of(*kinds: str) -> frozenset[str]:
    """The names of the calls of these kinds."""
    return frozenset(name for name, call in RUNTIME_CALLS.items() if call.kind in kinds)


#: Calls in which the host waits rather than works (the regime's ``blocked`` time, ``blocking_calls``).
BLOCKING_CALLS = frozenset(name for name, call in RUNTIME_CALLS.items() if call.blocking)
#: Calls that enqueue kernels.
LAUNCH_CALLS = calls_of(LAUNCH, GRAPH_LAUNCH)
#: Calls that wait for the whole device (the profiler's flush is the last of them).
DEVICE_SYNC_CALLS = calls_of(DEVICE_SYNC)
#: Device memory allocations (``allocator_churn``'s ``device-mallocs``).
MALLOC_CALLS = calls_of(MALLOC)
#: Copies (the device's memcpys they made are named by kind in ``blocking_calls``).
COPY_CALLS = calls_of(COPY, ASYNC_COPY, STREAM_COPY)
#: Occupancy queries, by prefix: a library may add a suffix (``...WithFlags``, ``..._v2``).
OCCUPANCY_PREFIXES = (
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "hipOccupancyMaxActiveBlocksPerMultiprocessor",
    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
)


def is_occupancy_query(name: str) -> bool:
    return name.startswith(OCCUPANCY_PREFIXES)


# -- collectives ---------------------------------------------------------------------------------------------

#: Collective kernels' name prefixes, NCCL's and RCCL's alike: ``ncclKernel_AllReduce_RING_LL_Sum_float`` (NCCL <
#: 2.19, and RCCL), ``ncclDevKernel_AllGather_RING_LL`` (NCCL >= 2.19), ``ncclDevKernel_Generic`` (a kernel that runs
#: any collective; RCCL's ``ncclDevKernel_Generic_1``).
COLLECTIVE_KERNEL_PREFIXES = ("ncclKernel_", "ncclDevKernel_")
#: Host-side collective calls (gloo, NCCL/RCCL through c10d): time in them is waiting for peers or moving data.
COLLECTIVE_CALL_PREFIXES = ("gloo:", "nccl:", "c10d::", "record_param_comms")


#: Expert-parallel communication libraries' kernels (DeepEP's ``deep_ep::internode::dispatch``, DeepSeek's
#: ``dpsk::ep::*``, NVSHMEM's): they move tokens between ranks, as a collective does.
_EP_COMM = ("deep_ep::", "dpsk::ep::", "nvshmem")


def is_collective_kernel(name: str) -> bool:
    """A collective library's kernel: NCCL's or RCCL's, under every naming (anything with "nccl" in its name), and the
    expert-parallel communication kernels (DeepEP, ``dpsk::ep::``, NVSHMEM)."""
    low = name.lower()
    return "nccl" in low or any(m in low for m in _EP_COMM)


def collective_kind(kernel: str) -> str:
    """The collective an NCCL (or RCCL) kernel runs: ``AllReduce`` for ``ncclKernel_AllReduce_RING_LL_Sum_float``
    and ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``Generic`` for ``ncclDevKernel_Generic`` (a kernel that runs any
    collective); anything else with "nccl" in its name: "other"."""
    name = kernel.split("(", 1)[0].strip()
    name = name.rsplit(" ", 1)[-1]  # a "void " return type
    for prefix in COLLECTIVE_KERNEL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :].split("_", 1)[0] or "other"
    return "other"
