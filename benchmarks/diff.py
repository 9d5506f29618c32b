"""`autoprof diff` of two ~1M-event traces, side by side with two `autoprof analyze --json` runs of the same files, in
one run (each in a fresh process; times include imports). Target: the diff takes about as long as the two
analyses (the same loader and rules, plus one pass over each window to match ops and kernels).

The traces are built from ../shared/traces/hta/a100_rank3_of8_train.json.gz (its steps repeated; cached in
benchmarks/.cache/): the base at ~1M events, the new one a slightly longer run of the same program.

Run:  python benchmarks/diff.py [--events 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bigtrace import build  # noqa: E402

_RUN = (
    "import io, sys, time, contextlib\n"
    "t0 = time.perf_counter()\n"
    "sys.path.insert(0, {repo!r})\n"
    "from autoprof.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    rc = main({argv!r})\n"
    "print(__import__('json').dumps({{'seconds': time.perf_counter() - t0, 'rc': rc}}))\n"
)


def _time(argv: list[str]) -> float:
    code = _RUN.format(repo=str(HERE.parent), argv=argv)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["rc"] in (0, 1), result
    return float(result["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    base, new = build(args.events), build(args.events + args.events // 10)
    analyze_base = _time(["analyze", "--json", str(base)])
    analyze_new = _time(["analyze", "--json", str(new)])
    diff = _time(["diff", "--json", str(base), str(new)])
    both = analyze_base + analyze_new
    print(f"traces: {base.name}, {new.name}")
    print("run                                  seconds   ratio")
    print(f"autoprof analyze (base)              {analyze_base:7.2f}")
    print(f"autoprof analyze (new)               {analyze_new:7.2f}")
    print(f"the two analyses                     {both:7.2f}   1.000")
    print(f"autoprof diff base new               {diff:7.2f}   {diff / both:.3f}")
    print(f"\ntarget (diff about the two analyses, <= 1.25): {'met' if diff <= 1.25 * both else 'NOT met'} ({diff / both:.3f})")


if __name__ == "__main__":
    main()
