"""Reduction unit arithmetic in Amaranth's simulator: bit-exact against hdl.contracts.dtypes.

Per format: every special-class pair (cocotb_tests.adder_vectors.special_pairs) and
100,000 random pairs, through a 16-lane ReductionUnit with random idle inputs and random
backpressure on o. The generic float adder is also run exhaustively on small formats
against an exact rational reference (``exact_add`` in tests/conftest.py), itself checked
against hdl.contracts.dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest

from cocotb_tests.adder_vectors import as_flits, random_pairs, special_pairs
from cocotb_tests.lib.seeds import get_seed
from hdl.contracts.dtypes import DType, get_dtype
from hdl.designs.reduction import ReductionUnit

FORMATS = ("fp16", "bf16", "fp32", "int32")
RANDOM_PAIRS = 100_000


def _check_unit(adder_driver, dtype, a, b, expected, *, lanes, seed, output_stall=0.2, input_idle=0.1):
    """Run the pairs through a ReductionUnit; assert every lane is bit-exact."""
    unit = ReductionUnit(dtype=dtype, lanes=lanes)
    a_flits, b_flits = as_flits(a, b, lanes)
    expected_flits, _ = as_flits(expected, expected, lanes)
    # the padding lanes add +0 + +0 = +0
    width = unit.dtype.width
    run = adder_driver.run_unit(unit, adder_driver.pack_flits(a_flits, width), adder_driver.pack_flits(b_flits, width),
                   output_stall=output_stall, input_idle=input_idle, seed=seed)
    got = adder_driver.unpack_flits(run.outputs, width, lanes)
    assert got.shape == expected_flits.shape
    bad = np.argwhere(got != expected_flits)
    if len(bad):
        lines = [f"flit {i} lane {j}: {int(a_flits[i, j]):#x} + {int(b_flits[i, j]):#x} = "
                 f"{int(got[i, j]):#x}, expected {int(expected_flits[i, j]):#x}" for i, j in bad[:10]]
        pytest.fail(f"{unit.dtype.name}: {len(bad)} lane(s) wrong:\n" + "\n".join(lines))
    return run


@pytest.mark.parametrize("name", FORMATS)
def test_special_pairs_bit_exact(name, adder_driver):
    dtype = get_dtype(name)
    a, b = special_pairs(name)
    _check_unit(adder_driver, name, a, b, dtype.add(a, b).astype(np.uint64), lanes=16,
                seed=get_seed(f"adder.specials.{name}"))


@pytest.mark.parametrize("name", FORMATS)
def test_random_pairs_bit_exact_under_backpressure(name, adder_driver):
    dtype = get_dtype(name)
    rng = np.random.default_rng(get_seed(f"adder.random.{name}"))
    a, b = random_pairs(name, RANDOM_PAIRS, rng)
    # light backpressure here (heavy stalls are in test_adder_stream.py): it costs cycles
    _check_unit(adder_driver, name, a, b, dtype.add(a, b).astype(np.uint64), lanes=16,
                seed=get_seed(f"adder.random.{name}.stall"), output_stall=0.1, input_idle=0.05)


@pytest.mark.parametrize("name", ("fp16", "bf16", "fp32"))
def test_nan_policy_canonical_quiet_nan(name, adder_driver):
    """Any NaN in (any sign, payload, signalling or quiet), or inf - inf, gives the canonical NaN."""
    dtype = get_dtype(name)
    e, f = dtype.exponent_bits, dtype.fraction_bits
    inf, sign = ((1 << e) - 1) << f, 1 << (dtype.width - 1)
    nans = [inf | 1, inf | (1 << (f - 1)), inf | ((1 << f) - 1), inf | 0x5 | sign, inf | (1 << (f - 1)) | sign]
    others = [0, sign, 1, inf, inf | sign, dtype.from_float([1.0])[0], nans[0]]
    a = [n for n in nans for _ in others] + [inf, inf | sign]
    b = [o for _ in nans for o in others] + [inf | sign, inf]
    a, b = np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)
    expected = np.full(len(a), dtype.canonical_nan, dtype=np.uint64)
    assert (dtype.add(a, b) == expected).all()   # the golden model's policy ...
    _check_unit(adder_driver, name, a, b, expected, lanes=4, seed=1)   # ... and the hardware's


def _mini_format_exhaustive(adder_driver, exact_add, exponent_bits, fraction_bits, lanes=16):
    width = 1 + exponent_bits + fraction_bits
    custom = DType(f"e{exponent_bits}f{fraction_bits}", width, True, exponent_bits, fraction_bits)
    values = np.arange(1 << width, dtype=np.uint64)
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))
    expected = np.array([exact_add(int(x), int(y), exponent_bits, fraction_bits)
                         for x, y in zip(a, b)], dtype=np.uint64)
    _check_unit(adder_driver, custom, a, b, expected, lanes=lanes, seed=7, output_stall=0.1, input_idle=0.0)


@pytest.mark.parametrize("exponent_bits, fraction_bits", [(2, 1), (3, 2), (2, 4), (4, 1)])
def test_small_formats_exhaustive(exponent_bits, fraction_bits, adder_driver, exact_add):
    """The datapath is generic in (exponent, fraction): every pair of small formats."""
    _mini_format_exhaustive(adder_driver, exact_add, exponent_bits, fraction_bits)


@pytest.mark.full
@pytest.mark.parametrize("exponent_bits, fraction_bits", [(4, 3), (5, 2), (3, 4)])
def test_8bit_formats_exhaustive(exponent_bits, fraction_bits, adder_driver, exact_add):
    _mini_format_exhaustive(adder_driver, exact_add, exponent_bits, fraction_bits)


@pytest.mark.parametrize("name", ("fp16", "bf16"))
def test_exact_reference_agrees_with_golden_model(name, exact_add):
    """The rational reference used for the small formats equals hdl.contracts.dtypes where both apply."""
    dtype = get_dtype(name)
    rng = np.random.default_rng(get_seed(f"adder.exact_reference.{name}"))
    a, b = random_pairs(name, 5000, rng)
    sa, sb = special_pairs(name)
    a, b = np.concatenate([a, sa]), np.concatenate([b, sb])
    golden = dtype.add(a, b)
    exact = [exact_add(int(x), int(y), dtype.exponent_bits, dtype.fraction_bits) for x, y in zip(a, b)]
    assert [int(v) for v in golden] == exact
