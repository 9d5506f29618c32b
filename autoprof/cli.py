"""``autoprof analyze PATH...``: the live path's verdicts from saved chrome traces; ``autoprof diff BASE NEW``:
what changed between two runs; ``autoprof report PATH... -o FILE``: the same verdicts on one HTML page; ``autoprof
show FILE...``: a records file (a sink) as the text a terminal shows live.

Exit status: 0 analyzed (no finding at or above ``--fail-on``); 1 a finding at or above ``--fail-on`` (diff: a
regression past ``--fail-on-regression`` or a new finding at ``--fail-on-new``); 2 bad input (analyze: any file
that cannot be read, the good ones are still analyzed; diff: one line, nothing compared, or a gate that cannot be
evaluated, one line saying why; report: as analyze, and no page at all when no input can be read, when the page
would overwrite an input, or when plotly is missing; show: a file that cannot be read or a line that is not a
record, each file one line, every record that was read still printed) or bad usage. An empty path (``''``, ``file://``) is bad input,
never the current directory.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from autoprof import __version__
from autoprof.analysis.engine import Analysis, cross_rank, diff, iter_files
from autoprof.config import FORMATS, SCHEDULE_KEYS, SWITCH, Config, ConfigError
from autoprof.findings import SEVERITIES, severity_rank
from autoprof.render import diff as render_diff
from autoprof.render import records, show, table
from autoprof.render.emit import line as record_line
from autoprof.render.text import clean, use_color
from autoprof.trace.chrome import TraceError

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


def _whole(least: int, what: str) -> Callable[[str], int]:
    """A validator of a whole-number option: ``what`` it counts, at least ``least``; argparse names the option."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected {what}: a whole number >= {least}, got {text!r}")
        return value

    return check


_workers = _whole(0, "a number of helper processes")
_jobs = _whole(1, "a number of files analyzed in parallel")
_top = _whole(1, "a number of ops and kernels to list")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, more than 0, got {text!r}")
    return value


def _user_rules(specs: Sequence[str]) -> Config:
    """The configuration with the rules ``--rules MODULE:ATTR`` names (a rule, or a list of rules), imported from the
    current directory or the path; raises ``ValueError`` with one line."""
    import importlib

    found: list[Any] = []
    for spec in specs:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(f"--rules {spec}: expected MODULE:ATTR (myrules:RULES)")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except Exception as e:
            raise ValueError(f"--rules {spec}: {type(e).__name__}: {e}") from None
        found.extend(obj if isinstance(obj, (list, tuple)) else [obj])
    try:
        return SWITCH.config.replace(rules=(*SWITCH.config.rules, *found))
    except ConfigError as e:
        raise ValueError(f"--rules: {e}") from None


#: How long ``--scheduler`` waits for the Dask scheduler by default (``--scheduler-timeout``).
SCHEDULER_TIMEOUT_S = 10.0


def _dask_executor(address: str, timeout: float = SCHEDULER_TIMEOUT_S) -> tuple[Any, Any]:
    """A Dask client of the scheduler at ``address`` (waiting at most ``timeout`` seconds for it) and its executor;
    one-line errors (ImportError, OSError)."""
    try:
        from distributed import Client
    except ImportError:
        raise ImportError("--scheduler needs Dask distributed, which is not installed: pip install 'autoprof[dask]'") from None
    try:
        client = Client(address, timeout=timeout)  # type: ignore[no-untyped-call]
    except Exception as e:
        detail = " ".join(str(e).split())
        raise OSError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s (--scheduler-timeout): {type(e).__name__}"
            + (f": {detail}" if detail else "")
        ) from None
    return client, client.get_executor()  # type: ignore[no-untyped-call]


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a percentage (a number, 0 or more), got {text!r}")
    return value


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a confidence between 0.5 and 1 (0.95: 95%), got {text!r}")
    return value


def _diff(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    if len(args.paths) < 2:
        err.write("autoprof: diff needs a base and a new run: autoprof diff BASE... NEW\n")
        return 2
    bases, new = args.paths[:-1], args.paths[-1]
    try:
        config, client, executor = _analysis_setup(args)
    except (ValueError, ImportError, OSError) as e:
        err.write(f"autoprof: {e}\n")
        return 2
    try:
        diffs = diff(
            bases, new, config=config, top=args.top, workers=args.workers, confidence=args.confidence, jobs=args.jobs, executor=executor
        )
    except TraceError as e:
        err.write(f"autoprof: {e}\n")
        return 2
    finally:
        if client is not None:
            client.close()
    shown = " ".join(_shown(b) for b in bases)
    if not diffs:
        err.write(f"autoprof: {shown} and {_shown(new)} share no rank, target or file name to compare\n")
        return 2
    gates = [d.gate(args.fail_on_regression, args.confidence) if args.fail_on_regression is not None else None for d in diffs]
    if args.json:
        for d, g in zip(diffs, gates):
            out.write(record_line(render_diff.record(d, g)) + "\n")
    else:
        for d in diffs:
            render_diff.table(d, out)
    out.flush()
    # A gate that tripped on a pair is said first, and fails (1) even where another pair cannot be evaluated: a
    # regression that is known is never hidden behind one that is not.
    tripped = [(d, g) for d, g in zip(diffs, gates) if g is not None and g.tripped]
    ranks = [d.rank for d in diffs]
    for d, g in tripped:
        where = "" if len(diffs) == 1 else f" (rank {d.rank})" if ranks.count(d.rank) == 1 else f" ({d.new_path})"
        err.write(f"autoprof: {render_diff.gate_line(g)}{where}\n")
    # Nothing to compare, or a gate that cannot be evaluated, does not pass: bad input (2), one line saying why.
    # A group one side lacks (a rank the new run lost) is one line naming every such group.
    lost = render_diff.missing_text(diffs)
    lacking = [lost] if lost else []
    unknown = []
    if args.fail_on_regression is not None:
        reasons = [g.reason for d, g in zip(diffs, gates) if g is not None and g.reason and d.missing is None]
        unknown.append((f"--fail-on-regression {args.fail_on_regression:g}", lacking + reasons))
    if args.fail_on_new is not None:
        problems = [p for d in diffs if d.missing is None and (p := d.findings_problem)]
        unknown.append((f"--fail-on-new {args.fail_on_new}", lacking + problems))
    unknown = [(gate, problems) for gate, problems in unknown if problems]
    for gate, problems in unknown:
        more = f" (and {len(problems) - 1} more pairs)" if len(problems) > 1 else ""
        err.write(f"autoprof: {gate} cannot be evaluated: {problems[0]}{more}\n")
    if unknown:
        return 1 if tripped else 2
    empty = [p for d in diffs if (p := d.empty_problem)]
    if empty:
        err.write(f"autoprof: {empty[0]}\n")
        return 1 if tripped else 2
    appeared = args.fail_on_new is not None and any(d.new_findings(args.fail_on_new) for d in diffs)
    return 1 if tripped or appeared else 0


def _shown(path: str) -> str:
    """A path as a message names it: ``''`` for the empty one."""
    return path if path else "''"


def _analysis_options() -> argparse.ArgumentParser:
    """The options of how trace files are analyzed, alike for every command that reads them (``analyze``, ``diff``,
    ``report``): argparse's parent parser of each."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also run your own rules: a rule or a list of rules declared with autoprof.rule (repeatable; diff: on both sides)",
    )
    common.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help="files analyzed in parallel, each in a fresh process (default and most: the usable CPUs, and no more than "
        "the files; 1: one after another)",
    )
    common.add_argument(
        "--workers",
        type=_workers,
        default=None,
        metavar="N",
        help="helper processes that parse a large file's events (default: the CPUs, at most 4, shared with --jobs; 0: none)",
    )
    common.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="analyze the files on a Dask cluster (tcp://HOST:8786); its workers read the files (needs autoprof[dask])",
    )
    common.add_argument(
        "--scheduler-timeout",
        type=_seconds,
        default=SCHEDULER_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long --scheduler waits to reach the scheduler before giving up (default {SCHEDULER_TIMEOUT_S:g})",
    )
    return common


def _analysis_setup(args: argparse.Namespace) -> tuple[Config, Any, Any]:
    """What the analysis options ask for: the configuration with ``--rules``, and ``--scheduler``'s Dask client and
    executor (None, None without it; the caller closes the client). Raises ``ValueError``, ``ImportError`` or
    ``OSError`` with one line."""
    config = _user_rules(args.rules)
    if not args.scheduler:
        return config, None, None
    client, executor = _dask_executor(args.scheduler, args.scheduler_timeout)
    return config, client, executor


#: ``autoprof run``'s usage: short, so a bad argument is two lines (this, then what is wrong), as argparse writes.
RUN_USAGE = "autoprof run [OPTIONS] SCRIPT [ARGS...]"


def _analyze_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="+", metavar="PATH")
    cmd.add_argument("--json", action="store_true", help="print JSON records, one per line (the live path's records)")
    cmd.add_argument("--fail-on", choices=SEVERITIES, default=None, help="exit 1 when a finding at or above this severity exists")
    cmd.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _diff_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="+", metavar="BASE... NEW", help="the base run(s), then the new run")
    cmd.add_argument("--json", action="store_true", help="print one autoprof.diff record per rank, one per line")
    cmd.add_argument(
        "--fail-on-regression",
        type=_percent,
        default=None,
        metavar="PCT",
        help="exit 1 when the step time got worse by more than PCT percent with --confidence (the interval's low end is "
        "above PCT); 2 when that cannot be evaluated: no steps on a side, too few steps for the interval",
    )
    cmd.add_argument(
        "--confidence",
        type=_confidence,
        default=0.95,
        metavar="C",
        help="the confidence of the step time's and the ops' intervals (default 0.95)",
    )
    cmd.add_argument(
        "--fail-on-new",
        choices=SEVERITIES,
        default=None,
        help="exit 1 when a finding at or above this severity appeared (2 when that cannot be known: a trace without "
        "events, a rule that failed)",
    )
    cmd.add_argument("--top", type=_top, default=10, metavar="N", help="ops and kernels listed per kind of change (default 10)")


def _report_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="+", metavar="PATH")
    cmd.add_argument("-o", "--output", default="autoprof-report.html", metavar="FILE", help="the page to write")


def _show_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="+", metavar="FILE", help="records files (JSON lines); - reads standard input")
    cmd.add_argument("--json", action="store_true", help="print the records' own lines, unchanged, in file order")
    cmd.add_argument("--rule", action="append", default=[], metavar="RULE", help="only the findings of this rule (repeatable)")
    cmd.add_argument("--level", choices=show.LEVELS, default=None, help="only records at or above this level")
    cmd.add_argument(
        "--last",
        type=_whole(1, "a number of windows"),
        default=None,
        metavar="N",
        help="only each target's last N windows (per run and rank)",
    )
    cmd.add_argument("--color", choices=("auto", "always", "never"), default="auto")


#: ``autoprof run``'s options that go to ``configure()`` (the schedule's and ``--trigger`` go to the runner): declared
#: once, read by the parser and by :func:`_run`.
_RUN_SETTINGS: dict[str, dict[str, Any]] = {
    "trace_dir": {"metavar": "DIR", "help": "keep each window's trace in DIR"},
    "report": {"action": "store_true", "help": "with --trace-dir: an HTML report at the end"},
    "sink": {"metavar": "FILE", "help": "append the records (JSON lines) to FILE"},
    "format": {"choices": FORMATS, "help": "records as text or JSON lines (default auto)"},
}


def _run_arguments(cmd: argparse.ArgumentParser) -> None:
    for key in SCHEDULE_KEYS:
        counts = "a number of windows" if key == "repeat" else "a number of steps"
        cmd.add_argument(f"--{key.replace('_', '-')}", type=_whole(0, counts), default=None, metavar="N")
    cmd.add_argument("--trigger", action="store_true", default=None, help="also open a window when steps turn slow")
    cmd.add_argument("--name", default=None, help="the plain loop's target (default: SCRIPT's name.step)")
    for key, how in _RUN_SETTINGS.items():
        cmd.add_argument(f"--{key.replace('_', '-')}", default=None, **how)
    cmd.add_argument("script", metavar="SCRIPT", help="the training script (a Python file), run as python runs it")
    script_args = cmd.add_argument(
        "args", nargs=argparse.REMAINDER, default=[], metavar="ARGS", help="the script's own arguments (its sys.argv[1:])"
    )
    script_args.required = False  # argparse counts a REMAINDER as required: with no SCRIPT it would ask for ARGS too


@dataclass(frozen=True)
class Command:
    """One ``autoprof`` command, registered once in :data:`COMMANDS`: its name, its help line, what adds its own
    arguments to its parser, and its handler (the parsed arguments in, the exit status out)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]
    #: It reads trace files: the options of how they are analyzed (:func:`_analysis_options`) are its too.
    analysis: bool = False
    #: Its own usage line; an argument it does not know is then reported with it (argparse would print the top level's).
    usage: str | None = None
    #: A batch command: run with the cyclic collector off, Ctrl-C exit 130 and a closed pipe exit 141. Not one
    #: (``run``): the script's own exceptions and exit status pass through, unchanged.
    batch: bool = True


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and each registered command's own (by name)."""
    parser = argparse.ArgumentParser(prog="autoprof", description="Find out why a PyTorch program is slow.")
    parser.add_argument("--version", action="version", version=f"autoprof {__version__}")
    sub = parser.add_subparsers(dest="command")
    common = _analysis_options()
    own = {}
    for command in COMMANDS:
        cmd = sub.add_parser(command.name, parents=[common] if command.analysis else [], help=command.help, usage=command.usage)
        command.arguments(cmd)
        own[command.name] = cmd
    return parser, own


def main(argv: Sequence[str] | None = None) -> int:
    parser, own = _parsers()
    by_name = {command.name: command for command in COMMANDS}
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            command = by_name.get(args.command)
            (own[command.name] if command is not None and command.usage else parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:
        return int(e.code or 0)
    command = by_name.get(args.command)
    if command is None:
        parser.print_usage(sys.stderr)
        return 2
    if not command.batch:
        return command.handler(args)
    # A short-lived process that builds millions of small objects and no reference cycles: the cyclic
    # collector would only re-walk them (reference counting still frees everything).
    gc_was = gc.isenabled()
    gc.disable()
    try:
        return command.handler(args)
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
    """Each file's output as soon as it is analyzed (thousands of files print as they go); the traces of a
    distributed job (world size > 1) wait for the cross-rank comparison, which needs all of its ranks."""
    out, err = sys.stdout, sys.stderr
    color = args.color == "always" or (args.color == "auto" and out.isatty())
    worst = -1  # the highest severity seen
    held: list[Analysis] = []

    def show(results: list[Analysis]) -> None:
        nonlocal worst
        for result in results:
            worst = max([worst, *(severity_rank(finding.severity) for finding in result.findings)])
        if args.json:
            for result in results:
                for rec in records.file_records(result):
                    out.write(record_line(rec) + "\n")
        else:
            table.write(results, out, color)
        out.flush()

    try:
        config, client, executor = _analysis_setup(args)
    except (ValueError, ImportError, OSError) as e:
        err.write(f"autoprof: {e}\n")
        return 2
    try:
        bad = _stream(args, show, held, executor, config)
    finally:
        if client is not None:
            client.close()
    if held:
        cross_rank(held)
        show(held)
    if bad:
        return 2
    if args.fail_on and worst >= severity_rank(args.fail_on):
        return 1
    return 0


def _stream(args: argparse.Namespace, show: Callable[[list[Analysis]], None], held: list[Analysis], executor: Any, config: Config) -> int:
    """Each file's output as it comes, in input order; the files of a distributed job held for the comparison.
    Returns the count of bad inputs."""
    err = sys.stderr
    bad = 0
    progress = (lambda label: _Progress(label, err)) if executor is None else None
    for result in iter_files(args.paths, config, progress=progress, workers=args.workers, jobs=args.jobs, executor=executor):
        if result.error:
            bad += 1
            err.write(f"autoprof: {clean(result.error)}\n")
        elif result.world_size > 1:
            held.append(result)
        else:
            show([result])
    return bad


def _report(args: argparse.Namespace) -> int:
    """The page, with every readable input; each unreadable one is a line on stderr (exit 2, as analyze)."""
    from autoprof.render import htmlreport

    err = sys.stderr
    client = None
    try:
        config, client, executor = _analysis_setup(args)
        reps = htmlreport.write(args.paths, args.output, config, workers=args.workers, jobs=args.jobs, executor=executor)
    except htmlreport.NoReadableInputError as e:  # no page: every input's own line, as analyze
        for problem in e.errors:
            err.write(f"autoprof: {problem}\n")
        return 2
    except (TraceError, ImportError, OSError, ValueError) as e:
        err.write(f"autoprof: {e}\n")
        return 2
    finally:
        if client is not None:
            client.close()
    bad = [r for r in reps if r.error is not None]
    for r in reps:
        if r.error is not None:
            err.write(f"autoprof: {r.error}\n")
        for failure in r.failure_lines:  # on the page too
            err.write(f"autoprof: {r.path}: {failure}\n")
    err.write(f"autoprof: wrote {args.output} ({len(reps) - len(bad)} trace(s))\n")
    return 2 if bad else 0


def _run(args: argparse.Namespace) -> int:
    """``autoprof run``: the options into ``configure()`` and the schedule, then the script as ``python SCRIPT ARGS``
    runs it (:mod:`autoprof.runner`). A bad option or a script that is not there: one line, exit 2 (as python's)."""
    from autoprof.config import configure

    settings = {k: getattr(args, k) for k in _RUN_SETTINGS if getattr(args, k) is not None}
    schedule = {k: getattr(args, k) for k in (*SCHEDULE_KEYS, "trigger") if getattr(args, k) is not None}
    try:
        configure(**settings)
        SWITCH.config.replace(**schedule)  # checked here, one line, before the script runs
    except ConfigError as e:
        sys.stderr.write(f"autoprof: {e}\n")
        return 2
    if not os.path.isfile(args.script):
        sys.stderr.write(f"autoprof: can't open file {args.script!r}: not a file\n")
        return 2
    from autoprof.runner import NotAScriptError, run_script

    try:
        run_script(args.script, args.args, schedule, name=args.name)
    except NotAScriptError as e:
        sys.stderr.write(f"autoprof: {e}\n")
        return e.status
    return 0


def _show_records(args: argparse.Namespace) -> int:
    """Every record that was read, printed (grouped as text, or its own line with ``--json``); a file that cannot be
    read, or a line that is not a record, is one line on stderr per file and exit 2."""
    out, err = sys.stdout, sys.stderr
    entries, problems = show.read(args.paths)
    filters = show.Filters(rules=args.rule, level=args.level, last=args.last)
    filters.prepare(entries)
    kept = [e for e in entries if filters.keep(e)]
    if args.json:
        for e in kept:
            out.write(e.line + "\n")
    else:
        color = args.color == "always" or (args.color == "auto" and use_color(out))
        show.write_text(entries, kept, out, color)
    out.flush()
    for problem in problems:
        err.write(f"autoprof: {clean(problem)}\n")
    if entries and not kept:
        err.write("autoprof: no record matches the filters\n")
    return 2 if problems else 0


#: Every command, in the order ``autoprof --help`` lists them: a new command is one entry here (with its arguments'
#: function and its handler).
COMMANDS: tuple[Command, ...] = (
    Command(
        "analyze",
        "analyze saved torch.profiler chrome traces (.json, .json.gz, or a directory)",
        _analyze_arguments,
        _analyze,
        analysis=True,
    ),
    Command(
        "diff",
        "what changed between two runs (trace files, per-rank directories, or kept trace_dirs); several BASE runs are "
        "pooled into one baseline",
        _diff_arguments,
        _diff,
        analysis=True,
    ),
    Command(
        "report",
        "one self-contained HTML page about saved traces (needs autoprof[report])",
        _report_arguments,
        _report,
        analysis=True,
    ),
    Command(
        "show",
        "print records files (a sink: JSON lines, several runs and ranks) as text, by run, rank, target and window",
        _show_arguments,
        _show_records,
    ),
    Command(
        "run",
        "run a training script unmodified (its own arguments after it), its steps found without a decorator: "
        "autoprof run [OPTIONS] SCRIPT [ARGS...]",
        _run_arguments,
        _run,
        usage=RUN_USAGE,
        batch=False,
    ),
)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
