"""Operand vectors for the reduction unit's tests (Amaranth simulator and cocotb benches).

Every function returns bit patterns (``numpy.uint64`` arrays) for a project dtype; the
expected sums always come from :mod:`hdl.contracts.dtypes` (the golden arithmetic).

* :func:`special_values` -- one representative of every class, both signs: zeros,
  subnormals (smallest, largest, middle), smallest normals, 1 and its neighbours, values
  half an ulp of 1 (rounding ties), the largest finite values, infinities, quiet and
  signalling NaNs with several payloads. For int32: 0, +-1, the extremes, patterns.
* :func:`special_pairs` -- every ordered pair of special values, plus targeted pairs:
  exact cancellation ``x + (-x)``, near cancellation ``x - (x +- ulp)``, carries across
  an exponent boundary (binade maximum + its ulp), overflow of the largest finite.
* :func:`random_pairs` -- half uniformly random bit patterns (every class appears),
  half pairs with exponents within 2 of each other and random signs, so that
  cancellation, renormalisation and carries are frequent.
"""

from __future__ import annotations

import numpy as np

from hdl.contracts.dtypes import DType, get_dtype

__all__ = ["special_values", "special_pairs", "random_pairs", "as_flits"]


def _float_specials(dtype: DType) -> list[int]:
    e, f = dtype.exponent_bits, dtype.fraction_bits
    exp_max = (1 << e) - 1
    frac_max = (1 << f) - 1
    bias = (1 << (e - 1)) - 1
    one = bias << f
    values = [
        0, 1, 2, 3, frac_max, frac_max - 1, 1 << (f - 1), (1 << (f - 1)) | 1,   # zero, subnormals
        1 << f, (1 << f) | 1, (1 << f) | frac_max, 2 << f,                        # smallest normals
        one, one + 1, one - 1, one | (1 << (f - 1)), one + (1 << f),              # 1 and neighbours
        ((exp_max - 1) << f) | frac_max, ((exp_max - 1) << f) | (frac_max - 1),   # largest finite
        (exp_max - 1) << f, ((exp_max - 2) << f) | frac_max,
        exp_max << f,                                                             # infinity
        (exp_max << f) | (1 << (f - 1)), (exp_max << f) | 1, (exp_max << f) | frac_max,  # NaNs
    ]
    # half an ulp of 1 (a tie when added to 1) and just above / below it
    if bias - f - 1 >= 1:
        half_ulp = (bias - f - 1) << f
        values += [half_ulp, half_ulp + 1, half_ulp - 1, half_ulp | (1 << (f - 1))]
    values = sorted(set(values))
    sign = 1 << (dtype.width - 1)
    return values + [v | sign for v in values]


def _int_specials(dtype: DType) -> list[int]:
    mask = dtype.mask
    top = 1 << (dtype.width - 1)
    values = [0, 1, 2, mask, mask - 1, top - 1, top, top + 1, top - 2, 0x55555555 & mask,
              0xAAAAAAAA & mask, 0xFFFF, 0x10000, 0x0F0F0F0F & mask]
    return sorted(set(values))


def special_values(dtype) -> np.ndarray:
    dtype = get_dtype(dtype)
    values = _float_specials(dtype) if dtype.is_float else _int_specials(dtype)
    return np.array(values, dtype=np.uint64)


def special_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of :func:`special_values` plus targeted pairs; (a, b) arrays."""
    dtype = get_dtype(dtype)
    values = special_values(dtype)
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    if not dtype.is_float:
        return a, b
    e, f = dtype.exponent_bits, dtype.fraction_bits
    sign = np.uint64(1 << (dtype.width - 1))
    frac_max = (1 << f) - 1
    exp_max = (1 << e) - 1
    extra_a, extra_b = [], []
    for exponent in range(0, exp_max):
        for fraction in (0, 1, frac_max, frac_max >> 1, 1 << (f - 1)):
            x = (exponent << f) | fraction
            # exact cancellation and near cancellation (differ by one ulp either way)
            for y in (x, x + 1, x - 1):
                if 0 <= y < (exp_max << f):
                    extra_a += [x, x | int(sign)]
                    extra_b += [y | int(sign), y]
        # carry across the boundary: the binade's largest value plus its ulp (and half ulp)
        top = (exponent << f) | frac_max
        binade = max(exponent, 1)   # subnormals share the ulp of exponent 1
        for below in (0, 1):          # the ulp, then half of it (a tie)
            ulp_exponent = binade - f - below
            if ulp_exponent >= 1:
                ulp = ulp_exponent << f
            elif binade - 1 - below >= 0:   # a subnormal: fraction 2**(binade - 1 - below)
                ulp = 1 << (binade - 1 - below)
            else:
                continue
            extra_a += [top, top | int(sign)]
            extra_b += [ulp, ulp | int(sign)]
    return (np.concatenate([a, np.array(extra_a, dtype=np.uint64)]),
            np.concatenate([b, np.array(extra_b, dtype=np.uint64)]))


def random_pairs(dtype, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random operand pairs (see the module docstring); (a, b) arrays."""
    dtype = get_dtype(dtype)
    a = dtype.random_bits(rng, count).astype(np.uint64)
    b = dtype.random_bits(rng, count).astype(np.uint64)
    if dtype.is_float:
        half = count // 2
        f = dtype.fraction_bits
        exp_mask = (1 << dtype.exponent_bits) - 1
        exp_a = ((a[half:] >> np.uint64(f)) & np.uint64(exp_mask)).astype(np.int64)
        exp_b = np.clip(exp_a + rng.integers(-2, 3, size=exp_a.shape), 0, exp_mask).astype(np.uint64)
        sign_b = rng.integers(0, 2, size=exp_a.shape).astype(np.uint64)
        frac_b = b[half:] & np.uint64((1 << f) - 1)
        b[half:] = (sign_b << np.uint64(dtype.width - 1)) | (exp_b << np.uint64(f)) | frac_b
    return a, b


def as_flits(a: np.ndarray, b: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Reshape operand arrays into (flits, lanes), padding the last flit with +0 operands."""
    count = len(a)
    flits = -(-count // lanes)
    pad = flits * lanes - count
    a = np.concatenate([a, np.zeros(pad, dtype=np.uint64)]).reshape(flits, lanes)
    b = np.concatenate([b, np.zeros(pad, dtype=np.uint64)]).reshape(flits, lanes)
    return a, b
