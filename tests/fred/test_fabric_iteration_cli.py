"""``fred fabric-iteration`` (docs/fabric_iteration.md): the model's side and the RTL's inputs
(--model-only, no Verilator), and the refusals of what the circuit fabric cannot run. The RTL
runs are in tests/studies/test_iteration_case.py."""

import json
import subprocess
import sys


def _fred(*args):
    return subprocess.run([sys.executable, "-m", "fred", "fabric-iteration", *args],
                          capture_output=True, text=True)


def test_model_only_gives_the_serialised_iteration_and_the_collective_it_would_run():
    proc = _fred("--fabric", "fred-b", "--workload", "resnet-152", "--strategy", "MP1-DP20-PP1",
                 "--no-overlap", "--model-only", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    model = out["model"]
    # serialised: the iteration is compute plus the one DP all-reduce, all of it exposed
    assert model["iteration_cycles"] == model["compute_cycles"] + model["comm_busy_cycles"]["dp"]
    assert out["collective"]["size_flits"] == 236          # ceil(120,385.6 B / 512 B)
    assert out["request"][0]["collectives"][0]["members"] == list(range(20))
    assert set(out["nodes_per_rank"].values()) == {106} and "rtl" not in out


def test_what_the_circuit_fabric_cannot_run_is_refused_by_name():
    proc = _fred("--fabric", "fred-d", "--workload", "resnet-152", "--strategy", "MP1-DP10-PP2",
                 "--no-overlap", "--model-only")
    assert proc.returncode == 1 and "has pipeline stages" in proc.stderr
    proc = _fred("--fabric", "fred-d", "--workload", "gpt-3", "--strategy", "MP1-DP20-PP1", "--no-overlap",
                 "--model-only")
    assert proc.returncode == 1 and "streams its weights through the I/O controllers; the circuit FRED " \
        "fabric has none (use --switch packet)" in proc.stderr


def test_mp_and_dp_together_run_one_collective_at_a_time(capsys):
    """In process: resnet-152 MP4-DP5-PP1 on Fred-D, 104 MP all-reduces (5 groups of 4, one
    L1 switch each) then the DP all-reduce (4 groups of 5, one NPU per L1): the model's
    serialised iteration with the DP all-reduce after the last MP all-reduce, not at once
    (their sum is the iteration)."""
    from fred.cli import main
    assert main(["fabric-iteration", "--workload", "resnet-152", "--strategy", "MP4-DP5-PP1", "--no-overlap",
                 "--model-only", "--fabric", "fred-d", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    requests = out["request"]
    assert out["collective"]["collectives"] == len(requests) == 105
    members = [sorted(tuple(c["members"]) for c in r["collectives"]) for r in requests]
    assert members[-1] == [tuple(range(m, 20, 4)) for m in range(4)]               # DP
    assert all(g == [tuple(range(4 * j, 4 * j + 4)) for j in range(5)] for g in members[:-1])   # MP
    model = out["model"]
    busy = model["comm_busy_cycles"]
    assert abs(model["iteration_cycles"] - model["compute_cycles"] - busy["mp"] - busy["dp"]) < 1e-6


def test_the_mesh_and_the_fred_fabric_run_a_program_per_collective(capsys):
    """In process (no subprocess start): resnet-152 MP20-DP1-PP1 is 104 wafer-wide MP
    all-reduces per NPU, serial; the mesh's NPUs load a program for each, so do the circuit
    FRED fabric's, whose switches keep one set of phases (one algorithm for all 104); --table
    takes no case of its own."""
    from fred.cli import main
    args = ["fabric-iteration", "--workload", "resnet-152", "--strategy", "MP20-DP1-PP1", "--no-overlap",
            "--model-only"]
    assert main(args + ["--fabric", "mesh", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["collective"]["collectives"] == len(out["request"]) == 104
    assert {r["op"] for r in out["request"]} == {"all-reduce"}
    model = out["model"]
    assert abs(model["iteration_cycles"] - model["compute_cycles"] - model["comm_busy_cycles"]["mp"]) < 1e-6
    assert main(args + ["--fabric", "fred-c", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["collective"]["collectives"] == len(out["request"]) == 104
    assert out["collective"]["algorithm"] == "hierarchical"
    assert main(["fabric-iteration", "--table", "--no-overlap", "--fabric", "mesh"]) == 1
    assert "--table and --list-cases take the table's own cases" in capsys.readouterr().err


def test_the_packet_fabric_takes_the_models_packet_platform_and_refuses_what_it_cannot_run(capsys):
    """In process: --switch packet times the iteration on the model's packet platform (the
    packet switches' header selects, as ``fred fabric-sim --switch packet``), one in-switch DP
    all-reduce on Fred-D; what the packet fabric's iteration does not run is refused by name
    before anything is built (phase orders longer than 255 entries: ``tests/hdl/designs/iteration/
    test_packet_phase_order_iteration_sim.py``, by hand; Transformer-17B MP4-DP5's 32 on Fred-B
    build deeper orders since session 22). The hierarchical all-reduce (Fred-A
    resnet-152 MP20) is no longer refused (session 20: a destination and a barrier per stage),
    nor resnet-152 MP4-DP5's one ordered DP all-reduce on Fred-B (session 21: the order loaded
    once, the MP all-reduces on VC MP)."""
    from fred.cli import main
    args = ["fabric-iteration", "--workload", "resnet-152", "--no-overlap", "--model-only", "--switch", "packet"]
    assert main(args + ["--fabric", "fred-d", "--strategy", "MP1-DP20-PP1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["switch"] == "packet" and out["collective"]["algorithm"] == "in-switch"
    model = out["model"]
    assert abs(model["iteration_cycles"] - model["compute_cycles"] - model["comm_busy_cycles"]["dp"]) < 1e-6
    assert main(args + ["--fabric", "fred-d", "--strategy", "MP1-DP20-PP1", "--switch", "circuit",
                        "--json"]) == 0
    circuit = json.loads(capsys.readouterr().out)["model"]
    assert circuit["compute_cycles"] == model["compute_cycles"]
    assert circuit["comm_busy_cycles"]["dp"] != model["comm_busy_cycles"]["dp"]    # another platform
    assert main(args + ["--fabric", "fred-a", "--strategy", "MP20-DP1-PP1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["collective"]["algorithm"] == "hierarchical"
    assert main(args + ["--fabric", "fred-b", "--strategy", "MP4-DP5-PP1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["collective"]["algorithm"] == "in-switch"
    assert main(["fabric-iteration", "--table", "--no-overlap", "--switch", "packet"]) == 1
    assert "--switch" in capsys.readouterr().err


def test_overlapped_by_default_the_weight_streams_hide_under_the_compute(capsys):
    """In process: without --no-overlap the model's overlapped iteration, one collective at a
    time per NPU (the overlapped sequencers' schedule): GPT-3's weight streams on the mesh with
    its I/O controllers partly hide under the compute; the traces carry the wait nodes."""
    from fred.cli import main
    args = ["fabric-iteration", "--fabric", "mesh", "--workload", "gpt-3", "--strategy", "MP1-DP20-PP1",
            "--samples-per-dp", "8", "--scale", "10000", "--model-only", "--json"]
    assert main(args) == 0
    overlapped = json.loads(capsys.readouterr().out)
    assert main(args + ["--no-overlap"]) == 0
    serial = json.loads(capsys.readouterr().out)
    assert overlapped["overlap"] and not serial["overlap"]
    o, s = overlapped["model"], serial["model"]
    busy = s["comm_busy_cycles"]["io"]
    assert abs(o["comm_busy_cycles"]["io"] - busy) < 1e-6 * busy and abs(s["comm_exposed_cycles"]["io"] - busy) < 1e-6 * busy
    assert 0 < o["comm_exposed_cycles"]["io"] < s["comm_exposed_cycles"]["io"]
    assert abs(o["iteration_cycles"] - o["compute_cycles"] - o["comm_exposed_cycles"]["io"]) < 1e-6
    # the same nodes, plus the overlapped traces' wait nodes
    assert min(overlapped["nodes_per_rank"].values()) > max(serial["nodes_per_rank"].values())
    # the packet fabric's too (its I/O iteration on Fred-A)
    assert main(args[:2] + ["fred-a", "--switch", "packet"] + args[3:]) == 0
    packet = json.loads(capsys.readouterr().out)
    assert packet["overlap"] and packet["switch"] == "packet" and packet["rtl_missing"] is None


def test_the_table_takes_no_simulator(capsys):
    """In process, before any build: --table takes no --simulator (each row runs on the
    default, the lock-step simulator, which every iteration top has since session 31); --pgo
    with --model-only builds nothing to optimise."""
    from fred.cli import main
    assert main(["fabric-iteration", "--table", "--no-overlap", "--simulator", "cocotb"]) == 1
    assert "no --fabric, --workload, --strategy, --switch, --simulator or --model-only" in capsys.readouterr().err
    assert main(["fabric-iteration", "--fabric", "mesh", "--workload", "resnet-152", "--model-only", "--pgo"]) == 1
    assert "--pgo builds the RTL's simulator; --model-only runs no RTL" in capsys.readouterr().err
