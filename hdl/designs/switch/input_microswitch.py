"""The input microswitch of Fred_m(P): ports (2u, 2u+1) in, m wires out."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

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

    A disabled input is never consumed (its flits wait). Latency: :attr:`latency` = reduction
    latency + 1 (the registered wire buffers), on every path. One flit per cycle per wire;
    ``in*.ready`` is combinational from registered state, and no ``valid`` depends on a ``ready``.
    """

    def __init__(self, *, flit: FlitFormat, middle: int):
        self.flit = flit
        self.middle = middle
        shape = flit_layout(flit)
        super().__init__({
            "in0": In(stream.Signature(shape)),
            "in1": In(stream.Signature(shape)),
            "wire": Out(stream.Signature(shape)).array(middle),
            "mode": In(input_mode_layout(middle)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("input", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_input_ms_m3_fp16x4_t8``."""
        return f"fred_input_ms_m{self.middle}_{flit_suffix(self.flit)}"

    def elaborate(self, platform) -> Module:
        m = Module()
        mode = self.mode
        shape = flit_layout(self.flit)
        path = m.submodules.path = ReducePath(flit=self.flit)
        fork = m.submodules.fork = SelectFork(shape, inputs=2, outputs=self.middle)

        # Disabled inputs are held at the port so that no flit enters and gets stuck inside.
        gate_input(m, self.in0, path.in0, mode.in0_en)
        gate_input(m, self.in1, path.in1, mode.in1_en)
        m.d.comb += path.reduce.eq(mode.reduce)
        wiring.connect(m, path.lane0, fork.i[0])
        wiring.connect(m, path.lane1, fork.i[1])

        busy = [path.busy, fork.busy]
        for k in range(self.middle):
            lane0_here = mode.in0_en & (mode.in0_wire == k)
            lane1_here = mode.in1_en & ~mode.reduce & (mode.in1_wire == k)
            m.d.comb += [
                fork.enable[k].eq(lane0_here | lane1_here),
                fork.select[k].eq(~lane0_here),
            ]
            busy.append(buffer_output(m, fork.o[k], self.wire[k], name=f"wire{k}_buffer",
                                      layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
