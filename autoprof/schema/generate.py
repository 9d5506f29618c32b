"""Regenerate the rule and verdict parts of ``records.schema.json`` from :data:`autoprof.analysis.vocabulary.VOCABULARY`.

Run ``python -m autoprof.schema.generate`` after adding or changing a rule's verdicts (``--check``: exit 1 when the
file is not what it would write; the test suite runs the same check). Everything else in the schema is kept as written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from autoprof.analysis.vocabulary import VOCABULARY
from autoprof.findings import USER_RULE_ID

PATH = Path(__file__).with_name("records.schema.json")


def generated(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its finding records' ``rule`` (the built-in ids, or a user's dotted id) and ``$defs.verdicts``
    (each built-in rule's verdicts) generated from the vocabulary."""
    out: dict[str, Any] = json.loads(json.dumps(schema))
    finding = next(block for block in out["allOf"] if block["if"]["properties"]["event"].get("const") == "autoprof.finding")
    finding["then"]["properties"]["rule"] = {
        "anyOf": [
            {"enum": sorted(VOCABULARY), "description": "a built-in rule (autoprof.analysis.vocabulary.VOCABULARY)"},
            {
                "type": "string",
                "pattern": f"^{USER_RULE_ID.pattern}$",
                "description": "a user's own rule (configure(rules=...)): a dotted id, never a built-in one",
            },
        ]
    }
    out["$defs"]["verdicts"] = {
        "description": "each built-in rule's verdicts (autoprof.analysis.vocabulary.VOCABULARY); a user's rule declares its own",
        "allOf": [
            {"if": {"properties": {"rule": {"const": rule}}}, "then": {"properties": {"verdict": {"enum": list(VOCABULARY[rule])}}}}
            for rule in sorted(VOCABULARY)
        ],
    }
    return out


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autoprof.schema.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from what would be written")
    args = parser.parse_args(argv)
    current = PATH.read_text(encoding="utf-8")
    new = text(generated(json.loads(current)))
    if args.check:
        return 0 if new == current else 1
    PATH.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
