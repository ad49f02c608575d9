"""The I/O controllers' paced flit in the model's time (``sysmodel.network.Traffic.controller_lead_s``):
a flit leaves (is stored from) a controller's link only after its whole time on it, f, so I/O
streams take max(C, O + f), C the busiest controller link's time, O the busiest other link's.
Hand-computed on a two-link network, then on the fabrics' own I/O collectives."""

import pytest

from hdl.contracts.fabric import fabric_spec, make_request
from sysmodel.fabric_model import fabric_platform, model_cycles
from sysmodel.network import Network


def _net() -> Network:
    """NPUs 0 and 1, controller 2: io2 -> npu0 at 16 B/s (kind io), npu0 -> npu1 at 4 B/s;
    16 B flits, so f = 1 s."""
    net = Network("t", 2)
    io = net.add_node("io0", "io")
    net.add_link(io, 0, 16.0, 0.0, "io")
    net.add_link(0, 1, 4.0, 0.0, "mesh")
    net.flit_bytes = 16
    net.finalize()
    return net


@pytest.mark.parametrize("other_bytes,lead", [
    (100.0, 1.0),    # O = 25 s > C = 3 s: the whole f (3 flits at 1 s, then 25 s on the other link)
    (10.0, 0.5),     # O = 2.5 s: max(3, 3.5) - 3
    (8.0, 0.0),      # O = 2 s: O + f = C, the controller's link hides it
    (0.0, 0.0),      # only the controller's link: its 3 s count every flit's f already
])
def test_the_lead_is_what_one_flit_on_the_controller_adds_to_the_busiest_link(other_bytes, lead):
    net = _net()
    t = net.traffic()
    t.loads[0] = 48.0            # 3 flits on the controller's link: C = 3 s
    t.loads[1] = other_bytes
    t.controller_flit_bytes = net.controller_flit_bytes()
    assert net.controller_flit_bytes() == 16
    assert t.controller_lead_s() == pytest.approx(lead)
    assert t.time() == pytest.approx(max(3.0, other_bytes / 4) + lead)


def test_no_controller_flit_no_lead():
    net = _net()
    t = net.traffic()
    t.loads[:] = (48.0, 100.0)
    assert t.controller_lead_s() == 0.0 and t.time() == pytest.approx(25.0)
    # merged with an I/O traffic, the lead applies; copies keep it
    io = net.traffic()
    io.loads[0] = 48.0
    io.controller_flit_bytes = 16.0
    t.merge(io)
    assert t.controller_lead_s() == pytest.approx(1.0)
    assert t.scaled(1.0).controller_lead_s() == pytest.approx(1.0)
    assert t.onto(net).controller_lead_s() == pytest.approx(1.0)


@pytest.mark.parametrize("fabric", ["fred-b", "fred-d", "fred-a"])
@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_one_controller_per_group_is_bound_by_its_link_so_nothing_is_added(fabric, op):
    """The packet fabric's I/O ops (one controller, 40 flits): the controller's link carries all
    of them at 16/375, 937.5 cycles, the busiest by far (an NPU link: 40): its time counts the
    first (last) flit's 23.4 cycles already, the model is unchanged."""
    spec = fabric_spec(fabric, io_controllers=1)
    platform = fabric_platform(spec, switch="packet")
    est = model_cycles(spec, make_request(spec, op=op, size_flits=40, group="wafer"), platform=platform)
    assert est.bandwidth_cycles == pytest.approx(40 * 375 / 16)
    assert est.busiest_link in ("io0->l1.0", "l1.0->io0")
    expected = {"fred-b": 31.0, "fred-d": 37.0, "fred-a": 318.0}[fabric]
    assert est.latency_cycles == pytest.approx(expected)


def test_striped_streams_that_reach_the_busiest_uplink_one_after_another_take_their_chains_time():
    """Fred-A with the mesh's 18 controllers, 3-flit stripes (54 flits per NPU): L1.0's uplink
    carries the most, 51 flits at 1/2 flit per cycle (102 cycles), but the 17 chains reach it at
    their own points of their way (a chain entering on L1.0 at once, one entering on L1.1 after
    15 members), each at its controller's rate: 3 flits asking the uplink for 2 cycles each in
    70.3, so at most a few at once and no backlog. The time is a chain's own, the controller's 3
    paced flits (70.3) + the chain's 383 = 453.3 (before session 13: 102 + 23.4375 + 383 =
    508.4375, the uplink's time before the whole chain; the RTL 482, docs/fabric_validation.md,
    "The chain rule"); the busiest link is still reported with its 102 cycles."""
    spec = fabric_spec("fred-a", io_controllers=18)
    est = model_cycles(spec, make_request(spec, op="io-broadcast", size_flits=54, group="wafer"))
    assert est.bandwidth_cycles == pytest.approx(102)
    assert est.cycles == pytest.approx(3 * 375 / 16 + 383)


def test_a_stripe_stream_backlogged_on_an_uplink_waits_for_the_backlog_then_takes_the_longest_way_on():
    """Two chains by hand (_io_chain_time): both cross one shared link of rate 1 (a stripe of
    10 units takes it 10 s) at heads 0 and 1, each fed at rate 1/2 (its controller link: 20 s
    for the stripe), the chains 30 and 25 s long. Alone each takes 20 + its latency (50, 45).
    Together they ask 1/2 + 1/2 = 1 of the link: never more than all of it, no backlog: 50.
    With a link of rate 1/2 instead (a stripe takes it 20 s, each chain asks all of it), the
    two ask 2 from t = 1 to 20: backlog from 1 (after 0..1 alone, served at once), growing 1
    per s to 19 at t = 20, then chain 1 alone asks 1 until 21 (backlog stays 19), then nothing:
    it ends at 21 + 19 = 40. Then the controller flit (2 s) and the longest way on of the two
    (30 - 0 = 30 and 25 - 1 = 24): 40 + 2 + 30 = 72."""
    from types import SimpleNamespace

    import numpy as np

    from sysmodel.collectives import _io_chain_time
    # links: 0, 1 the controllers' (rate 1/2), 2 the shared one
    for shared, expected in ((1.0, 50.0), (0.5, 72.0)):
        net = SimpleNamespace(link_bw=np.array([0.5, 0.5, shared]))
        heads = ((((0, 0.0), (2, 0.0)), 30.0), (((1, 0.0), (2, 1.0)), 25.0))
        assert _io_chain_time(net, heads, 10.0, 2.0) == pytest.approx(expected)
