"""``fred_mesh_router``: the 2D-mesh baseline's router (docs/mesh_rtl.md)."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import (LOCAL, MESH_PORTS, MESH_VCS, VC_ORDERS, MeshFlitFormat,
                                check_link_rate, check_router_parameters, router_latency)
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .crossbar import Crossbar
from .input_buffer import MeshInputBuffer
from .output_credits import OutputCredits
from .route_compute import RouteCompute
from .switch_allocator import SwitchAllocator

__all__ = ["MeshRouter"]


class MeshRouter(wiring.Component):
    """Five-port mesh router: input buffers per VC, dimension-order route compute per VC, a
    round-robin switch allocator holding an output per packet, a 10 x 5 crossbar with output
    registers, credit counters per output and VC.

    Parameters (keyword-only, validated): flit (:class:`MeshFlitFormat`); depth: flits per VC
    of every input buffer, and the credits each output starts with (the neighbour's buffer
    has the same depth); link_rate: ``(a, b)`` flits per cycle of the four neighbour outputs
    (default ``(1, 1)``; the local port always moves one flit per cycle), a token counter per
    output (:class:`OutputCredits`): the mesh fabric's 750 GBps links beside the NPU's 3 TBps
    port are ``(1, 4)``.

    Members (ports numbered ``hdl.contracts.mesh``: 0 local, 1 north, 2 east, 3 south, 4 west):
        pos_x, pos_y: ``In(coord_bits)``: this router's coordinates (inputs, so that one module
            serves every router of a mesh).
        i: ``In(link_signature(flit)).array(5)``: input links (no ready; credit-based).
        i_credit: ``Out(2).array(5)``: bit v pulses when input n frees a VC v slot.
        o: ``Out(link_signature(flit)).array(5)``: output links; a VC v flit leaves only with a
            VC v credit, and a packet starts only with ``packet_flits`` of them.
        o_credit: ``In(2).array(5)``: credits the neighbour returns, per VC.
        overflow: sticky, some input VC got a flit while full (the sender broke the protocol).
        credit_error: sticky, some output got back more credits than the neighbour holds.

    Flow control: credit-based virtual cut-through (docs/mesh_rtl.md): a packet takes an output
    when the downstream VC has room for all of it, and holds the output to its last flit. VC 0
    routes X-Y, VC 1 Y-X (a flit keeps its VC end to end). Throughput: one flit per cycle per
    output; every input VC has its own crossbar input, so two VCs of one input can feed two
    outputs in the same cycle.

    Latency: :attr:`latency` = 2 cycles from a flit on ``i`` to it on ``o`` (uncontended, with
    credits): the input FIFO's write, then allocation into the output register. A credit pulse
    on ``i_credit`` is combinational from the read of the input FIFO.
    """

    def __new__(cls, *, flit: MeshFlitFormat, depth: int, link_rate=(1, 1)):
        check_router_parameters(flit=flit, depth=depth)
        check_link_rate(link_rate)
        return super().__new__(cls)

    def __init__(self, *, flit: MeshFlitFormat, depth: int, link_rate=(1, 1)):
        self.flit, self.depth, self.link_rate = flit, depth, check_link_rate(link_rate)
        shape = struct_layout(flit.fields)
        super().__init__({
            "pos_x": In(flit.coord_bits), "pos_y": In(flit.coord_bits),
            "i": In(link_signature(shape)).array(MESH_PORTS),
            "i_credit": Out(MESH_VCS).array(MESH_PORTS),
            "o": Out(link_signature(shape)).array(MESH_PORTS),
            "o_credit": In(MESH_VCS).array(MESH_PORTS),
            "overflow": Out(1),
            "credit_error": Out(1),
        })

    @property
    def latency(self) -> int:
        """Cycles from input link to output link, uncontended with credits (``router_latency``)."""
        return router_latency()

    def elaborate(self, platform) -> Module:
        m = Module()
        alloc = m.submodules.allocator = SwitchAllocator()
        xbar = m.submodules.crossbar = Crossbar(flit=self.flit)
        overflow, credit_error = [], []
        for n in range(MESH_PORTS):
            buf = m.submodules[f"in{n}"] = MeshInputBuffer(flit=self.flit, depth=self.depth)
            wiring.connect(m, wiring.flipped(self.i[n]), buf.i)
            m.d.comb += self.i_credit[n].eq(buf.credit)
            overflow.append(buf.overflow)
            for v, order in enumerate(VC_ORDERS):
                k = n * MESH_VCS + v
                head = buf.o[v]
                route = m.submodules[f"route{n}_{v}"] = RouteCompute(
                    coord_bits=self.flit.coord_bits, order=order)
                m.d.comb += [
                    route.pos_x.eq(self.pos_x), route.pos_y.eq(self.pos_y),
                    route.dest_x.eq(head.payload.dest_x), route.dest_y.eq(head.payload.dest_y),
                    alloc.request[k].eq(route.port),
                    alloc.head_valid[k].eq(head.valid),
                    alloc.last[k].eq(head.payload.last),
                    head.ready.eq(alloc.read[k]),
                    xbar.heads[k].eq(head.payload),
                ]
        for o in range(MESH_PORTS):
            credits = m.submodules[f"out{o}_credits"] = OutputCredits(
                flit=self.flit, depth=self.depth, rate=(1, 1) if o == LOCAL else self.link_rate)
            m.d.comb += [
                credits.spend.eq(alloc.spend[o]), credits.give.eq(self.o_credit[o]),
                alloc.room[o].eq(credits.room), alloc.has[o].eq(credits.has),
                xbar.move[o].eq(alloc.move[o]), xbar.select[o].eq(alloc.select[o]),
            ]
            credit_error.append(credits.error)
            wiring.connect(m, xbar.o[o], wiring.flipped(self.o[o]))
        m.d.comb += [self.overflow.eq(sum(overflow) != 0),
                     self.credit_error.eq(sum(credit_error) != 0)]
        return m
