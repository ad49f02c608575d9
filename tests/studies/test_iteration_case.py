"""An iteration trace run by the NPUs of the circuit FRED fabric RTL under Verilator
(docs/fabric_iteration.md): hand-made traces on a small fabric in the default suite (mechanism:
node timing, the collective waiting for its slowest member, every flit checked), and resnet-152
MP1-DP20-PP1 on the paper-sized fabrics and the mesh, and the mesh's iterations of many
collectives per NPU, against the model in the ``full`` tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec
from hdl.contracts.trace_program import COLLECTIVE_BIT, WAIT_BIT, NpuTrace

SMALL = dict(npus=4, npus_per_l1=2)


def _trace(rank, words, overlap=False):
    def category(w):
        return "dp" if w & COLLECTIVE_BIT else "wait" if overlap and w & WAIT_BIT else "compute"
    return NpuTrace(rank=rank, words=tuple(words), node_ids=tuple(range(len(words))),
                    names=tuple(f"n{i}" for i in range(len(words))),
                    categories=tuple(category(w) for w in words),
                    collective=next((i for i, w in enumerate(words) if w & COLLECTIVE_BIT), None),
                    collectives=tuple(i for i, w in enumerate(words) if w & COLLECTIVE_BIT), overlap=overlap)


@pytest.mark.parametrize("simulator", ["lockstep", "cocotb"])
def test_small_fabric_runs_traces_the_collective_waits_for_its_slowest_member(simulator):
    """On both simulators (the lock-step one, the default, cut at the uplinks: the L2 in one
    part; the one model under the cocotb bench): the same hand-computed node times."""
    from cocotb_tests.iteration.run import run_iteration
    from hdl.compiler.fabric_program import fabric_program
    spec = fabric_spec("fred-b", **SMALL)
    flits = 8
    request = FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 1, 2, 3)),), flits, "wafer")
    program = fabric_program(spec, request, algorithm="in-switch")
    # rank r computes 40 + 25 r cycles (two nodes), all-reduces, computes 7 cycles
    traces = {r: _trace(r, [30, 10 + 25 * r, COLLECTIVE_BIT, 7]) for r in range(4)}
    run = run_iteration(spec, traces, program, watchdog_cycles=20_000, cflags="-O0", simulator=simulator)
    assert run.errors == []
    assert (simulator == "lockstep") == ("lockstep" in run.build_dir)
    assert run.flits_sent == run.flits_received == 4 * flits       # in-switch: each NPU sends its own
    ends = []
    for r, times in run.node_times.items():
        compute = 40 + 25 * r
        assert times[0] == [0, 30] and times[1] == [30, compute]   # exact, back to back
        start, end = times[2]
        assert start == compute
        ends.append(end)
        assert times[3] == [end, end + 7]
    # nobody's all-reduce ends before the last member (rank 3, at 115) sent its 8 flits and the
    # sums came back through L1, L2, L1 (a pipeline, not the model's figure: a bound)
    assert min(ends) >= 115 + flits
    assert max(ends) - min(ends) <= 4                               # the sums reach all at once
    assert run.cycles == max(ends) + 7


@pytest.mark.full
def test_a_profile_guided_build_trains_on_the_run_and_counts_the_same_cycles():
    """The small fabric's traces on a profile-guided lock-step build (``pgo``): the build ran
    its instrumented simulator once on this run's parameters (its log says so and it kept the
    profiles), and the rebuilt simulator counts the plain build's node times to the cycle."""
    from pathlib import Path
    from cocotb_tests.iteration.run import PGO_TRAINING, run_iteration
    from hdl.compiler.fabric_program import fabric_program
    spec = fabric_spec("fred-b", **SMALL)
    request = FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 1, 2, 3)),), 8, "wafer")
    program = fabric_program(spec, request, algorithm="in-switch")
    traces = {r: _trace(r, [30, 10 + 25 * r, COLLECTIVE_BIT, 7]) for r in range(4)}
    plain = run_iteration(spec, traces, program, watchdog_cycles=20_000)
    pgo = run_iteration(spec, traces, program, watchdog_cycles=20_000, pgo=True)
    assert plain.errors == pgo.errors == [] and pgo.build_dir != plain.build_dir
    assert pgo.node_times == plain.node_times and pgo.cycles == plain.cycles
    log = (Path(pgo.build_dir) / "build.log").read_text()
    assert f"profile-guided optimization: training run ({PGO_TRAINING})" in log
    assert any(Path(pgo.build_dir).rglob("*.gcda"))


def test_a_profile_guided_run_is_refused_on_cocotb_and_with_other_flags_before_any_build():
    """``pgo`` is a lock-step build at its own flags: under cocotb, or with ``cflags``, the run
    is refused by name before anything is generated or built."""
    from cocotb_tests.iteration.run import build_iteration
    from hdl.contracts.errors import FredError
    from studies.iteration_case import run_iteration_case

    def never():
        raise AssertionError("no Verilog is generated for a refused build")
    with pytest.raises(FredError, match="runs on the lock-step simulator, not under cocotb"):
        build_iteration("cocotb", parts=never, whole=never, top="t", ports=(), cflags="-O1", training={})
    with pytest.raises(FredError, match="runs on the lock-step simulator, not under cocotb"):
        run_iteration_case(object(), simulator="cocotb", pgo=True)
    with pytest.raises(FredError, match="compiles at its own flags; got cflags '-O0' too"):
        run_iteration_case(object(), cflags="-O0", pgo=True)


@pytest.mark.full
@pytest.mark.parametrize("fabric", ["fred-a", "fred-b", "fred-c", "fred-d"])
def test_resnet_iteration_on_the_paper_fabrics_against_the_model(fabric):
    """resnet-152 MP1-DP20-PP1, serialised, K = 1000 (about 10,000 cycles): the RTL runs every
    rank's exported trace; compute is the trace's to the cycle, the DP all-reduce and the
    iteration agree with the model within the issue's targets (10 % iteration, 15 %
    communication)."""
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    case = build_iteration_case(fabric=fabric, workload=get_workload("resnet-152"),
                                platform=default_platform(), strategy=parse_strategy("MP1-DP20-PP1"),
                                scale=1000)
    run_iteration_case(case)
    rtl, model = case.rtl_figures, case.model
    assert rtl["compute_cycles"] == case.traces[0].compute_cycles
    assert abs(rtl["compute_cycles"] - model["compute_cycles"]) <= 1      # rounding of the sum
    # in-switch, every rank gets the sums at once; a ring's ranks finish one step apart
    if case.collective_model["algorithm"] == "in-switch":
        assert rtl["last_node_end_max"] - rtl["last_node_end_min"] <= 8
    assert rtl["iteration_cycles"] == rtl["last_node_end_max"]
    ratios = case.ratios()
    assert abs(ratios["iteration"] - 1) <= 0.10
    assert abs(ratios["comm_dp"] - 1) <= 0.15


@pytest.mark.full
@pytest.mark.parametrize("workload, strategy", [("resnet-152", "MP1-DP20-PP1"), ("transformer-17b", "MP20-DP1-PP1")])
def test_iterations_on_the_mesh_against_the_model(workload, strategy):
    """The 5 x 4 mesh RTL (one DP all-reduce; 160 wafer-wide MP all-reduces per NPU, each NPU
    loading every collective's program while it computes): compute is the trace's to the
    cycle, every flit checked, the iteration and the communication within the issue's bounds
    (10 %, 15 %). (resnet-152 MP20 is not here: at K = 1000 its all-reduces are 1-51 flits,
    which the RTL pads to whole flits per ring piece and the model does not; it misses the
    bounds, docs/fabric_iteration.md.)"""
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    case = build_iteration_case(fabric="mesh", workload=get_workload(workload), platform=default_platform(),
                                strategy=parse_strategy(strategy), scale=1000)
    run_iteration_case(case)
    rtl, model = case.rtl_figures, case.model
    assert rtl["compute_cycles"] == case.traces[0].compute_cycles
    assert abs(rtl["compute_cycles"] - model["compute_cycles"]) <= 1
    assert rtl["iteration_cycles"] == rtl["last_node_end_max"]
    ratios = case.ratios()
    assert abs(ratios["iteration"] - 1) <= 0.10
    for cls in model["comm_busy_cycles"]:
        assert abs(ratios[f"comm_{cls}"] - 1) <= 0.15


@pytest.mark.full
@pytest.mark.parametrize("fabric, algorithms", [("fred-b", ("in-switch", "in-switch")),
                                                 ("fred-a", ("ring", "hierarchical"))])
def test_small_fabric_runs_several_collectives_its_switches_rerunning_their_phases(fabric, algorithms):
    """Two all-reduces per NPU on the circuit fabric, the first run twice (a repeat), the second
    of another size on the same group (on Fred-A with another algorithm, whose phases sit in
    other slots): the NPUs' loaders write each engine program and the switches' loaders each
    collective's phase counts and first slot (docs/fabric_iteration.md); every flit of every
    run checked, compute to the cycle, each collective waits for its slowest member. The
    lock-step simulator (the default) and the one model under cocotb count the same cycles,
    node times and flits (Fred-A's rings cross the lock-step cut)."""
    from cocotb_tests.iteration.run import run_iteration
    from hdl.compiler.fabric_program import fabric_program
    spec = fabric_spec(fabric, **SMALL)
    group = (FabricCollective("all-reduce", (0, 1, 2, 3)),)
    programs = [fabric_program(spec, FabricRequest("all-reduce", group, flits, "wafer"), algorithm=algorithm)
                for flits, algorithm in zip((8, 5), algorithms)]
    words = [None, COLLECTIVE_BIT | 2, 30, COLLECTIVE_BIT, 7]
    traces = {}
    for r in range(4):
        traces[r] = replace(_trace(r, [40 + 25 * r] + words[1:]), collective=1, collectives=(1, 3))
    run, one = (run_iteration(spec, traces, programs, watchdog_cycles=20_000, cflags="-O0", simulator=simulator)
                for simulator in ("lockstep", "cocotb"))
    assert run.errors == one.errors == [] and "lockstep" in run.build_dir and "lockstep" not in one.build_dir
    assert (run.cycles, run.node_times, run.flits_sent, run.flits_received, run.load_stall) == (
        one.cycles, one.node_times, one.flits_sent, one.flits_received, one.load_stall)
    assert run.flits_sent == sum(e["send_count"] for e in programs[1].engines[:4])   # the last run's
    first_ends, second_ends = [], []
    for r, times in run.node_times.items():
        assert times[0] == [0, 40 + 25 * r]
        assert times[1][0] == 40 + 25 * r
        first_ends.append(times[1][1])
        assert times[2] == [times[1][1], times[1][1] + 30]
        assert times[3][0] == times[2][1]
        second_ends.append(times[3][1])
        assert times[4] == [times[3][1], times[3][1] + 7]
    # both runs of the first collective wait for rank 3 (computing until 115), the second
    # collective for the last member's compute after the first
    assert min(first_ends) >= 115 + 2 * 8 and min(second_ends) >= max(first_ends) + 30 + 5
    assert run.cycles == max(second_ends) + 7


@pytest.mark.full
def test_the_mesh_iteration_on_the_lock_step_simulator_counts_what_the_one_model_does():
    """The 2 x 2 mesh cut between its columns for the lock-step simulator, its collective
    barrier split across the cut (``CollectiveBarrier(split=True)``): two all-reduces per NPU
    (a ring of 8 flits, then the 2D all-reduce of 6), rank r computing 40 + 25 r cycles before
    the first and 30 between them: the same cycles, node times, flits and program-load waits as
    the one model under cocotb, every flit of every run checked; the barrier holds every NPU's
    collectives until the last member (rank 3, computing until 115) joins."""
    from cocotb_tests.iteration.run import run_mesh_iteration
    from hdl.compiler.mesh_program import mesh_program
    from hdl.contracts.mesh import MeshFabricSpec
    spec = MeshFabricSpec(rows=2, cols=2)
    programs = [mesh_program(spec, [[0, 1, 2, 3]], 8, algorithm="ring"),
                mesh_program(spec, [[0, 1, 2, 3]], 6, algorithm="hierarchical-2d")]
    traces = {r: _trace(r, [40 + 25 * r, COLLECTIVE_BIT, 30, COLLECTIVE_BIT, 7]) for r in range(4)}
    lock, one = (run_mesh_iteration(spec, traces, programs, watchdog_cycles=20_000, cflags="-O0", simulator=sim)
                 for sim in ("lockstep", "cocotb"))
    assert lock.errors == one.errors == [] and lock.simulator == "lockstep" and one.simulator == "cocotb"
    assert (lock.cycles, lock.node_times, lock.flits_sent, lock.flits_received, lock.load_stall) == (
        one.cycles, one.node_times, one.flits_sent, one.flits_received, one.load_stall)
    assert min(times[1][1] for times in lock.node_times.values()) >= 115
    assert lock.cycles == max(times[4][1] for times in lock.node_times.values())


def test_small_fabric_runs_an_overlapped_trace_compute_under_the_collective():
    """The overlapped sequencers on the circuit fabric (docs/fabric_iteration.md, "Overlap"):
    every NPU issues its all-reduce first and computes 40 + 25 r cycles under it; a wait node
    holds its last 7 cycles until the all-reduce has finished; every flit checked."""
    from cocotb_tests.iteration.run import run_iteration
    from hdl.compiler.fabric_program import fabric_program
    spec = fabric_spec("fred-b", **SMALL)
    request = FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 1, 2, 3)),), 8, "wafer")
    program = fabric_program(spec, request, algorithm="in-switch")
    traces = {r: _trace(r, [COLLECTIVE_BIT, 40 + 25 * r, WAIT_BIT | 1, 7], overlap=True) for r in range(4)}
    run = run_iteration(spec, traces, program, watchdog_cycles=20_000, cflags="-O0")
    assert run.errors == [] and run.flits_sent == run.flits_received == 4 * 8
    ends = []
    for r, times in run.node_times.items():
        # issued in cycle 0 and taken by the idle collective lane, its engine started in 1; the
        # compute runs from cycle 1 under it; the wait node takes the later of the collective's
        # last cycle and the compute's end
        assert times[0][0] == 1 and times[1] == [1, 41 + 25 * r]
        assert times[2] == [max(times[0][1] - 1, times[1][1]), max(times[0][1] - 1, times[1][1]) + 1]
        assert times[3] == [times[2][1], times[2][1] + 7]
        ends.append(times[3][1])
    collective_end = max(t[0][1] for t in run.node_times.values())
    assert collective_end < 41          # every rank's all-reduce hid under its compute
    assert run.cycles == max(ends) == 41 + 75 + 1 + 7


@pytest.mark.full
def test_overlapped_weight_streaming_on_the_mesh_against_the_model():
    """GPT-3 MP1-DP20-PP1, 8 samples, K = 10,000, overlapped (docs/fabric_iteration.md,
    "Overlap"): the mesh's I/O iteration top with overlapped sequencers prefetches the weight
    streams under the compute, one I/O collective at a time; every flit checked; the iteration
    within 10 % of the model's overlapped one-collective schedule and the exposed I/O within
    15 %; a third of the I/O hidden on both sides (measured 1.0013 and 1.019, 281,062 of
    418,282 cycles exposed)."""
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    case = build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), samples_per_dp=8, scale=10_000.0,
                                overlap=True)
    run_iteration_case(case)
    rtl, model = case.rtl_figures, case.model
    assert rtl["compute_cycles"] == case.traces[0].compute_cycles
    assert abs(case.ratios()["iteration"] - 1) <= 0.10
    assert abs(rtl["comm_exposed_cycles"]["io"] / model["comm_exposed_cycles"]["io"] - 1) <= 0.15
    for side in (rtl, model):
        assert 0.5 < side["comm_exposed_cycles"]["io"] / side["comm_busy_cycles"]["io"] < 0.8


def test_rtl_figures_count_a_collective_under_compute_as_hidden():
    """Pure: an overlapped trace's node times (the collective lane's all-reduce under the node
    lane's compute, a wait node): exposed is the all-reduce's cycles outside the compute."""
    from studies.iteration_case import IterationCase, rtl_figures
    words = [COLLECTIVE_BIT, 17, WAIT_BIT | 1, 9]
    case = IterationCase(None, "", 1.0, {}, {0: _trace(0, words, overlap=True)}, None, None)
    fig = rtl_figures(case, {0: [[5, 30], [3, 20], [30, 31], [31, 40]]}, 40)
    assert fig["comm_busy_cycles"] == {"dp": 25} and fig["comm_exposed_cycles"] == {"dp": 25 - 15}
    assert fig["compute_cycles"] == 17 + 9 and fig["last_node_end_max"] == 40


def test_rtl_figures_are_the_rank_that_finishes_last():
    """Pure: groups that take turns through a switch end apart; the rank that waited for every
    turn (here rank 1) is the one the model's task of all groups stands for, and its compute
    plus communication is the iteration."""
    from studies.iteration_case import IterationCase, rtl_figures
    words = [10, COLLECTIVE_BIT, 5]
    case = IterationCase(None, "", 1.0, {}, {r: _trace(r, words) for r in range(3)}, None, None)
    times = {0: [[0, 10], [10, 20], [20, 25]], 1: [[0, 10], [10, 40], [40, 45]],
             2: [[0, 10], [10, 40], [40, 45]]}
    fig = rtl_figures(case, times, 45)
    assert fig["representative_rank"] == 1
    assert fig["comm_busy_cycles"] == {"dp": 30} and fig["compute_cycles"] == 15
    assert fig["iteration_cycles"] == fig["compute_cycles"] + 30
    assert (fig["last_node_end_min"], fig["last_node_end_max"]) == (25, 45)
