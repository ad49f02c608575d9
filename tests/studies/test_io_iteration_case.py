"""Weight streaming in the serialised iteration (docs/fabric_iteration.md, "Weight streaming"):
the model's side on the mesh with its 18 edge controllers, the I/O nodes of the exported trace
as collective nodes and requests with their controller programs, and the refusal of what the
RTL does not run (checkpoint spills, the packet fabric's I/O iteration). Pure Python (no
Verilator)."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from hdl.contracts.trace_program import COLLECTIVE_BIT, IoRequest
from studies.iteration_case import build_iteration_case, run_iteration_case
from sysmodel.platform import default_platform
from sysmodel.workload_file import get_workload


@pytest.fixture(scope="module")
def gpt3_mesh():
    return build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), scale=1000.0)


def test_gpt3_streams_its_weights_from_the_mesh_edge_in_whole_stripes(gpt3_mesh):
    """MP1-DP20: every collective is I/O (the DP gradients go out by io-store); each I/O node is
    a collective word, its request the node's bytes per NPU in whole flits rounded up to whole
    stripes of the 18 controllers; the iteration is compute plus the I/O busy time (one
    collective at a time, nothing else communicates)."""
    case = gpt3_mesh
    flit = case.model["flit_bytes"]
    assert case.spec.controllers == 18 and case.fabric == "mesh"
    trace = case.traces[0]
    assert {c for c in trace.categories if c != "compute"} == {"io"}
    assert len(case.request) == len(trace.collectives) == case.collective_model["collectives"]
    assert all(isinstance(r, IoRequest) and r.groups == (tuple(range(20)),) for r in case.request)
    first = case.request[0]
    node = next(i for i, w in enumerate(trace.words) if w & COLLECTIVE_BIT)
    assert trace.names[node] == "load F embedding" and first.op == "io-load"
    # the embedding's weights, 50,257 x 12,288 FP16 parameters (MP1: no shard), at K = 1000:
    # 1,235,116.032 B per NPU = 2,413 flits of 512 B -> 135 flits per controller (2,430 per NPU)
    assert flit == 512 and 2 * 50_257 * 12_288 / 1000 == pytest.approx(1_235_116.032)
    assert (first.stripe_flits, first.size_flits) == (135, 2430)
    # the requests' own model cycles and the iteration's model both move whole stripes on the
    # RTL mesh (sysmodel.collectives._io_stripe): the same I/O time (before, the iteration moved
    # the exact bytes, 0.55 % less here)
    busy = case.model["comm_busy_cycles"]["io"]
    assert busy == pytest.approx(case.collective_model["model_cycles"], rel=1e-9)
    assert case.model["iteration_cycles"] == pytest.approx(
        case.model["compute_cycles"] + case.model["comm_busy_cycles"]["io"])


def test_a_stripe_beyond_the_queues_is_refused_by_name_before_anything_is_built(gpt3_mesh):
    """At K = 1000 GPT-3's spills have their programs, but its io-loads' 394-flit stripes put
    more on one forwarding direction than the NPUs' 2,048-flit queues hold: refused by name."""
    assert "holds 2048 per direction" in gpt3_mesh.rtl_missing
    assert "runs io-load, io-store, io-write and io-read nodes only" in gpt3_mesh.rtl_missing
    with pytest.raises(FredError, match="--model-only gives the model's side"):
        run_iteration_case(gpt3_mesh)


def test_checkpoint_spills_have_their_spill_programs():
    """GPT-3 MP1-DP20-PP1 with the default samples spills every microbatch's checkpoint: at
    K = 10,000 every I/O node has its program, the spills' unicasts included, and the mesh's
    I/O iteration top runs it (nothing missing)."""
    from hdl.compiler.mesh_io_program import IoSpillProgram
    case = build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), scale=10_000.0)
    assert {r.op for r in case.request} == {"io-load", "io-store", "io-write", "io-read"}
    spills = [(r, p) for r, p in zip(case.request, case.program) if r.op in ("io-write", "io-read")]
    assert spills and all(isinstance(p, IoSpillProgram) and p.op == r.op and p.stripe_flits == r.stripe_flits
                          for r, p in spills)
    assert case.rtl_missing is None


def test_the_packet_fred_fabric_streams_through_its_18_controllers_and_the_circuit_one_refuses():
    """The packet Fred-B with the paper's 18 controllers (controller k on L1 k mod 5: its L1s
    grow by 4 ports); the circuit fabric has none and says so."""
    workload, strategy = get_workload("gpt-3"), parse_strategy("MP1-DP20-PP1")
    case = build_iteration_case(fabric="fred-b", switch="packet", workload=workload,
                                platform=default_platform(), strategy=strategy, scale=1000.0)
    assert case.spec.io_controllers == 18 and case.spec.io_ports_per_l1 == 4
    assert all(isinstance(r, IoRequest) and r.controllers == 18 for r in case.request)
    assert "the packet fred-b fabric's I/O iteration top (its 18 controllers run by the trace" in case.rtl_missing
    assert "runs Fred-A/C" in case.rtl_missing
    with pytest.raises(FredError, match="the circuit FRED fabric has none"):
        build_iteration_case(fabric="fred-b", workload=workload, platform=default_platform(), strategy=strategy)


def test_without_checkpoint_spills_every_io_node_has_its_mesh_controller_program():
    """gpt-3 MP1-DP20-PP1 with 8 samples per replica keeps its activations (no io-write /
    io-read): only weights in (io-load) and gradients out (io-store), the two ops the mesh's
    I/O tops run; at K = 10,000 every stripe fits the NPUs' queues and partial-sum memories, so
    each I/O node has its controller program. The embedding's io-load: 1,235,116.032 B / 10
    = 123,511.6 B = 242 flits -> 14 flits per controller; tree-split puts 7 on each tree."""
    from hdl.compiler.mesh_io_program import IoLoadProgram, IoStoreProgram
    case = build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), samples_per_dp=8, scale=10_000.0)
    assert {r.op for r in case.request} == {"io-load", "io-store"}
    assert all(isinstance(p, IoLoadProgram if r.op == "io-load" else IoStoreProgram)
               for r, p in zip(case.request, case.program))
    first, program = case.request[0], case.program[0]
    assert (first.op, first.stripe_flits, program.mode) == ("io-load", 14, "tree-split")
    assert program.per_tree == [7] * 36 and program.expect == 14 * 18
    # the mesh's I/O iteration top runs it (tests/hdl/designs/iteration/test_mesh_io_iteration_sim.py)
    assert case.rtl_missing is None


@pytest.mark.full
def test_gpt3_weight_streaming_runs_on_the_mesh_rtl_within_the_targets():
    """Verilator, the 5 x 4 mesh with its 18 controllers (a build of a few minutes): gpt-3
    MP1-DP20-PP1, 8 samples, K = 100,000 -- 194 io-loads and 97 io-stores of 1..4-flit stripes
    between the compute nodes, every flit checked; the iteration within 10 % and the I/O time
    within 15 % of the model's."""
    case = build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), samples_per_dp=8, scale=100_000.0)
    run_iteration_case(case)
    ratios = case.ratios()
    assert abs(ratios["iteration"] - 1) < 0.10 and abs(ratios["comm_io"] - 1) < 0.15


@pytest.mark.full
def test_gpt3_with_checkpoint_spills_runs_on_the_mesh_rtl_at_the_model_cycles_of_what_it_moves():
    """Verilator: gpt-3 MP1-DP20-PP1 with the default samples per replica, K = 100,000 -- the
    io-loads and io-stores, and every layer's checkpoint written out (io-write) and read back
    (io-read) as unicasts between every NPU and every controller, every flit checked
    (run_iteration_case raises otherwise). At this scale a spill is under 2 flits per NPU
    and moves as 1-flit stripes to each of the 18 controllers, so the RTL's I/O is compared
    with the model's cycles of the requests it runs (whole stripes, each run of a repeated
    node counted), not with the iteration's exact bytes (docs/fabric_iteration.md: the
    K = 10,000 run meets the iteration targets). Never below the controllers' and busiest
    links' time of those requests; within 5 % of their model cycles."""
    from cocotb_tests.iteration.run import collective_repeats
    from sysmodel.mesh_rtl_model import mesh_io_model_cycles
    case = build_iteration_case(fabric="mesh", workload=get_workload("gpt-3"), platform=default_platform(),
                                strategy=parse_strategy("MP1-DP20-PP1"), scale=100_000.0)
    assert {"io-write", "io-read"} <= {r.op for r in case.request}
    repeats = collective_repeats(case.traces, len(case.request))
    estimates = [mesh_io_model_cycles(case.spec, r.stripe_flits, op=r.op,
                                      mode=None if r.op in ("io-write", "io-read") else p.mode)
                 for r, p in zip(case.request, case.program)]
    moved = sum(e.cycles * n for e, n in zip(estimates, repeats))
    bound = sum(e.bandwidth_cycles * n for e, n in zip(estimates, repeats))
    run_iteration_case(case)
    io = case.rtl_figures["comm_busy_cycles"]["io"]
    assert bound <= io <= 1.05 * moved, (io, moved, bound)


@pytest.mark.parametrize("fabric, flows", [("fred-b", 5), ("fred-d", 8)])
def test_the_packet_in_switch_fabrics_io_iteration_is_refused_naming_the_switch_feature_it_lacks(fabric, flows):
    """GPT-3 MP1-DP20-PP1, 8 samples, K = 10,000 on the packet Fred-B/D with the 18 controllers:
    the model's side runs; the RTL is refused before anything is built, naming per op what is
    missing. By hand: L1 0 holds controllers 0, 5, 10, 15; each one's stripe tree is one stored
    flow there (controller -> the L1's 4 NPUs and the uplink), and the other 14 stripes come
    down the uplinks to the same 4 NPUs: one downlink flow per uplink port (stripe k on uplink
    k mod ports; Fred-B 1 port, Fred-D 4), so 4 + 1 = 5 (Fred-B) and 4 + 4 = 8 (Fred-D)
    distinct flows, every one of them sending to each NPU output (io-load) or reducing each NPU
    input (io-store). Both run io-load and io-store as shared stored flows as one request
    each (not behind the trace): Fred-B in the default 8 slots, Fred-D's 8 trees and the
    shared phase in 9 (a 4-bit phase, docs/fabric_rtl.md, Fred-D point 8)."""
    case = build_iteration_case(fabric=fabric, switch="packet", workload=get_workload("gpt-3"),
                                platform=default_platform(), strategy=parse_strategy("MP1-DP20-PP1"),
                                samples_per_dp=8, scale=10_000.0)
    assert case.model["iteration_cycles"] > case.model["compute_cycles"] > 0
    missing = case.rtl_missing
    assert f"the packet {fabric} fabric's I/O iteration top (its 18 controllers run by the trace" in missing
    assert (f"io-load: the 18 controllers' stripe trees take up to {flows} distinct stored flows at a switch, "
            f"up to {flows} of them sending to one switch output") in missing
    assert f"up to {flows} of them reducing from one switch input" in missing
    assert missing.count("served as shared stored flows on the packet fabric") == 2
    assert "do not fit" not in missing
    with pytest.raises(FredError, match="distinct stored flows at a switch"):
        run_iteration_case(case)


@pytest.mark.parametrize("fabric", ["fred-a", "fred-c"])
def test_the_packet_endpoint_fabrics_io_iteration_names_only_the_spills(fabric):
    """Fred-A/C (endpoint chains, routed online): io-load's and io-store's striped chains run
    behind the trace (PacketIoIterationTop), so neither is named; with the default samples the
    spills (io-write / io-read) are; with 8 samples (no spills) nothing is missing and every
    I/O node has its striped program (the embedding's io-load: 14 flits per controller)."""
    from hdl.compiler.io_stripe_program import IoStripeProgram
    case = build_iteration_case(fabric=fabric, switch="packet", workload=get_workload("gpt-3"),
                                platform=default_platform(), strategy=parse_strategy("MP1-DP20-PP1"),
                                scale=10_000.0)
    missing = case.rtl_missing
    assert f"the packet {fabric} fabric's I/O iteration top runs io-load and io-store nodes" in missing
    assert "io-load:" not in missing and "io-store:" not in missing
    case = build_iteration_case(fabric=fabric, switch="packet", workload=get_workload("gpt-3"),
                                platform=default_platform(), strategy=parse_strategy("MP1-DP20-PP1"),
                                samples_per_dp=8, scale=10_000.0)
    assert case.rtl_missing is None
    assert all(isinstance(p, IoStripeProgram) and p.op == {"io-load": "io-broadcast", "io-store": "io-reduce"}[r.op]
               and p.stripe_flits == r.stripe_flits for r, p in zip(case.request, case.program))
    assert case.program[0].stripe_flits == 14
    for op in ("io-write", "io-read"):
        assert f"{op}: the spills" in missing
