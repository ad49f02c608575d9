"""The last port's demux of an odd Fred_m(P): port P-1 in, m wires out."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import wire_bits
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import microswitch_latency, reduction_latency
from hdl.emit.hierarchy import SeparateModule, flit_suffix
from hdl.designs.layouts import flit_layout

from .delay_line import DelayLine
from .microswitch_ports import buffer_output, gate_input
from .modes import demux_mode_layout
from .select_fork import SelectFork

__all__ = ["Demux"]


class Demux(SeparateModule, wiring.Component):
    """Forwards the last port of an odd Fred_m(P), P = 2r + 1, onto one of m wires (wire k
    enters middle subnetwork k at its last sub-port r).

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`; middle: number of wires m (>= 2).

    Members:
        port: ``In(stream.Signature(flit.layout))`` (port P-1).
        wire: ``Out(stream.Signature(flit.layout)).array(middle)``.
        mode: ``In(demux_mode_layout(middle))``: ``en wire``
            (``hdl.contracts.encoding.DemuxMode``); change only while not busy.
        busy: ``Out(1)``: some flit is inside.
        route: ``In(wire_bits(middle))`` (only ``routed``): the wire of the entering flit,
            carried with it through the delay line (as
            :class:`~hdl.designs.switch.input_microswitch.InputMicroswitch`'s ``route0``).

    A disabled port is never consumed (its flits wait). Latency: :attr:`latency` = that of an
    input microswitch (``hdl.contracts.timing.microswitch_latency``): a :class:`DelayLine` as deep
    as the reduction unit stands in for the adder, then the registered wire buffers, so that the
    last port's path through the switch takes as many cycles as every other path. One flit
    per cycle; no ``valid`` depends on a ``ready``.
    """

    def __init__(self, *, flit: FlitFormat, middle: int, routed: bool = False):
        self.flit = flit
        self.middle = middle
        self.routed = bool(routed)
        shape = flit_layout(flit)
        super().__init__({
            "port": In(stream.Signature(shape)),
            "wire": Out(stream.Signature(shape)).array(middle),
            "mode": In(demux_mode_layout(middle)),
            "busy": Out(1),
            **({"route": In(wire_bits(middle))} if self.routed else {}),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("demux", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_demux_m3_fp16x4_t8``."""
        routed = "_routed" if self.routed else ""
        return f"fred_demux_m{self.middle}_{flit_suffix(self.flit)}{routed}"

    def elaborate(self, platform) -> Module:
        m = Module()
        mode = self.mode
        shape = flit_layout(self.flit)
        depth = reduction_latency(self.flit.dtype)
        fork = m.submodules.fork = SelectFork(shape, inputs=1, outputs=self.middle)
        if self.routed:
            # the route travels with the flit through the delay line
            carried = data.StructLayout({"flit": shape, "route": unsigned(wire_bits(self.middle))})
            delay = m.submodules.delay = DelayLine(carried, depth=depth)
            m.d.comb += [delay.i.valid.eq(self.port.valid & mode.en),
                         delay.i.payload.flit.eq(self.port.payload),
                         delay.i.payload.route.eq(self.route),
                         self.port.ready.eq(delay.i.ready & mode.en),
                         fork.i[0].valid.eq(delay.o.valid),
                         fork.i[0].payload.eq(delay.o.payload.flit),
                         delay.o.ready.eq(fork.i[0].ready)]
        else:
            delay = m.submodules.delay = DelayLine(shape, depth=depth)
            gate_input(m, self.port, delay.i, mode.en)
            wiring.connect(m, delay.o, fork.i[0])
        busy = [delay.busy, fork.busy]
        for k in range(self.middle):
            here = mode.en & (mode.wire == k)
            if self.routed:
                here = delay.o.valid & (delay.o.payload.route == k)
            m.d.comb += [
                fork.enable[k].eq(here),
                fork.select[k].eq(0),
            ]
            busy.append(buffer_output(m, fork.o[k], self.wire[k], name=f"wire{k}_buffer",
                                      layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
