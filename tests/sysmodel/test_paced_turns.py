"""Sink-paced reduce-outs served in turn (``Traffic.paced_turn_s``): the RTL fabric's I/O
requests name each group's controller (controller g serves group g), and where the groups'
io-stores share an uplink's one port (Fred-B) each later turn adds its stream into its
controller less what the controller L1's input buffer per VC (``[fred] vc_buffer_flits``, the
RTL's ``default_depth``) took while it waited (docs/fabric_validation.md, "Fred-B's DP-group
I/O (session 15)"). Pure Python: the model only."""

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


def test_four_dp_reduce_outs_on_one_port_uplinks_add_three_turns_of_their_unbuffered_stream():
    """Hand-computed: Fred-B, 4 DP groups (one NPU on every L1: every group crosses every L1's
    one-port uplink), S = 40 flits each, r = 16/375 flit/cycle, B = 24 flits. One group alone
    pays one phase; the four pay 3 later turns, each the phase turn (the slowest switch's
    measured phase switch, as before) plus (S - B) / r = 16 x 375/16 = 375 cycles."""
    spec, platform = _packet("fred-b")
    p = platform[0]
    turn = max(p.switch_at("l1").phase_switch_cycles, p.switch_at("l2").phase_switch_cycles)
    four = _cycles(spec, platform, 40, **DP)
    request = make_request(spec, op="io-reduce", size_flits=40, **DP)
    one = evaluate(p, spec.name, request_collectives(request, 512, spec.npus, io_controllers=spec.io_controllers)[:1])
    alone = one.time_s / p.switch_at("l1").cycle_s
    assert one.phases == 1
    assert four - alone == pytest.approx(3 * (turn + 375.0))
    # the buffer credit: none (B = 0) charges the whole stream S / r = 937.5 per turn; a buffer
    # holding the stream (B >= S) charges the phase turns only
    none = (replace(p, vc_buffer_flits=0), platform[1])
    assert _cycles(spec, none, 40, **DP) - four == pytest.approx(3 * 24 * 375 / 16)
    whole = (replace(p, vc_buffer_flits=40), platform[1])
    assert _cycles(spec, whole, 40, **DP) - alone == pytest.approx(3 * turn)
    # one group (the wafer's reduce-out) has no turn to wait for
    wafer = fabric_spec("fred-b", io_controllers=1)
    wafer_platform = fabric_platform(wafer, switch="packet")
    assert _cycles(wafer, wafer_platform, 40, group="wafer") == pytest.approx(
        _cycles(wafer, (replace(wafer_platform[0], vc_buffer_flits=0), wafer_platform[1]), 40, group="wafer"))


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
