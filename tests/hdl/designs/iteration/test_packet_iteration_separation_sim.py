"""Issue 32 on a whole fabric, in the Amaranth simulator: the packet Fred-A of 4 NPUs (2 per L1)
runs MP2-DP2 -- an MP ring all-reduce in each L1 ((0, 1), (2, 3)), then a DP ring all-reduce
across the L1s ((0, 2), (1, 3)) -- with NPU 0 computing 200 cycles before the MP collective
(the others 10) and NPU 1's sink slowed in it, so the other L1's MP ring finishes first and its
NPUs start the DP collective while NPUs 0 and 1 still run the MP one: the DP predecessors'
packets reach 0 and 1 during their MP collective, NPU 1's first DP packet before its first MP
one (docs/fabric_iteration.md, "Collectives kept apart at a packet NPU"). On main's hardware
they entered the MP collective (measured 2026-11-28: 16, 16, 8, 8 bad or extra flits at NPUs
0-3, 3 packets out of sequence at 0 and 1, the iteration "done" in 406 cycles); without the
barrier, the receive gate alone deadlocks it (a DP packet at the head of NPU 1's buffer, its
MP packets behind); the packet
iteration top's barrier per collective (:class:`~hdl.designs.iteration.CollectiveBarrier`)
holds every NPU's start of a collective until every NPU has finished the one before."""

from __future__ import annotations

from dataclasses import replace

from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec
from hdl.contracts.trace_program import COLLECTIVE_BIT

from tests.studies.test_iteration_case import SMALL, _trace

SPEC = fabric_spec("fred-a", **SMALL)
MP = (FabricCollective("all-reduce", (0, 1)), FabricCollective("all-reduce", (2, 3)))
DP = (FabricCollective("all-reduce", (0, 2)), FabricCollective("all-reduce", (1, 3)))
#: flits of the MP and the DP all-reduce
SIZES = (32, 16)
#: NPU 1's sink in the MP collective: not ready in about 3 cycles of 4 (the engine's LFSR threshold)
SLOW = 0xC000
NODES, PROGRAMS = 16, 64
#: NPU 0's compute before the MP collective (the others': 10 cycles)
LATE = 200


def _case():
    from hdl.compiler.fabric_program import fabric_program
    requests = [FabricRequest("all-reduce", MP, SIZES[0], "mp"), FabricRequest("all-reduce", DP, SIZES[1], "dp")]
    programs = [fabric_program(SPEC, r, algorithm="ring") for r in requests]
    programs[0].engines[1]["backpressure"] = SLOW
    traces = {r: replace(_trace(r, [LATE if r == 0 else 10, COLLECTIVE_BIT, 5, COLLECTIVE_BIT, 3]), collective=1,
                         collectives=(1, 3)) for r in range(SPEC.npus)}
    return programs, requests, traces


def _run(run_fabric_top, read_iteration, max_cycles=3000):
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    from cocotb_tests.iteration.packet_run import packet_iteration_load
    from hdl.designs.iteration import PacketTraceNpu, iteration_packet_top
    programs, requests, traces = _case()
    packet = packet_iteration_format(SPEC, True)
    load = packet_iteration_load(SPEC, programs, requests, traces, NODES, packet)
    dut = iteration_packet_top(SPEC, depth=NODES, programs=load["room"], online=True)
    assert dut.packet == packet
    names = PacketTraceNpu.read_names

    counts = [len(traces[rank].words) for rank in range(SPEC.npus)]
    return run_fabric_top(dut, load["writes"], lambda read, write: read_iteration(read, write, counts, names),
                          max_cycles=max_cycles, with_write=True), programs


def test_a_neighbour_that_runs_ahead_never_puts_its_next_collective_into_the_current_one(run_fabric_top,
                                                                                        read_iteration):
    """Every NPU finishes both collectives, every flit of both runs checked good, no packet out
    of sequence; the DP collective starts its sends at every NPU only after the slowed MP ring
    (0, 1) has finished: each NPU's DP node ends after the last MP node's end (measured
    2026-11-28: 464 cycles)."""
    out, programs = _run(run_fabric_top, read_iteration)
    assert out["all_done"], out
    for rank, x in enumerate(out["npus"]):
        assert (x["nodes_done"], x["run_errors"], x["seq_errors"], x["link_errors"]) == (5, 0, 0, 0), (rank, x)
        assert x["received"] == programs[1].engines[rank]["recv_count"], (rank, x)
    mp_ends = [x["times"][1][1] for x in out["npus"]]
    # the slowed ring's MP ends well after the other's: the case this test is about
    assert min(mp_ends[0], mp_ends[1]) > max(mp_ends[2], mp_ends[3]) + 5 + SIZES[1], mp_ends
    for x in out["npus"]:
        assert x["times"][3][1] > max(mp_ends), (mp_ends, x["times"])
