"""The trigger on a busy machine (issue 49): its false-trigger rate and its miss rate on a real ~2 ms CPU step, on the
machine as it is and under a steady load this script starts and ends itself (two busy ``python -c`` loops, bounded in
time, killed by pid at the end), side by side in one table.

Run:  python benchmarks/trigger_load.py [--runs 10] [--step-ms 2] [--no-wall]

Each run is one fresh ``@autoprof(trigger=True)`` target (its scheduled window over at step 2) timed over a steady run
(``--steps`` steps: any triggered window is a false trigger) or a run that turns 3x slower for good at step
``--onset`` (the step does its work three times): caught when a triggered window fires at a step from the onset on
(the delay: steps from the onset to the trigger); a window before the onset is a false trigger too. The step is a
pure-Python loop calibrated to ``--step-ms`` before the runs. ``loaded, wall time`` is the loaded case again with the
run-queue wait unread (the trigger judging wall time, as before issue 49): what the own time buys. Targets (issue 49):
no false trigger and no miss under the load, as on the quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import autoprof
from autoprof.live import _cpu

BUSY = "import time\ne = time.monotonic() + {seconds}\nwhile time.monotonic() < e:\n    pass\n"


def calibrate(ms: float) -> int:
    """Loop iterations that take ``ms`` on this machine (the fastest of a few tries: the machine's own speed)."""
    k = 10_000
    while True:
        best = min(_time(k) for _ in range(5))
        if best > 0.02:
            return max(1, int(k * ms / 1000 / best))
        k *= 4


def _time(k: int) -> float:
    t = time.perf_counter()
    for _ in range(k):
        pass
    return time.perf_counter() - t


def one_run(name: str, k: int, steps: int, onset: int | None, sink: str) -> dict[str, Any]:
    """One target through ``steps`` steps; the triggered windows' steps from the sink's records."""

    @autoprof(name=name, skip_first=0, wait=0, warmup=1, active=1, repeat=1, trigger=True)
    def step(i: int) -> None:
        for _ in range(k if onset is None or i < onset else 3 * k):
            pass

    for i in range(steps):
        step(i)
    autoprof.flush()
    fired = []
    with open(sink) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "autoprof.window" and rec.get("target") == name and rec.get("trigger"):
                fired.append(int(rec["trigger"]["step"]))
    return {"fired": sorted(fired), "onset": onset}


def block(label: str, args: argparse.Namespace, k: int, sink: str, seq: list[int]) -> dict[str, Any]:
    false_runs = false_windows = steps_seen = missed = 0
    delays: list[int] = []
    for r in range(args.runs):
        seq[0] += 1
        steady = one_run(f"steady_{seq[0]}", k, args.steps, None, sink)
        false_windows += len(steady["fired"])
        false_runs += bool(steady["fired"])
        steps_seen += args.steps
        seq[0] += 1
        slow = one_run(f"slow_{seq[0]}", k, args.onset + args.slow_steps, args.onset, sink)
        before = [s for s in slow["fired"] if s < args.onset]
        after = [s for s in slow["fired"] if s >= args.onset]
        false_windows += len(before)
        false_runs += bool(before)
        steps_seen += args.onset
        if after:
            delays.append(after[0] - args.onset)
        else:
            missed += 1
        print(f"  {label:<20} run {r + 1}: steady fired at {steady['fired']}, slow (onset {args.onset}) at {slow['fired']}", flush=True)
    return {
        "false_runs": false_runs,
        "runs": 2 * args.runs,
        "false_per_1000": 1000 * false_windows / steps_seen,
        "missed": missed,
        "slow_runs": args.runs,
        "delay": statistics.median(delays) if delays else None,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--onset", type=int, default=400)
    parser.add_argument("--slow-steps", type=int, default=100)
    parser.add_argument("--no-wall", action="store_true", help="leave out the loaded run judged on wall time")
    args = parser.parse_args()
    k = calibrate(args.step_ms)
    waits = _cpu.runqueue_ns() >= 0
    print(f"step: {k} loop iterations (~{args.step_ms} ms); run-queue wait readable: {waits}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        sink = os.path.join(tmp, "records.jsonl")
        autoprof.configure(sink=sink, trace_dir=tmp)
        seq = [0]
        results = {"quiet": block("quiet", args, k, sink, seq)}
        per_run = (args.steps + args.onset + args.slow_steps) * args.step_ms * 3 / 1000 + 5  # generous
        seconds = per_run * args.runs * (1 if args.no_wall else 2) + 30
        busy = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)]) for _ in range(2)]
        try:
            time.sleep(1.0)  # the load is running
            results["loaded"] = block("loaded", args, k, sink, seq)
            if not args.no_wall:
                real = _cpu.runqueue_ns
                _cpu.runqueue_ns = lambda: -1  # the wait unread: wall time judged
                try:
                    results["loaded, wall time"] = block("loaded, wall time", args, k, sink, seq)
                finally:
                    _cpu.runqueue_ns = real
        finally:
            for p in busy:  # by pid, ours only
                p.kill()
                p.wait()
    cols = list(results)
    print()
    print(f"{'':<34}" + "".join(f"{c:>20}" for c in cols))
    rows = [
        ("runs with a false trigger", lambda r: f"{r['false_runs']}/{r['runs']}"),
        ("false triggers per 1000 steps", lambda r: f"{r['false_per_1000']:.2f}"),
        ("3x slowdowns missed", lambda r: f"{r['missed']}/{r['slow_runs']}"),
        ("steps to catch it (median)", lambda r: "-" if r["delay"] is None else f"{r['delay']}"),
        ("load average (1 min) after", lambda r: f"{r['load']:.1f}"),
    ]
    for label, fmt in rows:
        print(f"{label:<34}" + "".join(f"{fmt(results[c]):>20}" for c in cols))


if __name__ == "__main__":
    main()
