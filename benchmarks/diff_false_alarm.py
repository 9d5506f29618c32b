"""How often does ``autoprof diff --fail-on-regression 5`` cry wolf (issue 34)? The same training script, run in
fresh processes on this machine, as A/A pairs (the same code twice: any exit 1 is a false alarm) and A/B pairs (the
base against the same step doing its work twice: exit 1 is a real 2x change caught), under autoprof's default
schedule and a recommended one (``--recommended``, default active=10,repeat=2: the candidate for docs/diff.md's
recommendation), side by side. Targets: at most 1 false alarm in 20 A/A pairs with the
recommended schedule, and 20 of 20 2x changes caught.

Run:  python benchmarks/diff_false_alarm.py [--pairs 20] [--recommended active=10,repeat=2] [--gate 5] [--json]
                                            [--schedules both|default|recommended] [--keep DIR]
      python benchmarks/diff_false_alarm.py --pairs 5          # a quick look

The script (``--child``, this file): a 3-layer MLP (width 384, batch 64) forward + backward + plain SGD on the CPU
with one intra-op thread, ~6.5 ms a step here, decorated with ``@autoprof``; its schedule comes from the environment
(``AUTOPROF_ACTIVE``, ``AUTOPROF_REPEAT``, ...; nothing set: the defaults, inherited ``AUTOPROF_*`` variables
dropped) and its windows are kept in a ``trace_dir`` (``AUTOPROF_TRACE_DIR``). ``--scale 2`` runs the step's work
twice in each step: exactly twice the ops. It runs as many steps as the schedule needs, plus 2.

Per schedule, 2N fresh runs: N base runs B0..B(N-1) and N runs D0..D(N-1) of the 2x step. The N A/B pairs are
(Bi, Di); the N A/A pairs are the ring (Bi, B(i+1)), the last one (B(N-1), B0): each base run is the base of one
A/A pair and the new side of another. Bi and Di run back to back (their order alternating), and the schedules'
runs interleave, so a slow spell of the machine falls on both. Each pair is one
``python -m autoprof diff --json BASE NEW --fail-on-regression 5`` in a fresh process; its exit status is counted
(1 an alarm: a false alarm on A/A, a catch on A/B; 2 cannot compare, reported apart), and from its ``--json``
records the point change of the median (``step_ms.change_pct``, one per pair of files compared) and, where the CLI
writes one, each record's ``gate`` object are kept for ``--json``.

Cost: a run is ~7 s on a quiet machine, most of it imports (``import torch`` ~2.5 s, and torch's ``prepare_trace``
imports ``torch._inductor`` at the first window, ~2 s); a diff ~0.7 s. ``--pairs 20`` (the default: 80 runs and 80
diffs) takes ~11 minutes on this 2-core machine when nothing else runs, ~16 under the load other users put on it
(measured: ``--pairs 20 --schedules default`` 426 s, 9.8 s a run, load average 3 to 6); ``--pairs 5`` 3 to 4.5 minutes.
The load average at the start and the end is printed with the figures: on a shared machine it is most of the noise.

Measured on the point-median gate (``autoprof diff`` before issue 34), load average 2 to 6 on 2 CPUs:
``--pairs 20 --schedules default``: 9/20 false alarms, 17/20 caught, 0/40 cannot compare (A/A changes -58 % to +235 %);
``--pairs 5``: default 2/5 false alarms and 4/5 caught, recommended (active=10,repeat=2) 4/5 and 5/5.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCHEDULE_KEYS = ("skip_first", "wait", "warmup", "active", "repeat")
DEFAULTS = {"skip_first": 1, "wait": 1, "warmup": 1, "active": 3, "repeat": 1}  # autoprof.config's defaults
RECOMMENDED = "active=10,repeat=2"
EXTRA_STEPS = 2  # calls after the last window's last step: it closes inside the loop, not at exit
KINDS = ("aa", "ab")  # A/A: the same code twice; A/B: the base against the 2x step
KIND_NAMES = {"aa": "A/A", "ab": "A/B"}


def child(steps: int, scale: int, width: int, batch: int) -> None:
    """The training script: a plain loop of ``steps`` calls of a decorated step (schedule and trace_dir from the
    environment)."""
    import torch

    from autoprof import autoprof

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    )
    params = list(model.parameters())
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))

    @autoprof(name="train_step")
    def train_step() -> None:
        for _ in range(scale):  # --scale 2: the same work twice, a real 2x change
            loss = torch.nn.functional.cross_entropy(model(x), y)
            torch.autograd.backward(loss)
            with torch.no_grad():  # plain SGD: torch.optim's first import costs ~2 s (dynamo), here on every run
                for p in params:
                    if p.grad is not None:
                        p.sub_(p.grad, alpha=0.01)
                        p.grad = None

    for _ in range(steps):
        train_step()


def parse_schedule(text: str) -> dict[str, int]:
    """``active=10,repeat=2`` as the full schedule (the keys not named keep autoprof's defaults)."""
    schedule = dict(DEFAULTS)
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in SCHEDULE_KEYS or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(f"expected KEY=N,... with keys {', '.join(SCHEDULE_KEYS)}, got {text!r}")
        schedule[key] = int(value)
    if schedule["active"] < 1 or schedule["repeat"] < 1:
        raise argparse.ArgumentTypeError(f"active and repeat must be 1 or more (repeat=0 never ends), got {text!r}")
    return schedule


def label(schedule: dict[str, int]) -> str:
    changed = [f"{k}={v}" for k, v in schedule.items() if v != DEFAULTS[k]]
    return ",".join(changed) or "defaults"


def run_script(workdir: Path, name: str, schedule: dict[str, int] | None, scale: int, args: argparse.Namespace) -> tuple[Path, float]:
    """One fresh run of the script; returns its trace_dir and wall seconds."""
    traces = workdir / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}  # only what this run asks for
    env.update(AUTOPROF_TRACE_DIR=str(traces), AUTOPROF_LOG=os.devnull, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if schedule is not None:  # None: the default schedule, nothing set
        env.update({f"AUTOPROF_{k.upper()}": str(v) for k, v in schedule.items()})
    s = schedule or DEFAULTS
    steps = s["skip_first"] + s["repeat"] * (s["wait"] + s["warmup"] + s["active"]) + EXTRA_STEPS
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--steps", str(steps), "--scale", str(scale)]
    cmd += ["--width", str(args.width), "--batch", str(args.batch)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the script failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return traces, seconds


def run_diff(base: Path, new: Path, gate: float) -> dict[str, Any]:
    """``autoprof diff --json BASE NEW --fail-on-regression GATE``: its exit status, the point changes of the
    median step time (one per pair of files it compared) and the ``gate`` objects of its records, if any."""
    cmd = [*AUTOPROF, "diff", "--json", str(base), str(new), "--fail-on-regression", f"{gate:g}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    changes: list[float | None] = []
    gates: list[Any] = []
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        step_ms = rec.get("step_ms")
        if isinstance(step_ms, dict) and "change_pct" in step_ms:
            changes.append(step_ms["change_pct"])
        if "gate" in rec:  # the confidence-interval gate (issue 34): kept as the CLI writes it
            gates.append(rec["gate"])
    out: dict[str, Any] = {"rc": proc.returncode, "change_pct": changes, "gate": gates}
    if proc.returncode not in (0, 1):
        out["stderr"] = proc.stderr.strip()[-500:]
    return out


def autoprof_command() -> list[str]:
    """``python -m autoprof`` when this interpreter has it, else the ``autoprof`` console script."""
    probe = subprocess.run([sys.executable, "-m", "autoprof", "diff", "--help"], capture_output=True, text=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "autoprof"]
    script = shutil.which("autoprof")
    if script is None:
        raise SystemExit("neither `python -m autoprof` nor an `autoprof` script is available")
    return [script]


AUTOPROF: list[str] = []


def summarize(pairs: dict[str, list[dict[str, Any]]], seconds: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(seconds), "mean_run_s": round(statistics.mean(seconds), 2) if seconds else None}
    for kind in KINDS:
        rcs = [p["rc"] for p in pairs[kind]]
        changes = [c for p in pairs[kind] for c in p["change_pct"] if c is not None]
        out[kind] = {
            "pairs": len(rcs),
            "exit_1": rcs.count(1),
            "gate_objects": sum(len(p["gate"]) for p in pairs[kind]),  # 0: a CLI without the interval gate's object
            "exit_2": rcs.count(2),
            "other": len(rcs) - rcs.count(0) - rcs.count(1) - rcs.count(2),
            "median_change_pct": round(statistics.median(changes), 2) if changes else None,
            "max_change_pct": max(changes) if changes else None,
            "min_change_pct": min(changes) if changes else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=_pairs, default=20, help="A/A pairs and A/B pairs per schedule (default 20; at least 2)")
    ap.add_argument(
        "--recommended",
        type=parse_schedule,
        default=parse_schedule(RECOMMENDED),
        metavar="KEY=N,...",
        help=f"the recommended schedule: its changes to the defaults (default {RECOMMENDED})",
    )
    ap.add_argument("--schedules", choices=("both", "default", "recommended"), default="both")
    ap.add_argument("--gate", type=float, default=5.0, metavar="PCT", help="--fail-on-regression PCT (default 5)")
    ap.add_argument("--width", type=int, default=384, help="the MLP's width (default 384: ~6.5 ms a step here)")
    ap.add_argument("--batch", type=int, default=64, help="the batch (default 64)")
    ap.add_argument("--keep", metavar="DIR", help="keep the runs' trace_dirs under DIR (default: a temporary folder, removed)")
    ap.add_argument("--json", action="store_true", help="print the figures and every pair's results as one JSON object")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--scale", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.steps, args.scale, args.width, args.batch)
        return
    AUTOPROF[:] = autoprof_command()
    schedules: dict[str, dict[str, int] | None] = {}
    if args.schedules in ("both", "default"):
        schedules["default"] = None
    if args.schedules in ("both", "recommended"):
        schedules["recommended"] = args.recommended
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="autoprof-aa-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pairs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {kind: [] for kind in KINDS} for name in schedules}
    seconds: dict[str, list[float]] = {name: [] for name in schedules}
    base: dict[str, list[Path]] = {name: [] for name in schedules}
    n = args.pairs
    load = [os.getloadavg()[0]]  # other users of the machine: their load is part of the noise
    t_start = time.perf_counter()

    def compare(name: str, kind: str, old: Path, new: Path) -> None:
        result = {"base": old.name, "new": new.name, **run_diff(old, new, args.gate)}
        pairs[name][kind].append(result)
        if not args.json:
            print(
                f"{name:11s} {KIND_NAMES[kind]} {old.name} -> {new.name}: exit {result['rc']} {_changes(result)}",
                file=sys.stderr,
                flush=True,
            )

    try:
        for i in range(n):
            for name, schedule in schedules.items():
                runs = [("base", 1), ("double", 2)] if i % 2 == 0 else [("double", 2), ("base", 1)]  # neither always first
                dirs = {}
                for role, scale in runs:
                    dirs[role], s = run_script(workdir, f"{name}-{i:02d}-{role}", schedule, scale, args)
                    seconds[name].append(s)
                base[name].append(dirs["base"])
                compare(name, "ab", dirs["base"], dirs["double"])
                if i > 0:
                    compare(name, "aa", base[name][i - 1], dirs["base"])
        for name in schedules:  # the ring's last pair: the last base run against the first
            compare(name, "aa", base[name][-1], base[name][0])
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    total = time.perf_counter() - t_start
    load.append(os.getloadavg()[0])
    results = {name: summarize(pairs[name], seconds[name]) for name in schedules}
    if args.json:
        doc = {
            "gate_pct": args.gate,
            "pairs": args.pairs,
            "total_s": round(total, 1),
            "load_average_1min": {"start": load[0], "end": load[1]},
            "schedules": {
                name: {"schedule": s or DEFAULTS, "label": label(s or DEFAULTS), **results[name]} for name, s in schedules.items()
            },
            "results": pairs,  # per schedule, per kind: each pair's exit status, point changes, gate objects
        }
        print(json.dumps(doc, indent=1))
        return
    print(f"\nautoprof diff --fail-on-regression {args.gate:g}, {n} A/A and {n} A/B (2x work) pairs per schedule, {total:.0f} s in all")
    print(f"load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end, on {os.cpu_count()} CPUs")
    print(f"{'schedule':34s} {'A/A false alarms':>17s} {'A/B caught':>11s} {'cannot compare':>15s} {'mean run s':>11s}   A/A median change")
    for name, schedule in schedules.items():
        r = results[name]
        cannot = r["aa"]["exit_2"] + r["ab"]["exit_2"]
        spread = (
            f"{r['aa']['median_change_pct']:+.1f}% [{r['aa']['min_change_pct']:+.1f}..{r['aa']['max_change_pct']:+.1f}]"
            if r["aa"]["median_change_pct"] is not None
            else "-"
        )
        print(
            f"{name + ' (' + label(schedule or DEFAULTS) + ')':34s} {r['aa']['exit_1']:>12d}/{n:<4d} {r['ab']['exit_1']:>6d}/{n:<4d} "
            f"{cannot:>10d}/{2 * n:<4d} {r['mean_run_s']:>11.2f}   {spread}"
        )
    gates = sum(r[kind]["gate_objects"] for r in results.values() for kind in KINDS)
    print(f"(A/A median change: the point change of the median step, [least..most]; the CLI's gate objects: {gates})")
    if "recommended" in results:
        r = results["recommended"]
        aa_ok = r["aa"]["exit_1"] * 20 <= n  # at most 1 in 20
        ab_ok = r["ab"]["exit_1"] == n
        print(
            f"\ntarget (recommended: false alarms <= 1 in 20, 2x caught {n} of {n}): "
            f"{'met' if aa_ok and ab_ok else 'NOT met'} ({r['aa']['exit_1']}/{n} false alarms, {r['ab']['exit_1']}/{n} caught)"
        )


def _pairs(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"expected a number of pairs, 2 or more, got {text!r}")
    return int(text)


def _changes(d: dict[str, Any]) -> str:
    return "[" + ", ".join("-" if c is None else f"{c:+.1f}%" for c in d["change_pct"]) + "]"


if __name__ == "__main__":
    main()
