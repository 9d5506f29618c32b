"""The renderers of an analysis, one module each: the records (:mod:`autoprof.render.records`, live and offline, written
by :mod:`autoprof.render.emit`), ``analyze``'s terminal table (:mod:`autoprof.render.table`), ``diff``'s text
(:mod:`autoprof.render.diff`) and the HTML page (:mod:`autoprof.render.htmlreport`).

:func:`write_page` is the page's one entry for the live side (the end-of-run report): the page's module, and plotly
with it, load only when it is called."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoprof.config import Config


def write_page(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], config: Config | None = None) -> None:
    """The HTML page of the trace files ``paths`` written to ``out``, read in this process one after another (as
    :func:`autoprof.render.htmlreport.write`, whose errors it raises: no plotly, an unwritable ``out``, no readable
    input)."""
    from autoprof.render import htmlreport

    htmlreport.write(paths, out, config)
