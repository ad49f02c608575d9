"""``Link``: a point-to-point fabric link with a latency in cycles and a rate limit (docs/fabric_rtl.md),
and its two ends ``LinkSender`` / ``LinkReceiver`` (a link cut between two simulation parts)."""

from __future__ import annotations

from amaranth import Module, Shape, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

__all__ = ["Link", "LinkSender", "LinkReceiver", "rate_gate"]


def _check(latency, rate) -> tuple[int, tuple[int, int]]:
    if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
        raise FredError(f"link latency must be an integer >= 1 cycle, got {latency!r}")
    a, b = rate
    if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
        raise FredError(f"link rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
    return latency, (a, b)


def rate_gate(m: Module, rate: tuple[int, int], fire, *, restart=None, paced: bool = False,
              waiting=None, divisor=None) -> Signal:
    """The rate limiter of a link of ``rate`` = (a, b) flits per cycle: a token accumulator,
    ``a`` tokens per cycle, a flit (``fire``) costs ``b``, saved tokens capped at ``b - 1`` so an
    idle link builds up no burst above the rate (in any n cycles at most n a / b + 1 flits).
    Under continuous demand exactly ``a`` flits leave in every ``b`` cycles: the cap never
    drops a token then (a flit goes as soon as tokens + a >= b, so tokens stay below b - a +
    a). Returns the signal "a flit may go now" (registers only).

    (The cap was ``b - a`` before, exact only for a = 1, where the two caps are the same: for
    a > 1 it dropped the remainder of every interval, so 16/375, the I/O controllers' rate,
    ran at 1/24 and 3/4 at 1/2; docs/fabric_rtl.md, "I/O controllers".)

    ``paced``: start with no saved token instead of b - 1, so the first flit also waits its
    whole interval (flit k goes in cycle ceil((k + 1) b / a) - 1: a device that needs b / a
    cycles per flit, e.g. an I/O controller's memory); ``waiting`` (a signal, with ``paced``):
    tokens accumulate only while it is high (a flit to move): such a device saves nothing
    while idle, so a flit that arrives after a pause also takes its whole interval;
    ``restart`` (a signal): tokens back to the start value in that cycle (the run's start).

    ``divisor`` (an unsigned signal, with ``paced``): the rate is a / (b ``divisor``) -- a
    flit costs b ``divisor`` tokens -- set at run time (a writer's share of a sink that
    ``divisor`` writers share, docs/fabric_rtl.md "Host rules"); exact like the constant rate
    (``a`` flits in every b ``divisor`` cycles). A divisor is a rate, >= 1: "0 means
    unpaced" is the caller's rule, not the gate's (:data:`hdl.contracts.fabric.UNPACED`: the
    :class:`~hdl.designs.fabric.write_pacer.WritePacer` bypasses its limiter then, which so
    never has a flit to gate). A gate left at 0 would let every flit go (a cost of 0) with
    tokens that mean nothing until its next ``restart``."""
    a, b = rate
    ok = Signal(init=1, name="rate_ok")
    if (a, b) == (1, 1) and divisor is None:
        m.d.comb += ok.eq(1)
        return ok
    if divisor is not None and not paced:
        raise FredError("a rate_gate with a run-time divisor starts paced (paced=True): its "
                        "unpaced start value b * divisor - 1 is not a constant")
    # tokens in [0, cost - 1]; a flit may go when tokens + a >= cost
    cost = b if divisor is None else b * divisor
    top = b if divisor is None else b * ((1 << len(divisor)) - 1)
    initial = 0 if paced else b - 1
    tokens = Signal(range(top + 1), init=initial, name="rate_tokens")
    m.d.comb += ok.eq(tokens + a >= cost)
    with m.If(fire):
        m.d.sync += tokens.eq(tokens + a - cost)
    if paced and waiting is not None:
        with m.Elif(~waiting):
            pass                 # a paced device with nothing to move saves nothing
    with m.Elif(tokens + a > cost - 1):
        m.d.sync += tokens.eq(cost - 1)
    with m.Else():
        m.d.sync += tokens.eq(tokens + a)
    if restart is not None:
        with m.If(restart):      # last: it wins over the updates above
            m.d.sync += tokens.eq(initial)
    return ok


def _fifo_depth(latency: int) -> int:
    # room for every flit on the wire plus the one the receiver is popping: full rate
    return latency + 2


class LinkSender(wiring.Component):
    """The sending end of a :class:`Link`: credits, rate limiter and the wire's registers.

    Members: ``i`` (stream in: the flits to send), ``wire_valid`` / ``wire_data`` (out: the
    flit arriving at the receiver's FIFO this cycle; registers when ``latency`` >= 2, else
    ``i``'s accepted flit), ``credit`` (in: the receiver popped a flit this cycle).

    ``i.ready`` depends on registers only; ``wire_valid`` / ``wire_data`` depend on the
    sender's side only (``i`` and its registers), never on ``credit``, so the two ends can be
    simulated in different models that exchange ``wire_*`` and ``credit`` once a cycle.
    """

    def __init__(self, shape, *, latency: int, rate=(1, 1)):
        self.latency, self.rate = _check(latency, rate)
        self.shape = shape
        self.width = width = Shape.cast(shape).width
        super().__init__({"i": In(stream.Signature(shape)), "wire_valid": Out(1),
                          "wire_data": Out(width), "credit": In(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        depth = _fifo_depth(self.latency)
        occupancy = Signal(range(depth + 1))
        fire_in = self.i.valid & self.i.ready
        tokens_ok = rate_gate(m, self.rate, fire_in)
        m.d.comb += self.i.ready.eq((occupancy < depth) & tokens_ok)
        m.d.sync += occupancy.eq(occupancy + fire_in - self.credit)
        # the wire: latency - 1 always-moving registers
        valid, data = fire_in, Value.cast(self.i.payload)
        for stage in range(self.latency - 1):
            v, d = Signal(name=f"wire_valid_{stage}"), Signal(self.width, name=f"wire_data_{stage}")
            m.d.sync += [v.eq(valid), d.eq(data)]
            valid, data = v, d
        m.d.comb += [self.wire_valid.eq(valid), self.wire_data.eq(data)]
        return m


class LinkReceiver(wiring.Component):
    """The receiving end of a :class:`Link`: the FIFO (one cycle of latency) that the sender's
    credits account for.

    Members: ``wire_valid`` / ``wire_data`` (in, from :class:`LinkSender`), ``o`` (stream out),
    ``credit`` (out: ``o`` transferred a flit this cycle; depends on the FIFO's registers and
    ``o.ready``, never on ``wire_*``)."""

    def __init__(self, shape, *, latency: int):
        self.latency, _ = _check(latency, (1, 1))
        self.shape = shape
        self.width = width = Shape.cast(shape).width
        super().__init__({"wire_valid": In(1), "wire_data": In(width),
                          "o": Out(stream.Signature(shape)), "credit": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        fifo = m.submodules.fifo = SyncFIFO(width=self.width, depth=_fifo_depth(self.latency))
        m.d.comb += [
            fifo.w_en.eq(self.wire_valid), fifo.w_data.eq(self.wire_data),
            self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.o.ready),
            self.credit.eq(self.o.valid & self.o.ready),
        ]
        return m


class Link(wiring.Component):
    """A link: a flit accepted at ``i`` in cycle t is offered at ``o`` from cycle t + latency.

    Parameters: ``shape`` (the flit's payload shape), ``latency`` >= 1 cycles, ``rate`` =
    ``(a, b)``: at most ``a`` flits in every ``b`` cycles (``0 < a <= b``; (1, 1) is the full
    rate, 1 flit per cycle).

    Mechanism (:class:`LinkSender` then :class:`LinkReceiver`): ``latency - 1`` registers that
    always advance (no stall), then a FIFO with one cycle of latency. The sender may only put a
    flit on the wire when the FIFO at the far end has room for it and everything already on
    the wire (a credit counter ``occupancy`` of ``latency + 2`` entries, the credit returning
    in the cycle the receiver pops), so no flit is ever dropped, and a receiver that keeps up
    sees the full rate. The rate limiter is a token accumulator: ``a`` tokens per cycle, a flit
    costs ``b``, saved tokens capped at ``b - a`` so an idle link does not build up a burst
    above the rate (after idling, the first flit goes at once).

    Backpressure: ``i.ready`` depends on registers only (credits and tokens), never on
    ``o.ready`` combinationally; ``o.valid`` is the FIFO's ``r_rdy``.
    """

    def __init__(self, shape, *, latency: int, rate=(1, 1)):
        self.latency, self.rate = _check(latency, rate)
        self.shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform) -> Module:
        m = Module()
        sender = m.submodules.sender = LinkSender(self.shape, latency=self.latency, rate=self.rate)
        receiver = m.submodules.receiver = LinkReceiver(self.shape, latency=self.latency)
        wiring.connect(m, wiring.flipped(self.i), sender.i)
        wiring.connect(m, receiver.o, wiring.flipped(self.o))
        m.d.comb += [receiver.wire_valid.eq(sender.wire_valid),
                     receiver.wire_data.eq(sender.wire_data),
                     sender.credit.eq(receiver.credit)]
        return m
