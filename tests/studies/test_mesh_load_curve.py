"""Latency against offered load on the mesh RTL (studies/mesh_load_curve.py): the zero-load
latency of every pair of a 2 x 2 mesh against the routers' and wires' documented timing, and a
small curve whose low load is near zero-load latency and whose hotspot overload saturates
(Amaranth simulator, a few seconds)."""

from __future__ import annotations

import pytest

from fred.cli import main
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import router_latency
from studies.mesh_load_curve import mesh_spec, mesh_zero_load, run_mesh_load_curve


def test_zero_load_latency_of_every_pair_is_the_documented_timing():
    """A packet alone crosses hops + 1 routers (2 cycles each, docs/mesh_rtl.md) and hops wires
    (1 cycle each); its first flit enters the source router in its generation cycle and the rest
    follow one per cycle: (hops + 1) * 2 + hops + (flits - 1). 2 x 2, 4-flit packets: 5, 8, 11."""
    spec = mesh_spec(2, 2, packet_flits=4, depth=8)
    measured = mesh_zero_load(spec)
    assert len(measured) == 16
    for (src, dst), cycles in measured.items():
        (sx, sy), (dx, dy) = spec.position(src), spec.position(dst)
        hops = abs(sx - dx) + abs(sy - dy)
        assert cycles == (hops + 1) * router_latency() + hops * spec.link_latency + 3, (src, dst)
    assert sorted(set(measured.values())) == [5, 8, 11]


def test_low_load_is_near_zero_load_and_a_hotspot_overload_saturates():
    curve = run_mesh_load_curve(rows=2, cols=2, patterns=("hotspot",), rates=(0.05, 0.9),
                                warmup=20, measure=80)
    hot_low, hot_high = curve.points
    assert curve.zero_load_latency == 8.0 and curve.zero_load_max == 11   # mean of 5 x 4, 8 x 8, 11 x 4
    assert not hot_low.saturated and hot_low.delivered_packets == hot_low.measured_packets > 0
    assert 5 <= hot_low.mean_latency < 2 * curve.zero_load_latency
    # hotspot at 0.9: NPU 0 is sent 0.9 x (0.25 x 4 + 0.75) = 1.58 flits per cycle but ejects at
    # most 1, so its queue grows without bound and the point saturates
    assert hot_high.saturated and curve.saturation["hotspot"] == 0.9
    assert hot_high.accepted < hot_high.generated


@pytest.mark.parametrize("argv, message", [
    (["--mesh", "5x5"], "--mesh"), (["--mesh", "3"], "ROWSxCOLS"),
])
def test_bad_mesh_shapes_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(["load-curve", *argv])
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_switch_options_with_mesh_are_refused(capsys):
    assert main(["load-curve", "--mesh", "2x2", "--ports", "4"]) == 1
    assert "--ports/--middle are the packet switch's" in capsys.readouterr().err


def test_the_network_needs_a_mesh_spec():
    from hdl.designs.mesh.mesh_network import MeshNetwork
    with pytest.raises(FredError, match="MeshNetwork needs a MeshFabricSpec"):
        MeshNetwork((2, 2))
