"""The WDM optical ring's all-reduce algorithms (sysmodel/optical.py, docs/optical.md): WRHT's
group size, wavelengths, steps and loss constraint on hand-checked cases; ring and recursive
doubling; the optical-ring dimension kind of a cluster file."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from sysmodel.dimension_timing import stage_bytes_sent, stage_time
from sysmodel.dimensions import load_cluster, with_bandwidth
from sysmodel.optical import (OpticalRing, allreduce_time, plan_allreduce, wrht_group_size,
                              wrht_hops_per_level, wrht_levels, wrht_wavelengths)

RING = OpticalRing(wavelengths=4, wavelength_gbps=10.0, oeo_ns=1000.0, hop_loss_db=0.5, loss_budget_db=30.0)


@pytest.mark.parametrize("group, wavelengths", [(2, 1), (3, 1), (4, 2), (5, 2), (9, 4), (129, 64)])
def test_wrht_group_wavelengths(group, wavelengths):
    # the root's larger side: ceil((m-1)/2) senders share the fiber entering it
    assert wrht_wavelengths(group) == wavelengths


@pytest.mark.parametrize("nodes, w, group, levels", [
    (9, 4, 9, 1),        # 2W+1 = 9 members: one level
    (10, 4, 4, 2),       # 10 > 9: two levels; 4^2 = 16 >= 10 but 3^2 = 9 < 10
    (81, 4, 9, 2),       # 9^2
    (82, 4, 5, 3),       # 9^2 < 82: three levels; 5^3 = 125 >= 82, 4^3 = 64 < 82
    (1024, 64, 32, 2),   # 129 >= 32 = sqrt(1024)
    (2, 1, 2, 1),
])
def test_wrht_group_size_and_levels(nodes, w, group, levels):
    assert wrht_group_size(nodes, w) == group
    assert wrht_levels(nodes, group) == levels


def test_wrht_hops_per_level_by_hand():
    # 81 nodes in groups of 9: level 1 roots are 4 hops from the farthest member; level 2
    # groups 9 roots 9 apart: 4 x 9 = 36 hops
    assert wrht_hops_per_level(81, 9) == [4, 36]
    # 10 nodes in groups of 4: level 1 (4 members) 2 hops; 3 roots left, 4 apart: 1 x 4 = 4
    assert wrht_hops_per_level(10, 4) == [2, 4]


def test_wrht_plan_and_time_by_hand():
    plan = plan_allreduce(RING, "wrht", 81, 1e6)
    assert (plan.steps, plan.group, plan.wavelengths, plan.hops) == (4, 9, 4, 36)
    # 4 steps of the whole 1 MB at 10 GBps + 1 us each
    assert plan.time_s(RING) == pytest.approx(4 * (1e6 / 10e9 + 1e-6))


def test_ring_and_recursive_doubling_by_hand():
    ring = plan_allreduce(RING, "ring", 8, 8e6)
    assert (ring.steps, ring.wavelengths, ring.hops) == (14, 1, 1)
    assert ring.time_s(RING) == pytest.approx(14 * (1e6 / 10e9 + 1e-6))
    # 16 nodes: steps exchange at distance 1, 2, 4, 8 needing 1, 2, 4, 8 wavelengths; with 4,
    # the last runs in 2 rounds: 5 rounds of the whole message
    rd = plan_allreduce(RING, "recursive-doubling", 16, 1e6)
    assert (rd.steps, rd.hops) == (5, 8)
    assert rd.time_s(RING) == pytest.approx(5 * (1e6 / 10e9 + 1e-6))
    more = OpticalRing(8, 10.0, 1000.0, 0.5, 30.0)
    assert plan_allreduce(more, "recursive-doubling", 16, 1e6).steps == 4   # more wavelengths help RD ...
    assert allreduce_time(more, "ring", 16, 1e6) == allreduce_time(RING, "ring", 16, 1e6)  # ... not ring


def test_loss_budget_is_an_error_that_says_so():
    tight = OpticalRing(4, 10.0, 1000.0, 1.0, 20.0)        # at most 20 hops
    with pytest.raises(FredError, match=r"wrht on an optical ring of 81 nodes needs a 36-hop path: 36 dB .* "
                                        r"exceeds the loss budget of 20 dB \(at most 20 hops\)"):
        plan_allreduce(tight, "wrht", 81, 1e6)
    assert plan_allreduce(tight, "ring", 81, 1e6).hops == 1     # neighbours only: always fits
    with pytest.raises(FredError, match="power-of-two node count, got 12"):
        plan_allreduce(RING, "recursive-doubling", 12, 1e6)
    with pytest.raises(FredError, match="is not one of wrht, ring, recursive-doubling"):
        plan_allreduce(RING, "bcube", 8, 1e6)


OPTICAL = """
name = "o"
npus = 80
[[dimensions]]
name = "wafer"
kind = "fred"
size = 20
fabric = "fred-d"
[[dimensions]]
name = "out"
kind = "optical-ring"
size = 4
wavelengths = 4
wavelength_gbps = 10.0
latency_ns = 1000.0
hop_loss_db = 0.5
loss_budget_db = 30.0
"""


def test_optical_dimension_in_a_cluster(tmp_path):
    path = tmp_path / "o.toml"
    path.write_text(OPTICAL)
    out = load_cluster(path).dimensions[1]
    assert (out.kind, out.algorithm, out.bandwidth_gbps, out.optical.wavelengths) == ("optical-ring", "wrht", 10.0, 4)
    # 4 members, W = 4: one level (m = 4 <= 9): 2 steps of the whole chunk
    assert stage_time(out, "all-reduce", 1e6) == pytest.approx(2 * (1e6 / 10e9 + 1e-6))
    assert stage_bytes_sent(out, "all-reduce", 1e6) == pytest.approx(2 * 3 / 4 * 1e6)
    # reduce-scatter as a ring's on one wavelength: (n-1)/n S / b + (n-1) L
    assert stage_time(out, "reduce-scatter", 1e6) == pytest.approx(0.75e6 / 10e9 + 3e-6)
    faster = with_bandwidth(out, 20.0)
    assert (faster.bandwidth_gbps, faster.optical.wavelength_gbps) == (20.0, 20.0)


@pytest.mark.parametrize("change, message", [
    (("wavelengths = 4\n", ""), r"an optical-ring dimension needs wavelengths"),
    (("wavelengths = 4", "wavelengths = 4\nbandwidth_gbps = 5.0"), r"takes no bandwidth_gbps"),
    (('fabric = "fred-d"', 'fabric = "fred-d"\nwavelengths = 2'), r"apply to optical-ring dimensions only"),
    (("wavelengths = 4", 'wavelengths = 4\nalgorithm = "bcube"'), r"algorithm: expected one of 'wrht', 'ring'"),
])
def test_optical_dimension_errors(tmp_path, change, message):
    path = tmp_path / "o.toml"
    path.write_text(OPTICAL.replace(*change))
    with pytest.raises(FredError, match=message):
        load_cluster(path)
