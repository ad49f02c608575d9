"""Every legal configuration of the base case Fred_m(3) on the RTL (Verilator), against the
functional model: Fred_2(3) (8,869 configurations) and Fred_3(3) (213,669).

``cocotb_tests/exhaustive.py`` says what *legal* means and enumerates the configurations; the
first test proves the enumeration complete for Fred_2(3) against the functional model itself.
"""

from __future__ import annotations

import itertools

import pytest

from cocotb_tests.exhaustive import accepted_ports, all_modes, legal_configurations
from cocotb_tests.runner import run_bench
from hdl.contracts.encoding import (DemuxMode, InputMode, MuxMode, OutputMode, RDMode,
                                        SwitchConfig)
from hdl.compiler.functional import symbolic
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import switch_latency
from hdl.designs.switch import FredSwitch
from hdl.emit.verilog import to_verilog

COUNTS = {2: 8_869, 3: 213_669}
TAG_WIDTH = 2


def test_enumeration_is_every_configuration_the_functional_model_accepts():
    """Fred_2(3): of all 104,976 decodable configurations, exactly those the enumeration yields
    run without losing a value or summing a missing operand when every accepted port has data."""
    middle = 2
    ins, dms, rds, outs, mxs = (all_modes(c, middle)
                                for c in (InputMode, DemuxMode, RDMode, OutputMode, MuxMode))
    accepted = set()
    total = 0
    for i0, dm, r0, r1, om, mx in itertools.product(ins, dms, rds, rds, outs, mxs):
        config = SwitchConfig(3, middle, (i0, dm, r0, r1, om, mx))
        total += 1
        if not symbolic(config, accepted_ports(config))[1]:
            accepted.add(config.to_int())
    enumerated = [c.to_int() for c in legal_configurations(middle)]
    assert total == 104_976
    assert len(enumerated) == len(set(enumerated)) == COUNTS[middle]
    assert set(enumerated) == accepted


def test_fred3_3_count():
    assert sum(1 for _ in legal_configurations(3)) == COUNTS[3]


@pytest.mark.cocotb
@pytest.mark.parametrize("middle", [2, pytest.param(3, marks=pytest.mark.full)])
def test_every_legal_configuration_on_the_rtl(middle):
    """Fred_2(3) in the default suite (about 25 s with its build), Fred_3(3) behind ``-m full``
    (about 3 min: 24 times as many configurations)."""
    flit = FlitFormat(dtype="int32", lanes=1, tag_width=TAG_WIDTH)
    verilog = to_verilog(FredSwitch(ports=3, middle=middle, flit=flit), name="fred_datapath")
    latency = switch_latency(ports=3, middle=middle, dtype="int32")
    result = run_bench(verilog=(verilog, "fred_datapath"), test_module="cocotb_tests.bench_exhaustive",
                       bench_params={"ports": 3, "middle": middle, "latency": latency,
                                     "tag_width": TAG_WIDTH},
                       run_name=f"exhaustive-P3m{middle}")
    print(f"Fred_{middle}(3): {result.metrics}")
    assert result.metrics["configurations"] == COUNTS[middle]
