"""The cluster study's mechanisms (docs/cluster.md): computed, not stored."""

from __future__ import annotations

import pytest

from studies.cluster_study import scale_out_table, scaling_table, three_dimensional, training_table
from sysmodel.dimensions import load_cluster
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload


def test_scale_out_hides_the_wafer_fabric_until_it_is_fast():
    slow, fast = scale_out_table(bandwidths=(50.0, 400.0))
    assert slow.speedup < 1.05 < 1.3 < fast.speedup


def test_cluster_training_speedup_never_exceeds_the_wafers():
    rows = scaling_table(workloads=("transformer-17b",), wafers=(50,), bandwidths=(50.0, 3000.0))
    w = get_workload("transformer-17b")
    p = default_platform()
    wafer = simulate_iteration(p, "mesh", w, w.strategy).time_s / simulate_iteration(p, "fred-d", w, w.strategy).time_s
    assert rows[0].speedup < rows[1].speedup <= wafer + 1e-12
    assert rows[1].fred_cross_s < rows[0].fred_cross_s / 10


def test_themis_only_matters_with_two_outer_dimensions():
    rows = {(r.cluster, r.schedule): r for r in training_table(workloads=("gpt-3",))}
    assert rows["2d", "fixed"].fred_s == rows["2d", "themis"].fred_s
    assert rows["3d", "themis"].fred_s < rows["3d", "fixed"].fred_s
    three = three_dimensional(load_cluster("cluster-fred-wafers.toml"))
    assert [d.size for d in three.dimensions] == [20, 10, 5] and three.npus == 1000
