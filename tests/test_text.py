"""The faces a person meets: records as text on a terminal (a real pty), JSON lines everywhere else, the summary at the
end of a run (normal, Ctrl-C, an exception), and ``autoprof show`` on a sink several runs and ranks appended to."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, validate_record

import autoprof
from autoprof.config import ConfigError, from_env
from autoprof.render import emit, text
from autoprof.render.summary import Tally

ANSI = "\x1b["
SCRIPT = """
import sys, torch, autoprof
x, w, b = torch.randn(256, 16), torch.randn(16, 16), torch.randn(16)

@autoprof(name="train", skip_first=0, wait=0, warmup=1, active=2, repeat=REPEAT)
def step():
    return torch.add(torch.matmul(x, w), b)

for _ in range(3 * REPEAT):
    step()
autoprof.flush()
print("the script's own output")
ENDING
"""
ENDINGS = {
    "normal": "",
    "exception": "raise ValueError('the script failed')",
    "ctrl-c": "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_") and k not in ("NO_COLOR", "TORCHELASTIC_RUN_ID")}
    env.update(PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", TERM="xterm")
    env.update(extra)
    return env


def _script(tmp_path: Path, ending: str = "normal", repeat: int = 1, prelude: str = "") -> Path:
    path = tmp_path / "train.py"
    path.write_text(prelude + SCRIPT.replace("REPEAT", str(repeat)).replace("ENDING", ENDINGS[ending]))
    return path


def _on_a_terminal(script: Path, **env: str) -> tuple[int, str, str]:
    """Run ``script`` with its stderr on a pseudo-terminal (what a person sees) and its stdout on a pipe: the exit
    status, the terminal's text, stdout."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=_env(**env), cwd=script.parent
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child's side closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n"), out.decode()


def _piped(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(**env), timeout=300, cwd=script.parent)


# -- text where a person reads ---------------------------------------------------------------------------------------


def test_a_terminal_reads_text_with_colour_the_verdict_first(tmp_path: Path) -> None:
    rc, tty, out = _on_a_terminal(_script(tmp_path))
    assert rc == 0, tty
    assert out == "the script's own output\n"  # stdout is the script's alone
    lines = [line for line in tty.splitlines() if line.strip()]
    assert not [line for line in lines if line.lstrip().startswith("{")], tty  # no JSON line on the terminal
    plain = [_strip(line) for line in lines]
    window = next(line for line in plain if "train w0" in line)
    verdict = window.split("train w0: ", 1)[1].split(" (")[0]  # the verdict first, then the steps
    assert verdict in ("overhead-bound", "compute-bound", "memory-bound", "mixed", "input-bound", "sync-bound"), window
    assert any("shares of the window: input" in line and "op work" in line for line in plain), tty
    assert any(line.strip().startswith("→ ") for line in plain), tty  # the advice
    assert ANSI in tty  # colour: a terminal, NO_COLOR unset
    assert max(len(line) for line in plain if "train w0" in line) < 200  # a short line, not a 1-4 KB record


def test_no_color_turns_the_colour_off_and_keeps_the_text(tmp_path: Path) -> None:
    rc, tty, _ = _on_a_terminal(_script(tmp_path), NO_COLOR="1")
    assert rc == 0, tty
    assert ANSI not in tty
    assert "train w0: " in tty and "autoprof summary" in tty


def test_format_json_on_a_terminal_and_console_on_a_pipe(tmp_path: Path) -> None:
    script = _script(tmp_path)
    rc, tty, _ = _on_a_terminal(script, AUTOPROF_FORMAT="json")
    assert rc == 0, tty
    records = [json.loads(line) for line in tty.splitlines() if line.startswith("{")]
    assert records[0]["event"] == "autoprof.run" and records[-1]["event"] == "autoprof.summary"
    assert "autoprof summary" not in tty  # asked for JSON: no text anywhere
    piped = _piped(script, AUTOPROF_FORMAT="console")
    assert piped.returncode == 0, piped.stderr
    assert "train w0: " in piped.stderr and "autoprof summary" in piped.stderr and ANSI not in piped.stderr


def test_a_pipe_reads_exactly_the_json_lines_it_always_did(tmp_path: Path) -> None:
    run = _piped(_script(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is a record: no text on a pipe
    for line, rec in zip(lines, records):
        validate_record(rec)
        assert emit.line(rec) == line  # written by the one JSON writer, byte for byte
    events = [r["event"] for r in records]
    assert events[0] == "autoprof.run" and events[-1] == "autoprof.summary"
    assert events[1:-1] == ["autoprof.window"] + ["autoprof.finding"] * (len(events) - 3)
    window = records[1]
    # the window record's keys, in their order, as before this change (the new records are new lines, not new keys)
    assert list(window)[:12] == ["event", "schema_version", "timestamp", "level", "target", "window", "rank", "local_rank"] + [
        "world_size",
        "pid",
        "host",
        "source",
    ]
    assert "run_id" not in window


# -- the summary at the end of a run ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["normal", "exception", "ctrl-c"])
def test_the_summary_ends_every_run_on_a_terminal(tmp_path: Path, ending: str) -> None:
    rc, tty, _ = _on_a_terminal(_script(tmp_path, ending), NO_COLOR="1")
    summary = tty[tty.index("autoprof summary") :]
    assert "train (1 window(s); the last: window 0, steps" in summary, tty
    for label in ("verdict", "why", "next", "records   stderr"):
        assert f"  {label}" in summary or label in summary, (label, summary)
    why = next(line for line in summary.splitlines() if line.strip().startswith("why"))
    assert why.strip().split()[-3:] == ["of", "the", "window"] and "%" in why, why  # the leading share, with its number
    if ending == "normal":
        assert rc == 0 and "the run ended" not in summary
    elif ending == "exception":
        assert rc == 1  # as without autoprof
        assert "Traceback" in tty and "ValueError: the script failed" in tty  # the user's traceback, untouched
        assert "the run ended by an exception (ValueError)" in summary
    else:
        assert rc in (-2, 130), rc  # a Ctrl-C ends it as it would without autoprof
        assert "KeyboardInterrupt" in tty and "the run ended interrupted (KeyboardInterrupt)" in summary


def test_the_summary_record_in_a_sink_and_its_text_on_the_terminal(tmp_path: Path) -> None:
    sink = tmp_path / "records.jsonl"
    trace_dir = tmp_path / "traces"
    rc, tty, _ = _on_a_terminal(_script(tmp_path, "exception"), NO_COLOR="1", AUTOPROF_LOG=str(sink), AUTOPROF_TRACE_DIR=str(trace_dir))
    assert rc == 1
    records = [json.loads(line) for line in sink.read_text().splitlines()]
    for r in records:
        validate_record(r)
    summary = records[-1]
    assert summary["event"] == "autoprof.summary" and records[0]["event"] == "autoprof.run"
    assert summary["run_id"] == records[0]["run_id"] and summary["ended"] == "by an exception (ValueError)"
    assert summary["records"] == str(sink) and summary["trace_dir"] == str(trace_dir) and summary["traces_kept"] == 1
    (target,) = summary["targets"]
    finding = {r["rule"]: r for r in records if r["event"] == "autoprof.finding"}
    assert target["verdict"] == finding["bound_regime"]["verdict"] and target["next"] == finding["bound_regime"]["advice"]
    assert target["why"]["share"] in ("input", "syncs", "collectives", "overhead", "op work")
    assert target["trace_path"] and Path(target["trace_path"]).parent == trace_dir
    # the records went to the file; the person at the terminal still reads the summary, and where things went
    assert not [line for line in tty.splitlines() if line.startswith("{")]
    assert "autoprof summary" in tty and f"records   {sink}" in tty and f"traces    {trace_dir} (1 kept)" in tty


def test_the_tally_keeps_the_last_window_and_the_leading_share() -> None:
    tally = Tally()

    def finding(window: int, rule: str, severity: str, **evidence: float) -> dict[str, Any]:
        return {"event": "autoprof.finding", "target": "t", "window": window, "rule": rule, "verdict": f"{rule}-v"} | {
            "severity": severity,
            "message": f"{rule} in {window}",
            "advice": f"fix {rule}",
            "evidence": evidence,
        }

    tally.observe({"event": "autoprof.run", "target": None})
    assert not tally.seen  # the run record alone is no reason for a summary
    tally.observe({"event": "autoprof.window", "target": "t", "window": 0, "steps": [1, 2], "regime": {"verdict": "old"}})
    tally.observe(finding(0, "unfused_bias_add", "warning"))
    tally.observe({"event": "autoprof.window", "target": "t", "window": 1, "steps": [5, 6], "regime": {"verdict": "input-bound"}})
    tally.observe(finding(1, "bound_regime", "warning", input_share=0.76, overhead_share=0.2, work_share=0.04))
    tally.observe(finding(1, "roofline", "info"))
    tally.observe(finding(1, "device_idle_gaps", "critical"))
    tally.observe(finding(0, "late_for_window_0", "critical"))  # an older window's: not the last window's story
    tally.observe({"event": "autoprof.warning", "target": None, "reason": "x", "message": "m"})
    tally.observe({"event": "autoprof.warning", "target": "never", "reason": "no_window", "message": "never recorded"})
    fields = tally.fields()
    t, never = fields["targets"]
    assert t["verdict"] == "bound_regime-v" and t["why"] == {"share": "input", "value": 0.76} and t["next"] == "fix bound_regime"
    assert [f["rule"] for f in t["findings"]] == ["device_idle_gaps", "roofline"]  # the most severe first, regime apart
    assert t["windows"] == 2 and t["window"] == 1 and t["steps"] == [5, 6]
    assert never["windows"] == 0 and never["findings"][0]["message"] == "never recorded" and never["warnings"] == 1
    assert fields["warnings"] == 1 and fields["errors"] == 0
    block = "\n".join(text.summary_lines({"event": "autoprof.summary", **fields, "records": "stderr"}))
    assert "why       input 76% of the window" in block and "next      fix bound_regime" in block
    assert "never (no window recorded)" in block


# -- the option ---------------------------------------------------------------------------------------------------------


def test_format_is_an_option_with_its_environment_variable() -> None:
    assert autoprof.configure(format="json").format == "json"
    with pytest.raises(ConfigError, match=r"^format must be 'auto', 'json' or 'console', not 'xml'$"):
        autoprof.configure(format="xml")
    assert from_env({"AUTOPROF_FORMAT": " Console "}).format == "console"
    with pytest.warns(RuntimeWarning, match="AUTOPROF_FORMAT='text' is rejected"):
        assert from_env({"AUTOPROF_FORMAT": "text"}).format == "auto"


# -- autoprof show -------------------------------------------------------------------------------------------------------


def _show(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autoprof", "show", *args], capture_output=True, text=True, env=_env(), timeout=120, input=stdin
    )


@pytest.fixture(scope="module")
def shared_sink(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One sink that three processes appended to: ranks 0 and 1 of a torchrun job (two windows each), then a rerun."""
    tmp = tmp_path_factory.mktemp("sink")
    sink = tmp / "records.jsonl"
    script = _script(tmp, repeat=2)
    job = dict(AUTOPROF_LOG=str(sink), TORCHELASTIC_RUN_ID="job-1", WORLD_SIZE="2")
    for rank in ("0", "1"):
        run = _piped(script, RANK=rank, LOCAL_RANK=rank, **job)
        assert run.returncode == 0, run.stderr
    rerun = _piped(_script(tmp), AUTOPROF_LOG=str(sink))
    assert rerun.returncode == 0, rerun.stderr
    return sink


def test_show_reads_a_sink_apart_by_run_rank_target_and_window(shared_sink: Path) -> None:
    records = [json.loads(line) for line in shared_sink.read_text().splitlines()]
    runs = [r for r in records if r["event"] == "autoprof.run"]
    assert [r["run_id"] for r in runs][:2] == ["job-1", "job-1"] and runs[2]["run_id"] != "job-1"
    shown = _show(str(shared_sink), "--color", "never")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    out = shown.stdout
    assert out.count("run job-1 · train.py · started ") == 1 and f"run {runs[2]['run_id']} · train.py" in out
    job, rerun = out.split(f"run {runs[2]['run_id']}")
    assert "rank 0 of 2" in job and "rank 1 of 2" in job and job.index("rank 0 of 2") < job.index("rank 1 of 2")
    rank0 = job[job.index("rank 0 of 2") : job.index("rank 1 of 2")]
    assert rank0.index("train w0 rank 0/2: ") < rank0.index("train w1 rank 0/2: ") < rank0.index("autoprof summary rank 0/2")
    assert "rank 0 of 1" in rerun and "train w0: " in rerun and "train w1" not in rerun
    assert ANSI not in out


def test_show_filters_by_rule_level_and_last_windows(shared_sink: Path) -> None:
    out = _show(str(shared_sink), "--rule", "bound_regime", "--color", "never").stdout
    findings = [line for line in out.splitlines() if line.strip().startswith("[")]
    assert findings and all(" bound_regime " in line for line in findings), out
    assert "    train w1\n" in out  # the window's own record filtered out: its header still says where
    last = _show(str(shared_sink), "--last", "1", "--color", "never").stdout
    job = last.split("run ")[1]
    assert "train w1 rank 0/2: " in job and "train w1 rank 1/2: " in job and "train w0" not in job  # each rank's last
    warned = _show(str(shared_sink), "--level", "warning", "--json")
    assert all(json.loads(line)["level"] in ("warning", "error", "critical") for line in warned.stdout.splitlines())


def test_show_json_passes_the_records_through_unchanged(shared_sink: Path) -> None:
    shown = _show(str(shared_sink), "--json")
    assert shown.returncode == 0 and shown.stdout == shared_sink.read_text()
    piped = _show("-", "--json", "--rule", "roofline", stdin=shared_sink.read_text())
    wanted = [line for line in shared_sink.read_text().splitlines() if json.loads(line).get("rule") == "roofline"]
    assert piped.stdout.splitlines() == wanted and wanted


def test_show_names_bad_input_in_one_line_and_prints_what_parsed(shared_sink: Path, tmp_path: Path) -> None:
    good = shared_sink.read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([good[0], "not json at all", good[1], '{"a": 1}', *good[2:5]]) + "\n")
    shown = _show(str(tmp_path / "missing.jsonl"), str(mixed), "--json")
    assert shown.returncode == 2
    assert shown.stdout.splitlines() == good[:5]  # every record that parsed, nothing lost
    errors = shown.stderr.splitlines()
    assert errors[0] == f"autoprof: {tmp_path / 'missing.jsonl'}: No such file or directory"
    assert errors[1].startswith(f"autoprof: {mixed}: line 2 is not JSON: ")
    assert errors[1].endswith("; line 4 is not an autoprof record (no autoprof.* event); 2 lines skipped")
    assert len(errors) == 2
    text_out = _show(str(mixed), str(tmp_path), "--color", "never")
    assert text_out.returncode == 2 and "train w0 rank 0/2: " in text_out.stdout
    assert f"autoprof: {tmp_path}: Is a directory" in text_out.stderr and "Traceback" not in text_out.stderr


def _strip(line: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", line)
