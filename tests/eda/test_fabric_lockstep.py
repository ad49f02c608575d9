"""The lock-step fabric simulator (docs/fabric_rtl.md): the partition (pure Python), the cut link's ends
(Amaranth simulator), and the two-part simulator against the one-model cocotb bench (Verilator).

Exactness rests on one property: every signal crossing a cut depends only on its own part's
state, never combinationally on the other part's signals; the link-end tests pin it, and the
Verilator tests compare whole runs cycle for cycle.
"""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.fabric_partition import (FabricPartition, fabric_partition, simulation_weight,
                                       switch_weight, uplinks)

SMALL = dict(npus=4, npus_per_l1=2)


# -- the partition (pure Python) ----------------------------------------------------------------

def test_switch_weight_follows_the_recursion():
    # Fred_3(2) is one RD microswitch; Fred_3(4): 2 input + 2 output microswitches around
    # three Fred_3(2); the configuration memory grows with the ports
    rd, inp, out, per_port, fixed = 1.0, 1.06, 0.44, 0.4, 1.0
    assert switch_weight(2) == pytest.approx(rd + 2 * per_port + fixed)
    assert switch_weight(4) == pytest.approx(2 * (inp + out) + 3 * rd + 4 * per_port + fixed)
    assert switch_weight(8) > switch_weight(5) > switch_weight(4)


@pytest.mark.parametrize("name", ["fred-a", "fred-b", "fred-c", "fred-d"])
def test_default_partition_splits_the_paper_fabrics_into_two_balanced_parts(name):
    spec = fabric_spec(name)
    partition = fabric_partition(spec)
    assert sorted(set(partition.parts)) == [0, 1]
    weights = partition.weights()
    assert sum(weights) == pytest.approx(simulation_weight(spec))
    assert max(weights) / min(weights) < 1.15
    # every L1 keeps its NPUs; the cut links are exactly the uplinks between parts
    assert [partition.npu_part(r) for r in range(spec.npus)] == [
        partition.parts[r // spec.npus_per_l1] for r in range(spec.npus)]
    cut = partition.cut_links()
    assert len(cut) == sum(partition.parts[e.source] != partition.parts[e.sink] for e in uplinks(spec)) > 0
    assert all(c.source_part != c.sink_part for c in cut)


def test_fred_d_partition_puts_three_l1s_with_one_plane_against_two_with_three():
    spec = fabric_spec("fred-d")
    parts = fabric_partition(spec).parts
    l1, l2 = parts[:spec.l1_count], parts[spec.l1_count:]
    assert sorted([l1.count(0), l1.count(1)]) == [2, 3]
    assert l2.count(l1.count(1) == 3 and 1 or 0) == 1   # the side with three L1s has one plane


def test_uplinks_are_both_directions_of_every_l1_uplink_port():
    spec = fabric_spec("fred-d")
    ends = uplinks(spec)
    assert len(ends) == 2 * spec.l1_count * spec.uplink_ports
    up, down = ends[0], ends[1]
    assert (up.name, up.source, up.source_port, up.sink) == ("link_l1_0_0_up", 0, 4, spec.l1_count)
    assert (down.source, down.sink, down.sink_port) == (up.sink, up.source, up.source_port)


@pytest.mark.parametrize("parts, count, message", [
    ((0, 1), 2, r"names the part of each of its 6 switches, got 2"),
    ((0, 1, 0, 1, 0, 2), 2, r"switch 5's part must be in 0..1, got 2"),
    ((0,) * 6, 2, r"part\(s\) \[1\] hold no switch"),
    ((0,) * 6, 0, r"count must be an integer >= 1"),
])
def test_bad_partitions_are_refused(parts, count, message):
    with pytest.raises(FredError, match=message):
        FabricPartition(fabric_spec("fred-b"), parts, count)


def test_fabric_partition_counts_are_checked():
    with pytest.raises(FredError, match=r"cannot split 6 switches into 7 parts"):
        fabric_partition(fabric_spec("fred-b"), 7)
    assert fabric_partition(fabric_spec("fred-b"), 1).parts == (0,) * 6


@pytest.mark.parametrize("name", ["fred-b", "fred-d"])
def test_part_zeros_cut_out_is_part_ones_cut_in_field_for_field(name):
    from hdl.designs.fabric.fabric_top import FabricTop
    spec = fabric_spec(name, **SMALL)
    partition = fabric_partition(spec)
    tops = [FabricTop(spec, partition=partition, part=p) for p in range(2)]
    for top in tops:
        top._MustUse__silence = True   # inspected, not elaborated
    fields = [t.cut_fields() for t in tops]
    for p, q in ((0, 1), (1, 0)):
        out = [(n, w) for bus, n, w in fields[p] if bus == "cut_out"]
        into = [(n, w) for bus, n, w in fields[q] if bus == "cut_in"]
        assert out == into and out
    assert tops[0].cut_widths() == tops[1].cut_widths()[::-1]


def test_fabric_top_checks_its_partition_arguments():
    from hdl.designs.fabric.fabric_top import FabricTop
    spec = fabric_spec("fred-b", **SMALL)
    partition = fabric_partition(spec)
    with pytest.raises(FredError, match="give both partition and part"):
        FabricTop(spec, partition=partition)
    with pytest.raises(FredError, match=r"part must be in 0..1, got 2"):
        FabricTop(spec, partition=partition, part=2)
    with pytest.raises(FredError, match="the partition is of fabric fred-d"):
        FabricTop(spec, partition=fabric_partition(fabric_spec("fred-d", **SMALL)), part=0)


# -- the cut link's ends (Amaranth simulator) ---------------------------------------------------

def _combinational_response(dut, setup, hold, drive, values, watch):
    """Run the cycles ``setup`` (each a list of (signal, value), then a clock edge), set
    ``hold``; then for each of ``values`` set ``drive`` and record ``watch`` settled, within
    one cycle."""
    from amaranth.sim import Simulator
    seen = []

    async def bench(ctx):
        for cycle in setup:
            for signal, value in cycle:
                ctx.set(signal, value)
            await ctx.tick()
        for signal, value in hold:
            ctx.set(signal, value)
        for value in values:
            ctx.set(drive, value)
            await ctx.delay(1e-9)
            seen.append(tuple(ctx.get(s) for s in watch))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("latency", [1, 3])
def test_link_sender_wire_never_depends_on_the_credit(latency):
    # the sender with a flit offered and credits in use: toggling the receiver's credit within
    # a cycle must not move what goes on the wire (else the parts could not swap once a cycle)
    from amaranth.hdl import unsigned

    from hdl.designs.fabric.link import LinkSender
    dut = LinkSender(unsigned(8), latency=latency)
    offer = [(dut.i.valid, 1), (dut.i.payload, 0x5A)]
    seen = _combinational_response(dut, [offer, offer], [], dut.credit, [0, 1, 0],
                                   (dut.wire_valid, dut.wire_data, dut.i.ready))
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][0] == 1 and seen[0][1] == 0x5A   # a flit is on the wire


def test_link_receiver_credit_never_depends_on_the_wire():
    from amaranth.hdl import unsigned

    from hdl.designs.fabric.link import LinkReceiver
    dut = LinkReceiver(unsigned(8), latency=2)
    setup = [[(dut.wire_valid, 1), (dut.wire_data, 7), (dut.o.ready, 0)], [(dut.wire_valid, 0)]]
    seen = _combinational_response(dut, setup, [(dut.o.ready, 1), (dut.wire_data, 9)],
                                   dut.wire_valid, [0, 1, 0], (dut.credit, dut.o.valid, dut.o.payload))
    assert seen[0] == seen[1] == seen[2] == (1, 1, 7)   # the queued flit leaves, credit returns


# -- the simulator (Verilator) ---------------------------------------------------------------

@pytest.mark.cocotb
@pytest.mark.parametrize("fabric, op, algorithm, backpressure", [
    ("fred-b", "all-reduce", None, 0.3),          # in-switch, L2 in part 0 or 1
    ("fred-a", "all-reduce", "hierarchical", 0.3),  # endpoint rings across the cut (same build)
])
def test_lockstep_runs_the_same_cycles_and_flits_as_the_one_model_bench(fabric, op, algorithm, backpressure):
    from cocotb_tests.fabric.run import run_fabric
    spec = fabric_spec(fabric, **SMALL)
    request = make_request(spec, op=op, size_flits=40, group="wafer")
    runs = {sim: run_fabric(spec, request, algorithm=algorithm, sink_backpressure=backpressure,
                            seed=4, cflags="-O0", simulator=sim)
            for sim in ("lockstep", "cocotb")}
    lock, one = runs["lockstep"], runs["cocotb"]
    assert lock.errors == one.errors == []
    assert lock.build_dir != one.build_dir
    assert "lockstep" in lock.build_dir
    assert (lock.cycles, lock.flits_sent, lock.flits_received, lock.flits_checked) == (
        one.cycles, one.flits_sent, one.flits_received, one.flits_checked)
    assert lock.flits_checked == lock.expected_flits_checked > 0


@pytest.mark.cocotb
def test_lockstep_simulator_refuses_a_bad_command_file(tmp_path):
    import subprocess
    from eda.fabric.lockstep import EXECUTABLE
    from cocotb_tests.fabric.run import build_fabric
    built, _ = build_fabric(fabric_spec("fred-b", **SMALL), "-O0", simulator="lockstep")
    commands = tmp_path / "commands.txt"
    commands.write_text("npus 4\nswitches 3\nwatchdog 100\nbogus 1\n")
    done = subprocess.run([str(built / EXECUTABLE), str(commands), str(tmp_path / "r.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "line 4: unknown command 'bogus'" in done.stderr
    commands.write_text("npus 4\nswitches 3\n")
    done = subprocess.run([str(built / EXECUTABLE), str(commands), str(tmp_path / "r.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "npus and watchdog are required" in done.stderr
    commands.write_text("npus 4\nswitches 3\nwatchdog 100\nnodes 0 3\n")   # node times need their registers
    done = subprocess.run([str(built / EXECUTABLE), str(commands), str(tmp_path / "r.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "nodes lines need a trace_regs line" in done.stderr


@pytest.mark.cocotb
def test_lockstep_stops_on_the_first_cycle_both_parts_are_done_whatever_the_poll(tmp_path):
    """The driver reads both parts' all_done after every cycle (it publishes them anyway), so the
    run stops one cycle after the fabric's counter does, not at the next multiple of ``poll``
    (the old rule timed up to poll - 1 cycles more than the run), and a cycle of the
    free-running loop is one eval() with the installed Verilator (lockstep.cpp, rising_edge)."""
    from cocotb_tests.fabric.run import build_fabric, load_sequence
    from hdl.compiler.fabric_program import fabric_program
    from eda.fabric.lockstep import run_lockstep
    spec = fabric_spec("fred-b", **SMALL)
    program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=40, group="wafer"))
    built, _ = build_fabric(spec, "-O0", simulator="lockstep")
    poll = 1000
    metrics = run_lockstep(built, {"npus": spec.npus, "switch_count": len(program.switches),
                                   **load_sequence(spec, program), "watchdog_cycles": 5000, "poll": poll},
                           run_dir=tmp_path)
    cycles = metrics["after"]["global"]["cycles"]
    assert not metrics["stalled"] and 40 < cycles < poll
    assert metrics["elapsed_cycles"] == cycles + 1   # all_done is the register after the count's last cycle
    assert metrics["evals_per_cycle"] == 1


def test_unknown_simulator_is_refused_before_building():
    from cocotb_tests.fabric.run import run_fabric
    spec = fabric_spec("fred-b", **SMALL)
    with pytest.raises(FredError, match=r"unknown fabric simulator 'verilog'; expected one of cocotb, lockstep"):
        run_fabric(spec, make_request(spec, op="all-reduce", size_flits=8, group="wafer"), simulator="verilog")


@pytest.mark.full
@pytest.mark.cocotb
@pytest.mark.parametrize("fabric, case", [
    ("fred-d", dict(op="all-reduce", group="wafer")),
    ("fred-c", dict(op="all-reduce", group="wafer", algorithm="hierarchical")),
    ("fred-d", dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="dp")),
])
def test_lockstep_matches_the_one_model_bench_on_the_paper_fabrics(fabric, case):
    from cocotb_tests.fabric.run import run_fabric
    case = dict(case)
    algorithm = case.pop("algorithm", None)
    spec = fabric_spec(fabric)
    request = make_request(spec, size_flits=64, **case)
    runs = [run_fabric(spec, request, algorithm=algorithm, sink_backpressure=0.25, seed=7,
                       cflags="-O0", simulator=sim) for sim in ("lockstep", "cocotb")]
    assert runs[0].errors == runs[1].errors == []
    assert runs[0].cycles == runs[1].cycles
    assert runs[0].flits_checked == runs[1].flits_checked == runs[0].expected_flits_checked
