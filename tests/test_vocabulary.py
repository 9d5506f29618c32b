"""The verdict vocabulary is data: every rule names its verdicts, the shipped JSON Schema lists the same, and a
record with any other verdict does not validate."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from conftest import validate_record

from autoprof.analysis.vocabulary import VOCABULARY
from autoprof.findings import SCHEMA_VERSION, Finding, record_schema
from autoprof.render.emit import build_record

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)


def _finding_record(rule: str, verdict: str) -> dict[str, Any]:
    f = Finding(rule, verdict, "info", "m", "a")
    return build_record("autoprof.finding", "info", target="t", window=0, source="live", **f.to_record())


def test_schema_lists_exactly_the_vocabulary() -> None:
    schema = record_schema()
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION} and SCHEMA_VERSION == 2
    per_rule = {
        c["if"]["properties"]["rule"]["const"]: tuple(c["then"]["properties"]["verdict"]["enum"])
        for c in schema["$defs"]["verdicts"]["allOf"]
    }
    assert per_rule == VOCABULARY
    finding = next(c for c in schema["allOf"] if c["if"]["properties"]["event"].get("const") == "autoprof.finding")
    builtin, user = finding["then"]["properties"]["rule"]["anyOf"]
    assert sorted(builtin["enum"]) == sorted(VOCABULARY)
    assert user["pattern"] == "^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+$"


def test_the_schema_file_is_what_the_generator_writes() -> None:
    from autoprof.schema import generate

    assert generate.main(["--check"]) == 0, "run: python -m autoprof.schema.generate"


def test_a_user_rules_dotted_id_validates_and_a_plain_one_does_not() -> None:
    validate_record(_finding_record("myteam.custom_kernel_share", "dominant"))
    validator = jsonschema.Draft202012Validator(record_schema())
    assert list(validator.iter_errors(_finding_record("custom_kernel_share", "dominant")))


def test_every_verdict_is_kebab_case_and_validates() -> None:
    for rule, verdicts in VOCABULARY.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", rule)
        for v in verdicts:
            assert re.fullmatch(r"[a-z]+(-[a-z]+)*", v), (rule, v)
            validate_record(_finding_record(rule, v))


@pytest.mark.parametrize(
    "rule,verdict", [("compile_overhead", "wrapper-exceeds-compute_avg"), ("bound_regime", "gpu-bound"), ("no_such_rule", "mixed")]
)
def test_an_unlisted_verdict_or_rule_does_not_validate(rule: str, verdict: str) -> None:
    validator = jsonschema.Draft202012Validator(record_schema())
    assert list(validator.iter_errors(_finding_record(rule, verdict)))
