"""The packet fabric's Verilog (``fred_packet_fabric``, docs/fabric_rtl.md "Packet fabric")
under Verilator through the fabric's cocotb bench, on the 4-NPU in-switch fabric: an
all-reduce with sink backpressure completes with every flit checked, and counts exactly the
cycles Amaranth's simulator counts for the same run (the same RTL, two simulators)."""

import pytest

from hdl.contracts.fabric import fabric_spec, make_request

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric, run_packet_fabric_amaranth

pytestmark = pytest.mark.cocotb

SMALL = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1)


def test_small_packet_fabric_all_reduce_under_verilator_matches_amaranth():
    request = make_request(SMALL, op="all-reduce", size_flits=60, group="wafer")
    verilated = run_packet_fabric(SMALL, request, sink_backpressure=0.25, cflags="-O0")
    assert verilated.errors == [] and verilated.flits_checked == 4 * 60
    reference = run_packet_fabric_amaranth(SMALL, request, sink_backpressure=0.25)
    assert verilated.cycles == reference.cycles
