"""``Link``: a point-to-point fabric link with a latency in cycles and a rate limit (issue 15)."""

from __future__ import annotations

from amaranth import Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.base.errors import FredError

__all__ = ["Link"]


class Link(wiring.Component):
    """A link: a flit accepted at ``i`` in cycle t is offered at ``o`` from cycle t + latency.

    Parameters: ``shape`` (the flit's payload shape), ``latency`` >= 1 cycles, ``rate`` =
    ``(a, b)``: at most ``a`` flits in every ``b`` cycles (``0 < a <= b``; (1, 1) is the full
    rate, 1 flit per cycle).

    Mechanism: ``latency - 1`` registers that always advance (no stall), then a FIFO with one
    cycle of latency. The sender may only put a flit on the wire when the FIFO at the far end
    has room for it and everything already on the wire (a credit counter ``occupancy`` of
    ``latency + 2`` entries, the credit returning in the cycle the receiver pops), so no flit is
    ever dropped, and a receiver that keeps up sees the full rate. The rate limiter is a token
    accumulator: ``a`` tokens per cycle, a flit costs ``b``, saved tokens capped at ``b - a`` so
    an idle link does not build up a burst above the rate (after idling, the first flit goes at
    once).

    Backpressure: ``i.ready`` depends on registers only (credits and tokens), never on
    ``o.ready`` combinationally; ``o.valid`` is the FIFO's ``r_rdy``.
    """

    def __init__(self, shape, *, latency: int, rate=(1, 1)):
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
            raise FredError(f"link latency must be an integer >= 1 cycle, got {latency!r}")
        a, b = rate
        if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
            raise FredError(f"link rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
        self.latency, self.rate, self.shape = latency, (a, b), shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform) -> Module:
        m = Module()
        width = Value.cast(self.i.payload).shape().width
        depth = self.latency + 2
        fifo = m.submodules.fifo = SyncFIFO(width=width, depth=depth)
        occupancy = Signal(range(depth + 1))
        a, b = self.rate
        tokens_ok = Signal(init=1)
        fire_in = self.i.valid & self.i.ready
        fire_out = self.o.valid & self.o.ready
        if (a, b) == (1, 1):
            m.d.comb += tokens_ok.eq(1)
        else:
            # tokens in [0, b - a]; a flit may go when tokens + a >= b
            tokens = Signal(range(b + 1), init=b - a)
            m.d.comb += tokens_ok.eq(tokens + a >= b)
            with m.If(fire_in):
                m.d.sync += tokens.eq(tokens + a - b)
            with m.Elif(tokens + a > b - a):
                m.d.sync += tokens.eq(b - a)
            with m.Else():
                m.d.sync += tokens.eq(tokens + a)
        m.d.comb += self.i.ready.eq((occupancy < depth) & tokens_ok)
        m.d.sync += occupancy.eq(occupancy + fire_in - fire_out)
        # the wire: latency - 1 always-moving registers, then the FIFO's write
        valid, data = fire_in, Value.cast(self.i.payload)
        for stage in range(self.latency - 1):
            v, d = Signal(name=f"wire_valid_{stage}"), Signal(width, name=f"wire_data_{stage}")
            m.d.sync += [v.eq(valid), d.eq(data)]
            valid, data = v, d
        m.d.comb += [
            fifo.w_en.eq(valid), fifo.w_data.eq(data),
            self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.o.ready),
        ]
        return m
