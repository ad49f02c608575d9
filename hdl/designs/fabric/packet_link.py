"""``PacketLink``: a credit-based link of the packet fabric (docs/fabric_rtl.md, "Packet
fabric"): flits one way, per-VC credit counts the other, both delayed by the link."""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.hdl import Mux
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.packet import DATA_VCS
from hdl.designs.switch.vc_input_buffer import link_signature

from .link import rate_gate

__all__ = ["PacketLink"]


class PacketLink(wiring.Component):
    """One direction of a cable between credit-based ports (``PacketSwitch``, the NPU's
    packetizer and depacketizer).

    Parameters: ``shape`` (the flit's payload shape), ``latency`` >= 1 cycles; ``rate`` =
    ``(a, b)``: at most ``a`` flits in every ``b`` cycles (default full rate); ``depth``: the
    flits the sender's credits allow in flight (needed below full rate).

    Members: ``i`` (``In(link_signature)``: from the sender's output), ``o`` (``Out``: to the
    receiver's input buffer), ``credit_in`` (``In(2).array(3)``: the receiver's freed slots per
    VC, a count per cycle), ``credit_out`` (``Out(2).array(3)``: the same counts, to the
    sender).

    Mechanism: ``latency - 1`` always-moving registers each way; the receiver's input buffer
    (a FIFO, one cycle) is the last cycle, so a flit sent in cycle t is at the head of the
    receiver's buffer in cycle t + latency, as on the circuit fabric's :class:`Link`. The
    sender holds the credits (the receiver's buffer depth per VC), so nothing is dropped and
    no ``ready`` is needed.

    Below full rate (:func:`~hdl.designs.fabric.link.rate_gate`, the circuit fabric's token
    accumulator) the sender's flits queue at the link's entry, in a bypass FIFO of ``depth``
    flits: a flit that finds it empty and the rate allowing goes straight on (no added
    cycle). The queue never overflows: every flit in it holds one of the sender's credits for
    the receiver's buffer (``depth`` slots per data VC), and it holds 3 x ``depth``, one FIFO
    for all VCs (``overflow``, sticky, reports a breach).
    """

    def __init__(self, shape, *, latency: int, rate=(1, 1), depth: int = 0):
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
            raise FredError(f"link latency must be an integer >= 1 cycle, got {latency!r}")
        a, b = rate
        if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
            raise FredError(f"link rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
        if (a, b) != (1, 1) and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise FredError(f"a link below full rate needs the credits' depth >= 1, got {depth!r}")
        self.latency, self.rate, self.depth = latency, (a, b), depth
        nvc = len(DATA_VCS)
        super().__init__({"i": In(link_signature(shape)), "o": Out(link_signature(shape)),
                          "credit_in": In(2).array(nvc), "credit_out": Out(2).array(nvc),
                          "overflow": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        valid, payload = self.i.valid, self.i.payload
        if self.rate != (1, 1):
            valid, payload = self._rate_limited(m)
        credits = list(self.credit_in)
        for stage in range(self.latency - 1):
            v = Signal(name=f"valid_{stage}")
            d = Signal.like(self.i.payload, name=f"payload_{stage}")
            c = [Signal(2, name=f"credit_{stage}_{vc}") for vc in range(len(credits))]
            m.d.sync += [v.eq(valid), d.eq(payload), *(ci.eq(x) for ci, x in zip(c, credits))]
            valid, payload, credits = v, d, c
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(payload),
                     *(out.eq(x) for out, x in zip(self.credit_out, credits))]
        return m

    def _rate_limited(self, m):
        """The bypass queue and the rate gate: returns (valid, payload) leaving it this cycle."""
        width = Shape.cast(self.i.payload.shape()).width
        queue = m.submodules.queue = SyncFIFO(width=width, depth=3 * self.depth)
        go = Signal()
        head_valid = queue.r_rdy | self.i.valid
        ok = rate_gate(m, self.rate, go)
        m.d.comb += [
            go.eq(head_valid & ok),
            queue.r_en.eq(go & queue.r_rdy),
            queue.w_data.eq(self.i.payload.as_value()),
            # the arriving flit queues unless it went straight on
            queue.w_en.eq(self.i.valid & ~(go & ~queue.r_rdy)),
        ]
        with m.If(queue.w_en & ~queue.w_rdy):
            m.d.sync += self.overflow.eq(1)
        payload = Signal.like(self.i.payload, name="head")
        m.d.comb += payload.as_value().eq(Mux(queue.r_rdy, queue.r_data, self.i.payload.as_value()))
        return go, payload
