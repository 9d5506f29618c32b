"""The cross-rank exchange of a live run: each profiled rank's window summary goes through the default process
group's key-value store to the lowest profiled rank, which compares them (:mod:`autoprof.analysis.ranks`, the
same comparison ``autoprof analyze`` makes of per-rank trace files) and writes the findings.

Protocol: every profiled rank writes one small JSON summary (median step time, collective waits, regime)
under ``autoprof/<target>/<window>/<rank>``; the lowest profiled rank waits, on the analysis thread and at
most ``cross_rank_timeout_s``, for the others, reads them, deletes the keys and compares. No collective is
issued, so ranks at different windows, excluded or gone can never hang the job: the comparison is then
skipped with one warning record. Cost: one store write per rank per window, plus one wait and world_size
reads on the comparing rank. torch.distributed is only read from ``sys.modules`` (never imported here).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

from autoprof import _guard
from autoprof.analysis import ranks
from autoprof.config import Config
from autoprof.render import emit as _emit

KEY_PREFIX = "autoprof"


def key_prefix(target: str, window: int) -> str:
    """The store keys of one window of one target: the prefix, then the rank."""
    return f"{KEY_PREFIX}/{target}/{window}/"


def profiled_ranks(config: Config, world: int) -> list[int]:
    """The ranks that profile (``config.ranks``, else all), lowest first: the first one compares."""
    chosen = sorted(config.ranks) if config.ranks is not None else list(range(world))
    return [r for r in chosen if r < world]


def compare(target: str, window: int, rank: int, world: int, summary: ranks.RankSummary | None, config: Config) -> None:
    """This rank's part of the comparison of ``window`` of ``target``; never raises an Exception."""
    ctx = {"target": target, "window": window}
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return  # no process group: no cross-rank comparison
    chosen = profiled_ranks(config, world)
    if rank not in chosen:
        return
    if len(chosen) < 2:
        _skipped(f"only rank(s) {chosen} of {world} are profiled", ctx)
        return
    if summary is None:
        return
    prefix = key_prefix(target, window)
    with _guard.worker(_failed, ctx):
        from torch.distributed.distributed_c10d import _get_default_store

        store = _get_default_store()
        store.set(prefix + str(rank), json.dumps(summary.to_json()))
        if rank != chosen[0]:
            return
        got = _gather(store, prefix, chosen, config.cross_rank_timeout_s, ctx)
        if got is None:
            return
        for finding in ranks.check(got):
            _emit.finding(finding, **ctx, source="live")


def _gather(store: Any, prefix: str, chosen: list[int], timeout_s: float, ctx: dict[str, Any]) -> list[ranks.RankSummary] | None:
    """Every chosen rank's summary (their keys deleted after), or None (one warning) when some did not report
    within ``timeout_s``."""
    keys = [prefix + str(r) for r in chosen]
    if not _waited(store, keys, timeout_s):
        missing = [r for r, k in zip(chosen, keys) if not _has(store, k)]
        _skipped(
            f"rank(s) {missing} did not report window {ctx['window']} of {ctx['target']} within "
            f"{timeout_s:g} s (excluded, at another window, or gone)",
            ctx,
        )
        return None
    got = [ranks.RankSummary.from_json(json.loads(store.get(k))) for k in keys]
    for k in keys:
        with _guard.quiet("cross_rank.delete_key"):
            store.delete_key(k)
    return got


def _waited(store: Any, keys: list[str], timeout_s: float) -> bool:
    """Whether every key came within ``timeout_s`` (else the caller's warning says which did not)."""
    with _guard.quiet("cross_rank.wait"):
        store.wait(keys, timedelta(seconds=timeout_s))
        return True
    return False


def _skipped(why: str, ctx: dict[str, Any]) -> None:
    _emit.warning(f"cross-rank comparison skipped: {why}", "cross_rank_skipped", **ctx)


def _failed(ctx: dict[str, Any], e: Exception) -> None:
    """This rank's part of the comparison failed: skipped, with one warning naming the exception."""
    _skipped(f"{type(e).__name__}: {e}", ctx)


def _has(store: Any, key: str) -> bool:
    with _guard.quiet("cross_rank.check"):
        return bool(store.check([key]))
    return False
