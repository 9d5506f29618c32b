"""The rules: one module per reading, each ``check(trace, config) -> list[Finding]`` and ``VERDICTS`` (its rule ids and
the verdicts each may give); pure, no torch, no I/O.

Adding a built-in rule is its module and its name in :data:`NAMES`: the run order, :data:`RULES`, the vocabulary
and the JSON Schema (``python -m autoprof.schema.generate``) follow. A user's own rules (``configure(rules=...)``,
declared with :func:`autoprof.rule`) run after the built-in ones, the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from autoprof.config import Config
from autoprof.findings import Finding
from autoprof.trace.model import Trace

Check = Callable[[Trace, Any], list[Finding]]

#: Every built-in rule module (in ``autoprof/rules/``), in the order their findings are reported.
NAMES = ("regime", "roofline", "fusion", "compile", "cold", "sync", "occupancy", "gaps", "comm", "variance", "bmm", "pageable")
MODULES: tuple[ModuleType, ...] = tuple(import_module(f"{__name__}.{name}") for name in NAMES)


class RuleError(Exception):
    """A rule returned something it may not: not a list of findings, or a finding outside its declared vocabulary."""


@dataclass(frozen=True)
class Rule:
    """One rule as the engine runs it: its id (its first rule id: what a failure is reported under), its check, and
    the vocabulary it declared (rule id -> verdicts; a module such as ``fusion`` gives several rules' findings)."""

    id: str
    check: Check
    verdicts: Mapping[str, tuple[str, ...]]

    def run(self, trace: Trace, config: Config | None) -> list[Finding]:
        """Its findings, each checked against its vocabulary; raises :class:`RuleError` (the whole call's findings
        dropped) on anything else."""
        found = self.check(trace, config)
        if not isinstance(found, list):
            raise RuleError(f"returned {type(found).__name__}, not a list of autoprof.Finding")
        for f in found:
            if not isinstance(f, Finding):
                raise RuleError(f"returned {type(f).__name__}, not an autoprof.Finding")
            allowed = self.verdicts.get(f.rule)
            if allowed is None:
                raise RuleError(f"returned a finding of rule {f.rule!r}, which it did not declare (declared: {', '.join(self.verdicts)})")
            if f.verdict not in allowed:
                raise RuleError(f"returned verdict {f.verdict!r} for {f.rule}, not one it declared ({', '.join(allowed)})")
        return found


def of_module(module: ModuleType) -> Rule:
    return Rule(next(iter(module.VERDICTS)), module.check, module.VERDICTS)


def of_callable(fn: Any) -> Rule:
    """A user's rule (a callable declared with :func:`autoprof.rule`)."""
    return Rule(fn.rule_id, fn, {fn.rule_id: tuple(fn.verdicts)})


#: The built-in rules by id, in run order.
RULES: dict[str, Rule] = {rule.id: rule for rule in map(of_module, MODULES)}


def active(config: Config | None) -> Iterable[Rule]:
    """The rules an analysis runs: the built-in ones, then the user's (``configure(rules=...)``)."""
    yield from RULES.values()
    for fn in config.rules if config is not None else ():
        yield of_callable(fn)


def run_rules(
    trace: Trace, config: Config | None = None, tick: Callable[[], None] | None = None
) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    """Run every rule; a rule that fails (raises, or returns what it may not) does not stop the others. Returns
    (findings, failures by rule id). ``tick`` is called before each rule (the background analysis paces itself there)."""
    findings: list[Finding] = []
    failures: list[tuple[str, BaseException]] = []
    for rule in active(config):
        if tick is not None:
            tick()
        try:
            findings.extend(rule.run(trace, config))
        except Exception as e:  # a bug in one rule must not hide the others' verdicts
            failures.append((rule.id, e))
    return findings, failures
