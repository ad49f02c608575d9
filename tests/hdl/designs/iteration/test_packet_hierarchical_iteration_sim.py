"""Issue 32's hierarchical all-reduce on the packet fabric, in the Amaranth simulator: the packet
Fred-A of 4 NPUs (2 per L1, 2 uplink ports) runs two hierarchical all-reduces of the 2 x 2 members in an
iteration -- stage 0 a reduce-scatter ring in each L1 ((0, 1), (2, 3)), stage 1 an all-reduce
ring across the L1s ((0, 2), (1, 3)), stage 2 an all-gather ring in each L1 -- each stage's
unicasts to another destination (the staged NPUs' flow register, a slice per stage). L1 1's
NPUs compute 200 cycles less than L1 0's before the first and NPU 1's sink is slowed, so L1 1
finishes its reduce-scatter long before L1 0 has started: without the per-stage barrier its
stage-1 packets reach NPUs 0 and 1 ahead of their own reduce-scatter packets (the engine adds
them as stage-0 data: wrong sums, packets out of sequence); with it
(:class:`~hdl.designs.iteration.StageBarrier`) no NPU sends a stage before every NPU has
received all of the stage before (docs/fabric_iteration.md, "The hierarchical all-reduce on the
packet fabric")."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec
from hdl.contracts.trace_program import COLLECTIVE_BIT

from tests.studies.test_iteration_case import SMALL, _trace

#: 2 uplink ports per L1: 4-port switches, the smallest Fred-A the characterization measured
#: (P4m3int32), so the model's packet platform of this fabric exists
SPEC = fabric_spec("fred-a", **SMALL, uplink_ports=2)
WAFER = (FabricCollective("all-reduce", (0, 1, 2, 3)),)
#: flits of the two all-reduces (the second's stages: 8-flit chunks in L1, 4 across)
SIZES = (32, 16)
#: NPU 1's sink in the first all-reduce: not ready in about 3 cycles of 4
SLOW = 0xC000
NODES, PROGRAMS = 16, 64
#: L1 0's NPUs' compute before the first all-reduce (L1 1's: 10 cycles)
LATE = 210
#: compute between and after the all-reduces
BETWEEN, AFTER = 5, 3


def _case(sizes=SIZES, skewed=True):
    """(programs, requests, traces): two hierarchical all-reduces of ``sizes`` flits; ``skewed``:
    L1 0 computes ``LATE`` cycles before the first (L1 1: 10), NPU 1's sink slowed in it, then
    ``BETWEEN``; else every NPU computes 200 cycles before each (its program loads meanwhile)
    and no sink is slowed."""
    from hdl.compiler.fabric_program import fabric_program
    requests = [FabricRequest("all-reduce", WAFER, size, f"h{size}") for size in sizes]
    programs = [fabric_program(SPEC, r, algorithm="hierarchical") for r in requests]
    if skewed:
        programs[0].engines[1]["backpressure"] = SLOW
    first, between = ((lambda r: LATE if SPEC.l1_of(r) == 0 else 10), BETWEEN) if skewed else ((lambda r: 200), 200)
    traces = {r: replace(_trace(r, [first(r), COLLECTIVE_BIT, between, COLLECTIVE_BIT, AFTER]), collective=1,
                         collectives=(1, 3))
              for r in range(SPEC.npus)}
    return programs, requests, traces


class _NoStageBarrier:
    """The packet iteration top with the collective barrier but every stage open from the start
    (the engines step through their stages on their own counts, as on the circuit fabric)."""

    @staticmethod
    def top(**kwargs):
        from hdl.designs.iteration import PacketIterationTop
        from hdl.designs.iteration.collective_barrier import add_collective_barrier

        class Top(PacketIterationTop):
            def coordinate(self, m, components):
                npus = [components[r] for r in sorted(components) if r < self.spec.npus]
                add_collective_barrier(m, npus[0].start, [(x.run_over, x.done, x.may_start) for x in npus])
                m.d.comb += [x.stage_open.eq(-1) for x in npus]
        return Top(SPEC, **kwargs)


def _run(run_fabric_top, read_iteration, *, stage_barrier=True, max_cycles=3000, **case):
    from cocotb_tests.iteration.packet_loading import packet_iteration_format, packet_staged
    from cocotb_tests.iteration.packet_run import packet_iteration_load
    from hdl.designs.iteration import PacketTraceNpu, iteration_packet_top
    programs, requests, traces = _case(**case)
    assert packet_staged(programs)
    packet = packet_iteration_format(SPEC, True)
    load = packet_iteration_load(SPEC, programs, requests, traces, NODES, packet)
    if stage_barrier:
        dut = iteration_packet_top(SPEC, depth=NODES, programs=load["room"], online=True, staged=True)
    else:
        dut = _NoStageBarrier.top(online=True, npu=partial(PacketTraceNpu, nodes=NODES, programs=load["room"],
                                                           staged=True))
    assert dut.packet == packet
    names = PacketTraceNpu.read_names

    counts = [len(traces[rank].words) for rank in range(SPEC.npus)]
    return run_fabric_top(dut, load["writes"], lambda read, write: read_iteration(read, write, counts, names),
                          max_cycles=max_cycles, with_write=True), programs


def _spans(out):
    """Per NPU, the cycles of its two all-reduce nodes."""
    return [(x["times"][1][1] - x["times"][1][0], x["times"][3][1] - x["times"][3][0]) for x in out["npus"]]


def test_a_later_stage_never_reaches_an_npu_still_in_an_earlier_one(run_fabric_top, read_iteration):
    """With the stage barrier: both all-reduces complete at every NPU, every flit of every
    stage checked good (the sums of all four members), no packet out of sequence, each NPU's
    counts the program's. L1 1 starts 200 cycles before L1 0 and waits in the first
    all-reduce: its cross-L1 stage can only start once L1 0's slowed reduce-scatter is over
    (measured 2026-11-28 09:50 UTC: the first all-reduce ends at 407-480, the iteration 599
    cycles)."""
    out, programs = _run(run_fabric_top, read_iteration)
    assert out["all_done"], out
    for rank, x in enumerate(out["npus"]):
        assert (x["nodes_done"], x["run_errors"], x["seq_errors"], x["link_errors"]) == (5, 0, 0, 0), (rank, x)
        assert x["received"] == programs[1].engines[rank]["recv_count"], (rank, x)
        assert x["sent"] == programs[1].engines[rank]["send_count"], (rank, x)
    starts = [x["times"][1][0] for x in out["npus"]]
    assert starts == [LATE, LATE, 10, 10]          # the skew this test is about
    # L1 1's NPUs wait for L1 0: none ends the first all-reduce before L1 0 started it plus
    # the slowed reduce-scatter's 16 flits at about one in four cycles
    assert min(x["times"][1][1] for x in out["npus"]) > LATE + 4 * SIZES[0] // 2


def test_without_the_stage_barrier_the_early_stage_enters_the_earlier_one(run_fabric_top, read_iteration):
    """The same iteration with every stage open from the start (the barrier disabled): L1 1's
    cross-L1 packets reach NPUs 0 and 1 before their reduce-scatter packets, and the engines
    take them as reduce-scatter data -- wrong sums and packets out of sequence, while the
    iteration still ends "done" (measured 2026-11-28 09:50 UTC: run errors 16, 16, 8, 16 and
    3, 3, 0, 3 packets out of sequence at NPUs 0-3, 580 cycles). The test above passes only
    because of the barrier."""
    out, _ = _run(run_fabric_top, read_iteration, stage_barrier=False)
    assert out["all_done"], out          # silently wrong, not stalled: the worst case
    assert sum(x["run_errors"] for x in out["npus"]) > 0 and sum(x["seq_errors"] for x in out["npus"]) > 0, out


def test_the_hierarchical_all_reduce_against_the_model_and_what_the_barrier_costs(run_fabric_top, read_iteration):
    """No skew, no slowed sink, 16 and 32 flits: every NPU's all-reduce node within 10 % of the
    model's packet platform (the model times the hierarchical all-reduce as the sum of its
    stages alone, ``sysmodel.collectives._fred_hierarchical``; measured 2026-11-28 09:50 UTC:
    RTL 100-101 / 115 cycles, model 103.0 / 121.0). The barrier's cost against the same top with
    every stage open (correct here: no NPU runs ahead): at each of the 2 stage boundaries the
    open register's cycle plus the NPUs' skew at the stage's end, which is at most a packet's
    flits (the members send equal chunks at once; a receiver's last packet of the stage waits
    behind at most one other packet at a shared output) -- measured 4 cycles on both."""
    from hdl.contracts.fabric import FabricRequest
    from sysmodel.fabric_model import fabric_platform, model_cycles
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    sizes = (16, 32)
    out, _ = _run(run_fabric_top, read_iteration, sizes=sizes, skewed=False)
    free, _ = _run(run_fabric_top, read_iteration, stage_barrier=False, sizes=sizes, skewed=False)
    for run in (out, free):
        assert all((x["run_errors"], x["seq_errors"], x["load_stall"]) == (0, 0, 1) for x in run["npus"]), run
    platform = fabric_platform(SPEC, switch="packet")
    packet_flits = packet_iteration_format(SPEC, True).packet_flits
    for k, size in enumerate(sizes):
        model = model_cycles(SPEC, FabricRequest("all-reduce", WAFER, size, "h"), platform=platform,
                             algorithm="hierarchical").cycles
        rtl = max(span[k] for span in _spans(out))
        assert abs(rtl / model - 1) <= 0.10, (size, rtl, model)
        cost = rtl - max(span[k] for span in _spans(free))
        assert 0 <= cost <= 2 * (1 + packet_flits), (size, cost)
