"""Section times in the window record, live and offline (the same table from the same trace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from test_cli import cli

import autoprof
from autoprof.analysis.sections import section_times
from autoprof.trace import chrome

FAST = dict(skip_first=0, wait=0, warmup=1, active=3)


def test_live_window_record_carries_section_times_and_offline_agrees(records: Any, tmp_path: Path) -> None:
    autoprof.configure(trace_dir=str(tmp_path))
    x = torch.randn(256, 256)

    @autoprof(name="sectioned", **FAST)
    def step() -> torch.Tensor:
        with autoprof.section("attn"):
            y = x @ x
            with autoprof.section("attn"):  # nested in itself: counted once, at the outermost call
                y = y.relu()
        with autoprof.section("mlp"):
            for _ in range(3):
                with autoprof.section("mlp.inner"):
                    y = y + 1
        return y

    for _ in range(4):
        step()
    win = records.of("autoprof.window", target="sectioned")[0]
    rows = {r["name"]: r for r in win["sections"]}
    assert set(rows) == {"attn", "mlp", "mlp.inner"}
    assert rows["attn"]["calls"] == 6 and rows["mlp"]["calls"] == 3 and rows["mlp.inner"]["calls"] == 9
    for r in rows.values():
        assert 0 < r["step_share"] < 1 and r["total_ms"] > 0
        assert abs(r["per_step_ms"] * 3 - r["total_ms"]) < 1e-3
    assert rows["mlp.inner"]["total_ms"] <= rows["mlp"]["total_ms"]
    out = cli("analyze", "--json", win["trace_path"])
    assert out.returncode == 0, out.stderr
    offline = next(json.loads(x) for x in out.stdout.splitlines() if json.loads(x)["event"] == "autoprof.window")
    assert offline["sections"] == win["sections"]
    assert offline["steps"] == win["steps"] and offline["stall_ms"] == 0.0


def test_sections_of_a_trace_autoprof_did_not_record_are_the_programs_own_annotations() -> None:
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": n, "ts": ts, "dur": d, "pid": 1, "tid": 1}
        for n, ts, d in [
            ("ProfilerStep#4", 0, 100),
            ("## forward ##", 5, 40),
            ("## backward ##", 50, 45),
            ("Optimizer.step#SGD.step", 96, 3),
            ("nccl:all_reduce", 60, 10),
            ("ProfilerStep#5", 100, 100),
            ("## forward ##", 105, 40),
            ("## backward ##", 150, 45),
        ]
    ]
    trace = chrome.from_document({"traceEvents": ev})
    rows = section_times(trace)
    assert [(r["name"], r["calls"], r["total_ms"]) for r in rows] == [("## backward ##", 2, 0.09), ("## forward ##", 2, 0.08)]
    steps_ns = sum(s.dur_ns for s in trace.steps)  # the last step is cut at the last activity (195 µs)
    assert rows[0]["step_share"] == round(90_000 / steps_ns, 4) and rows[0]["per_step_ms"] == 0.045


def test_no_sections_no_rows() -> None:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]
    assert section_times(chrome.from_document({"traceEvents": ev})) == []
