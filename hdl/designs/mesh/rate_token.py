"""A link's rate as a token counter: ``a`` flits in every ``b`` cycles."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import check_link_rate

__all__ = ["RateToken"]


class RateToken(wiring.Component):
    """A counter in ``[0, b - a]`` (capped there, so an idle link saves no burst) that gains
    ``a`` per cycle; a flit costs ``b``. ``token`` is high when a flit may move.

    Parameters: rate ``(a, b)``, 0 < a <= b (``(1, 1)``: always a token, no counter).

    Members: ``spend`` (In(1): a flit moves this cycle; only while ``token``), ``token`` (Out(1)).

    Latency: after a flit at cycle t, the next may move at t + ceil(b / a) (a = 1: t + b).
    """

    def __init__(self, rate):
        self.rate = check_link_rate(rate)
        super().__init__({"spend": In(1), "token": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        a, b = self.rate
        if a == b:
            m.d.comb += self.token.eq(1)
            return m
        tokens = Signal(range(b + 1), init=b - a)
        m.d.comb += self.token.eq(tokens >= b - a)
        with m.If(self.spend):
            m.d.sync += tokens.eq(tokens + a - b)
        with m.Elif(tokens < b - a):
            m.d.sync += tokens.eq(tokens + a)
        return m
