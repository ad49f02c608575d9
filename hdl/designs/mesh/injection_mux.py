"""An NPU's injection into its router's local port: its engines' flits, by credits per VC."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_VCS, MeshFlitFormat
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["InjectionMux"]


class InjectionMux(wiring.Component):
    """Input ``v`` (one engine port, VC ``v``) sends a flit when it holds one and a credit of
    the router's local input buffer for VC v; when both can, they alternate (round robin per
    flit: the router's input buffer sorts flits by VC, so packets of the two VCs may
    interleave on the local link).

    Parameters: flit (:class:`MeshFlitFormat`), depth (the router's flits per VC).

    Members: ``i`` (``In(stream).array(2)``), ``o`` (``Out(link)``, to the router's local
    input), ``credit`` (``In(2)``, the router's ``i_credit`` of the local port).

    Latency: combinational (``o.valid`` from ``i[v].valid`` and the registered counters).
    """

    def __init__(self, *, flit: MeshFlitFormat, depth: int):
        self.flit, self.depth = flit, depth
        shape = struct_layout(flit.fields)
        super().__init__({"i": In(stream.Signature(shape)).array(MESH_VCS),
                          "o": Out(link_signature(shape)), "credit": In(MESH_VCS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        last_won = Signal(range(MESH_VCS))
        can = [Signal(name=f"can{v}") for v in range(MESH_VCS)]
        pick = Signal(range(MESH_VCS))
        for v in range(MESH_VCS):
            credits = Signal(range(self.depth + 2), init=self.depth, name=f"credits{v}")
            m.d.comb += can[v].eq(self.i[v].valid & (credits != 0))
            m.d.sync += credits.eq(credits - (self.i[v].ready & self.i[v].valid) + self.credit[v])
        # VC 1 when it can and VC 0 cannot, or both can and VC 0 went last
        m.d.comb += pick.eq(can[1] & (~can[0] | (last_won == 0)))
        go = can[0] | can[1]
        for v in range(MESH_VCS):
            m.d.comb += self.i[v].ready.eq(go & (pick == v))
        with m.If(go):
            m.d.sync += last_won.eq(pick)
        m.d.comb += [self.o.valid.eq(go),
                     self.o.payload.eq(self.i[1].payload),
                     ]
        with m.If(pick == 0):
            m.d.comb += self.o.payload.eq(self.i[0].payload)
        return m
