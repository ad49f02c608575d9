"""Two's-complement wrapping integer adder (one lane of the ``int32`` reduction unit)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.timing import INT_ADDER_STAGES

from .formats import IntFormat

__all__ = ["IntAdder"]


class IntAdder(wiring.Component):
    """``o = (a + b) mod 2**width``.

    Parameters:
        fmt: the :class:`IntFormat` (keyword-only).

    Members:
        a, b: ``In(fmt.width)``; o: ``Out(fmt.width)``, combinational.

    Latency: :attr:`latency` = 0 (one carry chain; the reduction unit's output register
    follows it directly).
    """

    latency = INT_ADDER_STAGES

    def __init__(self, *, fmt: IntFormat):
        if not isinstance(fmt, IntFormat):
            raise FredError(f"IntAdder: fmt must be an IntFormat, got {fmt!r}")
        self.fmt = fmt
        super().__init__({"a": In(fmt.width), "b": In(fmt.width), "o": Out(fmt.width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.o.eq((self.a + self.b)[:self.fmt.width])
        return m
