"""Whole-trace passes over a trace's columns done by numpy where it is installed; the callers' Python code is the
reference.

A trace's build sorts its host events per thread by (ts, -dur) and its device events by (ts, dur), permutes every
column into that order, links launches and indexes names; the rules then make passes over every host event (the
window's membership, top-level spans, totals, ancestors). In Python each is one boxed int per value (the build alone
0.83 s of a 1.09M-event file's 3.3 s here); numpy works over the columns' own buffers. numpy is no dependency of
autoprof (torch does not require it, but imports it where it is installed, so a live window finds it loaded): where
it cannot be imported, or a trace is small (``MIN_ROWS``), each caller runs its own Python code, which gives the same
result (``tests/test_columns.py`` compares each helper with the expression it stands for, and whole traces' findings).
A helper returns None where int64 could overflow (a time near its end, a sum past it): the caller's Python ints then
hold the values. ``ENABLED`` set to False makes every caller take the Python way.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

#: False: numpy is never used (the tests' way to run the pure-Python code where numpy is installed).
ENABLED = True
#: Below this many rows the conversions cost more than the sort saves.
MIN_ROWS = 2048

_np: Any = None
_tried = False


def numpy(rows: int) -> Any:
    """The numpy module for a pass over ``rows`` rows, or None where the Python way runs: fewer than :data:`MIN_ROWS`
    rows, ``ENABLED`` off, or numpy not importable (asked once per process)."""
    global _np, _tried
    if not ENABLED or rows < MIN_ROWS:
        return None
    if not _tried:
        _tried = True
        try:
            import numpy

            _np = numpy
        except ImportError:
            _np = None
    return _np


def view(np: Any, col: Any) -> Any:
    """A read-only numpy view of an integer array's buffer (signed, the array's own item size)."""
    return np.frombuffer(col, dtype=f"i{col.itemsize}")


def sorted_order(np: Any, keys: Sequence[Any]) -> Any:
    """The stable order of rows by ``keys`` (numpy arrays, the first the primary key, each ascending), or None where
    the rows are already in that order."""
    order = np.lexsort(tuple(reversed(keys)))  # lexsort's last key is its primary one; its sort is stable
    if (order[1:] > order[:-1]).all():
        return None
    return order


def host_order(np: Any, ts: array[int], dur: array[int], tid: array[int]) -> Any:
    """Host events' order: by thread, then start, then longest first (a parent before its children); None where
    the rows are already in it."""
    return sorted_order(np, (view(np, tid), view(np, ts), ~view(np, dur)))  # ~d = -d - 1: no overflow


def device_order(np: Any, ts: array[int], dur: array[int]) -> Any:
    """Device events' order: by start, then duration; None where the rows are already in it."""
    return sorted_order(np, (view(np, ts), view(np, dur)))


def permuted(np: Any, cols: Sequence[array[int]], order: Any) -> list[array[int]]:
    """Each of ``cols`` in ``order`` (new arrays of the same type codes)."""
    return [array(col.typecode, view(np, col).take(order).tobytes()) for col in cols]


def inverse(np: Any, order: Any) -> list[int]:
    """The inverse permutation of ``order``, as a list: old index -> new."""
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order), dtype=np.int64)
    return where.tolist()  # type: ignore[no-any-return]


def last_index_of(np: Any, corr: array[int], wanted: Any, lookup: array[int]) -> array[int]:
    """For each value of ``lookup``: the last row of ``corr`` among the rows ``wanted`` (a boolean mask) that holds that
    value, -1 where none does or the value is negative (``{corr[i]: i for wanted i}.get(c, -1)`` over ``lookup``)."""
    rows = np.flatnonzero(wanted)
    values = view(np, corr)[rows]
    by_value = np.argsort(values, kind="stable")  # rows of one value stay in index order: its last is the one kept
    values, rows = values[by_value], rows[by_value]
    last = np.ones(len(values), dtype=bool)
    last[:-1] = values[1:] != values[:-1]
    values, rows = values[last], rows[last]
    asked = view(np, lookup)
    out = np.full(len(asked), -1, dtype=f"i{array('l').itemsize}")
    if len(values):
        at = np.minimum(np.searchsorted(values, asked), len(values) - 1)
        hit = (asked >= 0) & (values[at] == asked)
        out[hit] = rows[at[hit]]
    return array("l", out.tobytes())


def rows_by_value(np: Any, col: array[int]) -> dict[int, list[int]]:
    """Each value of ``col`` -> the rows that hold it, in index order; the values in the order they first appear (as a
    dict filled by one pass over the column)."""
    values = view(np, col)
    if not len(values):
        return {}
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    bounds = np.r_[starts, len(order)].tolist()
    firsts = order[starts]  # each value's first row: the groups in the order their values first appear
    rows = order.tolist()
    keys = sorted_values[starts].tolist()
    out: dict[int, list[int]] = {}
    for g in np.argsort(firsts, kind="stable").tolist():
        out[keys[g]] = rows[bounds[g] : bounds[g + 1]]
    return out


INT64_MAX = (1 << 63) - 1


def ends_fit(start: Any, span: Any) -> bool:
    """Whether every ``start + span`` (numpy int64 arrays) is an int64: no negative span, no end past int64's largest
    (where one is not, the caller's Python ints hold the values)."""
    return not len(span) or not (span.min() < 0 or (start > INT64_MAX - span).any())


def sum_fits(values: Any) -> bool:
    """Whether numpy's int64 sum of any of ``values`` (a numpy int64 array) is exact: it cannot pass int64."""
    return not len(values) or max(abs(int(values.min())), abs(int(values.max()))) * len(values) <= INT64_MAX


def ends(np: Any, ts: array[int], dur: array[int]) -> array[int] | None:
    """Each row's ``ts + dur`` as an int64 array; None where a sum could pass int64 (:func:`ends_fit`)."""
    start, span = view(np, ts), view(np, dur)
    if not ends_fit(start, span):
        return None
    return array("q", (start + span).tobytes())


def self_times(np: Any, dur: array[int], children: list[int]) -> array[int] | None:
    """Each row's duration less its children's (``children``), at least 0; None where a sum of children passes int64."""
    try:
        below = np.array(children, dtype=np.int64)
    except OverflowError:
        return None
    span = view(np, dur).astype(np.int64)
    return array("q", np.maximum(span - below, 0).tobytes())


def at_least(np: Any, col: array[int], floor: int) -> list[bool]:
    """``[v >= floor for v in col]``."""
    return (view(np, col) >= floor).tolist()  # type: ignore[no-any-return]


def first_launch_id(np: Any, corr: array[int], step: array[int], cat: array[int], launch_codes: Any) -> int:
    """The least positive ``corr`` of the rows in a step (``step`` >= 0) whose category is one of ``launch_codes``;
    0 where there is none."""
    ids = view(np, corr)
    rows = (view(np, step) >= 0) & (ids > 0) & np.isin(view(np, cat), sorted(launch_codes))
    return int(ids[rows].min()) if rows.any() else 0


def top_level_spans(
    np: Any,
    ts: array[int],
    dur: array[int],
    cat: array[int],
    parent: array[int],
    inside: list[bool],
    codes: Any,
    rows: tuple[int, int] | None = None,
    names: array[int] | None = None,
    skipped: Any = (),
) -> list[tuple[int, int]] | None:
    """``(ts, ts + dur)`` of the rows ``inside`` whose category is one of ``codes`` and whose parent's is not (or that
    have none), of no name (``names``) in ``skipped``, among ``rows`` (``[lo, hi)``; default all), in row order; None
    where an end could pass int64 (the caller's Python ints hold it)."""
    lo, hi = rows if rows is not None else (0, len(ts))
    whole, up = view(np, cat), view(np, parent)[lo:hi]
    of_codes = np.isin(whole, sorted(codes))
    under = np.zeros(hi - lo, dtype=bool)
    has = up >= 0
    under[has] = of_codes[up[has]]
    picked = of_codes[lo:hi] & ~under & np.frombuffer(bytes(inside[lo:hi]), dtype=bool)
    if skipped and names is not None:
        picked &= ~np.isin(view(np, names)[lo:hi], sorted(skipped))
    start, span = view(np, ts)[lo:hi][picked], view(np, dur)[lo:hi][picked]
    if not ends_fit(start, span):
        return None
    return list(zip(start.tolist(), (start + span).tolist()))


def ancestors_mask(np: Any, parent: array[int], rows: Any) -> Any:
    """A boolean array: for each row, whether it is a proper ancestor (by ``parent``; -1: none) of any of ``rows``."""
    up = view(np, parent)
    marked = np.zeros(len(up), dtype=bool)
    level = up[np.asarray(rows, dtype=np.int64)]
    while True:
        level = level[level >= 0]
        level = level[~marked[level]]  # (an ancestor already marked has its own marked above it)
        if not len(level):
            return marked
        marked[level] = True
        level = up[level]


def total_of(np: Any, col: array[int], inside: list[bool]) -> int:
    """``sum(compress(col, inside))``, exact: numpy's int64 sum where it cannot overflow, else Python's."""
    values = view(np, col)[np.frombuffer(bytes(inside), dtype=bool)]
    if sum_fits(values):
        return int(values.sum(dtype=np.int64))
    return sum(values.tolist())


def totals_by_key(np: Any, keys: array[int], cat: array[int], code: int, values: array[int]) -> list[tuple[int, int, int]] | None:
    """For the rows whose ``cat`` is ``code``: each key's (key, sum of its ``values``, rows), in the order the keys first
    appear; None where a sum could pass int64 (the caller's Python ints hold it)."""
    rows = view(np, cat) == code
    ids, amounts = view(np, keys)[rows], view(np, values)[rows].astype(np.int64)
    if not len(ids):
        return []
    if not sum_fits(amounts):
        return None
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sums = np.add.reduceat(amounts[order], starts)
    counts = np.diff(np.r_[starts, len(ids)])
    first = np.argsort(order[starts], kind="stable")  # the keys in the order their first row comes
    return list(zip(ids[starts][first].tolist(), sums[first].tolist(), counts[first].tolist()))
