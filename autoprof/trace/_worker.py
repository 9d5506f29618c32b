"""A helper process of :mod:`autoprof.trace._pool`: parses and consumes batches of events until its input
pipe closes."""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Sequence


def main(argv: Sequence[str]) -> None:
    gc.disable()  # many short-lived containers, no cycles: reference counting frees everything
    from autoprof import _guard
    from autoprof.trace.events import BatchResult, BatchStatus, read_batch

    with os.fdopen(int(argv[0]), "rb") as fin, os.fdopen(int(argv[1]), "wb") as fout:
        while True:
            try:
                bid, text, source = pickle.load(fin)
            except EOFError:
                return
            result = BatchResult(BatchStatus.FAILED)  # unless read: redone where the event's index in the file is known
            with _guard.quiet("batch.redo"):
                result = read_batch(text, source)
            pickle.dump((bid, result), fout, protocol=pickle.HIGHEST_PROTOCOL)
            fout.flush()
