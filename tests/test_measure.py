"""The measurement layer (``autoprof.measure``): what the rules, the analysis and the renderers read, below the
rules and above the trace model, which keeps only what loading needs."""

from __future__ import annotations

import importlib
import warnings

import pytest

from autoprof.measure import ops, peaks
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
