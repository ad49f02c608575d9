"""The packet FRED fabric's I/O iteration in Amaranth's simulator
(hdl/designs/iteration/packet_io_iteration_top.py): a 6-NPU Fred-A with 3 controllers, every NPU's
trace compute, io-load, compute, longer io-load, compute; every controller run by the trace
(its engine program, header and stripe per collective from its loader); each io-load starts
for every NPU and controller together once the last NPU reached it and ends for all once every
NPU received every stripe (each flit checked) and every controller's memory side is empty
(docs/fabric_iteration.md, "The packet FRED fabric's I/O iteration")."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cocotb_tests.iteration.packet_io_loading import packet_io_entries, packet_io_programs, packet_io_writes
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.trace_program import collective_requests, npu_trace
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
from sysmodel.trace import TraceNode

#: a quarter flit per cycle per controller (the paper's 16/375 would only make the run longer)
SPEC = fabric_spec("fred-a", npus=6, npus_per_l1=2, io_controllers=3, io_rate=Fraction(1, 4))
#: the same on Fred-C (full-rate uplinks: 3 per L1, so its L1s are Fred_3(7) and the L2 three planes)
FRED_C = fabric_spec("fred-c", npus=6, npus_per_l1=2, io_controllers=3, io_rate=Fraction(1, 4))
NODES, PROGRAMS, CONTROLLER_PROGRAMS = 16, 128, 64
#: stripe flits of the two io-loads (every NPU receives 3 stripes of each)
STRIPES = (8, 12)
#: weights in, gradients out, weights in again (longer), gradients out (longer)
LOAD_STORE = (("io-load", 8), ("io-store", 8), ("io-load", 12), ("io-store", 12))


def _nodes(rank: int, stripes=STRIPES, spec=SPEC):
    """Compute of 30 + 7 rank cycles, then per I/O node (an op and its stripe flits, or an
    io-load's stripe flits) the node and a compute of 20 cycles (5 after the last)."""
    wafer = tuple(range(spec.npus))
    io = [s if isinstance(s, tuple) else ("io-load", s) for s in stripes]
    nodes, compute = [], [30 + 7 * rank] + [20] * (len(io) - 1) + [5]
    for k, (op, stripe) in enumerate(io):
        nodes.append(TraceNode(id=2 * k, name=f"c{k}", kind="compute", duration_s=float(compute[k]),
                               deps=(2 * k - 1,) if k else ()))
        nodes.append(TraceNode(id=2 * k + 1, name=f"{op}{k}", kind="mem-read" if op == "io-load" else "mem-write",
                               op=op, size=float(stripe * spec.io_controllers), group=wafer, category="io",
                               deps=(2 * k,)))
    n = 2 * len(io)
    nodes.append(TraceNode(id=n, name="end", kind="compute", duration_s=float(compute[-1]), deps=(n - 1,)))
    return nodes


def _case(stripes=STRIPES, spec=SPEC):
    ranks = {r: _nodes(r, stripes, spec) for r in range(spec.npus)}
    traces = {r: npu_trace(r, n, cycle_s=1.0, max_collectives=8, io=True) for r, n in ranks.items()}
    requests = collective_requests(ranks, traces, flit_bytes=1, io_controllers=spec.io_controllers)
    return traces, requests


def test_each_controller_loads_its_engine_header_and_stripe_per_collective():
    """Hand-checked: controller k's first program sets its stripe k, flow = its chain's entry
    NPU, and its engine's stage count last (deferred); the second changes only what differs
    (the stripe's flits and origin), nothing deferred. The NPUs' paged port keeps every write."""
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    traces, requests = _case()
    programs = packet_io_programs(SPEC, requests)
    assert [p.stripe_flits for p in programs] == list(STRIPES)
    packet = packet_iteration_format(SPEC, True, SPEC.io_controllers)
    npus, controllers = packet_io_entries(SPEC, programs, packet)
    from hdl.contracts.npu_engine import ENGINE_REGS
    from hdl.contracts.trace_program import CONTROLLER_STRIPE_REG, PACKET_HEADER_REGS
    stages = ENGINE_REGS.index("stages")
    for k, entries in controllers.items():
        last = [i for i, (flags, _) in enumerate(entries) if flags & 1]
        assert len(last) == 2
        first, second = entries[:last[0] + 1], entries[last[0] + 1:]
        writes = dict(w for _, (w,) in first if w is not None)
        # (a register left at its reset value 0 is not written: controller 0's stripe, NPU 0)
        assert writes.get(CONTROLLER_STRIPE_REG, 0) == k
        assert writes.get(PACKET_HEADER_REGS["flow"], 0) == programs[0].chains[k][0]
        assert first[-1] == (3, ((stages, 1),))       # last, deferred: the stage count
        assert all(flags & 2 == 0 for flags, _ in second)
        changed = {w[0] for _, (w,) in second if w is not None}
        assert CONTROLLER_STRIPE_REG not in changed and PACKET_HEADER_REGS["flow"] not in changed
    # an NPU's second program rewrites only what differs, each after its page: per stripe its
    # flits and origin (the receiver's ``flits`` and ``org``), never a route or the header
    from hdl.contracts.io_stripes import NPU_PAGE_REG, NPU_PAGE_SIZE, NPU_ROUTE_BASE, stripe_reg
    for r, entries in npus.items():
        last = [i for i, (flags, _) in enumerate(entries) if flags & 1]
        page, changed = None, set()
        for _, ((reg, value),) in entries[last[0] + 1:]:
            if reg == NPU_PAGE_REG:
                page = value
            else:
                changed.add(page * NPU_PAGE_SIZE + reg)
        assert changed and all(a < NPU_ROUTE_BASE for a in changed), (r, changed)
        assert changed <= {stripe_reg(k, n) for k in range(3) for n in ("flits", "org")}, (r, changed)


@pytest.mark.parametrize("op,match", [("io-write", "io-write is not built"), ("io-read", "io-read is not built")])
def test_ops_not_built_are_refused_by_name(op, match):
    traces, requests = _case()
    bad = [requests[0], type(requests[1])(op=op, groups=requests[1].groups, controllers=requests[1].controllers,
                                          stripe_flits=requests[1].stripe_flits, label="trace node 3")]
    with pytest.raises(FredError, match=match):
        packet_io_programs(SPEC, bad)


def test_in_switch_fabrics_are_refused_by_name():
    from hdl.designs.iteration import PacketIoIterationTop
    with pytest.raises(FredError, match="in-switch stripe trees"):
        PacketIoIterationTop(fabric_spec("fred-b", npus=6, npus_per_l1=2, io_controllers=3), nodes=4, programs=8,
                             controller_programs=8)
    with pytest.raises(FredError, match="no I/O controllers"):
        PacketIoIterationTop(fabric_spec("fred-a", npus=6, npus_per_l1=2), nodes=4, programs=8, controller_programs=8)


def test_a_bad_part_of_a_cut_fabric_is_refused_naming_it():
    """The cut top takes ``partition`` and ``part`` together (PacketFabricTop's checks, before
    anything is built); anything else it does not take is named."""
    from hdl.contracts.fabric_partition import fabric_partition
    from hdl.designs.iteration import PacketIoIterationTop
    sizes = {"nodes": 4, "programs": 8, "controller_programs": 8}
    with pytest.raises(FredError, match="both partition and part"):
        PacketIoIterationTop(SPEC, **sizes, partition=fabric_partition(SPEC))
    with pytest.raises(FredError, match="part must be in 0..1"):
        PacketIoIterationTop(SPEC, **sizes, partition=fabric_partition(SPEC), part=2)
    with pytest.raises(FredError, match="takes no online"):
        PacketIoIterationTop(SPEC, **sizes, online=False)


def _prefetched(rank: int, spec=SPEC):
    """Compute of 30 + 7 rank cycles, an io-load of 8-flit stripes after it, a second of 12
    prefetched after the first (it waits for no compute), 20 cycles of compute after the
    first load, 5 after the second and that compute: the overlapped trace of weight streaming."""
    wafer = tuple(range(spec.npus))

    def load(i, stripe, deps):
        return TraceNode(id=i, name=f"load{i}", kind="mem-read", op="io-load", size=float(stripe * spec.io_controllers),
                         group=wafer, category="io", deps=deps, queue="io.in")
    return [TraceNode(id=0, name="c0", kind="compute", duration_s=float(30 + 7 * rank), queue="c"),
            load(1, STRIPES[0], (0,)), load(2, STRIPES[1], (1,)),
            TraceNode(id=3, name="c1", kind="compute", duration_s=20.0, deps=(1, 0), queue="c"),
            TraceNode(id=4, name="c2", kind="compute", duration_s=5.0, deps=(3, 2), queue="c")]


def _run(run_fabric_top, read_trace_npus, stripes=STRIPES, max_cycles=3000, spec=SPEC, overlap=False,
         cut=False, each_cycle=None):
    """The iteration of ``_case`` (``overlap``: ``_prefetched``) on the top, or with ``cut`` on
    its two parts (``fabric_partition``) wired back to back (:class:`JoinedParts`)."""
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    from hdl.contracts.fabric_partition import fabric_partition
    from hdl.designs.fabric.joined_parts import JoinedParts
    from hdl.designs.iteration import PacketIoIterationTop, StripeTraceNpu
    from hdl.designs.iteration.traced_io_controller import CONTROLLER_READ
    if overlap:
        ranks = {r: _prefetched(r, spec) for r in range(spec.npus)}
        traces = {r: npu_trace(r, n, cycle_s=1.0, max_collectives=8, io=True, overlap=True) for r, n in ranks.items()}
        requests = collective_requests(ranks, traces, flit_bytes=1, io_controllers=spec.io_controllers)
    else:
        traces, requests = _case(stripes, spec)
    programs = packet_io_programs(spec, requests)
    def top(**part):
        return PacketIoIterationTop(spec, nodes=NODES, programs=PROGRAMS, controller_programs=CONTROLLER_PROGRAMS,
                                    overlap=overlap, **part)
    if cut:
        partition = fabric_partition(spec)
        parts = [top(partition=partition, part=p) for p in range(2)]
        dut, packet = JoinedParts(parts), parts[0].packet
    else:
        dut = top()
        packet = dut.packet
    assert packet == packet_iteration_format(spec, True, spec.io_controllers)   # the loader's format
    writes = packet_io_writes(spec, traces, programs, packet, nodes=NODES, npu_programs=PROGRAMS,
                              controller_programs=CONTROLLER_PROGRAMS)
    names = StripeTraceNpu.read_names

    async def read_back(read, write):
        out = {"cycles": await read(GLOBAL_UNIT, 0), "all_done": await read(GLOBAL_UNIT, 1), "npus": [],
               "controllers": [{n: await read(spec.npus + k, i) for i, n in enumerate(CONTROLLER_READ)}
                               for k in range(spec.io_controllers)]}
        out["npus"] = await read_trace_npus(read, write, {rank: len(t.words) for rank, t in traces.items()}, names)
        return out

    return run_fabric_top(dut, writes, read_back, max_cycles=max_cycles, with_write=True,
                          each_cycle=each_cycle), programs


@pytest.mark.parametrize("spec", [SPEC, pytest.param(FRED_C, marks=pytest.mark.full)], ids=["fred-a", "fred-c"])
def test_io_loads_start_together_end_together_and_every_flit_is_checked(run_fabric_top, read_trace_npus, spec):
    """(Fred-C measured 2026-11-27 08:08 UTC: 426 cycles, the io-loads 65-236 and 256-421.)"""
    out, programs = _run(run_fabric_top, read_trace_npus, spec=spec)
    assert out["all_done"]
    npus, ctrls = out["npus"], out["controllers"]
    for x in npus:
        # 5 nodes, no bad flit, sequence or link error in either run; the last run's 36 flits
        assert (x["nodes_done"], x["run_errors"], x["received"]) == (5, 0, 3 * STRIPES[-1]), x
    for k, c in enumerate(ctrls):
        assert (c["done"], c["runs"], c["run_errors"], c["link_errors"], c["sent"]) == (1, 2, 0, 0, STRIPES[-1]), (k, c)
    # the first io-load starts for all when the last NPU (rank 5: 30 + 35 cycles) reaches it
    assert [x["times"][1][0] for x in npus] == [30 + 7 * r for r in range(spec.npus)]
    for node, stripe in zip((1, 3), STRIPES):
        ends = {x["times"][node][1] for x in npus}
        assert len(ends) == 1            # ends for every NPU in the same cycle
        start = npus[-1]["times"][node][0]
        # the controllers bound it: a stripe's flits at a quarter flit per cycle, whole
        # packets, then down the chain of 6 NPUs; 1 + 1 cycles of the wafer's start and end
        assert ends.pop() - start >= stripe * 4 + 2
    # the second io-load starts 20 compute cycles (and the node's end cycle) after the first ends
    assert npus[0]["times"][3][0] == npus[0]["times"][1][1] + 20


def test_the_parts_of_a_cut_fabric_run_the_iteration_cycle_for_cycle(run_fabric_top, read_trace_npus, cut_checker):
    """The fabric cut in two for the lock-step simulator (``PacketIoIterationTop(partition=,
    part=)``: its L1s, their NPUs and controllers in two parts; the wafer's collective split,
    each part's "every NPU arrived", "every controller ready" and "every unit done" crossing the
    cut) wired back to back runs weights in, gradients out, weights in and gradients out in the
    same cycles, node for node, as the whole top, every flit checked; and in every cycle each
    part's ``cut_out`` stays the same when its ``cut_in`` changes (the lock-step rule)."""
    from hdl.contracts.fabric_partition import fabric_partition
    partition = fabric_partition(SPEC)
    assert {partition.parts[j] for j in range(SPEC.l1_count)} == {0, 1}   # NPUs and controllers on both sides
    whole, _ = _run(run_fabric_top, read_trace_npus, LOAD_STORE, max_cycles=6000)
    each_cycle, seen = cut_checker(seed=2)
    joined, _ = _run(run_fabric_top, read_trace_npus, LOAD_STORE, max_cycles=6000, cut=True, each_cycle=each_cycle)
    assert whole["all_done"] and joined["all_done"]
    assert joined == whole
    assert [x["run_errors"] for x in whole["npus"]] == [0] * SPEC.npus
    assert seen["cycles"] >= whole["cycles"] and seen["moved"] > 0


@pytest.mark.full
@pytest.mark.parametrize("stripes", [STRIPES, LOAD_STORE], ids=["load-load", "load-store-load-store"])
def test_the_verilated_iteration_runs_as_the_amaranth_one(run_fabric_top, read_trace_npus, stripes):
    """The same iterations under Verilator (cocotb_tests/iteration/packet_io_run.py: the
    Verilog top, the cocotb bench's load, start and reads) take the same cycles, node for
    node, as in Amaranth's simulator, every flit checked; the last run's flits: every NPU's
    stripes of the last io-load (36 each), or of the last io-store (2 or 3 stripes of 12, the
    controllers sending nothing). On both simulators: the lock-step one (the default: the two
    parts on two cores, every word through the program port) and one model under cocotb (the
    memories' words written through VPI)."""
    from cocotb_tests.iteration.packet_io_run import run_packet_io_iteration
    out, programs = _run(run_fabric_top, read_trace_npus, stripes, max_cycles=6000)
    traces, _ = _case(stripes)
    for simulator in ("lockstep", "cocotb"):
        run = run_packet_io_iteration(SPEC, traces, programs, watchdog_cycles=20_000, simulator=simulator)
        assert run.errors == [] and run.simulator == simulator
        assert run.cycles == out["cycles"]
        assert [[tuple(t) for t in run.node_times[r]] for r in range(SPEC.npus)] == [x["times"] for x in out["npus"]]
        assert run.flits_received == sum(x["received"] for x in out["npus"])
        assert run.flits_sent == sum(c["sent"] for c in out["controllers"])
        assert run.load_stall == {r: x["load_stall"] for r, x in enumerate(out["npus"])}


def test_weights_in_and_gradients_out_alternate_each_flit_checked(run_fabric_top, read_trace_npus):
    """io-load, io-store, longer io-load, longer io-store: in each io-store every NPU adds its
    own data to each stripe it forwards along the chains (reversed) and the entry NPU sends
    the sum to its controller, whose engine checks the sum of all 6 NPUs' data; each NPU's
    receiver checks the partial sums. In an io-store NPU r receives every stripe but the one
    it starts (the last of a chain in the load's order: NPUs 5, 2, 3 start one each), so the
    last run's count is 2 or 3 stripes of 12."""
    out, programs = _run(run_fabric_top, read_trace_npus, LOAD_STORE, max_cycles=6000)
    assert out["all_done"]
    starts = {c[-1] for c in programs[1].chains}
    assert starts == {5, 2, 3}
    for r, x in enumerate(out["npus"]):
        assert (x["nodes_done"], x["run_errors"]) == (9, 0), (r, x)
        assert x["received"] == 12 * (2 if r in starts else 3), (r, x)
    for k, c in enumerate(out["controllers"]):
        # the last run received its 12-flit stripe (sent nothing), every run's check clean
        assert (c["done"], c["runs"], c["run_errors"], c["link_errors"], c["sent"]) == (1, 4, 0, 0, 0), (k, c)
    for node in (1, 3, 5, 7):
        assert len({x["times"][node][1] for x in out["npus"]}) == 1
    # an io-store lasts at least its stripe's time into the controller (1/4 flit per cycle)
    for node, (_, stripe) in zip((3, 7), LOAD_STORE[1::2]):
        start, end = out["npus"][-1]["times"][node]
        assert end - start >= stripe * 4


def test_the_bulk_load_stores_what_the_program_port_would():
    """``packet_io_bulk`` (hand-made writes: NPU 0's loader of two entries and trace of two
    nodes, controller 0's loader of one entry, on the 6-NPU fabric): the words a ProgramLoader
    stores (head | value << 9 at its fill counter) and a TraceSequencer's table, and the
    registers left: each fill counter set once to its count, then the other writes in order."""
    from cocotb_tests.iteration.packet_io_loading import packet_io_bulk
    from hdl.contracts.trace_program import (PROG_ADDR, PROG_HEAD, PROG_VALUE, TRACE_NODES, TRACE_TABLE_ADDR,
                                             TRACE_TABLE_DATA)
    io0 = SPEC.npus
    writes = [(0, PROG_ADDR, 0), (0, PROG_HEAD, 0x1FF), (0, PROG_VALUE, 7), (0, PROG_HEAD, 0x3), (0, PROG_VALUE, 9),
              (0, TRACE_TABLE_ADDR, 0), (0, TRACE_TABLE_DATA, 30), (0, TRACE_TABLE_DATA, 1 << 31),
              (0, TRACE_NODES, 2), (io0, PROG_ADDR, 0), (io0, PROG_HEAD, 0x201), (io0, PROG_VALUE, 0xFFFFFFFF)]
    memories, rest = packet_io_bulk(SPEC, writes)
    assert memories == [("npu_0.sequencer.loader.entries", {0: 0x1FF | 7 << 9, 1: 0x3 | 9 << 9}),
                        ("npu_0.sequencer.table", {0: 30, 1: 1 << 31}),
                        # the head register is 9 bits wide: 0x201 keeps 0x001
                        ("io_0.loader.entries", {0: 0x001 | 0xFFFFFFFF << 9})]
    assert rest == [(0, PROG_ADDR, 2), (0, TRACE_TABLE_ADDR, 2), (io0, PROG_ADDR, 1), (0, TRACE_NODES, 2)]


@pytest.mark.full
def test_an_overlapped_trace_prefetches_the_next_io_load_under_the_compute(run_fabric_top, read_trace_npus):
    """The overlapped sequencers (docs/fabric_iteration.md, "Overlap"): the second io-load,
    issued with the first, starts for every NPU in the cycle after the first ends, and the 20
    cycles of compute that wait only for the first run under it; a wait node holds the last
    compute until the second has ended; every flit checked. (``full``: about a minute of the
    Amaranth simulator; the sequencer's own cycles are the default suite's,
    tests/hdl/designs/iteration/test_trace_sequencer.py.)"""
    out, _ = _run(run_fabric_top, read_trace_npus, overlap=True)
    assert out["all_done"]
    npus = out["npus"]
    # issue order: c0, load1, load2, wait for 1, c1, wait for 2, c2
    for r, x in enumerate(npus):
        assert (x["nodes_done"], x["run_errors"], x["received"]) == (7, 0, 3 * STRIPES[1]), (r, x)
        assert x["times"][1][0] == 30 + 7 * r + 1        # the lane takes load 1 in its issue cycle
    for k, c in enumerate(out["controllers"]):
        assert (c["done"], c["runs"], c["run_errors"], c["link_errors"], c["sent"]) == (1, 2, 0, 0, STRIPES[1]), (k, c)
    first = {x["times"][1][1] for x in npus}
    second = {x["times"][2][1] for x in npus}
    assert len(first) == len(second) == 1                 # each ends for every NPU at once
    e0, e1 = first.pop(), second.pop()
    for x in npus:
        assert x["times"][2][0] == e0 + 1                 # queued, taken after load 1's last cycle
        assert x["times"][3] == (e0 - 1, e0)              # the wait node: load 1's last cycle
        assert x["times"][4] == (e0, e0 + 20)             # c1 under load 2
        assert x["times"][5] == (e1 - 1, e1) and x["times"][6] == (e1, e1 + 5)
    assert e1 - (e0 + 1) >= STRIPES[1] * 4 + 2 > 20       # load 2 outlasts the compute under it
    assert out["cycles"] == e1 + 5
