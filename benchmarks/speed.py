"""Every speed row of issue 37 against its anchor, in one run: the idle decorator (`overhead.py`), the close of a
window (`window_stall.py`), a 100k-event window to findings (`analyze_window.py`) and a 1M-event trace offline
(`analyze_file.py`). Each benchmark runs in turn, its contenders side by side in fresh processes as it does alone;
its full output is printed as it runs, then one table of every target line, met or not.

Run:  python benchmarks/speed.py [--hta-python PATH] [--quick]
(--hta-python: passed to analyze_file.py, a Python that has `holistictraceanalysis`; --quick: fewer rounds and a
smaller offline trace, to check that the run works, not to measure.)

The H200 row (the stall per raw event on a GPU window) needs a CUDA device: on a machine without one it is said
not measured, never estimated.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: A benchmark's target line: one that says a goal is "met" or "NOT met" (each benchmark words its own).
TARGET = re.compile(r"\b(?P<met>NOT met|met)\b")


def benchmarks(hta_python: str | None, quick: bool) -> list[tuple[str, list[str]]]:
    offline = ["--events", "100000"] if quick else []
    if hta_python:
        offline += ["--hta-python", hta_python]
    return [
        ("overhead.py", []),
        ("window_stall.py", ["--runs", "1"] if quick else []),
        ("analyze_window.py", ["--events", "20000", "--rounds", "1"] if quick else []),
        ("analyze_file.py", offline),
    ]


def run(script: str, args: list[str]) -> tuple[list[tuple[str, str]], int, float]:
    """Run one benchmark, echoing its output; its target lines (met or not, the line), exit status, seconds."""
    print(f"\n=== {script} {' '.join(args)}".rstrip(), flush=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE, text=True)
    targets = []
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        m = TARGET.search(line)
        if m and ("target" in line or "goal" in line or "<=" in line):
            targets.append((m["met"], line.strip()))
    return targets, proc.wait(), time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hta-python", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.hta_python is not None:  # said now, not after the other benchmarks ran
        from analyze_file import hta_problem  # this script's folder is first on sys.path

        problem = hta_problem(args.hta_python)
        if problem:
            ap.error(f"--hta-python: {problem}")
    rows: list[tuple[str, str, str]] = []
    failed = []
    for script, extra in benchmarks(args.hta_python, args.quick):
        targets, rc, seconds = run(script, extra)
        print(f"--- {script}: {seconds:.0f} s, exit {rc}")
        if rc != 0 or not targets:
            failed.append(script)
        rows += [(script, met, line) for met, line in targets]
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    print(f"\n{'benchmark':18s} {'':7s} its target line")
    for script, met, line in rows:
        print(f"{script:18s} {met:7s} {line}")
    if not gpu:
        print(f"{'(H200 row)':18s} {'-':7s} GPU window stall per raw event (<= 2 us): not measured, no CUDA device here")
    if failed:
        print(f"\nno target line, or a failed run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
