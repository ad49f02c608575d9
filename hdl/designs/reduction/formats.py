"""Configuration (pure Python) of the element formats the reduction datapath adds.

:class:`FloatFormat` describes any IEEE-754-style binary floating-point format by its
exponent and fraction widths; :func:`adder_format` maps a project dtype name
(``hdl.contracts.dtypes``) to the datapath that adds it. The golden arithmetic stays in
:mod:`hdl.contracts.dtypes`; nothing here computes sums.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.dtypes import DType, get_dtype

__all__ = ["FloatFormat", "IntFormat", "adder_format"]


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign, ``exponent_bits``, ``fraction_bits`` (MSB to LSB).

    Bias is ``2**(exponent_bits-1) - 1``; exponent all ones encodes infinities (fraction
    0) and NaNs; exponent 0 encodes zeros and subnormals. The canonical quiet NaN is
    sign 0, exponent all ones, fraction MSB set (the policy of :mod:`hdl.contracts.dtypes`).
    """

    exponent_bits: int
    fraction_bits: int

    def __post_init__(self):
        for name in ("exponent_bits", "fraction_bits"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise FredError(f"FloatFormat: {name} must be an int, got {value!r}")
        if not 2 <= self.exponent_bits <= 15:
            raise FredError(f"FloatFormat: exponent_bits must be in 2..15, got {self.exponent_bits}")
        if not 1 <= self.fraction_bits <= 112:
            raise FredError(f"FloatFormat: fraction_bits must be in 1..112, got {self.fraction_bits}")

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.fraction_bits

    @property
    def exponent_max(self) -> int:
        """The all-ones exponent field (infinities and NaNs)."""
        return (1 << self.exponent_bits) - 1

    @property
    def canonical_nan(self) -> int:
        return (self.exponent_max << self.fraction_bits) | (1 << (self.fraction_bits - 1))

    @property
    def infinity(self) -> int:
        """Bit pattern of +infinity (OR in the sign bit for -infinity)."""
        return self.exponent_max << self.fraction_bits


@dataclass(frozen=True)
class IntFormat:
    """Two's-complement integer of ``width`` bits, added with wrap-around."""

    width: int

    def __post_init__(self):
        if not isinstance(self.width, int) or isinstance(self.width, bool) or self.width < 1:
            raise FredError(f"IntFormat: width must be a positive int, got {self.width!r}")


def adder_format(dtype: str | DType) -> FloatFormat | IntFormat:
    """The datapath format for a project dtype (``fp16``, ``bf16``, ``fp32``, ``int32``)."""
    dtype = get_dtype(dtype)
    if dtype.is_float:
        return FloatFormat(dtype.exponent_bits, dtype.fraction_bits)
    return IntFormat(dtype.width)
