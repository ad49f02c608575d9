"""Exact (rational) IEEE-754 addition for ANY (exponent, fraction) widths -- tests only.

:mod:`hdl.contracts.dtypes` is the golden model for the project's formats; it relies on numpy and
so cannot describe arbitrary widths. The float adder is generic, so the tests also run
it on small formats exhaustively, against this reference: decode both operands to exact
fractions, add exactly, round to nearest even, encode. Same special-value policy as
hdl.contracts.dtypes (any NaN or inf - inf gives the canonical quiet NaN). The tests check this
reference against hdl.contracts.dtypes on fp16 and bf16 before trusting it elsewhere.
"""

from __future__ import annotations

from fractions import Fraction


def _decode(bits: int, e: int, f: int):
    sign = (bits >> (e + f)) & 1
    exponent = (bits >> f) & ((1 << e) - 1)
    fraction = bits & ((1 << f) - 1)
    if exponent == (1 << e) - 1:
        return sign, ("nan" if fraction else "inf")
    bias = (1 << (e - 1)) - 1
    significand = fraction | ((exponent != 0) << f)
    value = Fraction(significand) * Fraction(2) ** (max(exponent, 1) - bias - f)
    return sign, (-value if sign else value)


def _round_half_even(value: Fraction) -> int:
    floor = value.numerator // value.denominator
    rest = value - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        floor += 1
    return floor


def _encode(value: Fraction, e: int, f: int) -> int:
    """Round a non-zero exact value to the format (nearest even; overflow to infinity)."""
    sign = 1 if value < 0 else 0
    magnitude = -value if sign else value
    bias = (1 << (e - 1)) - 1
    exp_max = (1 << e) - 1
    # unbiased exponent E with 2**E <= magnitude < 2**(E+1)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    exponent = max(exponent, 1 - bias)          # below the normal range: subnormal scale
    significand = _round_half_even(magnitude / Fraction(2) ** (exponent - f))
    if significand >= (2 << f):                 # rounding carried into the next binade
        significand >>= 1
        exponent += 1
    if significand < (1 << f):                  # subnormal (exponent field 0)
        field = 0
    else:
        field = exponent + bias
        significand -= 1 << f
    if field >= exp_max:
        return (sign << (e + f)) | (exp_max << f)
    return (sign << (e + f)) | (field << f) | significand


def exact_add(a: int, b: int, e: int, f: int) -> int:
    """``a + b`` on bit patterns of the format with ``e`` exponent and ``f`` fraction bits."""
    exp_max = (1 << e) - 1
    canonical_nan = (exp_max << f) | (1 << (f - 1))
    sign_a, value_a = _decode(a, e, f)
    sign_b, value_b = _decode(b, e, f)
    if value_a == "nan" or value_b == "nan":
        return canonical_nan
    if value_a == "inf" and value_b == "inf":
        return canonical_nan if sign_a != sign_b else a
    if value_a == "inf":
        return a
    if value_b == "inf":
        return b
    total = value_a + value_b
    if total == 0:  # exact zero: -0 only for (-0) + (-0) in round to nearest
        return (sign_a & sign_b) << (e + f)
    return _encode(total, e, f)
