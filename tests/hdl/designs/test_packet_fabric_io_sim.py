"""I/O controllers on the packet fabric (hdl/designs/fabric/io_controller.py on an L1 port of
hdl/designs/fabric/packet_fabric_top.py) in Amaranth's simulator, on the 4-NPU in-switch fabric
with one controller at a quarter of an NPU link: weight streaming (the controller multicasts
to every NPU) and gradient reduce-out (every NPU's data reduced into the controller) complete
with every flit checked, and take the controller's rate, not the NPU links'."""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.contracts.fabric import fabric_spec, make_request

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth

#: 2 L1 Fred_3(4) (2 NPUs, an uplink, the controller's port on L1.0), L2 Fred_3(2)
SMALL_IO = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1, io_controllers=1,
                       io_rate=Fraction(1, 4))


@pytest.mark.parametrize("op, backpressure", [("io-broadcast", 0.3), ("io-reduce", 0.0)])
def test_the_controller_streams_and_sinks_at_its_rate_every_flit_checked(op, backpressure):
    size = 20        # two full packets and a short one
    request = make_request(SMALL_IO, op=op, size_flits=size, group="wafer")
    run = run_packet_fabric_amaranth(SMALL_IO, request, sink_backpressure=backpressure,
                                     watchdog_cycles=2000)
    assert run.errors == []
    io = run.engines[4]
    if op == "io-broadcast":
        assert io["sent"] == size and all(run.engines[r]["received"] == size for r in range(4))
    else:
        assert io["received"] == size and all(run.engines[r]["sent"] == size for r in range(4))
    # the controller: one flit every 4 cycles (the first too: paced), plus the path's latency
    assert 4 * size <= run.cycles <= 4 * size + 60
