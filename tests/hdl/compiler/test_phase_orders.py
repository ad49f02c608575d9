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


def test_fred_b_dp_groups_io_broadcast_needs_no_order_their_io_reduce_does():
    """The same four groups fed from (reduced into) one controller each, aligned slots: four
    slots on VC DP at every switch either way. The io-reduce's flows add two inputs or more
    at the L2 and at each group's controller L1 (a partner's operand can sit behind another
    group's packet in a FIFO: ordered, as the all-reduce); the io-broadcast's trees have one
    input per flow everywhere, so no switch gets an order (phases by arrival, the control
    unit's yield between the paced streams' packets)."""
    spec = fabric_spec("fred-b", io_controllers=4)
    packet = packet_format(default_phases())
    for op, ordered in (("io-broadcast", False), ("io-reduce", True)):
        request = make_request(spec, op=op, size_flits=40, strategy="MP2-DP5-PP2", dim="dp")
        program = fabric_program(spec, request, aligned_slots=True)
        assert [len(phases) for phases in program.switches] == [4] * 6
        flows = [f for phases in program.switches for p in phases for f in p.flows]
        assert any(len(f.inputs) > 1 for f in flows) is ordered
        expected = [(VC.DP, [(k, 4) for k in range(4)])] * 6 if ordered else [(0, [])] * 6
        assert phase_orders(program, request, packet) == expected


def test_multicast_phases_on_two_vcs_need_no_order_reductions_on_two_vcs_are_refused():
    """Two groups on DP and two on PP: each switch then holds two phases of each VC. A switch
    follows one order, so two VCs that each need one are refused (the io-reduce); the
    io-broadcast's VCs need none and pass."""
    spec = fabric_spec("fred-b", io_controllers=4)
    packet = packet_format(default_phases())
    vcs = {0: VC.DP, 1: VC.DP, 2: VC.PP, 3: VC.PP}
    for op in ("io-broadcast", "io-reduce"):
        request = make_request(spec, op=op, size_flits=40, strategy="MP2-DP5-PP2", dim="dp")
        program = fabric_program(spec, request, aligned_slots=True)
        if op == "io-broadcast":
            assert phase_orders(program, request, packet, vcs=vcs) == [(0, [])] * 6
        else:
            with pytest.raises(FredError, match="a switch follows one phase order"):
                phase_orders(program, request, packet, vcs=vcs)
