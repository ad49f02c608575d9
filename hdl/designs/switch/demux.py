"""The last port's demux of an odd Fred_m(P): port P-1 in, m wires out."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

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

    A disabled port is never consumed (its flits wait). Latency: :attr:`latency` = that of an
    input microswitch (``hdl.contracts.timing.microswitch_latency``): a :class:`DelayLine` as deep
    as the reduction unit stands in for the adder, then the registered wire buffers, so that the
    last port's path through the switch takes as many cycles as every other path. One flit
    per cycle; no ``valid`` depends on a ``ready``.
    """

    def __init__(self, *, flit: FlitFormat, middle: int):
        self.flit = flit
        self.middle = middle
        shape = flit_layout(flit)
        super().__init__({
            "port": In(stream.Signature(shape)),
            "wire": Out(stream.Signature(shape)).array(middle),
            "mode": In(demux_mode_layout(middle)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("demux", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_demux_m3_fp16x4_t8``."""
        return f"fred_demux_m{self.middle}_{flit_suffix(self.flit)}"

    def elaborate(self, platform) -> Module:
        m = Module()
        mode = self.mode
        shape = flit_layout(self.flit)
        delay = m.submodules.delay = DelayLine(shape, depth=reduction_latency(self.flit.dtype))
        fork = m.submodules.fork = SelectFork(shape, inputs=1, outputs=self.middle)
        gate_input(m, self.port, delay.i, mode.en)
        wiring.connect(m, delay.o, fork.i[0])
        busy = [delay.busy, fork.busy]
        for k in range(self.middle):
            m.d.comb += [
                fork.enable[k].eq(mode.en & (mode.wire == k)),
                fork.select[k].eq(0),
            ]
            busy.append(buffer_output(m, fork.o[k], self.wire[k], name=f"wire{k}_buffer",
                                      layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
