"""The packet switch's phase order: the stored phases of one VC in the order the switch serves
them, each until its flows' last packets have started (written by the host with the program)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Array
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import phase_index_width
from hdl.contracts.errors import FredError

__all__ = ["PhaseOrder"]


class PhaseOrder(wiring.Component):
    """Up to K entries (slot, last sequence number) and the VC they are on, read one at a time.

    Why (docs/switch.md, "Phase order"): a switch that serves several stored phases of one VC
    picks them by arrival, and two switches feeding a reduction's next switch can pick them in
    different orders; the next switch's input buffers are one FIFO per VC, so its operands then
    sit behind each other's packets and nothing moves (the host rule of reductions, between
    switches). With the same order programmed into every switch, each serves phase ``slot[0]``
    until every input of it has started its packet numbered ``last[0]``, then ``slot[1]``, ...:
    every switch sends the phases' packets in one order, and every next switch finds them so.

    Parameters: phases K >= 1; ``seq_bits`` (the header's sequence number width).

    Members:
        we, index, slot, last: ``In``: write entry ``index`` (takes effect the next cycle).
        set_we, length, vc: ``In``: the order has ``length`` entries (0: none, the switch picks
            phases by arrival as before) on VC ``vc``; writing them restarts at entry 0.
        advance: ``In(1)``: the current entry is complete, move to the next.
        active: ``Out(1)``: an entry is current (fewer than ``length`` completed);
        current_slot, current_last, current_vc: ``Out``: that entry and the order's VC.
    """

    def __init__(self, *, phases: int, seq_bits: int):
        if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
            raise FredError(f"phases must be an integer >= 1, got {phases!r}")
        if isinstance(seq_bits, bool) or not isinstance(seq_bits, int) or seq_bits < 1:
            raise FredError(f"seq_bits must be an integer >= 1, got {seq_bits!r}")
        self.phases, self.seq_bits = phases, seq_bits
        pw = phase_index_width(phases)
        super().__init__({
            "we": In(1), "index": In(range(phases)), "slot": In(pw), "last": In(seq_bits),
            "set_we": In(1), "length": In(range(phases + 1)), "vc": In(2),
            "advance": In(1),
            "active": Out(1), "current_slot": Out(pw), "current_last": Out(seq_bits),
            "current_vc": Out(2),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        K = self.phases
        slots = [Signal.like(self.current_slot, name=f"slot{k}") for k in range(K)]
        lasts = [Signal.like(self.current_last, name=f"last{k}") for k in range(K)]
        length = Signal.like(self.length, name="order_length")
        position = Signal(range(K + 1), name="position")
        for k in range(K):
            with m.If(self.we & (self.index == k)):
                m.d.sync += [slots[k].eq(self.slot), lasts[k].eq(self.last)]
        with m.If(self.set_we):
            m.d.sync += [length.eq(self.length), self.current_vc.eq(self.vc), position.eq(0)]
        with m.Elif(self.advance & self.active):
            m.d.sync += position.eq(position + 1)
        # positions >= K read entry 0 (inactive then): every index value has an entry, so the
        # selection is a complete case (Verilator's CASEINCOMPLETE)
        pad = (1 << len(position)) - K
        m.d.comb += [
            self.active.eq(position < length),
            self.current_slot.eq(Array(slots + slots[:1] * pad)[position]),
            self.current_last.eq(Array(lasts + lasts[:1] * pad)[position]),
        ]
        return m
