"""The last port's mux of an odd Fred_m(P): m wires in, port P-1 out."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import microswitch_latency
from hdl.emit.hierarchy import SeparateModule, flit_suffix
from hdl.designs.layouts import flit_layout

from .microswitch_ports import buffer_output
from .modes import mux_mode_layout
from .select_fork import SelectFork

__all__ = ["Mux"]


class Mux(SeparateModule, wiring.Component):
    """Drives the last port of an odd Fred_m(P), P = 2r + 1, from one of m wires (wire k comes
    from the last output sub-port r of middle subnetwork k).

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`; middle: number of wires m (>= 2).

    Members:
        wire: ``In(stream.Signature(flit.layout)).array(middle)``.
        port: ``Out(stream.Signature(flit.layout))`` (port P-1).
        mode: ``In(mux_mode_layout(middle))``: ``en wire`` (``hdl.contracts.encoding.MuxMode``);
            change only while not busy.
        busy: ``Out(1)``: some flit is inside.

    A wire the mode does not select is never consumed. Latency: :attr:`latency` = that of an
    output microswitch (its registered output buffer); one flit per cycle.
    """

    def __init__(self, *, flit: FlitFormat, middle: int):
        self.flit = flit
        self.middle = middle
        shape = flit_layout(flit)
        super().__init__({
            "wire": In(stream.Signature(shape)).array(middle),
            "port": Out(stream.Signature(shape)),
            "mode": In(mux_mode_layout(middle)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("mux", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_mux_m3_fp16x4_t8``."""
        return f"fred_mux_m{self.middle}_{flit_suffix(self.flit)}"

    def elaborate(self, platform) -> Module:
        m = Module()
        shape = flit_layout(self.flit)
        fork = m.submodules.fork = SelectFork(shape, inputs=self.middle, outputs=1)
        for k in range(self.middle):
            wiring.connect(m, wiring.flipped(self.wire[k]), fork.i[k])
        m.d.comb += [
            fork.enable[0].eq(self.mode.en),
            fork.select[0].eq(self.mode.wire),
        ]
        busy = buffer_output(m, fork.o[0], self.port, name="port_buffer", layout=shape)
        m.d.comb += self.busy.eq(fork.busy | busy)
        return m
