"""A profiler of the user's, plain or scheduled, started at every point of autoprof's window (issue 31, item 1).

A scheduled ``torch.profiler`` is only *prepared* in its warmup (it records nothing, so the global "a profiler
records" flag is False): autoprof opened its own window then, and its teardown of that window (an empty start and
stop) consumed the user's prepared configuration, so the user's ``prof.step()`` crashed the process in
``stop_trace`` (exit 139) on torch 2.4.1, 2.11.0 and 2.13.0. Each case runs in a fresh interpreter (a crash is an
exit status here, not a dead test run) and checks: the process exits 0, the user's profile holds the matmuls it
watched, autoprof says once that it yielded, and autoprof records a whole window after the user's profiler is done.
CI runs this file on every supported release.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    import autoprof
    from torch.profiler import ProfilerActivity, profile, schedule

    kind = sys.argv[1]
    autoprof.configure(sink=sys.argv[2], background=False)
    x = torch.randn(32, 32)

    def user_profile(step):
        seen = []
        if kind == "plain":
            with profile(activities=[ProfilerActivity.CPU]) as p:
                for _ in range(3):
                    (x @ x).sum()
            seen.append(sum(e.name == "aten::mm" for e in p.events()))
        else:
            def ready(p):
                seen.append(sum(e.name == "aten::mm" for e in p.events()))
            with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
                         on_trace_ready=ready) as p:
                for _ in range(5):
                    step(-1)
                    p.step()
        return seen

    def scenario(when):
        # when: the call index before which the user's profiler runs (between steps), or "in<k>": inside call k
        inside = int(when[2:]) if when.startswith("in") else None
        at = None if inside is not None else int(when)
        seen = []

        @autoprof(name=f"c{when}", skip_first=0, wait=0, warmup=1, active=2, repeat=3)
        def c(i):
            if i == inside:
                seen.extend(user_profile(c))
            return (x @ x).sum().item()

        for i in range(12):
            if i == at:
                seen.extend(user_profile(c))
            c(i)
        return seen

    out = {when: scenario(when) for when in sys.argv[3:]}
    autoprof.flush()
    print(json.dumps(out))
    """
)

# Between calls: before the first (0), after the warmup call (1: autoprof prepared, not recording), after the first
# active call (2: recording), after the window's last call (3: just closed). Inside a call: the warmup call (in0),
# an active call (in1), the window's last call (in2). Each scenario is a target of its own, one after another in
# one process (so each also starts after the previous scenarios' profilers, autoprof's and the user's).
WHEN = ["0", "1", "2", "3", "in0", "in1", "in2"]


@pytest.mark.parametrize("kind", ["plain", "scheduled"])
def test_a_users_profiler_at_any_point_of_the_window(tmp_path: Path, kind: str) -> None:
    sink = tmp_path / "records.jsonl"
    script = tmp_path / "user_profiler.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(script), kind, str(sink), *WHEN], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-3000:]}"
    assert "Segmentation" not in run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()]
    # the user's profile kept its events: 3 matmuls (plain), or the 2 active steps' (scheduled), each one matmul
    expected = 3 if kind == "plain" else 2
    for when in WHEN:
        assert seen[when] and seen[when][-1] >= expected, f"{when}: the user's profile lost its events: {seen[when]}"
        mine = [r for r in records if r.get("target") == f"c{when}"]
        windows = [r for r in mine if r["event"] == "autoprof.window"]
        assert windows, f"{when}: autoprof recorded no window after the user's profiler: {mine}"
        for w in windows:  # every window whole: both active steps, never a step the user's profiler held
            assert len(w["steps"]) == 2, (when, w)
        warned = [r for r in mine if r["event"] == "autoprof.warning" and r["reason"] == "foreign_profiler"]
        assert len(warned) <= 1, (when, warned)  # said once per target
        if when not in ("0", "3"):  # autoprof's window was open when the user's started: it says it yielded
            assert warned, (when, mine)
