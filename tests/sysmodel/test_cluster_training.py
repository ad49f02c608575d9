"""Training across a cluster's dimensions: the wafer's iteration unchanged, the cross-wafer
gradient all-reduce added, the mapping's errors (docs/cluster.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.cluster_training import gradient_bytes_per_npu, simulate_cluster_iteration
from sysmodel.dimensions import Cluster, Dimension, load_cluster, wafer_cluster
from sysmodel.multidim_collectives import run_collective
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload

RESNET = get_workload("resnet-152")


@pytest.mark.parametrize("fabric", ["mesh", "fred-d"])
def test_one_wafer_is_the_wafer_model(fabric):
    """A cluster of one wafer gives the wafer model's iteration exactly (what `fred eval`
    reports for the paper's wafer)."""
    platform = default_platform()
    result = simulate_cluster_iteration(wafer_cluster(platform, fabric), RESNET)
    assert result.cross_wafer is None
    assert result.time_s == simulate_iteration(platform, fabric, RESNET, RESNET.strategy).time_s


def test_gradient_bytes_by_hand():
    # MP1-PP1: every parameter on every NPU, FP16
    assert gradient_bytes_per_npu(RESNET, parse_strategy("MP1-DP20-PP1")) == pytest.approx(RESNET.params * 2)
    t17 = get_workload("transformer-17b")
    per_mp = gradient_bytes_per_npu(t17, parse_strategy("MP4-DP5-PP1"))
    shardable = sum(l.params for l in t17.layers if l.mp_shardable)
    assert per_mp == pytest.approx(2 * (shardable / 4 + (t17.params - shardable)))


def test_cross_wafer_reduction_is_added_and_scheduled():
    cluster = load_cluster("cluster-fred-wafers.toml")
    strategy = parse_strategy("MP1-DP20-PP1")
    r = simulate_cluster_iteration(cluster, RESNET, strategy, schedule="fixed", chunks=8)
    expect = run_collective(cluster, "all-reduce", RESNET.params * 2 / 20, dimensions=["scale-out"],
                            schedule="fixed", chunks=8)
    assert r.cross_wafer.time_s == expect.time_s
    assert r.time_s == pytest.approx(r.wafer.time_s + expect.time_s)
    assert (r.npus_used, r.dp_global) == (1000, 1000)
    # a slower scale-out only slows the cross-wafer part
    wafer, out = cluster.dimensions
    slow = replace(cluster, dimensions=(wafer, replace(out, bandwidth_gbps=out.bandwidth_gbps / 2)))
    s = simulate_cluster_iteration(slow, RESNET, strategy, schedule="fixed", chunks=8)
    assert s.wafer.time_s == r.wafer.time_s and s.cross_wafer.time_s > r.cross_wafer.time_s


def test_strategies_that_do_not_map():
    cluster = load_cluster("cluster-fred-wafers.toml")
    with pytest.raises(FredError, match="needs 40 NPUs per wafer; the wafer dimension 'wafer' has 20"):
        simulate_cluster_iteration(cluster, RESNET, parse_strategy("MP2-DP20-PP1"))
    ring_first = Cluster("r", "", 4, (Dimension("a", "ring", 4, 100.0, 0.0, False),))
    with pytest.raises(FredError, match="must be a wafer \\(fred or mesh\\), not a ring"):
        simulate_cluster_iteration(ring_first, RESNET)


def test_time_per_sample_counts_every_replica():
    cluster = load_cluster("cluster-fred-wafers.toml")
    r = simulate_cluster_iteration(cluster, RESNET, parse_strategy("MP2-DP10-PP1"))
    assert r.dp_global == 10 * 50 and r.npus_used == 1000
    assert r.time_per_sample_s == pytest.approx(r.time_s / (r.wafer.samples_per_dp * 500))
