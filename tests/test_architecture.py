"""The rooms of docs/architecture.md and what each may import, checked on the source (no imports run): an
import outside a room's list is a change of the architecture, to be made in that document and here together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

PACKAGE = Path(__file__).resolve().parent.parent / "autoprof"
THIRD_PARTY = ("torch", "structlog", "wrapt", "orjson", "lightning", "pytorch_lightning", "transformers", "plotly", "fsspec", "distributed")

# Room -> the autoprof modules (and third-party packages) it may import. A room is a module, or a package
# ending in "." (every module in it). The most specific room applies.
MAY_IMPORT: dict[str, set[str]] = {
    "config": set(),
    "findings": set(),
    "schedule": {"config"},
    "_files": set(),
    "_pace": set(),
    "emit": {"config", "findings", "structlog"},
    "calibrate": {"torch"},
    "trace.": set(),  # the package itself (empty)
    "trace.model": set(),
    "trace.inputs": set(),
    "trace.jsonstream": {"trace.inputs"},
    "trace.events": {"trace.inputs", "trace.model", "orjson"},
    "trace._pool": {"trace.events"},
    "trace._worker": {"trace.events"},
    "trace.batches": {"trace._pool", "trace.events", "trace.jsonstream"},
    "trace.chrome": {"trace._pool", "trace.batches", "trace.events", "trace.inputs", "trace.jsonstream", "trace.model"},
    "trace.live": {"trace.model"},
    "trace.remote": {"trace.inputs", "fsspec"},
    "rules.": {"config", "findings", "trace.model", "peaks", "rules."},
    "peaks": {"config"},
    "sections": {"rules._common", "trace.model"},
    "ranks": {"findings", "rules._common", "rules.comm", "rules.regime"},
    "_stats": set(),
    "drift": {"_stats", "findings", "rules._common"},
    "vocabulary": {"drift", "ranks", "rules"},
    "schema": set(),
    "schema.generate": {"findings", "vocabulary"},
    "compare": {"_stats", "findings", "rules._kernels", "trace.model"},
    "_fleet": {"trace._pool"},
    "engine": {
        "_fleet",
        "compare",
        "config",
        "findings",
        "ranks",
        "rules.",
        "sections",
        "trace.chrome",
        "trace.live",
        "trace.model",
        "trace.remote",
    },
    "cli": {"autoprof", "compare", "config", "emit", "engine", "findings", "htmlreport", "trace.chrome", "distributed"},
    "htmlreport": {
        "config",
        "engine",
        "findings",
        "ranks",
        "rules.regime",
        "rules.roofline",
        "rules._common",
        "trace.chrome",
        "trace.model",
        "trace.remote",
        "plotly",
    },
    "exchange": {"config", "emit", "ranks", "torch"},
    "window": {
        "_files",
        "_pace",
        "calibrate",
        "config",
        "emit",
        "engine",
        "exchange",
        "findings",
        "drift",
        "ranks",
        "rules._common",
        "rules.regime",
        "sections",
        "trace.model",
    },
    "session": {"_pace", "calibrate", "config", "emit", "engine", "htmlreport", "schedule", "window", "torch"},
    "instrument": {"config", "emit", "schedule", "session", "torch", "wrapt"},
    "__main__": {"cli"},
    "integrations": {"config", "emit"},
    "integrations.lightning": {"emit", "instrument", "integrations", "lightning", "pytorch_lightning"},
    "integrations.transformers": {"emit", "instrument", "integrations", "transformers"},
    "autoprof": {"config", "engine", "findings", "htmlreport", "instrument", "session", "trace.chrome"},
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    name = ".".join(p for p in parts if p != "__init__")
    return name or "autoprof"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module in ("autoprof", "autoprof.trace", "autoprof.rules"):
                names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "autoprof":
                found.add(name.removeprefix("autoprof.") if name != "autoprof" else "autoprof")
            elif top in THIRD_PARTY:
                found.add(top)
    return found


def _room(module: str) -> str | None:
    rooms = [r for r in MAY_IMPORT if module in (r, r.rstrip(".")) or (r.endswith(".") and module.startswith(r))]
    return max(rooms, key=len, default=None)


def _allowed(dep: str, allowed: set[str]) -> bool:
    return any(dep == a or (a.endswith(".") and dep.startswith(a)) or dep.startswith(a + ".") for a in allowed)


def test_every_module_is_in_a_room() -> None:
    homeless = [_module(p) for p in sorted(PACKAGE.rglob("*.py")) if _room(_module(p)) is None]
    assert homeless == [], f"add these to docs/architecture.md and MAY_IMPORT: {homeless}"


def test_each_room_imports_only_what_it_may() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        room = _room(module)
        assert room is not None
        for dep in sorted(_imports(path)):
            if dep == module or dep in ("__version__",) or dep.startswith(module + "."):
                continue
            if not _allowed(dep, MAY_IMPORT[room] | {"autoprof.__version__"}):
                wrong.append(f"{module} imports {dep}")
    assert wrong == []


def test_the_offline_side_and_the_rules_never_import_torch() -> None:
    for module in ("trace.", "rules.", "compare", "engine", "cli", "config", "findings", "emit", "schedule", "htmlreport"):
        assert "torch" not in MAY_IMPORT[module]


#: A rule may import another rule only to compose its public analysis: these, and nothing else.
COMPOSES = {"rules.regime": {"rules.roofline", "rules.comm"}, "rules.occupancy": {"rules.regime"}}


def _rule_modules() -> dict[str, set[str]]:
    out = {}
    for path in sorted((PACKAGE / "rules").glob("*.py")):
        module = _module(path)
        out[module] = {dep for dep in _imports(path) if dep.startswith("rules.") and dep != module}
    return out


def test_helpers_never_import_a_rule_and_rules_import_rules_only_to_compose() -> None:
    modules = _rule_modules()
    helpers = {m for m in modules if m.split(".")[-1].startswith("_")}
    assert {"rules._common", "rules._work", "rules._flops"} <= helpers
    wrong = []
    for module, deps in modules.items():
        rules_imported = {d for d in deps if not d.split(".")[-1].startswith("_")}
        if module in helpers and rules_imported:
            wrong.append(f"helper {module} imports {sorted(rules_imported)}")
        elif module not in helpers and module != "rules" and rules_imported - COMPOSES.get(module, set()):
            wrong.append(f"rule {module} imports {sorted(rules_imported - COMPOSES.get(module, set()))}")
    assert wrong == []


def test_the_check_itself_catches_a_wrong_import(tmp_path: Path) -> None:
    bad = tmp_path / "rule.py"
    bad.write_text("import torch\nfrom autoprof import emit\nfrom autoprof.trace.model import Trace\n")
    assert _imports(bad) == {"torch", "emit", "trace.model"}
    assert not _allowed("emit", MAY_IMPORT["rules."]) and not _allowed("torch", MAY_IMPORT["rules."])
    assert _allowed("trace.model", MAY_IMPORT["rules."]) and _allowed("rules._common", MAY_IMPORT["rules."])
