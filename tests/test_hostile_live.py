"""A hostile user's live scenarios: odd profilers, trainers that fail, `Steps` misuse, forks, async, exits.

Each scenario runs in a process of its own (a crash is an exit code, 139/-11 a segfault) that writes its records to a
file sink (`background=False`) and prints one `RESULT <json>` line; the test asserts what docs/usage.md,
docs/trainers.md, docs/records.md and docs/guarantees.md promise. Where torch itself misbehaves, the same script runs
with `AUTOPROF_DISABLE=true` as the baseline.

The process is forked from a server that has imported torch (and lightning, or transformers, for the scenarios that
import them) and nothing else: importing them took ~5 of a scenario's ~8 s. autoprof is imported by the scenario,
after its environment is set, as in a fresh interpreter; the server ran no op (no thread pool, no profiler) and holds
no other thread. A scenario whose environment differs from the server's in anything but its own variables (`SINK`,
`AUTOPROF_*`, `KIND`, ...) runs in a fresh interpreter, and `AUTOPROF_TESTS_FRESH=1` runs them all so.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PRELUDE = """
import os, sys, json, gc
import torch
import autoprof
SINK = os.environ["SINK"]
autoprof.configure(sink=SINK, background=False)
def recs():
    autoprof.flush()
    if not os.path.exists(SINK):
        return []
    return [json.loads(line) for line in open(SINK) if line.strip()]
def windows(target=None):
    return [r for r in recs() if r["event"] == "autoprof.window" and (target is None or r["target"] == target)]
def warns(reason=None):  # a machine_busy warning says how busy the test machine was: left out unless asked for
    return [r for r in recs() if r["event"] in ("autoprof.warning", "autoprof.error") and (reason is None or r.get("reason") == reason)
            and (reason == "machine_busy" or r.get("reason") != "machine_busy")]
def prof_on():
    return bool(torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled())
def work(n=16):
    x = torch.randn(n, n)
    return (x @ x).sum()
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def result(obj):
    print("RESULT " + json.dumps(obj), flush=True)
"""

LIGHTNING = """
import warnings, logging
warnings.filterwarnings("ignore")
for _n in ("lightning", "lightning.pytorch", "lightning.fabric"):
    logging.getLogger(_n).setLevel(logging.ERROR)
import lightning.pytorch as pl
from autoprof.integrations.lightning import AutoprofProfiler, AutoprofCallback
KIND = os.environ.get("KIND", "profiler")
FAIL = {}
def maybe(where, i):
    f = FAIL.get(where)
    if f is not None and f[0] == i:
        FAIL.pop(where)
        raise f[1]
class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)
    def training_step(self, batch, i):
        maybe("train", self.global_step)
        if FAIL.get("stop") == self.global_step:
            self.trainer.should_stop = True
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def validation_step(self, batch, i):
        maybe("val", i)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def test_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def on_train_start(self):
        maybe("train_start", 0)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        maybe("opt", self.global_step)
        super().optimizer_step(epoch, batch_idx, optimizer, optimizer_closure)
class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        maybe("data", i)
        return torch.randn(8), torch.randn(1)
class CBFail(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        maybe("cb", trainer.global_step)
def loader():
    return torch.utils.data.DataLoader(DS(), batch_size=4)
def make_ap():
    opts = dict(skip_first=1, wait=0, warmup=1, active=3)
    return AutoprofProfiler(**opts) if KIND == "profiler" else AutoprofCallback(**opts)
def trainer(ap=None, max_steps=8, callbacks=(), **kw):
    ap = ap if ap is not None else make_ap()
    cbs = list(callbacks) + ([ap] if KIND == "callback" else [])
    opts = dict(val_check_interval=16, limit_val_batches=2)
    opts.update(kw)
    return pl.Trainer(max_steps=max_steps, accelerator="cpu", profiler=ap if KIND == "profiler" else None, callbacks=cbs,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, **opts)
def train_windows(since=0, suffix="training_step"):
    return [w["steps"] for w in windows()[since:] if w["target"].endswith(suffix)]
"""

HF = """
import warnings, tempfile
warnings.filterwarnings("ignore")
import transformers
transformers.logging.set_verbosity_error()
from autoprof.integrations.transformers import AutoprofCallback
FAIL = {}
def maybe(where, i):
    f = FAIL.get(where)
    if f is not None and f[0] == i:
        FAIL.pop(where)
        raise f[1]
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)
        self.n = 0
    def forward(self, x, labels=None):
        maybe("fwd", self.n)
        self.n += 1
        out = self.lin(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        return {"x": torch.randn(16), "labels": torch.randn(1)}
COLL = {"n": 0}
def collate(feats):
    maybe("coll", COLL["n"])
    COLL["n"] += 1
    return {"x": torch.stack([f["x"] for f in feats]), "labels": torch.stack([f["labels"] for f in feats])}
class CBFail(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        maybe("cb", state.global_step)
        if FAIL.get("stop") == state.global_step:
            control.should_training_stop = True
    def on_train_begin(self, args, state, control, **kw):
        maybe("begin", 0)
    def on_optimizer_step(self, args, state, control, **kw):
        maybe("opt", state.global_step)
TMP = tempfile.mkdtemp()
def mkcb():
    return AutoprofCallback(skip_first=1, wait=0, warmup=1, active=3)
def hf_trainer(cb=None, max_steps=8):
    args = transformers.TrainingArguments(output_dir=TMP, max_steps=max_steps, per_device_train_batch_size=4, use_cpu=True,
                                          report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                          dataloader_num_workers=0)
    return transformers.Trainer(model=Tiny(), args=args, train_dataset=Data(), eval_dataset=Data(), data_collator=collate,
                                callbacks=[CBFail(), cb if cb is not None else mkcb()])
"""


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]]
    result: Any

    def stray_stderr(self, ignore: tuple[str, ...] = ()) -> list[str]:
        """stderr lines that are not JSON records (the sink is a file, so autoprof writes none there), less the
        trainer's own info lines (`ignore`: prefixes)."""
        out = []
        for line in self.stderr.splitlines():
            if not line.strip() or line.startswith(ignore):
                continue
            try:
                json.loads(line)
            except ValueError:
                out.append(line)
        return out

    def of(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return [r for r in self.records if r["event"] == event and all(r.get(k) == v for k, v in match.items())]


def _base_env() -> dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    for k in list(e):
        if k.startswith("AUTOPROF_") and k != "AUTOPROF_SHARED_TRACES":
            del e[k]
    return e


#: What a scenario sets for itself (read by the scenario or by autoprof, never by torch's import), and what pytest
#: changes per test (PYTEST_CURRENT_TEST).
_OWN = ("SINK", "KIND", "HOW", "WHICH", "PYTEST_CURRENT_TEST")

#: The server: imports torch (and lightning or transformers), then forks one child per request (a JSON line on its
#: stdin: script, cwd, env, stdout and stderr files); the child becomes the scenario (`python script.py`), the server
#: answers its pid, then its wait status.
_SERVER = r"""
import json, os, sys
kind = sys.argv[1]
import torch
if kind == "lightning":
    import lightning.pytorch
elif kind == "transformers":
    import transformers
import threading
assert threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1, "a thread: no fork"
def serve():
    print("READY", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            return req
        print("PID", pid, flush=True)
        print("STATUS", os.waitpid(pid, 0)[1], flush=True)
    return None
req = serve()
if req is None:
    sys.exit(0)
del serve
os.chdir(req["cwd"])
os.environ.clear()
os.environ.update(req["env"])
for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                        (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
    f = os.open(path, flags, 0o644)
    os.dup2(f, fd)
    os.close(f)
sys.argv = [req["script"]]
sys.path[0] = os.path.dirname(req["script"])
import runpy
runpy.run_path(req["script"], run_name="__main__")
"""


class _Server:
    def __init__(self, kind: str) -> None:
        self.env = _base_env()
        self.p = subprocess.Popen(
            [sys.executable, "-c", _SERVER, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
        )
        self.ok = self._line(120) == "READY"

    def _line(self, timeout: float) -> str | None:
        assert self.p.stdout is not None
        if not select.select([self.p.stdout], [], [], timeout)[0]:
            return None
        return self.p.stdout.readline().strip() or None

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a scenario with ``env`` can be forked from here: the same environment but its own variables."""
        keys = set(env) | set(self.env)
        return (
            self.ok
            and self.p.poll() is None
            and all(env.get(k) == self.env.get(k) for k in keys if k not in _OWN and not k.startswith("AUTOPROF_"))
        )

    def run(self, script: Path, cwd: Path, env: dict[str, str], timeout: int) -> tuple[int, str, str]:
        assert self.p.stdin is not None
        out, err = cwd / "stdout.txt", cwd / "stderr.txt"
        req = {"script": str(script), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        got = self._line(60)
        assert got is not None and got.startswith("PID "), got
        pid = int(got.split()[1])
        status = self._line(timeout)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            self._line(60)
            raise subprocess.TimeoutExpired(str(script), timeout)
        code = os.waitstatus_to_exitcode(int(status.split()[1]))
        read = lambda f: f.read_text(errors="replace") if f.exists() else ""  # noqa: E731
        return code, read(out), read(err)

    def close(self) -> None:
        if self.p.stdin is not None:
            self.p.stdin.close()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()


_SERVERS: dict[str, _Server] = {}
_FRESH = os.environ.get("AUTOPROF_TESTS_FRESH") == "1"  # read at collection (the tests' own fixture clears AUTOPROF_*)


@pytest.fixture(scope="module", autouse=True)
def _servers() -> Any:
    yield
    for server in _SERVERS.values():
        server.close()
    _SERVERS.clear()


def _server_for(text: str) -> _Server | None:
    if _FRESH:
        return None
    kind = "lightning" if "import lightning" in text else "transformers" if "import transformers" in text else "torch"
    server = _SERVERS.get(kind)
    if server is None or server.p.poll() is not None:
        server = _SERVERS[kind] = _Server(kind)
    return server


def run(tmp_path: Path, body: str, *, extra: str = "", env: dict[str, str] | None = None, timeout: int = 240, tag: str = "s") -> Run:
    d = tmp_path / tag
    d.mkdir(parents=True, exist_ok=True)
    sink = d / "records.jsonl"
    script = d / "script.py"
    text = PRELUDE + textwrap.dedent(extra) + textwrap.dedent(body)
    script.write_text(text)
    e = dict(_base_env(), SINK=str(sink))
    e.update(env or {})
    server = _server_for(text)
    if server is not None and server.fits(e):
        rc, stdout, stderr = server.run(script, d, e, timeout)
    else:
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, env=e, cwd=str(d))
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    records = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()] if sink.exists() else []
    res = None
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT ") :])
    return Run(rc, stdout, stderr, records, res)


LIGHTNING_NOISE = ("GPU available", "TPU available", "HPU available", "\U0001f4a1 Tip", "`Trainer.fit` stopped")


def consecutive(steps: list[int]) -> bool:
    return bool(steps) and all(b == a + 1 for a, b in zip(steps, steps[1:]))


def ok(r: Run) -> None:
    assert r.rc == 0, f"exit {r.rc} (139/-11 = segfault)\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
    assert r.result is not None, r.stdout[-2000:]


# -- your own profiler ------------------------------------------------------------------------------------------


USER_MATRIX = """
from torch.profiler import profile, schedule
KIND = os.environ["KIND"]
def mm_count(evs):
    return sum(1 for e in evs if e.name == "aten::mm")
class User:
    def __init__(self):
        self.traces = []
        ready = lambda p: self.traces.append(mm_count(p.events()))
        if KIND == "plain":
            self.p = profile()
        elif KIND == "sched":
            self.p = profile(schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=ready)
        elif KIND == "repeat":
            self.p = profile(schedule=schedule(wait=1, warmup=1, active=1, repeat=2), on_trace_ready=ready)
        elif KIND == "warmexit":  # exits while still in its own warmup
            self.p = profile(schedule=schedule(wait=0, warmup=5, active=1), on_trace_ready=ready)
        elif KIND == "legacy":
            self.p = torch.autograd.profiler.profile()
        self.n = 0
    def start(self):
        self.p.__enter__() if KIND == "legacy" else self.p.start()
    def tick(self):
        self.n += 1
        if KIND in ("sched", "repeat", "warmexit"):
            self.p.step()
    def stop(self):
        if KIND == "legacy":
            self.p.__exit__(None, None, None)
            return mm_count(self.p.function_events)
        self.p.stop()
        return mm_count(self.p.events()) if KIND == "plain" else self.traces
out = []
case = 0
for start in range(4):
    for dur in (1, 2, 3):
        for inside in (False, True):
            case += 1
            name = f"t{case}"
            U = {}
            def body(i, start=start, dur=dur, inside=inside, U=U):
                if inside and i == start:
                    U["u"] = User(); U["u"].start()
                r = work()
                if "u" in U and not U.get("done"):
                    U["u"].tick()
                    if inside and U["u"].n == dur:
                        U["res"] = U["u"].stop(); U["done"] = True
                return r
            f = autoprof(name=name, skip_first=0, wait=0, warmup=1, active=2)(body)
            for i in range(12):
                if not inside and i == start:
                    U["u"] = User(); U["u"].start()
                f(i)
                if not inside and "u" in U and not U.get("done") and U["u"].n == dur:
                    U["res"] = U["u"].stop(); U["done"] = True
            out.append(dict(case=name, start=start, dur=dur, inside=inside, user=U.get("res"),
                            windows=[w["steps"] for w in windows(name)], on=prof_on()))
result(out)
"""


@pytest.mark.parametrize("kind", ["plain", "sched", "repeat", "warmexit", "legacy"])
def test_user_profiler_at_every_start_and_length_keeps_its_events_and_autoprof_records_after(tmp_path: Path, kind: str) -> None:
    """A user profiler of each kind starts at each of autoprof's warmup/active/close calls (between or inside the
    decorated call, p.step() inside it), runs 1-3 calls; its events must equal those it gets without autoprof, and the
    target must record a whole window afterwards with no profiler left on."""
    live = run(tmp_path, USER_MATRIX, env={"KIND": kind}, tag="live")
    base = run(tmp_path, USER_MATRIX, env={"KIND": kind, "AUTOPROF_DISABLE": "true"}, tag="base")
    ok(live)
    ok(base)
    bad = []
    for r, b in zip(live.result, base.result, strict=True):
        where = f"{r['case']} start={r['start']} dur={r['dur']} inside={r['inside']}"
        if r["user"] != b["user"]:
            bad.append(f"{where}: user's aten::mm {r['user']} != {b['user']} without autoprof")
        if len(r["windows"]) != 1 or not consecutive(r["windows"][0]):
            bad.append(f"{where}: windows {r['windows']}")
        if r["on"]:
            bad.append(f"{where}: a profiler is still on")
    assert not bad, "\n".join(bad)


def test_user_scheduled_profiler_entering_its_warmup_inside_an_active_step_prints_no_torch_line(tmp_path: Path) -> None:
    """Your scheduled profiler's p.step() (wait -> warmup, i.e. prepared) inside a decorated call while autoprof's
    window records: yours wins, autoprof says so once as a record; stderr must stay free of torch's lines."""
    r = run(
        tmp_path,
        """
        from torch.profiler import profile, schedule
        P = {}
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def step(i):
            out = work()
            if "p" in P:
                P["p"].step()
            return out
        step(0); step(1)
        P["p"] = profile(schedule=schedule(wait=1, warmup=1, active=1, repeat=2)); P["p"].start()
        step(2); P["p"].stop(); del P["p"]
        for i in range(3, 12):
            step(i)
        result({"windows": [w["steps"] for w in windows("step")], "on": prof_on(), "warns": [w["reason"] for w in warns()]})
        """,
    )
    ok(r)
    assert r.result["windows"] and consecutive(r.result["windows"][-1]) and not r.result["on"]
    assert r.result["warns"] == ["foreign_profiler"]
    assert r.stray_stderr() == []


def test_user_profiler_in_another_thread_during_a_window_keeps_its_events_crashes_nothing_and_is_said(tmp_path: Path) -> None:
    """A monitoring thread runs `with torch.profiler.profile()` while the main thread's window records. torch runs one
    profiler at a time and stops one only on its own thread (left running, autoprof's crashed the process at its stop;
    stopped from the other thread, torch keeps the main thread's profiler state enabled). Documented
    (guarantees.md, "What autoprof cannot promise"): yours keeps its events, nothing crashes, one warning says that
    autoprof records no more windows on that thread, and no autoprof.error follows."""
    code = """
        import threading
        from torch.profiler import profile
        @autoprof
        def step(i):
            return work()
        user = {}
        def other():
            with profile() as p:
                work()
            user["mm"] = sum(1 for e in p.events() if e.name == "aten::mm")
        for i in range(16):
            step(i)
            if i == 3:  # autoprof's first active step just ran: its window records
                t = threading.Thread(target=other); t.start(); t.join()
        result({"user": user, "windows": [w["steps"] for w in windows("step")],
                "errors": [w["message"] for w in recs() if w["event"] == "autoprof.error"]})
        """
    r = run(tmp_path, code)
    ok(r)
    assert r.result["user"] == {"mm": 1}
    assert r.result["errors"] == []
    said = r.of("autoprof.warning", reason="foreign_profiler_thread")
    assert len(said) == 1, r.records
    assert r.result["windows"] == [], r.result  # no window mixed with the broken state


def test_user_scheduled_profiler_with_repeat_spanning_autoprofs_window(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile, schedule
        traces = []
        @autoprof
        def step(i):
            return work()
        p = profile(schedule=schedule(wait=1, warmup=1, active=1, repeat=2),
                    on_trace_ready=lambda p: traces.append(sum(1 for e in p.events() if e.name == "aten::mm")))
        p.start()
        for i in range(8):
            step(i); p.step()
        p.stop()
        for i in range(8, 20):
            step(i)
        result({"traces": traces, "windows": [w["steps"] for w in windows("step")], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["traces"] == [1, 1]
    assert len(r.result["windows"]) == 1 and consecutive(r.result["windows"][0]) and not r.result["on"]


def test_user_profiler_exiting_in_its_own_warmup_during_autoprofs_warmup(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile, schedule
        @autoprof
        def step(i):
            return work()
        for i in range(3):
            step(i)  # skip, wait, warmup (autoprof prepared)
        with profile(schedule=schedule(wait=0, warmup=3, active=1)) as p:
            step(3); p.step()
        on_after = prof_on()
        for i in range(4, 14):
            step(i)
        with profile() as p2:
            work()
        result({"on_after": on_after, "windows": [w["steps"] for w in windows("step")],
                "p2": sum(1 for e in p2.events() if e.name == "aten::mm"), "on": prof_on()})
        """,
    )
    ok(r)
    assert not r.result["on_after"] and not r.result["on"]
    assert len(r.result["windows"]) == 1 and consecutive(r.result["windows"][0])
    assert r.result["p2"] == 1


LEAKED = """
from torch.profiler import profile
@autoprof
def step(i):
    return work()
def leak():
    p = profile(); p.start(); work()
leak(); gc.collect()
for i in range(8):
    step(i)
result({"windows": [w["steps"] for w in windows("step")]})
"""


def test_a_started_profiler_dropped_without_stop_crashes_no_more_than_without_autoprof(tmp_path: Path) -> None:
    """torch.profiler.profile().start() then dropped: autoprof must not add a crash (torch alone segfaults here)."""
    live = run(tmp_path, LEAKED, tag="live")
    base = run(tmp_path, LEAKED, env={"AUTOPROF_DISABLE": "true"}, tag="base")
    assert live.rc == base.rc, (live.rc, base.rc, live.stderr[-2000:])
    assert live.result == {"windows": []}  # yours still records: autoprof opens none


def test_a_scheduled_profiler_dropped_in_its_warmup_then_autoprof_then_a_user_profiler(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile, schedule
        @autoprof
        def step(i):
            return work()
        def leak():
            p = profile(schedule=schedule(wait=0, warmup=2, active=1)); p.start(); p.step()
        leak(); gc.collect()
        for i in range(8):
            step(i)
        with profile() as p2:
            work()
        mm = sum(1 for e in p2.events() if e.name == "aten::mm")
        result({"windows": [w["steps"] for w in windows("step")], "p2": mm, "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result == {"windows": [[3, 4, 5]], "p2": 1, "on": False}


def test_a_profiler_created_and_dropped_unstarted_inside_autoprofs_warmup_step(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile, schedule
        @autoprof
        def step(i):
            if i == 2:
                p = profile(schedule=schedule(wait=0, warmup=1, active=1)); del p; gc.collect()
            return work()
        for i in range(8):
            step(i)
        with profile() as p2:
            work()
        mm = sum(1 for e in p2.events() if e.name == "aten::mm")
        result({"windows": [w["steps"] for w in windows("step")], "p2": mm, "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result == {"windows": [[3, 4, 5]], "p2": 1, "on": False}
    assert r.stray_stderr() == []


def test_two_user_profilers_in_sequence_around_active_steps(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile
        @autoprof
        def step(i):
            return work()
        n = []
        for i in range(14):
            if i in (3, 4):
                with profile() as p:
                    step(i)
                n.append(sum(1 for e in p.events() if e.name == "aten::mm"))
            else:
                step(i)
        result({"user": n, "windows": [w["steps"] for w in windows("step")], "warns": [w["reason"] for w in warns()], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["user"] == [1, 1]
    assert len(r.result["windows"]) == 1 and consecutive(r.result["windows"][0]) and not r.result["on"]
    assert r.result["warns"] == ["foreign_profiler"]
    assert r.stray_stderr() == []


def test_a_user_profiler_overlapping_two_autoprof_targets(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile
        @autoprof
        def a(i): return work()
        @autoprof
        def b(i): return work()
        for i in range(4):
            a(i); b(i)
        p = profile(); p.start()  # a's window records now
        for i in range(4, 6):
            a(i); b(i)
        p.stop()
        names = [e.name for e in p.events()]
        for i in range(6, 24):
            a(i); b(i)
        result({"mm": names.count("aten::mm"), "annot": sorted(set(n for n in names if n in ("a", "b"))),
                "windows": {t: [w["steps"] for w in windows(t)] for t in "ab"}, "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["mm"] == 4 and r.result["annot"] == ["a", "b"]
    for t in "ab":
        assert len(r.result["windows"][t]) == 1 and consecutive(r.result["windows"][t][0]), r.result
    assert not r.result["on"]
    assert r.stray_stderr() == []


def test_legacy_autograd_profiler_inside_a_step_and_around_two_steps(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        U = []
        @autoprof
        def step(i):
            if i == 4:
                with torch.autograd.profiler.profile() as p:
                    work()
                U.append(sum(1 for e in p.function_events if e.name == "aten::mm"))
            return work()
        for i in range(6):
            step(i)
        with torch.autograd.profiler.profile() as p:
            step(6); step(7)
        U.append(sum(1 for e in p.function_events if e.name == "aten::mm"))
        for i in range(8, 16):
            step(i)
        result({"user": U, "windows": [w["steps"] for w in windows("step")], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["user"] == [1, 2]
    assert len(r.result["windows"]) == 1 and consecutive(r.result["windows"][0]) and not r.result["on"]
    assert r.stray_stderr() == []


def test_user_profiler_started_inside_a_step_stopped_outside_and_the_reverse(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from torch.profiler import profile
        P = {}
        @autoprof
        def step(i):
            if i == 4:
                P["p"] = profile(); P["p"].start()
            if i == 8:
                P["q"].stop()
            return work()
        for i in range(12):
            step(i)
            if i == 5:
                P["p"].stop()
            if i == 6:
                P["q"] = profile(); P["q"].start()
        for i in range(12, 24):
            step(i)
        mm = lambda p: sum(1 for e in p.events() if e.name == "aten::mm")
        result({"p": mm(P["p"]), "q": mm(P["q"]), "windows": [w["steps"] for w in windows("step")], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["p"] == 2 and r.result["q"] == 1  # p: calls 4, 5; q: call 7 (stopped before call 8's work)
    assert len(r.result["windows"]) == 1 and consecutive(r.result["windows"][0]) and not r.result["on"]


# -- a step that fails -----------------------------------------------------------------------------------------


RAISING = """
import asyncio, time
HOW = os.environ["HOW"]
@autoprof(skip_first=0, wait=0, warmup=1, active=2)
def sync(i):
    if i in (1, 2):  # both active steps of the first window fail, slowly (30 ms)
        time.sleep(0.03)
        raise (KeyboardInterrupt() if HOW == "ctrl-c" else ValueError("boom"))
    time.sleep(0.002)
    return work()
@autoprof(name="sync", skip_first=0, wait=0, warmup=1, active=2)
async def acancel(i):
    await asyncio.sleep(0.05)
    return work()
if HOW == "cancel":
    async def main():
        for i in range(10):
            t = asyncio.ensure_future(acancel(i))
            await asyncio.sleep(0.03)
            if i in (1, 2):
                t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass
    asyncio.run(main())
else:
    for i in range(10):
        try:
            sync(i)
        except (ValueError, KeyboardInterrupt):
            pass
result({"windows": [(w["steps"], w["step_wall_ms"]) for w in windows("sync")], "on": prof_on()})
"""


@pytest.mark.parametrize("how", ["exception", "ctrl-c", "cancel"])
def test_a_step_that_raises_in_the_window_is_never_a_step_of_a_recorded_window(tmp_path: Path, how: str) -> None:
    """guarantees.md: a window the interrupted step belonged to is dropped (a window is all of its steps or nothing)
    and that cycle is recorded again; docs/usage.md: a step that raised is not counted. The failing calls take 30 ms, the
    good ones ~2 ms (cancel: 30 ms before the cancel against 50 ms), so a recorded window must show none at 30 ms."""
    r = run(tmp_path, RAISING, env={"HOW": how})
    ok(r)
    assert not r.result["on"]
    assert r.result["windows"], "the cycle must be recorded again"
    for steps, walls in r.result["windows"]:
        assert not any(25 <= w <= 40 for w in walls), f"window {steps} holds the failed calls: step_wall_ms {walls}"


@pytest.mark.parametrize("at", [3, 4, 5])
def test_an_uncaught_exception_in_a_window_step_ends_the_script_and_autoprof_says_what_happened(tmp_path: Path, at: int) -> None:
    """The script dies from an exception raised in call `at` (3, 4, 5 = the default window's active steps). docs/usage.md:
    at exit a target that never recorded says so (`no_window`); a window cut short is dropped, never recorded."""
    r = run(
        tmp_path,
        f"""
        @autoprof
        def step(i):
            if i == {at}:
                raise RuntimeError("die")
            return work()
        for i in range(10):
            step(i)
        """,
    )
    assert r.rc == 1 and "RuntimeError: die" in r.stderr
    assert r.of("autoprof.window") == [], "a window holding the step that raised was recorded"
    assert r.of("autoprof.warning", reason="no_window") or r.of("autoprof.warning", reason="window_incomplete"), r.records


# -- Lightning -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_failures_at_every_place_leave_nothing_on_and_the_next_fit_records_whole(tmp_path: Path, kind: str) -> None:
    r = run(
        tmp_path,
        """
        res = []
        places = [("train", 3, RuntimeError("boom")), ("val", 0, RuntimeError("boom")), ("cb", 3, RuntimeError("boom")),
                  ("data", 14, RuntimeError("boom")), ("opt", 3, RuntimeError("boom")), ("train_start", 0, RuntimeError("boom"))]
        rss = [rss_mb()]
        for where, at, exc in places:
            n0 = len(windows())
            FAIL.clear(); FAIL[where] = (at, exc)
            t = trainer(max_steps=8, callbacks=[CBFail()], **({"val_check_interval": 4} if where == "val" else {}))
            try:
                t.fit(M(), loader(), loader()); raised = None
            except BaseException as e:
                raised = type(e).__name__
            on = prof_on()
            FAIL.clear()
            trainer(max_steps=8).fit(M(), loader())
            res.append(dict(where=where, raised=raised, on=on, on2=prof_on(), next=train_windows(n0)))
            rss.append(rss_mb())
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def later(i):
            return work()
        for i in range(4):
            later(i)
        result({"res": res, "rss": rss, "later": [w["steps"] for w in windows("later")]})
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    for x in r.result["res"]:
        assert x["raised"] == "RuntimeError", x
        assert not x["on"] and not x["on2"], x
        assert x["next"] == [[2, 3, 4]], x
    assert r.result["later"] == [[1, 2]]
    assert max(r.result["rss"]) - r.result["rss"][0] < 200, r.result["rss"]
    assert r.stray_stderr(LIGHTNING_NOISE) == []


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_ctrl_c_early_stop_and_short_max_steps_then_a_whole_window(tmp_path: Path, kind: str) -> None:
    r = run(
        tmp_path,
        """
        out = {}
        FAIL["train"] = (3, KeyboardInterrupt())
        try:
            trainer(max_steps=8).fit(M(), loader()); out["ki"] = "returned"
        except BaseException as e:
            out["ki"] = type(e).__name__  # Lightning turns Ctrl-C into a graceful exit
        out["on_ki"] = prof_on()
        FAIL.clear(); FAIL["stop"] = 3
        trainer(max_steps=20).fit(M(), loader()); out["on_stop"] = prof_on()
        FAIL.clear()
        trainer(max_steps=3).fit(M(), loader()); out["on_short"] = prof_on()
        n0 = len(windows())
        trainer(max_steps=8).fit(M(), loader())
        out["next"] = train_windows(n0)
        out["all"] = train_windows()
        result(out)
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    assert not (r.result["on_ki"] or r.result["on_stop"] or r.result["on_short"]), r.result
    assert r.result["next"] == [[2, 3, 4]] and r.result["all"] == [[2, 3, 4]]


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_each_window_cut_short_is_said(tmp_path: Path, kind: str) -> None:
    """docs/trainers.md: a run that raises or stops at max_steps inside a window: 'a window cut short is dropped ... and one
    autoprof.warning (reason: window_incomplete, with steps_recorded and steps_needed) says so'. Three runs cut three
    windows."""
    r = run(
        tmp_path,
        """
        for k in range(2):
            FAIL.clear(); FAIL["train"] = (3, RuntimeError("boom"))
            try:
                trainer(max_steps=8).fit(M(), loader())
            except RuntimeError:
                pass
        FAIL.clear()
        trainer(max_steps=3).fit(M(), loader())
        result({"cut": [(w["window"], w.get("steps_recorded")) for w in warns("window_incomplete")]})
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    assert len(r.result["cut"]) == 3, r.result


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_the_same_profiler_or_callback_instance_in_later_trainers_records_each_run(tmp_path: Path, kind: str) -> None:
    """docs/trainers.md: each fit() is a run of its own, the schedule starts over, so a second run records too."""
    r = run(
        tmp_path,
        """
        ap = make_ap()
        runs = []
        for k in range(3):
            n0 = len(windows())
            trainer(ap=ap, max_steps=8).fit(M(), loader())
            runs.append(train_windows(n0))
        result({"runs": runs, "on": prof_on()})
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    assert r.result["runs"] == [[[2, 3, 4]]] * 3, r.result


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_a_second_fit_on_the_same_trainer_records(tmp_path: Path, kind: str) -> None:
    r = run(
        tmp_path,
        """
        t = trainer(max_steps=8); m = M()
        n0 = len(windows()); t.fit(m, loader()); first = train_windows(n0)
        t.fit_loop.epoch_loop.max_steps = 16  # eight more steps, global_step 8..15
        n0 = len(windows()); t.fit(m, loader()); second = train_windows(n0)
        result({"first": first, "second": second, "on": prof_on()})
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    assert r.result["first"] == [[2, 3, 4]]
    assert len(r.result["second"]) == 1 and consecutive(r.result["second"][0]), r.result


@pytest.mark.parametrize("kind", ["profiler", "callback"])
def test_lightning_validate_and_test_twice_after_fit_record_each_run(tmp_path: Path, kind: str) -> None:
    r = run(
        tmp_path,
        """
        t = trainer(max_steps=8, limit_val_batches=8); m = M()
        t.fit(m, loader())
        out = {}
        for k, fn, suffix in [("validate1", t.validate, "validation_step"), ("validate2", t.validate, "validation_step"),
                              ("test1", t.test, "test_step"), ("test2", t.test, "test_step")]:
            n0 = len(windows()); fn(m, loader()); out[k] = train_windows(n0, suffix)
        out["on"] = prof_on()
        result(out)
        """,
        extra=LIGHTNING,
        env={"KIND": kind},
    )
    ok(r)
    assert not r.result["on"]
    assert r.result["validate1"] == [[2, 3, 4]] and r.result["test1"] == [[2, 3, 4]], r.result
    assert r.result["validate2"] == [[2, 3, 4]] and r.result["test2"] == [[2, 3, 4]], r.result


# -- Hugging Face Trainer --------------------------------------------------------------------------------------


def test_hf_failures_at_every_place_ctrl_c_early_stop_and_max_steps_then_a_whole_window(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        res = []
        rss = [rss_mb()]
        cases = [("fwd", 3, RuntimeError("boom")), ("coll", 3, RuntimeError("boom")), ("cb", 3, RuntimeError("boom")),
                 ("opt", 3, RuntimeError("boom")), ("begin", 0, RuntimeError("boom")), ("fwd", 3, KeyboardInterrupt()),
                 ("stop", 3, None), ("max", 3, None)]
        for where, at, exc in cases:
            n0 = len(windows()); FAIL.clear(); COLL["n"] = 0
            if where == "stop":
                FAIL["stop"] = 3
            elif where != "max":
                FAIL[where] = (at, exc)
            try:
                hf_trainer(max_steps=3 if where == "max" else 8).train(); raised = None
            except BaseException as e:
                raised = type(e).__name__
            on = prof_on()
            FAIL.clear(); COLL["n"] = 0
            hf_trainer().train()
            res.append(dict(where=where, exc=type(exc).__name__, raised=raised, on=on, on2=prof_on(),
                            next=[w["steps"] for w in windows()[n0:]]))
            rss.append(rss_mb())
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def later(i):
            return work()
        for i in range(4):
            later(i)
        result({"res": res, "rss": rss, "later": [w["steps"] for w in windows("later")]})
        """,
        extra=HF,
    )
    ok(r)
    for x in r.result["res"]:
        assert x["raised"] == (None if x["exc"] == "NoneType" else x["exc"]), x
        assert not x["on"] and not x["on2"], x
        assert x["next"] == [[2, 3, 4]], x
    assert r.result["later"] == [[1, 2]]
    assert max(r.result["rss"]) - r.result["rss"][0] < 200, r.result["rss"]
    assert r.stray_stderr() == []


def test_hf_the_same_callback_in_later_trainers_records_each_run(tmp_path: Path) -> None:
    """docs/trainers.md: each train() is a run of its own; the schedule starts over, so a second run records too."""
    r = run(
        tmp_path,
        """
        cb = mkcb(); runs = []
        for k in range(3):
            n0 = len(windows()); hf_trainer(cb=cb).train(); runs.append([w["steps"] for w in windows()[n0:]])
        result({"runs": runs, "on": prof_on()})
        """,
        extra=HF,
    )
    ok(r)
    assert r.result["runs"] == [[[2, 3, 4]]] * 3, r.result


def test_hf_train_twice_on_the_same_trainer_and_after_evaluate_records_each_run(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        t = hf_trainer(); runs = []
        for k in range(2):
            n0 = len(windows()); t.train(); runs.append([w["steps"] for w in windows()[n0:]])
        t.evaluate()
        n0 = len(windows()); t.train(); runs.append([w["steps"] for w in windows()[n0:]])
        result({"runs": runs, "on": prof_on()})
        """,
        extra=HF,
    )
    ok(r)
    assert not r.result["on"]
    assert r.result["runs"] == [[[2, 3, 4]]] * 3, r.result


# -- autoprof.live.instrument.Steps ---------------------------------------------------------------------------------


def test_steps_calls_in_every_wrong_order_never_raise_and_leave_nothing_open(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        from autoprof.live.instrument import Steps
        s = Steps("loop", skip_first=0, wait=0, warmup=1, active=2)
        raised = []
        def t(label, fn):
            try:
                fn()
            except BaseException as e:
                raised.append(f"{label}: {e!r}")
        t("end before begin", s.end); t("leave before enter", lambda: s.leave("x")); t("enter outside", lambda: s.enter("x"))
        t("stop first", s.stop); t("restart first", s.restart)
        t("begin", lambda: s.begin(0)); t("begin again", lambda: s.begin(1)); t("leave unopened", lambda: s.leave("never"))
        t("enter a", lambda: s.enter("a")); t("enter b", lambda: s.enter("b")); t("leave a first", lambda: s.leave("a"))
        t("end with b open", s.end); t("end again", s.end); t("stop", s.stop); t("stop again", s.stop)
        t("restart", s.restart); t("restart again", s.restart)
        for i in range(6):
            t("begin", lambda: s.begin(i)); work(); t("end", s.end)
        s.stop()
        result({"raised": raised, "windows": [w["steps"] for w in windows("loop")], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["raised"] == []
    assert not r.result["on"]
    assert r.result["windows"] and all(consecutive(w) for w in r.result["windows"])
    assert r.stray_stderr() == []


def test_steps_odd_step_numbers_count_steps_themselves_and_never_raise(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        import numpy as np
        from autoprof.live.instrument import Steps
        odd = [True, False, -1, -2**70, 2**63, 2**200, 1.5, float("nan"), float("inf"), "3", None, b"1", [1], 3 + 0j,
               np.int64(5), np.bool_(True), torch.tensor(3)]
        out = []
        for k, v in enumerate(odd):
            s = Steps(f"odd{k}", skip_first=0, wait=0, warmup=1, active=2)
            try:
                for i in range(5):
                    with s.step(v):
                        work()
                s.stop()
                out.append([repr(v), [w["steps"] for w in windows(f"odd{k}")], prof_on()])
            except BaseException as e:
                out.append([repr(v), "raised " + repr(e), prof_on()])
        result(out)
        """,
    )
    ok(r)
    for v, ws, on in r.result:
        assert ws == [[1, 2]] and not on, (v, ws)


STEPS_THREAD = """
import threading
from autoprof.live.instrument import Steps
WHICH = os.environ["WHICH"]
s = Steps("thr", skip_first=0, wait=0, warmup=1, active=3)
out = {}
def other():
    try:
        if WHICH == "step":
            with s.step(5):
                work()
        elif WHICH == "begin":
            s.begin(99)
        elif WHICH in ("enter", "leave"):
            getattr(s, WHICH)("x")
        else:
            getattr(s, WHICH)()
        out["r"] = "ok"
    except BaseException as e:
        out["r"] = repr(e)
for i in range(6):
    s.begin(i)
    if i == 2:
        th = threading.Thread(target=other); th.start(); th.join()
    work()
    s.end()
s.stop()
result({"r": out["r"], "windows": [w["steps"] for w in windows("thr")], "on": prof_on(),
        "warns": [(w["reason"], w.get("steps_recorded")) for w in warns()]})
"""


@pytest.mark.parametrize("which", ["end", "enter", "leave", "stop", "restart", "begin", "step"])
def test_steps_calls_from_another_thread_change_nothing(tmp_path: Path, which: str) -> None:
    """docs/trainers.md: every call belongs to the thread of the step's begin(): from another thread it changes nothing and one
    warning (wrong_thread) says so. The main thread's window [1, 2, 3] must be recorded as if nothing happened."""
    r = run(tmp_path, STEPS_THREAD, env={"WHICH": which})
    ok(r)
    assert r.result["r"] == "ok"
    assert r.result["windows"] == [[1, 2, 3]], r.result
    assert not r.result["on"]
    # (a machine_busy warning says the test machine was busy: not the case's)
    assert all(w[0] in ("wrong_thread", "machine_busy") for w in r.result["warns"]), r.result["warns"]
    assert r.stray_stderr() == []


def test_steps_nested_and_same_named_never_crash_and_later_targets_record(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        import threading
        from autoprof.live.instrument import Steps
        outer = Steps("outer", skip_first=0, wait=0, warmup=1, active=2)
        inner = Steps("inner", skip_first=0, wait=0, warmup=1, active=2)
        for i in range(5):
            with outer.step(i):
                for j in range(3):
                    with inner.step(i * 3 + j):
                        work()
        outer.stop(); inner.stop()
        on_nested = prof_on()
        many = [Steps("same", skip_first=0, wait=0, warmup=1, active=2) for _ in range(50)]
        for i in range(4):
            for s in many:
                with s.step(i):
                    work(4)
        for s in many:
            s.stop()
        on_many = prof_on()
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def after(i):
            return work()
        for i in range(40):
            after(i)
        result({"on_nested": on_nested, "on_many": on_many, "after": [w["steps"] for w in windows("after")], "on": prof_on(),
                "inner": [w["steps"] for w in windows("inner")]})
        """,
    )
    ok(r)
    assert not r.result["on_nested"] and not r.result["on_many"] and not r.result["on"]
    assert r.result["inner"] and consecutive(r.result["inner"][0])
    assert len(r.result["after"]) == 1 and consecutive(r.result["after"][0])


def test_steps_a_thread_that_dies_inside_a_step_of_its_window_frees_it_and_nothing_crashes(tmp_path: Path) -> None:
    """A worker thread drives Steps, opens its window and dies between begin() and end() (an exception without `with`).
    A window's profiler can be stopped only on its own thread: the thread's end stops it there (its step's annotations
    exited, the window dropped, said), so the main thread's @autoprof target, called 40 times after, records. Before,
    the dead thread's window held the one slot, and torch's profiler, for the rest of the process."""
    r = run(
        tmp_path,
        """
        import threading
        from autoprof.live.instrument import Steps
        dead = Steps("thread_died", skip_first=0, wait=0, warmup=1, active=3)
        def w3():
            for i in range(3):
                dead.begin(i); work(); dead.end()
            dead.begin(3)
        th = threading.Thread(target=w3); th.start(); th.join()
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def after(i):
            return work()
        for i in range(40):
            after(i)
        result({"after": [w["steps"] for w in windows("after")], "on": prof_on(), "warns": [(w["target"], w["reason"]) for w in warns()]})
        """,
    )
    ok(r)
    assert r.result["after"] == [[1, 2]] and not r.result["on"], r.result
    assert ["thread_died", "window_incomplete"] in r.result["warns"], r.result


def test_steps_objects_sharing_a_name_drive_one_target_and_never_crash(tmp_path: Path) -> None:
    """Careless: one Steps("eval") per evaluation pass, all alive. A target is its name (docs/trainers.md):
    Steps objects that share one drive one target, each a new run of it when it first begins; the steps it records are
    theirs together, numbered as they say, and nothing is left recording."""
    r = run(
        tmp_path,
        """
        from autoprof.live.instrument import Steps
        many = [Steps("same", skip_first=0, wait=0, warmup=1, active=2) for _ in range(4)]
        for i in range(4):
            for s in many:
                with s.step(i):
                    work(4)
        for s in many:
            s.stop()
        result({"windows": [w["steps"] for w in windows("same")], "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["windows"] and all(len(w) == 2 for w in r.result["windows"]), r.result
    assert not r.result["on"]


# -- forks, async, generators, threads -------------------------------------------------------------------------


def test_fork_pools_after_and_during_a_window_and_a_forked_process(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        import multiprocessing as mp
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        def step(i):
            return float(work())
        def task(i):
            for j in range(5):
                step(j)
            autoprof.flush()
            return os.getpid()
        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            for i in range(5):
                step(i)
            with ctx.Pool(2) as p:
                p.map(task, range(2))
            after_pids = sorted(set(w["pid"] for w in windows("step")))
            @autoprof(skip_first=0, wait=0, warmup=1, active=3, name="during")
            def during(i):
                if i == 2:
                    with ctx.Pool(2) as p:
                        p.map(task, range(2))
                return work()
            for i in range(6):
                during(i)
            pr = ctx.Process(target=task, args=(0,)); pr.start(); pr.join(60)
            result({"after_pids": len(after_pids), "during": [w["steps"] for w in windows("during")], "exitcode": pr.exitcode,
                    "on": prof_on(), "parent_windows": [w["steps"] for w in windows("step") if w["pid"] == os.getpid()]})
        """,
        timeout=120,
    )
    ok(r)
    assert r.result["after_pids"] >= 2  # the parent and at least one pool worker recorded
    assert r.result["during"] == [[1, 2, 3]] and r.result["exitcode"] == 0 and not r.result["on"]
    assert r.result["parent_windows"] == [[1, 2]]


def test_asyncio_many_concurrent_calls_generators_and_threads_on_one_function(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        import asyncio, threading, warnings
        @autoprof(skip_first=0, wait=0, warmup=1, active=2)
        async def astep(i):
            await asyncio.sleep(0.001 * (i % 3))
            work()
            await asyncio.sleep(0)
            return i
        async def main():
            out = await asyncio.gather(*[astep(i) for i in range(200)])
            for i in range(6):
                await astep(i)
            return out
        gathered = asyncio.run(main())
        with warnings.catch_warnings(record=True) as wl:
            warnings.simplefilter("always")
            @autoprof
            def gen(n):
                for i in range(n):
                    yield i
        @autoprof(skip_first=0, wait=0, warmup=1, active=3)
        def shared(i):
            return work()
        errs = []
        def worker():
            try:
                for i in range(50):
                    shared(i)
            except BaseException as e:
                errs.append(repr(e))
        ths = [threading.Thread(target=worker) for _ in range(6)]
        for t in ths:
            t.start()
        for i in range(10):
            shared(i)
        for t in ths:
            t.join()
        result({"gathered": gathered == list(range(200)), "async": [w["steps"] for w in windows("astep")],
                "gen": list(gen(3)), "gen_warned": len(wl), "threads": [w["steps"] for w in windows("shared")], "errs": errs,
                "on": prof_on()})
        """,
    )
    ok(r)
    assert r.result["gathered"] and r.result["async"] and consecutive(r.result["async"][0])
    assert r.result["gen"] == [0, 1, 2] and r.result["gen_warned"] == 1
    assert r.result["threads"] == [[1, 2, 3]] and r.result["errs"] == [] and not r.result["on"]
    assert r.stray_stderr() == []


# -- a script that ends --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("calls", "reason"), [(3, "no_window"), (4, "no_window"), (5, "no_window")])
def test_a_script_that_ends_before_or_inside_its_first_window_is_told_so(tmp_path: Path, calls: int, reason: str) -> None:
    r = run(tmp_path, f"@autoprof\ndef step(i):\n    return work()\nfor i in range({calls}):\n    step(i)\nresult(1)\n")
    ok(r)
    (w,) = r.of("autoprof.warning", reason=reason)
    assert w["calls"] == calls and w["calls_needed"] == 6
    assert r.stray_stderr() == []


def test_exit_while_a_later_window_records_is_window_incomplete(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        """
        @autoprof(skip_first=0, wait=0, warmup=1, active=2, repeat=2)
        def step(i):
            return work()
        for i in range(5):
            step(i)
        result(1)
        """,
    )
    ok(r)
    assert [w["steps"] for w in r.of("autoprof.window")] == [[1, 2]]
    assert len(r.of("autoprof.warning", reason="window_incomplete")) == 1
    assert r.stray_stderr() == []


def test_sys_exit_inside_a_window_step_exits_with_its_code(tmp_path: Path) -> None:
    r = run(tmp_path, "@autoprof\ndef step(i):\n    if i == 4:\n        sys.exit(3)\n    return work()\nfor i in range(10):\n    step(i)\n")
    assert r.rc == 3
    assert r.of("autoprof.window") == []
    assert r.stray_stderr() == []


EXIT_WITH_USER_PROFILER = """
from torch.profiler import profile
@autoprof
def step(i):
    return work()
for i in range(4):
    step(i)
p = profile(); p.start(); work()
result(1)
"""


def test_exit_with_a_user_profiler_still_running_crashes_no_more_than_without_autoprof(tmp_path: Path) -> None:
    live = run(tmp_path, EXIT_WITH_USER_PROFILER, tag="live")
    base = run(tmp_path, EXIT_WITH_USER_PROFILER, env={"AUTOPROF_DISABLE": "true"}, tag="base")
    assert live.rc == base.rc, (live.rc, base.rc)
