"""The rules: one module per reading, each ``check(trace, config) -> list[Finding]`` and ``VERDICTS`` (its rule ids and
the verdicts each may give); pure, no torch, no I/O.

Adding a built-in rule is its module and its name in :data:`NAMES`: the run order, :data:`RULES`, the vocabulary
and the JSON Schema (``python -m autoprof.schema.generate``) follow. A user's own rules (``configure(rules=...)``,
declared with :func:`autoprof.rule`) run after the built-in ones, under a contract the engine enforces
(:func:`run_user_rule`): each call on a trace of its own that it cannot change (:func:`read_only`), within
:data:`USER_RULE_TIME_LIMIT_S`, its findings checked one by one (:func:`checked_finding`); what breaks the contract
is one failure naming the rule, never the other rules' findings nor the window's record.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.machinery
import io
import marshal
import math
import os
import pickle
import sys
import threading
import types
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import import_module
from types import MappingProxyType, ModuleType
from typing import Any

from autoprof import _guard
from autoprof.config import Config
from autoprof.findings import SEVERITIES, Finding, declaration_problem, shown
from autoprof.trace.model import Derived, Trace

Check = Callable[[Trace, Any], list[Finding]]

#: Every built-in rule module (in ``autoprof/rules/``), in the order their findings are reported.
NAMES = ("regime", "roofline", "fusion", "compile", "cold", "sync", "occupancy", "gaps", "comm", "variance", "bmm", "pageable", "memory")
MODULES: tuple[ModuleType, ...] = tuple(import_module(f"{__name__}.{name}") for name in NAMES)


class RuleError(Exception):
    """A rule returned something it may not: not a list of findings, or a finding outside its declared vocabulary."""


@dataclass(frozen=True)
class Rule:
    """One rule as the engine runs it: its id (its first rule id: what a failure is reported under), its check, and
    the vocabulary it declared (rule id -> verdicts; a module such as ``fusion`` gives several rules' findings)."""

    id: str
    check: Check
    verdicts: Mapping[str, tuple[str, ...]]

    def run(self, trace: Trace, config: Config | None) -> list[Finding]:
        """Its findings, each checked against its vocabulary; raises :class:`RuleError` (the whole call's findings
        dropped) on anything else."""
        found = self.check(trace, config)
        for f in findings_of(found):
            check_declared(f, self.verdicts)
        return found


def findings_of(found: Any) -> list[Finding]:
    """What a rule returned, as a list of :class:`Finding` (a copy); :class:`RuleError` when it is not one (types read
    with ``type()``: a user's object cannot pass for a list or a finding)."""
    if not issubclass(type(found), list):
        raise RuleError(f"returned {type(found).__name__}, not a list of autoprof.Finding")
    items = list.copy(found)
    for f in items:
        if not issubclass(type(f), Finding):
            raise RuleError(f"returned {type(f).__name__}, not an autoprof.Finding")
    return items


def check_declared(f: Finding, verdicts: Mapping[str, tuple[str, ...]]) -> None:
    """:class:`RuleError` unless ``f``'s rule id and verdict are ones the rule declared (rule id -> its verdicts)."""
    allowed = verdicts.get(f.rule)
    if allowed is None:
        raise RuleError(f"returned a finding of rule {shown(f.rule)}, which it did not declare (declared: {', '.join(verdicts)})")
    if f.verdict not in allowed:
        raise RuleError(f"returned verdict {shown(f.verdict)} for {f.rule}, not one it declared ({', '.join(allowed)})")


def of_module(module: ModuleType) -> Rule:
    return Rule(next(iter(module.VERDICTS)), module.check, module.VERDICTS)


#: The built-in rules by id, in run order.
RULES: dict[str, Rule] = {rule.id: rule for rule in map(of_module, MODULES)}


def active(config: Config | None) -> Iterable[Rule]:
    """The built-in rules an analysis runs (a user's own run after them, by :func:`run_user_rule`)."""
    return RULES.values()


def run_rules(
    trace: Trace, config: Config | None = None, tick: Callable[[], None] | None = None
) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    """Run every rule: the built-in ones, then the user's (``configure(rules=...)``, each by :func:`run_user_rule`);
    a rule that fails (raises, or returns what it may not) does not stop the others. Returns (findings, failures by
    rule id). ``tick`` is called before each rule (the background analysis paces itself there)."""
    findings: list[Finding] = []
    failures: list[tuple[str, BaseException]] = []
    for rule in active(config):
        if tick is not None:
            tick()
        with _guard.rule(failures, rule.id):  # a bug in one rule must not hide the others' verdicts
            findings.extend(rule.run(trace, config))
    for fn in config.rules if config is not None else ():
        if tick is not None:
            tick()
        with _guard.rule(failures, functools.partial(_label, fn)):  # run_user_rule never raises an Exception; were it to, that rule only
            found, failed = run_user_rule(fn, trace, config)
            findings.extend(found)
            failures.extend(failed)
    return findings, failures


# -- a user's rules: the contract ---------------------------------------------------------------------------

#: How long one call of a user's rule may run, in seconds. Each call runs on a daemon thread of its own and the
#: analysis waits this long at most: a rule past it has that call's findings dropped (one ``autoprof.error`` record
#: naming the rule and this limit), is stopped at its next Python instruction where the interpreter allows it, and
#: is not run again in this process (the window's other findings and its record come out; a later analysis of the
#: same process, the end-of-run report's, does not wait for it again; exit never waits for it). 10 s: a pure-Python
#: pass over a million events takes well under a second, and the limit stays far below the 30 s the end of a run
#: waits for the last windows.
USER_RULE_TIME_LIMIT_S = 10.0
#: Evidence nested deeper than this is refused (a JSON writer's recursion has a limit too).
MAX_EVIDENCE_DEPTH = 32
_INT64 = 1 << 63


class RuleTimeoutError(RuleError):
    """A user's rule ran past :data:`USER_RULE_TIME_LIMIT_S` (or did earlier in this process, and is not run again)."""


class RuleStopped(BaseException):
    """Raised inside a user's rule that ran past its time limit, to stop it (a ``BaseException``: a rule's own
    ``except Exception`` does not swallow it)."""


#: The user's rules that ran past their time limit in this process, by id(): not run again (kept alive here, so an
#: id is never another object's).
_TIMED_OUT: dict[int, Any] = {}


def run_user_rule(fn: Any, trace: Trace, config: Config | None) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    """One call of a user's rule under the contract the engine enforces; returns (its findings, its failures), and
    never raises an Exception:

    - its declaration (``rule_id``, ``verdicts``) is checked again (:func:`autoprof.findings.declaration_problem`):
      a rule whose id was changed to a built-in one, or an undotted one, is not run;
    - it reads :func:`read_only` copies of the trace and the configuration: what it changes, nothing else sees;
    - it runs on a daemon thread of its own for at most :data:`USER_RULE_TIME_LIMIT_S` (:class:`RuleTimeoutError`);
    - it returns a list of findings of its own id and declared verdicts, else the call's findings are dropped
      (:class:`RuleError`);
    - each finding passes :func:`checked_finding` (a non-empty message, a string advice, string subjects,
      JSON-safe evidence), else that finding is dropped; one failure says how many and the first reason."""
    try:
        rule_id, verdicts = _declared(fn)
    except RuleError as e:
        return [], [(_label(fn), e)]
    limit = USER_RULE_TIME_LIMIT_S
    if id(fn) in _TIMED_OUT:
        return [], [(rule_id, RuleTimeoutError(f"not run: it ran past its time limit ({limit:g} s) earlier in this process"))]
    call = _Call(fn, read_only(trace), _config_copy(config))
    thread = threading.Thread(target=call.run, name=f"autoprof-rule-{rule_id}", daemon=True)
    try:
        thread.start()
    except RuntimeError as e:  # no thread can start (interpreter shutdown, a thread limit): not run
        return [], [(rule_id, RuleError(f"not run: {e}"))]
    if not call.done.wait(limit):
        _TIMED_OUT[id(fn)] = fn
        call.stop(thread)
        message = (
            f"ran past its time limit of {limit:g} s (autoprof.rules.USER_RULE_TIME_LIMIT_S): its findings are dropped "
            "and it is not run again in this process"
        )
        return [], [(rule_id, RuleTimeoutError(message))]
    if call.error is not None:
        return [], [(rule_id, call.error)]
    try:
        return _accepted(call.value, rule_id, verdicts)
    except RuleError as e:
        return [], [(rule_id, e)]


def _label(fn: Any) -> str:
    """A user's rule by its declared id when that is a string, else by its function's name (never its repr)."""
    with _guard.quiet("rule.label"):
        rule_id = getattr(fn, "rule_id", None)
        if type(rule_id) is str and len(rule_id) <= 80:
            return rule_id
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        return f"{getattr(fn, '__module__', '?')}.{name}" if type(name) is str else type(fn).__qualname__
    return type(fn).__qualname__


def _declared(fn: Any) -> tuple[str, tuple[str, ...]]:
    """A user's rule's id and verdicts as it declares them now; :class:`RuleError` (not run) on a bad declaration."""
    rule_id: Any
    verdicts: Any
    try:
        rule_id, verdicts = getattr(fn, "rule_id", None), getattr(fn, "verdicts", None)
    except Exception as e:
        raise RuleError(f"not run: its declaration cannot be read ({type(e).__name__})") from None
    if rule_id is None and verdicts is None:  # never declared: say what to do, as configure() does
        raise RuleError("not run: not a rule: declare it with @autoprof.rule(id, verdicts=...)")
    problem = declaration_problem(rule_id, verdicts)
    if problem is not None:
        raise RuleError(f"not run: {problem}")
    return str.__str__(rule_id), tuple(str.__str__(v) for v in verdicts)


class _Call:
    """One call of a user's rule on its thread: its value or its exception, and ``done`` once it returned."""

    __slots__ = ("args", "done", "error", "finished", "fn", "lock", "value")

    def __init__(self, fn: Any, trace: Trace, config: Config | None) -> None:
        self.fn = fn
        self.args: tuple[Any, ...] = (trace, config)
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.finished = False
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        with _guard.quiet("rule.stopped_late", catches=BaseException):  # stop()'s exception, landed after the rule returned
            try:
                # a SystemExit or KeyboardInterrupt of the rule's own is its failure too
                ok, value = _guard.outcome(self.fn, *self.args, catches=BaseException)
                if ok:
                    self.value = value
                else:
                    self.error = _readable(value)
            finally:
                self.args = ()
                with self.lock:
                    self.finished = True
                self.done.set()

    def stop(self, thread: threading.Thread) -> None:
        """Ask the interpreter to raise :class:`RuleStopped` in the rule's thread at its next Python
        instruction (a rule blocked in C code, a ``time.sleep``, stops when that returns). Only while the rule has not
        returned: under the lock its thread takes before it ends, so the exception never reaches another thread."""
        with self.lock:
            if self.finished or thread.ident is None:
                return
            with _guard.quiet("rule.stop"):  # no ctypes, another interpreter: the daemon thread runs on, unwaited
                import ctypes

                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(RuleStopped))


def _readable(error: BaseException) -> BaseException:
    """The exception a user's rule raised, or a :class:`RuleError` naming its type where its message cannot be read
    (a ``__str__`` that raises or returns no string would break the record that reports it). Read on the rule's
    thread, within its time limit."""
    with _guard.quiet("rule.message"):
        if type(str(error)) is str:
            return error
    return RuleError(f"raised {type(error).__name__}, whose message cannot be read")


def _config_copy(config: Config | None) -> Config | None:
    """The configuration a user's rule reads: frozen already, its one mutable field (``peaks``) copied."""
    if config is None or config.peaks is None:
        return config
    return dataclasses.replace(config, peaks=dict(config.peaks))


def _accepted(found: Any, rule_id: str, verdicts: tuple[str, ...]) -> tuple[list[Finding], list[tuple[str, BaseException]]]:
    """A user's rule's findings that keep the contract, as plain :class:`Finding` copies; :class:`RuleError` when
    the call returned what it may not at all (the whole call is dropped)."""
    kept: list[Finding] = []
    refused: list[str] = []
    items = findings_of(found)
    declared = {rule_id: verdicts}
    for f in items:
        try:
            plain = checked_finding(f)
        except FindingRefusedError as e:
            refused.append(str(e))
            continue
        check_declared(plain, declared)
        kept.append(plain)
    if not refused:
        return kept, []
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    what = "a finding" if len(items) == 1 else f"{len(refused)} of its {len(items)} findings"
    return kept, [(rule_id, RuleError(f"{what} dropped: {refused[0]}{more}"))]


class FindingRefusedError(ValueError):
    """A finding of a user's rule that breaks the contract (:func:`checked_finding`): why, in one line."""


def checked_finding(f: Finding) -> Finding:
    """A plain :class:`Finding` copy of a user's finding whose record is valid JSON and valid against the schema:
    a non-empty string message, a string advice, a known severity, subjects a tuple or list of strings, evidence a
    dict of JSON values (string keys, finite numbers, no cycles, no other types, at most
    :data:`MAX_EVIDENCE_DEPTH` deep). Raises :class:`FindingRefusedError` (why, naming the field) otherwise."""
    try:
        rule, verdict, severity = f.rule, f.verdict, f.severity
        message, advice, evidence, subjects = f.message, f.advice, f.evidence, f.subjects
    except Exception as e:
        raise FindingRefusedError(f"its fields cannot be read ({type(e).__name__})") from None
    if type(rule) is not str or type(verdict) is not str:
        raise FindingRefusedError(f"its rule and verdict must be strings, not {shown(rule)} and {shown(verdict)}")
    if not issubclass(type(message), str) or not str.strip(message):
        raise FindingRefusedError(f"its message must be a non-empty string, not {shown(message)}")
    if not issubclass(type(advice), str):
        raise FindingRefusedError(f"its advice must be a string, not {shown(advice)}")
    if type(severity) is not str or severity not in SEVERITIES:
        raise FindingRefusedError(f"its severity must be one of {', '.join(SEVERITIES)}, not {shown(severity)}")
    if type(subjects) not in (tuple, list) or not all(issubclass(type(s), str) for s in subjects):
        raise FindingRefusedError(f"its subjects must be a tuple of strings (op or kernel names), not {shown(subjects)}")
    if not issubclass(type(evidence), dict):
        raise FindingRefusedError(f"its evidence must be a dict, not {shown(evidence)}")
    return Finding(
        rule,
        verdict,
        severity,
        str.__str__(message),
        str.__str__(advice),
        _json_copy(evidence, "evidence", 0, set()),
        tuple(str.__str__(s) for s in subjects),
    )


def _json_copy(value: Any, where: str, depth: int, inside: set[int]) -> Any:
    """A plain copy of ``value`` that ``json.dumps(..., allow_nan=False)`` writes as it is (no ``default=``), or
    :class:`FindingRefusedError` naming where it is not JSON. Never runs the user's code (no ``__eq__``,
    ``__repr__``, ``__iter__`` of theirs): types are read with ``type()``, values through the base types."""
    t = type(value)
    if value is None or t is bool:
        return value
    if issubclass(t, str):
        return str.__str__(value)
    if issubclass(t, int):
        number = int.__int__(value)
        if not -_INT64 <= number < _INT64:
            raise FindingRefusedError(f"{where} is an integer beyond 64 bits, which JSON readers do not keep")
        return number
    if issubclass(t, float):
        x = float.__float__(value)
        if not math.isfinite(x):
            raise FindingRefusedError(f"{where} is {x!r}, which JSON cannot hold (no NaN or infinity): use None")
        return x
    if depth >= MAX_EVIDENCE_DEPTH:
        raise FindingRefusedError(f"{where} is nested deeper than {MAX_EVIDENCE_DEPTH} levels")
    if issubclass(t, (dict, list, tuple)):
        if id(value) in inside:
            raise FindingRefusedError(f"{where} contains itself (a circular value), which JSON cannot hold")
        inside.add(id(value))
        try:
            if issubclass(t, dict):
                out: dict[str, Any] = {}
                for key, item in dict.items(value):
                    if not issubclass(type(key), str):
                        raise FindingRefusedError(f"{where} has a key that is {shown(key)}: JSON keys are strings")
                    key = str.__str__(key)
                    out[key] = _json_copy(item, f"{where}[{key[:40]!r}]", depth + 1, inside)
                return out
            items = list.copy(value) if issubclass(t, list) else tuple.__iter__(value)
            return [_json_copy(item, f"{where}[{k}]", depth + 1, inside) for k, item in enumerate(items)]
        finally:
            inside.discard(id(value))
    raise FindingRefusedError(
        f"{where} is {shown(value)}, not a JSON value (None, bool, int, float, str, list, tuple or dict with string keys: "
        "convert it, int(x), float(x), str(x), list(x))"
    )


# -- a user's rules: the read-only trace -------------------------------------------------------------------


class _CopiedOnRead(Mapping[Any, Any]):
    """A read-only mapping over one of a trace's dicts (``shapes``, ``launch_config``, the name index) whose values
    come out as the reader's own copies, made on first read (as ``copy.deepcopy`` would, lazily: values the trace
    shares stay shared between the copies): a reader that changes one changes only its own. O(1) to make."""

    __slots__ = ("_copies", "_data")

    def __init__(self, data: Mapping[Any, Any]) -> None:
        self._data = data
        self._copies: dict[int, Any] = {}  # id of the trace's value (alive as long as the trace) -> its copy

    def __getitem__(self, key: Any) -> Any:
        return self._copy(self._data[key])

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._data.get(key, _ABSENT)
        return default if value is _ABSENT else self._copy(value)

    def _copy(self, value: Any) -> Any:
        if type(value) not in _CONTAINERS:
            return value
        made = self._copies.get(id(value))
        if made is None:
            try:  # lists, tuples, dicts of numbers and strings (what a trace holds): in C, ~4x faster than _copied
                made = marshal.loads(marshal.dumps(value))
            except ValueError:
                made = _copied(value)
            self._copies[id(value)] = made
        return made

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


_ABSENT = object()
_CONTAINERS = (list, tuple, dict)


def _copied(value: Any) -> Any:
    """A copy of a trace's value whose lists and dicts are new ones (strings and numbers are shared)."""
    t = type(value)
    if t is list:
        return [_copied(v) if type(v) in _CONTAINERS else v for v in value]
    if t is tuple:
        return tuple([_copied(v) if type(v) in _CONTAINERS else v for v in value])
    if t is dict:
        return {k: _copied(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    return value


def read_only(trace: Trace) -> Trace:
    """The trace a user's rule reads: a shallow copy that shares the trace's data and cannot change it. Its event
    columns (``h_ts``, ``d_dur``, ...) are read-only memoryviews of the trace's arrays (indexing, slicing,
    ``len``, iteration, ``tolist()``; assigning raises ``TypeError``); ``names``, ``threads`` and ``steps`` are
    tuples (a :class:`~autoprof.trace.model.Step` is frozen); ``shapes``, ``launch_config`` and the name index are
    read-only mappings whose values come out as copies; ``metadata`` and ``device_properties`` (small) are deep
    copies; its cache of derived values (``trace.derive``) is its own. Setting an attribute changes only the copy. No
    event is copied: O(names) to make (tuple of the interned names), whatever the number of events."""
    view = copy.copy(trace)
    state = vars(view)
    for name, value in state.items():
        if type(value) is array:
            state[name] = memoryview(value).toreadonly()
    view.names = tuple(trace.names)  # type: ignore[assignment]
    view.threads = tuple(trace.threads)  # type: ignore[assignment]
    view.steps = tuple(trace.steps)  # type: ignore[assignment]
    view._name_ids = MappingProxyType(trace._name_ids)  # type: ignore[assignment]
    view.shapes = _CopiedOnRead(trace.shapes)  # type: ignore[assignment]
    view.launch_config = _CopiedOnRead(trace.launch_config)  # type: ignore[assignment]
    view._by_name = _CopiedOnRead(trace.host_by_name())  # type: ignore[assignment]  # built once, on the trace
    view.metadata = copy.deepcopy(trace.metadata)
    view.device_properties = copy.deepcopy(trace.device_properties)
    view.derived = Derived()
    return view


# -- a user's rules in other processes -----------------------------------------------------------------------


@dataclass(frozen=True)
class Shipped:
    """A configuration's user rules as another process gets them (:func:`ship`): each pickled by reference (its
    module and qualified name, or an instance of an importable class) with its id, and this process's import path, so
    that a rule importable here is importable there. :meth:`resolve` reads them back without failing a file."""

    rules: tuple[tuple[str, bytes], ...]
    path: tuple[str, ...]

    def resolve(self) -> tuple[tuple[Any, ...], list[tuple[str, BaseException]]]:
        """The rules, imported here (once per process); one failure per rule that cannot be."""
        for entry in self.path:
            if entry not in sys.path:
                sys.path.append(entry)
        found: list[Any] = []
        failures: list[tuple[str, BaseException]] = []
        for rule_id, data in self.rules:
            fn = _RESOLVED.get(data)
            with _guard.rule(failures, rule_id, _not_imported):
                found.append(fn if fn is not None else _resolved(data))
        return tuple(found), failures


#: Rules a worker read back, by their pickled bytes: each is one object per process (its time-out is remembered).
_RESOLVED: dict[bytes, Any] = {}


def _resolved(data: bytes) -> Any:
    fn = _RESOLVED[data] = pickle.loads(data)
    return fn


def _not_imported(e: Exception) -> RuleError:
    return RuleError(f"not run: cannot be imported in this process: {type(e).__name__}: {e}")


def ship(rules: Iterable[Any]) -> Shipped | None:
    """``rules`` as another process can import them, or None when one cannot be: a local function (made by a
    factory), a lambda, anything defined in ``__main__`` (a script: importing it elsewhere would run it again), a
    module not on the import path. Such rules are analyzed in this process (:func:`autoprof.analysis.engine.iter_files`)."""
    shipped = []
    for fn in rules:
        data = _by_reference(fn)
        if data is None:
            return None
        shipped.append((_label(fn), data))
    # this process's import path as another process reads it ('' is this process's working directory)
    path = tuple(dict.fromkeys(os.path.abspath(entry or os.curdir) for entry in sys.path if isinstance(entry, str)))
    return Shipped(tuple(shipped), path)


def _by_reference(fn: Any) -> bytes | None:
    """``fn`` pickled by reference (:class:`_ByReference`), or None where another process could not import it."""
    buf = io.BytesIO()
    with _guard.quiet("rule.not_shippable"):
        _ByReference(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
        return buf.getvalue()
    return None


class _ByReference(pickle.Pickler):
    """A pickler that refuses what another process could not import: a function or class defined in ``__main__``,
    inside a function (``<locals>``) or as a lambda, or in a module that this process's import path does not find."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
            module = getattr(obj, "__module__", None)
            qualname = getattr(obj, "__qualname__", "")
            if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname or not _importable(module):
                raise pickle.PicklingError(f"{module}.{qualname} cannot be imported by another process")
        return NotImplemented


_IMPORTABLE: dict[str, bool] = {}


def _importable(module: str) -> bool:
    """Whether another interpreter with this import path imports ``module`` as this one did (not ``__main__``, not a
    module loaded from a file outside the path)."""
    known = _IMPORTABLE.get(module)
    if known is None:
        known = _IMPORTABLE[module] = _finds(module)
    return known


def _finds(module: str) -> bool:
    if module == "__main__" or module.startswith("__main__."):
        return False
    top = module.partition(".")[0]
    loaded = sys.modules.get(top)
    spec = getattr(loaded, "__spec__", None)
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen") or top in sys.builtin_module_names:
        return True
    found = None
    with _guard.quiet("rule.import_probe"):
        found = importlib.machinery.PathFinder.find_spec(top, sys.path)
    if found is None:
        return False
    if spec.origin is not None:
        return bool(found.origin == spec.origin)
    return list(found.submodule_search_locations or ()) == list(spec.submodule_search_locations or ())  # namespace package
