"""The live side: ``@autoprof`` and ``section`` on a user's calls, the one profiler per process, its windows and what
each closed window's job does with them (the analysis and the records come from :mod:`autoprof.analysis` and
:mod:`autoprof.render`)."""
