"""``fred fabric-sim --fabric mesh`` (fred/commands/_mesh_sim.py): the model's side without
building, and bad requests failing with one line before anything is built."""

import json
import re

import pytest

from fred.cli import main


def test_model_only_text_names_the_algorithm_and_split(capsys):
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "all-reduce", "--group", "wafer",
                 "--size", "240", "--model-only"]) == 0
    out = capsys.readouterr().out
    # the split of the stage schedule, about 1/2 (tests/sysmodel/test_stage_schedule.py), where
    # the vertical links carry 1.6 - 1.2 a = about 1.0 x 240 flits at 1/4 flit/cycle
    assert "hierarchical-2d" in out and "rows-first chunk 0.50" in out
    busiest = float(re.search(r"busiest link ([\d.]+) \(([\d.]+) flits\)", out).group(2))
    assert busiest == pytest.approx(240, rel=0.002)


def test_model_only_pp_multicast_is_a_chain_per_stage_transfer(capsys):
    """MP2-DP5-PP2: MP rank 0 of stage 0 to the next stage's MP pair, one chain per DP replica,
    root first; each link of a chain carries the buffer once: 4 cycles per flit."""
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "multicast", "--strategy", "MP2-DP5-PP2",
                 "--dim", "pp", "--size", "100", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "chain" and out["groups"][0] == [0, 2, 3]
    assert out["model"]["bandwidth_cycles"] == pytest.approx(400)


def test_model_only_json_for_a_strategy(capsys):
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "all-reduce", "--strategy", "MP2-DP5-PP2",
                 "--dim", "dp", "--size", "100", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "ring" and len(out["groups"]) == 4
    assert out["groups"][0] == [0, 4, 8, 12, 16]


@pytest.mark.parametrize("argv, words", [
    (["--op", "reduce", "--group", "wafer", "--size", "8"], "reduce is not built yet"),
    (["--op", "all-reduce", "--strategy", "MP2-DP5-PP2", "--dim", "pp", "--size", "8"], "all-reduce along pp"),
    (["--op", "all-reduce", "--group", "half", "--size", "8"], "--group takes 'wafer'"),
    (["--op", "all-reduce", "--strategy", "MP2-DP5-PP1", "--dim", "mp", "--size", "8"], "places 10 NPUs"),
    (["--op", "all-reduce", "--group", "wafer", "--size", "8", "--algorithm", "ring"], "drop --algorithm"),
    (["--op", "all-reduce", "--group", "wafer", "--size", "9000"], "an engine holds 1024"),
])
def test_bad_mesh_requests_fail_with_one_line(argv, words, capsys):
    assert main(["fabric-sim", "--fabric", "mesh", *argv, "--model-only"]) == 1
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err


def test_mesh_size_zero_is_refused_by_the_option_range(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fabric-sim", "--fabric", "mesh", "--op", "all-reduce", "--group", "wafer",
              "--size", "0", "--model-only"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--size" in err and "got 0" in err and "\n" not in err
