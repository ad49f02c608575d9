"""Pipelined binary floating-point adder, bit-exact with IEEE-754 round to nearest even.

The datapath of one lane of :class:`hdl.designs.reduction.ReductionUnit`. Any format given by
exponent and fraction widths (:class:`hdl.designs.reduction.formats.FloatFormat`).

Algorithm (W = fraction_bits + 4 bits per extended significand), one register per stage:

0. classify (NaN, infinity); compare magnitudes (|a| >= |b| is the unsigned order of
   the bits without the sign); both exponent differences (subnormals use exponent 1
   and no hidden bit);
1. order the operands so |x| >= |y|; align: y's significand with 3 extra low bits
   (guard, round, sticky) shifted right by the difference; everything shifted out is
   ORed into the sticky bit;
2. add or subtract the extended significands (W+1 bits: one carry bit);
3. count leading zeros of the sum, limited to the exponent so that results below the
   normal range come out subnormal (no flush to zero);
4. normalise (shift left); decide what does not need the rounded value (zero or
   special result, certain overflow);
5. round to nearest even on the packed exponent|fraction (a carry out of the fraction
   increments the exponent; reaching the all-ones exponent means overflow to infinity),
   substitute special results, and register the result.

Three extra bits suffice: bits are lost in alignment only when d >= 2, and then the
sum needs at most one shift (right after a carry, left after a subtraction), so the
half-ulp rounding boundary stays at least two units of the sticky position above it.
With bits lost, the computed sum is odd (x's low bits are zero, y's sticky bit is one)
and within one unit of the exact sum, so it lies on the same side of every boundary as
the exact value and is never taken for a tie.

Specials (policy of :mod:`hdl.contracts.dtypes`): any NaN operand, or inf + (-inf), gives the
canonical quiet NaN; otherwise an infinite operand gives that infinity. An exact zero
sum is -0 only when both operands are negative (x + (-x) = +0 in round to nearest).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.timing import FLOAT_ADDER_STAGES

from .formats import FloatFormat
from .leading_zeros import leading_zeros

__all__ = ["FloatAdder"]


class FloatAdder(wiring.Component):
    """``o = a + b`` on floating-point bit patterns, a 6-register pipeline.

    Parameters:
        fmt: the :class:`FloatFormat` (keyword-only).

    Members:
        a, b: ``In(fmt.width)`` operand bit patterns.
        o: ``Out(fmt.width)`` the sum of the operands presented :attr:`latency` clock
           cycles (of enabled ``sync``) earlier; driven by a register.

    Latency: :attr:`latency` = 6 ``sync`` cycles (one register per stage 0..5; the
    rounding stage is registered so that the unit's output buffer sees a register). There is no handshake: the pipeline
    advances every cycle its domain is enabled (wrap it in ``EnableInserter`` to stall).
    Pipeline registers have no reset (datapath only).
    """

    latency = FLOAT_ADDER_STAGES

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
        # The full magnitude comparison (a long carry chain) is only registered here; the
        # operands are swapped in stage 1. The shift and the larger exponent need only the
        # exponent comparison: a larger magnitude never has a smaller exponent, and equal
        # exponents give a shift of 0 either way.
        a_is_larger = a[:e + f] >= b[:e + f]   # magnitude order = bit order of |value|
        diff_ab_full = eff_exp_a - eff_exp_b   # e + 1 bits, signed
        exp_a_not_smaller = ~diff_ab_full[-1]
        diff_ab = diff_ab_full[:e]
        diff_ba = (eff_exp_b - eff_exp_a)[:e]

        s1_a_is_larger = reg(1, "s1_a_is_larger")
        s1_exp_a_not_smaller = reg(1, "s1_exp_a_not_smaller")
        s1_sig_a = reg(f + 1, "s1_sig_a")
        s1_sig_b = reg(f + 1, "s1_sig_b")
        s1_exp_a = reg(e, "s1_exp_a")
        s1_exp_b = reg(e, "s1_exp_b")
        s1_shift_ab = reg(e, "s1_shift_ab")
        s1_shift_ba = reg(e, "s1_shift_ba")
        s1_sign_a = reg(1, "s1_sign_a")
        s1_sign_b = reg(1, "s1_sign_b")
        s1_special = reg(1, "s1_special")
        s1_special_result = reg(e + f + 1, "s1_special_result")
        m.d.sync += [
            s1_a_is_larger.eq(a_is_larger),
            s1_exp_a_not_smaller.eq(exp_a_not_smaller),
            s1_sig_a.eq(Cat(a[:f], exp_a != 0)),
            s1_sig_b.eq(Cat(b[:f], exp_b != 0)),
            s1_exp_a.eq(eff_exp_a),
            s1_exp_b.eq(eff_exp_b),
            s1_shift_ab.eq(diff_ab),
            s1_shift_ba.eq(diff_ba),
            s1_sign_a.eq(sign_a),
            s1_sign_b.eq(sign_b),
            s1_special.eq(is_nan | is_inf),
            s1_special_result.eq(special_result),
        ]

        # ---- stage 1: order the operands, align the smaller significand ----------
        sig_x = Mux(s1_a_is_larger, s1_sig_a, s1_sig_b)
        sig_y = Mux(s1_a_is_larger, s1_sig_b, s1_sig_a)
        shift = Mux(s1_exp_a_not_smaller, s1_shift_ab, s1_shift_ba)
        # One shifter: the upper half is the aligned value, the lower half what fell off.
        # It shifts by the low bits of the difference only (up to 2**low_bits - 1 < 2*ext,
        # so nothing falls off the bottom); a difference of 2**low_bits or more (any high
        # bit set) leaves only the sticky bit. This keeps a clamp comparison out of
        # stage 0 and its OR runs beside the shifter.
        low_bits = max(1, (ext - 1).bit_length())  # 2**low_bits >= ext
        shifted = Cat(Const(0, ext), Const(0, 3), sig_y) >> shift[:low_bits]
        far = shift[low_bits:].any() if e > low_bits else Const(0, 1)
        aligned = Mux(far, Cat(sig_y.any(), Const(0, ext - 1)),
                      Cat(shifted[ext] | shifted[:ext].any(), shifted[ext + 1:2 * ext]))

        s2_x = reg(ext, "s2_x")
        s2_y = reg(ext, "s2_y")
        s2_exp = reg(e, "s2_exp")
        s2_subtract = reg(1, "s2_subtract")
        s2_sign = reg(1, "s2_sign")
        s2_zero_sign = reg(1, "s2_zero_sign")
        s2_special = reg(1, "s2_special")
        s2_special_result = reg(e + f + 1, "s2_special_result")
        m.d.sync += [
            s2_x.eq(Cat(Const(0, 3), sig_x)),
            s2_y.eq(aligned),
            s2_exp.eq(Mux(s1_a_is_larger, s1_exp_a, s1_exp_b)),
            s2_subtract.eq(s1_sign_a ^ s1_sign_b),
            s2_sign.eq(Mux(s1_a_is_larger, s1_sign_a, s1_sign_b)),
            s2_zero_sign.eq(s1_sign_a & s1_sign_b),
            s2_special.eq(s1_special),
            s2_special_result.eq(s1_special_result),
        ]

        # ---- stage 2: add or subtract (|x| >= |y| so the difference is >= 0) -----
        s3_sum = reg(ext + 1, "s3_sum")
        s3_limit = reg(ext + 1, "s3_limit")
        s3_exp = reg(e, "s3_exp")
        s3_sign = reg(1, "s3_sign")
        s3_zero_sign = reg(1, "s3_zero_sign")
        s3_special = reg(1, "s3_special")
        s3_special_result = reg(e + f + 1, "s3_special_result")
        m.d.sync += [
            s3_sum.eq(Mux(s2_subtract, s2_x - s2_y, s2_x + s2_y)),
            # a one at bit (ext - exponent), none if the exponent exceeds ext: see stage 3
            s3_limit.eq(Const(1 << ext, ext + 1) >> s2_exp),
            s3_exp.eq(s2_exp),
            s3_sign.eq(s2_sign),
            s3_zero_sign.eq(s2_zero_sign),
            s3_special.eq(s2_special),
            s3_special_result.eq(s2_special_result),
        ]

        # ---- stage 3: leading zeros; the shift may not take the exponent below 1 --
        # s3_sum's MSB has weight 2**(s3_exp + 1 - bias), so shifting by s3_exp at most
        # keeps the result exponent >= 1 (a smaller significand is then subnormal).
        # OR-ing a one at bit (ext - s3_exp) makes the count itself min(zeros, s3_exp),
        # with no comparison after the count.
        zeros = leading_zeros(s3_sum | s3_limit)
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
            s4_shift.eq(zeros),
            s4_exp.eq(s3_exp),
            s4_zero.eq(sum_is_zero),
            s4_sign.eq(Mux(sum_is_zero, s3_zero_sign, s3_sign)),
            s4_special.eq(s3_special),
            s4_special_result.eq(s3_special_result),
        ]

        # ---- stage 4: normalise; decide what does not need the rounded value ----
        # Overflow needs the rounding carry only in the top finite binade: a result
        # exponent >= the all-ones field overflows whatever the rounding; one binade
        # below, only an all-ones significand that rounds up does.
        exp_minus_one = Signal(e + 1, name="exp_minus_one")   # result exponent - 1 (>= 0)
        m.d.comb += exp_minus_one.eq(s4_exp - s4_shift)
        s5_norm = reg(ext + 1, "s5_norm")
        s5_exp = reg(e + 1, "s5_exp")
        s5_exp_overflows = reg(1, "s5_exp_overflows")
        s5_exp_is_top = reg(1, "s5_exp_is_top")
        s5_sign = reg(1, "s5_sign")
        s5_forced = reg(1, "s5_forced")      # the result is a special value or a zero
        s5_forced_result = reg(e + f + 1, "s5_forced_result")
        m.d.sync += [
            s5_norm.eq((s4_sum << s4_shift)[:ext + 1]),
            s5_exp.eq(exp_minus_one),
            s5_exp_overflows.eq(exp_minus_one >= exp_max - 1),
            s5_exp_is_top.eq(exp_minus_one == exp_max - 2),
            s5_sign.eq(s4_sign),
            s5_forced.eq(s4_special | s4_zero),
            s5_forced_result.eq(Mux(s4_special, s4_special_result, Cat(Const(0, e + f), s4_sign))),
        ]

        # ---- stage 5: round to nearest even, pack, specials ------------------------
        significand = s5_norm[4:]            # f + 1 bits with the hidden bit
        guard = s5_norm[3]
        sticky = s5_norm[:3] != 0
        round_up = guard & (sticky | significand[0])
        # (exponent - 1) << f plus a significand with hidden bit = exponent|fraction;
        # a hidden bit of 0 (subnormal) leaves exponent field 0; rounding carries ripple
        # into the exponent.
        packed = Signal(e + f, name="packed")
        m.d.comb += packed.eq((s5_exp << f) + significand + round_up)
        overflow = s5_exp_overflows | (s5_exp_is_top & significand.all() & round_up)
        magnitude = Mux(overflow, self.fmt.infinity, packed)
        result = reg(e + f + 1, "result")
        m.d.sync += result.eq(Mux(s5_forced, s5_forced_result, Cat(magnitude, s5_sign)))
        m.d.comb += self.o.eq(result)
        return m
