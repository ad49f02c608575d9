"""Dimension-order route computation of the mesh router (combinational)."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, LOCAL, MESH_PORTS, NORTH, SOUTH, VC_ORDERS, WEST, XY

__all__ = ["RouteCompute"]


class RouteCompute(wiring.Component):
    """The output port a head flit asks for: ``hdl.contracts.mesh.route_port`` in logic.

    Parameters: coord_bits: bits of a coordinate; order: ``"xy"`` (correct X first) or
    ``"yx"`` -- fixed per virtual channel, so each VC's route compute is constant logic.

    Members:
        pos_x, pos_y: ``In(coord_bits)``: this router's coordinates.
        dest_x, dest_y: ``In(coord_bits)``: the flit's destination.
        port: ``Out(5)``: one-hot output port (bit ``LOCAL`` once the flit has arrived).

    Latency: combinational.
    """

    def __init__(self, *, coord_bits: int, order: str):
        if order not in VC_ORDERS:
            raise FredError(f"order must be one of {', '.join(VC_ORDERS)}, got {order!r}")
        self.order = order
        super().__init__({
            "pos_x": In(coord_bits), "pos_y": In(coord_bits),
            "dest_x": In(coord_bits), "dest_y": In(coord_bits),
            "port": Out(MESH_PORTS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        x_moves = [(self.dest_x > self.pos_x, EAST), (self.dest_x < self.pos_x, WEST)]
        y_moves = [(self.dest_y > self.pos_y, SOUTH), (self.dest_y < self.pos_y, NORTH)]
        moves = x_moves + y_moves if self.order == XY else y_moves + x_moves
        # the first dimension still to correct wins; none left: the local port
        with m.If(moves[0][0]):
            m.d.comb += self.port.eq(1 << moves[0][1])
        for condition, port in moves[1:]:
            with m.Elif(condition):
                m.d.comb += self.port.eq(1 << port)
        with m.Else():
            m.d.comb += self.port.eq(1 << LOCAL)
        return m
