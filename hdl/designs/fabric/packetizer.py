"""``Packetizer``: cuts an NPU engine's flit stream into packets for the packet fabric
(docs/fabric_rtl.md, "Packet fabric")."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.layouts import flit_layout, struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["Packetizer", "connect_engine_to_packetizer"]


class Packetizer(wiring.Component):
    """The NPU's sending side on a credit-based link.

    Parameters: ``flit`` (the engine's :class:`FlitFormat`), ``packet`` (:class:`PacketFormat`
    of the fabric), ``depth``: flits per data VC of the receiving input buffer (the credits
    this side starts with).

    Members: ``i`` (``In(stream)``: the engine's flits; ``last`` marks the end of its stream),
    ``cut`` (In, beside ``i``: the flit on ``i`` ends a packet too -- the engine's
    ``chunk_end``; 0 for a sender without chunks),
    ``o`` (``Out(link_signature)``: flits with the packet header as tag), ``credit``
    (``In(2).array(3)``: credits back from the receiver), ``start`` (In: the next packet is
    numbered 0; the credits are link state and stay), ``phase`` / ``vc`` / ``flow`` (In: the header fields of this NPU's packets, from
    its program registers), ``hold`` (In: start no
    packet; a packet in progress continues), ``credit_error`` (Out, sticky: more credits came back than the
    buffer holds).

    Packets: ``packet.packet_flits`` flits, shorter when the engine's stream ends (its
    ``last``) or its chunk does (``cut``: a packet never holds flits of two chunks, whose
    later flits an endpoint algorithm receives from the network: started, such a packet
    would hold its output while it waits for them, the ring deadlock of docs/fabric_rtl.md,
    "Four DP rings across the one-port uplinks"; :func:`~hdl.contracts.packet.stream_packets`
    counts the packets); numbered from 0 (``seq``, per NPU: the NPU sends one flow per run).
    ``forward`` (default False): the packets are ones received and sent on whole (the striped
    I/O request's NPUs, :class:`~hdl.designs.fabric.stripe_npu.StripeNpu`): a packet ends at
    ``i``'s ``last`` (the received packet's end) and takes its number from ``seq_in`` (each
    stripe numbers its own). With ``packet.stripe_bits`` > 0 the header's ``stripe`` is the
    ``stripe`` input. With ``forward`` also ``room2`` (Out): the VC holds credits for **two**
    whole packets (from registers only), for a sender that adds packets of its own to a ring of
    forwarded ones (the bubble rule of :class:`~hdl.designs.fabric.stripe_npu.StripeNpu`). A
    packet starts only when its VC holds credits for a whole packet (virtual cut-through);
    every flit spends one. ``i.ready`` depends on registers only; ``o.valid`` = ``i.valid &
    i.ready`` (the engine's valid never waits for ready). Latency 0 (combinational).
    """

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, forward: bool = False):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < packet.packet_flits:
            raise FredError(f"depth must be an integer >= packet_flits ({packet.packet_flits}), "
                            f"got {depth!r}")
        self.flit, self.packet, self.depth, self.forward = flit, packet, depth, bool(forward)
        self.link_flit = FlitFormat(dtype=flit.dtype, lanes=flit.lanes, tag_width=packet.header_width)
        header = packet.header
        super().__init__({
            "i": In(stream.Signature(flit_layout(flit))),
            "o": Out(link_signature(flit_layout(self.link_flit))),
            "credit": In(2).array(len(DATA_VCS)),
            "start": In(1), "cut": In(1),
            "phase": In(header["phase"].width), "vc": In(2), "flow": In(header["flow"].width),
            "credit_error": Out(1),
            "hold": In(1),
            **({"stripe": In(packet.stripe_bits)} if packet.stripe_bits else {}),
            **({"seq_in": In(packet.seq_bits), "room2": Out(1)} if self.forward else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        fmt, size = self.packet, self.packet.packet_flits
        counters = [Signal(range(self.depth + 3), init=self.depth, name=f"credits_{v}")
                    for v in range(len(DATA_VCS))]
        inside = Signal()                       # a packet has started and not ended
        count = Signal(range(size + 1))         # flits of the current packet sent
        seq = Signal(fmt.seq_bits)
        room = Signal()
        for v, c in enumerate(counters):
            with m.If(self.vc == v):
                m.d.comb += room.eq(c >= size)
                if self.forward:
                    m.d.comb += self.room2.eq(c >= 2 * size)
        header = Signal(struct_layout(fmt.header))
        m.d.comb += [header.phase.eq(self.phase), header.vc.eq(self.vc),
                     header.seq.eq(self.seq_in if self.forward else seq), header.flow.eq(self.flow)]
        if fmt.stripe_bits:
            m.d.comb += header.stripe.eq(self.stripe)
        send = Signal()
        end = Signal()
        m.d.comb += [
            self.i.ready.eq(inside | room & ~self.hold),
            send.eq(self.i.valid & self.i.ready),
            end.eq(self.i.payload.last | self.cut | (count == size - 1)),
            self.o.valid.eq(send),
            self.o.payload.data.eq(self.i.payload.data),
            self.o.payload.last.eq(end),
            self.o.payload.tag.eq(header.as_value()),
        ]
        for v, c in enumerate(counters):
            after = c - (send & (self.vc == v)) + self.credit[v]
            m.d.sync += c.eq(after)
            with m.If(after > self.depth):
                m.d.sync += self.credit_error.eq(1)
        with m.If(send):
            with m.If(end):
                m.d.sync += [inside.eq(0), count.eq(0), seq.eq(seq + 1)]
            with m.Else():
                m.d.sync += [inside.eq(1), count.eq(count + 1)]
        with m.If(self.start):
            m.d.sync += [seq.eq(0), inside.eq(0), count.eq(0)]
        return m


def connect_engine_to_packetizer(m: Module, engine, tx: Packetizer, pacer=None) -> None:
    """Connect an :class:`~hdl.designs.fabric.npu_engine.NpuEngine`'s sending side (``tx``
    and ``chunk_end``) to the packetizer ``tx`` (its ``i`` and ``cut``), directly or through
    ``pacer`` (a :class:`~hdl.designs.fabric.write_pacer.WritePacer` built on
    :func:`~hdl.designs.layouts.chunked_flit_layout`: the chunk's end travels with its flit
    through the pacer's buffer as ``cut``, and the pacer's assembler cuts its packets where
    the packetizer does). Every packetizing NPU connects so: a packet ends at its chunk's end
    (docs/fabric_rtl.md, "Four DP rings across the one-port uplinks")."""
    if pacer is None:
        wiring.connect(m, engine.tx, tx.i)
        m.d.comb += tx.cut.eq(engine.chunk_end)
        return
    fields = ("data", "last", "tag")
    m.d.comb += [pacer.i.valid.eq(engine.tx.valid), engine.tx.ready.eq(pacer.i.ready),
                 *(pacer.i.payload[f].eq(engine.tx.payload[f]) for f in fields),
                 pacer.i.payload.cut.eq(engine.chunk_end),
                 tx.i.valid.eq(pacer.o.valid), pacer.o.ready.eq(tx.i.ready),
                 *(tx.i.payload[f].eq(pacer.o.payload[f]) for f in fields),
                 tx.cut.eq(pacer.o.payload.cut)]
