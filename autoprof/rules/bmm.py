"""``aten::matmul`` → ``aten::bmm``: a batched matmul on 3-D+ inputs (information)."""

from __future__ import annotations

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.measure.steps import steps_ns
from autoprof.measure.units import share, us
from autoprof.measure.views import shape_of, view
from autoprof.rules._common import host_floor_ns
from autoprof.trace.model import Trace

RULE = "batched_matmul"
BATCHED = "batched"
VERDICTS = {RULE: (BATCHED,)}


def check(trace: Trace, config: Config | None = None) -> list[Finding]:
    win = view(trace)
    mm = trace.name_id("aten::matmul")
    bmm = trace.name_id("aten::bmm")
    if mm < 0 or bmm < 0:
        return []
    hits: list[int] = []
    for i in trace.host_named([bmm]):
        if win.host_in[i]:
            parent = trace.h_parent[i]
            if parent >= 0 and trace.h_name[parent] == mm:
                hits.append(parent)
    if not hits:
        return []
    spent = sum(trace.h_dur[i] for i in hits)
    if spent < host_floor_ns(trace, steps_ns(trace, win), config):
        return []
    shapes = sorted({str(shape_of(trace, i)[0]) for i in hits if trace.shapes.get(i)})[:5]
    return [
        Finding(
            RULE,
            BATCHED,
            "info",
            f"{len(hits)} aten::matmul calls on 3-D+ inputs run as aten::bmm (batched matmul)",
            "Expected for batched inputs; if the batch dims are only a reshape of 2-D data, a single "
            "2-D mm on the flattened input can be faster.",
            {
                "bmm_count": len(hits),
                "bmm_time_us": us(spent),
                "bmm_time_share": share(spent, steps_ns(trace, win)),
                "input_shapes": shapes,
            },
            ("aten::matmul -> aten::bmm",),
        )
    ]
