"""Does ``autoprof diff --fail-on-regression 10`` hold while other work keeps the CPUs busy (issue 49)? The same
training script, run in fresh processes, as A/A pairs (the same code twice: an exit 1 is a false alarm) and A/B
pairs (the base against a step doing 1.5x its work: an exit 0 is a miss), once on the machine as it is ("quiet") and
once while a load this script starts and ends itself keeps the CPUs busy ("loaded"): one busy ``python -c`` loop
per CPU (two on a 2-core machine), each bounded in time (``--load-s``) and ended by its pid when the loaded runs are
done. Targets: no false alarm and no miss under load; the quiet false-alarm rate kept.

Run:  python benchmarks/gate_load.py [--pairs 5] [--gate 10] [--schedule active=10,repeat=2] [--json] [--keep DIR]

The script (``--child``): the MLP of ``benchmarks/diff_false_alarm.py`` (3 layers, width 384, batch 64, one intra-op
thread), its step doing forward + backward + SGD ``--reps`` times (the base 2, the A/B's new side 3: exactly 1.5x the
ops), decorated with ``@autoprof`` (``active=10,repeat=2``: 20 steps a side), its windows kept in a ``trace_dir``.
Per condition N base runs B0..B(N-1) and N runs D0..D(N-1) of the 1.5x step: the A/B pairs (Bi, Di), the A/A pairs
the ring (Bi, B(i+1)) and (B(N-1), B0). The conditions alternate pair by pair (quiet, loaded, quiet, ...), so a slow
spell of the machine falls on both. The diffs run after all runs, with no load.

Each pair is one ``python -m autoprof diff --json BASE NEW --fail-on-regression GATE``; its exit status is the
gate's decision (on the steps' own time where the traces carry their CPU readings: see docs/diff.md). Beside it the
table shows what the wall-time interval alone (the record's ``step_ms.interval_pct``, the gate before issue 49) would
have decided, and how many steps the gate set aside.

Cost: a run is ~3 s on a quiet machine (mostly imports), several times that under load; ``--pairs 4`` took 134 s
for its runs at load average 1 to 2, ``--pairs 8`` 1049 s in all at load average 4 to 10 (other agents' work), and
373 s at load average 4 to 7 (a full test suite and two busy loops beside it).

Measured (docs/diff.md), load average 4 to 8 before the script's own load (a full test suite and two busy loops ran
beside it throughout): ``--pairs 6`` and ``--pairs 8`` with ``--keep``, each pair also judged by the gate before the
page faults were read (same traces): quiet 0/14 false alarms, 0/14 missed (before: 0/14, 1/14); loaded 1/14 false
alarms, 1/14 missed (before: 1/14, 1/14: both the pairs of one base run whose second window the machine slowed, its
steps running 7.5-12 ms of CPU for 2.4 ms of work); the wall-time interval alone: quiet 0/14 and 2/14, loaded 1/14
and 4/14. Earlier (``--pairs 8``, before the faults; load average 4 to 10): quiet 0/8 and 1/8, loaded 0/8 and 1/8.
Again on the merged code (``--pairs 8``, 225 s, one other agent's tests beside it, load average 2.1 to 2.9): quiet
0/8 and 0/8, loaded 0/8 and 0/8; the wall-time interval alone: quiet 0/8 and 0/8, loaded 0/8 and 4/8.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import diff_false_alarm
from diff_false_alarm import DEFAULTS, EXTRA_STEPS, REPO, autoprof_command, parse_schedule

CONDITIONS = ("quiet", "loaded")
KINDS = ("aa", "ab")
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def child(steps: int, reps: int) -> None:
    """The training script: ``steps`` calls of a decorated step doing its work ``reps`` times (diff_false_alarm's
    script, a 384-wide MLP on a batch of 64)."""
    diff_false_alarm.child(steps, reps, 384, 64)


class Load:
    """One busy Python loop per CPU, each ending by itself after ``seconds`` at the latest; :meth:`stop` ends them by
    their pids."""

    def __init__(self, procs: int, seconds: float) -> None:
        code = BUSY.format(seconds=seconds)
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(procs)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_script(workdir: Path, name: str, schedule: dict[str, int], reps: int) -> Path:
    traces = workdir / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env.update(AUTOPROF_TRACE_DIR=str(traces), AUTOPROF_LOG=os.devnull, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update({f"AUTOPROF_{k.upper()}": str(v) for k, v in schedule.items()})
    steps = schedule["skip_first"] + schedule["repeat"] * (schedule["wait"] + schedule["warmup"] + schedule["active"]) + EXTRA_STEPS
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--steps", str(steps), "--reps", str(reps)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the script failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return traces


def run_diff(cli: list[str], base: Path, new: Path, gate: float) -> dict[str, Any]:
    """One ``autoprof diff --json``: its exit status, its gate object, and the wall-time interval's decision."""
    proc = subprocess.run(
        [*cli, "diff", "--json", str(base), str(new), "--fail-on-regression", f"{gate:g}"], capture_output=True, text=True
    )
    out: dict[str, Any] = {"base": base.name, "new": new.name, "rc": proc.returncode, "gate": None, "wall_tripped": None}
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or "step_ms" not in rec:
            continue
        out["gate"] = rec.get("gate")
        interval = rec["step_ms"].get("interval_pct")
        out["wall"] = {"estimate_pct": rec["step_ms"].get("estimate_pct"), "interval_pct": interval}
        out["wall_tripped"] = None if not interval else interval[0] > gate
    if proc.returncode not in (0, 1):
        out["stderr"] = proc.stderr.strip()[-500:]
    return out


def summarize(pairs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """Alarms (A/A: false alarms; A/B: catches) by the gate and by the wall-time interval alone, and steps set aside."""
    judged = [p["gate"] for p in pairs if isinstance(p.get("gate"), dict)]
    aside = [g.get("set_aside", [0, 0]) for g in judged]
    return {
        "pairs": len(pairs),
        "gate_alarms": sum(p["rc"] == 1 for p in pairs),
        "wall_alarms": sum(bool(p["wall_tripped"]) for p in pairs),
        "cannot": sum(p["rc"] not in (0, 1) for p in pairs),
        "set_aside_steps": sum(sum(a) for a in aside if isinstance(a, list)),
        "estimates_pct": [g.get("estimate_pct") for g in judged],
        "kind": kind,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5, help="A/A and A/B pairs per condition (default 5; at least 2)")
    ap.add_argument("--gate", type=float, default=10.0, metavar="PCT", help="--fail-on-regression PCT (default 10)")
    ap.add_argument("--schedule", type=parse_schedule, default=parse_schedule("active=10,repeat=2"), metavar="KEY=N,...")
    ap.add_argument("--load-procs", type=int, default=os.cpu_count() or 2, help="busy loops of the load (default: one per CPU)")
    ap.add_argument("--load-s", type=float, default=120.0, help="the most a busy loop runs (default 120 s; ended sooner by pid)")
    ap.add_argument("--keep", metavar="DIR", help="keep the runs' trace_dirs under DIR (default: a temporary folder, removed)")
    ap.add_argument("--json", action="store_true", help="print the figures and every pair's result as one JSON object")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.steps, args.reps)
        return
    if args.pairs < 2:
        raise SystemExit("--pairs: 2 or more")
    cli = autoprof_command()
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="autoprof-gate-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[tuple[Path, Path]]] = {c: [] for c in CONDITIONS}
    load_avg = [os.getloadavg()[0]]
    t0 = time.perf_counter()
    try:
        for i in range(args.pairs):
            for cond in CONDITIONS:
                load = Load(args.load_procs, args.load_s) if cond == "loaded" else None
                try:
                    if load is not None:
                        time.sleep(1.0)  # the busy loops are running before the runs start
                    order = [("base", 2), ("new", 3)] if i % 2 == 0 else [("new", 3), ("base", 2)]
                    dirs = {role: run_script(workdir, f"{cond}-{i:02d}-{role}", args.schedule, reps) for role, reps in order}
                finally:
                    if load is not None:
                        load.stop()
                runs[cond].append((dirs["base"], dirs["new"]))
                print(f"{cond} {i}: runs done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        load_avg.append(os.getloadavg()[0])
        results: dict[str, dict[str, list[dict[str, Any]]]] = {c: {"aa": [], "ab": []} for c in CONDITIONS}
        for cond in CONDITIONS:
            pairs = runs[cond]
            for i, (base, new) in enumerate(pairs):
                results[cond]["ab"].append(run_diff(cli, base, new, args.gate))
                results[cond]["aa"].append(run_diff(cli, base, pairs[(i + 1) % len(pairs)][0], args.gate))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    total = time.perf_counter() - t0
    figures = {c: {k: summarize(results[c][k], k) for k in KINDS} for c in CONDITIONS}
    if args.json:
        doc = {
            "gate_pct": args.gate,
            "pairs": args.pairs,
            "schedule": args.schedule,
            "total_s": round(total, 1),
            "load_average_1min": load_avg,
            "figures": figures,
            "results": results,
        }
        print(json.dumps(doc, indent=1))
        return
    n = args.pairs
    sched = ",".join(f"{k}={v}" for k, v in args.schedule.items() if v != DEFAULTS[k])
    print(f"\nautoprof diff --fail-on-regression {args.gate:g} ({sched}), {n} A/A and {n} A/B (1.5x work) pairs a condition, {total:.0f} s")
    print(f"load average (1 min) {load_avg[0]:.2f} at the start, {load_avg[1]:.2f} after the runs, {os.cpu_count()} CPUs")
    print(f"loaded: {args.load_procs} busy loops during the loaded runs\n")
    cols = ("A/A false alarms", "A/B missed", "cannot", "steps set aside")
    print(f"{'condition':10s} {cols[0]:>17s} {cols[1]:>11s} {cols[2]:>7s} {cols[3]:>16s}   wall-time interval alone")
    for cond in CONDITIONS:
        aa, ab = figures[cond]["aa"], figures[cond]["ab"]
        wall = f"{aa['wall_alarms']}/{n} false alarms, {n - ab['wall_alarms']}/{n} missed"
        aside = aa["set_aside_steps"] + ab["set_aside_steps"]
        print(
            f"{cond:10s} {aa['gate_alarms']:>12d}/{n:<4d} {n - ab['gate_alarms']:>6d}/{n:<4d} {aa['cannot'] + ab['cannot']:>7d} "
            f"{aside:>16d}   {wall}"
        )
    for cond in CONDITIONS:
        for kind in KINDS:
            for p in results[cond][kind]:
                g = p.get("gate") or {}
                reading = f"{g.get('estimate_pct')}% {g.get('interval_pct')}"
                what = g.get("reason") or f"{reading} judged {g.get('judged_steps')} on {g.get('basis')}, fault {g.get('fault_us')} us"
                print(f"  {cond} {kind} {p['base']} -> {p['new']}: exit {p['rc']}; {what}; wall {p.get('wall')}", file=sys.stderr)


if __name__ == "__main__":
    main()
