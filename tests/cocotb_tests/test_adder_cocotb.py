"""The generated fred_adder Verilog under Verilator (cocotb): bit-exact, backpressure, throughput.

Default suite: every special-class pair plus 100,000 random pairs per format, with
random idle inputs and backpressure; the measured throughput and latency. ``-m full``:
4,000,000 random pairs per format.
"""

from __future__ import annotations

import pytest

from cocotb_tests.runner import run_bench
from hdl.contracts.timing import reduction_latency

pytestmark = pytest.mark.cocotb

BENCH = "cocotb_tests.bench_adder"
FORMATS = ("fp16", "bf16", "fp32", "int32")
LANES = 8


def _run(dtype, testcase, **bench):
    params = {"dtype": dtype, "lanes": LANES}
    return run_bench(unit="adder", params=params, test_module=BENCH, testcase=testcase,
                     bench_params={**params, **bench})


@pytest.mark.parametrize("dtype", FORMATS)
def test_bit_exact_specials_and_100k_random_pairs(dtype):
    result = _run(dtype, "random_and_special_pairs", count=100_000, specials=True,
                  idle=0.1, backpressure=0.3)
    assert result.metrics["pairs"] >= 100_000


@pytest.mark.parametrize("dtype", FORMATS)
def test_one_flit_per_cycle_and_latency(dtype):
    latency = reduction_latency(dtype)
    result = _run(dtype, "throughput_and_latency", flits=2000, latency=latency)
    print(f"fred_adder {dtype} lanes={LANES}: {result.metrics}")
    assert result.metrics["throughput"] == 1.0
    assert result.metrics["latency"] == latency


@pytest.mark.full
@pytest.mark.parametrize("dtype", FORMATS)
def test_bit_exact_millions_of_random_pairs(dtype):
    result = _run(dtype, "random_and_special_pairs", count=4_000_000, specials=True,
                  idle=0.05, backpressure=0.2)
    assert result.metrics["pairs"] >= 4_000_000
