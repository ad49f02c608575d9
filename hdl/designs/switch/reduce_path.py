"""Two input streams to two lanes: either both passed (delayed) or summed onto lane 0."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import reduction_latency
from hdl.designs.layouts import flit_layout, framing_layout
from hdl.designs.reduction import ReductionUnit

from .delay_line import DelayLine

__all__ = ["ReducePath"]


class ReducePath(wiring.Component):
    """The compute part shared by the input and RD microswitches.

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`.

    Members:
        in0, in1: ``In(stream.Signature(flit.layout))``.
        lane0, lane1: ``Out(stream.Signature(flit.layout))``.
        reduce: ``In(1)``: lane 0 carries ``in0 + in1`` (joined: one flit of each per sum, framing
            of in0) and lane 1 is idle; else lane 0 carries in0 and lane 1 carries in1.
        busy: ``Out(1)``: some flit is inside (adder pipeline or delay lines).
        in0_route, in1_route: ``In(route_width)``; lane0_route, lane1_route:
            ``Out(route_width)`` (only with ``route_width`` > 0): a value sampled with each
            passed flit as it enters and offered with it on its lane (the input microswitch's
            wire of a flit routed online: ``docs/switch.md``, "Online unicast routing"); 0
            on lane 0 while reducing.

    Latency: :attr:`latency` = the reduction unit's latency (``hdl.contracts.timing.reduction_latency``)
    on every path: the pass paths go
    through delay lines of the same depth, so a flow's latency never depends on the modes.
    ``reduce`` must only change while ``busy`` is low. Backpressure: lane readies propagate
    to in0/in1 readies combinationally (no ready-to-valid path: lane valids are registers
    when the latency is >= 1).
    """

    def __init__(self, *, flit: FlitFormat, route_width: int = 0):
        self.flit = flit
        self.route_width = route_width
        self._latency = reduction_latency(flit.dtype)
        shape = flit_layout(flit)
        routes = {}
        if route_width:
            routes = {"in0_route": In(route_width), "in1_route": In(route_width),
                      "lane0_route": Out(route_width), "lane1_route": Out(route_width)}
        super().__init__({
            "in0": In(stream.Signature(shape)),
            "in1": In(stream.Signature(shape)),
            "lane0": Out(stream.Signature(shape)),
            "lane1": Out(stream.Signature(shape)),
            "reduce": In(1),
            "busy": Out(1),
            **routes,
        })

    @property
    def latency(self) -> int:
        return self._latency

    def elaborate(self, platform) -> Module:
        m = Module()
        adder = m.submodules.adder = ReductionUnit(
            dtype=self.flit.dtype, lanes=self.flit.lanes, sideband=framing_layout(self.flit))
        assert adder.latency == self._latency
        shape = flit_layout(self.flit)
        carried = shape
        if self.route_width:
            # the route travels with the flit through the pass line
            carried = data.StructLayout({"flit": shape, "route": unsigned(self.route_width)})
        pass0 = m.submodules.pass0 = DelayLine(carried, depth=self.latency)
        pass1 = m.submodules.pass1 = DelayLine(carried, depth=self.latency)
        in0_pass, in1_pass = pass0.i.payload, pass1.i.payload
        out0_pass, out1_pass = pass0.o.payload, pass1.o.payload
        if self.route_width:
            m.d.comb += [pass0.i.payload.route.eq(self.in0_route),
                         pass1.i.payload.route.eq(self.in1_route),
                         self.lane1_route.eq(pass1.o.payload.route)]
            with m.If(~self.reduce):
                m.d.comb += self.lane0_route.eq(pass0.o.payload.route)
            in0_pass, in1_pass = pass0.i.payload.flit, pass1.i.payload.flit
            out0_pass, out1_pass = pass0.o.payload.flit, pass1.o.payload.flit
        reduce = self.reduce

        m.d.comb += [
            # in0: to the adder's a operand when reducing, else through pass0
            adder.a.valid.eq(self.in0.valid & reduce),
            adder.a.payload.data.eq(self.in0.payload.data),
            adder.a.payload.sideband.last.eq(self.in0.payload.last),
            adder.a.payload.sideband.tag.eq(self.in0.payload.tag),
            pass0.i.valid.eq(self.in0.valid & ~reduce),
            in0_pass.eq(self.in0.payload),
            self.in0.ready.eq(reduce & adder.a.ready | ~reduce & pass0.i.ready),
            # in1: to the adder's b operand when reducing, else through pass1
            adder.b.valid.eq(self.in1.valid & reduce),
            adder.b.payload.data.eq(self.in1.payload.data),
            adder.b.payload.sideband.last.eq(self.in1.payload.last),
            adder.b.payload.sideband.tag.eq(self.in1.payload.tag),
            pass1.i.valid.eq(self.in1.valid & ~reduce),
            in1_pass.eq(self.in1.payload),
            self.in1.ready.eq(reduce & adder.b.ready | ~reduce & pass1.i.ready),
            # lane 0: the sum or in0
            adder.o.ready.eq(self.lane0.ready & reduce),
            pass0.o.ready.eq(self.lane0.ready & ~reduce),
            self.lane0.valid.eq(reduce & adder.o.valid | ~reduce & pass0.o.valid),
            # lane 1: in1 (idle while reducing)
            self.lane1.valid.eq(pass1.o.valid),
        ]
        with m.If(reduce):
            m.d.comb += [
                self.lane0.payload.data.eq(adder.o.payload.data),
                self.lane0.payload.last.eq(adder.o.payload.sideband.last),
                self.lane0.payload.tag.eq(adder.o.payload.sideband.tag),
            ]
        with m.Else():
            m.d.comb += self.lane0.payload.eq(out0_pass)
        m.d.comb += [
            self.lane1.payload.eq(out1_pass),
            pass1.o.ready.eq(self.lane1.ready),
        ]

        # Flits inside the adder: joint input transfers minus output transfers. The adder is a
        # black box (contract), so count rather than peek at its pipeline registers.
        in_adder = Signal(range(4 * self.latency + 8), name="in_adder")
        enter = adder.a.valid & adder.a.ready
        leave = adder.o.valid & adder.o.ready
        with m.If(enter & ~leave):
            m.d.sync += in_adder.eq(in_adder + 1)
        with m.Elif(leave & ~enter):
            m.d.sync += in_adder.eq(in_adder - 1)
        m.d.comb += self.busy.eq((in_adder != 0) | pass0.busy | pass1.busy)
        return m
