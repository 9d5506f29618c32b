"""``autoprof analyze PATH...``: the live path's verdicts from saved chrome traces.

Exit status: 0 analysed (no finding at or above ``--fail-on``); 1 a finding at or above ``--fail-on``;
2 bad input (any file that cannot be read; the good ones are still analysed) or bad usage.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from autoprof import __version__
from autoprof.emit import ERROR_EVENT, WINDOW_EVENT, build_record, finding_record
from autoprof.engine import FileResult, cross_rank, iter_files
from autoprof.findings import SEVERITIES, severity_rank

_COLORS = {"info": "\033[36m", "warning": "\033[33m", "critical": "\033[31m", "error": "\033[31m"}
_RESET = "\033[0m"
_BOLD = "\033[1m"


PROGRESS_AFTER_S = 1.0


class _Progress:
    """A one-line note on stderr for loads longer than about a second, only when stderr is a terminal."""

    def __init__(self, label: str, stream: IO[str]) -> None:
        self.label = label
        self.stream = stream
        self._done = threading.Event()
        self._shown = False
        self._thread: threading.Thread | None = None
        if stream.isatty():
            self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        if self._done.wait(PROGRESS_AFTER_S):
            return
        self._shown = True
        while True:
            self.stream.write(f"\rautoprof: loading {self.label} … {time.monotonic() - t0:.0f} s")
            self.stream.flush()
            if self._done.wait(0.25):
                return

    def __enter__(self) -> _Progress:
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread:
            self._thread.join()
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _records(result: FileResult) -> list[dict[str, Any]]:
    """The file's records, as the live path writes them: one window record, then the findings."""
    ctx: dict[str, Any] = {
        "target": result.path,
        "window": None,
        "source": result.path,
        "rank": result.rank,
        "world_size": result.world_size,
    }
    window = build_record(
        WINDOW_EVENT,
        "info",
        **ctx,
        trace_rank=result.rank,
        steps=result.steps,
        step_wall_ms=[round(ns / 1e6, 4) for ns in result.step_ns],
        top_ops=result.top_ops,
        # offline, the program paid nothing for its window: both costs are 0 (and records stay reproducible)
        event_count=result.event_count,
        autoprof_overhead_ms=0.0,
        stall_ms=0.0,
        sections=result.sections,
        **result.summary,
    )
    findings = [finding_record(finding, **ctx, trace_rank=result.rank) for finding in result.findings]
    errors = [
        build_record(ERROR_EVENT, "error", **ctx, message=f"rule {name} failed: {error}", reason="rule", error_type=type(error).__name__)
        for name, error in result.failures
    ]
    return [window, *findings, *errors]


def _table(results: list[FileResult], out: IO[str], color: bool) -> None:
    def c(text: str, sev: str) -> str:
        return f"{_COLORS.get(sev, '')}{text}{_RESET}" if color else text

    for result in sorted((result for result in results if result.error is None), key=lambda result: (result.rank, result.path)):
        head = f"{result.path}  (rank {result.rank} of {result.world_size}, {result.event_count} events, "
        head += f"steps {result.steps[0]}–{result.steps[-1]})" if result.steps else "no ProfilerStep)"
        out.write((f"{_BOLD}{head}{_RESET}" if color else head) + "\n")
        if result.sections:
            out.write(
                "  sections: " + ", ".join(f"{x['name']} {x['step_share']:.0%} ({x['calls']} calls)" for x in result.sections[:8]) + "\n"
            )
        if not result.findings:
            out.write("  no findings\n")
        width = max((len(finding.rule) for finding in result.findings), default=0)
        for finding in result.findings:
            out.write(f"  {c(f'{finding.severity:<8}', finding.severity)} {finding.rule:<{width}}  {finding.message}\n")
            out.write(f"  {'':<8} {'':<{width}}  → {finding.advice}\n")
        for name, error in result.failures:
            out.write(f"  {c('error   ', 'error')} {name:<{width}}  rule failed: {error}\n")
        out.write("\n")


def _workers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a number of processes (0 or more), got {text!r}")
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autoprof", description="Find out why a PyTorch program is slow.")
    parser.add_argument("--version", action="version", version=f"autoprof {__version__}")
    sub = parser.add_subparsers(dest="command")
    analyze_cmd = sub.add_parser("analyze", help="analyse saved torch.profiler chrome traces (.json, .json.gz, or a directory)")
    analyze_cmd.add_argument("paths", nargs="+", metavar="PATH")
    analyze_cmd.add_argument("--json", action="store_true", help="print JSON records, one per line (the live path's records)")
    analyze_cmd.add_argument("--fail-on", choices=SEVERITIES, default=None, help="exit 1 when a finding at or above this severity exists")
    analyze_cmd.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    analyze_cmd.add_argument(
        "--workers",
        type=_workers,
        default=None,
        metavar="N",
        help="helper processes that parse a large file's events (default: the CPUs, at most 4; 0: none)",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.command != "analyze":
        parser.print_usage(sys.stderr)
        return 2
    # A short-lived process that builds millions of small objects and no reference cycles: the cyclic
    # collector would only re-walk them (reference counting still frees everything).
    gc_was = gc.isenabled()
    gc.disable()
    try:
        return _analyze(args)
    except KeyboardInterrupt:
        sys.stderr.write("autoprof: interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (``autoprof analyze ... | head -1``): a normal end, as for any Unix filter, with
        # the status of a process ended by SIGPIPE (128 + 13). Later writes (the interpreter's final flush) go
        # to /dev/null instead of printing a traceback.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    finally:
        if gc_was:
            gc.enable()


def _analyze(args: argparse.Namespace) -> int:
    """Each file's output as soon as it is analysed (thousands of files print as they go); the traces of a
    distributed job (world size > 1) wait for the cross-rank comparison, which needs all of its ranks."""
    out, err = sys.stdout, sys.stderr
    color = args.color == "always" or (args.color == "auto" and out.isatty())
    bad = 0
    worst = -1  # the highest severity seen
    held: list[FileResult] = []

    def show(results: list[FileResult]) -> None:
        nonlocal worst
        for result in results:
            worst = max([worst, *(severity_rank(finding.severity) for finding in result.findings)])
        if args.json:
            for result in results:
                for rec in _records(result):
                    out.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
        else:
            _table(results, out, color)
        out.flush()

    for result in iter_files(args.paths, progress=lambda label: _Progress(label, err), workers=args.workers):
        if result.error:
            bad += 1
            err.write(f"autoprof: {result.error}\n")
        elif result.world_size > 1:
            held.append(result)
        else:
            show([result])
    if held:
        cross_rank(held)
        show(held)
    if bad:
        return 2
    if args.fail_on and worst >= severity_rank(args.fail_on):
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
