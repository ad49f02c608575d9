"""The model's platform of the RTL mesh (sysmodel/mesh_rtl_model.py), checked by hand.

Wafer all-reduce (hierarchical 2D, 5 rows x 4 columns), a share a of the buffer S rows first:
per direction, a horizontal link carries the row reduce-scatter and all-gather, 2 x 3/4 aS,
plus the columns-first chunk's row all-reduce on (1 - a)S / 5, 6/4 x (1 - a)S / 5 = 0.3 (1 - a)S;
a vertical link 0.4 aS + 1.6 (1 - a)S. Balanced: 1.2 a + 0.3 = 1.6 - 1.2 a, a = 13/24, the
busiest link 0.95 S. But a chunk's stages depend on each other (tests/sysmodel/test_stage_schedule.py):
at 13/24 they take 4.75 S cycles, at a = 1/2 4.0 S, where the summed loads' busiest link is
1.0 S flits (1.5/2 + 0.3/2 = 0.9 S horizontal, 0.4/2 + 1.6/2 = 1.0 S vertical)."""

from dataclasses import replace

import pytest

from hdl.contracts.mesh import MeshFabricSpec, router_latency
from sysmodel.mesh_rtl_model import mesh_model_cycles, mesh_platform, mesh_split

SPEC = MeshFabricSpec()


@pytest.fixture(scope="module")
def platform():
    return mesh_platform(SPEC)


def test_platform_links_are_a_quarter_of_the_npu_port_and_hops_cost_wire_plus_router(platform):
    assert platform.mesh_link_gbps == pytest.approx(platform.npu_send_gbps / 4)
    cycle_ns = platform.switch_at("l1").cycle_s * 1e9
    assert platform.link_latency_ns == pytest.approx((SPEC.link_latency + router_latency()) * cycle_ns)
    assert (platform.mesh_rows, platform.mesh_cols, platform.io_controllers) == (5, 4, 0)


def test_wafer_split_and_busiest_link_by_hand(platform):
    # the schedule is flat near 1/2 (the golden-section search lands within 1e-3 of it)
    assert mesh_split(SPEC, list(range(20)), 2400, platform=platform) == pytest.approx(0.5, abs=1e-3)
    est = mesh_model_cycles(SPEC, [list(range(20))], 2400, platform=platform)
    assert est.algorithm == "hierarchical-2d"
    assert est.busiest_link_flits == pytest.approx(2400, rel=1e-3)
    assert est.bandwidth_cycles == pytest.approx(4 * 2400, rel=1e-3)
    # bandwidth-bound: the schedule (4.0 S) plus the stages' hop latencies, a few dozen cycles
    assert 4 * 2400 < est.cycles < 4 * 2400 + 60


def test_pairs_ring_sends_the_whole_buffer_each_way(platform):
    # MP2 groups of MP2-DP5-PP2 are neighbour pairs: a ring of 2 sends S each way on its link
    est = mesh_model_cycles(SPEC, [[0, 1], [2, 3]], 100, platform=platform)
    assert est.algorithm == "ring" and est.busiest_link_flits == pytest.approx(100)


def test_pieces_are_whole_flits_as_the_rtl_engines_pad_them(platform):
    # the RTL's wafer all-reduce cuts each chunk into 20 pieces (rows of 4 x columns of 5) of
    # whole flits: 1, 7 and 40 flits all send two chunks of 20 (1 -> (1, 1), 7 -> (6, 1),
    # 40 -> (20, 20)); 63 flits two of 40 ((40, 23) padded), as 80 flits do
    wafer = [list(range(20))]
    timed = {s: mesh_model_cycles(SPEC, wafer, s, platform=platform) for s in (1, 7, 40, 63, 80)}
    assert timed[1].cycles == pytest.approx(timed[40].cycles) == pytest.approx(timed[7].cycles)
    assert timed[1].busiest_link_flits == pytest.approx(timed[40].busiest_link_flits)
    assert timed[63].cycles == pytest.approx(timed[80].cycles)
    assert timed[40].cycles < timed[63].cycles
    # a byte-granular mesh (the paper's: mesh_flit_bytes 0) pays a 1-flit all-reduce's bytes only
    granular = replace(platform, mesh_flit_bytes=0)
    one = mesh_model_cycles(SPEC, wafer, 1, platform=granular)
    assert one.busiest_link_flits == pytest.approx(1, rel=1e-2) and timed[1].busiest_link_flits == pytest.approx(40)
    assert one.cycles < timed[1].cycles - 60


def test_ring_directions_are_padded_to_whole_flits_per_member(platform):
    # a ring of 5 (snake order over a 2 x 3 corner minus one) both ways: 6 flits -> (5, 1),
    # each direction padded to 5 flits, as 10 flits ((5, 5)) are
    group = [[0, 1, 2, 5, 6]]
    six, ten = (mesh_model_cycles(SPEC, group, s, platform=platform) for s in (6, 10))
    assert six.algorithm == ten.algorithm == "ring"
    assert six.cycles == pytest.approx(ten.cycles)
