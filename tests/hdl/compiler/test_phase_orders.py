"""The phase order of the packet fabric's switches (hdl/compiler/packet_fabric_program.py,
``phase_orders``; docs/switch.md, "Phase order"): which switches get one, its slots and the
last sequence numbers, and what it refuses."""

from __future__ import annotations

import pytest

from hdl.compiler.fabric_program import default_phases, fabric_program
from hdl.compiler.packet_fabric_program import packet_headers, phase_orders
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.packet import VC
from hdl.designs.fabric.packet_fabric_top import packet_format


@pytest.mark.parametrize("size, last", [(40, 4), (4000, 499), (41, 5)])
def test_fred_b_dp_groups_are_ordered_at_every_switch(size, last):
    """Fred-B MP2-DP5-PP2: four DP groups, one NPU of each on every L1, all over the L1s' one
    uplink: four slots on VC DP at every L1 and at the L2, served 0, 1, 2, 3, each until its
    packet numbered ceil(size / 8) - 1."""
    spec = fabric_spec("fred-b")
    request = make_request(spec, op="all-reduce", size_flits=size, strategy="MP2-DP5-PP2", dim="dp")
    program = fabric_program(spec, request)
    orders = phase_orders(program, request, packet_format(default_phases()))
    assert orders == [(VC.DP, [(k, last) for k in range(4)])] * 6
    # the headers no longer refuse it: each group's NPUs name their group's slot
    headers = packet_headers(program, request, packet_format(default_phases()))
    assert sorted({h["phase"] for h in headers}) == [0, 1, 2, 3]


def test_one_phase_per_vc_needs_no_order():
    spec = fabric_spec("fred-d")
    request = make_request(spec, op="all-reduce", size_flits=40, strategy="MP2-DP5-PP2", dim="dp")
    program = fabric_program(spec, request)
    assert phase_orders(program, request, packet_format(default_phases())) == [(0, [])] * len(program.switches)
