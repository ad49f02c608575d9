"""The host ordering rule of reductions (hdl/contracts/reduction_order.py): hand cases."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, Packet
from hdl.contracts.reduction_order import ReductionOrder


def pk(phase, vc, flow, seq=0):
    return Packet(phase=phase, vc=vc, seq=seq, flow=flow, flits=(0,))


RED0, RED1 = pk(0, VC.DP, 0, 0), pk(0, VC.DP, 0, 1)
OTHER = pk(1, VC.DP, 3)


def plan():
    return [(0, RED0), (0, RED1), (2, OTHER), (2, RED0), (2, RED1)]


def test_the_reductions_are_the_flows_with_several_inputs():
    assert ReductionOrder(plan()).reductions == {(0, VC.DP, 0): frozenset({0, 2})}


def test_another_phase_ahead_of_a_started_operand_is_refused():
    order = ReductionOrder(plan())
    order.start(0, RED0)
    with pytest.raises(FredError, match="input 2 starts a packet of phase 1 on VC 1"):
        order.start(2, OTHER)


def test_the_other_phase_before_the_reduction_starts_or_after_the_operand_is_fine():
    order = ReductionOrder(plan())
    order.start(2, OTHER)            # nothing of the reduction started yet
    order.start(0, RED0)
    order.start(2, RED0)
    order.start(0, RED1)
    order.start(2, RED1)
    order = ReductionOrder(plan())
    order.start(0, RED0)
    order.start(2, RED0)             # caught up: the other phase may go now
    order.start(2, OTHER)


def test_other_vcs_and_dropped_phases_are_not_held():
    mp = pk(1, VC.MP, 3)
    order = ReductionOrder(plan() + [(2, mp)], served={0, 1})
    order.start(0, RED0)
    order.start(2, mp)               # another VC: its own buffer
    unloaded = pk(2, VC.DP, 1)       # slot 2 not served: dropped at the input
    order = ReductionOrder(plan() + [(2, unloaded)], served={0, 1})
    order.start(0, RED0)
    order.start(2, unloaded)


def test_a_plan_of_non_packets_is_refused():
    with pytest.raises(FredError, match="Packet"):
        ReductionOrder([(0, "flit")])
