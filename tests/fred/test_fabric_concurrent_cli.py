"""``fred fabric-sim --concurrent`` (fred/commands/_concurrent_sim.py): the model's side of
concurrent traffic classes per request, and the options it refuses."""

from __future__ import annotations

import json

from fred.cli import main


def test_fabric_sim_concurrent_model_only_json_has_every_request(capsys):
    assert main(["fabric-sim", "--fabric", "fred-d", "--concurrent", "mp-dp-pp", "--size", "40",
                 "--load-size", "400", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["class"] for r in out["requests"]] == ["mp", "dp", "pp"]
    assert all(r["model"]["cycles"] >= r["model"]["alone"] - 1e-6 for r in out["requests"])
    assert "rtl" not in out["requests"][0]


def test_fabric_sim_concurrent_refuses_op_and_missing_op_is_named(capsys):
    assert main(["fabric-sim", "--fabric", "fred-d", "--concurrent", "mp-under-dp", "--op",
                 "all-reduce", "--size", "4", "--model-only"]) == 1
    assert "drop --op" in capsys.readouterr().err
    assert main(["fabric-sim", "--fabric", "fred-d", "--group", "wafer", "--size", "4",
                 "--model-only"]) == 1
    assert "--op is required" in capsys.readouterr().err


def test_fabric_sim_dp_under_io_on_fred_a_runs_the_ring_under_the_io_chain(capsys):
    """Fred-A: the DP ring from cycle 200 under the I/O controller's chain (one controller
    added to the fabric), both online on DP's VC; the model's DP at least its time alone."""
    assert main(["fabric-sim", "--fabric", "fred-a", "--concurrent", "dp-under-io", "--size", "40",
                 "--load-size", "400", "--delay", "200", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    dp, io = out["requests"]
    assert (dp["class"], dp["kind"], dp["delay_cycles"]) == ("dp", "dp", 200)
    assert (io["class"], io["kind"], io["request"]["op"]) == ("io", "io", "io-broadcast")
    assert io["request"]["collectives"][0]["root"] == 20
    assert (dp["model"]["algorithm"], io["model"]["algorithm"]) == ("ring", "chain")
    assert dp["model"]["latency"] >= dp["model"]["alone"] - 1e-6
