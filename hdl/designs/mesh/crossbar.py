"""The mesh router's crossbar: one registered output per port, fed by any input VC's head."""

from __future__ import annotations

from functools import reduce
from operator import or_

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_PORTS, MESH_VCS, MeshFlitFormat
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["Crossbar"]


class Crossbar(wiring.Component):
    """10 x 5 crossbar with an output register per port.

    Parameters: flit (:class:`MeshFlitFormat`).

    Members:
        heads: ``In(flit).array(10)``: requester k's head flit (input ``k // 2``, VC ``k % 2``).
        move: ``In(5)``; select: ``In(range(10)).array(5)``: the allocator's decision.
        o: ``Out(link_signature(flit)).array(5)``: the output links, straight from registers.

    Latency: 1 cycle (the output register). No backpressure: the allocator moves a flit only
    with a downstream credit, so the register is always free to take one.
    """

    def __init__(self, *, flit: MeshFlitFormat):
        self.flit = flit
        shape = struct_layout(flit.fields)
        n = MESH_PORTS * MESH_VCS
        super().__init__({
            "heads": In(shape).array(n),
            "move": In(MESH_PORTS),
            "select": In(range(n)).array(MESH_PORTS),
            "o": Out(link_signature(shape)).array(MESH_PORTS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        for o in range(MESH_PORTS):
            # an AND-OR multiplexer: no case statement over the 10 of 16 select values in use
            picked = Signal(self.flit.width, name=f"picked{o}")
            m.d.comb += picked.eq(reduce(or_, (Mux(self.select[o] == k, head.as_value(), 0)
                                               for k, head in enumerate(self.heads))))
            m.d.sync += self.o[o].valid.eq(self.move[o])
            with m.If(self.move[o]):
                m.d.sync += self.o[o].payload.eq(picked)
        return m
