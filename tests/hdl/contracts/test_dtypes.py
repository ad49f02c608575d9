"""The golden arithmetic in hdl.contracts.dtypes against numpy, and its NaN policy."""

import numpy as np
import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.dtypes import DTYPES, get_dtype, pack_lanes, unpack_lanes


def test_formats():
    assert {name: d.width for name, d in DTYPES.items()} == {"fp16": 16, "bf16": 16, "fp32": 32, "int32": 32}
    assert get_dtype("fp16").canonical_nan == 0x7E00
    assert get_dtype("bf16").canonical_nan == 0x7FC0
    assert get_dtype("fp32").canonical_nan == 0x7FC00000
    with pytest.raises(FredError, match="unknown dtype 'fp8'"):
        get_dtype("fp8")


def test_fp16_and_fp32_match_numpy_on_random_pairs():
    rng = np.random.default_rng(0)
    for name, np_type, uint in [("fp16", np.float16, np.uint16), ("fp32", np.float32, np.uint32)]:
        dtype = get_dtype(name)
        a, b = dtype.random_bits(rng, 50000), dtype.random_bits(rng, 50000)
        with np.errstate(all="ignore"):
            expected = (a.view(np_type) + b.view(np_type))
        got = dtype.add(a, b)
        nan = np.isnan(expected)
        assert np.array_equal(got[~nan], expected.view(uint)[~nan])
        assert np.all(got[nan] == dtype.canonical_nan)


def test_bf16_is_correctly_rounded_against_exact_arithmetic():
    # Where the exponents are close, the sum of two bf16 values is exact in float64; round it
    # to bf16 once, independently of hdl.contracts.dtypes (quantum 2^(e-8), subnormal quantum 2^-133).
    rng = np.random.default_rng(1)
    dtype = get_dtype("bf16")
    a, b = dtype.random_bits(rng, 200000), dtype.random_bits(rng, 200000)
    with np.errstate(all="ignore"):
        x, y = dtype.to_float(a), dtype.to_float(b)
        exact = x + y
        _, ex = np.frexp(x)
        _, ey = np.frexp(y)
        usable = np.isfinite(exact) & (np.abs(ex - ey) < 40) & (exact != 0)
        exact = exact[usable]
        _, exponent = np.frexp(exact)
        quantum = np.ldexp(1.0, np.maximum(exponent - 8, -133))
        rounded = np.round(exact / quantum) * quantum          # ties to even
        rounded = np.where(np.abs(rounded) >= 2.0 ** 128, np.copysign(np.inf, exact), rounded)
    got = dtype.to_float(dtype.add(a, b)[usable])
    assert usable.sum() > 50000
    assert np.array_equal(got, rounded)


def test_special_cases_and_nan_policy():
    f16 = get_dtype("fp16")
    pos_zero, neg_zero, inf, neg_inf, max16 = 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7BFF
    assert f16.add(pos_zero, neg_zero) == pos_zero
    assert f16.add(neg_zero, neg_zero) == neg_zero
    assert f16.add(inf, neg_inf) == 0x7E00                    # invalid -> canonical qNaN
    assert f16.add(0xFE01, 0x3C00) == 0x7E00                  # NaN payload and sign dropped
    assert f16.add(max16, max16) == inf                       # overflow
    assert f16.add(0x0001, 0x0001) == 0x0002                  # subnormals kept
    assert f16.add(0x3C00, 0xBC00) == pos_zero                # exact cancellation is +0
    bf = get_dtype("bf16")
    assert bf.add(0x7F7F, 0x7F7F) == 0x7F80                   # max + max overflows to inf
    assert bf.add(0x3F80, 0x3B80) == 0x3F80                   # 1 + 2^-8: tie to even keeps 1
    assert bf.add(0x3F81, 0x3B80) == 0x3F82                   # tie rounds up to even
    i32 = get_dtype("int32")
    assert i32.add(0x7FFFFFFF, 1) == 0x80000000               # wraps
    assert i32.add(-1, -1) == 0xFFFFFFFE


def test_sum_is_left_to_right():
    f16 = get_dtype("fp16")
    big, one = f16.from_float(2048.0), f16.from_float(1.0)
    # (2048 + 1) + 1 = 2048 in fp16 (ties to even), 2048 + (1 + 1) = 2050
    assert f16.sum([big, one, one]) == f16.from_float(2048.0)
    assert f16.sum([one, one, big]) == f16.from_float(2050.0)


def test_bad_bit_patterns_are_rejected():
    with pytest.raises(FredError, match="out of range"):
        get_dtype("fp16").bits([1 << 16])
    with pytest.raises(FredError, match="floats"):
        get_dtype("fp16").bits([1.5])


def test_lane_packing_round_trips():
    word = pack_lanes([0x1234, 0xABCD, 0x0001], 16)
    assert word == 0x0001_ABCD_1234
    assert unpack_lanes(word, 16, 3) == [0x1234, 0xABCD, 0x0001]
    with pytest.raises(FredError, match="lane 1"):
        pack_lanes([0, 1 << 16], 16)
