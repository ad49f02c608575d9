"""The output microswitch of Fred_m(P): m wires in, ports (2v, 2v+1) out."""

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
from .modes import output_mode_layout
from .select_fork import SelectFork

__all__ = ["OutputMicroswitch"]


class OutputMicroswitch(SeparateModule, wiring.Component):
    """Each output takes one wire; both may take the same wire (broadcast).

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`; middle: number of wires m (>= 2).

    Members:
        wire: ``In(stream.Signature(flit.layout)).array(middle)`` (wire k from middle subnetwork k).
        out0, out1: ``Out(stream.Signature(flit.layout))`` (ports 2v and 2v+1).
        mode: ``In(output_mode_layout(middle))``: ``out0_en out0_wire out1_en out1_wire``
            (``hdl.contracts.encoding.OutputMode``); change only while not busy.
        busy: ``Out(1)``: some flit is inside.

    Broadcast keeps a per-output pending mask (:class:`SelectFork`): a wire flit is consumed
    once both outputs took it, and neither takes it twice. A wire no output takes is never
    consumed. Latency: :attr:`latency` = 1 (registered output buffers); one flit per cycle.
    """

    def __init__(self, *, flit: FlitFormat, middle: int):
        self.flit = flit
        self.middle = middle
        shape = flit_layout(flit)
        super().__init__({
            "wire": In(stream.Signature(shape)).array(middle),
            "out0": Out(stream.Signature(shape)),
            "out1": Out(stream.Signature(shape)),
            "mode": In(output_mode_layout(middle)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("output", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_output_ms_m3_fp16x4_t8``."""
        return f"fred_output_ms_m{self.middle}_{flit_suffix(self.flit)}"

    def elaborate(self, platform) -> Module:
        m = Module()
        mode = self.mode
        shape = flit_layout(self.flit)
        fork = m.submodules.fork = SelectFork(shape, inputs=self.middle, outputs=2)
        for k in range(self.middle):
            wiring.connect(m, wiring.flipped(self.wire[k]), fork.i[k])
        m.d.comb += [
            fork.enable[0].eq(mode.out0_en),
            fork.select[0].eq(mode.out0_wire),
            fork.enable[1].eq(mode.out1_en),
            fork.select[1].eq(mode.out1_wire),
        ]
        busy = [fork.busy]
        for j, port in enumerate((self.out0, self.out1)):
            busy.append(buffer_output(m, fork.o[j], port, name=f"out{j}_buffer", layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
