"""Weight streaming in an iteration on the RTL mesh (hdl/designs/iteration/mesh_io_iteration_top.py)
in Amaranth's simulator, 2 x 2 with its 8 boundary controllers: every NPU's trace runs
compute, io-load, compute, io-store and io-load nodes (different stripes and trees), or with
checkpoint spills load, write, read and store, each I/O
collective starts when every NPU reached it and ends for all when its last unit is done,
every flit is checked (the load checkers, the controllers' store sums), and the program
loaders write each collective's registers while the NPUs compute
(docs/fabric_iteration.md, "Weight streaming")."""

from __future__ import annotations

import pytest

from hdl.compiler.mesh_io_program import io_load_program, io_store_program
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from hdl.contracts.trace_program import (LOADER_READ, TRACE_READ, TRACE_READ_ADDR, collective_requests,
                                         loader_entries, loader_writes, npu_trace, trace_writes)
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
from sysmodel.trace import TraceNode

SPEC = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, io_rate=(1, 2), queue_depth=64)
READ = TRACE_READ + LOADER_READ
PROGRAMS, DEPTH, MAX_STRIPE = 64, 8, 8
#: (op, stripe, trees) of the I/O nodes, after compute nodes of 30 + 7 r, 20 and 3 cycles: a
#: load then a store then a longer load (the order that caught a finished controller sending
#: again when the stripe changed), and a store first then a longer store
LOAD_STORE_LOAD = [("io-load", 4, "tree-split"), ("io-store", 3, "tree-split"), ("io-load", 5, "tree-xy")]
STORE_LOAD_STORE = [("io-store", 3, "tree-split"), ("io-load", 6, "tree-yx"), ("io-store", 5, "tree-xy")]
#: an iteration that spills: weights in, a checkpoint out and back (unicasts, no trees), the
#: gradients out; and one whose read is longer than its write and follows a load (each op's
#: stripe latched at its own start: a finished writer must not send again)
LOAD_WRITE_READ_STORE = [("io-load", 4, "tree-split"), ("io-write", 3, None), ("io-read", 3, None),
                         ("io-store", 3, "tree-split")]
WRITE_LOAD_READ_WRITE = [("io-write", 2, None), ("io-load", 3, "tree-xy"), ("io-read", 4, None), ("io-write", 3, None)]


def _nodes(rank: int, io_nodes):
    wafer = tuple(range(SPEC.mesh.npus))
    nodes, compute = [], [30 + 7 * rank, 20, 3, 11]
    for k, ((op, stripe, _), cycles) in enumerate(zip(io_nodes, compute)):
        nodes.append(TraceNode(id=2 * k, name=f"c{k}", kind="compute", duration_s=float(cycles),
                               deps=(2 * k - 1,) if k else ()))
        nodes.append(TraceNode(id=2 * k + 1, name=f"{op}{k}", kind="mem-read" if op in ("io-load", "io-read") else "mem-write",
                               op=op, size=float(stripe * SPEC.controllers), group=wafer, category="io",
                               deps=(2 * k,)))
    return nodes


def _run(run_fabric_top, io_nodes, *, cut=False, each_cycle=None):
    """The iteration of ``io_nodes`` on the top, or with ``cut`` on its two parts (the mesh cut
    between its columns, ``mesh_partition``) wired back to back (:class:`JoinedParts`)."""
    from hdl.designs.iteration.mesh_io_iteration_top import IO_NODE_REGS, IO_OPS_OF_NODE, MeshIoIterationTop
    from hdl.designs.iteration.mesh_io_iteration_top import IO_ITERATION_CONTROLLER_READ, IO_ITERATION_GLOBAL_READ
    from hdl.designs.mesh.mesh_io_harness import controller_unit
    ranks = {r: _nodes(r, io_nodes) for r in range(SPEC.mesh.npus)}
    traces = {r: npu_trace(r, n, cycle_s=1.0, max_collectives=8, io=True) for r, n in ranks.items()}
    requests = collective_requests(ranks, traces, flit_bytes=1, io_controllers=SPEC.controllers)
    assert [(q.op, q.stripe_flits) for q in requests] == [(op, s) for op, s, _ in io_nodes]
    programs = [{0: [(IO_NODE_REGS["op"], IO_OPS_OF_NODE.index(op)), (IO_NODE_REGS["stripe"], stripe),
                     (IO_NODE_REGS["mode"], 0 if mode is None else IO_MODES.index(mode))]}
                for op, stripe, mode in io_nodes]
    entries = loader_entries(programs, 1)
    writes = []
    for rank, trace in traces.items():
        writes += [(rank, reg, value) for reg, value in loader_writes(entries, 1, PROGRAMS)]
        writes += [(rank, reg, value) for reg, value in trace_writes(trace, DEPTH)]

    async def read_back(read, write):
        out = {"global": {n: await read(GLOBAL_UNIT, i) for i, n in enumerate(IO_ITERATION_GLOBAL_READ)},
               "controllers": [{n: await read(controller_unit(SPEC, k), i)
                                for i, n in enumerate(IO_ITERATION_CONTROLLER_READ)} for k in range(SPEC.controllers)],
               "npus": []}
        for rank, trace in traces.items():
            npu = {n: await read(rank, i) for i, n in enumerate(READ)}
            npu["times"] = []
            for node in range(len(trace.words)):
                await write(rank, TRACE_READ_ADDR, node)
                npu["times"].append((await read(rank, READ.index("node_start")),
                                     await read(rank, READ.index("node_end"))))
            out["npus"].append(npu)
        return out

    if cut:
        from hdl.contracts.mesh_partition import mesh_partition
        from hdl.designs.fabric.joined_parts import JoinedParts
        partition = mesh_partition(SPEC.mesh)
        dut = JoinedParts([MeshIoIterationTop(SPEC, depth=DEPTH, programs=PROGRAMS, max_stripe=MAX_STRIPE,
                                              partition=partition, part=p) for p in range(2)])
    else:
        dut = MeshIoIterationTop(SPEC, depth=DEPTH, programs=PROGRAMS, max_stripe=MAX_STRIPE)
    return run_fabric_top(dut, writes, read_back, max_cycles=4000, with_write=True, each_cycle=each_cycle), traces


@pytest.mark.parametrize("io_nodes", [LOAD_STORE_LOAD, pytest.param(STORE_LOAD_STORE, marks=pytest.mark.full),
                                      LOAD_WRITE_READ_STORE, pytest.param(WRITE_LOAD_READ_WRITE, marks=pytest.mark.full)],
                         ids=["load-store-load", "store-load-store", "load-write-read-store", "write-load-read-write"])
def test_io_collectives_start_together_end_together_and_every_flit_is_checked(run_fabric_top, io_nodes):
    out, traces = _run(run_fabric_top, io_nodes)
    g = out["global"]
    n = len(io_nodes)
    assert g["all_done"] and not g["protocol_error"] and not g["mismatch"]
    assert (g["load_errors"], g["spill_errors"], g["collectives"]) == (0, 0, n)
    # every controller received each io-store's flits, each the sum of every NPU's (checked)
    expect = [0] * SPEC.controllers
    for op, stripe, mode in io_nodes:
        if op == "io-store":
            expect = [a + b for a, b in zip(expect, io_store_program(SPEC, stripe, mode, max_stripe=MAX_STRIPE).expect)]
    assert [c["store_errors"] for c in out["controllers"]] == [0] * SPEC.controllers
    assert [c["store_received"] for c in out["controllers"]] == expect
    # every controller received one stripe of every NPU per io-write (each flit checked)
    written = sum(stripe * SPEC.mesh.npus for op, stripe, _ in io_nodes if op == "io-write")
    assert [c["spill_received"] for c in out["controllers"]] == [written] * SPEC.controllers
    npus = out["npus"]
    assert all(x["nodes_done"] == 2 * n and x["run_errors"] == 0 for x in npus)
    io_nodes_at = range(1, 2 * n, 2)
    for node in io_nodes_at:      # an I/O node: every NPU's ends in the same cycle
        assert len({x["times"][node][1] for x in npus}) == 1
    # the first I/O node starts for all when the last NPU (rank 3: 30 + 21 cycles of compute)
    # reaches it: the others wait in it
    assert [n["times"][1][0] for n in npus] == [30, 37, 44, 51]
    # each I/O node lasts at least its busiest link's stripes at 1/4 flit per cycle (a tree's),
    # or a controller link's stripe per NPU at 1/2 flit per cycle (a spill's)
    for node, (op, stripe, mode) in zip(io_nodes_at, io_nodes):
        start, end = npus[3]["times"][node]
        if mode is None:
            assert end - start >= SPEC.mesh.npus * stripe * 2
        else:
            assert end - start >= io_load_program(SPEC, stripe, mode).hottest * stripe * 4


def test_the_parts_of_a_cut_mesh_run_the_iteration_cycle_for_cycle(run_fabric_top, cut_checker):
    """The mesh cut between its columns for the lock-step simulator (``MeshIoIterationTop(
    partition=, part=)``: each part's routers, the NPUs and controllers at them; the collective
    split, NPU 0's I/O registers crossing to part 1 and part 1's bad-flit totals to part 0)
    wired back to back runs weights in, a checkpoint out and back and gradients out in the same
    cycles, node for node, as the whole top, every register read back equal, every flit
    checked; and in every cycle each part's ``cut_out`` stays the same when its ``cut_in``
    changes (the lock-step rule)."""
    from hdl.contracts.mesh_partition import mesh_partition
    partition = mesh_partition(SPEC.mesh)
    assert {partition.npu_part(SPEC.attach_rank(k)) for k in range(SPEC.controllers)} == {0, 1}
    whole, _ = _run(run_fabric_top, LOAD_WRITE_READ_STORE)
    each_cycle, seen = cut_checker(seed=3)
    joined, _ = _run(run_fabric_top, LOAD_WRITE_READ_STORE, cut=True, each_cycle=each_cycle)
    assert whole["global"]["all_done"] and not whole["global"]["mismatch"]
    assert joined == whole
    assert seen["cycles"] >= whole["global"]["cycles"] and seen["moved"] > 0


@pytest.mark.full
def test_the_verilated_iteration_runs_as_the_amaranth_one(run_fabric_top):
    """The same iteration (weights in, a checkpoint out and back, gradients out) under Verilator
    (cocotb_tests/iteration/mesh_io_run.py) on both simulators -- the lock-step one (the
    default: the mesh's two parts on two cores) and one model under cocotb -- takes the same
    cycles, node for node, as in Amaranth's simulator, every flit checked, the same
    controllers' counts and program-load waits."""
    from cocotb_tests.iteration.mesh_io_run import run_mesh_io_iteration
    from hdl.compiler.mesh_io_program import io_spill_program
    out, traces = _run(run_fabric_top, LOAD_WRITE_READ_STORE)
    ranks = {r: _nodes(r, LOAD_WRITE_READ_STORE) for r in range(SPEC.mesh.npus)}
    requests = collective_requests(ranks, traces, flit_bytes=1, io_controllers=SPEC.controllers)
    programs = [io_load_program(SPEC, s, m) if op == "io-load" else
                io_store_program(SPEC, s, m, max_stripe=MAX_STRIPE) if op == "io-store" else
                io_spill_program(SPEC, s, op) for op, s, m in LOAD_WRITE_READ_STORE]
    for simulator in ("lockstep", "cocotb"):
        run = run_mesh_io_iteration(SPEC, traces, requests, programs, watchdog_cycles=20_000, max_stripe=MAX_STRIPE,
                                    simulator=simulator)
        assert run.errors == [] and run.simulator == simulator
        assert run.cycles == out["global"]["cycles"]
        assert [[tuple(t) for t in run.node_times[r]] for r in range(SPEC.mesh.npus)] == [x["times"] for x in out["npus"]]
        assert run.flits_received == sum(c["store_received"] for c in out["controllers"])
        assert run.load_stall == {r: x["load_stall"] for r, x in enumerate(out["npus"])}


def test_a_bad_part_of_a_cut_mesh_is_refused_naming_it():
    """The cut top takes ``partition`` and ``part`` together, a part of its own mesh's
    partition only, each refusal naming what is wrong before anything is built."""
    from hdl.contracts.errors import FredError
    from hdl.contracts.mesh_partition import mesh_partition
    from hdl.designs.iteration.mesh_io_iteration_top import MeshIoIterationTop
    sizes = {"depth": DEPTH, "programs": PROGRAMS, "max_stripe": MAX_STRIPE}
    partition = mesh_partition(SPEC.mesh)
    with pytest.raises(FredError, match="both partition and part"):
        MeshIoIterationTop(SPEC, **sizes, partition=partition)
    with pytest.raises(FredError, match="not a part of this 2 x 2 mesh's partition"):
        MeshIoIterationTop(SPEC, **sizes, partition=partition, part=2)
    other = mesh_partition(MeshFabricSpec(rows=2, cols=3))
    with pytest.raises(FredError, match="not a part of this 2 x 2 mesh's partition"):
        MeshIoIterationTop(SPEC, **sizes, partition=other, part=0)
