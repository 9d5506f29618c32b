"""Findings: what a rule concludes, and their JSON records.

A :class:`Finding` is plain data. :func:`to_record` turns it into the ``autoprof.finding`` record body;
the JSON Schema of every record autoprof writes ships in ``autoprof/schema/records.schema.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

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
