"""A record written by a signal handler while its own thread writes one: Python runs a handler on the main thread
between two bytecodes of whatever runs there, autoprof's record writer included (its wait on a slow sink is a
``select`` loop in Python). The writer's lock was a plain ``Lock``: the handler's record waited forever for the lock
its own thread held, and the program hung. Now the handler's line is queued and written right after the line under
way, in order; another thread's record still waits its turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)  # (the offline shim kept)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path
    )


def test_a_record_written_inside_its_own_threads_write_is_queued_after_it(tmp_path: Path) -> None:
    """Deterministic: the "handler" runs inside the write of the outer record (where a signal lands between two
    bytecodes), and writes two records of its own; then another thread writes one while the first thread's write is
    still under way."""
    sink = tmp_path / "records.jsonl"
    out = _run(
        f"""
        import os, threading
        import autoprof
        from autoprof.render import emit
        autoprof.configure(sink={str(sink)!r})
        real = emit._LineWriter._write
        fields = dict(target=None, window=None, reason="r")
        other = threading.Thread(target=emit.emit, args=("autoprof.warning", "warning"), kwargs=dict(fields, message="other thread"))

        def write(self, data, deadline):
            if b"outer" in data and not getattr(write, "done", False):
                write.done = True
                for k in range(2):  # the handler: records of its own, inside this thread's write
                    emit.emit("autoprof.warning", "warning", target=None, window=None, message=f"handler {{k}}", reason="r")
                other.start()
                other.join(0.2)
                assert other.is_alive()  # another thread's record waits for this write
            return real(self, data, deadline)

        emit._LineWriter._write = write
        done = threading.Event()
        def main():
            emit.emit("autoprof.warning", "warning", target=None, window=None, message="outer", reason="r")
            done.set()
        t = threading.Thread(target=main, daemon=True)
        t.start()
        if not done.wait(20):
            print("HUNG", flush=True)
            os._exit(3)  # (the exit's own summary record would wait on the same lock)
        other.join(20)
        print("OK")
        """,
        tmp_path,
    )
    assert out.returncode == 0 and "OK" in out.stdout, (out.stdout, out.stderr)
    messages = [m for m in (json.loads(x).get("message") for x in sink.read_text().splitlines()) if m]  # (no run, summary)
    assert messages == ["outer", "handler 0", "handler 1", "other thread"], messages


def test_a_storm_of_signals_whose_handler_writes_records_to_a_slow_sink_neither_hangs_nor_loses_one(tmp_path: Path) -> None:
    """Real signals: a SIGALRM every millisecond whose handler writes a record, while the main thread writes records
    to a FIFO its reader drains slowly (each write waits in the writer's ``select`` loop, where handlers run)."""
    fifo = tmp_path / "sink.fifo"
    os.mkfifo(fifo)
    out = _run(
        f"""
        import json, os, signal, threading, time
        import autoprof
        from autoprof.render import emit
        got = []
        fd = os.open({str(fifo)!r}, os.O_RDONLY | os.O_NONBLOCK)  # a reader before autoprof opens it to write
        closed = threading.Event()
        def reader():
            buf = b""
            while True:
                try:
                    chunk = os.read(fd, 512)
                except BlockingIOError:
                    chunk = None
                if not chunk:
                    if chunk == b"" and closed.is_set():
                        break
                    time.sleep(0.0005)
                    continue
                buf += chunk
                time.sleep(0.0005)  # slow: the pipe fills, the writer waits
            got.extend(buf.decode().splitlines())
        r = threading.Thread(target=reader)
        r.start()
        autoprof.configure(sink={str(fifo)!r})
        handled = [0]
        def handler(signum, frame):
            handled[0] += 1
            emit.emit("autoprof.warning", "warning", target=None, window=None, message="handler", reason="r")
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
        pad = "x" * 2000  # long lines: the 64 KiB pipe fills after a few dozen
        for k in range(400):
            emit.emit("autoprof.warning", "warning", target=None, window=None, message=f"main {{k}}", reason="r", pad=pad)
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        emit.reset_output()  # closes the sink: the reader sees its end
        closed.set()
        r.join(60)
        messages = [json.loads(x)["message"] for x in got if '"autoprof.warning"' in x]
        mains = [m for m in messages if m.startswith("main")]
        seen = {{"handled": handled[0], "from_handler": messages.count("handler"), "main": len(mains)}}
        print(json.dumps(dict(seen, ordered=mains == [f"main {{k}}" for k in range(400)])))
        """,
        tmp_path,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["main"] == 400 and seen["ordered"], seen
    assert seen["handled"] > 0 and seen["from_handler"] == seen["handled"], seen  # every handler's record, none lost


def test_a_close_asked_inside_its_own_threads_write_waits_for_that_write(tmp_path: Path) -> None:
    """A handler that closes the sink (``reset_output``, a new sink configured) inside its thread's write: the line
    under way is written whole, then the sink is closed."""
    from autoprof.render import emit

    sink = tmp_path / "r.jsonl"
    writer = emit._LineWriter(str(sink))
    real = writer._write
    calls: list[int] = []

    def write(data: bytes, deadline: float) -> None:
        calls.append(writer._fd)
        if len(calls) == 1:
            writer.close()  # the "handler": its close must not pull the file from under this write
            assert writer._fd == calls[0] and writer.close_after
        real(data, deadline)

    writer._write = write  # type: ignore[method-assign]
    writer.msg('{"event": "first"}')
    assert writer._fd == -1 and not writer.close_after and not writer.busy  # closed once the write was done
    writer.msg('{"event": "second"}')  # opens it again
    writer.close()
    assert sink.read_text().splitlines() == ['{"event": "first"}', '{"event": "second"}']
