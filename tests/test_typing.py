"""The public API's types, as a user's type checker sees them: ``mypy --strict`` on tests/typing/. Every use in
public_api.py type-checks (the decorated callables keep their signatures, a module instance with ``name=``
stays its class); every line of misuse.py marked ``# error`` is reported, and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api as mypy_api  # in the test extra

HERE = Path(__file__).resolve().parent / "typing"
ROOT = HERE.parent.parent


def test_the_public_api_type_checks_and_misuse_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the project's mypy settings (pyproject.toml) and its package
    good, bad = HERE / "public_api.py", HERE / "misuse.py"
    out, err, status = mypy_api.run(
        ["--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--hide-error-context", str(good), str(bad)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not [e for e in errors if "public_api.py" in e], out + err
    reported = {int(m.group(1)) for e in errors if (m := re.match(r".*misuse\.py:(\d+): error:", e))}
    marked = {k for k, line in enumerate(bad.read_text().splitlines(), 1) if line.endswith("# error")}
    assert len(marked) >= 8
    assert reported == marked, f"reported {sorted(reported)}, marked {sorted(marked)}\n{out}{err}"
    assert status == 1
