"""Offline analysis of a ~1M-event chrome trace, side by side in one run: `autoprof analyze`'s engine,
plain `json.load`, and HolisticTraceAnalysis (load + temporal breakdown) when importable.

The trace is built from ../shared/traces/hta/a100_rank3_of8_train.json.gz (its steps repeated with shifted
timestamps and ids; cached in benchmarks/.cache/). Each contender runs in its own process, so peak RSS is
its own. Targets: autoprof at most 1/5 of HTA's time and 1/2 of its peak memory.

Run:  python benchmarks/analyze_file.py [--events 1000000] [--hta-python PATH]
(--hta-python: a Python that has the `holistictraceanalysis` package, e.g. a separate venv.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bigtrace import build  # noqa: E402

_PRELUDE = "import resource, sys, time\nt0 = time.perf_counter()\n"
_REPORT = (
    "print(__import__('json').dumps({'seconds': time.perf_counter() - t0, "
    "'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 'detail': detail}))\n"
)
CODE = {
    "autoprof": _PRELUDE
    + f"sys.path.insert(0, {str(HERE.parent)!r})\n"
    + "from autoprof.engine import analyze_files\n"
    + "r = analyze_files([sys.argv[1]])[0]\n"
    + "assert r.error is None, r.error\n"
    + "detail = f'{r.event_count} events kept, findings: ' + ', '.join(f.rule for f in r.findings)\n"
    + _REPORT,
    "json.load": _PRELUDE
    + "import gzip, json\n"
    + "doc = json.load(gzip.open(sys.argv[1]))\n"
    + "detail = f\"{len(doc['traceEvents'])} events\"\n"
    + _REPORT,
    "HTA": _PRELUDE
    + "from hta.trace_analysis import TraceAnalysis\n"
    + "a = TraceAnalysis(trace_dir=sys.argv[2])\n"
    + "df = a.get_temporal_breakdown(visualize=False)\n"
    + "detail = 'temporal breakdown: ' + str(df.to_dict('records'))[:120]\n"
    + _REPORT,
}


def run(name: str, python: str, trace: Path, trace_dir: Path) -> dict[str, object] | None:
    out = subprocess.run([python, "-c", CODE[name], str(trace), str(trace_dir)], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{name}: failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--hta-python", default=sys.executable)
    args = ap.parse_args()
    trace = build(args.events)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB gzipped)")
    with tempfile.TemporaryDirectory() as d:
        trace_dir = Path(d)
        os.symlink(trace, trace_dir / "rank0.json.gz")
        results = {}
        for name in ("autoprof", "json.load", "HTA"):
            py = args.hta_python if name == "HTA" else sys.executable
            if name == "HTA":
                probe = subprocess.run([py, "-c", "import hta"], capture_output=True)
                if probe.returncode != 0:
                    print("HTA: not importable here (pip install holistictraceanalysis, or pass --hta-python)")
                    continue
            results[name] = run(name, py, trace, trace_dir)
    base = results.get("HTA") or results.get("json.load")
    base_name = "HTA" if results.get("HTA") else "json.load"
    print(f"\n{'contender':12s} {'seconds':>8s} {'peak MB':>8s} {'time/' + base_name:>14s} {'mem/' + base_name:>12s}")
    for name, r in results.items():
        if not r or not base:
            continue
        print(f"{name:12s} {r['seconds']:8.2f} {r['peak_mb']:8.0f} {r['seconds'] / base['seconds']:14.3f} "
              f"{r['peak_mb'] / base['peak_mb']:12.3f}")
    for name, r in results.items():
        if r:
            print(f"  {name}: {r['detail']}")
    ap_r, hta = results.get("autoprof"), results.get("HTA")
    if ap_r and hta:
        t, m = ap_r["seconds"] / hta["seconds"], ap_r["peak_mb"] / hta["peak_mb"]
        print(f"\ntime target (<= 0.20 of HTA): {'met' if t <= 0.2 else 'NOT met'} ({t:.3f})")
        print(f"memory target (<= 0.50 of HTA): {'met' if m <= 0.5 else 'NOT met'} ({m:.3f})")


if __name__ == "__main__":
    main()
