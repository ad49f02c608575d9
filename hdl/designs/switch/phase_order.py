"""The packet switch's phase order: the stored phases of one VC in the order the switch serves
them, each until its flows' last packets have started (written by the host with the program)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Array
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import phase_index_width
from hdl.contracts.errors import FredError

__all__ = ["PhaseOrder", "MAX_ORDER_ENTRIES"]

#: the most entries an order can have: the program port writes an entry's index and the order's
#: length as 8-bit fields (``ORDER_REGS``, :class:`~hdl.designs.fabric.packet_fabric_top.PacketFabricTop`)
MAX_ORDER_ENTRIES = 255


class PhaseOrder(wiring.Component):
    """Up to K entries (slot, last sequence number) and the VC they are on, read one at a time.

    Why (docs/switch.md, "Phase order"): a switch that serves several stored phases of one VC
    picks them by arrival, and two switches feeding a reduction's next switch can pick them in
    different orders; the next switch's input buffers are one FIFO per VC, so its operands then
    sit behind each other's packets and nothing moves (the host rule of reductions, between
    switches). With the same order programmed into every switch, each serves phase ``slot[0]``
    until every input of it has started its packet numbered ``last[0]``, then ``slot[1]``, ...:
    every switch sends the phases' packets in one order, and every next switch finds them so.

    Parameters: phases (the switch's stored-phase slots, which set a slot's width); ``seq_bits``
    (the header's sequence number width); ``entries`` K in 1..:data:`MAX_ORDER_ENTRIES` (default
    None: one per slot). More entries than slots let one order, loaded once, serve an
    iteration's every ordered run (an entry per run and group, docs/switch.md, "Phase order").
    Latency: a write or ``set`` takes effect the next cycle; ``advance`` moves the entry the next
    cycle; the outputs are combinational reads of the registers (a K-way mux). No backpressure.

    Members:
        we, index, slot, last: ``In``: write entry ``index`` (takes effect the next cycle).
        set_we, length, vc: ``In``: the order has ``length`` entries (0: none, the switch picks
            phases by arrival as before) on VC ``vc``; writing them restarts at entry 0.
        advance: ``In(1)``: the current entry is complete, move to the next.
        active: ``Out(1)``: an entry is current (fewer than ``length`` completed);
        current_slot, current_last, current_vc: ``Out``: that entry and the order's VC.
    """

    def __init__(self, *, phases: int, seq_bits: int, entries: int | None = None):
        if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
            raise FredError(f"phases must be an integer >= 1, got {phases!r}")
        if isinstance(seq_bits, bool) or not isinstance(seq_bits, int) or seq_bits < 1:
            raise FredError(f"seq_bits must be an integer >= 1, got {seq_bits!r}")
        if entries is not None and (isinstance(entries, bool) or not isinstance(entries, int)
                                    or not 1 <= entries <= MAX_ORDER_ENTRIES):
            raise FredError(f"entries must be None (one per slot) or a whole number in "
                            f"1..{MAX_ORDER_ENTRIES}, got {entries!r}")
        self.phases, self.seq_bits = phases, seq_bits
        self.entries = phases if entries is None else entries
        pw = phase_index_width(phases)
        K = self.entries
        super().__init__({
            "we": In(1), "index": In(range(K)), "slot": In(pw), "last": In(seq_bits),
            "set_we": In(1), "length": In(range(K + 1)), "vc": In(2),
            "advance": In(1),
            "active": Out(1), "current_slot": Out(pw), "current_last": Out(seq_bits),
            "current_vc": Out(2),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        K = self.entries
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
