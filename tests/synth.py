"""Small synthetic chrome traces for rule tests: host ops and runtime calls, kernels linked by correlation, steps.
Times in µs, as chrome traces write them. No torch, no ../shared."""

from __future__ import annotations

from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules import run_rules
from autoprof.trace import chrome
from autoprof.trace.model import Trace


class Synth:
    def __init__(self, gpu: str | None = "NVIDIA A100-SXM4-80GB") -> None:
        self.events: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {}
        if gpu:
            self.meta["deviceProperties"] = [{"id": 0, "name": gpu}]
        self._corr = 1000

    def x(self, cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> Synth:
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args})
        return self

    def step(self, k: int, ts: float, dur: float) -> Synth:
        return self.x("user_annotation", f"ProfilerStep#{k}", ts, dur)

    def op(self, name: str, ts: float, dur: float, dims: list[Any] | None = None, types: list[Any] | None = None, tid: int = 1) -> Synth:
        extra = {"Input Dims": dims, "Input type": types} if dims is not None else {}
        return self.x("cpu_op", name, ts, dur, tid=tid, **extra)

    def runtime(self, name: str, ts: float, dur: float, corr: int = -1, tid: int = 1) -> Synth:
        return self.x("cuda_runtime", name, ts, dur, tid=tid, correlation=corr)

    def launch(
        self,
        kernel: str,
        ts: float,
        k_ts: float,
        k_dur: float,
        stream: int = 7,
        cat: str = "kernel",
        call: str = "cudaLaunchKernel",
        tid: int = 1,
    ) -> Synth:
        """A runtime call at ``ts`` (2 µs) and the device work it launched, linked by a fresh correlation id."""
        self._corr += 1
        self.runtime(call, ts, 2, corr=self._corr, tid=tid)
        return self.x(cat, kernel, k_ts, k_dur, tid=stream, pid=0, correlation=self._corr, device=0, stream=stream)

    def device(self, name: str, k_ts: float, k_dur: float, stream: int = 7, cat: str = "kernel") -> Synth:
        """Device work with no recorded launch."""
        return self.x(cat, name, k_ts, k_dur, tid=stream, pid=0, device=0, stream=stream)

    def trace(self) -> Trace:
        return chrome.from_document({"traceEvents": self.events, **self.meta})

    def findings(self, config: Config | None = None) -> dict[str, Finding]:
        found, failures = run_rules(self.trace(), config)
        assert failures == [], failures
        return {f.rule: f for f in found}


def cpu_rank_doc(rank: int, world: int, wait_us: float) -> dict[str, Any]:
    """A CPU rank's window as a chrome document: 3 steps of 20 ms whose step thread waits ``wait_us`` in a gloo
    all-reduce (a straggler waits least: the others wait for it)."""
    s = Synth(gpu=None)
    for k in range(3):
        t0 = k * 20_000
        s.step(k, t0, 20_000)
        s.op("aten::mm", t0 + 100, 19_000 - wait_us, dims=[[64, 64], [64, 64]], types=["float", "float"])
        s.x("user_annotation", "gloo:all_reduce", t0 + 19_200 - wait_us, wait_us + 500, tid=9)
    return {"traceEvents": s.events, "distributedInfo": {"rank": rank, "world_size": world, "backend": "gloo"}}


# -- the host's own work and input between steps (issue 33, item 7) ----------------------------------------------

GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, Functor)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DECODE_OPS = ("aten::_to_copy", "aten::upsample_bilinear2d", "aten::div")  # a frame to float, resized, normalized


def small_launches(s: Synth, t0: float, n: int = 30) -> None:
    """``n`` small ops from ``t0``, 21 µs apart, each launching a 2 µs kernel (the host feeding the device)."""
    for j in range(n):
        t = t0 + j * 21
        s.op("aten::add", t, 20, [[64], [64], []], ["float", "float", "Scalar"])
        s.launch(ELEMENTWISE, t + 5, t + 12, 2)


def host_preprocessing_gpu(own_us: float = 6000, how: str = "ops") -> Synth:
    """Three 10 ms steps on a GPU whose host first works on its own for ``own_us`` µs, launching nothing (in-step
    video decoding: ``how="ops"``, CPU ops on CPU tensors under a ``preprocess`` annotation; ``"python"``, one Python
    function with no op under it, numpy's or PyAV's way), then launches 30 small kernels: the device idles while the
    host works."""
    s = Synth()
    for k in range(3):
        base = k * 10_000
        s.step(k, base, 10_000)
        if how == "python":
            s.x("python_function", "video.py(41): decode", base + 10, own_us)
        else:
            s.x("user_annotation", "preprocess", base + 10, own_us)
            part = own_us / len(DECODE_OPS)
            for j, name in enumerate(DECODE_OPS):
                s.op(name, base + 10 + j * part, part - 1)
        small_launches(s, base + 20 + own_us)
    return s


def prefetching_trainer_gpu(fetch_us: float = 1000, fetch_tid: int = 1) -> Synth:
    """A trainer's three 1 ms steps on a GPU (one GEMM each, busy 800 µs), each batch fetched before its step begins
    (``enumerate(DataLoader)`` for ``fetch_us`` µs on thread ``fetch_tid``, between the steps: the Hugging Face
    Trainer's prefetch before ``on_step_begin``; the first step's fetch is before the window)."""
    s = Synth()
    period = 1000 + fetch_us + 20
    for k in range(3):
        base = k * period
        s.x("user_annotation", LOADER, base - fetch_us - 10, fetch_us, tid=fetch_tid)
        s.step(k, base, 1000).op("aten::mm", base + 10, 40, [[4096, 4096], [4096, 4096]], ["float", "float"])
        s.launch(GEMM, base + 20, base + 50, 800)
    return s
