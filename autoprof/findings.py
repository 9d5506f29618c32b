"""Findings: what a rule concludes, and their JSON records.

A :class:`Finding` is plain data. :func:`to_record` turns it into the ``autoprof.finding`` record body;
the JSON Schema of every record autoprof writes ships in ``autoprof/schema/records.schema.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

SCHEMA_VERSION = 2

#: Severities, lowest first. ``--fail-on`` compares against this order.
SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class Finding:
    """One verdict of one rule on one window (or one trace file).

    ``evidence`` holds numbers whose keys carry their unit (``_us``, ``_ms``, ``_bytes``, ``_share``,
    ``_ratio``, ``_count``); ``subjects`` names the ops or kernels the finding is about.
    """

    rule: str
    verdict: str
    severity: str
    message: str
    advice: str
    evidence: dict[str, Any] = field(default_factory=dict)
    subjects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_record(self) -> dict[str, Any]:
        return to_record(self)


class RuleFailureWarning(RuntimeWarning):
    """A rule failed on a trace :func:`autoprof.analyze` read (it raised, returned what it may not, or is not a
    declared rule): one warning per failed rule and file, ``autoprof: FILE: rule ID failed: TYPE: message``; the other
    rules' findings are still returned. ``warnings.simplefilter("error", autoprof.RuleFailureWarning)`` makes it an
    exception instead."""


def to_record(finding: Finding) -> dict[str, Any]:
    """The fields a finding adds to an ``autoprof.finding`` record."""
    return {
        "rule": finding.rule,
        "verdict": finding.verdict,
        "severity": finding.severity,
        "message": finding.message,
        "advice": finding.advice,
        "evidence": dict(finding.evidence),
        "subjects": list(finding.subjects),
    }


def record_level(finding: Finding) -> str:
    """The log level of a finding's record: ``info`` for information, ``warning`` for warnings and critical ones."""
    return "info" if finding.severity == "info" else "warning"


def severity_rank(level: str) -> int:
    return SEVERITIES.index(level)


@lru_cache(maxsize=1)
def record_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of every record autoprof writes."""
    text = resources.files("autoprof").joinpath("schema/records.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


#: A user's rule id: dotted, so that it never collides with a built-in one (``myteam.custom_kernel_share``).
USER_RULE_ID = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
#: A verdict: kebab-case words (``compute-bound``).
VERDICT = re.compile(r"[a-z]+(-[a-z]+)*")

R = TypeVar("R", bound=Callable[..., Any])


def shown(value: object) -> str:
    """A value for a one-line message without running a user's code (no ``__repr__`` of theirs): a string, a
    number or a sequence of strings as its repr (cut short), anything else as its type."""
    t = type(value)
    if issubclass(t, str):
        text = repr(str.__str__(value))
    elif t in (int, float, bool, type(None)) or (t in (tuple, list) and all(type(v) is str for v in value)):  # type: ignore[attr-defined]
        text = repr(value)
    else:
        return f"a {t.__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


@lru_cache(maxsize=1)
def reserved_namespaces() -> frozenset[str]:
    """The first words a user's rule id may not start with: ``autoprof`` and each built-in rule id (``bound_regime``,
    ``window_drift``: the schema's list of them, generated from :data:`autoprof.analysis.vocabulary.VOCABULARY`), so that a
    user's finding never reads as autoprof's own."""
    builtin: list[str] = []
    for part in record_schema().get("allOf", ()):
        if part.get("if", {}).get("properties", {}).get("event", {}).get("const") == "autoprof.finding":
            for choice in part.get("then", {}).get("properties", {}).get("rule", {}).get("anyOf", ()):
                builtin.extend(choice.get("enum", ()))
    return frozenset({"autoprof", *builtin})


def declaration_problem(rule_id: object, verdicts: object) -> str | None:
    """What is wrong with a user's rule declaration (one line), or None: its id must be dotted lowercase words
    outside the built-in namespaces (:func:`reserved_namespaces`), its verdicts a non-empty sequence of kebab-case
    words. Checked when a rule is declared (:func:`rule`) and again each time it runs."""
    if not issubclass(type(rule_id), str) or not USER_RULE_ID.fullmatch(rule_id):  # type: ignore[call-overload]
        return f"a rule id is dotted lowercase words (myteam.custom_kernel_share), not {shown(rule_id)}"
    head = str.partition(rule_id, ".")[0]  # type: ignore[arg-type]
    if head in reserved_namespaces():
        return f"a rule id may not be in a built-in namespace ({head}.*: autoprof's own), not {shown(rule_id)}"
    if type(verdicts) not in (tuple, list) or not verdicts or not all(type(v) is str and VERDICT.fullmatch(v) for v in verdicts):  # type: ignore[attr-defined]
        return f"a rule's verdicts are a non-empty sequence of kebab-case words (too-slow), not {shown(verdicts)}"
    return None


def rule(rule_id: str, verdicts: tuple[str, ...] | list[str]) -> Callable[[R], R]:
    """Declare a callable ``(trace, config) -> list[Finding]`` as a rule of one's own: its id (dotted:
    ``"myteam.custom_kernel_share"``, never in a built-in namespace: ``autoprof.*``, ``bound_regime.*``...) and
    every verdict its findings may give. Hand it to ``autoprof.configure(rules=[...])`` (or ``autoprof analyze
    --rules module:attr``). Raises ``ValueError`` (one line) on a bad id or verdict. A rule runs under a contract
    (see :func:`autoprof.rules.run_user_rule`): a read-only trace, a time limit, JSON-safe findings."""
    problem = declaration_problem(rule_id, verdicts)
    if problem is not None:
        raise ValueError(problem)

    def declare(fn: R) -> R:
        if not callable(fn):
            raise ValueError(f"a rule is a callable (trace, config) -> list[Finding], not {type(fn).__name__}")
        fn.rule_id = rule_id  # type: ignore[attr-defined]
        fn.verdicts = tuple(verdicts)  # type: ignore[attr-defined]
        return fn

    return declare


def rule_failed(name: str | None, error: BaseException, *, typed: bool = False) -> str:
    """A failed rule as every output says it: ``rule NAME failed: message`` (the error record's message, its type in
    the record's ``error_type``); ``typed``: ``rule NAME failed: TYPE: message`` (where no field names the type);
    ``name`` None: ``rule failed: message`` (the table, whose column names the rule)."""
    detail = f"{error_type(error)}: {error}" if typed else str(error)
    return f"rule {name} failed: {detail}" if name is not None else f"rule failed: {detail}"


def error_type(error: BaseException) -> str:
    """The exception's type as a record names it (a rule's failure carried across processes names its own:
    ``type_name``)."""
    return getattr(error, "type_name", None) or type(error).__name__
