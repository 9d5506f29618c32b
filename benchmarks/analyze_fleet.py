"""A fleet's traces analyzed four ways, side by side in one run (issue 26).

Builds ``--ranks`` per-rank traces (default 32) from the shared A100 rank trace (``../shared/traces/hta/
a100_rank3_of8_train.json.gz``, 109k events): each copy says its own rank and world size, and one rank (the
straggler) has its NCCL kernels cut to a fifth, so it waits least in the collectives and the others wait for it.
Then analyses the directory with ``autoprof analyze --json`` one file after another (``--jobs 1``), with ``--jobs 2``,
on a Dask ``LocalCluster`` (2 workers, one thread each), and with HolisticTraceAnalysis's
``TraceAnalysis(trace_dir=...)`` where it is installed. Each run is its own process tree: wall time, and peak
memory summed over every process of the tree (sampled every 20 ms from /proc). The three autoprof runs must print
the same records (timestamps and pids aside) and name the straggler.

Run:  python benchmarks/analyze_fleet.py [--ranks 32] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO.parent / "shared" / "traces" / "hta" / "a100_rank3_of8_train.json.gz"
STRAGGLER = 5


def build(out: Path, ranks: int) -> None:
    """``ranks`` copies of the source trace, one per rank: the others wait for the straggler in their collectives
    (NCCL kernels 3× as long), the straggler barely (a fifth as long)."""
    with gzip.open(SOURCE, "rt") as f:
        doc = json.load(f)

    def scaled(factor: float) -> list[dict[str, object]]:
        return [
            {**e, "dur": e["dur"] * factor} if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower() and "dur" in e else e
            for e in doc["traceEvents"]
        ]

    waiting, straggler = scaled(3.0), scaled(0.2)
    for rank in range(ranks):
        d = copy.copy(doc)
        d["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank, "world_size": ranks}
        d["traceEvents"] = straggler if rank == STRAGGLER else waiting
        with gzip.open(out / f"rank{rank}.pt.trace.json.gz", "wt", compresslevel=1) as f:
            json.dump(d, f)


def _tree_rss(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (bytes), from /proc."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall time, peak memory of the process tree, stdout."""
    peak = 0
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}): {err[-2000:]}")
    return wall, peak, out


DASK = """
import sys, json, time
from distributed import Client, LocalCluster
from autoprof.analysis import engine
from autoprof.render.records import file_records
if __name__ == "__main__":
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        t1 = time.perf_counter()
        results = engine.analyze_files([sys.argv[1]], executor=client.get_executor())
        t2 = time.perf_counter()
    print(f"cluster start {t1 - t0:.2f} s, analysis {t2 - t1:.2f} s, close {time.perf_counter() - t2:.2f} s", file=sys.stderr)
    for r in results:
        for rec in file_records(r):
            print(json.dumps(rec, separators=(",", ":"), default=str))
"""

HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
if __name__ == "__main__":
    analyzer = TraceAnalysis(trace_dir=sys.argv[1])
    analyzer.get_temporal_breakdown(visualize=False)
    print(len(analyzer.t.traces))
"""


def same(a: str, b: str) -> bool:
    def strip(text: str) -> list[str]:
        out = []
        for line in text.splitlines():
            rec = json.loads(line)
            rec.pop("timestamp", None)
            rec.pop("pid", None)
            out.append(json.dumps(rec, sort_keys=True))
        return out

    return strip(a) == strip(b)


def stragglers(text: str) -> list[int]:
    for line in text.splitlines():
        rec = json.loads(line)
        if rec.get("rule") == "straggler_ranks":
            return list(rec["evidence"].get("straggler_ranks", []))
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--keep", help="build the traces in this directory (and keep them)")
    args = parser.parse_args()
    if not SOURCE.exists():
        raise SystemExit(f"needs {SOURCE} (../shared/traces)")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(args.keep) if args.keep else Path(tmp) / "run"
        traces.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        build(traces, args.ranks)
        took = time.perf_counter() - t0
        print(f"built {args.ranks} rank traces ({SOURCE.name}, 109k events each) in {took:.1f} s; straggler: rank {STRAGGLER}")
        cli = [sys.executable, "-m", "autoprof", "analyze", "--json"]
        runs: dict[str, tuple[float, int, str]] = {}
        runs["autoprof --jobs 1"] = measure([*cli, "--jobs", "1", str(traces)], env)
        runs["autoprof --jobs 2"] = measure([*cli, "--jobs", "2", str(traces)], env)
        script = Path(tmp) / "dask_run.py"
        script.write_text(DASK)
        try:
            import distributed  # noqa: F401

            runs["autoprof on Dask LocalCluster(2)"] = measure([sys.executable, str(script), str(traces)], env)
        except ImportError:
            print("(Dask distributed is not installed: pip install 'autoprof[dask]')")
        try:
            import hta  # noqa: F401

            hta_script = Path(tmp) / "hta_run.py"
            hta_script.write_text(HTA)
            runs["HTA TraceAnalysis"] = measure([sys.executable, str(hta_script), str(traces)], env)
        except ImportError:
            print("(HolisticTraceAnalysis is not installed: pip install HolisticTraceAnalysis)")

        base_t, _base_m, base_out = runs["autoprof --jobs 1"]
        hta_t, hta_m, _ = runs.get("HTA TraceAnalysis", (None, None, ""))
        print(
            f"\n{'run':36} {'wall s':>8} {'peak MB':>9} {'time / seq':>11} {'time / HTA':>11} {'mem / HTA':>10}  same findings, straggler"
        )
        for name, (t, m, out) in runs.items():
            ours = name.startswith("autoprof")
            print(
                f"{name:36} {t:8.2f} {m / 1e6:9.0f} {t / base_t:11.2f} "
                f"{(f'{t / hta_t:11.2f}' if hta_t else '          –')} {(f'{m / hta_m:10.2f}' if hta_m else '         –')}  "
                + (f"{'yes' if same(out, base_out) else 'NO'}, {stragglers(out)}" if ours else "")
            )


if __name__ == "__main__":
    main()
