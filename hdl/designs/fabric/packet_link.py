"""``PacketLink``: a credit-based link of the packet fabric (docs/fabric_rtl.md, "Packet
fabric"): flits one way, per-VC credit counts the other, both delayed by the link; below full
rate a queue per VC at its entry, served MP > PP > DP at packet boundaries."""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.hdl import Mux
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.packet import DATA_VCS, PRIORITY, PacketFormat
from hdl.designs.switch.vc_input_buffer import link_signature

from .link import rate_gate

__all__ = ["PacketLink"]


class PacketLink(wiring.Component):
    """One direction of a cable between credit-based ports (``PacketSwitch``, the NPU's
    packetizer and depacketizer).

    Parameters: ``shape`` (the flit's payload shape: ``data last tag``), ``latency`` >= 1
    cycles; ``rate`` = ``(a, b)``: at most ``a`` flits in every ``b`` cycles (default full
    rate); below full rate also ``depth`` (the flits of one VC the sender's credits allow in
    flight) and ``packet`` (the :class:`PacketFormat` whose header is the flit's ``tag``: where
    its ``vc`` field is).

    Members: ``i`` (``In(link_signature)``: from the sender's output), ``o`` (``Out``: to the
    receiver's input buffer), ``credit_in`` (``In(2).array(3)``: the receiver's freed slots per
    VC, a count per cycle), ``credit_out`` (``Out(2).array(3)``: the same counts, to the
    sender), ``overflow`` (sticky: below full rate a VC's entry queue was full, i.e. the sender
    broke the credit protocol, or a control-VC flit arrived, which has no queue).

    Mechanism: ``latency - 1`` always-moving registers each way; the receiver's input buffer
    (a FIFO, one cycle) is the last cycle, so a flit sent in cycle t is at the head of the
    receiver's buffer in cycle t + latency, as on the circuit fabric's :class:`Link`. The
    sender holds the credits (the receiver's buffer depth per VC), so nothing is dropped and
    no ``ready`` is needed.

    Below full rate (:func:`~hdl.designs.fabric.link.rate_gate`, the circuit fabric's token
    accumulator) the sender's flits queue at the link's entry, **one bypass FIFO of ``depth``
    flits per data VC** (docs/fabric_rtl.md, "Packet fabric": a queue for all VCs made an MP
    packet wait behind up to ``depth`` DP flits leaving at the link's rate). The link's output
    serves the queues as the switch serves its VCs: at a packet boundary the highest priority
    VC with a flit waiting (MP > PP > DP, :data:`~hdl.contracts.packet.PRIORITY`) takes the
    link until its packet's ``last`` flit has left, so packets of different VCs never
    interleave on the wire (the receiver's input buffer reads a packet's header from its first
    flit and stores the rest with it). A flit that finds its VC's queue empty, the link free
    for its VC and the rate allowing goes straight on (no added cycle). A queue never
    overflows: every flit in VC v's queue holds one of the sender's ``depth`` credits for VC v
    of the receiver's buffer. Latency added to an MP packet behind a DP packet: at most the
    rest of that one packet at the link's rate.
    """

    def __new__(cls, shape, *, latency: int, rate=(1, 1), depth: int = 0,
                packet: PacketFormat | None = None):
        # validate before the object exists (Amaranth warns about an Elaboratable never elaborated)
        cls.check(latency=latency, rate=rate, depth=depth, packet=packet)
        return super().__new__(cls)

    @staticmethod
    def check(*, latency, rate, depth, packet) -> None:
        """Raise :class:`FredError` naming a bad parameter."""
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
            raise FredError(f"link latency must be an integer >= 1 cycle, got {latency!r}")
        a, b = rate
        if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
            raise FredError(f"link rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
        if (a, b) != (1, 1) and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise FredError(f"a link below full rate needs the credits' depth >= 1, got {depth!r}")
        if (a, b) != (1, 1) and not isinstance(packet, PacketFormat):
            raise FredError(f"a link below full rate needs the PacketFormat of its flits' tag "
                            f"(its queue per VC reads the header's vc), got packet={packet!r}")

    def __init__(self, shape, *, latency: int, rate=(1, 1), depth: int = 0,
                 packet: PacketFormat | None = None):
        a, b = rate
        self.latency, self.rate, self.depth, self.packet = latency, (a, b), depth, packet
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
        """The queues per VC and the rate gate: returns (valid, payload) leaving this cycle."""
        width = Shape.cast(self.i.payload.shape()).width
        field = self.packet.header["vc"]
        tag = self.i.payload.tag
        arriving_vc = tag[field.offset:field.offset + field.width]
        on_packet = Signal(name="on_packet")      # the link is inside a packet of ``owner``
        owner = Signal(2, name="owner")
        ready, data, queues = {}, {}, {}
        for v in DATA_VCS:
            queue = queues[v] = m.submodules[f"queue_{v.name.lower()}"] = SyncFIFO(
                width=width, depth=self.depth)
            arrives = self.i.valid & (arriving_vc == v)
            ready[v] = Signal(name=f"head_{v.name.lower()}")      # VC v has a flit to send
            data[v] = Mux(queue.r_rdy, queue.r_data, self.i.payload.as_value())
            m.d.comb += ready[v].eq(queue.r_rdy | arrives)
        # the VC that may send: the packet's owner inside a packet, else the highest priority
        chosen = Signal(2, name="chosen")
        with m.If(on_packet):
            m.d.comb += chosen.eq(owner)
        with m.Else():
            m.d.comb += chosen.eq(PRIORITY[-1])
            for v in reversed(PRIORITY):      # the last assignment (highest priority) wins
                with m.If(ready[v]):
                    m.d.comb += chosen.eq(v)
        go = Signal()
        ok = rate_gate(m, self.rate, go)
        payload = Signal.like(self.i.payload, name="head")
        for v in DATA_VCS:
            queue, mine = queues[v], chosen == v
            sent = go & mine
            with m.If(mine):
                m.d.comb += [go.eq(ready[v] & ok), payload.as_value().eq(data[v])]
            m.d.comb += [
                queue.r_en.eq(sent & queue.r_rdy),
                queue.w_data.eq(self.i.payload.as_value()),
                # the arriving flit queues unless it went straight on
                queue.w_en.eq(self.i.valid & (arriving_vc == v) & ~(sent & ~queue.r_rdy)),
            ]
            with m.If(queue.w_en & ~queue.w_rdy):
                m.d.sync += self.overflow.eq(1)
        # the fabric's switches have no control VC (ctrl_depth 0): a vc 3 flit has no queue
        with m.If(self.i.valid & (arriving_vc == 3)):
            m.d.sync += self.overflow.eq(1)
        with m.If(go):
            m.d.sync += [on_packet.eq(~payload.last), owner.eq(chosen)]
        return go, payload
