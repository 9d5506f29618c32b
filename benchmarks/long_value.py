"""Offline loading of a trace that holds one long JSON value, side by side with plain `json.load` of the same
file: a long string in an event's args, a long metadata string, a long list in an event's args, and a long
string full of '{' (each one a place the batcher may look for a cut between events). Each load runs in its own
process (times exclude imports). Target: autoprof's time grows linearly with the value's length, within a
small factor of `json.load`'s (a value longer than a read is decoded again as more is read: each retry reads
as much again as is held, about twice the value's length in all).

Since issue 37 a value longer than 1 MB is skipped by msgspec (nothing built) until the buffer holds its end,
and decoded by json once: about one json decode of the value in all, plus the reads.

Run:  python benchmarks/long_value.py [--mb 96] [--repo PATH] [--before PATH] [--cases "args string,metadata string"]
(--repo: the checkout whose autoprof is timed; --before: another checkout, e.g. main before a change, timed in the
same run as a column of its own.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CASES = ("args string", "metadata string", "args list", "args '{' string")
_EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}

_CODE = {
    "autoprof": (
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from autoprof.trace import chrome\n"
        "t0 = time.perf_counter()\n"
        "trace = chrome.load(sys.argv[1], workers=0)\n"
        "print(time.perf_counter() - t0)\n"
    ),
    "json.load": (
        "import json, sys, time\n"
        "t0 = time.perf_counter()\n"
        "with open(sys.argv[1]) as f:\n"
        "    json.load(f)\n"
        "print(time.perf_counter() - t0)\n"
    ),
}


def _write(path: Path, case: str, n: int) -> None:
    """A trace of three events and a metadata key with a value of about ``n`` characters where ``case`` says."""
    ev = json.dumps(_EVENT)
    with path.open("w") as f:
        if case == "metadata string":
            f.write('{"autoprof_note": "' + "y" * n + '", "traceEvents": [' + ev + ", " + ev + "]}")
            return
        long_value = {
            "args string": '"' + "x" * n + '"',
            "args '{' string": '"' + "{" * n + '"',
            "args list": "[" + "1," * (n // 2 - 1) + "1]",
        }[case]
        f.write('{"traceEvents": [' + ev + ", " + ev[:-1] + ', "args": {"s": ' + long_value + "}}, " + ev + "]}")


def _time(name: str, trace: Path, repo: str) -> float:
    out = subprocess.run([sys.executable, "-c", _CODE[name], str(trace), repo], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=96, help="the long value's length, in MiB of characters")
    ap.add_argument("--repo", default=str(HERE.parent), help="the checkout whose autoprof is timed")
    ap.add_argument("--before", default=None, help="another checkout timed in the same run (its own column)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"which, comma-separated, of: {', '.join(CASES)}")
    args = ap.parse_args()
    n = args.mb << 20
    print(f"one value of {args.mb} MiB, autoprof from {args.repo} (one process, workers=0)")
    before = f" {'before s':>9s} {'ratio':>6s}" if args.before else ""
    if args.before:
        print(f"before: autoprof from {args.before}")
    print(f"\n{'case':18s} {'autoprof s':>10s} {'json.load s':>11s} {'ratio':>6s}{before}")
    with tempfile.TemporaryDirectory() as d:
        for case in args.cases.split(","):
            trace = Path(d) / "long.json"
            _write(trace, case, n)
            ours, theirs = _time("autoprof", trace, args.repo), _time("json.load", trace, args.repo)
            line = f"{case:18s} {ours:10.2f} {theirs:11.2f} {ours / theirs:6.1f}"
            if args.before:
                old = _time("autoprof", trace, args.before)
                line += f" {old:9.2f} {old / theirs:6.1f}"
            print(line, flush=True)
            trace.unlink()


if __name__ == "__main__":
    main()
