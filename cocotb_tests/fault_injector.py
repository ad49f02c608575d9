"""Test-only hardware: a stream buffer with one deliberate fault, to prove the scoreboard works.

Not part of FRED. ``tests/cocotb_tests/test_stream_buffer_cocotb.py`` runs it under Verilator and checks that
the scoreboard reports exactly the injected fault kind. The fault is chosen at run time through
the ``fault`` input (an index into :data:`FAULTS`), so one Verilator build serves every case.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.stream import Signature
from amaranth.lib.wiring import In, Out

from hdl.designs.stream_buffer import StreamBuffer

__all__ = ["FAULTS", "FaultInjector"]

#: Values of the ``fault`` input.
FAULTS = ("none", "drop", "duplicate", "corrupt")


class FaultInjector(wiring.Component):
    """:class:`~hdl.designs.stream_buffer.StreamBuffer` of ``width`` bits whose ``at``-th input transfer
    (counting from 0) is dropped, sent twice, or has its most significant payload bit flipped,
    as selected by ``fault`` (held constant during a run).

    Members: ``i`` (In stream), ``o`` (Out stream) of ``unsigned(width)``; ``fault`` (In 2 bits).
    """

    def __init__(self, *, width: int, at: int):
        if at < 0:
            raise ValueError(f"at must be >= 0, got {at}")
        self.width, self.at = width, at
        super().__init__({"i": In(Signature(width)), "o": Out(Signature(width)), "fault": In(2)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.buffer = buffer = StreamBuffer(self.width)
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        count = Signal(range(self.at + 2), name="input_transfers")
        at_fault = count == self.at
        with m.If(self.i.valid & self.i.ready & (count <= self.at)):
            m.d.sync += count.eq(count + 1)
        m.d.comb += [
            buffer.i.payload.eq(self.i.payload),
            buffer.i.valid.eq(self.i.valid),
            self.i.ready.eq(buffer.i.ready),
        ]
        sent_once = Signal(name="sent_once")
        with m.If(at_fault):
            with m.Switch(self.fault):
                with m.Case(FAULTS.index("drop")):      # accept the item, never forward it
                    m.d.comb += [buffer.i.valid.eq(0), self.i.ready.eq(1)]
                with m.Case(FAULTS.index("corrupt")):
                    m.d.comb += buffer.i.payload.eq(self.i.payload ^ (1 << (self.width - 1)))
                with m.Case(FAULTS.index("duplicate")):
                    with m.If(~sent_once):              # forward it but keep it upstream: it comes again
                        m.d.comb += self.i.ready.eq(0)
                        with m.If(self.i.valid & buffer.i.ready):
                            m.d.sync += sent_once.eq(1)
        return m
