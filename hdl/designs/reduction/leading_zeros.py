"""Leading-zero count as a balanced tree of multiplexers (an expression builder, not a component).

A priority chain would put every bit on one long path; the tree has depth log2(n).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Value

__all__ = ["leading_zeros"]


def leading_zeros(value: Value) -> Value:
    """Number of leading (most significant) zero bits of ``value``.

    Returns an unsigned expression in ``0 .. len(value)``; ``len(value)`` when ``value``
    is zero. The input is padded at the LSB end with ones up to a power of two, so the
    tree never sees an all-zero vector below its root except through real zeros.
    """
    width = len(value)
    if width < 1:
        raise ValueError("leading_zeros of a zero-width value")
    size = 2
    while size < width + 1:  # at least one padding bit, so the count saturates at width
        size *= 2
    padded = Cat(Const((1 << (size - width)) - 1, size - width), value)
    count, _ = _tree(padded, size)
    return count


def _tree(bits: Value, size: int):
    """(count, all_zero) of ``bits`` (``size`` a power of two >= 2)."""
    if size == 2:
        return ~bits[1], ~(bits[0] | bits[1])
    half = size // 2
    count_high, zero_high = _tree(bits[half:], half)
    count_low, zero_low = _tree(bits[:half], half)
    # high half all zero: count = half + count_low, i.e. MSB set and count_low below it
    return Cat(Mux(zero_high, count_low, count_high), zero_high), zero_high & zero_low
