"""A target's state in parts (autoprof.live.session: Position, Said, the trigger's Watch), written through their own
methods only, and a step's bookkeeping as one call into the session at each end of it (begin_step, end_step)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from autoprof.live import instrument, session, trigger
from autoprof.live.schedule import Phase, Schedule
from autoprof.live.session import ANNOTATE, BARE, RECORD, SESSION, Counts, Position, Said, Step, Target

LIVE = Path(instrument.__file__).parent
#: The names the live modules give a target, a watch or a target's part (a Window is ``window``/``held`` in the
#: session, a step ``step``: those are the session's own bookkeeping).
HOLDERS = {"target", "t", "holder", "other", "stale", "watch", "w", "position", "said", "counts"}
STATE = set(Target.__slots__) | set(Position.__slots__) | set(Said.__slots__) | set(Counts.__slots__) | set(trigger.Watch.__slots__)


def _writes(path: Path, holders: set[str]) -> list[str]:
    """Each assignment in ``path`` to an attribute of a target's state (a slot of Target, its parts or the Watch) on an
    object that is not ``self``: ``target.pos = ...``, ``target.watch.start = ...``, ``a, w.rq = ...``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for t in targets:
            if not isinstance(t, ast.Attribute) or t.attr not in STATE:
                continue
            base = t.value
            owner = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
            if owner in holders or owner in ("watch", "position", "said", "counts", "target"):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(t)}")
    return found


def test_the_instrument_writes_no_attribute_of_a_target_nor_of_its_watch() -> None:
    assert _writes(LIVE / "instrument.py", HOLDERS | {"held"}) == []


def test_the_session_writes_a_target_only_through_its_methods() -> None:
    assert _writes(LIVE / "session.py", HOLDERS) == []


def test_the_writer_check_sees_a_write(tmp_path: Path) -> None:
    """The check above reads assignments of every shape (it would see the writes the instrument made before)."""
    src = "target.pos = 1\na, watch.rq = 1, 2\nt.done += 1\nself.target.current = None\nwindow.steps = []\n"
    path = tmp_path / "probe.py"
    path.write_text(src)
    assert _writes(path, HOLDERS) == [
        "probe.py:1: target.pos",
        "probe.py:2: watch.rq",
        "probe.py:3: t.done",
        "probe.py:4: self.target.current",
    ]


def test_a_position_goes_back_to_its_warmup_and_swaps_a_triggered_schedule_in_and_out() -> None:
    own = Schedule(skip_first=1, wait=2, warmup=1, active=2, repeat=0)
    p = Position(own)
    for _ in range(5):
        p.advance()
    assert p.place().phase == Phase.ACTIVE and p.pos == 5
    p.redo()
    assert p.pos == 5  # said, not done: the next step's start takes it
    p.take_rewind()
    assert p.pos == 3 and not p.rewind  # the cycle's warmup (skip_first 1 + wait 2)
    p.take_rewind()
    assert p.pos == 3
    p.next_cycle()
    assert p.pos == 6
    other = Schedule(skip_first=0, wait=0, warmup=1, active=1, repeat=1)
    p.swap_in(other, trigger=None, done=True)  # type: ignore[arg-type]
    assert p.schedule is other and p.pos == 0 and p.own() is own and p.saved == (own, 6, True)
    assert p.tried() == 0 and p.tried() == 1
    assert p.swap_back() is True
    assert p.schedule is own and p.pos == 6 and p.saved is None and p.swap_back() is None


def test_said_says_each_kind_once_and_forgets_only_what_it_is_told() -> None:
    said = Said()
    assert said.once("foreign", "yield")
    assert not said.once("yield") and not said.once("foreign")
    said.note("incomplete")
    assert "incomplete" in said and not said.once("incomplete")
    said.forget("incomplete")
    assert said.once("incomplete") and "abandoned" not in said


def test_a_new_run_forgets_the_incomplete_warning_and_its_counts_and_keeps_the_rest() -> None:
    target = Target("t", Schedule(skip_first=0, wait=0, warmup=1, active=1, repeat=0))
    target.said.note("incomplete", "foreign")
    target.account(5)
    target.account(7)
    target.deferred_call()
    assert target.calls == 2 and target.counts.first_call_ns == 5 and target.steady_ns() == 7 and target.counts.deferred == 1
    assert target.closed_window() == 0 and target.cut_try() == 1
    target.restart(done=False)
    assert "foreign" in target.said and "incomplete" not in target.said
    assert target.calls == 0 and target.counts.deferred == 0 and target.steady_ns() is None and target.counts.cut_tries == 0
    assert target.window == 1  # window indexes go on across runs


class _Recorded(Step):
    __slots__ = ()


@pytest.mark.parametrize("wait", [0, 2])
def test_one_call_at_each_end_of_a_step_says_what_to_do_and_steps_the_schedule(wait: int, records: Any) -> None:
    """A schedule's steps driven by the session's two calls alone: a wait step is annotated while a profiler records
    and steps on; the warmup opens the window; the active steps record and the last one closes it (one window record)."""
    target = SESSION.target("driven", Schedule(skip_first=0, wait=wait, warmup=1, active=2, repeat=1))
    target.claim(0)
    acts = []
    for n in range(wait + 4):
        step = _Recorded(target, n)
        acts.append(SESSION.begin_step(step))
        assert target.current is step
        assert target.leave(1000) is step and target.current is None
        SESSION.end_step(step, 1000, False, (500, 0))
    assert acts == [ANNOTATE] * wait + [ANNOTATE, RECORD, RECORD, ANNOTATE]  # the last: the schedule is over
    assert target.done and target.window == 1 and SESSION.window is None and target.calls == wait + 4
    (win,) = records.of("autoprof.window", target="driven")
    assert win["steps"] == [wait + 1, wait + 2]


def test_a_window_that_cannot_open_defers_the_cycle_to_its_warmup(monkeypatch: pytest.MonkeyPatch, records: Any) -> None:
    target = SESSION.target("deferred", Schedule(skip_first=0, wait=1, warmup=1, active=1, repeat=0))
    monkeypatch.setattr(session.Session, "open", lambda self, target, cfg: None)
    for n in range(3):
        step = _Recorded(target, n)
        assert SESSION.begin_step(step) == ANNOTATE
        target.leave(10)
        SESSION.end_step(step, 10, False)
    assert target.counts.deferred == 2 and target.pos == 1 and target.window == 0  # each warmup sent back to itself


def test_a_cycle_skipped_while_the_analysis_is_behind_is_bare(monkeypatch: pytest.MonkeyPatch, records: Any) -> None:
    target = SESSION.target("behind", Schedule(skip_first=0, wait=0, warmup=1, active=1, repeat=0))
    monkeypatch.setattr(session.Session, "behind", lambda self, cfg: True)
    step = _Recorded(target, 0)
    assert SESSION.begin_step(step) == BARE and not step.advance
    assert target.pos == 2 and target.counts.skipped_behind == 1 and SESSION.window is None
