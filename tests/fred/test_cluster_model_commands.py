"""``fred sweep``, ``fred eval`` and ``fred dse`` on a cluster platform: the same output forms
with the cluster's iteration, and errors for options with no meaning there (docs/cluster.md)."""

import csv
import json

import pytest

from fred.cli import main
from hdl.contracts.placement import parse_strategy
from studies.cluster_points import cluster_strategy_row
from sysmodel.cluster_training import simulate_cluster_iteration
from sysmodel.dimensions import load_cluster, with_wafer
from sysmodel.workload_file import get_workload

CLUSTER = "cluster-fred-wafers-3d.toml"


def _json(argv, capsys):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sweep_ranks_the_cluster_iteration(capsys):
    out = _json(["sweep", "--platform", CLUSTER, "--workload", "transformer-17b", "--fabric", "mesh",
                 "--dimension-schedule", "fixed", "--chunks", "8", "--mapping", "rack=pp"], capsys)
    ranking = out["ranking"]
    assert len(ranking) == 18 and ranking[0]["rank"] == 1 and out["fabric"] == "mesh"
    feasible = [r["time_per_sample_s"] for r in ranking if r["feasible"]]
    assert feasible == sorted(feasible)
    best = ranking[0]
    cluster = with_wafer(load_cluster(CLUSTER), fabric="mesh")
    row = cluster_strategy_row(cluster, get_workload("transformer-17b"), parse_strategy(best["strategy"]), 40,
                               schedule="fixed", chunks=8, mapping={"rack": "pp"})
    assert best["time_s"] == row["time_s"] and "pipeline across 10 wafers" in best["notes"]


def test_sweep_one_strategy_on_a_cluster(capsys):
    out = _json(["sweep", "--platform", CLUSTER, "--workload", "resnet-152", "--strategy", "MP1-DP20-PP1"], capsys)
    expect = simulate_cluster_iteration(load_cluster(CLUSTER), get_workload("resnet-152"),
                                        parse_strategy("MP1-DP20-PP1"), samples_per_dp=40)
    assert out["time_s"] == expect.time_s and out["mapping"] == {"rack": "dp", "spine": "dp"}


def test_eval_compares_wafer_fabrics_in_the_cluster(tmp_path, capsys):
    assert main(["eval", "--platform", "cluster-fred-wafers.toml", "--dimension-schedule", "fixed",
                 "-o", str(tmp_path)]) == 0
    assert "speedup over mesh wafers (fixed chunk schedule)" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "cluster_iterations.csv")))
    assert len(rows) == 4 * 5 and {r["schedule"] for r in rows} == {"fixed"}
    cluster = load_cluster("cluster-fred-wafers.toml")
    wl = get_workload("transformer-17b")
    times = {f: simulate_cluster_iteration(with_wafer(cluster, fabric=f), wl, schedule="fixed").time_s
             for f in ("mesh", "fred-d")}
    row = next(r for r in rows if r["workload"] == "transformer-17b" and r["fabric"] == "fred-d")
    assert float(row["speedup_over_mesh"]) == pytest.approx(times["mesh"] / times["fred-d"], rel=1e-12)
    doc = json.loads((tmp_path / "cluster_results.json").read_text())
    assert doc["speedup"]["fixed"]["fred-d"]["transformer-17b"] == pytest.approx(times["mesh"] / times["fred-d"])


def test_dse_designs_replace_the_cluster_wafers(capsys):
    out = _json(["dse", "--platform", "cluster-fred-wafers.toml", "--workload", "resnet-152",
                 "--npus-per-l1", "4", "--l1-l2-fraction", "1,0.125", "--in-switch", "on", "--middle", "3",
                 "--io-controllers", "18", "--strategies", "MP1-DP20-PP1", "--chunks", "8"], capsys)
    from studies.cost import load_cost_model
    from studies.dse import DSE_FABRIC, design_platform
    entry = out["resnet-152"]
    assert entry["points"] == 4 and not entry["failed"]
    # the reference design (Fred-D) on every wafer of the cluster, by the cluster iteration
    cluster = load_cluster("cluster-fred-wafers.toml")
    design = design_platform(cluster.dimensions[0].wafer, load_cost_model().reference)
    row = cluster_strategy_row(with_wafer(cluster, design, DSE_FABRIC), get_workload("resnet-152"),
                               parse_strategy("MP1-DP20-PP1"), 40, chunks=8)
    assert entry["finding"]["reference_time_per_sample_s"] == pytest.approx(row["time_per_sample_s"], rel=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--platform", CLUSTER, "--workload", "resnet-152", "--trace", "t.json"],
     "--trace has no meaning on a cluster platform"),
    (["sweep", "--platform", CLUSTER, "--workload", "resnet-152", "--jobs", "2"],
     "--jobs has no meaning on a cluster platform"),
    (["eval", "--platform", CLUSTER, "--calibration", "paper", "--no-files"],
     "--calibration has no meaning on a cluster platform"),
    (["sweep", "--workload", "resnet-152", "--fabric", "mesh", "--mapping", "rack=pp"],
     "--mapping applies to a cluster platform"),
    (["sweep", "--workload", "resnet-152"], "--fabric is required on a wafer platform"),
    (["sweep", "--platform", CLUSTER, "--workload", "resnet-152", "--strategy", "MP1-DP20-PP1",
      "--mapping", "wafer=pp"], "dimension 'wafer' is the wafer"),
    (["dse", "--workload", "resnet-152", "--mapping", "rack=pp", "--no-files"],
     "--mapping applies to a cluster platform"),
])
def test_cluster_option_errors(argv, message, capsys):
    assert main(argv) == 1
    assert message in capsys.readouterr().err


SMALL = """name = "two-wafers"
description = "2 paper wafers on a switch, 40 NPUs"
npus = 40

[[dimensions]]
name = "wafer"
kind = "mesh"
size = 20
fabric = "mesh"

[[dimensions]]
name = "out"
kind = "switch"
size = 2
bandwidth_gbps = 10.0
latency_ns = 1000.0
"""


def test_a_small_cluster_through_sweep_eval_and_dse(tmp_path, capsys):
    """Two mesh wafers: each command runs on a cluster file of the user's; sweep --fabric
    fred-d turns them into FRED wafers; eval lists mesh and Fred-A..D; dse runs its grid."""
    path = tmp_path / "two.toml"
    path.write_text(SMALL)
    out = _json(["sweep", "--platform", str(path), "--workload", "resnet-152", "--fabric", "fred-d"], capsys)
    assert out["fabric"] == "fred-d" and out["platform"]["npus"] == 40
    best = out["ranking"][0]
    row = cluster_strategy_row(with_wafer(load_cluster(path), fabric="fred-d"), get_workload("resnet-152"),
                               parse_strategy(best["strategy"]), 40)
    assert best["time_per_sample_s"] == row["time_per_sample_s"]
    doc = _json(["eval", "--platform", str(path)], capsys)
    assert set(doc["speedup"]) == {"fixed", "themis", "themis-resize"}
    assert set(doc["speedup"]["fixed"]) == {"mesh", "fred-a", "fred-b", "fred-c", "fred-d"}
    assert all(v == 1.0 for v in doc["speedup"]["fixed"]["mesh"].values())
    assert main(["dse", "--platform", str(path), "--workload", "resnet-152", "--npus-per-l1", "4",
                 "--l1-l2-fraction", "1", "--in-switch", "on", "--middle", "3", "--io-controllers", "18",
                 "--strategies", "MP1-DP20-PP1", "--no-files"]) == 0
    assert f"cluster: {path}, every wafer a design" in capsys.readouterr().out


def test_compute_scale_and_no_overlap_reach_the_cluster_wafers(capsys):
    out = _json(["sweep", "--platform", CLUSTER, "--workload", "resnet-152", "--strategy", "MP1-DP20-PP1",
                 "--compute-scale", "4", "--no-overlap"], capsys)
    cluster = load_cluster(CLUSTER)
    faster = with_wafer(cluster, cluster.dimensions[0].wafer.with_compute_scale(4))
    expect = simulate_cluster_iteration(faster, get_workload("resnet-152"), parse_strategy("MP1-DP20-PP1"),
                                        samples_per_dp=40, overlap=False)
    assert out["time_s"] == expect.time_s
    assert out["time_s"] < simulate_cluster_iteration(cluster, get_workload("resnet-152"),
                                                      parse_strategy("MP1-DP20-PP1"), samples_per_dp=40,
                                                      overlap=False).time_s
