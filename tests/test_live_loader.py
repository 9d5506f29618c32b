"""The live loader on synthetic raw kineto events that behave as torch's do (issue 16, item 0): what torch
hands over for GPU windows, checked without a GPU.

How torch's raw events behave (torch/autograd/profiler.py ``_parse_kineto_results``, profiler_kineto.cpp):
- ``correlation_id()`` of an op or annotation is its op id; of a runtime call, kernel, memcpy or memset, the
  CUPTI correlation id; of a ``gpu_user_annotation``, the annotation's op id (another id space).
- ``linked_correlation_id()`` of a runtime call is the op id of the op it was called from (0: none);
  ``start_thread_id()`` is torch's small thread id, and for a runtime call with no linked op it is the
  thread that stopped the profiler; ``device_resource_id()`` of a host event is the system thread id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from autoprof.measure.views import launches_by_host, view
from autoprof.trace import chrome, live
from autoprof.trace.model import Trace

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

TRAIN, STOPPER = 1, 1  # torch's thread ids: the training thread stopped the profiler
TRAIN_SYS, WATCHDOG_SYS = 4242, 5151  # system thread ids


@dataclass
class Ev:
    """A raw kineto event (``_KinetoEvent``) as far as autoprof reads it."""

    n: str
    cat: str
    ts: int
    dur: int
    corr: int = 0
    linked: int = 0
    tid: int = TRAIN
    resource: int = TRAIN_SYS
    device: int = -1
    annotation: bool = False
    shapes_: list[Any] = field(default_factory=list)

    def name(self) -> str:
        return self.n

    def activity_type(self) -> str:
        return self.cat

    def start_ns(self) -> int:
        return self.ts

    def duration_ns(self) -> int:
        return self.dur

    def correlation_id(self) -> int:
        return self.corr

    def linked_correlation_id(self) -> int:
        return self.linked

    def start_thread_id(self) -> int:
        return self.tid

    def device_resource_id(self) -> int:
        return self.resource

    def device_index(self) -> int:
        return self.device

    def is_user_annotation(self) -> bool:
        return self.annotation

    def shapes(self) -> list[Any]:
        return self.shapes_

    def dtypes(self) -> list[Any]:
        return []


def _steps(n: int = 2, length: int = 1000) -> list[Ev]:
    return [Ev(f"ProfilerStep#{k}", "user_annotation", k * length, length - 10, corr=900 + k, annotation=True) for k in range(n)]


def _index(t: Trace, name: str) -> int:
    return next(i for i in range(t.n_host) if t.host_name(i) == name)


def test_gpu_user_annotation_never_links_to_a_launch() -> None:
    # The step's span on the GPU lane carries its annotation's op id (900), which CUPTI also used for an
    # unrelated launch: read as a correlation, the whole span would count as that launch's device work.
    events = _steps(1) + [
        Ev("aten::mm", "cpu_op", 100, 200, corr=5),
        Ev("cudaLaunchKernel", "cuda_runtime", 150, 20, corr=900, linked=5),
        Ev("gemm_kernel", "kernel", 300, 100, corr=900, device=0, resource=7),
        Ev("ProfilerStep#0", "gpu_user_annotation", 0, 990, corr=900, device=0, resource=7),
    ]
    t = live.from_kineto_events(events)
    d_ann = next(d for d in range(t.n_device) if t.device_cat(d) == "gpu_user_annotation")
    assert t.d_corr[d_ann] == -1 and t.d_launch_host[d_ann] == -1
    launch = _index(t, "cudaLaunchKernel")
    assert [t.device_name(d) for d in launches_by_host(t)[launch]] == ["gemm_kernel"]
    # the chrome loader reads the same span the same way
    doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": "ProfilerStep#0",
                "ts": 0,
                "dur": 0.99,
                "pid": 0,
                "tid": 7,
                "args": {"correlation": 900},
            },
        ]
    }
    assert chrome.from_document(doc).d_corr[0] == -1


def test_runtime_calls_sit_on_their_ops_thread_or_their_own() -> None:
    events = _steps(1) + [
        Ev("aten::mm", "cpu_op", 100, 300, corr=5),
        # called from aten::mm, but handed over with another thread id (torch links it by op id)
        Ev("cudaLaunchKernel", "cuda_runtime", 150, 20, corr=31, linked=5, tid=9),
        # no linked op: torch gives it the stopping thread (the training thread here); it ran on the NCCL
        # watchdog thread, inside aten::mm's time
        Ev("cudaEventQuery", "cuda_runtime", 200, 150, corr=32, linked=0, tid=STOPPER, resource=WATCHDOG_SYS),
        Ev("gemm_kernel", "kernel", 300, 100, corr=31, device=0, resource=7),
    ]
    t = live.from_kineto_events(events)
    mm, launch, query = _index(t, "aten::mm"), _index(t, "cudaLaunchKernel"), _index(t, "cudaEventQuery")
    assert t.h_tid[launch] == t.h_tid[mm] and t.h_parent[launch] == mm
    assert t.h_tid[query] != t.h_tid[mm] and t.threads[t.h_tid[query]] == ("host-sys", WATCHDOG_SYS)
    assert t.h_parent[query] == -1
    assert t.h_self[mm] == 300 - 20  # only its own launch is a child: the watchdog's call cuts nothing


def test_linked_runtime_call_listed_before_its_op_still_finds_it() -> None:
    events = [Ev("cudaLaunchKernel", "cuda_runtime", 150, 20, corr=31, linked=5, tid=9), Ev("aten::mm", "cpu_op", 100, 300, corr=5, tid=3)]
    t = live.from_kineto_events(events)
    assert t.h_tid[_index(t, "cudaLaunchKernel")] == t.h_tid[_index(t, "aten::mm")]


def test_device_work_without_a_recorded_launch_is_placed_by_time() -> None:
    # cuGraphLaunch / cuMemsetD*Async are not recorded by kineto: their kernels carry a correlation that no
    # host call has. They count in the step whose time holds them, and in the busy time.
    events = _steps(2) + [
        Ev("aten::mm", "cpu_op", 100, 300, corr=5),
        Ev("cudaLaunchKernel", "cuda_runtime", 150, 20, corr=31, linked=5),
        Ev("gemm_kernel", "kernel", 300, 100, corr=31, device=0, resource=7),
        Ev("graph_kernel", "kernel", 1200, 300, corr=77, device=0, resource=7),  # in step 1, no launch
        Ev("Memset (Device)", "gpu_memset", 1600, 50, corr=78, device=0, resource=7),
        Ev("late_kernel", "kernel", 5000, 10, corr=79, device=0, resource=7),  # after every step
        Ev("ProfilerStep#1", "gpu_user_annotation", 1000, 990, corr=901, device=0, resource=7),
    ]
    t = live.from_kineto_events(events)
    ds = t.step_of_device()
    by_name = {t.device_name(d): ds[d] for d in range(t.n_device)}
    assert by_name["gemm_kernel"] == 0  # by its launch
    assert by_name["graph_kernel"] == 1 and by_name["Memset (Device)"] == 1  # by time
    assert by_name["late_kernel"] == -1
    assert by_name["ProfilerStep#1"] == -1  # a span, not work
    busy = sum(e - s for s, e in view(t).device_busy)
    assert busy == 100 + 300 + 50
