"""autoprof: find out why a PyTorch program is slow.

``import autoprof`` is enough: the module itself is callable, so ``@autoprof`` and ``@autoprof(...)``
work on it directly, next to ``autoprof.section``, ``autoprof.configure``, ``autoprof.analyze``, ``autoprof.diff``
and ``autoprof.report``.

The live side (``autoprof``, ``section``, ``flush``) imports torch on first use; the offline side
(``analyze``, ``diff``, the ``autoprof analyze`` and ``autoprof diff`` commands) never does.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
import warnings
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from autoprof.analysis.engine import analyze, diff
from autoprof.config import Config, ConfigError, configure
from autoprof.findings import Finding, RuleFailureWarning, rule
from autoprof.trace.chrome import TraceError

if TYPE_CHECKING:
    from autoprof.live.instrument import autoprof, section

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Finding",
    "RuleFailureWarning",
    "TraceError",
    "__version__",
    "analyze",
    "autoprof",
    "configure",
    "diff",
    "flush",
    "report",
    "rule",
    "section",
]


def flush(timeout: float | None = None) -> bool:
    """Wait until every closed window has been analyzed and its records written. True when done."""
    if "autoprof.live.session" not in sys.modules:
        return True
    from autoprof.live.session import SESSION

    return SESSION.flush(timeout)


def report(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    config: Config | None = None,
    *,
    workers: int | None = None,
    jobs: int | None = 1,
    executor: Executor | None = None,
) -> str:
    """Write one self-contained HTML page (``out``) about saved chrome traces (files, per-rank directories, a
        ``trace_dir``): the verdicts, a roofline chart per device, where each step's time goes, the device's activity
        per step, per-rank bars, the top ops and kernels. Returns ``out``. Needs ``pip install 'autoprof[report]'``
        (plotly; an ``ImportError`` of one line says so). Raises :class:`TraceError` when no input can be read (an
        empty path, ``''`` or ``file://``, is an input that cannot be read, never the current directory); the page
        lists the inputs that could not be read, next to the others. Raises ``ValueError``
        (:class:`autoprof.render.htmlreport.OutputError`), before reading anything, when ``out`` is empty, a directory, or
        one of the input traces, and on an option of the wrong type or out of range (``workers="2"``: one line naming it);
    no temporary file is left behind whatever fails. ``workers``, ``jobs``, ``executor``: as
        :func:`analyze` (the same pipeline), but ``jobs`` defaults to 1, the files read in this process one after another
        (``None``: the usable CPUs, as ``autoprof report`` does)."""
    from autoprof.render import htmlreport

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    htmlreport.write(paths, out, config, workers=workers, jobs=jobs, executor=executor)
    return os.fspath(out)


def __getattr__(name: str) -> Any:
    if name in ("autoprof", "section"):
        from autoprof.live import instrument

        value = getattr(instrument, name)
        globals()[name] = value
        return value
    if f"autoprof.{name}" in MOVED:  # a former module as an attribute (``autoprof.compare.Diff``): imported, warned
        return importlib.import_module(f"autoprof.{name}")
    raise AttributeError(f"module 'autoprof' has no attribute {name!r}")


#: Modules that moved into the folders of the flow (live, analysis, render): their former paths still import, as the
#: same module object, with a DeprecationWarning (the README documented ``autoprof.instrument.Steps``,
#: ``autoprof.compare.Diff`` and ``autoprof.vocabulary.VOCABULARY``).
MOVED = {
    f"autoprof.{name}": f"autoprof.{folder}.{name}"
    for folder, names in {
        "live": ("instrument", "session", "window", "schedule", "trigger", "exchange", "calibrate", "_pace", "_files"),
        "analysis": ("engine", "sections", "ranks", "drift", "compare", "_stats", "vocabulary", "_fleet"),
        "render": ("emit", "htmlreport"),
    }.items()
    for name in names
} | {"autoprof.peaks": "autoprof.measure.peaks"}


_SPECS: dict[str, Any] = {}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a former path (:data:`MOVED`) as the module at its new one: one module object under both names."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(f"{spec.name} is now {MOVED[spec.name]}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(MOVED[spec.name])
        _SPECS[spec.name] = module.__spec__  # the import system sets the alias's spec on the module: its own goes back
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__ is not None:
            module.__spec__ = _SPECS.get(module.__spec__.name, module.__spec__)


# One finder, whatever imported autoprof before (a reload or a purge of sys.modules makes a new class: its finder
# replaces the old one).
sys.meta_path[:] = [f for f in sys.meta_path if not (type(f).__name__ == "_Moved" and type(f).__module__ == __name__)]
sys.meta_path.append(_Moved())


class _CallableModule(types.ModuleType):
    """Lets ``@autoprof`` and ``@autoprof(...)`` work on the module object itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from autoprof.live.instrument import autoprof as _autoprof

        return _autoprof(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
