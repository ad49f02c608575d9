"""``IoController``: an I/O controller of the packet fabric (docs/fabric_rtl.md, "I/O
controllers"): the external memory's side of weight streaming and gradient reduce-out."""

from __future__ import annotations

from fractions import Fraction

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import NPU_BUFFER
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.layouts import flit_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .depacketizer import Depacketizer
from .npu_engine import NpuEngine
from .packet_assembler import PacketAssembler
from .packetizer import Packetizer
from .rate_limiter import RateLimiter

__all__ = ["IoController", "endpoint_link_members"]


def endpoint_link_members(flit: FlitFormat, packet: PacketFormat) -> dict:
    """The signature members of a packet-fabric endpoint's two links to its L1 port: ``o`` /
    ``credit_in`` (to the L1's input, its credits back, 2 bits per data VC), ``i`` /
    ``credit_out`` (from the L1's output, credits to it); flits of ``flit``'s data with
    ``packet``'s header as tag."""
    link = flit_layout(FlitFormat(dtype=flit.dtype, lanes=flit.lanes, tag_width=packet.header_width))
    nvc = len(DATA_VCS)
    return {"o": Out(link_signature(link)), "credit_in": In(2).array(nvc),
            "i": In(link_signature(link)), "credit_out": Out(2).array(nvc)}


class IoController(wiring.Component):
    """An endpoint that injects and sinks at ``rate`` of an NPU link, with credits.

    Parameters: ``flit`` (:class:`FlitFormat`), ``packet`` (:class:`PacketFormat`), ``depth``
    (flits per data VC of the L1's input buffer: the packetizer's credits, and of this
    endpoint's receive buffer), ``rate``: flits per cycle, a fraction in (0, 1] (the paper's
    128 GBps / 3 TBps = 16/375, ``hdl.contracts.fabric.IO_RATE``).

    Members: as an NPU of :class:`~hdl.designs.fabric.packet_fabric_top.PacketFabricTop`:
    ``engine`` (an :class:`NpuEngine`: the memory's data, generated from the controller's
    weights, sent; the data it must receive, checked), ``tx`` (:class:`Packetizer`) and
    ``rx`` (:class:`Depacketizer`), whose ports the top connects; ``o`` / ``credit_in``
    (to the L1's input, its credits back), ``i`` / ``credit_out`` (from the L1's output,
    credits to it).

    Rate: a paced :class:`RateLimiter` (restarted by ``engine.start``) after the engine, the
    memory: it reads flit k at the end of its interval, (k + 1) / ``rate`` cycles after the
    start, into a :class:`PacketAssembler` of one packet (``packet.packet_flits`` flits), which
    offers a packet to the packetizer only once the whole packet (or the stream's shorter last
    one) is in it: the packetizer starts it with credits for all of it and sends it in
    consecutive cycles, at the link's rate, as a controller that fills a packet buffer from its
    memory and then sends the packet. So a controller packet holds the L1's output it crosses
    for its length, not for its memory time (the model's fluid link sharing: its stream uses
    ``rate`` of a link). Latency: packet p's first flit leaves ceil((p + 1) k / ``rate``)
    cycles after the start (k = ``packet_flits``; 188 for the first at 8 flits and 16/375),
    its last k - 1 cycles later; the stream's last flit leaves at most k - 1 cycles after the
    memory read it (the model's fluid source has it leave at once). Buffer: ``packet_flits``
    flits on the sending side (the memory waits when it is full, i.e. when the L1 has no
    credits for the packet in it). The receiving side is the sink-limited one: a paced limiter
    between the depacketizer and the engine (the memory writes a flit in 1 / ``rate`` cycles:
    the receive buffer drains, and returns credits to the L1, at that rate, so the switch
    sending into the controller is paced by credits, never loses a flit); the depacketizer's
    1 cycle of latency, the limiters add none.
    """

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, rate):
        rate = Fraction(rate)
        self.rate = (rate.numerator, rate.denominator)
        self.flit, self.packet, self.depth = flit, packet, depth
        super().__init__(endpoint_link_members(flit, packet))
        self.engine = NpuEngine(flit, buffer=NPU_BUFFER)
        self.tx = Packetizer(flit=flit, packet=packet, depth=depth)
        self.rx = Depacketizer(flit=flit, packet=packet, depth=depth)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.engine, m.submodules.tx, m.submodules.rx = self.engine, self.tx, self.rx
        layout = flit_layout(self.flit)
        # paced: the memory reads (writes) flit k by the end of its interval, (k + 1) / rate
        # cycles after the start, as a 128 GBps device does; from the run's start
        read = m.submodules.read_rate = RateLimiter(layout, rate=self.rate, paced=True)
        write = m.submodules.write_rate = RateLimiter(layout, rate=self.rate, paced=True)
        # a packet leaves whole, at link rate: paced flits sent as they are read would hold
        # every output on the packet's path for its memory time (k / rate cycles)
        fill = m.submodules.assembler = PacketAssembler(layout, packet_flits=self.packet.packet_flits)
        m.d.comb += [read.restart.eq(self.engine.start), write.restart.eq(self.engine.start),
                     fill.restart.eq(self.engine.start)]
        wiring.connect(m, self.engine.tx, read.i)
        wiring.connect(m, read.o, fill.i)
        wiring.connect(m, fill.o, self.tx.i)
        wiring.connect(m, self.rx.o, write.i)
        wiring.connect(m, write.o, self.engine.rx)
        m.d.comb += [self.o.valid.eq(self.tx.o.valid), self.o.payload.eq(self.tx.o.payload),
                     self.rx.i.valid.eq(self.i.valid), self.rx.i.payload.eq(self.i.payload)]
        for v in range(len(DATA_VCS)):
            m.d.comb += [self.tx.credit[v].eq(self.credit_in[v]), self.credit_out[v].eq(self.rx.credit[v])]
        return m
