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


def test_striped_streams_behind_a_busier_uplink_add_one_controller_flit():
    """Fred-A with the mesh's 18 controllers, 3-flit stripes (54 flits per NPU): the busiest link
    is L1.0's uplink (51 flits at 1/2 flit per cycle: 102 cycles), the controllers' links carry
    3 flits (70.3 cycles): 102 + 23.4375 + the chain's 383 = 508.4375 (circuit platform, the
    rows' own)."""
    spec = fabric_spec("fred-a", io_controllers=18)
    est = model_cycles(spec, make_request(spec, op="io-broadcast", size_flits=54, group="wafer"))
    assert est.bandwidth_cycles == pytest.approx(102)
    assert est.cycles == pytest.approx(102 + 375 / 16 + 383)
