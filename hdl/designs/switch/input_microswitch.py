"""The input microswitch of Fred_m(P): ports (2u, 2u+1) in, m wires out."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import wire_bits
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import microswitch_latency
from hdl.emit.hierarchy import SeparateModule, flit_suffix
from hdl.designs.layouts import flit_layout

from .microswitch_ports import buffer_output, gate_input
from .modes import input_mode_layout
from .reduce_path import ReducePath
from .select_fork import SelectFork

__all__ = ["InputMicroswitch"]


class InputMicroswitch(SeparateModule, wiring.Component):
    """Routes each input to its own wire, or reduces both onto one wire.

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`; middle: number of wires m (>= 2).

    Members:
        in0, in1: ``In(stream.Signature(flit.layout))`` (ports 2u and 2u+1).
        wire: ``Out(stream.Signature(flit.layout)).array(middle)`` (wire k to middle subnetwork k).
        mode: ``In(input_mode_layout(middle))``: ``in0_en in0_wire in1_en in1_wire reduce``
            (``hdl.contracts.encoding.InputMode``); must be legal and change only while not busy.
        busy: ``Out(1)``: some flit is inside.
        route0, route1: ``In(wire_bits(middle))`` (only ``routed``): the wire of the flit
            entering on in0 / in1; sampled with the flit and carried through the pass line,
            so a passed flit takes the wire it entered with, whatever ``mode`` says by then
            (the packet switch's online paths: an input changes wire between two packets
            without waiting for the first to leave; ``docs/switch.md``, "Online unicast
            routing"). ``mode``'s wires still route a sum (``reduce``).

    A disabled input is never consumed (its flits wait). Latency: :attr:`latency` = reduction
    latency + 1 (the registered wire buffers), on every path. One flit per cycle per wire;
    ``in*.ready`` is combinational from registered state, and no ``valid`` depends on a ``ready``.
    """

    def __init__(self, *, flit: FlitFormat, middle: int, routed: bool = False):
        self.flit = flit
        self.middle = middle
        self.routed = bool(routed)
        shape = flit_layout(flit)
        routes = {}
        if self.routed:
            routes = {"route0": In(wire_bits(middle)), "route1": In(wire_bits(middle))}
        super().__init__({
            "in0": In(stream.Signature(shape)),
            "in1": In(stream.Signature(shape)),
            "wire": Out(stream.Signature(shape)).array(middle),
            "mode": In(input_mode_layout(middle)),
            "busy": Out(1),
            **routes,
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("input", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_input_ms_m3_fp16x4_t8``."""
        routed = "_routed" if self.routed else ""
        return f"fred_input_ms_m{self.middle}_{flit_suffix(self.flit)}{routed}"

    def elaborate(self, platform) -> Module:
        m = Module()
        mode = self.mode
        shape = flit_layout(self.flit)
        path = m.submodules.path = ReducePath(
            flit=self.flit, route_width=wire_bits(self.middle) if self.routed else 0)
        fork = m.submodules.fork = SelectFork(shape, inputs=2, outputs=self.middle)

        # Disabled inputs are held at the port so that no flit enters and gets stuck inside.
        gate_input(m, self.in0, path.in0, mode.in0_en)
        gate_input(m, self.in1, path.in1, mode.in1_en)
        m.d.comb += path.reduce.eq(mode.reduce)
        wiring.connect(m, path.lane0, fork.i[0])
        wiring.connect(m, path.lane1, fork.i[1])

        busy = [path.busy, fork.busy]
        if self.routed:
            m.d.comb += [path.in0_route.eq(self.route0), path.in1_route.eq(self.route1)]
        for k in range(self.middle):
            lane0_here = mode.in0_en & (mode.in0_wire == k)
            lane1_here = mode.in1_en & ~mode.reduce & (mode.in1_wire == k)
            if self.routed:
                # a passed flit claims the wire it entered with (only while it is there: two
                # lanes' flits never claim one wire, the router keeps their wires apart)
                lane0_here = Mux(mode.reduce, lane0_here,
                                 path.lane0.valid & (path.lane0_route == k))
                lane1_here = ~mode.reduce & path.lane1.valid & (path.lane1_route == k)
            m.d.comb += [
                fork.enable[k].eq(lane0_here | lane1_here),
                fork.select[k].eq(~lane0_here),
            ]
            busy.append(buffer_output(m, fork.o[k], self.wire[k], name=f"wire{k}_buffer",
                                      layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
