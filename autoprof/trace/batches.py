"""The ``traceEvents`` array of a file, read in batches: parsed here or in helper processes, merged in file order.

Batches are taken from the :class:`~autoprof.trace.jsonstream.StreamReader`; a large file's batches go to
helper processes (:mod:`autoprof.trace._pool`) once ``pool_after`` batches were read here, and this process
parses a batch itself only while every helper has its share queued. Results are merged into the consumer in
file order. A batch that does not parse whole sends everything from it on through the reader's exact
scanner; a batch whose helper failed or found a bad event is consumed again here (so an error names the
event's index in the whole file). The array's last events always go through the scanner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprof.trace import _pool
from autoprof.trace.events import BatchResult, BatchStatus, EventConsumer, consume_batch, read_batch
from autoprof.trace.jsonstream import Batch, StreamReader

POOL_AFTER = 2  # batches read in this process before helper processes are started (a large file only)


@dataclass
class _InFlight:
    """Batches taken and not yet merged, in file order; ``done`` counts those merged (the id of the first)."""

    pending: list[Batch] = field(default_factory=list)
    ready: dict[int, BatchResult] = field(default_factory=dict)  # results of batches read here while helpers ran
    done: int = 0


def read_array(reader: StreamReader, consumer: EventConsumer, workers: int, pool_after: int = POOL_AFTER) -> None:
    """Consume the elements of the array ``reader`` stands in (its '[' consumed), up to its ']'."""
    flight = _InFlight()
    pool: _pool.Pool | None = None
    limit = _pool.PER_WORKER * workers + 4  # batches in flight before this waits for the oldest
    try:
        while True:
            batch = reader.take_batch()
            last = batch is None  # the rest is for the scanner: wait for every batch in flight
            if batch is not None:
                bid = flight.done + len(flight.pending)
                flight.pending.append(batch)
                if pool is None and workers > 0 and bid == pool_after:
                    pool = _pool.Pool.start(workers, reader.src)
                if pool is not None and pool.submit(bid, batch.text):
                    pass
                elif len(flight.pending) == 1:  # nothing before it: straight into the builder
                    if not consume_batch(consumer, batch.text):
                        return _rescan(reader, consumer, flight)
                    flight.pending.clear()
                    flight.done += 1
                    continue
                else:
                    flight.ready[bid] = read_batch(batch.text, reader.src)
            if not _merge_ready(consumer, flight, pool, last, limit):
                return _rescan(reader, consumer, flight)
            if last:
                break
    finally:
        if pool is not None:
            pool.close()
    consumer.consume(reader.events())


def _merge_ready(consumer: EventConsumer, flight: _InFlight, pool: _pool.Pool | None, last: bool, limit: int) -> bool:
    """Merge finished batches in order, waiting for the oldest at the end (``last``) or while more than ``limit``
    are in flight; False when one did not parse."""
    while flight.pending:
        result = flight.ready.pop(flight.done, None)
        if result is None and pool is not None:
            result = pool.result(flight.done, wait=last or len(flight.pending) > limit)
        if result is None:
            if not last:
                return True
            result = BatchResult(BatchStatus.FAILED)  # cannot happen (waited for); redone here rather than lost
        if not _merge(consumer, result, flight.pending[0].text):
            return False
        flight.pending.pop(0)
        flight.done += 1
    return True


def _merge(consumer: EventConsumer, result: BatchResult, text: str) -> bool:
    if result.status is BatchStatus.READ and result.columns is not None:
        consumer.merge(result.columns)
        return True
    if result.status is BatchStatus.UNPARSED:
        return False
    return consume_batch(consumer, text)  # consumed here: raises the exact error, with the index in the file


def _rescan(reader: StreamReader, consumer: EventConsumer, flight: _InFlight) -> None:
    """Read everything from the first unmerged batch on with the scanner (exact; names any problem)."""
    reader.rewind(flight.pending)
    flight.pending.clear()
    consumer.consume(reader.events())
