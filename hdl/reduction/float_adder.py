"""Pipelined binary floating-point adder, bit-exact with IEEE-754 round to nearest even.

The datapath of one lane of :class:`hdl.reduction.ReductionUnit`. Any format given by
exponent and fraction widths (:class:`hdl.reduction.formats.FloatFormat`).

Algorithm (W = fraction_bits + 4 bits per extended significand):

0. classify (NaN, infinity), order the operands by magnitude so |x| >= |y|, exponent
   difference d (subnormals use exponent 1 and no hidden bit);
1. align: y's significand with 3 extra low bits (guard, round, sticky) shifted right by
   min(d, W); everything shifted out is ORed into the sticky bit;
2. add or subtract the extended significands (W+1 bits: one carry bit);
3. count leading zeros of the sum; the normalising left shift is limited to the
   exponent, so results below the normal range come out subnormal (no flush to zero);
4. normalise;
5. round to nearest even on the packed exponent|fraction (a carry out of the fraction
   increments the exponent; reaching the all-ones exponent means overflow to infinity),
   then substitute special results.

Three extra bits suffice: whenever bits are lost in alignment (d >= 2) the sum moves by
at most one position, and the sticky bit makes the low part odd, so it never lands on
a rounding tie or boundary it did not cross exactly.

Specials (policy of :mod:`hdl.dtypes`): any NaN operand, or inf + (-inf), gives the
canonical quiet NaN; otherwise an infinite operand gives that infinity. An exact zero
sum is -0 only when both operands are negative (x + (-x) = +0 in round to nearest).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.errors import FredError

from .formats import FloatFormat
from .leading_zeros import leading_zeros

__all__ = ["FloatAdder"]


class FloatAdder(wiring.Component):
    """``o = a + b`` on floating-point bit patterns, a 5-register pipeline.

    Parameters:
        fmt: the :class:`FloatFormat` (keyword-only).

    Members:
        a, b: ``In(fmt.width)`` operand bit patterns.
        o: ``Out(fmt.width)`` the sum of the operands presented :attr:`latency` clock
           cycles (of enabled ``sync``) earlier. ``o`` is combinational from the last
           pipeline register (rounding), so the user registers it.

    Latency: :attr:`latency` = 5 ``sync`` cycles. There is no handshake: the pipeline
    advances every cycle its domain is enabled (wrap it in ``EnableInserter`` to stall).
    Pipeline registers have no reset (datapath only).
    """

    latency = 5

    def __init__(self, *, fmt: FloatFormat):
        if not isinstance(fmt, FloatFormat):
            raise FredError(f"FloatAdder: fmt must be a FloatFormat, got {fmt!r}")
        self.fmt = fmt
        super().__init__({"a": In(fmt.width), "b": In(fmt.width), "o": Out(fmt.width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        e, f = self.fmt.exponent_bits, self.fmt.fraction_bits
        ext = f + 4                  # hidden bit + fraction + guard, round, sticky
        exp_max = self.fmt.exponent_max

        def reg(shape, name):
            return Signal(shape, name=name, reset_less=True)

        # ---- stage 0: classify, order by magnitude, exponent difference ----------
        a, b = self.a, self.b
        sign_a, sign_b = a[-1], b[-1]
        exp_a, exp_b = a[f:f + e], b[f:f + e]
        nan_a = (exp_a == exp_max) & (a[:f] != 0)
        nan_b = (exp_b == exp_max) & (b[:f] != 0)
        inf_a = (exp_a == exp_max) & (a[:f] == 0)
        inf_b = (exp_b == exp_max) & (b[:f] == 0)
        is_nan = nan_a | nan_b | (inf_a & inf_b & (sign_a ^ sign_b))
        is_inf = inf_a | inf_b
        special_result = Mux(is_nan, self.fmt.canonical_nan,
                             Cat(Const(self.fmt.infinity, e + f), Mux(inf_a, sign_a, sign_b)))

        # subnormals behave as exponent 1 without the hidden bit
        eff_exp_a = Mux(exp_a == 0, 1, exp_a)
        eff_exp_b = Mux(exp_b == 0, 1, exp_b)
        a_is_larger = a[:e + f] >= b[:e + f]   # magnitude order = bit order of |value|
        # both differences in parallel with the comparison, then pick the non-negative one
        diff_ab = (eff_exp_a - eff_exp_b)[:e]
        diff_ba = (eff_exp_b - eff_exp_a)[:e]
        diff = Mux(a_is_larger, diff_ab, diff_ba)
        sig_a = Cat(a[:f], exp_a != 0)
        sig_b = Cat(b[:f], exp_b != 0)

        s1_sig_x = reg(f + 1, "s1_sig_x")
        s1_sig_y = reg(f + 1, "s1_sig_y")
        s1_exp = reg(e, "s1_exp")
        s1_shift = reg(range(ext + 1), "s1_shift")
        s1_subtract = reg(1, "s1_subtract")
        s1_sign = reg(1, "s1_sign")
        s1_zero_sign = reg(1, "s1_zero_sign")
        s1_special = reg(1, "s1_special")
        s1_special_result = reg(e + f + 1, "s1_special_result")
        m.d.sync += [
            s1_sig_x.eq(Mux(a_is_larger, sig_a, sig_b)),
            s1_sig_y.eq(Mux(a_is_larger, sig_b, sig_a)),
            s1_exp.eq(Mux(a_is_larger, eff_exp_a, eff_exp_b)),
            s1_shift.eq(Mux(diff > ext, ext, diff)),
            s1_subtract.eq(sign_a ^ sign_b),
            s1_sign.eq(Mux(a_is_larger, sign_a, sign_b)),
            s1_zero_sign.eq(sign_a & sign_b),
            s1_special.eq(is_nan | is_inf),
            s1_special_result.eq(special_result),
        ]

        # ---- stage 1: align the smaller significand ------------------------------
        # one shifter: the upper half is the aligned value, the lower half what fell off
        shifted = Cat(Const(0, ext), Const(0, 3), s1_sig_y) >> s1_shift
        aligned = Cat(shifted[ext] | (shifted[:ext] != 0), shifted[ext + 1:2 * ext])

        s2_x = reg(ext, "s2_x")
        s2_y = reg(ext, "s2_y")
        s2_exp = reg(e, "s2_exp")
        s2_subtract = reg(1, "s2_subtract")
        s2_sign = reg(1, "s2_sign")
        s2_zero_sign = reg(1, "s2_zero_sign")
        s2_special = reg(1, "s2_special")
        s2_special_result = reg(e + f + 1, "s2_special_result")
        m.d.sync += [
            s2_x.eq(Cat(Const(0, 3), s1_sig_x)),
            s2_y.eq(aligned),
            s2_exp.eq(s1_exp),
            s2_subtract.eq(s1_subtract),
            s2_sign.eq(s1_sign),
            s2_zero_sign.eq(s1_zero_sign),
            s2_special.eq(s1_special),
            s2_special_result.eq(s1_special_result),
        ]

        # ---- stage 2: add or subtract (|x| >= |y| so the difference is >= 0) -----
        s3_sum = reg(ext + 1, "s3_sum")
        s3_exp = reg(e, "s3_exp")
        s3_sign = reg(1, "s3_sign")
        s3_zero_sign = reg(1, "s3_zero_sign")
        s3_special = reg(1, "s3_special")
        s3_special_result = reg(e + f + 1, "s3_special_result")
        m.d.sync += [
            s3_sum.eq(Mux(s2_subtract, s2_x - s2_y, s2_x + s2_y)),
            s3_exp.eq(s2_exp),
            s3_sign.eq(s2_sign),
            s3_zero_sign.eq(s2_zero_sign),
            s3_special.eq(s2_special),
            s3_special_result.eq(s2_special_result),
        ]

        # ---- stage 3: leading zeros; the shift may not take the exponent below 1 --
        # s3_sum's MSB has weight 2**(s3_exp + 1 - bias), so shifting by s3_exp at most
        # keeps the result exponent >= 1 (a smaller significand is then subnormal).
        zeros = leading_zeros(s3_sum)
        s4_sum = reg(ext + 1, "s4_sum")
        s4_shift = reg(range(ext + 2), "s4_shift")
        s4_exp = reg(e, "s4_exp")
        s4_zero = reg(1, "s4_zero")
        s4_sign = reg(1, "s4_sign")
        s4_special = reg(1, "s4_special")
        s4_special_result = reg(e + f + 1, "s4_special_result")
        sum_is_zero = s3_sum == 0
        m.d.sync += [
            s4_sum.eq(s3_sum),
            s4_shift.eq(Mux(zeros > s3_exp, s3_exp, zeros)),
            s4_exp.eq(s3_exp),
            s4_zero.eq(sum_is_zero),
            s4_sign.eq(Mux(sum_is_zero, s3_zero_sign, s3_sign)),
            s4_special.eq(s3_special),
            s4_special_result.eq(s3_special_result),
        ]

        # ---- stage 4: normalise -------------------------------------------------
        s5_norm = reg(ext + 1, "s5_norm")
        s5_exp = reg(e + 1, "s5_exp")     # result exponent - 1 (>= 0) before rounding
        s5_zero = reg(1, "s5_zero")
        s5_sign = reg(1, "s5_sign")
        s5_special = reg(1, "s5_special")
        s5_special_result = reg(e + f + 1, "s5_special_result")
        m.d.sync += [
            s5_norm.eq((s4_sum << s4_shift)[:ext + 1]),
            s5_exp.eq(s4_exp - s4_shift),
            s5_zero.eq(s4_zero),
            s5_sign.eq(s4_sign),
            s5_special.eq(s4_special),
            s5_special_result.eq(s4_special_result),
        ]

        # ---- stage 5 (combinational): round to nearest even, pack ----------------
        significand = s5_norm[4:]            # f + 1 bits with the hidden bit
        guard = s5_norm[3]
        sticky = s5_norm[:3] != 0
        round_up = guard & (sticky | significand[0])
        # (exponent - 1) << f plus a significand with hidden bit = exponent|fraction;
        # a hidden bit of 0 (subnormal) leaves exponent field 0; rounding carries ripple
        # into the exponent. e + f + 1 bits hold the largest value, 2**e << f.
        packed = Signal(e + f + 1, name="packed")
        m.d.comb += packed.eq((s5_exp << f) + significand + round_up)
        overflow = packed >= self.fmt.infinity
        magnitude = Mux(s5_zero, 0, Mux(overflow, self.fmt.infinity, packed[:e + f]))
        m.d.comb += self.o.eq(Mux(s5_special, s5_special_result, Cat(magnitude, s5_sign)))
        return m
