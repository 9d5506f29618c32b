"""The renderers of an analysis: the records (:mod:`autoprof.render.emit`, live and offline) and the HTML page
(:mod:`autoprof.render.htmlreport`); the terminal table and the diff's are :mod:`autoprof.cli`'s."""
