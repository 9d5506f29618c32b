"""The rooms of docs/architecture.md and what each may import, checked on the source (no imports run). The table in
that document is the one list: this test reads it, so an import outside a room's list (or a listed one no module
of the room makes) is a change of the architecture, made in the document."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

PACKAGE = Path(__file__).resolve().parent.parent / "autoprof"
DOC = PACKAGE.parent / "docs" / "architecture.md"
THIRD_PARTY = (
    "torch",
    "structlog",
    "wrapt",
    "orjson",
    "msgspec",
    "lightning",
    "pytorch_lightning",
    "transformers",
    "plotly",
    "fsspec",
    "distributed",
)
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def _room_names(cell: str) -> list[str]:
    """The rooms a row's first cell names: ``x.py`` a module (``__init__.py`` the package ``autoprof``), ``x/`` a
    package (every module in it, written ``x.``)."""
    rooms = []
    for path in re.findall(r"`([^`]+)`", cell):
        if path.endswith("/"):
            rooms.append(path.rstrip("/").replace("/", ".") + ".")
        else:
            parts = [p for p in path.removesuffix(".py").split("/") if p != "__init__"]
            rooms.append(".".join(parts) or "autoprof")
    return rooms


def _deps(cell: str) -> set[str]:
    """What a row's "may import" cell allows: autoprof modules (``rules (comm, regime)`` is ``rules.comm`` and
    ``rules.regime``), then after ``;`` third-party packages (by their top-level name); words that qualify an entry
    (``only when drawing``, ``the package itself``) and ``nothing`` allow nothing."""
    cell = re.sub(
        r"(\w[\w.]*) \(([^)]*)\)",
        lambda m: (
            ", ".join(f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(","))
            if all(_NAME.fullmatch(n.strip()) for n in m.group(2).split(","))
            else m.group(1)
        ),
        cell.replace("`", ""),
    )
    out: set[str] = set()
    for item in re.split(r",|;| or ", cell):
        name = item.strip()
        if not _NAME.fullmatch(name) or name == "nothing":
            continue
        top = name.split(".")[0]
        out.add(top if top in THIRD_PARTY else name)
    return out


def may_import(doc: str) -> dict[str, set[str]]:
    """Room -> the autoprof modules (and third-party packages) it may import, from the table of rooms in ``doc``.
    A room is a module, or a package ending in "." (every module in it). The most specific room applies."""
    rooms: dict[str, set[str]] = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        for room in _room_names(cells[0]):
            rooms[room] = _deps(cells[2])
    return rooms


MAY_IMPORT = may_import(DOC.read_text())


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
    assert homeless == [], f"add rows for these to the table of rooms in docs/architecture.md: {homeless}"


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


def test_each_room_makes_every_import_its_row_lists() -> None:
    """The other way round: a dependency the document lists that no module of the room imports is a stale row."""
    made: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        room = _room(_module(path))
        assert room is not None
        made.setdefault(room, set()).update(_imports(path))

    def used(dep: str, imports: set[str]) -> bool:
        return any(m == dep or m.startswith(dep.rstrip(".") + ".") or (dep == "autoprof" and m == "__version__") for m in imports)

    stale = [f"{room} lists {d}" for room, deps in sorted(MAY_IMPORT.items()) for d in sorted(deps) if not used(d, made.get(room, set()))]
    assert stale == []


def test_the_offline_side_and_the_rules_never_import_torch() -> None:
    for module in ("trace.model", "rules.", "compare", "engine", "cli", "config", "findings", "emit", "schedule", "htmlreport"):
        assert "torch" not in MAY_IMPORT[module]
    assert not [room for room in MAY_IMPORT if room.startswith("trace.") and room != "trace.live" and "torch" in MAY_IMPORT[room]]


def test_the_table_is_read_from_the_document() -> None:
    assert MAY_IMPORT["config"] == set() and MAY_IMPORT["autoprof"] >= {"config", "engine", "instrument"}
    assert MAY_IMPORT["ranks"] == {"findings", "rules.comm", "rules.regime", "rules._common"}
    assert MAY_IMPORT["instrument"] == {"config", "emit", "schedule", "session", "trigger", "torch", "wrapt"}
    assert MAY_IMPORT["trace._pool"] == MAY_IMPORT["trace._worker"] == {"trace.events"}
    assert "rules." in MAY_IMPORT and "integrations." in MAY_IMPORT
    edited = DOC.read_text().replace(
        "| config, emit, schedule, session, trigger; torch, wrapt |", "| config, schedule, session, trigger; torch, wrapt |"
    )
    assert "emit" not in may_import(edited)["instrument"]  # a row edited in the document is what the test checks


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
