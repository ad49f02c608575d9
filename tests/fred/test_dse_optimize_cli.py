"""`fred dse --optimize bandwidth` on a cluster platform (docs/bandwidth_optimizer.md)."""

from __future__ import annotations

import json

import pytest

from fred.cli import main


def test_optimize_json(capsys):
    assert main(["dse", "--optimize", "bandwidth", "--platform", "cluster-fred-wafers-3d.toml",
                 "--budget", "150", "--workload", "transformer-17b", "--grid", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    opt = out["optimum"]
    assert set(opt["bandwidths"]) == {"rack", "spine"}
    assert sum(opt["bandwidths"].values()) == pytest.approx(150.0, rel=1e-6)
    assert opt["objective"] <= opt["grid_best"]["objective"]
    assert out["iteration_s"]["optimum"]["transformer-17b"] <= out["iteration_s"]["grid_best"]["transformer-17b"]
    assert set(opt["sensitivity"]) == {"rack", "spine", "budget"}


@pytest.mark.parametrize("argv, message", [
    (["--budget", "100"], "needs a cluster platform"),
    (["--platform", "cluster-fred-wafers-3d.toml"], "needs --budget"),
    (["--platform", "cluster-fred-wafers-3d.toml", "--budget", "100", "--workload", "gpt-3",
      "--weights", "1,2"], "--weights needs one number > 0 per workload"),
])
def test_optimize_errors(capsys, argv, message):
    assert main(["dse", "--optimize", "bandwidth", *argv]) != 0
    assert message in capsys.readouterr().err

