"""What the built-in rules share that is no measurement: the noise floor below which a share is not reported, and
which host events are preparing data (the input-bound reading's words). The measurements the rules read (the
window's view, step times, units, kernel names) are :mod:`autoprof.measure`'s; the names a user's rule may use from
here before (``view``, ``merge``, ``total``, ``share``, ``us``, ``duration``) are still here, from there."""

from __future__ import annotations

import re

from autoprof.config import Config
from autoprof.measure.steps import step_readings
from autoprof.measure.units import duration as duration
from autoprof.measure.units import share as share
from autoprof.measure.units import us as us
from autoprof.measure.views import merge as merge
from autoprof.measure.views import total as total
from autoprof.measure.views import view as view
from autoprof.trace.model import Trace

DATALOADER_PREFIX = "enumerate(DataLoader)"
#: Preparing data inside the step, by the name of its annotation or Python function (a ``with_stack`` trace names
#: ``path/file.py(line): function``): a pipeline's ``preprocess``, a collate or tokenizer called by hand, a dataset's
#: ``__getitem__`` (:data:`DATASET_ITEM`), decoding or reading images, video or audio. Whole words only: ``Transformer`` is no transform,
#: an LLM's ``decode`` step is no input.
INPUT_NAME = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:pre_?process(?:ing|or)?|collate(?:_fn)?|default_collate|tokeniz(?:e|er|ation)\w*|"
    r"_next_data|(?:decode|read|load)_(?:video|image|images|audio|frames?)|video_reader|imread|imdecode|torchvision[/.]transforms)"
    r"(?:$|[^A-Za-z0-9])",
    re.IGNORECASE,
)


#: A dataset's ``__getitem__`` in a ``with_stack`` trace (``arrow_dataset.py(2800): __getitem__``): any other
#: ``__getitem__`` (``typing``'s, a ModuleList's) is indexing, not input.
DATASET_ITEM = re.compile(r"dataset\w*\.py\(\d+\): __getitem__", re.IGNORECASE)


def is_input_name(name: str) -> bool:
    """A host event whose time is preparing data: the DataLoader's iteration, or a name :data:`INPUT_NAME` or
    :data:`DATASET_ITEM` knows."""
    return name.startswith(DATALOADER_PREFIX) or INPUT_NAME.search(name) is not None or DATASET_ITEM.search(name) is not None


def noise_floor(config: Config | None) -> float:
    """The share of the window below which a finding about a share of it is not emitted (``Config.noise_floor``)."""
    return DEFAULT_NOISE_FLOOR if config is None else config.noise_floor


def runqueue_share(trace: Trace) -> float | None:
    """The share of a live window's recorded steps' wall time their thread waited for a CPU (each step's at most its
    wall time): None where it was not recorded or not known (an offline trace, a platform without it)."""
    got = step_readings(trace)
    if got is None:
        return None
    walls, waits = got["wall_ns"], got["runqueue_ns"]
    if any(w < 0 for w in waits) or sum(walls) <= 0:
        return None
    return min(sum(min(w, wall) for w, wall in zip(waits, walls)) / sum(walls), 1.0)


def host_floor_ns(trace: Trace, window_ns: float, config: Config | None) -> float:
    """The noise floor of a finding about a share of the host's steps (``window_ns``), of the steps' own time: a live
    window less the share its steps' thread waited for a CPU that other work held (the machine's time, not the
    program's: one 4 ms preemption in three 0.1 ms steps left a separate bias add under 1% of them, issue 49)."""
    return noise_floor(config) * window_ns * (1 - (runqueue_share(trace) or 0.0))


DEFAULT_NOISE_FLOOR = 0.01
