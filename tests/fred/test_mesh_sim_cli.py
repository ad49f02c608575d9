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


def test_model_only_io_load_streams_whole_stripes_at_the_busiest_links_rate(capsys):
    """40 flits per NPU from 18 controllers: stripes of 3 flits (54 per NPU); the model's split
    trees put 8.5 stripes on the busiest link: 25.5 flits at 4 cycles each."""
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-load", "--group", "wafer",
                 "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["stripe_flits"], out["size_flits"], out["controllers"]) == (3, 54, 18)
    assert out["model"]["algorithm"] == "tree-split" == out["trees"]
    assert out["model"]["bandwidth_cycles"] == pytest.approx(8.5 * 3 * 4)


def test_model_only_io_load_text_gives_the_per_controller_rate(capsys):
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-load", "--group", "wafer",
                 "--size", "18000", "--algorithm", "tree-xy", "--model-only"]) == 1   # 12 x 1000 > queue
    assert "holds 2048 per direction" in capsys.readouterr().err
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-load", "--group", "wafer",
                 "--size", "1800", "--model-only"]) == 0
    out = capsys.readouterr().out
    # 100-flit stripes; 8.5 stripes on a 1/4 link: 1 / 34 flit/cycle = 88.2 GBps of 3 TBps
    assert "busiest link alone: 0.0294" in out and "18 controllers x 100-flit stripes" in out


def test_model_only_io_store_reduces_over_the_same_links_and_refuses_a_stripe_beyond_its_memory(capsys):
    """The reduce-out's reversed trees carry the streaming's loads: 8.5 stripes of 3 flits on
    the busiest link; a tree of 300 flits does not fit the NPUs' 256-entry partial sums."""
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-store", "--group", "wafer",
                 "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["op"], out["stripe_flits"], out["trees"]) == ("io-store", 3, "tree-split")
    assert out["model"]["bandwidth_cycles"] == pytest.approx(8.5 * 3 * 4)
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-store", "--group", "wafer",
                 "--size", str(18 * 300), "--algorithm", "tree-xy", "--model-only"]) == 1
    assert "partial sums of 256 per tree" in capsys.readouterr().err


def test_model_only_spills_are_bound_by_the_controllers_and_refuse_trees(capsys):
    """A checkpoint spill of 40 flits per NPU: 3-flit stripes to (from) each of the 18
    controllers, 20 NPUs' stripes on each controller's 16/375 link: 60 flits, 1,406.25 cycles;
    the controller moves 0.0427 flit/cycle (128 GBps of 3 TBps). Trees are refused by name."""
    for op in ("io-write", "io-read"):
        assert main(["fabric-sim", "--fabric", "mesh", "--op", op, "--group", "wafer",
                     "--size", "40", "--model-only", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["op"], out["stripe_flits"], out["trees"]) == (op, 3, None)
        assert out["model"]["algorithm"] == "unicast"
        assert out["model"]["bandwidth_cycles"] == pytest.approx(60 * 375 / 16)
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-write", "--group", "wafer",
                 "--size", "40", "--model-only"]) == 0
    assert "busiest link alone: 0.0427" in capsys.readouterr().out
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-read", "--group", "wafer",
                 "--size", "40", "--algorithm", "tree-xy", "--model-only"]) == 1
    assert "runs unicasts" in capsys.readouterr().err


def test_model_only_fp16_chain_adds_the_adders_forwarding_latency(capsys):
    """fp16 engines forward through the project's adder: the model's PP chain (0 -> 2 -> 3, one
    forwarding member) gains the adder's cycles (hdl.contracts.fabric.engine_forward_cycles),
    the link time not."""
    from hdl.contracts.fabric import engine_forward_cycles
    runs = {}
    for dtype in ("int32", "fp16"):
        assert main(["fabric-sim", "--fabric", "mesh", "--op", "multicast", "--strategy", "MP2-DP5-PP2",
                     "--dim", "pp", "--size", "100", "--dtype", dtype, "--model-only", "--json"]) == 0
        runs[dtype] = json.loads(capsys.readouterr().out)["model"]
    assert runs["fp16"]["bandwidth_cycles"] == runs["int32"]["bandwidth_cycles"]
    assert runs["fp16"]["cycles"] - runs["int32"]["cycles"] == pytest.approx(
        engine_forward_cycles("fp16") - engine_forward_cycles("int32"))


def test_model_only_fp16_wafer_all_reduce_is_the_three_stage_2d(capsys):
    """The hierarchical 2D all-reduce runs fp16 too (its golden model is computed stage by
    stage): the wafer request is accepted with the model's algorithm."""
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "all-reduce", "--group", "wafer", "--size", "40",
                 "--dtype", "fp16", "--model-only", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["algorithm"] == "hierarchical-2d"


def test_model_only_json_for_a_strategy(capsys):
    assert main(["fabric-sim", "--fabric", "mesh", "--op", "all-reduce", "--strategy", "MP2-DP5-PP2",
                 "--dim", "dp", "--size", "100", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "ring" and len(out["groups"]) == 4
    assert out["groups"][0] == [0, 4, 8, 12, 16]


def test_model_only_fp16_io_load_is_the_int32_broadcast(capsys):
    """io-load moves and checks 32-bit words and adds nothing: in fp16 the same trees, stripes
    and model cycles as in int32, the case marked fp16."""
    runs = {}
    for dtype in ("int32", "fp16"):
        assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-load", "--group", "wafer",
                     "--size", "54", "--dtype", dtype, "--model-only", "--json"]) == 0
        runs[dtype] = json.loads(capsys.readouterr().out)
    assert runs["fp16"]["dtype"] == "fp16" and runs["int32"]["dtype"] == "int32"
    assert runs["fp16"]["model"] == runs["int32"]["model"]
    assert runs["fp16"]["stripe_flits"] == 3 and runs["fp16"]["trees"] == "tree-split"


def test_model_only_fp16_io_store_charges_each_reducing_member_its_adders(capsys):
    """fp16 io-store: the same trees and busiest link as int32; each of the 7 reducing NPUs
    on the wafer's deepest path adds its three fp16 adder levels (18 cycles) to the latency."""
    from hdl.contracts.mesh_io import reduce_member_cycles
    runs = {}
    for dtype in ("int32", "fp16"):
        assert main(["fabric-sim", "--fabric", "mesh", "--op", "io-store", "--group", "wafer",
                     "--size", "54", "--dtype", dtype, "--model-only", "--json"]) == 0
        runs[dtype] = json.loads(capsys.readouterr().out)
    assert runs["fp16"]["model"]["bandwidth_cycles"] == runs["int32"]["model"]["bandwidth_cycles"]
    assert runs["fp16"]["model"]["cycles"] - runs["int32"]["model"]["cycles"] == pytest.approx(
        7 * (reduce_member_cycles("fp16") - reduce_member_cycles("int32"))) == 7 * 18


@pytest.mark.parametrize("argv, words", [
    (["--op", "reduce", "--group", "wafer", "--size", "8"], "reduce is not built yet"),
    (["--op", "all-reduce", "--strategy", "MP2-DP5-PP2", "--dim", "pp", "--size", "8"], "all-reduce along pp"),
    (["--op", "all-reduce", "--group", "half", "--size", "8"], "--group takes 'wafer'"),
    (["--op", "io-load", "--strategy", "MP2-DP5-PP2", "--dim", "dp", "--size", "8"], "use --group wafer"),
    (["--op", "io-load", "--group", "wafer", "--size", "8", "--dtype", "bf16"], "int32 or fp16"),
    (["--op", "io-store", "--group", "wafer", "--size", "8", "--dtype", "bf16"], "int32 or fp16"),
    (["--op", "all-reduce", "--group", "wafer", "--size", "8", "--dtype", "bf16"], "int32 or fp16"),
    (["--op", "io-load", "--group", "wafer", "--size", "8", "--algorithm", "ring"], "runs the trees"),
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
