"""The renderers of an analysis, one module each: the records (:mod:`autoprof.render.records`, live and offline, written
by :mod:`autoprof.render.emit`), ``analyze``'s terminal table (:mod:`autoprof.render.table`), ``diff``'s text
(:mod:`autoprof.render.diff`) and the HTML page (:mod:`autoprof.render.htmlreport`)."""
