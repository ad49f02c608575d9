"""The iteration trace as the circuit fabric's trace sequencer runs it (hdl/contracts/trace_program.py):
node words, rounding, what is refused, the collective's request; overlapped traces (issue order,
wait nodes, passed markers). Pure Python."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import (COLLECTIVE_BIT, TRACE_NODES, TRACE_TABLE_ADDR, TRACE_TABLE_DATA, WAIT_BIT,
                                         collective_request, collective_requests, npu_trace, trace_writes)
from sysmodel.trace import TraceNode

NS = 1e-9


def _chain(rank_group=(0, 1, 2, 3), size=2048.0, op="all-reduce"):
    return [TraceNode(0, "f", "compute", duration_s=10.4 * NS, queue="c"),
            TraceNode(1, "g", "compute", duration_s=10.4 * NS, deps=(0,), queue="c"),
            TraceNode(2, "b", "compute", duration_s=0.3 * NS, queue="c"),      # queue order only
            TraceNode(3, "dp", "comm", op=op, fred_op=op, size=size, deps=(2,), group=rank_group,
                      category="dp", queue="dp"),
            TraceNode(4, "opt", "compute", duration_s=5.0 * NS, deps=(3,), queue="c")]


def test_words_round_on_the_running_sum_and_mark_the_collective():
    trace = npu_trace(0, _chain(), cycle_s=NS)
    # ends at 10.4 -> 10, 20.8 -> 21, 21.1 -> 21 (0 cycles: the sequencer still takes 1), 26.1 -> 26
    assert trace.words == (10, 11, 0, COLLECTIVE_BIT, 5)
    assert trace.collective == 3 and trace.categories == ("compute",) * 3 + ("dp", "compute")
    assert trace.compute_cycles == 10 + 11 + 1 + 5
    assert trace_writes(trace, 8) == [(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in trace.words],
                                      (TRACE_NODES, 5)]
    with pytest.raises(FredError, match="5 nodes do not fit the sequencer's node memory of 4"):
        trace_writes(trace, 4)


def test_overlap_pipeline_receives_and_second_collectives_are_refused():
    nodes = _chain()
    # the optimizer on its own queue without a dependency may run under the all-reduce
    overlapping = nodes[:4] + [TraceNode(4, "opt", "compute", duration_s=NS, queue="other")]
    with pytest.raises(FredError, match="node 4 .opt. does not wait for node 3 .dp.: the two may overlap"):
        npu_trace(0, overlapping, cycle_s=NS)
    with pytest.raises(FredError, match="a pipeline stage's receive"):
        npu_trace(0, nodes[:1] + [TraceNode(1, "r", "recv", peer=1, deps=(0,))], cycle_s=NS)
    twice = nodes + [TraceNode(5, "dp2", "comm", op="all-reduce", size=1.0, deps=(4,), group=(0, 1))]
    with pytest.raises(FredError, match="rank 0 has 2 collective nodes"):
        npu_trace(0, twice, cycle_s=NS)
    with pytest.raises(FredError, match="repeats its collective 2 times; this fabric.s trace sequencer runs 1..1 "):
        npu_trace(0, [TraceNode(0, "mp", "comm", op="all-reduce", size=1.0, repeat=2.0, group=(0, 1))],
                  cycle_s=NS)
    with pytest.raises(FredError, match="is a all-to-all; the fabric's engines run"):
        npu_trace(0, [TraceNode(0, "a2a", "comm", op="all-to-all", size=1.0, group=(0, 1))], cycle_s=NS)
    with pytest.raises(FredError, match="depends on node 7, which is not before it"):
        npu_trace(0, [TraceNode(0, "x", "compute", duration_s=NS, deps=(7,))], cycle_s=NS)


def test_collective_request_unites_the_ranks_groups_in_whole_flits():
    ranks = {r: _chain(rank_group=(0, 1) if r < 2 else (2, 3), size=1025.0) for r in range(4)}
    traces = {r: npu_trace(r, nodes, cycle_s=NS) for r, nodes in ranks.items()}
    request = collective_request(ranks, traces, flit_bytes=512)
    assert request.op == "all-reduce" and request.size_flits == 3          # ceil(1025 / 512)
    assert [c.members for c in request.collectives] == [(0, 1), (2, 3)]
    assert all(c.root is None for c in request.collectives)
    bad = dict(ranks)
    bad[3] = _chain(rank_group=(1, 3), size=1025.0)
    traces[3] = npu_trace(3, bad[3], cycle_s=NS)
    with pytest.raises(FredError, match="groups overlap"):
        collective_request(bad, traces, flit_bytes=512)
    assert collective_request({0: _chain()[:3]}, {0: npu_trace(0, _chain()[:3], cycle_s=NS)},
                              flit_bytes=512) is None


def test_several_collectives_repeats_and_their_requests_in_order():
    from hdl.contracts.trace_program import collective_requests
    nodes = _chain()
    mp = TraceNode(5, "mp", "comm", op="all-reduce", fred_op="all-reduce", size=1024.0, deps=(4,),
                   group=(0, 1, 2, 3), category="mp", queue="mp", repeat=2)
    traces = {r: npu_trace(r, nodes + [mp], cycle_s=NS, max_collectives=8) for r in range(4)}
    assert traces[0].collectives == (3, 5) and traces[0].words[-1] == COLLECTIVE_BIT | 2
    requests = collective_requests({r: nodes + [mp] for r in range(4)}, traces, flit_bytes=512)
    # a repeated node's size is its bytes x repeat (sysmodel.iteration_export): one run is half
    assert [(r.op, r.size_flits) for r in requests] == [("all-reduce", 4), ("all-reduce", 1)]


def test_loader_entries_keep_only_changed_registers_and_defer_the_named_ones():
    from hdl.contracts.trace_program import PROG_ADDR, PROG_HEAD, PROG_VALUE, loader_entries, loader_writes
    first = {0: [(1, 5), (2, 0), (9, 3)], 1: [(1, 6)]}     # reg 2 = 0 is already 0 (reset)
    entries = loader_entries([first, first, {0: [(1, 7)], 1: [(9, 4)]}], 2, deferred=frozenset({9}))
    assert entries == [(0, ((1, 5), (1, 6))), (3, ((9, 3), None)),   # lanes paired; deferred last
                       (1, (None, None)),                           # a repeat loads nothing
                       (0, ((1, 7), None)), (3, (None, (9, 4)))]
    writes = loader_writes(entries[:1], 2, 4)
    assert writes == [(PROG_ADDR, 0), (PROG_HEAD, (1 | 1 << 1) << 2 | (1 | 1 << 1) << 9),
                      (PROG_VALUE, 5), (PROG_VALUE, 6)]
    with pytest.raises(FredError, match="5 program entries do not fit the loader's memory of 4"):
        loader_writes(entries, 2, 4)
    with pytest.raises(FredError, match="lanes \\[2\\] outside 0..1"):
        loader_entries([{2: [(1, 1)]}], 2)


def test_io_nodes_are_collective_nodes_with_whole_stripes_per_controller():
    """An exported trace's I/O memory nodes run as collective nodes where the fabric has I/O
    controllers: an io-load of 145 flits per NPU over 18 controllers is ceil(145 / 18) = 9
    flits per controller (162 per NPU, whole stripes); an io-read repeated 8 times (every
    microbatch's checkpoint) is one request of its bytes / 8 and a word of 8 runs; without
    controllers the same trace is refused by name."""
    flit = 64
    wafer = tuple(range(20))
    nodes = [TraceNode(id=0, name="load F block1", kind="mem-read", op="io-load", size=144 * flit + 1,
                       group=wafer, category="io", queue="s0.io.in"),
             TraceNode(id=1, name="F0 block1", kind="compute", duration_s=3e-9, deps=(0,), queue="s0.compute"),
             TraceNode(id=2, name="unspill block1", kind="mem-read", op="io-read", size=8 * 18 * 2 * flit,
                       group=wafer, repeat=8, category="io", deps=(1,), queue="s0.io.in"),
             TraceNode(id=3, name="store block1", kind="mem-write", op="io-store", size=flit,
                       group=wafer, category="io", deps=(2,), queue="s0.io.out")]
    ranks = {r: nodes for r in wafer}
    traces = {r: npu_trace(r, nodes, cycle_s=1e-9, max_collectives=8, io=True) for r in wafer}
    assert traces[0].words == (COLLECTIVE_BIT, 3, COLLECTIVE_BIT | 8, COLLECTIVE_BIT)
    assert traces[0].categories == ("io", "compute", "io", "io") and traces[0].collectives == (0, 2, 3)
    load, read, store = collective_requests(ranks, traces, flit_bytes=flit, io_controllers=18)
    assert (load.op, load.groups, load.stripe_flits, load.size_flits) == ("io-load", (wafer,), 9, 162)
    assert (read.op, read.stripe_flits, read.size_flits) == ("io-read", 2, 36)
    assert (store.op, store.stripe_flits, store.size_flits) == ("io-store", 1, 18)   # 1 flit -> a whole stripe
    with pytest.raises(FredError, match="is a mem-read node; the trace sequencer runs .* no I/O controllers"):
        npu_trace(0, nodes, cycle_s=1e-9, max_collectives=8)
    with pytest.raises(FredError, match="I/O collective; the fabric has no I/O controllers"):
        collective_requests(ranks, traces, flit_bytes=flit)


def _streamed(group=(0, 1)):
    """Weight streaming, as the model exports it overlapped with one collective at a time: the
    loads chained on one queue, each after the compute that frees its slot; a marker of the
    I/O class (a layer without weights) on the load queue."""
    def load(i, name, deps):
        return TraceNode(i, name, "comm", op="all-reduce", fred_op="all-reduce", size=64.0, deps=deps,
                         group=group, category="io", queue="io.in")
    return [load(0, "load a", ()),
            load(1, "load b", (0,)),                                   # prefetched: only after load a
            TraceNode(2, "a", "compute", duration_s=3 * NS, deps=(0,), queue="c"),
            load(3, "load c", (1, 2)),                                 # a's slot freed
            TraceNode(4, "head", "marker", deps=(3,), category="io", queue="io.in"),
            TraceNode(5, "b", "compute", duration_s=4 * NS, deps=(1, 2), queue="c"),
            TraceNode(6, "c", "compute", duration_s=2 * NS, deps=(4, 5), queue="c")]


def test_an_overlapped_trace_issues_collectives_early_and_waits_only_for_what_it_needs():
    trace = npu_trace(0, _streamed(), cycle_s=NS, max_collectives=8, overlap=True)
    # loads a and b issued at once; compute a waits for 1 finished collective (load a), b for 2
    # (load b, after a); load c issued after a; c waits for load c through the marker (passed)
    assert trace.names == ("load a", "load b", "wait", "a", "load c", "wait", "b", "wait", "c")
    assert trace.words == (COLLECTIVE_BIT, COLLECTIVE_BIT, WAIT_BIT | 1, 3, COLLECTIVE_BIT, WAIT_BIT | 2, 4,
                           WAIT_BIT | 3, 2)
    assert trace.node_ids == (0, 1, -1, 2, 3, -1, 5, -1, 6)
    assert trace.categories == ("io", "io", "wait", "compute", "io", "wait", "compute", "wait", "compute")
    assert trace.collectives == (0, 1, 3) and trace.overlap and trace.compute_cycles == 3 + 4 + 2
    # serialised, the same file is refused: load b does not wait for a
    with pytest.raises(FredError, match="node 2 .a. does not wait for node 1 .load b.: the two may overlap"):
        npu_trace(0, _streamed(), cycle_s=NS, max_collectives=8)


def test_an_overlapped_trace_runs_one_node_per_lane_at_a_time():
    nodes = _streamed()
    # a second compute queue: b no longer waits for a
    two = nodes[:5] + [TraceNode(5, "b", "compute", duration_s=4 * NS, deps=(1,), queue="c2"), nodes[6]]
    with pytest.raises(FredError, match="node 5 .b. does not wait for node 2 .a.: two compute nodes may overlap"):
        npu_trace(0, two, cycle_s=NS, max_collectives=8, overlap=True)
    # load c on another queue: it no longer waits for load b
    loose = nodes[:3] + [TraceNode(3, "load c", "comm", op="all-reduce", size=64.0, deps=(2,), group=(0, 1),
                                   category="io", queue="io.other")] + nodes[4:]
    with pytest.raises(FredError, match="node 3 .load c. does not wait for node 1 .load b.: two collective nodes"):
        npu_trace(0, loose, cycle_s=NS, max_collectives=8, overlap=True)
    with pytest.raises(FredError, match="lasts 1073741824 cycles; the sequencer counts 0..1073741823"):
        npu_trace(0, [TraceNode(0, "x", "compute", duration_s=(1 << 30) * NS)], cycle_s=NS, overlap=True)
