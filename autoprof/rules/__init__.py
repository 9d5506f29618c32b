"""The rules: one module per reading, each ``check(trace, config) -> list[Finding]``; pure, no torch, no I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.rules import bmm, cold, comm, compile, drift, fusion, gaps, occupancy, ranks, regime, roofline, sync, variance
from autoprof.trace.model import Trace

Rule = Callable[[Trace, Any], list[Finding]]

#: Every rule, in the order their findings are reported.
RULES: tuple[tuple[str, Rule], ...] = (
    ("regime", regime.check),
    ("roofline", roofline.check),
    ("fusion", fusion.check),
    ("compile", compile.check),
    ("cold", cold.check),
    ("sync", sync.check),
    ("occupancy", occupancy.check),
    ("gaps", gaps.check),
    ("comm", comm.check),
    ("variance", variance.check),
    ("bmm", bmm.check),
)


#: The published vocabulary: every rule id and the verdicts it can give (each rule module names them as
#: constants). The JSON Schema of the records lists the same (a test keeps the two equal).
VOCABULARY: dict[str, tuple[str, ...]] = {
    rule: verdicts
    for module in (regime, roofline, fusion, compile, cold, sync, occupancy, gaps, comm, variance, bmm, ranks, drift)
    for rule, verdicts in module.VERDICTS.items()
}


def run_rules(
    trace: Trace, config: Config | None = None, between: Callable[[], None] | None = None
) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    """Run every rule; a rule that fails does not stop the others. Returns (findings, failures). ``between`` is
    called before each rule (the background analysis paces itself there)."""
    findings: list[Finding] = []
    failures: list[tuple[str, BaseException]] = []
    for name, rule in RULES:
        if between is not None:
            between()
        try:
            findings.extend(rule(trace, config))
        except Exception as e:  # a bug in one rule must not hide the others' verdicts
            failures.append((name, e))
    return findings, failures
