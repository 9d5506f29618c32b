"""Your own rule: "this custom kernel takes over 30% of the step".

Run:  python examples/custom_rule.py
A team with an op of its own (here ``myteam::scan``, a ``torch.library`` custom op) wants to know when it
dominates a step. The rule below reads the window autoprof hands every rule (the read-only :class:`Trace`, times
in ns) and returns a finding when the op's time (its kernels' time on a device, its own on a CPU) is over 30 % of
the steps'. ``autoprof.configure(rules=[...])`` runs it live after the built-in rules, exactly like them; offline,
``autoprof analyze --rules custom_rule:RULES traces/`` does the same on saved traces. Its findings are
``autoprof.finding`` records with ``"rule": "myteam.custom_kernel_share"``.
"""

from __future__ import annotations

from typing import Any

import torch

import autoprof
from autoprof import Finding
from autoprof.trace.model import CPU_OP_CODE, KERNEL_CODE, Trace

OP = "myteam::scan"
SHARE = 0.30


@autoprof.rule("myteam.custom_kernel_share", verdicts=("dominant",))
def custom_kernel_share(trace: Trace, config: Any) -> list[Finding]:
    op = trace.name_id(OP)
    steps_ns = sum(step.dur_ns for step in trace.steps)
    if op < 0 or steps_ns <= 0:
        return []
    calls = [i for i in trace.host_named([op]) if trace.h_cat[i] == CPU_OP_CODE]
    # On a device: the kernels these calls launched (a kernel's d_launch_host is the runtime call, whose parent
    # chain reaches the op); on a CPU: the op's own time.
    launched = set(calls)
    kernel_ns = 0
    for d in range(trace.n_device):
        h = trace.d_launch_host[d]
        while h >= 0 and h not in launched:
            h = trace.h_parent[h]
        if h >= 0 and trace.d_cat[d] == KERNEL_CODE:
            kernel_ns += trace.d_dur[d]
    spent = kernel_ns or sum(trace.h_dur[i] for i in calls)
    share = spent / steps_ns
    if share <= SHARE:
        return []
    return [
        Finding(
            "myteam.custom_kernel_share",
            "dominant",
            "warning",
            f"{OP} takes {share:.0%} of the steps ({len(calls)} calls, {spent / 1e6:.2f} ms)",
            "Our scan dominates: try the blocked implementation (MYTEAM_SCAN=blocked).",
            {"op_time_us": round(spent / 1e3, 3), "step_share": round(share, 4), "calls_count": len(calls)},
            (OP,),
        )
    ]


RULES = [custom_kernel_share]


@torch.library.custom_op(OP, mutates_args=())
def scan(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    for k in range(1, out.shape[0]):  # a deliberately slow sequential scan
        out[k] += out[k - 1]
    return out


def main() -> None:
    autoprof.configure(rules=RULES)
    x = torch.randn(256, 64)
    w = torch.randn(64, 64)

    @autoprof(name="step")
    def step() -> torch.Tensor:
        return scan(x @ w).sum()

    for _ in range(8):  # defaults: skip the cold first call, wait 1, warm up 1, record 3
        step()
    autoprof.flush()


if __name__ == "__main__":
    main()
