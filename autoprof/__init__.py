"""autoprof: find out why a PyTorch program is slow.

``import autoprof`` is enough: the module itself is callable, so ``@autoprof`` and ``@autoprof(...)``
work on it directly, next to ``autoprof.section``, ``autoprof.configure`` and ``autoprof.analyze``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from autoprof.config import Config, ConfigError, configure
from autoprof.engine import analyze
from autoprof.findings import Finding
from autoprof.instrument import autoprof, section
from autoprof.session import SESSION as _SESSION
from autoprof.trace.chrome import TraceError

__version__ = "0.1.0"


def flush(timeout: float | None = None) -> bool:
    """Wait until every closed window has been analysed and its records written. True when done."""
    return _SESSION.flush(timeout)


__all__ = [
    "Config",
    "ConfigError",
    "Finding",
    "TraceError",
    "__version__",
    "analyze",
    "autoprof",
    "configure",
    "flush",
    "section",
]


class _CallableModule(types.ModuleType):
    """Lets ``@autoprof`` and ``@autoprof(...)`` work on the module object itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return autoprof(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
