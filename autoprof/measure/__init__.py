"""The measurements: what a trace's window is and what its parts cost, read alike by the rules (which judge them),
the analysis and the renderers. Below the rules and above the trace model; no rule, no verdict, no record here.

``views`` (the window's :class:`~autoprof.measure.views.View`, intervals, the profiler's flush, launches, the op
tree, ops' self time, blocking waits, an op's shapes), ``steps`` (step times on the host and on the device),
``units`` (µs, ms, a time or a share in words), ``ops`` (the aten op families), ``runtime`` (the CUDA/HIP runtime
calls and the collective kernels), ``flops`` and ``work`` (FLOPs and bytes from shapes, a call's fixed cost),
``kernels`` (kernel names and their families), ``families`` (where the work goes by family), ``peaks`` (device and
CPU peaks) and ``gpudb`` (peaks from the optional GPU database)."""
