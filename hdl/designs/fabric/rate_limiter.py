"""``RateLimiter``: a stream passed at most ``a`` flits in every ``b`` cycles (docs/fabric_rtl.md,
"I/O controllers": the controller's 128 GBps against the NPU link's 3 TBps)."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

from .link import rate_gate

__all__ = ["RateLimiter"]


class RateLimiter(wiring.Component):
    """A stream stage that lets a flit through only when the rate allows.

    Parameters: ``layout`` (the stream's payload layout), ``rate`` = ``(a, b)``: at most ``a``
    flits in every ``b`` cycles (:func:`~hdl.designs.fabric.link.rate_gate`, the links' token
    accumulator: an idle limiter saves no burst above the rate); ``paced``: the first flit
    too waits its whole interval of ``b / a`` cycles, and no token is saved while ``i`` has
    no flit (``rate_gate``'s ``paced`` and ``waiting``): every flit takes ``b / a`` cycles from
    when it is there, as a device that moves one flit in that time.

    ``divisor_bits`` (default 0: none; needs ``paced``): a member ``divisor`` (In, that many
    bits) divides the rate at run time, a / (b ``divisor``) flits per cycle, ``divisor`` >= 1
    (``rate_gate``'s ``divisor``: a writer's share of a sink, :class:`~hdl.designs.fabric.
    write_pacer.WritePacer`, which bypasses its limiter for an unpaced NPU instead of passing
    it a 0).

    Members: ``i`` (``In(stream)``), ``o`` (``Out(stream)``), ``restart`` (In: the tokens
    go back to their start value, e.g. at the run's start). Latency 0 (combinational, no
    buffer); backpressure: ``o.ready`` passes to ``i.ready`` while the rate allows, and
    ``i.ready`` is low otherwise; ``o.valid`` = ``i.valid`` while the rate allows and never
    depends on ``o.ready`` (a producer does not wait for ready).
    """

    def __init__(self, layout, *, rate, paced: bool = False, divisor_bits: int = 0):
        a, b = rate
        self._MustUse__silence = True        # until checked: a refused one is never built
        if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
            raise FredError(f"rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
        if isinstance(divisor_bits, bool) or not isinstance(divisor_bits, int) or divisor_bits < 0:
            raise FredError(f"divisor_bits must be a whole number >= 0, got {divisor_bits!r}")
        if divisor_bits and not paced:
            raise FredError("a RateLimiter with a run-time divisor must be paced (paced=True)")
        self.rate, self.paced, self.divisor_bits = (a, b), paced, divisor_bits
        self._MustUse__silence = False
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout)),
                          "restart": In(1),
                          **({"divisor": In(divisor_bits)} if divisor_bits else {})})

    def elaborate(self, platform) -> Module:
        m = Module()
        fire = self.o.valid & self.o.ready
        ok = rate_gate(m, self.rate, fire, restart=self.restart, paced=self.paced,
                       waiting=self.i.valid,
                       divisor=self.divisor if self.divisor_bits else None)
        m.d.comb += [self.o.valid.eq(self.i.valid & ok), self.o.payload.eq(self.i.payload),
                     self.i.ready.eq(self.o.ready & ok)]
        return m
