"""Many trace files at once (issue 26): the same findings one after another, in local processes (``--jobs``) and on
a real Dask cluster; bad files and dead workers cost only themselves; fsspec URLs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from synth import cpu_rank_doc

import autoprof
from autoprof.analysis import _fleet, engine
from autoprof.config import Config
from autoprof.render.records import file_records

pytestmark = pytest.mark.offline  # never imports torch (tests/conftest.py)

RANKS = 8
SLOW = 5  # the straggler: it waits least in the all-reduce, the others wait for it


def _rank_doc(rank: int, world: int = RANKS) -> dict[str, Any]:
    return cpu_rank_doc(rank, world, 300 if rank == SLOW else 8_000)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    for r in range(RANKS):
        (d / f"rank{r}.json").write_text(json.dumps(_rank_doc(r)))
    return d


def _lines(results: list[engine.FileResult]) -> list[str]:
    """The records the CLI writes for these results, without their timestamps."""
    out = []
    for result in results:
        if result.error is not None:
            out.append(f"error {result.error}")
            continue
        for rec in file_records(result):
            rec.pop("timestamp")
            out.append(json.dumps(rec, sort_keys=True))
    return out


def _stragglers(results: list[engine.FileResult]) -> list[int]:
    found = [f for r in results for f in r.findings if f.rule == "straggler_ranks"]
    assert len(found) == 1
    return list(found[0].evidence["straggler_ranks"])


@pytest.fixture(scope="module")
def dask_executor() -> Any:
    distributed = pytest.importorskip("distributed", reason="the dask extra: pip install 'autoprof[dask]'")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client.get_executor()
    finally:
        client.close()
        cluster.close()


@pytest.mark.slow
def test_the_same_findings_one_after_another_in_local_jobs_and_on_dask(fleet: Path, dask_executor: Executor) -> None:
    sequential = engine.analyze_files([fleet], jobs=1)
    jobs = engine.analyze_files([fleet], jobs=2)
    on_dask = engine.analyze_files([fleet], executor=dask_executor)
    assert _stragglers(sequential) == _stragglers(jobs) == _stragglers(on_dask) == [SLOW]
    assert _lines(jobs) == _lines(sequential)
    assert _lines(on_dask) == _lines(sequential)
    assert [r.rank for r in sequential] == list(range(RANKS))


@pytest.mark.slow
def test_a_bad_file_among_good_ones_costs_only_itself_on_every_path(fleet: Path, dask_executor: Executor) -> None:
    (fleet / "rank3.json").write_text('{"traceEvents": [')  # truncated
    runs = {
        "sequential": engine.analyze_files([fleet], jobs=1),
        "jobs": engine.analyze_files([fleet], jobs=2),
        "dask": engine.analyze_files([fleet], executor=dask_executor),
    }
    for how, results in runs.items():
        bad = [r for r in results if r.error is not None]
        assert [Path(r.path).name for r in bad] == ["rank3.json"], how
        assert str(fleet / "rank3.json") in (bad[0].error or "")
        assert all(r.findings for r in results if r.error is None), how
    assert _lines(runs["jobs"]) == _lines(runs["sequential"]) == _lines(runs["dask"])


class _DyingFor(Executor):
    """Runs tasks on threads, except the task of one file, whose worker 'dies'."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = ThreadPoolExecutor(2)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if str(args[0]).endswith(self.name):
            f: Future[Any] = Future()
            f.set_exception(_fleet.WorkerDiedError("the process analyzing it was killed by signal 9 (out of memory?)"))
            return f
        return self.inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait)


def test_a_worker_that_dies_costs_only_its_file(fleet: Path) -> None:
    results = engine.analyze_files([fleet], executor=_DyingFor("rank6.json"))
    bad = [r for r in results if r.error is not None]
    assert (
        len(bad) == 1
        and bad[0].error
        == f"{fleet / 'rank6.json'}: could not be analyzed: the process analyzing it was killed by signal 9 (out of memory?)"
    )
    assert sum(1 for r in results if r.findings) == RANKS - 1


def test_the_local_pool_replaces_a_worker_that_died() -> None:
    pool = _fleet.FilePool(1)
    try:
        dead = pool.submit(os._exit, 7)
        after = pool.submit(os.getpid)
        with pytest.raises(_fleet.WorkerDiedError, match="exited with code 7"):
            dead.result(timeout=60)
        assert after.result(timeout=60) != os.getpid()  # a fresh interpreter ran the next task
        failing = pool.submit(int, "not a number")
        with pytest.raises(ValueError):
            failing.result(timeout=60)
    finally:
        pool.shutdown()


def test_memory_urls(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec", reason="fsspec comes with torch")
    fs = fsspec.filesystem("memory")
    for r in range(3):
        with fs.open(f"/autoprof-test/run/rank{r}.json", "w") as f:
            f.write(json.dumps(_rank_doc(r, world=3)))
    with fs.open("/autoprof-test/run/notes.txt", "w") as f:
        f.write("not a trace")
    try:
        results = engine.analyze_files(["memory://autoprof-test/run/"])
        assert [r.path for r in results] == [f"memory://autoprof-test/run/rank{r}.json" for r in range(3)]
        assert all(r.error is None and r.findings for r in results)
        assert results[0].rank == 0 and results[2].rank == 2
        one = autoprof.analyze("memory://autoprof-test/run/rank1.json")
        assert any(f.rule == "bound_regime" for f in one)
        missing = engine.analyze_files(["memory://autoprof-test/nowhere.json"])
        assert missing[0].error == "memory://autoprof-test/nowhere.json: no such file or directory"
    finally:
        fs.rm("/autoprof-test", recursive=True)


def test_file_urls_are_plain_paths(fleet: Path) -> None:
    results = engine.analyze_files([f"file://{fleet}"], jobs=2)
    assert _stragglers(results) == [SLOW]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROF_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "autoprof", *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_cloud_url_without_its_package_is_one_line_naming_it() -> None:
    pytest.importorskip("fsspec", reason="fsspec comes with torch")
    try:
        import s3fs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("s3fs is installed here: the message for a missing protocol package cannot be shown")
    out = _cli("analyze", "s3://some-bucket/run/")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("autoprof: s3://some-bucket/run/: s3:// needs a package that is not installed") and "s3fs" in line


@pytest.mark.slow
def test_the_command_with_jobs_finds_the_straggler_and_matches_one_after_another(fleet: Path) -> None:
    one = _cli("analyze", "--json", "--jobs", "1", str(fleet))
    two = _cli("analyze", "--json", "--jobs", "2", str(fleet))
    assert one.returncode == two.returncode == 0, two.stderr

    def strip(text: str) -> list[str]:
        recs = [json.loads(line) for line in text.splitlines()]
        for r in recs:
            r.pop("timestamp"), r.pop("pid")
        return [json.dumps(r, sort_keys=True) for r in recs]

    assert strip(one.stdout) == strip(two.stdout)
    strag = [json.loads(line) for line in two.stdout.splitlines() if '"straggler_ranks"' in line and '"rule"' in line]
    assert strag and strag[0]["evidence"]["straggler_ranks"] == [SLOW]
    bad = _cli("analyze", "--jobs", "0", str(fleet))
    assert bad.returncode == 2 and "--jobs" in bad.stderr


def test_the_scheduler_option_needs_a_reachable_scheduler(fleet: Path) -> None:
    out = _cli("analyze", "--scheduler", "tcp://127.0.0.1:9", str(fleet))
    assert out.returncode == 2
    (line,) = [x for x in out.stderr.strip().splitlines() if x.startswith("autoprof:")]
    assert line.startswith("autoprof: cannot reach the Dask scheduler at tcp://127.0.0.1:9")


def test_a_portable_config_leaves_the_host_logger_here() -> None:
    import logging

    cfg = Config(logger=logging.getLogger("x")).replace(logger=None)
    assert cfg.logger is None
