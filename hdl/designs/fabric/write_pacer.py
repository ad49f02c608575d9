"""``WritePacer``: an NPU's sending side paced to the sink it writes into (docs/fabric_rtl.md,
"Host rules": a host never injects into a sink faster than the sink drains)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import PACE_BITS, UNPACED

from .packet_assembler import PacketAssembler
from .rate_limiter import RateLimiter

__all__ = ["WritePacer", "PACE_BITS"]

class WritePacer(wiring.Component):
    """Between an NPU engine and its packetizer: passes the engine's stream at ``rate`` /
    ``divisor`` flits per cycle, whole packets at a time, or (``divisor`` 0) untouched.

    Why: an online write into an I/O controller (128 GBps, 16/375 of an NPU link) injected at
    link rate waits for the controller in the one FIFO per VC of every switch input on its
    path, and a collective on the same VC behind it waits too (head-of-line blocking,
    docs/fabric_validation.md "In-switch and online classes together"). Paced at the sink's
    rate shared by its ``divisor`` writers, the write never gets ahead of the sink, so nothing
    of it waits in the fabric beyond a packet or two.

    Parameters: ``layout`` (the engine's flit layout, with ``last``; the fabric's NPUs use
    :func:`~hdl.designs.layouts.chunked_flit_layout`, whose ``cut`` -- the engine's chunk end --
    ends a packet in the assembler as in the packetizer), ``rate`` = ``(a, b)``
    (the sink's rate, a / b flits per cycle: the fabric's ``io_rate``), ``packet_flits`` (the
    packetizer's packet length).

    Members: ``i`` (``In(stream)``, from the engine), ``o`` (``Out(stream)``, to the
    packetizer), ``divisor`` (In, :data:`PACE_BITS` bits: the writers sharing the sink, from
    the NPU's program; :data:`~hdl.contracts.fabric.UNPACED` (0): not paced, the pacer is a
    wire -- the rule is the pacer's alone: its limiter is bypassed then, so the limiter's
    ``rate_gate`` never gates a flit under a 0), ``restart`` (In: the run's start).

    Mechanism (the I/O controller's own sending side, one concept): a paced
    :class:`RateLimiter` of a / (b ``divisor``) -- flit k leaves it in cycle ceil((k + 1) b
    ``divisor`` / a) - 1 after it starts, exact (a flits in every b ``divisor`` cycles, no
    rounding drift) -- into a :class:`PacketAssembler` of one packet, which offers a packet
    only once it is whole, so the packetizer sends it in consecutive cycles at link rate and
    the packet holds a switch output for its length, not for its pacing time. The run's first
    packet (k = ``packet_flits`` flits) bypasses the limiter, so the sink holds a packet from
    the start and drains without a gap, as under a write at link rate; the limiter starts
    with the next flit (paced: tokens accumulate only while a flit waits). Bound: in any n
    cycles at most n a / (b ``divisor``) + k + 1 flits leave (one packet's burst above the
    rate; the sink's buffer, ``depth`` >= 2 packets, absorbs it). Latency: the first packet
    is offered the cycle after its k flits entered; packet p >= 1 about p k b ``divisor`` / a
    cycles later (rounded up as the limiter rounds); ``divisor`` 0: latency 0, ``o`` is
    ``i``. Backpressure: the
    limiter's ``i.ready`` is ``o.ready & rate``; the assembler's ``i.ready`` its room;
    ``o.valid`` never depends on ``o.ready``.
    """

    def __init__(self, layout, *, rate, packet_flits: int):
        a, b = rate
        if not (isinstance(a, int) and isinstance(b, int) and 0 < a <= b):
            raise FredError(f"rate must be a/b flits per cycle with 0 < a <= b, got {rate!r}")
        self.layout, self.rate, self.packet_flits = layout, (a, b), packet_flits
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout)),
                          "divisor": In(PACE_BITS), "restart": In(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        limit = m.submodules.limit = RateLimiter(self.layout, rate=self.rate, paced=True,
                                                 divisor_bits=PACE_BITS)
        fill = m.submodules.assembler = PacketAssembler(self.layout, packet_flits=self.packet_flits)
        # the run's first packet goes unpaced (the sink's buffer holds it): the sink then
        # drains from the first packet's arrival on, as under a write at link rate
        first = Signal(range(self.packet_flits + 1), name="first_flits")
        m.d.comb += [limit.divisor.eq(self.divisor), limit.restart.eq(self.restart),
                     fill.restart.eq(self.restart),
                     limit.i.payload.eq(self.i.payload), fill.i.payload.eq(limit.o.payload)]
        # unpaced: o is i; the limiter and the assembler get no flit (the limiter idles, so
        # its tokens stay at their restart value and its gate's divisor 0 never matters)
        with m.If(self.divisor == UNPACED):
            m.d.comb += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload),
                         self.i.ready.eq(self.o.ready)]
        with m.Else():
            m.d.comb += [self.o.valid.eq(fill.o.valid), self.o.payload.eq(fill.o.payload),
                         fill.o.ready.eq(self.o.ready)]
            with m.If(first < self.packet_flits):
                m.d.comb += [fill.i.valid.eq(self.i.valid), fill.i.payload.eq(self.i.payload),
                             self.i.ready.eq(fill.i.ready)]
                with m.If(self.i.valid & fill.i.ready):
                    m.d.sync += first.eq(Mux(self.i.payload.last, self.packet_flits, first + 1))
            with m.Else():
                m.d.comb += [limit.i.valid.eq(self.i.valid), self.i.ready.eq(limit.i.ready),
                             fill.i.valid.eq(limit.o.valid), limit.o.ready.eq(fill.i.ready)]
        with m.If(self.restart):
            m.d.sync += first.eq(0)
        return m
