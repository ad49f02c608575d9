"""``TraceSequencer``: runs one NPU's serialised iteration trace (docs/fabric_iteration.md)."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Component, In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import (COLLECTIVE_BIT, DELAY_MASK, OVERLAP_DELAY_MASK, TRACE_NODES, TRACE_READ,
                                         TRACE_READ_ADDR, TRACE_TABLE_ADDR, TRACE_TABLE_DATA, WAIT_BIT)

__all__ = ["TraceSequencer"]


class TraceSequencer(Component):
    """Walks a node memory of ``depth`` words (:mod:`hdl.contracts.trace_program`) one node at a
    time, in order, and records each node's start and end cycle.

    Members: ``start`` (In, pulse: cycle counter and node index clear, node 0 starts in the next
    cycle), ``we``/``waddr``/``wdata`` (In: the program port; registers
    ``TRACE_TABLE_ADDR``, ``TRACE_TABLE_DATA``, ``TRACE_NODES``, ``TRACE_READ_ADDR``; other
    addresses are ignored), ``engine_start`` (Out, one-cycle pulse to the NPU engine),
    ``engine_done`` (In, the engine's ``done``), ``engine_running`` (Out: the engine was
    started on the current collective node and its done not yet seen -- from the cycle after
    ``engine_start`` to the cycle ``engine_done`` is seen, both included), ``done`` (Out: every node finished, or no
    nodes), ``nodes_done``, ``node_start``/``node_end`` (Out: the cycles of node
    ``TRACE_READ_ADDR``, combinational from the time memories).

    Cycles count from 0 in the cycle after ``start``. A compute node of ``d`` cycles that starts
    in cycle ``t`` ends at ``t + max(d, 1)``, when the next node starts: no cycle is lost between
    nodes. A collective node pulses ``engine_start`` in its first cycle (the engine clears its
    counters and runs from the next), then waits until ``engine_done``; its end is the cycle
    after the one in which ``done`` is seen. The engine's ``done`` is low before its first
    start, so the first collective cannot see a stale one; the contract allows one collective
    per run (a second would restart the same program).

    ``read_names``: its read registers (:data:`TRACE_READ`), for a fabric top that gives the
    sequencer a read unit of its own (the mesh's, ``MeshFabricTop(..., sequencer=...)``).

    ``overlap`` (default False: built as above): compute runs under collectives. The node
    memory is walked by two lanes (``hdl.contracts.trace_program``, "Overlapped traces"): the
    *node lane* runs the compute nodes as above and *issues* each collective node in one cycle,
    and the *collective lane* runs the issued collectives one after the other (the engine
    handshake above), recording their start and end cycles and counting them as they finish:
    an idle lane takes a collective in its issue cycle and starts it in the next; else the
    collective's index waits in a queue of ``issue_depth`` entries (the node lane waits only
    when it is full) and the lane takes it in the cycle after its last one ended, starting it
    in the next. A *wait node* (a word with :data:`WAIT_BIT` and without
    :data:`COLLECTIVE_BIT`) holds the node lane until that count, with a collective ending in
    this cycle included, reaches the word's low 30 bits (:data:`OVERLAP_DELAY_MASK`), and takes
    that one cycle; a compute node's cycles are the same low 30 bits. So a collective the next
    compute node waits for costs one cycle more than in the serialised sequencer (the issue). ``done``: both
    lanes finished; ``nodes_done``: the nodes the node lane has passed.
    """

    read_names = TRACE_READ

    def __init__(self, *, depth: int, overlap: bool = False, issue_depth: int = 64):
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1 << 16:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"trace sequencer depth must be an integer in 1..65536 nodes, got {depth!r}")
        if not isinstance(overlap, bool):
            self._MustUse__silence = True
            raise FredError(f"trace sequencer overlap must be True or False, got {overlap!r}")
        if isinstance(issue_depth, bool) or not isinstance(issue_depth, int) or not 1 <= issue_depth <= 1 << 16:
            self._MustUse__silence = True
            raise FredError(f"trace sequencer issue_depth must be an integer in 1..65536 collectives, "
                            f"got {issue_depth!r}")
        self.depth, self.overlap, self.issue_depth = depth, overlap, issue_depth
        super().__init__({
            "start": In(1),
            "we": In(1), "waddr": In(6), "wdata": In(32),
            "engine_start": Out(1), "engine_done": In(1), "engine_running": Out(1),
            "done": Out(1), "nodes_done": Out(32), "node_start": Out(32), "node_end": Out(32),
            **self._extra_members(),
        })

    def _extra_members(self) -> dict:
        """Members a subclass adds to the signature."""
        return {}

    def elaborate(self, platform) -> Module:
        m = Module()
        depth = self.depth
        table = m.submodules.table = Memory(shape=unsigned(32), depth=depth, init=[])
        starts = m.submodules.starts = Memory(shape=unsigned(32), depth=depth, init=[])
        ends = m.submodules.ends = Memory(shape=unsigned(32), depth=depth, init=[])
        load = table.write_port()
        node = table.read_port(domain="comb")
        write_start, write_end = starts.write_port(), ends.write_port()
        read_start, read_end = starts.read_port(domain="comb"), ends.read_port(domain="comb")

        fill, nodes, read_addr = Signal(range(depth + 1)), Signal(range(depth + 1)), Signal(range(depth))
        with m.If(self.we):
            with m.Switch(self.waddr):
                with m.Case(TRACE_TABLE_ADDR):
                    m.d.sync += fill.eq(self.wdata)
                with m.Case(TRACE_TABLE_DATA):
                    m.d.sync += fill.eq(fill + 1)
                with m.Case(TRACE_NODES):
                    m.d.sync += nodes.eq(self.wdata)
                with m.Case(TRACE_READ_ADDR):
                    m.d.sync += read_addr.eq(self.wdata)
        m.d.comb += [load.addr.eq(fill), load.data.eq(self.wdata),
                     load.en.eq(self.we & (self.waddr == TRACE_TABLE_DATA)),
                     read_start.addr.eq(read_addr), read_end.addr.eq(read_addr),
                     self.node_start.eq(read_start.data), self.node_end.eq(read_end.data)]

        if self.overlap:
            self._two_lanes(m, table, starts, ends, nodes)
            return m
        pc = Signal(range(depth + 1))
        now, begin, count = Signal(32), Signal(32), Signal(32)
        running = Signal()
        word = node.data
        collective = (word & COLLECTIVE_BIT) != 0
        delay = word & DELAY_MASK
        # a compute node's last cycle (a 0-cycle node still takes one), or the engine seen done
        finish = Signal()
        collective_done = self._collective(m, running, collective, count, word)
        m.d.comb += [node.addr.eq(pc),
                     finish.eq(running & (collective_done
                                          | ~collective & (count + 1 >= delay))),
                     self.done.eq(~running & (pc == nodes)),
                     self.nodes_done.eq(pc),
                     write_start.addr.eq(pc), write_start.data.eq(begin), write_start.en.eq(finish),
                     write_end.addr.eq(pc), write_end.data.eq(now + 1), write_end.en.eq(finish)]
        with m.If(self.start):
            m.d.sync += [pc.eq(0), now.eq(0), begin.eq(0), count.eq(0), running.eq(nodes != 0)]
        with m.Elif(running):
            m.d.sync += now.eq(now + 1)
            with m.If(finish):
                m.d.sync += [pc.eq(pc + 1), begin.eq(now + 1), count.eq(0),
                             running.eq(pc + 1 != nodes)]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        return m

    def _two_lanes(self, m, table, starts, ends, nodes) -> None:
        """``overlap``'s node lane and collective lane (the class docstring)."""
        depth = self.depth
        node, lane_node = table.read_port(domain="comb"), table.read_port(domain="comb")
        write_start, write_end = starts.write_port(), ends.write_port()
        lane_start, lane_end = starts.write_port(), ends.write_port()
        issued = m.submodules.issued = SyncFIFO(width=max(1, (depth - 1).bit_length()), depth=self.issue_depth)

        pc = Signal(range(depth + 1))
        now, begin, count = Signal(32), Signal(32), Signal(32)
        running, timing = Signal(), Signal()
        word = node.data
        collective = (word & COLLECTIVE_BIT) != 0
        delay = word & OVERLAP_DELAY_MASK
        lane_busy, lane_count, lane_begin, finished = Signal(), Signal(32), Signal(32), Signal(32)
        lane_index = Signal(range(max(depth, 2)))
        lane_done = self._collective(m, lane_busy, Const(1), lane_count, lane_node.data)
        # an idle collective lane with nothing queued takes an issued collective in its issue
        # cycle (the engine starts in the next), else it goes into the queue
        direct = running & collective & ~lane_busy & ~issued.r_rdy
        # a wait node: until the collective lane has finished that many collectives, the one
        # it finishes in this cycle counted (the node after it starts when that one ends)
        waits = ~collective & ((word & WAIT_BIT) != 0)
        held = waits & (finished + lane_done < delay)
        finish = Signal()
        m.d.comb += [node.addr.eq(pc), lane_node.addr.eq(lane_index),
                     # a collective node: issued in one cycle (waits while the queue is full)
                     finish.eq(running & Mux(collective, direct | issued.w_rdy,
                                             Mux(waits, ~held, count + 1 >= delay))),
                     issued.w_data.eq(pc), issued.w_en.eq(running & collective & ~direct),
                     write_start.addr.eq(pc), write_start.data.eq(begin), write_start.en.eq(finish & ~collective),
                     write_end.addr.eq(pc), write_end.data.eq(now + 1), write_end.en.eq(finish & ~collective),
                     self.nodes_done.eq(pc)]
        m.d.comb += [issued.r_en.eq(~lane_busy),
                     lane_start.addr.eq(lane_index), lane_start.data.eq(lane_begin), lane_start.en.eq(lane_done),
                     lane_end.addr.eq(lane_index), lane_end.data.eq(now + 1), lane_end.en.eq(lane_done),
                     self.done.eq(~running & (pc == nodes) & ~lane_busy & ~issued.r_rdy)]
        with m.If(self.start):
            m.d.sync += [pc.eq(0), now.eq(0), begin.eq(0), count.eq(0), running.eq(nodes != 0),
                         timing.eq(1), lane_busy.eq(0), lane_count.eq(0), finished.eq(0)]
        with m.Else():
            with m.If(timing & ~self.done):
                m.d.sync += now.eq(now + 1)
            with m.If(running):
                with m.If(finish):
                    m.d.sync += [pc.eq(pc + 1), begin.eq(now + 1), count.eq(0), running.eq(pc + 1 != nodes)]
                with m.Elif(held):      # its cycle is the one in which the count is reached
                    m.d.sync += begin.eq(now + 1)
                with m.Else():
                    m.d.sync += count.eq(count + 1)
            with m.If(lane_busy):
                with m.If(lane_done):
                    m.d.sync += [lane_busy.eq(0), lane_count.eq(0), finished.eq(finished + 1)]
                with m.Else():
                    m.d.sync += lane_count.eq(lane_count + 1)
            with m.Elif(direct):
                m.d.sync += [lane_busy.eq(1), lane_index.eq(pc), lane_count.eq(0), lane_begin.eq(now + 1)]
            with m.Elif(issued.r_rdy):
                m.d.sync += [lane_busy.eq(1), lane_index.eq(issued.r_data), lane_count.eq(0),
                             lane_begin.eq(now + 1)]

    def _collective(self, m, running, collective, count, word):
        """A collective node (the current node while ``running & collective``; ``count`` its
        cycles so far): ``engine_start`` in its first cycle, done in the cycle ``engine_done``
        is seen. Returns "the current node is a collective in its last cycle"."""
        m.d.comb += [self.engine_start.eq(running & collective & (count == 0)),
                     self.engine_running.eq(running & collective & (count != 0))]
        return collective & (count != 0) & self.engine_done
