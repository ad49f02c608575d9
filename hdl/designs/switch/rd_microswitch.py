"""The RD microswitch: the whole of Fred_m(2)."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import RD_IN0, RD_IN1, RD_SUM
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import microswitch_latency
from hdl.emit.hierarchy import SeparateModule, flit_suffix
from hdl.designs.layouts import flit_layout

from .microswitch_ports import buffer_output, gate_input
from .modes import RD_MODE_LAYOUT
from .reduce_path import ReducePath
from .select_fork import SelectFork

__all__ = ["RDMicroswitch"]


class RDMicroswitch(SeparateModule, wiring.Component):
    """2 x 2 element: each output is none | in0 | in1 | in0 + in1.

    Parameters:
        flit: :class:`~hdl.contracts.flit.FlitFormat`.

    Members:
        in0, in1: ``In(stream.Signature(flit.layout))``.
        out0, out1: ``Out(stream.Signature(flit.layout))``.
        mode: ``In(RD_MODE_LAYOUT)``: ``out0(2) out1(2)`` (``hdl.contracts.encoding.RDMode``); if
            either is 3 (sum) neither may be 1 or 2. Change only while not busy.
        busy: ``Out(1)``.

    Pass, cross, broadcast of one input, reduce to one output, and reduce + broadcast
    (all-reduce of two ports). An input no output uses is never consumed. Latency:
    :attr:`latency` = reduction latency + 1 on every path; one flit per cycle per port.
    """

    def __init__(self, *, flit: FlitFormat):
        self.flit = flit
        shape = flit_layout(flit)
        super().__init__({
            "in0": In(stream.Signature(shape)),
            "in1": In(stream.Signature(shape)),
            "out0": Out(stream.Signature(shape)),
            "out1": Out(stream.Signature(shape)),
            "mode": In(RD_MODE_LAYOUT),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return microswitch_latency("rd", self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_rd_ms_fp16x4_t8``."""
        return f"fred_rd_ms_{flit_suffix(self.flit)}"

    def elaborate(self, platform) -> Module:
        m = Module()
        out_modes = (self.mode.out0, self.mode.out1)
        reduce = (out_modes[0] == RD_SUM) | (out_modes[1] == RD_SUM)
        uses_in0 = Cat(*((mode == RD_IN0) | (mode == RD_SUM) for mode in out_modes)).any()
        uses_in1 = Cat(*((mode == RD_IN1) | (mode == RD_SUM) for mode in out_modes)).any()

        shape = flit_layout(self.flit)
        path = m.submodules.path = ReducePath(flit=self.flit)
        fork = m.submodules.fork = SelectFork(shape, inputs=2, outputs=2)
        gate_input(m, self.in0, path.in0, uses_in0)
        gate_input(m, self.in1, path.in1, uses_in1)
        m.d.comb += path.reduce.eq(reduce)
        wiring.connect(m, path.lane0, fork.i[0])  # in0, or the sum
        wiring.connect(m, path.lane1, fork.i[1])  # in1

        busy = [path.busy, fork.busy]
        for j, (port, mode) in enumerate(zip((self.out0, self.out1), out_modes)):
            m.d.comb += [
                fork.enable[j].eq(mode != 0),
                fork.select[j].eq(mode == RD_IN1),
            ]
            busy.append(buffer_output(m, fork.o[j], port, name=f"out{j}_buffer", layout=shape))
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
