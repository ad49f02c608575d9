"""A wire between two mesh routers: flits one way and credits the other, each delayed."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS, MeshFlitFormat
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["MeshWire"]


class MeshWire(wiring.Component):
    """``latency`` registers on the flit path and as many on the credit path back.

    Parameters: flit (:class:`MeshFlitFormat`), latency (cycles, >= 1).

    Members: ``i`` (In link, from the upstream router's output), ``o`` (Out link, to the
    downstream router's input), ``credit_in`` (In(2), the downstream's credit pulses),
    ``credit_out`` (Out(2), to the upstream's ``o_credit``).

    Latency: a flit on ``i`` in cycle t is on ``o`` in cycle t + ``latency``; a credit pulse
    likewise. The rate is the routers' (their outputs' token counters); the wire takes a flit
    every cycle.
    """

    def __init__(self, *, flit: MeshFlitFormat, latency: int):
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
            raise FredError(f"wire latency must be an integer >= 1 cycle, got {latency!r}")
        self.flit, self.latency = flit, latency
        shape = struct_layout(flit.fields)
        super().__init__({"i": In(link_signature(shape)), "o": Out(link_signature(shape)),
                          "credit_in": In(MESH_VCS), "credit_out": Out(MESH_VCS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        valid, data, credit = self.i.valid, self.i.payload.as_value(), self.credit_in
        for stage in range(self.latency):
            v = Signal(name=f"valid{stage}")
            d = Signal(self.flit.width, name=f"data{stage}")
            c = Signal(MESH_VCS, name=f"credit{stage}")
            m.d.sync += [v.eq(valid), c.eq(credit)]
            with m.If(valid):      # the data register holds when nothing moves (less toggling)
                m.d.sync += d.eq(data)
            valid, data, credit = v, d, c
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(data), self.credit_out.eq(credit)]
        return m
