"""The published vocabulary: every built-in rule id and the verdicts it can give, from the rule modules' own
``VERDICTS`` (the trace rules of :data:`autoprof.rules.MODULES`, then the comparisons across ranks and across
windows). The JSON Schema's rule and verdict parts are generated from it (:mod:`autoprof.schema.generate`)."""

from __future__ import annotations

from autoprof.analysis import drift, ranks
from autoprof.rules import MODULES

VOCABULARY: dict[str, tuple[str, ...]] = {
    rule: tuple(verdicts) for module in (*MODULES, ranks, drift) for rule, verdicts in module.VERDICTS.items()
}

__all__ = ["VOCABULARY"]
