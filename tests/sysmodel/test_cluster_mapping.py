"""The strategy mapping across a cluster's outer dimensions (docs/cluster.md, "Strategy mapping"):
PP and DP across wafers, the 1F1B composition by hand, mappings that do not fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.cluster_training import (gradient_bytes_per_npu, parse_mapping, pipeline_across_time,
                                       resolve_mapping, simulate_cluster_iteration)
from sysmodel.dimensions import load_cluster
from sysmodel.iteration_plan import stage_layers
from sysmodel.multidim_collectives import run_collective
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload

T17 = get_workload("transformer-17b")
CLUSTER = load_cluster("cluster-fred-wafers-3d.toml")      # wafer 20 x rack 10 x spine 5


def test_pipeline_across_by_hand():
    # two wafers of 4 s and 6 s, 2 microbatches: slot 3 s; transfer 0.5 s hides behind it:
    # (2 + 2 - 1) x 3 + 2 x 1 x 0.5 = 10 s
    assert pipeline_across_time([4.0, 6.0], [0.0, 0.0], 2, 0.5) == pytest.approx(10.0)
    # a 4 s transfer paces the pipeline instead: 3 x 4 + 2 x 4 = 20 s
    assert pipeline_across_time([4.0, 6.0], [0.0, 0.0], 2, 4.0) == pytest.approx(20.0)
    # the in-wafer DP reduction runs once, after the pipeline: slot (6 - 1) / 2 = 2.5;
    # 3 x 2.5 + 1 + 1 = 9.5 s
    assert pipeline_across_time([4.0, 6.0], [1.0, 1.0], 2, 0.5) == pytest.approx(9.5)
    # one wafer: its own time
    assert pipeline_across_time([4.0], [1.0], 8, 0.0) == 4.0


def test_mapping_parse_and_resolve():
    assert parse_mapping("rack=PP, spine=dp") == {"rack": "pp", "spine": "dp"}
    assert parse_mapping(None) == {} and parse_mapping("") == {}
    pp, dp = resolve_mapping(CLUSTER, {"rack": "pp"})
    assert [d.name for d in pp] == ["rack"] and [d.name for d in dp] == ["spine"]
    pp, dp = resolve_mapping(CLUSTER, None)
    assert pp == () and [d.name for d in dp] == ["rack", "spine"]


@pytest.mark.parametrize("text, message", [
    ("rack", "mapping item 'rack' is not DIMENSION=dp\\|pp"),
    ("rack=pp,rack=dp", "names dimension 'rack' twice"),
])
def test_malformed_mapping_text(text, message):
    with pytest.raises(FredError, match=message):
        parse_mapping(text)


@pytest.mark.parametrize("mapping, message", [
    ({"pod": "pp"}, "has no dimension 'pod'; dimensions: wafer, rack, spine"),
    ({"wafer": "pp"}, "dimension 'wafer' is the wafer; MP, PP and DP inside it come from the in-wafer strategy"),
    ({"rack": "mp"}, "MP across wafers \\('rack'\\) is not modelled"),
    ({"rack": "ep"}, "'rack'='ep'; an outer dimension carries dp or pp"),
])
def test_mappings_that_do_not_fit(mapping, message):
    with pytest.raises(FredError, match=message):
        simulate_cluster_iteration(CLUSTER, T17, mapping=mapping)


def test_pp_across_needs_layers_and_weight_stationary():
    with pytest.raises(FredError, match="PP across wafers needs a weight-stationary workload"):
        simulate_cluster_iteration(CLUSTER, get_workload("gpt-3"), mapping={"rack": "pp"})
    wafer, rack, spine = CLUSTER.dimensions
    wide = replace(CLUSTER, dimensions=(wafer, replace(rack, size=81), spine))
    with pytest.raises(FredError, match="PP across wafers of degree 81 needs at least 81 layers; "
                                        "transformer-17b has 80"):
        simulate_cluster_iteration(wide, T17, mapping={"rack": "pp"})


def test_all_dp_mapping_is_the_default():
    a = simulate_cluster_iteration(CLUSTER, T17, schedule="fixed", chunks=8)
    b = simulate_cluster_iteration(CLUSTER, T17, schedule="fixed", chunks=8, mapping={"rack": "dp", "spine": "dp"})
    assert a.time_s == b.time_s and a.pp_across == b.pp_across == 1


def test_pp_across_wafers_composes_the_wafers():
    """PP over the 10-wafer rack, DP over the 5-wafer spine: the pipeline is the 1F1B formula
    over the ten layer ranges simulated on one wafer each, the cross-wafer all-reduce spans
    the spine only, and each wafer holds a tenth of the layers (less memory per NPU)."""
    strategy = parse_strategy("MP2-DP5-PP2")
    r = simulate_cluster_iteration(CLUSTER, T17, strategy, schedule="fixed", chunks=8, mapping={"rack": "pp"})
    wafer = CLUSTER.dimensions[0]
    parts = [T17.with_(layers=tuple(T17.layers[i] for i in g)) for g in stage_layers(T17, 10)]
    runs = [simulate_iteration(wafer.wafer, wafer.fabric, p, strategy) for p in parts]
    m = T17.microbatches
    rack = CLUSTER.dimension("rack")
    boundary = max(p.layers[-1].out_bytes for p in parts[:-1]) * runs[0].samples_per_dp / m / strategy.mp
    transfer = boundary / rack.bandwidth_bps + rack.latency_s
    pipeline = pipeline_across_time([x.time_s for x in runs], [x.breakdown["dp"] for x in runs], m, transfer)
    share = max(gradient_bytes_per_npu(p, strategy) for p in parts) / strategy.dp
    cross = run_collective(CLUSTER, "all-reduce", share, dimensions=["spine"], schedule="fixed", chunks=8)
    assert r.pipeline_s == pytest.approx(pipeline, rel=1e-12)
    assert r.time_s == pytest.approx(pipeline + cross.time_s, rel=1e-12)
    assert [u.name for u in r.cross_wafer.dimensions] == ["spine"]
    assert (r.pp_across, r.dp_global, r.npus_used) == (10, 5 * 5, 1000)
    assert r.exposed_by_dimension["rack"] == pytest.approx(r.pipeline_s - r.wafer.time_s)
    whole = simulate_cluster_iteration(CLUSTER, T17, strategy, schedule="fixed", chunks=8)
    assert r.wafer.memory.total < whole.wafer.memory.total
