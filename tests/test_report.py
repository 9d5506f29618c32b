"""``autoprof report`` (issue 25): what the page shows of a trace (synthetic traces, exact figures), then real pages
for shared traces and a live window, opened in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import html
import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, shared_trace
from synth import Synth, cpu_rank_doc, prefetching_trainer_gpu

import autoprof
from autoprof.analysis import engine
from autoprof.analysis.page import Page, _joined, _thinned
from autoprof.analysis.sections import section_times, section_tree
from autoprof.render import htmlreport
from autoprof.rules._common import view

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

# -- what the page shows: synthetic traces ----------------------------------------------------------------


def _cpu_steps() -> Synth:
    """Two CPU steps of 10 ms: 3 ms waiting for data, 1 ms in a 512² matmul, the rest the host's."""
    s = Synth(gpu=None)
    for k in range(2):
        t0 = k * 10_000
        s.step(k, t0, 10_000)
        s.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 100, 3_000)
        s.op("aten::mm", t0 + 4_000, 1_000, dims=[[512, 512], [512, 512]], types=["float", "float"])
    s.meta.update(autoprof_cpu_peak_flops=1e11, autoprof_cpu_peak_bytes_per_s=2e10)
    return s


def test_a_cpu_steps_time_split_by_where_it_went() -> None:
    trace = _cpu_steps().trace()
    findings, _ = autoprof.analysis.engine.analyze_trace(trace, None)
    rep = engine.page_of(trace, findings)
    assert [s["number"] for s in rep.breakdown] == [0, 1]
    parts = rep.breakdown[0]["parts_ms"]
    assert parts["input"] == pytest.approx(3.0)
    assert parts["sync"] == 0 and parts["communication"] == 0
    on_ops = parts["compute-bound ops"] + parts["memory-bound ops"] + parts["other op work"]
    assert on_ops == pytest.approx(1.0)
    assert parts["host overhead"] == pytest.approx(6.0)  # the rest of the 10 ms step
    assert sum(parts.values()) == pytest.approx(rep.breakdown[0]["wall_ms"])
    assert rep.strip == [] and not rep.on_device  # no device: no activity strip
    assert rep.top_ops[0]["name"] == "aten::mm"


def test_a_device_strip_labels_its_largest_gap_with_what_the_host_did() -> None:
    s = Synth()
    s.step(0, 0, 1_000)
    s.op("aten::mm", 10, 50, dims=[[1024, 1024], [1024, 1024]], types=["float", "float"])
    s.launch("sm80_gemm", 20, 100, 200)
    s.op("aten::nonzero", 400, 300)  # the host is busy here while the device idles
    s.launch("elementwise_kernel", 700, 800, 50)
    trace = s.trace()
    findings, _ = autoprof.analysis.engine.analyze_trace(trace, None)
    rep = engine.page_of(trace, findings)
    assert rep.on_device and rep.device == "A100 80GB SXM"
    (row,) = rep.strip
    assert row["busy"] == [[0.1, 0.3], [0.8, 0.85]]
    (gap,) = row["gaps"]
    assert gap["ms"] == pytest.approx(0.5) and gap["host"] == "aten::nonzero"
    assert rep.kernels[0]["name"] == "sm80_gemm" and rep.kernels[0]["calls"] == 1
    point = next(p for p in rep.roofline["ops"] if p["name"] == "aten::mm")  # type: ignore[index]
    assert point["bound"] == "compute" and point["intensity_flops_per_byte"] > 100


def _rank_file(tmp: Path, rank: int, wait_us: float) -> Path:
    path = tmp / f"rank{rank}.json"
    path.write_text(json.dumps(cpu_rank_doc(rank, 2, wait_us)))
    return path


def test_ranks_get_bars_with_the_straggler_marked(tmp_path: Path) -> None:
    _rank_file(tmp_path, 0, 8_000)  # waits for rank 1
    _rank_file(tmp_path, 1, 200)  # the straggler: it waits least
    reps = htmlreport.reports([tmp_path])
    stragglers = [f for r in reps for f in r.findings if f.rule == "straggler_ranks"]
    assert stragglers and stragglers[0].evidence["straggler_ranks"] == [1]
    go, _pio, _po = htmlreport._plotly()
    fig = htmlreport._ranks_figure(go, reps)
    assert fig is not None
    bars = fig.data[0]
    assert list(bars.x) == ["rank 0", "rank 1 (straggler)"]
    assert bars.marker.color[1] != bars.marker.color[0]
    waits = fig.data[1]
    assert waits.y[0] > waits.y[1]


def test_a_report_without_ranks_or_device_says_why_those_charts_are_missing(tmp_path: Path) -> None:
    trace_file = tmp_path / "cpu.json"
    trace_file.write_text(json.dumps({"traceEvents": _cpu_steps().events, **_cpu_steps().meta}))
    out = tmp_path / "r.html"
    autoprof.report(trace_file, out)
    page = out.read_text()
    assert "No device activity strip" in page
    assert "No per-rank chart" not in page  # one file: nothing to compare, nothing to say
    assert 'id="roofline0"' in page and 'id="steps0"' in page


# -- the command -------------------------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "autoprof", *args], capture_output=True, text=True, env={**e, **(env or {})}, timeout=300)


def test_bad_input_is_one_line_and_exit_2_and_the_good_files_are_still_on_the_page(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"traceEvents": _cpu_steps().events}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = cli("report", str(good), str(bad), "-o", str(tmp_path / "r.html"))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert any(line.startswith(f"autoprof: {bad}:") for line in lines) and "Traceback" not in out.stderr
    page = (tmp_path / "r.html").read_text()
    assert str(good) in page and str(bad) in page  # the unreadable one listed, with its error
    nothing = cli("report", str(bad), "-o", str(tmp_path / "none.html"))
    assert nothing.returncode == 2 and len(nothing.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "none.html").exists()


def test_without_plotly_the_command_names_the_extra(tmp_path: Path) -> None:
    code = "import sys; sys.modules['plotly'] = None; from autoprof.cli import main; raise SystemExit(main(sys.argv[1:]))"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"traceEvents": _cpu_steps().events}))
    e = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code, "report", str(good)], capture_output=True, text=True, env=e, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == "autoprof: autoprof report needs plotly, which is not installed: pip install 'autoprof[report]'"


# -- real pages in a real browser ----------------------------------------------------------------------------


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    assert found, "these tests open the page in a headless chromium: apt-get install chromium (.ci/run does)"
    return found


def _browse(page: Path, tmp: Path) -> tuple[str, list[str], Path]:
    """Open ``page`` with the network cut off: the DOM after its scripts ran, the console's messages, a screenshot.
    Asserts that the page asked for nothing off this machine (chromium's net log: requests made for a file://
    page; the browser's own background requests are made for no page)."""
    shot = tmp / "shot.png"
    netlog = tmp / "net.json"
    common = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # any request off this machine fails
        "--virtual-time-budget=10000",
        f"--user-data-dir={tmp / 'profile'}",
        "--window-size=1400,2400",
    ]
    dom = subprocess.run([*common, f"--log-net-log={netlog}", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    events = json.loads(netlog.read_text())["events"]
    asked = {
        e["params"]["url"]
        for e in events
        if isinstance(e.get("params"), dict) and "url" in e["params"] and "site=file://" in str(e["params"].get("site_for_cookies", ""))
    }
    assert not {url for url in asked if not url.startswith("file:")}, asked
    logged = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180
    )
    assert logged.returncode == 0, logged.stderr[-2000:]
    console = [line for line in logged.stderr.splitlines() if ":CONSOLE" in line]
    return dom.stdout, console, shot


def _png_colors(path: Path) -> int:
    """How many distinct byte values the screenshot's pixels hold (a blank page: one or two)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


def _no_external_reference(page: str) -> None:
    """No URL off this machine in the page's own markup, styles and scripts. The embedded plotly.js library (the
    first script) carries URL strings of its own (map tile attributions, its logo's link) for charts and options
    this page does not use; that nothing is requested is what the browser run with the network cut off shows."""
    library = re.search(r"<script>.*?</script>", page, flags=re.S)
    assert library is not None and "plotly.js" in library.group(0)[:2000]
    own = page[: library.start()] + page[library.end() :]
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", own, flags=re.I), re.findall(r"https?://[^\s\"']+", own)[:5]
    assert "@import" not in own


def test_the_browser_check_sees_a_page_that_asks_the_network(tmp_path: Path) -> None:
    page = tmp_path / "asks.html"
    page.write_text('<html><body><img src="https://example.com/x.png"><p>hello</p></body></html>')
    with pytest.raises(AssertionError, match=r"example\.com"):
        _browse(page, tmp_path)


@pytest.mark.slow
def test_pages_of_shared_gpu_traces_load_offline_in_a_browser_with_their_charts(tmp_path: Path) -> None:
    files = [shared_trace("h200/gpt2_train.chrome.json.gz"), shared_trace("h200/loader_slow.chrome.json.gz")]
    out = tmp_path / "gpu.html"
    assert cli("report", *map(str, files), "-o", str(out)).returncode == 0
    page = out.read_text()
    _no_external_reference(page)
    dom, console, shot = _browse(out, tmp_path)
    assert console == [], console
    for chart in ("roofline0", "steps0", "strip0", "roofline1", "steps1", "strip1"):
        # plotly drew it: the div holds its SVG, with marks in it
        div = dom[dom.index(f'id="{chart}"') :]
        div = div[: div.find('id="', 10)] if 'id="' in div[10:] else div
        assert 'class="main-svg"' in div, chart
    assert dom.count('class="point"') > 50  # roofline points and bars
    assert "overhead-bound" in dom and "input-bound" in dom  # the verdicts first
    assert _png_colors(shot) > 20


@pytest.mark.slow
def test_a_large_real_traces_page_stays_under_5_mb(tmp_path: Path) -> None:
    big = shared_trace("hta/a100_rank3_of8_train.json.gz")
    out = tmp_path / "big.html"
    assert cli("report", str(big), "-o", str(out)).returncode == 0
    size = out.stat().st_size
    assert size < 5_000_000, size


def test_a_strip_with_too_many_spans_closes_its_smallest_gaps() -> None:
    spans = [(0, 1), (2, 3), (10, 11), (11, 12), (20, 21)]
    assert _joined(spans, 3) == [(0, 3), (10, 12), (20, 21)]
    assert _joined(spans, 9) == spans


# -- sections, evidence, shares, roofs (issue 32) ---------------------------------------------------------------


def _sectioned() -> Synth:
    """Two CPU steps of 10 ms: 7 ms in the trainer's ``train_dataloader_next``, then ``forward`` (2 ms) with
    ``attn`` (1 ms) inside it and ``softmax`` (0.25 ms) inside that."""
    s = Synth(gpu=None)
    for k in range(2):
        t0 = k * 10_000
        s.step(k, t0, 10_000)
        s.x("user_annotation", "train_dataloader_next", t0 + 10, 7_000)
        s.x("user_annotation", "forward", t0 + 7_100, 2_000)
        s.x("user_annotation", "attn", t0 + 7_200, 1_000)
        s.x("user_annotation", "softmax", t0 + 7_300, 250)
        s.op("aten::mm", t0 + 7_600, 500, dims=[[512, 512], [512, 512]], types=["float", "float"])
    s.meta.update(autoprof_cpu_peak_flops=1e11, autoprof_cpu_peak_bytes_per_s=2e10)
    return s


def _page(tmp: Path, s: Synth) -> str:
    trace_file = tmp / "t.json"
    trace_file.write_text(json.dumps({"traceEvents": s.events, **s.meta}))
    out = tmp / "r.html"
    autoprof.report(trace_file, out)
    return out.read_text()


def _rows(page: str, kind: str) -> list[list[str]]:
    """The cells (text, tags stripped, unescaped) of each body row of the page's first table of class ``kind``."""
    table = re.search(rf'<table class="[^"]*\b{kind}\b[^"]*">(.*?)</table>', page, flags=re.S)
    assert table is not None, kind
    body = table.group(1).split("<tbody>")[1]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S) for row in body.split("</tr>") if "<td" in row]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in row] for row in cells]


def test_the_page_is_drawn_from_the_analyses_alone(tmp_path: Path) -> None:
    """The renderer reads each file's Analysis and nothing else: analyses that crossed a pickle (as a worker returns
    them, no trace with them) draw the same page; one without its page part is a line, not a guess."""
    trace_file = tmp_path / "t.json"
    s = _cpu_steps()
    trace_file.write_text(json.dumps({"traceEvents": s.events, **s.meta}))
    reps = htmlreport.reports([trace_file])
    assert reps[0].page is not None and reps[0].page.breakdown
    assert htmlreport.render(pickle.loads(pickle.dumps(reps))) == htmlreport.render(reps)
    (bare,) = engine.analyze_files([trace_file], jobs=1)  # no parts asked
    (row,) = _rows(htmlreport.render([bare]), "summary")
    assert row == [str(trace_file), f"{trace_file}: not read for the page"]


def test_the_live_side_writes_the_page_through_one_entry(tmp_path: Path) -> None:
    from autoprof.render import write_page

    trace_file = tmp_path / "t.json"
    s = _cpu_steps()
    trace_file.write_text(json.dumps({"traceEvents": s.events, **s.meta}))
    write_page([trace_file], tmp_path / "r.html")
    (row,) = _rows((tmp_path / "r.html").read_text(), "summary")
    assert row[0] == str(trace_file) and row[2] != "–"  # a regime verdict, drawn


def test_the_sections_are_on_the_page_as_a_tree_with_analyzes_figures(tmp_path: Path) -> None:
    s = _sectioned()
    page = _page(tmp_path, s)
    rows = _rows(page, "sections")
    assert [r[0] for r in rows] == ["train_dataloader_next", "forward", "└ attn", "└ softmax"]
    depths = re.findall(r'<tr class="depth\d" data-depth="(\d)">', page)
    assert depths == ["0", "0", "1", "2"]
    figures = {r["name"]: r for r in section_times(s.trace())}  # the same figures as analyze's table
    for row in rows:
        fig = figures[row[0].removeprefix("└ ")]
        assert row[1:] == [f"{fig['step_share']:.1%}", f"{fig['per_step_ms']:.3f}", str(fig["calls"])]
    assert rows[0][1:] == ["73.3%", "7.000", "2"]  # of the steps' 19.1 ms (the last cut at its last activity)
    tree = section_tree(s.trace())
    assert [(r["name"], r["parent"], r["depth"]) for r in tree] == [
        ("train_dataloader_next", None, 0),
        ("forward", None, 0),
        ("attn", "forward", 1),
        ("softmax", "attn", 2),
    ]


def test_sections_that_nest_both_ways_are_still_each_listed_once() -> None:
    s = Synth(gpu=None)
    s.step(0, 0, 10_000)
    s.x("user_annotation", "a", 10, 3_000).x("user_annotation", "b", 20, 1_000)  # b inside a
    s.x("user_annotation", "b", 4_000, 3_000).x("user_annotation", "a", 4_010, 2_000)  # a inside b
    tree = section_tree(s.trace())  # each runs mostly outside the other: two roots
    assert [(r["name"], r["parent"], r["depth"]) for r in tree] == [("a", None, 0), ("b", None, 0)]
    s.x("user_annotation", "a", 7_100, 2_800).x("user_annotation", "b", 7_200, 2_500)  # now b mostly inside a
    assert [(r["name"], r["parent"]) for r in section_tree(s.trace())] == [("a", None), ("b", "a")]


def test_the_regime_card_labels_its_evidence_in_units_and_keeps_the_raw_keys(tmp_path: Path) -> None:
    page = _page(tmp_path, _cpu_steps())
    card = re.search(r'<div class="regime">(.*?)</details>', page, flags=re.S)
    assert card is not None
    shown = re.search(r'<div class="evidence">(.*?)</div>', card.group(1), flags=re.S)
    assert shown is not None
    spans = re.findall(r'<span class="item" title="([^":]+): ([^"]+)">(.*?)</span>', shown.group(1))
    items = {t: html.unescape(re.sub(r"<[^>]+>", "", x)) for t, _meaning, x in spans}
    assert all(meaning.strip() and meaning != t for t, meaning, _ in spans)  # each key with what it means
    assert items["self_cpu_total_us"] == "Self CPU total 15 ms"  # 15000 µs
    assert items["input_share"] == "Input 40.0%"
    assert items["window_us"] == "Window 15 ms" and items["step_count"] == "Steps 2"
    assert "self_cpu_total_us" not in re.sub(r'title="[^"]+"', "", shown.group(1))  # raw keys only in titles...
    raw = [r[:2] for r in _rows(card.group(0) + "</table>", "evidence-raw")]
    assert ["self_cpu_total_us", "15000.0"] in raw and ["input_share", "0.4"] in raw  # ...and in the raw evidence
    assert ["cpu_to_device_ratio", "null"] in raw


def test_evidence_labels_fall_back_on_the_keys_unit_suffix() -> None:
    label, value = htmlreport.evidence_label, htmlreport.evidence_value
    assert (label("host_own_work_us"), value("host_own_work_us", 1618.226)) == ("Host own work", "1.618 ms")
    assert (label("gap_ns"), value("gap_ns", 2_500)) == ("Gap", "2.5 µs")
    assert (label("stall_wait_share"), value("stall_wait_share", 0.9729)) == ("Stall wait", "97.3%")  # not in the table
    assert label("idle_host_wait_share") == "Device idle, waiting for the host"  # in the table: plain words
    assert value("stall_ms", 2_500) == "2.5 s" and value("peak_flops_per_s", 1e11) == "100 GFLOP/s"
    assert label("op_call_count") == "Op call count" and value("method", "roofline") == "roofline"


def test_the_op_and_kernel_tables_give_each_ones_share_of_the_window(tmp_path: Path) -> None:
    ops = _rows(_page(tmp_path, _cpu_steps()), "ops")
    assert ops[0] == ["aten::mm", "2000.0", "13.3%", "2"]  # 2 ms of the steps' 15 ms (the last cut at its last op)
    s = Synth()
    s.step(0, 0, 1_000)
    s.op("aten::mm", 10, 50, dims=[[1024, 1024], [1024, 1024]], types=["float", "float"])
    s.launch("sm80_gemm", 20, 100, 250)
    s.launch("elementwise_kernel", 700, 800, 50)
    kernels = _rows(_page(tmp_path, s), "kernels")
    window = view(s.trace()).device_window_ns / 1e3
    assert kernels[0][:3] == ["sm80_gemm", "250.0", f"{250 / window:.1%}"]
    assert float(kernels[1][2].rstrip("%")) == pytest.approx(100 * 50 / window, abs=0.05)


def test_the_roofline_draws_the_roofs_of_the_dtypes_the_ops_used_and_says_when_points_sit_above(tmp_path: Path) -> None:
    s = _cpu_steps()  # an fp32 matmul at 268 GFLOP/s against a calibrated 100 GFLOP/s
    for k in range(2):  # and a few tiny fp64 scalar ops (an fp32 model's bookkeeping)
        s.op("aten::add", k * 10_000 + 6_000, 2, dims=[[1], [1], []], types=["double", "double", "Scalar"])
    trace = s.trace()
    findings, _ = autoprof.analysis.engine.analyze_trace(trace, None)
    rep = engine.page_of(trace, findings)
    assert rep.roofline is not None and {o["dtype"] for o in rep.roofline["ops"]} == {"fp32", "fp64"}
    assert [d for d, _ in htmlreport.roof_dtypes(rep.roofline["ops"])] == ["fp32"]
    go, _pio, _po = htmlreport._plotly()
    roofs = [t.name for t in htmlreport._roofline_figure(go, rep).data if t.mode == "lines"]
    assert roofs == ["roof fp32 (100% of op time)"]  # no fp64 roof for an fp32 model
    mm = next(o for o in rep.roofline["ops"] if o["name"] == "aten::mm")
    assert mm["above_peak"]
    page = _page(tmp_path, s)
    notes = [html.unescape(x) for x in re.findall(r'<p class="note roofline-note">(.*?)</p>', page)]
    assert any(n.startswith("1 op(s) in fp64 are plotted without their roof") for n in notes), notes
    above = [n for n in notes if "above the calibrated roof" in n]
    assert len(above) == 1 and above[0].startswith("1 op(s) plot above the calibrated roof: the calibration underestimates")


def test_a_mixed_precision_roofline_draws_each_dtypes_roof_and_a_datasheet_peak_says_why_points_sit_above() -> None:
    ops = [
        {"dtype": "bf16", "time_us": 60.0, "above_peak": False},
        {"dtype": "fp32", "time_us": 38.0, "above_peak": True},
        {"dtype": "fp64", "time_us": 2.0, "above_peak": False},
    ]
    assert htmlreport.roof_dtypes(ops) == [("bf16", 0.6), ("fp32", 0.38)]
    rep = Page(roofline={"peak": "H200 SXM", "source": "datasheet", "ops": ops})
    assert htmlreport.roofline_notes(rep) == [
        "1 op(s) in fp64 are plotted without their roof (under 5% of the op time each).",
        "1 op(s) plot above the roof: their data sat in caches the datasheet's memory bandwidth does not see."
        " Their fraction of the roofline is shown as 100%.",
    ]


# -- memory over the step (issue 36) ------------------------------------------------------------------------------

MIB = 1 << 20


def _memory_steps() -> Synth:
    """Three 1 ms steps on a GPU, each allocating on cuda:0 in aten::ones (big) and aten::mul (8 MiB), both freed
    before the step ends; step 1's aten::ones allocates the most (40 MiB, the others 16 MiB)."""
    s = Synth()
    s.meta["deviceProperties"] = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 80 << 30}]
    total = 0
    addr = 4096

    def mem(ts: float, nbytes: int, at: int) -> None:
        nonlocal total
        total += nbytes
        args = {"Device Type": 1, "Device Id": 0, "Addr": at, "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 0}
        s.events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args})

    for k in range(3):
        t0 = k * 1000
        s.step(k, t0, 1000)
        big = 40 * MIB if k == 1 else 16 * MIB
        s.op("aten::ones", t0 + 100, 100)
        mem(t0 + 120, big, addr)
        s.op("aten::mul", t0 + 300, 50)
        mem(t0 + 310, 8 * MIB, addr + 1)
        mem(t0 + 800, -8 * MIB, addr + 1)
        mem(t0 + 900, -big, addr)
        addr += 2
    return s


def test_memory_is_drawn_over_the_step_of_the_peak_with_the_holders_named(tmp_path: Path) -> None:
    s = _memory_steps()
    trace = s.trace()
    findings, _ = autoprof.analysis.engine.analyze_trace(trace, None)
    rep = engine.page_of(trace, findings)
    (m,) = rep.memory
    assert m["device"] == "cuda:0" and m["step"] == 1 and m["peak_bytes"] == 48 * MIB and m["step_ms"] == 1.0
    assert m["ms"] == [0.0, 0.12, 0.31, 0.8, 0.9, 1.0] and m["bytes"] == [0, 40 * MIB, 48 * MIB, 40 * MIB, 0, 0]
    assert m["peak_ms"] == 0.31
    assert m["holders"] == [{"op": "aten::ones", "bytes": 40 * MIB}, {"op": "aten::mul", "bytes": 8 * MIB}]
    page = _page(tmp_path, s)
    assert "<h3>Memory over the step that holds the peak</h3>" in page and 'id="memory0_0"' in page
    assert "cuda:0: step 1, peak 48 MiB" in page and "peak 48 MiB: aten::ones 40 MiB, aten::mul 8 MiB" in page


def test_a_trace_without_memory_events_has_no_memory_chart(tmp_path: Path) -> None:
    s = _cpu_steps()
    trace = s.trace()
    assert engine.page_of(trace, autoprof.analysis.engine.analyze_trace(trace, None)[0]).memory == []
    page = _page(tmp_path, s)
    assert "Memory over the step" not in page and 'id="memory0_' not in page


def test_a_long_memory_series_is_thinned_keeping_its_peak() -> None:
    points = [(float(i), (i * 7919) % 1000) for i in range(10_000)] + [(10_000.0, 5000)]
    thin = _thinned(points, 200)
    assert len(thin) <= 202 and thin[0] == points[0] and thin[-1] == points[-1] and (10_000.0, 5000) in thin
    assert [t for t, _ in thin] == sorted(t for t, _ in thin)


# -- the same story as the verdict (issue 48 item 5) ------------------------------------------------------------------


def _input_bound_page(tmp: Path) -> tuple[Page, list[dict[str, Any]], str, Path]:
    """A trainer's three 1 ms steps on a GPU, each batch fetched for 3 ms before its step begins (between the steps):
    75% of each step's period waits for data, and none of it lies inside a step."""
    s = prefetching_trainer_gpu(3000)
    trace = s.trace()
    findings, _ = autoprof.analysis.engine.analyze_trace(trace, None)
    trace_file = tmp / "input.json"
    trace_file.write_text(json.dumps({"traceEvents": s.events, **s.meta}))
    out = tmp / "input.html"
    autoprof.report(trace_file, out)
    return engine.page_of(trace, findings), [f.to_record() for f in findings], out.read_text(), out


def test_an_input_bound_runs_chart_shows_the_fetch_between_its_steps_and_the_step_period(tmp_path: Path) -> None:
    rep, found, page, _ = _input_bound_page(tmp_path)
    reg = next(f for f in found if f["rule"] == "bound_regime")
    assert reg["verdict"] == "input-bound" and reg["evidence"]["input_period_share"] == pytest.approx(3000 / 4020, abs=1e-3)
    first = rep.breakdown[0]
    assert first["wall_ms"] == 1.0 and first["period_ms"] == 4.02  # the step alone, and its start to the next's
    parts = first["parts_ms"]
    assert parts["input"] == pytest.approx(3.0)  # the fetch before step 1 lies in step 0's period
    assert parts["compute-bound ops"] == pytest.approx(0.8)
    assert sum(parts.values()) == pytest.approx(first["period_ms"])  # the bar is the period, whole
    assert parts["input"] / first["period_ms"] == pytest.approx(reg["evidence"]["input_period_share"], abs=1e-3)
    last = rep.breakdown[-1]
    assert last["period_ms"] is None and sum(last["parts_ms"].values()) == pytest.approx(last["wall_ms"])
    # the verdicts table: the step time beside the step period
    (row,) = _rows(page, "summary")
    assert row[2:4] == ["input-bound", "1.00"] and row[4] == "4.02", row
    # the verdict's shares, each in words, with what it is of and its time
    shares = {r[0]: r[1:] for r in _rows(page, "shares")}
    assert shares["input: waiting for data"] == ["67.5%", "the window", "6.000"]
    assert shares["input, of the step period"][:2] == ["74.6%", "the step period"]
    assert shares["op work"][:2] == ["27.0%", "the window on the device"]
    assert {"syncs: waiting in synchronizing calls", "collectives: waiting for other ranks", "host overhead"} <= shares.keys()
    # the chart's traces: every part in plain words, the step time and the step period
    go, _pio, _po = htmlreport._plotly()
    names = [t.name for t in htmlreport._steps_figure(go, rep).data]
    assert "input: waiting for data" in names and "op work: compute-bound ops" in names
    assert "step time (the step alone)" in names and "step period (start to the next step's start)" in names
    assert 'id="shares0"' in page and 'id="steps0"' in page


def test_no_raw_evidence_key_and_no_calibrated_without_its_meaning(tmp_path: Path) -> None:
    _rep, _found, page, _ = _input_bound_page(tmp_path)
    raw = _rows(page, "evidence-raw")
    assert raw and all(len(r) == 3 and r[2].strip() and r[2] != r[0] for r in raw), raw
    meanings = {r[0]: r[2] for r in raw}
    assert "host_own_work_share" in meanings and "launches nothing" in meanings["host_own_work_share"]
    assert "step period" in meanings["input_period_share"]
    cpu = _page(tmp_path, _cpu_steps())  # a CPU roofline against calibrated peaks
    note = re.search(r'<p class="note calibrated">(.*?)</p>', cpu)
    assert note is not None and html.unescape(note.group(1)).startswith("Calibrated: a CPU has no datasheet peak")
    words = re.search(r'<section id="words">(.*?)</section>', cpu, flags=re.S)
    assert words is not None
    for term in ("step time", "step period", "window", "input", "syncs", "collectives", "host overhead", "op work", "calibrated"):
        assert f"<dt>{term}</dt>" in words.group(1), term


def test_an_input_bound_page_in_a_browser_draws_the_input_and_the_step_period(tmp_path: Path) -> None:
    _rep, _found, page, out = _input_bound_page(tmp_path)
    _no_external_reference(page)
    dom, console, shot = _browse(out, tmp_path)
    assert console == [], console
    for chart in ("shares0", "steps0"):
        div = dom[dom.index(f'id="{chart}"') :]
        div = div[: div.find('id="', 10)] if 'id="' in div[10:] else div
        assert 'class="main-svg"' in div, chart
    steps = dom[dom.index('id="steps0"') : dom.index('id="strip0"')]
    # plotly drew the legend with the input and the period, and a bar for each step's input
    assert "input: waiting for data" in steps and "step period (start to the next step" in steps
    assert steps.count('class="point"') >= 2 * 3
    assert _png_colors(shot) > 20
