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
from .packetizer import Packetizer
from .rate_limiter import RateLimiter

__all__ = ["IoController"]


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

    Rate: a paced :class:`RateLimiter` (restarted by ``engine.start``) between the engine and
    the packetizer (the memory reads flit k by the end of its interval, (k + 1) / ``rate``
    cycles after the start: a packet's flits leave at the controller's rate, so the L1's input buffer holds them until the packet has arrived) and one between
    the depacketizer and the engine (the memory writes a flit in 1 / ``rate`` cycles: the
    receive buffer drains, and returns credits to the L1, at that rate, so the switch sending
    into the controller is paced by credits, never loses a flit). Latency: the packetizer's 0
    and the depacketizer's 1 cycle; the limiters add none.
    """

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, rate):
        rate = Fraction(rate)
        self.rate = (rate.numerator, rate.denominator)
        self.flit, self.packet, self.depth = flit, packet, depth
        link_flit = FlitFormat(dtype=flit.dtype, lanes=flit.lanes, tag_width=packet.header_width)
        nvc = len(DATA_VCS)
        super().__init__({"o": Out(link_signature(flit_layout(link_flit))), "credit_in": In(2).array(nvc),
                          "i": In(link_signature(flit_layout(link_flit))), "credit_out": Out(2).array(nvc)})
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
        m.d.comb += [read.restart.eq(self.engine.start), write.restart.eq(self.engine.start)]
        wiring.connect(m, self.engine.tx, read.i)
        wiring.connect(m, read.o, self.tx.i)
        wiring.connect(m, self.rx.o, write.i)
        wiring.connect(m, write.o, self.engine.rx)
        m.d.comb += [self.o.valid.eq(self.tx.o.valid), self.o.payload.eq(self.tx.o.payload),
                     self.rx.i.valid.eq(self.i.valid), self.rx.i.payload.eq(self.i.payload)]
        for v in range(len(DATA_VCS)):
            m.d.comb += [self.tx.credit[v].eq(self.credit_in[v]), self.credit_out[v].eq(self.rx.credit[v])]
        return m
