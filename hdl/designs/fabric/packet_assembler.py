"""``PacketAssembler``: holds a stream's flits until a whole packet is there, then lets the
packet go at the consumer's rate (docs/fabric_rtl.md, "I/O controllers": the controller fills a
packet at its memory's rate and sends it at the link's)."""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

__all__ = ["PacketAssembler", "none_held"]


class PacketAssembler(wiring.Component):
    """A buffer of one packet between a slow producer and a packetizer.

    Parameters: ``layout`` (the stream's payload layout; it has a ``last`` field, the end of
    the producer's stream, and may have a ``cut`` field, the end of an engine's chunk:
    :func:`~hdl.designs.layouts.chunked_flit_layout`), ``packet_flits`` (flits per packet, the
    packetizer's: a packet is ``packet_flits`` flits, or fewer up to a flit with ``last`` or
    ``cut``, as the packetizer cuts them, so the assembler's packets are the packetizer's).

    Members: ``i`` (``In(stream)``), ``o`` (``Out(stream)``), ``restart`` (In: empty the buffer
    and start counting a new packet, e.g. at the run's start).

    Behaviour: a flit of ``o`` is offered only when the packet it belongs to is wholly in the
    buffer, so a packetizer that starts a packet on it (with credits for all of it) sends the
    packet's flits in consecutive cycles. Buffer: ``packet_flits`` flits (one packet; the next
    packet's flits enter as the current one leaves). Latency: the first flit of a packet is
    offered the cycle after the packet's last flit entered (the FIFO's write), so a producer
    of ``a / b`` flits per cycle with nothing in the way (the paced
    :class:`~hdl.designs.fabric.rate_limiter.RateLimiter`: flit j in cycle ceil((j + 1) b / a)
    - 1) has packet p's first flit leave in cycle ceil((p + 1) k b / a) (k = ``packet_flits``),
    k b / a after the start rounded up as the limiter rounds. Backpressure: ``i.ready`` is the
    buffer's room only (never ``o.ready``), so a producer that has to wait (a full buffer, its
    packet not yet taken) waits; ``o.valid`` never depends on ``o.ready``.
    """

    def __init__(self, layout, *, packet_flits: int):
        if isinstance(packet_flits, bool) or not isinstance(packet_flits, int) or packet_flits < 1:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"packet_flits must be an integer >= 1, got {packet_flits!r}")
        self.layout, self.packet_flits = layout, packet_flits
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout)),
                          "restart": In(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        size = self.packet_flits
        fifo = m.submodules.fifo = ResetInserter(self.restart)(
            SyncFIFO(width=Shape.cast(self.layout).width, depth=size))
        filled = Signal(range(size), name="filled")        # flits of the packet entering
        # whole packets in the buffer not yet wholly sent: at most 2 (one leaving, and a
        # shorter last packet that entered behind it)
        whole = Signal(range(size + 2), name="whole")
        sent = Signal(range(size), name="sent")            # flits of the packet leaving
        put = self.i.valid & fifo.w_rdy
        take = self.o.valid & self.o.ready
        ends_in = put & (_ends_packet(self.i.payload) | (filled == size - 1))
        out = Signal.like(self.o.payload)
        m.d.comb += [
            fifo.w_en.eq(self.i.valid), fifo.w_data.eq(self.i.payload),
            self.i.ready.eq(fifo.w_rdy),
            out.eq(fifo.r_data),
            self.o.payload.eq(out),
            self.o.valid.eq(fifo.r_rdy & (whole != 0)),
            fifo.r_en.eq(take),
        ]
        ends_out = take & (_ends_packet(out) | (sent == size - 1))
        with m.If(put):
            m.d.sync += filled.eq(filled + 1)
            with m.If(ends_in):
                m.d.sync += filled.eq(0)
        with m.If(take):
            m.d.sync += sent.eq(sent + 1)
            with m.If(ends_out):
                m.d.sync += sent.eq(0)
        m.d.sync += whole.eq(whole + ends_in - ends_out)
        with m.If(self.restart):   # last: it wins over the updates above
            m.d.sync += [filled.eq(0), whole.eq(0), sent.eq(0)]
        return m


def _ends_packet(flit):
    """The flit ends a packet before its ``packet_flits``: the stream's ``last``, or its
    chunk's end where the layout carries one (``cut``)."""
    return flit.last | flit.cut if "cut" in flit.shape().members else flit.last


def none_held(m: Module, entering, leaving, *, most: int, name: str):
    """High while no flit is between stream ``entering`` (its handshake counts a flit in) and
    stream ``leaving`` (a flit out): an occupancy counter of up to ``most`` flits, registered
    (a flit is held from the cycle after it entered). A paced sender's run (a
    :class:`PacketAssembler` behind a paced limiter: a ``WritePacer``, an ``IoController``'s
    memory side) ends only when this is high, because the sender's next restart empties
    the assembler: a run that ended at its engine's ``done`` (its last flit *entered*) would
    lose up to a packet."""
    held = Signal(range(most + 1), name=name)
    m.d.sync += held.eq(held + (entering.valid & entering.ready) - (leaving.valid & leaving.ready))
    return held == 0
