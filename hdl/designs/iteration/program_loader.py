"""``ProgramLoader``: an NPU's memory of engine programs, written into its engines one collective
after the other while the NPU computes (docs/fabric_iteration.md)."""

from __future__ import annotations

from amaranth import Cat, Module, Signal, unsigned
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Component, In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import PROG_ADDR, PROG_HEAD, PROG_VALUE

__all__ = ["ProgramLoader"]

_LANE_BITS = 7          # per lane in an entry's head: write valid, 6-bit register


class ProgramLoader(Component):
    """Holds ``depth`` entries (:func:`hdl.contracts.trace_program.loader_entries`: the programs
    of an NPU's collectives, back to back, each ending with a flagged entry) and writes them,
    one entry per cycle, into ``lanes`` engine program ports at once.

    Members: ``we``/``waddr``/``wdata`` (In: the program port; :data:`PROG_ADDR`,
    :data:`PROG_HEAD`, :data:`PROG_VALUE`, other addresses ignored), ``start`` (In, pulse: back
    to the first program, and load it), ``go`` (In, pulse: load the next program; ignored after
    the last), ``release`` (In: the collective node of the program is reached, its deferred
    entries may be written), ``loaded`` (Out: the current program is written, or the memory
    holds none -- then the loader never writes), ``pending`` (Out: a program is left that
    ``go`` would load), ``lane_we``/``lane_waddr``/``lane_wdata``
    (Out, one per lane: the write into that engine's program port).

    Why deferred entries: an engine that finished its program still runs (its ``done`` is
    high); a register that decides its stages (the mesh engine's ``stages``) would make it
    move on into the new program's stages before its start. Every other register is read only
    at the start or at a stage change, so it can be written while the NPU computes.
    Latency: one entry per cycle from ``start``/``go``; a deferred entry waits for ``release``.
    """

    def __init__(self, *, depth: int, lanes: int):
        for name, value, high in (("depth", depth, 1 << 16), ("lanes", lanes, 4)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                self._MustUse__silence = True   # never built: no "created but never used" warning
                raise FredError(f"program loader {name} must be an integer in 1..{high}, got {value!r}")
        self.depth, self.lanes = depth, lanes
        super().__init__({
            "we": In(1), "waddr": In(6), "wdata": In(32),
            "start": In(1), "go": In(1), "release": In(1), "loaded": Out(1), "pending": Out(1),
            "lane_we": Out(lanes), "lane_waddr": Out(6 * lanes), "lane_wdata": Out(32 * lanes),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lanes, depth = self.lanes, self.depth
        head_bits = 2 + _LANE_BITS * lanes
        entries = m.submodules.entries = Memory(shape=unsigned(head_bits + 32 * lanes), depth=depth, init=[])
        store, entry = entries.write_port(), entries.read_port(domain="comb")
        # -- the harness fills the memory: head, then one value per lane (the last stores)
        fill, lane = Signal(range(depth + 1)), Signal(range(lanes + 1))
        head, values = Signal(head_bits), Signal(32 * lanes)
        last_value = self.we & (self.waddr == PROG_VALUE) & (lane == lanes - 1)
        with m.If(self.we):
            with m.Switch(self.waddr):
                with m.Case(PROG_ADDR):
                    m.d.sync += [fill.eq(self.wdata), lane.eq(0)]
                with m.Case(PROG_HEAD):
                    m.d.sync += [head.eq(self.wdata), lane.eq(0)]
                with m.Case(PROG_VALUE):
                    for i in range(lanes):
                        with m.If(lane == i):
                            m.d.sync += values[32 * i:32 * (i + 1)].eq(self.wdata)
                    m.d.sync += lane.eq(lane + 1)
                    with m.If(last_value):
                        m.d.sync += fill.eq(fill + 1)
        # the stored word: the head, the earlier lanes' values, this write's value last
        stored = [head] + [values[32 * i:32 * (i + 1)] for i in range(lanes - 1)] + [self.wdata]
        m.d.comb += [store.addr.eq(fill), store.data.eq(Cat(*stored)), store.en.eq(last_value)]
        # -- the loader walks the programs
        pointer, writing = Signal(range(depth + 1)), Signal()
        word = entry.data
        final, deferred = word[0], word[1]
        write = writing & (~deferred | self.release)
        m.d.comb += [entry.addr.eq(pointer), self.loaded.eq(~writing), self.pending.eq(~writing & (pointer < fill))]
        for i in range(lanes):
            lane_head = word[2 + _LANE_BITS * i:2 + _LANE_BITS * (i + 1)]
            m.d.comb += [self.lane_we[i].eq(write & lane_head[0]),
                         self.lane_waddr[6 * i:6 * (i + 1)].eq(lane_head[1:]),
                         self.lane_wdata[32 * i:32 * (i + 1)].eq(word[head_bits + 32 * i:head_bits + 32 * (i + 1)])]
        with m.If(self.start):
            m.d.sync += [pointer.eq(0), writing.eq(fill != 0)]
        with m.Elif(write):
            m.d.sync += pointer.eq(pointer + 1)
            with m.If(final):
                m.d.sync += writing.eq(0)
        with m.Elif(self.go & ~writing & (pointer < fill)):
            m.d.sync += writing.eq(1)
        return m
