"""The house of docs/architecture.md, checked on the source (no imports run): its layers (no import goes up one, no
import closes a circle) and its rooms and what each may import. That document is the one list: this test reads it,
so an import outside a room's list (or a listed one no module of the room makes), or a module in no layer, is a
change of the architecture, made in the document."""

from __future__ import annotations

import ast
import graphlib
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
    "numpy",
)
_NAME = re.compile(r"[A-Za-z_][\w.]*")
#: ``from autoprof.live import session`` imports the module ``live.session``
PACKAGES = ("autoprof", "autoprof.trace", "autoprof.measure", "autoprof.rules", "autoprof.live", "autoprof.analysis", "autoprof.render")


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
            if node.module in PACKAGES:
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
    for module in (
        "trace.model",
        "rules.",
        "analysis.compare",
        "analysis.engine",
        "cli",
        "config",
        "findings",
        "render.emit",
        "live.schedule",
        "render.htmlreport",
    ):
        assert "torch" not in MAY_IMPORT[module]
    assert not [room for room in MAY_IMPORT if room.startswith("trace.") and room != "trace.live" and "torch" in MAY_IMPORT[room]]
    assert [room for room in MAY_IMPORT if room.startswith("measure")] and not [
        room for room in MAY_IMPORT if room.startswith("measure") and "torch" in MAY_IMPORT[room]
    ]


def test_the_table_is_read_from_the_document() -> None:
    assert MAY_IMPORT["config"] == {"_guard", "findings"} and MAY_IMPORT["autoprof"] >= {"config", "analysis.engine", "live.instrument"}
    assert MAY_IMPORT["analysis.ranks"] == {"findings", "measure.units", "rules.comm", "rules.regime"}
    assert MAY_IMPORT["live.instrument"] == {
        "_guard",
        "config",
        "render.emit",
        "live._cpu",
        "live.schedule",
        "live.session",
        "live.trigger",
        "torch",
        "wrapt",
    }
    assert MAY_IMPORT["trace._pool"] == MAY_IMPORT["trace._worker"] == {"_guard", "trace.events"}
    assert "rules." in MAY_IMPORT and "integrations." in MAY_IMPORT
    edited = DOC.read_text().replace(
        "| _guard, config, render.emit, live._cpu, live.schedule, live.session, live.trigger; torch, wrapt |",
        "| _guard, config, live._cpu, live.schedule, live.session, live.trigger; torch, wrapt |",
    )
    assert "render.emit" not in may_import(edited)["live.instrument"]  # a row edited in the document is what the test checks


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
    assert "rules._common" in helpers
    wrong = []
    for module, deps in modules.items():
        rules_imported = {d for d in deps if not d.split(".")[-1].startswith("_")}
        if module in helpers and rules_imported:
            wrong.append(f"helper {module} imports {sorted(rules_imported)}")
        elif module not in helpers and module != "rules" and rules_imported - COMPOSES.get(module, set()):
            wrong.append(f"rule {module} imports {sorted(rules_imported - COMPOSES.get(module, set()))}")
    assert wrong == []


def private_rule_imports(root: Path) -> list[str]:
    """Imports of a private rules module (``rules._common``) by a module outside ``rules/``, and imports of a rule
    by a measurement (``measure/`` reads no rule: the rules read it), on the source under ``root`` (a package laid
    out as autoprof is)."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__") or "autoprof"
        for dep in sorted(_imports(path)):
            if not dep.startswith("rules"):
                continue
            if module.split(".")[0] != "rules" and any(part.startswith("_") for part in dep.split(".")[1:]):
                wrong.append(f"{module} imports {dep}, a private rules module")
            elif module.split(".")[0] == "measure":
                wrong.append(f"{module} imports {dep}, a rule")
    return wrong


def test_no_module_outside_rules_imports_a_private_rules_module_and_measure_imports_no_rule() -> None:
    assert private_rule_imports(PACKAGE) == []


def test_the_private_rules_check_catches_a_violation(tmp_path: Path) -> None:
    for folder in ("analysis", "measure", "rules"):
        (tmp_path / folder).mkdir()
    (tmp_path / "analysis" / "drift.py").write_text("from autoprof.rules._common import noise_floor\nfrom autoprof.measure import units\n")
    (tmp_path / "measure" / "views.py").write_text("from autoprof.rules import regime\nfrom autoprof.trace.model import Trace\n")
    (tmp_path / "rules" / "comm.py").write_text("from autoprof.rules._common import noise_floor\nfrom autoprof.measure.views import view\n")
    (tmp_path / "render.py").write_text("import autoprof.rules._common\n")
    assert private_rule_imports(tmp_path) == [
        "analysis.drift imports rules._common, a private rules module",
        "measure.views imports rules.regime, a rule",
        "render imports rules._common, a private rules module",
    ]


def test_the_check_itself_catches_a_wrong_import(tmp_path: Path) -> None:
    bad = tmp_path / "rule.py"
    bad.write_text("import torch\nfrom autoprof.render import emit\nfrom autoprof.trace.model import Trace\n")
    assert _imports(bad) == {"torch", "render.emit", "trace.model"}
    assert not _allowed("render.emit", MAY_IMPORT["rules."]) and not _allowed("torch", MAY_IMPORT["rules."])
    assert _allowed("trace.model", MAY_IMPORT["rules."]) and _allowed("rules._common", MAY_IMPORT["rules."])
    assert _allowed("measure.views", MAY_IMPORT["rules."]) and not _allowed("rules.regime", MAY_IMPORT["measure.views"])


# The layers: the house's drawing in docs/architecture.md, a layer per line (its name, then its folders), top first.
_HOUSE = re.compile(r"^ (\w+) {2,}(\S.*?)(?: {2,}|$)")


def layers(doc: str) -> list[tuple[str, list[str]]]:
    """(layer, its rooms) from the first drawing of ``doc``, top layer first; a room is a module (``cli``) or a
    package ending in "." (``live.``); ``__init__`` is the package ``autoprof``."""
    block = doc.split("```")[1]
    out = []
    for line in block.splitlines():
        m = _HOUSE.match(line)
        if not m or m.group(1) == "layer":
            continue
        rooms = []
        for name in m.group(2).split(","):
            name = name.strip()
            rooms.append(name.rstrip("/") + "." if name.endswith("/") else {"__init__": "autoprof"}.get(name, name))
        out.append((m.group(1), rooms))
    return out


LAYERS = layers(DOC.read_text())


def _layer(module: str, house: list[tuple[str, list[str]]] = LAYERS) -> int | None:
    for depth, (_, rooms) in enumerate(house):
        if any(module == r or (r.endswith(".") and (module + ".").startswith(r)) for r in rooms):
            return depth
    return None


def _graph() -> dict[str, set[str]]:
    """Each module -> the autoprof modules it imports (a package's name where the import names one)."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = set()
        for dep in _imports(path):
            while dep and dep not in modules:
                dep = dep.rpartition(".")[0]  # an attribute of a module: the module
            if dep and dep != _module(path):
                found.add(dep)
        out[_module(path)] = found
    return out


def _up(graph: dict[str, set[str]], house: list[tuple[str, list[str]]] = LAYERS) -> list[str]:
    wrong = []
    for module, deps in sorted(graph.items()):
        here = _layer(module, house)
        for dep in sorted(deps):
            there = _layer(dep, house)
            if here is not None and there is not None and there < here:
                wrong.append(f"{module} ({house[here][0]}) imports {dep} ({house[there][0]}), a layer above")
    return wrong


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A circle of imports in the graph (its modules, the first one again at the end), or none: the standard
    library's topological sort finds one when there is one."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return [list(e.args[1])]
    return []


def test_the_house_has_its_layers_in_the_flows_order() -> None:
    assert [name for name, _ in LAYERS] == ["entry", "integrations", "live", "render", "analysis", "rules", "measure", "trace", "ground"]
    assert _layer("live.session") == 2 and _layer("analysis.engine") == 4 and _layer("rules._common") == 5
    assert _layer("measure.peaks") == 6 and _layer("trace.model") == 7
    assert _layer("autoprof") == _layer("cli") == 0 and _layer("config") == _layer("findings") == 8


def test_every_module_is_in_a_layer() -> None:
    homeless = [_module(p) for p in sorted(PACKAGE.rglob("*.py")) if _layer(_module(p)) is None]
    assert homeless == [], f"add these to a layer of the house in docs/architecture.md: {homeless}"


def test_no_import_goes_up_a_layer() -> None:
    assert _up(_graph()) == []


def test_no_import_closes_a_circle() -> None:
    assert _circles(_graph()) == []


def test_the_layer_checks_catch_an_import_up_and_a_circle() -> None:
    graph = _graph()
    graph["rules.regime"] = graph["rules.regime"] | {"analysis.engine"}  # a rule that reads the engine
    assert _up(graph) == ["rules.regime (rules) imports analysis.engine (analysis), a layer above"]
    assert _circles(graph) and any("rules.regime" in c and "analysis.engine" in c for c in _circles(graph))
    moved = [(name, rooms) for name, rooms in LAYERS if name != "render"]
    moved.insert(moved.index(next(x for x in moved if x[0] == "trace")) + 1, ("render", ["render.", "schema."]))
    assert "live.window (live) imports render.emit (render), a layer above" not in _up(_graph(), moved)
    assert any(w.startswith("render.htmlreport (render) imports analysis.engine") for w in _up(_graph(), moved))


# Where exceptions are caught: only in autoprof/_guard.py, its boundaries (docs/architecture.md).
_BROAD = ("Exception", "BaseException")


def broad_catches(source: str) -> set[str]:
    """The functions (qualified names) in ``source`` with a handler that catches a broad exception and does not end
    in a ``raise``."""
    found: set[str] = set()

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*where, child.name])
                continue
            if isinstance(child, ast.ExceptHandler):
                kinds = [] if child.type is None else (child.type.elts if isinstance(child.type, ast.Tuple) else [child.type])
                broad = child.type is None or any(ast.unparse(k) in _BROAD for k in kinds)
                if broad and not isinstance(child.body[-1], ast.Raise):
                    found.add(".".join(where) or "<module>")
            visit(child, where)

    visit(ast.parse(source), [])
    return found


def outside_the_guard(doc: str) -> set[tuple[str, str]]:
    """(module, function) pairs that docs/architecture.md lets catch broadly outside ``_guard.py``: its "Outside the
    guard:" paragraph, each ``module``: ``f``, ``g`` with its reason ("none" lists nothing)."""
    section = doc.split("## Where exceptions are caught", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split("Outside the guard:", 1)[1].split())
    out = set()
    for module, names in re.findall(r"`([\w.]+)`: ((?:`[\w.]+`(?:, )?)+)", text):
        out.update((module, n) for n in re.findall(r"`([\w.]+)`", names))
    return out


def unguarded(package: Path, allowed: set[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(the broad catches in ``package`` outside its ``_guard.py`` that ``allowed`` does not list, the entries of
    ``allowed`` that catch nothing broad)."""
    actual = set()
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__") or "autoprof"
        if module != "_guard":
            actual.update((module, f) for f in broad_catches(path.read_text()))
    return [f"{m}: {f}" for m, f in sorted(actual - allowed)], [f"{m}: {f}" for m, f in sorted(allowed - actual)]


def test_exceptions_are_caught_only_in_the_guard() -> None:
    listed = outside_the_guard(DOC.read_text())
    wrong, stale = unguarded(PACKAGE, listed)
    assert wrong == [], "a broad catch outside autoprof/_guard.py: use one of its boundaries (docs/architecture.md)"
    assert stale == [], "listed as catching broadly outside the guard, but it catches nothing broad"


def test_the_guard_check_catches_a_hand_written_handler(tmp_path: Path) -> None:
    (tmp_path / "_guard.py").write_text("def quiet():\n    try:\n        f()\n    except Exception:\n        pass\n")
    (tmp_path / "probe.py").write_text(
        "from autoprof import _guard\n"
        "def has(store):\n    with _guard.quiet('cross_rank.check'):\n        return store.check()\n    return False\n"
        "def cleanup():\n    try:\n        f()\n    except BaseException:\n        close()\n        raise\n"
    )
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "__init__.py").write_text("def run():\n    try:\n        f()\n    except Exception as e:\n        log(e)\n")
    assert unguarded(tmp_path, set()) == (["rules: run"], [])
    assert unguarded(tmp_path, {("rules", "run"), ("probe", "has")}) == ([], ["probe: has"])
    section = "## Where exceptions are caught\n\nOutside the guard: {}\n\n## Decisions\n"
    doc = section.format("`rules`: `run` (a reason).")
    assert outside_the_guard(doc) == {("rules", "run")} and outside_the_guard(section.format("none.")) == set()
    assert outside_the_guard(DOC.read_text()) == {("live.instrument", "_Instrument.begin"), ("live.instrument", "_Instrument.end")}
    assert unguarded(tmp_path, outside_the_guard(doc)) == ([], [])


def test_the_boundary_check_sees_a_swallowed_exception_and_not_a_reraise() -> None:
    source = (
        "def quiet():\n    try:\n        f()\n    except Exception:\n        pass\n"
        "class C:\n    def m(self):\n        try:\n            f()\n        except (ValueError, BaseException) as e:\n            log(e)\n"
        "def cleanup():\n    try:\n        f()\n    except BaseException:\n        close()\n        raise\n"
        "def narrow():\n    try:\n        f()\n    except OSError:\n        pass\n"
        "def bare():\n    try:\n        f()\n    except:\n        return None\n"
    )
    assert broad_catches(source) == {"quiet", "C.m", "bare"}
