"""The striped I/O trees on Fred-B/D (hdl/compiler/io_stripe_trees.py): the distinct flows per
switch by hand, how many share each output, the one packet order, and what is refused."""

import pytest

from hdl.compiler.io_stripe_trees import (home_delay, home_late_order, home_stripes, output_sharing,
                                         stripe_packet_order, stripe_tree_flows)
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import default_depth, fabric_spec

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


def test_home_packets_go_delay_places_late():
    """3 stripes of 2 one-flit packets (order 0 1 2 0 1 2, index n), stripe 1 home, 2 places
    late: home packet n goes right after the others' packet n + 2, or at the end."""
    assert home_late_order(3, 2, 1, {1}, 0) == stripe_packet_order(3, 2, 1)
    assert home_late_order(3, 2, 1, {1}, 2) == [(0, 0), (2, 0), (0, 1), (1, 0), (2, 1), (1, 1)]
    assert home_late_order(3, 2, 1, {1}, 9) == [(0, 0), (2, 0), (0, 1), (2, 1), (1, 0), (1, 1)]
    with pytest.raises(FredError, match="delay must be an integer >= 0"):
        home_late_order(3, 2, 1, {1}, -1)
    with pytest.raises(FredError, match=r"home stripes \[3\] must be in 0..2"):
        home_late_order(3, 2, 1, {3}, 1)


def test_the_home_stripes_are_the_controllers_on_the_l1():
    assert home_stripes(FRED_B18, 0) == (0, 5, 10, 15)
    assert home_stripes(FRED_B18, 4) == (4, 9, 14)
    with pytest.raises(FredError, match="l1 must be in 0..4"):
        home_stripes(FRED_B18, 5)


def test_the_delay_is_the_widest_window_the_downlink_holds_by_hand():
    """Window rule: delay + 1 consecutive places of the one order hold at most depth // 8 packets
    of one downlink's home stripes. Fred-B (one uplink, 24-flit buffers: 3 packets), L1 0's
    stripes 0, 5, 10, 15 at places 0, 5, 10, 15, 18, 23, ...: 4 of them within 14 places
    (15 .. 28), so 13 places at most, delay 12; in one round (54 flits, one packet per stripe)
    0 .. 15 is 16 places: delay 14. Fred-D: a downlink (L1 k mod 5, plane k mod 4) carries
    one stripe of the 18 per round, so any window of a round holds 1: one round, 18 (17 when
    the order is one round long). 24-flit buffers at both (the spec's default_depth)."""
    assert default_depth(FRED_B18) == default_depth(FRED_D18) == 24
    assert home_delay(FRED_B18, 100, 8, 24) == 12
    assert home_delay(FRED_B18, 3, 8, 24) == 14
    assert home_delay(FRED_D18, 223, 8, 24) == 18
    assert home_delay(FRED_D18, 3, 8, 24) == 17
    assert home_delay(FRED_B18, 100, 8, 8) == 2        # one packet: L1 0's 15 and 18 are 4 places
    with pytest.raises(FredError, match="holds no whole packet"):
        home_delay(FRED_B18, 100, 8, 7)


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
