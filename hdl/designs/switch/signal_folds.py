"""Left folds of Amaranth values by ``|`` and ``&``, written once for the switch's control
logic (the control unit, the packet switch and its shared flows).

Each folds its values from the left (``((a | b) | c) ...``), so the netlist is the one a loop
over the values writes; the values may be any width (a bitwise fold, not a reduction of one
value's bits: for that, Amaranth's ``.any()`` / ``.all()``)."""

from __future__ import annotations

from amaranth.hdl import Const

__all__ = ["or_fold", "and_fold"]


def or_fold(values):
    """``values[0] | values[1] | ...``; a 1-bit 0 when there are none."""
    values = list(values)
    if not values:
        return Const(0, 1)
    result = values[0]
    for v in values[1:]:
        result = result | v
    return result


def and_fold(values):
    """``values[0] & values[1] & ...``; a 1-bit 1 when there are none (nothing to wait for)."""
    values = list(values)
    if not values:
        return Const(1, 1)
    result = values[0]
    for v in values[1:]:
        result = result & v
    return result
