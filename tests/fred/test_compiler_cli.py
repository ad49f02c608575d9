"""``fred route`` and ``fred routability`` command lines."""

import json

import pytest

from fred.cli import main
from hdl.compiler import Flow, SwitchConfig, check_config


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_route_text(capsys):
    assert main(["route", "--ports", "8", "--middle", "3", "--flows", "0,1,2>0,1,2; 3>4,5"]) == 0
    out = capsys.readouterr().out
    assert "1 phase(s)" in out and "in[0]: in0+in1 -> wire" in out and "words (166 bits" in out


def test_route_json_phases_decode_and_check(capsys):
    data = _json(capsys, ["route", "--ports", "8", "--middle", "2", "--json",
                          "--flows", "0,3>0,3; 1,4>1,4; 2,5>2,5"])
    assert data["phase_count"] == len(data["phases"]) == 2 and data["notes"]
    for phase in data["phases"]:
        config = SwitchConfig.decode(phase["words"], ports=8, middle=2)
        flows = [Flow(*(tuple(int(p) for p in side.split(",")) for side in f.split(">")))
                 for f in phase["flows"]]
        assert check_config(config, flows) == []


def test_route_collective(capsys):
    data = _json(capsys, ["route", "--ports", "8", "--collective", "reduce-scatter",
                          "--group", "0,1,2,3", "--json"])
    assert data["phase_count"] == 4
    data = _json(capsys, ["route", "--ports", "4", "--collective", "permutation",
                          "--pairs", "0>1,1>0", "--json", "--word-width", "8"])
    assert data["phases"][0]["flows"] == ["0>1", "1>0"] and all(w < 256 for w in data["phases"][0]["words"])


@pytest.mark.parametrize("argv,message", [
    (["route", "--ports", "8", "--flows", "0,1>0; 1>2"], "overlap: both use input port 1"),
    (["route", "--ports", "8", "--flows", "0,9>0"], "out of range"),
    (["route", "--ports", "1", "--flows", "0>0"], "--ports: expected an integer in 2..1024"),
    (["route", "--ports", "8", "--middle", "1", "--flows", "0>0"], "middle"),
    (["route", "--ports", "8", "--flows", ">0"], "empty"),
    (["route", "--ports", "8", "--flows", "0,3>0,3; 1,4>1,4; 2,5>2,5", "--middle", "2", "--no-split"],
     "cannot be routed in one phase"),
    (["routability", "--ports", "16", "--exhaustive"], "partitions"),
    (["routability", "--ports", "8", "--samples", "0"], "samples"),
    (["routability", "--ports", "8", "--samples", "2", "--npus", "9"], "npus"),
])
def test_errors_are_one_line(capsys, argv, message):
    try:
        status = main(argv)
    except SystemExit as exc:    # an option out of its range: argparse's one-line usage error
        status = exc.code
    assert status in (1, 2)
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_routability_json(capsys):
    data = _json(capsys, ["routability", "--ports", "8", "--middle", "2", "--exhaustive", "--json"])
    for key in ("total", "one_phase_count", "one_phase_fraction", "mean_phases"):
        assert key in data
    assert data["total"] == 4140 and 0 < data["one_phase_fraction"] < 1
    assert data["mean_phases"] > 1
    names = {entry["placement"] for entry in data["placements"]}
    assert "MP(2)-DP(2)-PP(2)" in names and len(names) == 10  # ordered factorisations of 8


def test_routability_samples_text(capsys):
    assert main(["routability", "--ports", "32", "--middle", "3", "--samples", "5", "--seed", "2",
                 "--npus", "20"]) == 0
    out = capsys.readouterr().out
    assert "5 random (seed 2) partitions" in out and "MP(5)-DP(2)-PP(2)" in out


def test_route_explain(capsys):
    data = _json(capsys, ["route", "--ports", "8", "--middle", "2", "--json", "--explain",
                          "--flows", "0,3>0,3; 1,4>1,4; 2,5>2,5"])
    assert any("why:" in note and "odd cycle" in note for note in data["notes"])


def test_routability_no_backtrack(capsys):
    greedy = _json(capsys, ["routability", "--ports", "16", "--middle", "2", "--samples", "200",
                            "--seed", "1", "--no-backtrack", "--no-placements", "--json"])
    full = _json(capsys, ["routability", "--ports", "16", "--middle", "2", "--samples", "200",
                          "--seed", "1", "--no-placements", "--json"])
    assert greedy["backtrack"] is False and full["backtrack"] is True
    assert greedy["one_phase_count"] <= full["one_phase_count"]
    assert full["search_bound_count"] == 0
