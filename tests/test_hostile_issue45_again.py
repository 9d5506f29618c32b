"""Issue 45's mended surfaces attacked again, from the docs alone, as a careless user would: a scheduled window whose
step keeps raising, Ctrl-C held down while autoprof calibrates the CPU, a pool forked while a window records.

Each scenario runs in a process of its own through ``tests/test_hostile_live.py``'s harness (a crash is an exit code)
and prints one ``RESULT <json>`` line. Counts, never timings: the machine is shared.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_live import _servers, ok, run  # noqa: F401  # _servers: the harness's servers are closed after this module

from autoprof.live.session import MAX_CUT_TRIES

# -- a scheduled window whose step keeps raising ------------------------------------------------------------------

RAISING = """
EVERY = int(os.environ["EVERY"])
prepares = [0]
_prepare = torch.profiler.profile.prepare_trace
def counting_prepare(self):
    prepares[0] += 1
    return _prepare(self)
torch.profiler.profile.prepare_trace = counting_prepare
recorded = [0]
@autoprof(name="r", skip_first=0, wait=0, warmup=1, active=3, repeat=0)
def step(i):
    if prof_on():
        recorded[0] += 1
    if EVERY and i % EVERY == EVERY - 1:
        raise ValueError(i)
    return work()
caught = 0
for i in range(400):
    try:
        step(i)
    except ValueError:
        caught += 1
result({"caught": caught, "recorded": recorded[0], "prepares": prepares[0], "on": prof_on(),
        "windows": [w["steps"] for w in windows("r")],
        "given_up": [(w["tries"], w["error"]) for w in warns("window_given_up")],
        "incomplete": len(warns("window_incomplete"))})
"""


@pytest.mark.parametrize("every", [1, 2, 4])
def test_a_scheduled_window_whose_step_keeps_raising_is_given_up_after_a_few_tries(tmp_path: Path, every: int) -> None:
    """docs/guarantees.md: a step that raised cuts its window and the cycle is recorded again from its warmup. A step
    that raises one call in ``every`` (1: each) hit every try: before, the window was retried for the whole run (the
    profiler recorded 300 of 400 calls, ``every=4``; prepared and torn down 400 times, ``every=1``), no window was ever
    written and one ``window_incomplete`` said so. Now the window is given up after MAX_CUT_TRIES cuts in a row, once
    said, and the profiler records no more for it."""
    r = run(tmp_path, RAISING, env={"EVERY": str(every)})
    ok(r)
    got = r.result
    assert got["caught"] == 400 // every, got  # every exception reached the caller
    assert got["windows"] == [] and not got["on"], got
    assert got["given_up"] == [[MAX_CUT_TRIES, "ValueError"]], got
    assert got["prepares"] <= MAX_CUT_TRIES, got  # one window prepared per try, then none
    assert got["recorded"] <= MAX_CUT_TRIES * 3, got  # at most each try's active steps
    assert got["incomplete"] == 1, got


def test_a_step_that_raises_now_and_then_keeps_its_windows(tmp_path: Path) -> None:
    """The count is of cuts in a row: a whole window starts it over, so a step that raises one call in ten (each cycle
    of four has room between two failures) records window after window and is never given up."""
    r = run(tmp_path, RAISING, env={"EVERY": "10"})
    ok(r)
    got = r.result
    assert got["given_up"] == [] and not got["on"], got
    assert len(got["windows"]) >= 20, got
    assert all(s % 10 != 9 for w in got["windows"] for s in w), got  # a step that raised is never a recorded step
