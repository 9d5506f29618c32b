"""A helper process of :mod:`autoprof.trace._pool`: parses and consumes batches of events until its input
pipe closes."""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Sequence


def main(argv: Sequence[str]) -> None:
    gc.disable()  # many short-lived containers, no cycles: reference counting frees everything
    from autoprof.trace.events import BatchResult, BatchStatus, read_batch

    with os.fdopen(int(argv[0]), "rb") as fin, os.fdopen(int(argv[1]), "wb") as fout:
        while True:
            try:
                bid, text, source = pickle.load(fin)
            except EOFError:
                return
            try:
                result = read_batch(text, source)
            except Exception:
                result = BatchResult(BatchStatus.FAILED)
            pickle.dump((bid, result), fout, protocol=pickle.HIGHEST_PROTOCOL)
            fout.flush()
