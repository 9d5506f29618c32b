"""The measurement layer (``autoprof.measure``): what the rules, the analysis and the renderers read, below the
rules and above the trace model, which keeps only what loading needs."""

from __future__ import annotations

import importlib
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoprof.measure import ops, peaks, views
from autoprof.rules import _common
from autoprof.trace import model

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

FAMILIES = ("MATMUL_OPS", "ELEMENTWISE_OPS", "REDUCTION_OPS", "GATHER_OPS", "SORT_OPS", "COPY_OPS", "LOSS_OPS", "CONV_OPS")


def test_the_loaders_keep_the_shapes_of_exactly_the_ops_of_a_family() -> None:
    assert model.SHAPED_OPS == ops.SHAPED  # an op added to a family and not to the loaders' list would have no shapes
    assert model.ARG_OPS == ops.CONV_OPS  # the convolutions' recorded arguments are kept
    assert "aten::mm" in ops.MATMUL_OPS and "aten::conv2d" in ops.CONV_OPS and "aten::mm" not in ops.CONV_OPS


def test_the_trace_model_knows_no_op_family() -> None:
    assert [name for name in FAMILIES if hasattr(model, name)] == []
    assert all(isinstance(getattr(ops, name), frozenset) and getattr(ops, name) for name in FAMILIES)


def test_autoprof_peaks_is_the_measure_layers_peaks() -> None:
    with warnings.catch_warnings():  # its DeprecationWarning: tests/test_moved.py, in a fresh interpreter
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("autoprof.peaks")
    assert old is peaks and old.peak_for is peaks.peak_for


def test_a_user_rule_still_finds_the_helpers_it_was_told_of_in_rules_common() -> None:
    from autoprof.measure import units, views

    assert (_common.view, _common.merge, _common.total) == (views.view, views.merge, views.total)
    assert (_common.share, _common.us, _common.duration) == (units.share, units.us, units.duration)


# -- interval arithmetic: the plain definitions it must agree with ---------------------------------------------------


def _covered(iv: list[tuple[int, int]]) -> set[int]:
    """The unit cells [t, t + 1) an interval list covers: what a union or a difference means, cell by cell."""
    return {t for s, e in iv for t in range(s, e)}


_spans = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)).map(lambda p: (p[0], p[0] + p[1])), max_size=25)


@settings(max_examples=400, deadline=None)
@given(iv=_spans)
def test_merge_is_the_sorted_disjoint_union(iv: list[tuple[int, int]]) -> None:
    out = views.merge(iv)
    assert _covered(out) == _covered(iv)
    assert all(s < e or (s == e and (s, e) in iv) for s, e in out)
    assert all(a[1] < b[0] for a, b in zip(out, out[1:]))  # sorted, apart (touching spans are joined)
    assert views.merge(out) == out


@settings(max_examples=400, deadline=None)
@given(a=_spans, b=_spans)
def test_subtract_leaves_what_a_covers_and_b_does_not(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ma, mb = views.merge(a), views.merge(b)
    out = views.subtract(ma, mb)
    assert _covered(out) == _covered(ma) - _covered(mb)
    assert all(s < e for s, e in out) and out == sorted(out)
