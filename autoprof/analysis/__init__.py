"""The reading: one :class:`~autoprof.analysis.engine.Analysis` per trace, live or from a file, from the rules
(:mod:`autoprof.rules`) and what they stand on (peaks, sections, ranks, drift), and the diff of two runs. Never
imports torch, never writes a record: the renderers (:mod:`autoprof.render`, :mod:`autoprof.cli`) do."""
