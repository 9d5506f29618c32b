"""`autoprof analyze` as a subprocess: table, --json, exit codes, stderr lines."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, shared_trace, validate_record

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "autoprof", *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_table_for_a_real_trace() -> None:
    p = shared_trace("hta/a100_rank3_of8_train.json.gz")
    out = cli("analyze", str(p))
    assert out.returncode == 0, out.stderr
    assert "rank 3 of 8" in out.stdout and "steps 1009–1014" in out.stdout
    assert "bound_regime" in out.stdout and "mixed: device-bound" in out.stdout  # no bound of its work leads
    assert "→ " in out.stdout  # advice lines
    assert "\033[" not in out.stdout  # no colour when not a terminal
    assert "Traceback" not in out.stderr


def test_json_records_validate_against_the_schema() -> None:
    p = shared_trace("hta/a100_rank0_of2_convnet.json.gz")
    out = cli("analyze", "--json", str(p))
    assert out.returncode == 0, out.stderr
    recs = [json.loads(line) for line in out.stdout.splitlines()]
    assert recs
    for r in recs:
        validate_record(r)
        assert r["source"] == str(p) and r["rank"] == 0 and r["world_size"] == 2
    regime = next(r for r in recs if r.get("rule") == "bound_regime")
    assert regime["verdict"] == "overhead-bound"


def test_fail_on_sets_the_exit_status() -> None:
    p = str(shared_trace("hta/a100_triton_compiled_tiny.json.gz"))
    assert cli("analyze", p, "--fail-on", "warning").returncode == 1  # compile overhead is a warning
    assert cli("analyze", p, "--fail-on", "critical").returncode == 0
    assert cli("analyze", p).returncode == 0


def test_directory_of_per_rank_traces(tmp_path: Path) -> None:
    for name in ("a100_rank3_of8_train.json.gz", "a100_triton_compiled_tiny.json.gz"):
        (tmp_path / name).write_bytes(shared_trace(f"hta/{name}").read_bytes())
    out = cli("analyze", str(tmp_path))
    assert out.returncode == 0, out.stderr
    # grouped by rank: rank 0 first
    assert out.stdout.index("rank 0 of 1") < out.stdout.index("rank 3 of 8")


@pytest.mark.parametrize(
    "setup,problem",
    [
        ("missing", "no such file or directory"),
        ("emptydir", "no trace files"),
        ("empty", "empty file"),
        ("truncgz", "corrupt or truncated gzip"),
        ("truncjson", "truncated JSON"),
        ("notatrace", "no 'traceEvents'"),
        ("wrongtypes", "'traceEvents' is not a list"),
        ("nots", "has no 'ts'"),
    ],
)
def test_bad_input_one_clear_line_exit_2(tmp_path: Path, setup: str, problem: str) -> None:
    p = tmp_path / "bad.json"
    if setup == "missing":
        p = tmp_path / "nope.json.gz"
    elif setup == "emptydir":
        p = tmp_path / "d"
        p.mkdir()
    elif setup == "empty":
        p.write_text("")
    elif setup == "truncgz":
        p = tmp_path / "bad.json.gz"
        p.write_bytes(gzip.compress(b'{"traceEvents": []}' * 50)[:30])
    elif setup == "truncjson":
        p.write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    elif setup == "notatrace":
        p.write_text('{"hello": "world"}')
    elif setup == "wrongtypes":
        p.write_text('{"traceEvents": "nope"}')
    elif setup == "nots":
        p.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 3}]}')
    out = cli("analyze", str(p))
    assert out.returncode == 2
    lines = [x for x in out.stderr.splitlines() if x.startswith("autoprof:")]
    assert len(lines) == 1 and str(p) in lines[0] and problem in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_one_bad_file_among_good_ones(tmp_path: Path) -> None:
    good = shared_trace("hta/a100_triton_compiled_tiny.json.gz")
    bad = tmp_path / "broken.json"
    bad.write_text("{")
    out = cli("analyze", str(good), str(bad), "--json")
    assert out.returncode == 2
    assert any(json.loads(x).get("rule") == "compile_overhead" for x in out.stdout.splitlines())  # good one analyzed
    assert f"autoprof: {bad}: truncated JSON" in out.stderr


def test_usage_errors_exit_2() -> None:
    assert cli().returncode == 2
    assert cli("analyze").returncode == 2
    assert cli("frobnicate").returncode == 2
    assert cli("analyze", "--fail-on", "loud", "x.json").returncode == 2


def test_workers_option_same_records_and_bad_values(tmp_path: Path) -> None:
    p = shared_trace("hta/a100_rank0_of2_convnet.json.gz")
    runs = [cli("analyze", "--json", "--workers", w, str(p)) for w in ("0", "3")]
    assert [r.returncode for r in runs] == [0, 0]
    strip = [[{k: v for k, v in json.loads(line).items() if k not in ("timestamp", "pid")} for line in r.stdout.splitlines()] for r in runs]
    assert strip[0] == strip[1] and strip[0]
    for bad in ("-1", "many"):
        out = cli("analyze", "--workers", bad, str(p))
        assert out.returncode == 2 and "--workers" in out.stderr and "Traceback" not in out.stderr


def test_python_api_analyze() -> None:
    import autoprof

    fs = autoprof.analyze(shared_trace("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz"))
    assert {f.rule: f.verdict for f in fs}["bound_regime"] == "input-bound"
    one = autoprof.analyze(shared_trace("kineto/v100_resnet50_dataloader_workers0_2021schema.json.gz"), workers=0)
    assert [f.to_record() for f in one] == [f.to_record() for f in fs]
    with pytest.raises(autoprof.TraceError, match="no such file"):
        autoprof.analyze("/nonexistent/trace.json")


def test_progress_note_only_when_stderr_is_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import pty

    from autoprof import cli as cli_mod

    n = 200_000
    ev = ",".join(f'{{"ph":"X","cat":"cpu_op","name":"aten::op{i % 7}","pid":1,"tid":1,"ts":{i * 2},"dur":1}}' for i in range(n))
    big = tmp_path / "big.json"
    big.write_text('{"traceEvents":[' + ev + "]}")
    # A real pseudo-terminal as stderr; the note's delay shortened so that this load outlasts it.
    master, slave = pty.openpty()
    term = io.TextIOWrapper(io.FileIO(slave, "w"), encoding="utf-8", write_through=True)
    monkeypatch.setattr(cli_mod, "PROGRESS_AFTER_S", 0.01)
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert term.isatty()
    assert cli_mod.main(["analyze", "--workers", "0", str(big)]) == 0
    term.close()
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert "autoprof: loading" in text and str(big) in text and text.endswith("\r\x1b[K")  # shown, then cleared
    # not a terminal (a real process, the real delay): no progress note at all
    out = cli("analyze", str(big))
    assert out.returncode == 0 and "loading" not in out.stderr
