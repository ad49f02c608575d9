"""A small iteration on the RTL mesh whose NPUs run traces with several collectives
(hdl/designs/iteration/, ``MeshFabricTop(..., sequencer=...)``) in the Amaranth simulator: each
NPU's program loader writes every collective's engine programs while the NPU computes, the
collectives (two algorithms, the first repeated, the second with another stage count) run with every int32 flit checked, a collective
waits for its slowest member, and a wrong expected sum in the second collective is reported
(the check can fail; ``full``). The 5 x 4 mesh runs under Verilator (tests/studies/test_iteration_case.py)."""

from __future__ import annotations

import pytest

from cocotb_tests.iteration.run import mesh_loader_entries
from hdl.compiler.mesh_program import mesh_program
from hdl.contracts.mesh import MESH_VCS, MeshFabricSpec
from hdl.contracts.trace_program import (COLLECTIVE_BIT, LOADER_READ, TRACE_READ, TRACE_READ_ADDR, NpuTrace,
                                         loader_writes, trace_writes)
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ, sequencer_unit

SPEC = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32)
READ = TRACE_READ + LOADER_READ
PROGRAMS = 256
GROUP = [list(range(SPEC.npus))]
#: rank r: compute 40 + 9 r, all-reduce A twice, compute 30, all-reduce B, compute 5
WORDS = [None, COLLECTIVE_BIT | 2, 30, COLLECTIVE_BIT, 5]


def _traces(first=lambda r: 40 + 9 * r, rest=WORDS[1:]):
    """Rank r's trace: compute ``first(r)`` cycles, then the nodes ``rest``."""
    traces = {}
    for r in range(SPEC.npus):
        words = tuple([first(r)] + list(rest))
        traces[r] = NpuTrace(rank=r, words=words, node_ids=tuple(range(len(words))),
                             names=tuple(map(str, range(len(words)))),
                             categories=tuple("mp" if w & COLLECTIVE_BIT else "compute" for w in words),
                             collective=1, collectives=(1, 3))
    return traces


def _run(run_fabric_top, programs, traces=None):
    from hdl.designs.iteration import iteration_mesh_top
    traces = _traces() if traces is None else traces
    entries = mesh_loader_entries(SPEC, programs)
    writes = []
    for rank, trace in traces.items():
        unit = sequencer_unit(SPEC, rank)
        writes += [(unit, reg, value) for reg, value in loader_writes(entries[rank], MESH_VCS, PROGRAMS)]
        writes += [(unit, reg, value) for reg, value in trace_writes(trace, 8)]

    async def read_back(read, write):
        out = {"global": {n: await read(GLOBAL_UNIT, i) for i, n in enumerate(MESH_GLOBAL_READ)}, "npus": []}
        for rank in traces:
            unit = sequencer_unit(SPEC, rank)
            npu = {n: await read(unit, i) for i, n in enumerate(READ)}
            npu["times"] = []
            for node in range(len(trace.words)):
                await write(unit, TRACE_READ_ADDR, node)
                npu["times"].append((await read(unit, READ.index("node_start")),
                                     await read(unit, READ.index("node_end"))))
            out["npus"].append(npu)
        return out

    dut = iteration_mesh_top(SPEC, depth=8, programs=PROGRAMS)
    return run_fabric_top(dut, writes, read_back, max_cycles=3000, with_write=True), entries


def _programs():
    a = mesh_program(SPEC, GROUP, 8, algorithm="hierarchical-2d")
    b = mesh_program(SPEC, GROUP, 12, algorithm="ring")
    return [a, b]


def test_collectives_load_their_programs_under_compute_and_every_flit_is_checked(run_fabric_top):
    out, entries = _run(run_fabric_top, _programs())
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    ends = []
    for rank, npu in enumerate(out["npus"]):
        assert npu["nodes_done"] == len(WORDS) and npu["run_errors"] == 0
        times = npu["times"]
        assert times[0] == (0, 40 + 9 * rank)                      # compute to the cycle
        for node in (2, 4):                                         # compute between collectives
            assert times[node][1] - times[node][0] == WORDS[node]
        assert [t[1] for t in times[:-1]] == [t[0] for t in times[1:]]   # back to back
        # program-load wait: the entries that do not fit the compute before the node (the
        # loader starts the cycle after the collective before it ends), plus the deferred ones
        # (the engines' stage count, written in the node); entries per program from the contract
        per_program, current = [], [0, 0]
        for flags, _ in entries[rank]:
            current[flags >> 1 & 1] += 1
            if flags & 1:
                per_program.append(tuple(current))
                current = [0, 0]
        window = [40 + 9 * rank, 30]
        assert npu["load_stall"] == sum(max(0, now - w) + later for (now, later), w in zip(per_program, window))
        ends.append([t[1] for t in times])
    # the first collective waits for the slowest member (rank 3 computes until 67); its two runs
    # end together everywhere, as does every collective after it
    assert min(e[1] for e in ends) > 40 + 9 * 3 + 2 * 8
    for node in (1, 3):
        assert max(e[node] for e in ends) - min(e[node] for e in ends) <= 8
    assert out["global"]["cycles"] == max(e[-1] for e in ends)


@pytest.mark.full
def test_a_wrong_sum_in_the_second_collective_is_reported(run_fabric_top):
    """(``full``: another 8 s of simulation.)"""
    programs = _programs()
    wrong = mesh_program(SPEC, GROUP, 12, algorithm="ring")
    wrong.engines[2]["stages"][-1]["wr"] ^= 2           # NPU 1's chunk 0 expects another sum
    out, _ = _run(run_fabric_top, [programs[0], wrong])
    assert out["npus"][1]["run_errors"] > 0
    assert [n["run_errors"] for r, n in enumerate(out["npus"]) if r != 1] == [0, 0, 0]


def test_a_neighbour_that_runs_ahead_never_puts_its_next_collective_into_the_current_one(run_fabric_top):
    """The packet fabric's MP2-DP2 reproduction (test_packet_iteration_separation_sim.py) on the
    2 x 2 mesh: ring all-reduces MP (0, 1), (2, 3) of 32 flits, then DP (0, 2), (1, 3) of 16,
    NPU 0 computing 200 cycles before MP (the others 10): NPUs 2 and 3 finish MP and send their
    DP flits into the MP collective of 0 and 1 -- on main's mesh (2026-11-28 03:11 UTC): the
    iteration ended "done" in 395 cycles with 16, 16, 8, 8 bad or extra flits at NPUs 0-3 (with
    NPU 0 at 10 cycles: 244 cycles, every flit good). With the barrier per collective run
    (``MeshIterationTop``) every flit of both runs is good and every NPU's DP run ends after
    the last MP run's end."""
    programs = [mesh_program(SPEC, [[0, 1], [2, 3]], 32, algorithm="ring"),
                mesh_program(SPEC, [[0, 2], [1, 3]], 16, algorithm="ring")]
    traces = _traces(lambda r: 200 if r == 0 else 10, [COLLECTIVE_BIT, 5, COLLECTIVE_BIT, 3])
    out, _ = _run(run_fabric_top, programs, traces)
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    assert [(n["nodes_done"], n["run_errors"]) for n in out["npus"]] == [(5, 0)] * 4
    mp_ends = [n["times"][1][1] for n in out["npus"]]
    assert min(mp_ends[0], mp_ends[1]) > max(mp_ends[2], mp_ends[3])     # the case: one ring late
    assert all(n["times"][3][1] > max(mp_ends) for n in out["npus"])
