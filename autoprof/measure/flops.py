"""FLOPs of matmul-family ops from their recorded input shapes (``record_shapes``). Pure; no torch.

The formulas are the ones torch.utils.flop_counter uses for these ops (2·M·K·N per matrix product);
they are restated here so the rules stay free of torch at analysis time.
"""

from __future__ import annotations

from math import prod
from typing import Any


def _dims(x: Any) -> list[int] | None:
    if type(x) is not list:
        return None
    for d in x:
        if type(d) is not int or d < 0:
            return None
    return x


def matmul_flops(name: str, inputs: list[Any]) -> int | None:
    """FLOPs of one call, or None when the shapes do not say."""
    try:
        if name == "aten::mm":
            a, b = _dims(inputs[0]), _dims(inputs[1])
            if a and b and len(a) == 2 and len(b) == 2:
                return 2 * a[0] * a[1] * b[1]
        elif name == "aten::addmm":
            a, b = _dims(inputs[1]), _dims(inputs[2])
            if a and b and len(a) == 2 and len(b) == 2:
                return 2 * a[0] * a[1] * b[1]
        elif name in ("aten::bmm", "aten::baddbmm", "aten::addbmm"):
            off = 0 if name == "aten::bmm" else 1
            a, b = _dims(inputs[off]), _dims(inputs[off + 1])
            if a and b and len(a) == 3 and len(b) == 3:
                return 2 * a[0] * a[1] * a[2] * b[2]
        elif name == "aten::matmul":
            a, b = _dims(inputs[0]), _dims(inputs[1])
            if a and b:
                k = a[-1]
                if len(a) == 1 and len(b) == 1:
                    return 2 * k
                if len(b) == 1:
                    return 2 * prod(a)
                if len(a) == 1:
                    return 2 * prod(b)
                batch = max(prod(a[:-2]), prod(b[:-2]))
                return 2 * batch * a[-2] * k * b[-1]
        elif name == "aten::linear":
            x, w = _dims(inputs[0]), _dims(inputs[1])
            if x and w and len(w) == 2:
                return 2 * prod(x[:-1]) * x[-1] * w[0]
    except (IndexError, TypeError):
        return None
    return None


def matmul_out_shape(a: list[Any], b: list[Any]) -> list[int] | None:
    """Output shape of ``torch.matmul(a, b)`` from input shapes, or None when unknown."""
    if not (isinstance(a, list) and isinstance(b, list)) or not a or not b:
        return None
    if len(a) == 1 and len(b) == 1:
        return []
    if len(b) == 1:
        return list(a[:-1])
    if len(a) == 1:
        return list(b[:-2]) + [b[-1]]
    ba, bb = list(a[:-2]), list(b[:-2])
    n = max(len(ba), len(bb))
    ba, bb = [1] * (n - len(ba)) + ba, [1] * (n - len(bb)) + bb
    batch = [x if y == 1 else y for x, y in zip(ba, bb)]
    return batch + [a[-2], b[-1]]
