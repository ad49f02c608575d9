"""The striped I/O trees on Fred-B/D (hdl/compiler/io_stripe_trees.py): the distinct flows per
switch by hand, how many share each output, the one packet order, and what is refused."""

import pytest

from hdl.compiler.io_stripe_trees import output_sharing, stripe_packet_order, stripe_tree_flows
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec

FRED_B18 = fabric_spec("fred-b", io_controllers=18)
FRED_D18 = fabric_spec("fred-d", io_controllers=18)


def _flows(switch):
    return {str(s.flow): s.stripes for s in switch}


def test_fred_b_weight_streaming_at_l1_0_and_the_l2_by_hand():
    """Fred-B (L1 = Fred_3(9): NPUs 0-3, uplink 4, controller ports 5-8): L1 0 holds controllers
    0, 5, 10, 15 (k mod 5 = 0; port 5 + k div 5), each multicasting to its NPUs and the uplink;
    the 14 other stripes come down the uplink, one flow. The L2 (port j = L1 j) fans each
    L1's controllers out to the four other L1s."""
    switches = stripe_tree_flows(FRED_B18, "io-broadcast")
    remote = tuple(k for k in range(18) if k % 5)
    assert _flows(switches[0]) == {"5>0,1,2,3,4": (0,), "4>0,1,2,3": remote, "6>0,1,2,3,4": (5,),
                                   "7>0,1,2,3,4": (10,), "8>0,1,2,3,4": (15,)}
    # every NPU output of L1 0 is shared by its 5 flows, the uplink by the 4 local ones
    assert output_sharing(switches[0]) == {0: 5, 1: 5, 2: 5, 3: 5, 4: 4}
    assert _flows(switches[5]) == {"0>1,2,3,4": (0, 5, 10, 15), "1>0,2,3,4": (1, 6, 11, 16),
                                   "2>0,1,3,4": (2, 7, 12, 17), "3>0,1,2,4": (3, 8, 13),
                                   "4>0,1,2,3": (4, 9, 14)}


def test_fred_b_reduce_out_shares_inputs_not_outputs():
    """io-reduce: the trees reversed. Each output of L1 0 takes one flow, but every NPU input
    feeds all five: the packets of an NPU's 18 stripes must come in the order the switch
    serves its flows."""
    (l1_0, *_) = stripe_tree_flows(FRED_B18, "io-reduce")
    assert output_sharing(l1_0) == {4: 1, 5: 1, 6: 1, 7: 1, 8: 1}
    assert all(set(range(4)) <= set(s.flow.inputs) for s in l1_0)


def test_fred_d_spreads_the_trees_over_its_four_uplinks_and_fills_eight_slots():
    """Fred-D: stripe k's tree on uplink k mod 4 (L2 plane k mod 4). L1 0: 4 local flows and
    a downlink flow per uplink port = 8 distinct flows, the RTL's 8 slots; with 7 it is refused."""
    switches = stripe_tree_flows(FRED_D18, "io-broadcast")
    assert [len(s) for s in switches[:5]] == [8, 8, 8, 7, 7]
    assert _flows(switches[0])["5>0,1,2,3"] == (1, 9, 13, 17)    # uplink port 5 = uplink 1
    # L2 plane 0 carries the stripes k = 0 mod 4 only, one flow per source L1
    assert sorted(k for s in switches[5] for k in s.stripes) == [0, 4, 8, 12, 16]
    with pytest.raises(FredError, match="8 distinct flows on switch L1.0; each needs its own "
                                        "configuration slot and the RTL stores 7"):
        stripe_tree_flows(FRED_D18, "io-broadcast", phases=7)


def test_every_sender_follows_one_packet_order():
    """3 stripes of 10 flits in 4-flit packets: packets 0, 1, 2 of each, the last one short."""
    assert stripe_packet_order(3, 10, 4) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1),
                                             (0, 2), (1, 2), (2, 2)]


@pytest.mark.parametrize("spec, op, message", [
    (fabric_spec("fred-a", io_controllers=18), "io-broadcast", "neither multicasts nor reduces"),
    (fabric_spec("fred-b"), "io-reduce", "has none"),
    (FRED_B18, "multicast", "got op 'multicast'"),
])
def test_bad_requests_are_refused_by_name(spec, op, message):
    with pytest.raises(FredError, match=message):
        stripe_tree_flows(spec, op)


def test_bad_packet_order_arguments_are_refused():
    with pytest.raises(FredError, match="packet_flits must be a positive integer"):
        stripe_packet_order(3, 10, 0)
