"""``fred collective`` on a cluster platform: per-dimension utilization, both schedulers, errors."""

import json

import pytest

from fred.cli import main


def _json(argv, capsys):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cluster_collective_json_and_schedules(capsys):
    argv = ["collective", "--platform", "themis-4d.toml", "--op", "all-reduce", "--size", "1e9",
            "--group", "all"]
    fixed = _json([*argv, "--schedule", "fixed"], capsys)
    themis = _json([*argv, "--schedule", "themis"], capsys)
    assert [d["name"] for d in fixed["dimensions"]] == [d["name"] for d in fixed["platform"]["dimensions"]]
    assert all(0 < d["utilization"] <= 1 + 1e-12 for d in themis["dimensions"])
    # Themis balances the dimensions: never slower than the fixed order here
    assert themis["time_s"] < fixed["time_s"]
    assert themis["bandwidth_utilization"] > fixed["bandwidth_utilization"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "busy/time" in out and "themis schedule" in out


def test_cluster_collective_on_some_dimensions(capsys):
    out = _json(["collective", "--platform", "cluster-fred-wafers.toml", "--op", "reduce-scatter",
                 "--size", "1e8", "--group", "scale-out", "--chunks", "1"], capsys)
    assert [d["name"] for d in out["dimensions"]] == ["scale-out"]
    # 49/50 of 1e8 B at 50 GBps plus one switch step of 1 us
    assert out["time_s"] == pytest.approx(0.98e8 / 50e9 + 1e-6)


@pytest.mark.parametrize("extra, message", [
    (["--op", "broadcast", "--group", "all"], "has no multi-dimensional form"),
    (["--op", "all-reduce", "--group", "all", "--fabric", "fred-d"], "--fabric applies to a wafer platform"),
    (["--op", "all-reduce", "--group", "wafer,nowhere"], "has no dimension 'nowhere'"),
    (["--op", "all-reduce", "--group", "all", "--chunks", "0"], "chunks must be an integer >= 1"),
])
def test_cluster_collective_errors(extra, message, capsys):
    assert main(["collective", "--platform", "cluster-fred-wafers.toml", "--size", "1e6", *extra]) == 1
    assert message in capsys.readouterr().err


def test_wafer_platform_still_needs_a_fabric(capsys):
    assert main(["collective", "--op", "all-reduce", "--size", "1e6", "--group", "all"]) == 1
    assert "--fabric is required on a wafer platform" in capsys.readouterr().err
    assert main(["collective", "--fabric", "fred-d", "--op", "all-reduce", "--size", "1e6", "--group", "all"]) == 0


def test_cluster_training_command(capsys):
    out = _json(["cluster", "--platform", "cluster-mesh-wafers.toml", "--workload", "resnet-152",
                 "--schedule", "fixed"], capsys)
    assert out["npus_used"] == 1000 and out["schedule"] == "fixed"
    assert out["time_s"] == pytest.approx(out["wafer_time_s"] + out["cross_wafer_time_s"])
    assert set(out["exposed_by_dimension"]) == {"wafer", "scale-out"}
    assert main(["cluster", "--workload", "resnet-152"]) == 1
    assert "needs --platform" in capsys.readouterr().err


def test_schedule_is_for_clusters_only(capsys):
    assert main(["collective", "--fabric", "fred-d", "--op", "all-reduce", "--size", "1e6", "--group", "all",
                 "--schedule", "fixed"]) == 1
    assert "--schedule applies to a cluster platform" in capsys.readouterr().err


def test_cluster_strategy_sweep(capsys):
    out = _json(["cluster", "--platform", "cluster-fred-wafers.toml", "--workload", "resnet-152", "--sweep"], capsys)
    rows = out["strategies"]
    assert len(rows) == 18          # the factorisations of 20 into MP x DP x PP
    times = [r["time_per_sample_s"] for r in rows if r["error"] is None]
    assert times == sorted(times)
