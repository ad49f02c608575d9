"""Reduce-outs into their own controllers served in turn (``Traffic.paced_turn_s``): the RTL
fabric's I/O requests name each group's controller (controller g serves group g), and where
the groups' io-stores share an uplink's one port (Fred-B) each later turn adds the hand-over at
the controller's L1: the group's stream until the controller L1 starts its last packet (the
stream into the controller less what the controller's receive buffer, ``[fred]
vc_buffer_flits`` = the RTL's ``default_depth``, holds; or the stream through the uplink when
the buffer holds it all), that L1's select and the next group's first pass to its controller
(docs/fabric_validation.md, "Fred-B's DP-group I/O (session 15)" and "The turn's hand-over").
Pure Python: the model only."""

from dataclasses import replace
from fractions import Fraction

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import default_depth, fabric_spec, make_request
from sysmodel.collectives import Collective, evaluate
from sysmodel.fabric_model import fabric_platform, fabric_platform_toml, model_cycles, request_collectives

DP = dict(strategy="MP2-DP5-PP2", dim="dp")


def _packet(name: str, **overrides):
    spec = fabric_spec(name, io_controllers=4, **overrides)
    return spec, fabric_platform(spec, switch="packet")


def _cycles(spec, platform, size: int, op: str = "io-reduce", **group) -> float:
    return model_cycles(spec, make_request(spec, op=op, size_flits=size, **group), platform=platform).cycles


def test_the_platform_reads_the_rtls_buffer_per_vc_on_packet_switches_only():
    """B comes from the RTL's own figure (one definition: ``default_depth``), 24 flits int32 and
    40 fp16 on Fred-B; the circuit fabric has no VC buffers and writes none."""
    assert default_depth(fabric_spec("fred-b")) == 24
    assert default_depth(fabric_spec("fred-b", dtype="fp16")) == 40
    for dtype, flits in (("int32", 24), ("fp16", 40)):
        spec, (platform, _) = _packet("fred-b", dtype=dtype)
        assert platform.vc_buffer_flits == flits
    text = fabric_platform_toml(fabric_spec("fred-b"), clock_mhz=1000, flit_bytes=512)
    assert "vc_buffer_flits" not in text
    assert fabric_platform(fabric_spec("fred-b"))[0].vc_buffer_flits == 0


def test_the_rtl_requests_io_collectives_name_the_controller_each_group_is_rooted_at():
    spec = fabric_spec("fred-b", io_controllers=4)
    request = make_request(spec, op="io-reduce", size_flits=40, **DP)
    collectives = request_collectives(request, 512, spec.npus, io_controllers=spec.io_controllers)
    assert [c.controllers for c in collectives] == [(0,), (1,), (2,), (3,)]
    assert [c.group for c in collectives] == [coll.members for coll in request.collectives]


def test_fewer_groups_than_controllers_are_striped_over_every_controller():
    """The wafer's striped I/O (one group, 18 controllers: studies.mesh_validation) names no
    controller: every group's bytes go over every controller, as the RTL's striped run sends
    them, so the model is the controllers' shared bound, not one controller's whole stream."""
    spec = fabric_spec("fred-b", io_controllers=18)
    for op in ("io-broadcast", "io-reduce"):
        request = make_request(spec, op=op, size_flits=4014, group="wafer")
        (only,) = request_collectives(request, 512, spec.npus, io_controllers=spec.io_controllers)
        assert not only.controllers
    four = fabric_spec("fred-b", io_controllers=4)
    request = make_request(four, op="io-reduce", size_flits=40, **DP)
    assert all(not c.controllers for c in request_collectives(request, 512, four.npus, io_controllers=5))


def _alone(spec, platform, size: int) -> float:
    """One DP group's io-reduce alone (no turn to wait for), in cycles."""
    p = platform[0]
    request = make_request(spec, op="io-reduce", size_flits=size, **DP)
    one = evaluate(p, spec.name, request_collectives(request, 512, spec.npus, io_controllers=spec.io_controllers)[:1])
    assert one.phases == 1
    return one.time_s / p.switch_at("l1").cycle_s


def _figures(platform) -> tuple[float, float, float, float, int]:
    """(first-flit latency, packet latency, header select, phase switch, packet flits) of the
    controller L1 Fred_3(6), in cycles, as the platform reads them from the characterization."""
    l1 = platform[0].switch_at("l1")
    c = l1.cycle_s
    return (l1.first_flit_latency_cycles, l1.packet_latency_s / c, l1.header_select_s / c,
            l1.phase_switch_cycles, l1.preemption_packet_flits)


def test_four_dp_reduce_outs_on_one_port_uplinks_add_three_hand_overs_at_the_controller_l1():
    """Hand-computed: Fred-B int32, 4 DP groups (one NPU on every L1: every group crosses every
    L1's one-port uplink), S = 40 flits each, r = 16/375 flit/cycle, B = 24 flits (the
    controller's receive buffer), 8-flit packets, u = 1/2 (the uplinks). One group alone pays one
    phase; the four pay 3 later turns, each (``_paced_turn_s``, docs/fabric_validation.md, "The
    turn's hand-over"):

    * the controller L1 starts group g's last packet when the controller has B flits left:
      (S - B) / r = 16 x 375/16 = 375 after its stream began; the packet crosses the L1 (its
      packet latency, 8 + 1 = 9) and its 7 later flits leave one a cycle: 391 (the fabric
      would have brought the last flit after 39 x 2 = 78: not the bound);
    * the L1's header select (copy 7 + control 2 = 9);
    * group g+1's first flit from the controller L1's input to its controller: L1 (9) +
      uplink (1) + L2 Fred_3(5) (9) + uplink (1) + L1 (9) = 29;

    = 429 cycles (the RTL's, traced on the Amaranth fabric: 427)."""
    spec, platform = _packet("fred-b")
    assert _figures(platform) == (8, 9, 9, 15, 8)
    four = _cycles(spec, platform, 40, **DP)
    alone = _alone(spec, platform, 40)
    assert four - alone == pytest.approx(3 * (391 + 9 + 29))
    # the buffer credit: none (B = 0) charges the whole stream S / r per turn, 24 x 375/16 more
    none = (replace(platform[0], vc_buffer_flits=0), platform[1])
    assert _cycles(spec, none, 40, **DP) - four == pytest.approx(3 * 24 * 375 / 16)
    # a buffer holding the stream (B >= S): the controller L1 passes the last flit when the
    # half-rate uplink brings it, (S - 1) / u = 78 after the first; the hand-over as above
    whole = (replace(platform[0], vc_buffer_flits=40), platform[1])
    assert _cycles(spec, whole, 40, **DP) - alone == pytest.approx(3 * (78 + 9 + 29))
    # one group (the wafer's reduce-out) has no turn to wait for
    wafer = fabric_spec("fred-b", io_controllers=1)
    wafer_platform = fabric_platform(wafer, switch="packet")
    assert _cycles(wafer, wafer_platform, 40, group="wafer") == pytest.approx(
        _cycles(wafer, (replace(wafer_platform[0], vc_buffer_flits=0), wafer_platform[1]), 40, group="wafer"))


def test_fp16_reduce_outs_fit_the_buffer_and_turn_at_the_uplinks_pace():
    """Hand-computed: Fred-B fp16, B = 40 >= S = 40, so no controller paces the turn; each
    later turn is the group's stream through the half-rate uplink, (S - 1) / u = 78, the
    controller L1's header select (copy 7 + control 2 = 9) and the next group's first flit from
    the controller L1's input to its controller: 3 switches of fp16's packet latency 27 and two
    uplinks, 83: 170 cycles (the RTL's, traced on the Amaranth fabric: 167.3). fp16's longer
    pipelines enter through the chain only; the NPUs' sink backpressure does not enter (an
    io-reduce's NPUs only send)."""
    spec, platform = _packet("fred-b", dtype="fp16")
    assert platform[0].vc_buffer_flits == 40
    assert _figures(platform) == (26, 27, 9, 33, 8)
    four = _cycles(spec, platform, 40, **DP)
    assert four - _alone(spec, platform, 40) == pytest.approx(3 * (78 + 9 + 3 * 27 + 2))


def test_groups_that_do_not_share_a_port_stay_overlapped():
    """Fred-D: four uplink ports per L1, one per DP group: no turns, so the buffer does not
    enter (B = 24 and B = 0 give the same time) and the four take one phase."""
    spec, platform = _packet("fred-d")
    request = make_request(spec, op="io-reduce", size_flits=40, **DP)
    result = evaluate(platform[0], spec.name, request_collectives(request, 512, spec.npus, io_controllers=spec.io_controllers))
    assert result.phases == 1
    assert _cycles(spec, platform, 40, **DP) == pytest.approx(
        _cycles(spec, (replace(platform[0], vc_buffer_flits=0), platform[1]), 40, **DP))


def test_striped_io_stores_are_not_charged_turns_of_a_paced_stream():
    """``make eval``'s reading (no controllers named: every group striped over every
    controller) keeps the phase turns only: the buffer does not enter."""
    spec, (p, _) = _packet("fred-b")
    groups = [c.members for c in make_request(spec, op="io-reduce", size_flits=40, **DP).collectives]
    striped = [Collective("io-store", group=g, size=40 * 512.0) for g in groups]
    assert evaluate(p, spec.name, striped).time_s == evaluate(replace(p, vc_buffer_flits=0), spec.name,
                                                              striped).time_s


def test_named_controllers_are_checked():
    with pytest.raises(FredError, match="only io-load and io-store name"):
        Collective("all-reduce", group=(0, 1), size=8.0, controllers=(0,))
    with pytest.raises(FredError, match="distinct"):
        Collective("io-store", group=(0, 1), size=8.0, controllers=(1, 1))
    spec, (p, _) = _packet("fred-b")
    with pytest.raises(FredError, match=r"controller\(s\) \[4\] out of range"):
        evaluate(p, spec.name, [Collective("io-store", group=(0, 1), size=512.0, controllers=(4,))])
    # the rate is the platform's: a slower controller's turn is longer
    slow_spec = fabric_spec("fred-b", io_controllers=4, io_rate=Fraction(8, 375))
    slow = fabric_platform(slow_spec, switch="packet")
    fast_spec, fast = _packet("fred-b")
    assert _cycles(slow_spec, slow, 40, **DP) > _cycles(fast_spec, fast, 40, **DP)
