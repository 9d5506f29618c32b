"""ns per call of a trivial function, side by side in one run: bare, bare wrapt and closure passthroughs, and @autoprof
disabled (at decoration time and at call time), idle (after its windows) with the trigger off and on (its always-on
step timing, ``trigger=True``) and in the wait phase; then the same idle case for an ``async def`` function (each
coroutine driven to its end with ``send(None)``, no event loop).

Run:  python benchmarks/overhead.py
Targets: idle @autoprof adds at most 1 µs per call over the bare call, and at most 200 ns in the units of the quiet run
where wrapt's passthrough added 664 ns (issue 37; printed scaled by this run's wrapt passthrough); disabled adds
nothing; the trigger's timing adds at most 100 ns per call to the idle decorator in those units (issue 35); the async
wrapper's idle cost is within 10 % of the sync one's.
Each figure is the best of several interleaved repeats (min is the least noisy estimate on shared machines).
"""

from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import wrapt

import autoprof

N = 200_000
REPEATS = 7
QUIET_WRAPT_ADDED = 664.0  # ns: what wrapt's passthrough added in the quiet run the issues' goals were set in


def bare(x: int) -> int:
    return x


async def abare(x: int) -> int:
    return x


def async_passthrough(fn):  # type: ignore[no-untyped-def]
    """What any ``async def`` wrapper costs: one coroutine more, and the await that delegates to the wrapped one."""

    async def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return await fn(*args, **kwargs)

    return wrapper


def drive(fn, x: int) -> int:  # type: ignore[no-untyped-def]
    """Run a coroutine function's call to its end without an event loop (nothing in it awaits)."""
    coro = fn(x)
    try:
        coro.send(None)
    except StopIteration as stop:
        return int(stop.value)
    raise RuntimeError("the coroutine awaited")


def closure_passthrough(fn):  # type: ignore[no-untyped-def]
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return fn(*args, **kwargs)

    return wrapper


@wrapt.decorator
def _passthrough(wrapped, instance, args, kwargs):  # type: ignore[no-untyped-def]
    return wrapped(*args, **kwargs)


def main() -> None:
    autoprof.configure(sink=os.devnull, background=False)
    wrapt_fn = _passthrough(bare)

    autoprof.configure(enabled=False)
    disabled_at_decoration = autoprof(bare)
    autoprof.configure(enabled=True)

    disabled_at_call = autoprof(name="disabled_at_call")(bare)
    idle = autoprof(name="idle", skip_first=0, wait=0, warmup=1, active=1)(bare)
    for i in range(3):
        idle(i)  # its one window opens and closes: from here on it is idle
    # the trigger's always-on timing; its baseline is refreshed every few calls (a limit no trivial call reaches)
    idle_trigger = autoprof(name="idle_trigger", skip_first=0, wait=0, warmup=1, active=1, trigger=True)(bare)
    for i in range(3):
        idle_trigger(i)
    waiting = autoprof(name="waiting", skip_first=0, wait=10**9, warmup=1, active=1)(bare)  # the longest wait allowed

    def disabled_call(x: int) -> int:
        return disabled_at_call(x)

    cases = {
        "bare function": bare,
        "wrapt passthrough": wrapt_fn,
        "closure passthrough": closure_passthrough(bare),
        "@autoprof disabled (decoration)": disabled_at_decoration,
        "@autoprof disabled (call time)": None,
        "@autoprof idle (after windows)": idle,
        "@autoprof idle, trigger on": idle_trigger,
        "@autoprof wait phase": waiting,
    }
    best = {k: float("inf") for k in cases}
    for _ in range(REPEATS):
        for name, fn in cases.items():
            if fn is None:
                autoprof.configure(enabled=False)
                t = timeit.timeit(lambda: disabled_at_call(1), number=N)
                autoprof.configure(enabled=True)
            else:
                t = timeit.timeit(lambda fn=fn: fn(1), number=N)
            best[name] = min(best[name], t / N * 1e9)
    base = best["bare function"]
    print(f"{'case':34s} {'ns/call':>9s} {'ratio':>7s} {'added ns':>9s}")
    for name, ns in best.items():
        print(f"{name:34s} {ns:9.1f} {ns / base:7.2f} {ns - base:9.1f}")
    added = best["@autoprof idle (after windows)"] - base
    print(f"\nidle target (<= 1000 ns added): {'met' if added <= 1000 else 'NOT met'} ({added:.0f} ns)")
    timing = best["@autoprof idle, trigger on"] - best["@autoprof idle (after windows)"]
    print(f"trigger's timing over the idle decorator (<= 100 ns): {'met' if timing <= 100 else 'NOT met'} ({timing:.0f} ns)")
    # Issues 35 and 37 set their goals on a quiet run where wrapt's passthrough added 664 ns: the same goals in this
    # run's units, scaled by what wrapt's passthrough adds here (a busy machine runs every figure slower).
    wrapt_added = best["wrapt passthrough"] - base
    scale = wrapt_added / QUIET_WRAPT_ADDED
    for label, got, goal in (("idle decorator added", added, 200), ("trigger's timing over idle", timing, 100)):
        print(
            f"{label}: {got / scale:.0f} ns in the quiet run's units (x{scale:.2f} here; goal <= {goal} ns): "
            f"{'met' if got <= goal * scale else 'NOT met'}"
        )

    aidle = autoprof(name="aidle", skip_first=0, wait=0, warmup=1, active=1)(abare)
    for i in range(3):
        drive(aidle, i)  # its one window opens and closes: from here on it is idle
    acases = {"async bare": abare, "async passthrough wrapper": async_passthrough(abare), "async @autoprof idle": aidle}
    abest = {k: float("inf") for k in acases}
    for _ in range(REPEATS):
        for label, fn in acases.items():
            t = timeit.timeit(lambda fn=fn: drive(fn, 1), number=N)
            abest[label] = min(abest[label], t / N * 1e9)
    abase = abest["async bare"]
    print()
    for label, ns in abest.items():
        print(f"{label:34s} {ns:9.1f} {ns / abase:7.2f} {ns - abase:9.1f}")
    inherent = abest["async passthrough wrapper"] - abase
    aadded = abest["async @autoprof idle"] - abest["async passthrough wrapper"]
    ratio = aadded / added if added > 0 else float("inf")
    print(
        f"async idle cost beyond any async wrapper's own ({inherent:.0f} ns: a coroutine more) / sync idle cost: {ratio:.2f} "
        f"(target <= 1.10: {'met' if ratio <= 1.10 else 'NOT met'})"
    )
    print(f"disabled at decoration is the original function: {disabled_at_decoration is bare}")
    autoprof.flush()


if __name__ == "__main__":
    main()
