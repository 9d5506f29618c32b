"""``autoprof analyze``'s terminal table: each file's :class:`~autoprof.analysis.engine.Analysis` as a block of lines
(its findings by severity colour where the terminal takes colour), every string from a trace
:func:`~autoprof.render.text.clean`."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from autoprof.findings import rule_failed
from autoprof.render.text import clean

if TYPE_CHECKING:
    from autoprof.analysis.engine import Analysis

_COLORS = {"info": "\033[36m", "warning": "\033[33m", "critical": "\033[31m", "error": "\033[31m"}
_RESET = "\033[0m"
_BOLD = "\033[1m"


def write(results: list[Analysis], out: IO[str], color: bool) -> None:
    """Each readable file's block, by rank then path: its head (path, rank, events, steps), its sections, each finding
    (severity, rule, message, then its advice) and each failed rule (:func:`~autoprof.render.records.rule_failed`)."""

    def c(text: str, sev: str) -> str:
        return f"{_COLORS.get(sev, '')}{text}{_RESET}" if color else text

    for result in sorted((result for result in results if result.error is None), key=lambda result: (result.rank, result.path)):
        head = f"{clean(result.path)}  (rank {result.rank} of {result.world_size}, {result.event_count} events, "
        head += f"steps {result.steps[0]}–{result.steps[-1]})" if result.steps else "no ProfilerStep)"
        out.write((f"{_BOLD}{head}{_RESET}" if color else head) + "\n")
        if result.sections:
            out.write(
                "  sections: "
                + ", ".join(f"{clean(x['name'])} {x['step_share']:.0%} ({x['calls']} calls)" for x in result.sections[:8])
                + "\n"
            )
        if not result.findings:
            out.write("  no findings\n")
        width = max((len(finding.rule) for finding in result.findings), default=0)
        for finding in result.findings:
            out.write(f"  {c(f'{finding.severity:<8}', finding.severity)} {clean(finding.rule):<{width}}  {clean(finding.message)}\n")
            out.write(f"  {'':<8} {'':<{width}}  → {clean(finding.advice)}\n")
        for name, error in result.failures:
            out.write(f"  {c('error   ', 'error')} {clean(name):<{width}}  {clean(rule_failed(None, error))}\n")
        out.write("\n")
