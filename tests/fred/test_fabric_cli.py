"""`fred fabric-sim` / `fred fabric-validate`: the model's side, the request checks and the errors
that must come before anything is built (the RTL runs are in tests/hdl/designs/test_fabric_rtl.py)."""

import json
import re

import pytest

from fred.cli import main


def test_model_only_json_carries_the_platform_file(capsys):
    assert main(["fabric-sim", "--fabric", "fred-d", "--op", "all-reduce", "--group", "wafer",
                 "--size", "400", "--model-only", "--json", "--npu-latency", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "in-switch"
    assert out["model"]["bandwidth_cycles"] == pytest.approx(400)
    assert out["fabric"]["npu_link_latency"] == 3 and "rtl" not in out
    assert "l1_l2_latency_ns" in out["model_platform_toml"]
    assert out["request"]["collectives"][0]["members"] == list(range(20))


def test_model_only_text(capsys):
    assert main(["fabric-sim", "--fabric", "fred-b", "--op", "reduce", "--strategy", "MP2-DP5-PP2",
                 "--dim", "dp", "--size", "40", "--model-only"]) == 0
    out = capsys.readouterr().out
    assert "5 x L1 Fred_3(5), L2 Fred_3(5)" in out and "4 concurrent collective(s)" in out
    assert "model:" in out and "RTL" not in out


@pytest.mark.parametrize("argv, words", [
    (["--group", "wafer", "--size", "0"], "--size: expected an integer in 1..1000000"),
    (["--strategy", "MP2-DP5-PP1", "--dim", "mp", "--size", "4"], "uses 10 NPUs"),
    (["--strategy", "MP2-DP5-PP2", "--size", "4"], "needs --dim"),
    (["--group", "wafer", "--size", "4", "--dim", "mp"], "--dim goes with --strategy"),
    (["--group", "wafer", "--size", "4", "--backpressure", "1.5"], "--backpressure"),
    (["--group", "wafer", "--size", "4", "--dtype", "bf16"], r"no measured Fred_3\(\d+\) bf16 \(the L\d chiplet of the fred-d RTL fabric"),
])
def test_bad_requests_fail_with_one_line(argv, words, capsys):
    try:
        status = main(["fabric-sim", "--fabric", "fred-d", "--op", "all-reduce", *argv])
    except SystemExit as exc:    # an option out of its range: argparse's one-line usage error
        status = exc.code
    assert status in (1, 2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("fred fabric-sim: error:") and "\n" not in err
    assert re.search(words, err), err


def test_validate_rejects_unknown_fabrics_before_building(capsys):
    assert main(["fabric-validate", "--fabrics", "fred-d,torus", "--no-write"]) == 1
    assert "unknown fabric(s) torus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fabric-validate", "--sizes", "0,40"])


def test_the_packet_fabric_refuses_the_hierarchical_all_reduce_before_building(capsys):
    """`--switch packet` runs rings and chains as online unicasts (docs/fabric_rtl.md, "Packet
    fabric"); the hierarchical all-reduce, asked for, is refused by name with nothing built;
    left to the model, both sides run the ring instead."""
    assert main(["fabric-sim", "--fabric", "fred-c", "--switch", "packet", "--op", "all-reduce",
                 "--group", "wafer", "--size", "40", "--algorithm", "hierarchical"]) == 1
    assert "one-stage endpoint programs" in capsys.readouterr().err
    assert main(["fabric-sim", "--fabric", "fred-a", "--switch", "packet", "--op", "all-reduce",
                 "--group", "wafer", "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "ring" and out["algorithm_chosen_by"] == "request"
    assert 'unicast_routing = "online"' in out["model_platform_toml"]
    # on circuit switches (configured flows) the model picks the ring too at 40 flits: the
    # hierarchical all-reduce's four rings across the L1s would take turns on Fred-A's one-port
    # uplinks (docs/fabric_validation.md, "Rings that take turns on the circuit fabric")
    assert main(["fabric-sim", "--fabric", "fred-a", "--op", "all-reduce", "--group", "wafer",
                 "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "ring" and out["algorithm_chosen_by"] == "model"
    assert 'unicast_routing = "configured"' in out["model_platform_toml"]
    # the packet table has no mesh: a list of only the mesh runs nothing (make fabric-validate
    # passes one FABRIC_VALIDATE_ARGS to both of its commands)
    assert main(["fabric-validate", "--switch", "packet", "--fabrics", "mesh", "--no-write"]) == 0
    assert "nothing to run" in capsys.readouterr().out


def test_model_only_times_the_switch_the_rtl_side_would_run(capsys):
    """--switch packet: the model's platform selects phases by header (docs/sysmodel.md), so
    the same request costs the serial selects and input buffers the packet fabric pays."""
    out = {}
    for switch in ("circuit", "packet"):
        assert main(["fabric-sim", "--fabric", "fred-d", "--op", "all-reduce", "--group", "wafer",
                     "--size", "40", "--model-only", "--json", "--switch", switch]) == 0
        out[switch] = json.loads(capsys.readouterr().out)
    assert 'phase_select = "header"' in out["packet"]["model_platform_toml"]
    assert 'phase_select = "start"' in out["circuit"]["model_platform_toml"]
    circuit, packet = out["circuit"]["model"], out["packet"]["model"]
    assert packet["bandwidth_cycles"] == circuit["bandwidth_cycles"]
    assert packet["cycles"] > circuit["cycles"]


def test_io_ops_put_a_controller_per_group_on_the_model_platform(capsys):
    """`--op io-broadcast|io-reduce` (docs/fabric_rtl.md, "I/O controllers"): one controller per
    group, on the L1s, at 128 GBps / 3 TBps of an NPU link; the model's io-load / io-store on
    the same platform is bound by the controller's link: 40 flits x 375/16 cycles."""
    assert main(["fabric-sim", "--fabric", "fred-b", "--op", "io-broadcast", "--group", "wafer",
                 "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fabric"]["io_controllers"] == 1 and out["fabric"]["l1_ports"] == 6
    assert "[io]" in out["model_platform_toml"] and 'phase_select = "header"' in out["model_platform_toml"]
    assert out["model"]["bandwidth_cycles"] == pytest.approx(40 * 375 / 16)
    assert out["model"]["busiest_link"] == "io0->l1.0"
    assert out["request"]["collectives"][0]["root"] == 20
    assert main(["fabric-sim", "--fabric", "fred-d", "--op", "io-reduce", "--strategy",
                 "MP2-DP5-PP2", "--dim", "dp", "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fabric"]["io_controllers"] == 4 and out["fabric"]["l1_ports"] == 9
    assert out["model"]["bandwidth_cycles"] == pytest.approx(40 * 375 / 16)


def test_io_ops_are_refused_on_the_circuit_fabric_and_chain_on_endpoint_fabrics(capsys):
    assert main(["fabric-sim", "--fabric", "fred-b", "--switch", "circuit", "--op", "io-reduce",
                 "--group", "wafer", "--size", "40"]) == 1
    assert "runs on the packet fabric's I/O controllers" in capsys.readouterr().err
    # Fred-A: the model's I/O chain, which the packet fabric runs as online unicasts
    assert main(["fabric-sim", "--fabric", "fred-a", "--op", "io-broadcast", "--group", "wafer",
                 "--size", "40", "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["algorithm"] == "chain" and out["fabric"]["io_controllers"] == 1


def test_validate_runs_every_mesh_case_in_fp16():
    """``--dtype fp16`` with the mesh: the four Fig. 9 cases, io-load (a broadcast of the same
    words, the int32 I/O top) and io-store (fp16 reducers) at each size, built (modelled and
    programmed, nothing simulated) as fp16 cases."""
    import argparse

    from fred.commands.fabric_validate import _mesh_cases
    args = argparse.Namespace(dtype="fp16", characterization=None, sizes=(40,))
    cases = _mesh_cases(args)
    assert [label for label, _, _ in cases] == ["wafer all-reduce", "MP2-DP5-PP2 MP all-reduce",
                                                "MP2-DP5-PP2 DP all-reduce", "MP2-DP5-PP2 PP multicast",
                                                "wafer io-load", "wafer io-store"]
    assert cases[4][1].io.mesh.dtype == "int32" and cases[5][1].io.mesh.dtype == "fp16"
    assert {case.spec.dtype for _, case, _ in cases} == {"fp16"}
    assert cases[0][1].estimate.algorithm == "hierarchical-2d"


@pytest.mark.parametrize("given, expected", [(None, "lockstep"), ("cocotb", "cocotb")])
def test_validate_runs_a_circuit_case_on_fabric_sims_default_simulator_without_simulator(given, expected,
                                                                                        monkeypatch):
    """``fred fabric-validate`` with no ``--simulator`` (``make fabric-validate``'s first
    command): the circuit fabric's cases run on ``run_case``'s default simulator, the one
    ``fred fabric-sim`` picks (lockstep), not on ``None`` (refused: "unknown fabric simulator
    None")."""
    import argparse

    import studies.fabric_case
    import studies.fabric_validation
    from fred.commands.fabric_validate import _run
    import inspect
    default = inspect.signature(studies.fabric_case.run_case).parameters["simulator"].default
    seen = {}

    def fake_run_case(case, **kwargs):
        seen["simulator"] = kwargs.get("simulator", default)
        return case

    monkeypatch.setattr(studies.fabric_case, "run_case", fake_run_case)
    monkeypatch.setattr(studies.fabric_validation, "validation_row", lambda label, case: (label, case))
    args = argparse.Namespace(switch="circuit", seed=0, backpressure=0.0, watchdog=None, simulator=given)
    assert _run("wafer all-reduce", "the case", None, args) == ("wafer all-reduce", "the case")
    assert seen["simulator"] == expected


def test_validate_with_the_mesh_runs_fred_as_striped_io_at_the_mesh_io_sizes():
    """``fred fabric-validate`` with the mesh and Fred-A: Fred-A's io-load runs as the striped
    request (every controller at once) at the mesh case's whole-stripe sizes, 54 and 4014 for
    --sizes 40,4000, and so does its io-store (the reduce-out along the same chains, since
    session 13's fix of its stall); the same on Fred-C and Fred-B (its trees as shared stored
    flows); none on Fred-D, on --switch packet or in fp16 (nothing built, nothing run)."""
    import argparse

    from fred.commands.fabric_validate import _stripe_io_cases
    args = argparse.Namespace(switch="circuit", dtype=None, sizes=[40, 4000], characterization=None)
    cases = _stripe_io_cases(args, ["fred-a", "fred-b", "mesh"])
    assert [(label, c.fabric, c.size_flits) for label, c, _ in cases] == [
        ("wafer io-load", "fred-a", 54), ("wafer io-load", "fred-a", 4014),
        ("wafer io-store", "fred-a", 54), ("wafer io-store", "fred-a", 4014),
        ("wafer io-load", "fred-b", 54), ("wafer io-load", "fred-b", 4014),
        ("wafer io-store", "fred-b", 54), ("wafer io-store", "fred-b", 4014)]
    cases = _stripe_io_cases(args, ["fred-c", "fred-d", "mesh"])
    assert [(label, c.fabric, c.size_flits) for label, c, _ in cases] == [
        ("wafer io-load", "fred-c", 54), ("wafer io-load", "fred-c", 4014),
        ("wafer io-store", "fred-c", 54), ("wafer io-store", "fred-c", 4014),
        ("wafer io-load", "fred-d", 54), ("wafer io-load", "fred-d", 4014),
        ("wafer io-store", "fred-d", 54), ("wafer io-store", "fred-d", 4014)]
    assert _stripe_io_cases(argparse.Namespace(**{**vars(args), "switch": "packet"}), ["fred-a"]) == []
    assert _stripe_io_cases(argparse.Namespace(**{**vars(args), "dtype": "fp16"}), ["fred-a"]) == []


@pytest.mark.parametrize("argv, words", [
    (["--fabric", "fred-d", "--op", "io-store", "--group", "wafer", "--dtype", "fp16"], "runs the wafer as built"),
    (["--fabric", "fred-b", "--op", "io-load", "--strategy", "MP2-DP5-PP2", "--dim", "dp"], "--group wafer"),
    (["--fabric", "fred-b", "--op", "io-load", "--group", "wafer", "--switch", "circuit"], "--switch packet"),
    (["--fabric", "fred-b", "--op", "io-load", "--group", "wafer", "--npu-latency", "3"], "runs the wafer as built"),
])
def test_the_striped_io_ops_are_refused_by_name_before_anything_is_built(argv, words, capsys):
    """`fred fabric-sim --op io-load|io-store --group wafer` on a FRED fabric is the mesh's striped
    request (every controller at once, studies.mesh_validation.StripeIoCase)."""
    assert main(["fabric-sim", *argv, "--size", "54"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("fred fabric-sim: error:") and words in err, err


@pytest.mark.parametrize("fabric, op", [("fred-b", "io-load"), ("fred-d", "io-load"), ("fred-d", "io-store")])
def test_the_striped_io_on_the_tree_fabrics_model_only(fabric, op, capsys):
    """The model's side of Fred-B/D's striped weight streaming and reduce-out (the packet
    platform, 18 controllers; Fred-D's request is no longer refused)."""
    from studies.mesh_validation import IO_CASES, fred_io_model_cycles
    assert main(["fabric-sim", "--fabric", fabric, "--op", op, "--group", "wafer", "--size", "54",
                 "--model-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = fred_io_model_cycles(fabric, 54, op=IO_CASES[f"wafer {op}"], switch="packet")
    assert model is not None and out["model_cycles"] == pytest.approx(model)
    assert "rtl_cycles" not in out and out["controllers"] == 18
