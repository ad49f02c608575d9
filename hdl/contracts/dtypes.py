"""Element formats the switch reduces, and their golden (reference) arithmetic.

Every format is handled as raw bit patterns (unsigned integers of ``width`` bits) so
that the reference model, the Amaranth simulator tests, the cocotb benches and the
system model all compare bits, never rounded decimal values.

Formats
    ``fp16``  IEEE-754 binary16 (5 exponent bits, 10 fraction bits)
    ``bf16``  bfloat16 (8 exponent bits, 7 fraction bits): the upper half of a binary32
    ``fp32``  IEEE-754 binary32 (8 exponent bits, 23 fraction bits)
    ``int32`` two's-complement 32-bit integer, wrapping addition

Floating-point addition rounds to nearest, ties to even, keeps subnormals (no flush
to zero) and follows IEEE-754 for signed zeros, infinities and overflow.

NaN policy: if any operand is a NaN, or the operation is invalid (+inf + -inf), the
result is the format's *canonical quiet NaN*: sign 0, exponent all ones, only the
most significant fraction bit set (fp16 ``0x7E00``, bf16 ``0x7FC0``, fp32
``0x7FC00000``). Payloads and signs of input NaNs are not propagated. numpy keeps
payloads (and x86 produces a negative default NaN), so the reference replaces every
NaN numpy computes by the canonical one.

Reference implementation: binary16 and binary32 use numpy's own addition. bf16 adds
in binary32 and rounds the sum to bf16 (round to nearest even); rounding twice is
exact here because binary32 has more than 2*8+2 significand bits (Figueroa, "When is
double rounding innocuous?", 1995). numpy's binary16 addition is also computed in
binary32 and rounded once more, innocuous for the same reason (24 >= 2*11+2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError

__all__ = ["DType", "DTYPES", "get_dtype", "pack_lanes", "unpack_lanes"]


@dataclass(frozen=True)
class DType:
    """One element format.

    Members:
        name: ``fp16``, ``bf16``, ``fp32`` or ``int32``.
        width: bits per element.
        is_float: binary floating point (else two's-complement integer).
        exponent_bits, fraction_bits: field widths (0 for integers).
    """

    name: str
    width: int
    is_float: bool
    exponent_bits: int = 0
    fraction_bits: int = 0

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def canonical_nan(self) -> int:
        """The only NaN the adder produces (see the module docstring)."""
        if not self.is_float:
            raise FredError(f"{self.name} has no NaN")
        exponent_all_ones = ((1 << self.exponent_bits) - 1) << self.fraction_bits
        return exponent_all_ones | (1 << (self.fraction_bits - 1))

    @property
    def _storage(self):
        return np.uint16 if self.width == 16 else np.uint32

    def bits(self, values) -> np.ndarray:
        """Bit patterns of ``values``, each as an unsigned integer of ``width`` bits.

        Accepts anything numpy turns into an integer array; values must fit in the
        format's width (negative integers are allowed for ``int32`` and wrap).
        """
        array = np.asarray(values)
        if array.dtype.kind == "f":
            raise FredError(f"{self.name}: expected bit patterns (integers), got floats; "
                            "use from_float() to encode numbers")
        array = array.astype(np.int64)
        low = -(1 << (self.width - 1)) if not self.is_float else 0
        if array.size and (array.min() < low or array.max() > self.mask):
            raise FredError(f"{self.name}: bit pattern out of range for {self.width} bits")
        return (array & self.mask).astype(self._storage)

    def from_float(self, values) -> np.ndarray:
        """Encode numbers into bit patterns (rounding to nearest even for floats)."""
        values = np.asarray(values, dtype=np.float64)
        if self.name == "fp16":
            return values.astype(np.float16).view(np.uint16)
        if self.name == "fp32":
            return values.astype(np.float32).view(np.uint32)
        if self.name == "bf16":
            return _round_fp32_to_bf16(values.astype(np.float32).view(np.uint32))
        return (values.astype(np.int64) & self.mask).astype(np.uint32)

    def to_float(self, bits) -> np.ndarray:
        """Decode bit patterns to float64 (int32 as its signed value)."""
        bits = self.bits(bits)
        with np.errstate(invalid="ignore"):   # NaN payloads convert with a warning
            return self._to_float(bits)

    def _to_float(self, bits):
        if self.name == "fp16":
            return bits.view(np.float16).astype(np.float64)
        if self.name == "fp32":
            return bits.view(np.float32).astype(np.float64)
        if self.name == "bf16":
            return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.view(np.int32).astype(np.float64)

    def is_nan(self, bits) -> np.ndarray:
        bits = self.bits(bits).astype(np.uint32)
        if not self.is_float:
            return np.zeros(bits.shape, dtype=bool)
        exponent = (bits >> self.fraction_bits) & ((1 << self.exponent_bits) - 1)
        fraction = bits & ((1 << self.fraction_bits) - 1)
        return (exponent == (1 << self.exponent_bits) - 1) & (fraction != 0)

    def add(self, a, b) -> np.ndarray:
        """Golden element-wise ``a + b`` on bit patterns; returns bit patterns.

        Broadcasts like numpy. This is the arithmetic the hardware adder must match
        bit for bit.
        """
        a, b = self.bits(a), self.bits(b)
        if not self.is_float:
            return ((a.astype(np.uint64) + b.astype(np.uint64)) & self.mask).astype(np.uint32)
        with np.errstate(all="ignore"):
            if self.name == "fp16":
                result = (a.view(np.float16) + b.view(np.float16)).view(np.uint16)
            elif self.name == "fp32":
                result = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
            else:  # bf16
                wide = ((a.astype(np.uint32) << 16).view(np.float32)
                        + (b.astype(np.uint32) << 16).view(np.float32))
                result = _round_fp32_to_bf16(wide.view(np.uint32))
        result = np.asarray(result)
        return np.where(self.is_nan(result), self._storage(self.canonical_nan), result).astype(self._storage)

    def sum(self, operands) -> np.ndarray:
        """Left-to-right sum ``((o0 + o1) + o2) + ...`` of a non-empty sequence of bit arrays."""
        operands = list(operands)
        if not operands:
            raise FredError("sum of no operands")
        total = self.bits(operands[0])
        for operand in operands[1:]:
            total = self.add(total, operand)
        return total

    def random_bits(self, rng: np.random.Generator, shape) -> np.ndarray:
        """Uniformly random bit patterns (every class appears: NaN, inf, subnormal...)."""
        return rng.integers(0, 1 << self.width, size=shape, dtype=np.uint64).astype(self._storage)


def _round_fp32_to_bf16(bits32: np.ndarray) -> np.ndarray:
    """Round binary32 bit patterns to bf16 (nearest even); NaNs become the canonical NaN."""
    bits32 = np.asarray(bits32, dtype=np.uint32).astype(np.uint64)
    rounded = (bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16
    is_nan = ((bits32 >> 23) & 0xFF == 0xFF) & (bits32 & 0x7FFFFF != 0)
    return np.where(is_nan, 0x7FC0, rounded).astype(np.uint16)


DTYPES: dict[str, DType] = {
    "fp16": DType("fp16", 16, True, exponent_bits=5, fraction_bits=10),
    "bf16": DType("bf16", 16, True, exponent_bits=8, fraction_bits=7),
    "fp32": DType("fp32", 32, True, exponent_bits=8, fraction_bits=23),
    "int32": DType("int32", 32, False),
}


def get_dtype(name: str | DType) -> DType:
    """Look a format up by name; the error lists the valid names."""
    if isinstance(name, DType):
        return name
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise FredError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}") from None


def pack_lanes(lane_bits, width: int) -> int:
    """Pack a sequence of lane bit patterns into one integer, lane 0 at the least significant bits."""
    word = 0
    for lane, value in enumerate(lane_bits):
        value = int(value)
        if not 0 <= value < (1 << width):
            raise FredError(f"lane {lane}: value {value:#x} does not fit in {width} bits")
        word |= value << (lane * width)
    return word


def unpack_lanes(word: int, width: int, lanes: int) -> list[int]:
    """Inverse of :func:`pack_lanes`."""
    word = int(word)
    if word < 0 or word >> (width * lanes):
        raise FredError(f"word {word:#x} does not fit in {lanes} lanes of {width} bits")
    mask = (1 << width) - 1
    return [(word >> (lane * width)) & mask for lane in range(lanes)]
