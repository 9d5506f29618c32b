"""The modules that moved into the folders of the flow (live, analysis, render) still import at their former paths,
as the same module object, with a DeprecationWarning; the new paths import without one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import autoprof

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import importlib, json, sys, warnings
import autoprof
out = {}
for old, new in sorted(autoprof.MOVED.items()):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    out[old] = dict(
        same=module is importlib.import_module(new),
        spec=module.__spec__.name,
        warned=[str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)],
        attr=getattr(autoprof, old.rpartition(".")[2], None) is module,
    )
with warnings.catch_warnings():
    warnings.simplefilter("error", DeprecationWarning)
    from autoprof.live.instrument import Steps
    from autoprof.analysis.compare import Diff
print(json.dumps(out))
"""


def test_every_former_path_is_the_moved_module_with_a_warning() -> None:
    import json

    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert set(seen) == set(autoprof.MOVED) and len(seen) >= 20
    for old, got in seen.items():
        new = autoprof.MOVED[old]
        assert got == dict(same=True, spec=new, warned=[f"{old} is now {new}"], attr=True), old


@pytest.mark.offline
def test_a_former_path_outside_the_list_is_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("autoprof.nosuchmodule")
    assert autoprof.MOVED["autoprof.instrument"] == "autoprof.live.instrument"
    assert autoprof.MOVED["autoprof.peaks"] == "autoprof.measure.peaks"
