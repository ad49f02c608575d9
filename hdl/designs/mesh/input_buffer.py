"""One input port of the mesh router: a FIFO per virtual channel, and the credits it returns."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_VCS, MeshFlitFormat, check_router_parameters
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["MeshInputBuffer"]


class MeshInputBuffer(wiring.Component):
    """Input port: one ``fifo.SyncFIFO`` of ``depth`` flits per VC, selected by the flit's ``vc``.

    Parameters (keyword-only, validated by :func:`check_router_parameters`):
        flit: :class:`MeshFlitFormat`; depth: flits per VC (>= ``flit.packet_flits``).

    Members:
        i: ``In(link_signature(flit))``: the link, no ``ready``: the sender holds ``depth``
            credits per VC and sends only with a credit.
        credit: ``Out(2)``: bit v pulses when a VC v slot is freed (a flit left ``o[v]``); the
            sender adds it back the next cycle.
        o: ``Out(stream.Signature(flit)).array(2)``: VC v's head flit; ``valid`` never depends
            on ``ready``.
        overflow: ``Out(1)``: sticky, a flit arrived for a full VC (the sender broke the credit
            protocol and the flit is lost); benches require it stays 0.

    Latency: a flit written in cycle t is at the head from cycle t + 1.
    """

    def __new__(cls, *, flit: MeshFlitFormat, depth: int):
        check_router_parameters(flit=flit, depth=depth)
        return super().__new__(cls)

    def __init__(self, *, flit: MeshFlitFormat, depth: int):
        self.flit, self.depth = flit, depth
        shape = struct_layout(flit.fields)
        super().__init__({
            "i": In(link_signature(shape)),
            "credit": Out(MESH_VCS),
            "o": Out(stream.Signature(shape)).array(MESH_VCS),
            "overflow": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        for v in range(MESH_VCS):
            buf = m.submodules[f"vc{v}"] = fifo.SyncFIFO(width=self.flit.width, depth=self.depth)
            write = self.i.valid & (self.i.payload.vc == v)
            m.d.comb += [
                buf.w_data.eq(self.i.payload.as_value()),
                buf.w_en.eq(write),
                self.o[v].valid.eq(buf.r_rdy),
                self.o[v].payload.eq(buf.r_data),
                buf.r_en.eq(self.o[v].ready),
                self.credit[v].eq(self.o[v].valid & self.o[v].ready),
            ]
            with m.If(write & ~buf.w_rdy):
                m.d.sync += self.overflow.eq(1)
        return m
