"""Units for records and messages: ns as µs or ms, a time or a share in words, a rounded share. Pure."""

from __future__ import annotations


def us(ns: float) -> float:
    """ns → µs, rounded for records."""
    return round(ns / 1000.0, 3)


def ms(ns: float) -> float:
    return round(ns / 1e6, 3)


def duration(ns: float) -> str:
    """A time for a message, with the digits it is worth: "22 µs", "1.5 ms", "158 ms", "2.31 s" (never "0.0 ms"
    for a real figure)."""
    if ns < 1e6:
        v, unit = ns / 1e3, "µs"
    elif ns < 1e9:
        v, unit = ns / 1e6, "ms"
    else:
        v, unit = ns / 1e9, "s"
    text = f"{v:.3g}"
    if "e" in text:  # 3 significant digits of a number >= 1000 (over 999 s)
        text = f"{v:.0f}"
    return f"{text} {unit}"


def percent(part: float, whole: float) -> str:
    """A share for a message: whole percents, and "<1%" rather than "0%" for a share that is not zero."""
    if whole <= 0:
        return "0%"
    ratio = part / whole
    return "<1%" if 0 < ratio < 0.005 else f"{ratio:.0%}"


def share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole > 0 else 0.0
