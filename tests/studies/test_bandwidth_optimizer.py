"""The per-dimension bandwidth optimizer (studies/bandwidth_optimizer.py,
docs/bandwidth_optimizer.md): hand-derivable optima within 1 %, never worse than the grid, the
same composition as the cluster model, clear errors."""

from __future__ import annotations

import math

import pytest

from hdl.contracts.errors import FredError
from studies.bandwidth_optimizer import (NetworkCost, collective_time_function, dimension_loads,
                                         optimize_bandwidth, with_bandwidths, workload_time_function)
from sysmodel.cluster_training import simulate_cluster_iteration
from sysmodel.dimensions import Cluster, Dimension, load_cluster
from sysmodel.workload_file import get_workload

# two switches of 4, no latency, one chunk: the all-reduce's stages run one after another, so
# T = L0 / B0 + L1 / B1 with L0 = 2 x 3/4 x S (reduce-scatter + all-gather of S on the inner
# switch) and L1 = 2 x 3/4 x S/4 (the all-reduce of the quarter left on the outer one)
TWO = Cluster("two", "", 16, (Dimension("a", "switch", 4, 10.0, 0.0, False),
                              Dimension("b", "switch", 4, 10.0, 0.0, False)))
S = 1e9
L0, L1 = 1.5 * S, 1.5 * S / 4


def test_loads_by_hand():
    assert dimension_loads(TWO, ("a", "b"), S) == pytest.approx({"a": L0, "b": L1})


def test_two_dimensions_hand_derived_optimum_within_one_percent():
    # sum B = 100 GBps: Lagrange gives B_i ~ sqrt(L_i): B_a = 100 x 2/3, T* = (sqrt L0 + sqrt L1)^2 / budget
    f = collective_time_function(TWO, S, chunks=1)
    opt = optimize_bandwidth(TWO, f, budget=100.0, closed_form_start=False, grid=10)
    assert opt.bandwidths["a"] == pytest.approx(200 / 3, rel=0.01)
    assert opt.bandwidths["b"] == pytest.approx(100 / 3, rel=0.01)
    assert opt.objective == pytest.approx((math.sqrt(L0) + math.sqrt(L1)) ** 2 / 100e9, rel=0.01)
    assert opt.objective <= opt.grid_best["objective"]
    assert sum(opt.bandwidths.values()) == pytest.approx(100.0)


def test_cost_budget_hand_derived_optimum():
    # sum c_i B_i = 1 with c_a = 0.01, c_b = 0.0025: B_i ~ sqrt(L_i / c_i) and L_b / c_b =
    # (L0 / 4) / (c_a / 4) = L_a / c_a, so B_a = B_b = 1 / 0.0125 = 80 GBps (a ring of 4 without
    # latency sends what a switch of 4 sends)
    two = Cluster("two", "", 16, (TWO.dimensions[0], Dimension("b", "ring", 4, 10.0, 0.0, False)))
    cost = NetworkCost(1.0, {"switch": 0.01, "ring": 0.0025}, "test")
    f = collective_time_function(two, S, chunks=1)
    opt = optimize_bandwidth(two, f, budget=1.0, unit="cost", cost=cost, closed_form_start=False, grid=10)
    assert opt.bandwidths["a"] == pytest.approx(80.0, rel=0.01)
    assert opt.bandwidths["b"] == pytest.approx(80.0, rel=0.01)
    assert opt.closed_form["serial"] == pytest.approx({"a": 80.0, "b": 80.0})


def test_perf_per_cost_stops_spending_where_it_no_longer_pays():
    # one dimension, T = L / B, cost = 1 + c B: T x cost = L (1/B + c) falls with B for ever, so
    # the optimum spends the whole budget; with a latency floor it is still the budget
    one = Cluster("one", "", 4, (Dimension("a", "switch", 4, 10.0, 0.0, False),))
    cost = NetworkCost(1.0, {"switch": 0.01}, "test")
    opt = optimize_bandwidth(one, collective_time_function(one, S, chunks=1), budget=50.0,
                             objective="perf-per-cost", cost=cost)
    assert opt.bandwidths["a"] == pytest.approx(50.0, rel=0.01)
    assert opt.cost == pytest.approx(1.5, rel=0.01)


def test_workload_objective_is_the_cluster_model():
    cluster = load_cluster("cluster-fred-wafers-3d.toml")
    workload = get_workload("transformer-17b")
    f = workload_time_function(cluster, [(workload, 1.0)])
    split = {"rack": 120.0, "spine": 30.0}
    expected = simulate_cluster_iteration(with_bandwidths(cluster, split), workload).time_s
    assert f.times(split)["transformer-17b"] == pytest.approx(expected, rel=1e-12)
    opt = optimize_bandwidth(cluster, f, budget=150.0, grid=10)
    assert opt.objective <= opt.grid_best["objective"]
    assert sum(opt.bandwidths.values()) == pytest.approx(150.0, rel=1e-6)


def test_errors():
    f = collective_time_function(TWO, S)
    with pytest.raises(FredError, match="objective 'speed' is not one of time, perf-per-cost"):
        optimize_bandwidth(TWO, f, budget=10.0, objective="speed")
    with pytest.raises(FredError, match="budget must be a number > 0, got -1"):
        optimize_bandwidth(TWO, f, budget=-1.0)
    with pytest.raises(FredError, match="needs a cost model"):
        optimize_bandwidth(TWO, f, budget=1.0, unit="cost")
    with pytest.raises(FredError, match="no per-GBps cost for ring"):
        NetworkCost(1.0, {"switch": 1.0}).coefficient("ring")
    wafer_only = load_cluster("cluster-fred-wafers.toml")
    with pytest.raises(FredError, match="no dimension whose bandwidth can be chosen"):
        collective_time_function(Cluster("w", "", 20, wafer_only.dimensions[:1]), S)


def test_three_dimensions_beat_the_grid_and_the_closed_forms():
    # themis-3d.toml: ring 4, fully-connected 16, switch 16; 1 GB all-reduce, 64 chunks, fixed
    # order: the chunks pipeline, so the optimum sits near B_i ~ L_i (within 1 % here)
    cluster = load_cluster("themis-3d.toml")
    f = collective_time_function(cluster, 1e9, schedule="fixed", chunks=64)
    opt = optimize_bandwidth(cluster, f, budget=300.0)
    assert opt.objective <= opt.grid_best["objective"]
    for split in opt.closed_form.values():
        assert opt.objective <= f(split)
    for name, b in opt.closed_form["pipelined"].items():
        assert opt.bandwidths[name] == pytest.approx(b, rel=0.02, abs=0.5)
    with pytest.raises(FredError, match="is a fred wafer: its bandwidth is its wafer platform"):
        with_bandwidths(load_cluster("cluster-fred-wafers.toml"), {"wafer": 10.0})
