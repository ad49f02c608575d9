"""A serial I/O wrapper so a wide design can be placed and timed on a real FPGA package.

A ``fred_adder`` with 4 fp32 lanes has ~390 ports, more than any LFE5U-85F package has
pins. The harness feeds every input port of the wrapped component from one long shift
register (loaded bit-serially) and captures every output port into a register that
is shifted out bit-serially, so the design keeps 6 pins and every port stays
controllable and observable (nothing is optimised away). The timed paths are then
register to register, through the wrapped component.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SynthHarness"]


class SynthHarness(wiring.Component):
    """Wraps ``component`` (submodule ``dut``) behind a serial scan interface.

    Parameters:
        component: any ``wiring.Component`` clocked by ``sync``.

    Members:
        scan_in: ``In(1)`` serial data into the input register (shifted while ``shift``).
        shift: ``In(1)`` shift both chains by one bit (else the output register captures).
        scan_out: ``Out(1)`` the output register's LSB.

    The harness's own cost (one flip-flop per port bit plus a multiplexer per output
    bit) is not the wrapped design's: report the design's resources from its own
    synthesis and use the harness only for timing.
    """

    def __init__(self, component: wiring.Component):
        if not isinstance(component, wiring.Component):
            raise TypeError(f"SynthHarness needs a wiring.Component, got {component!r}")
        self._component = component
        super().__init__({"scan_in": In(1), "shift": In(1), "scan_out": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dut = dut = self._component
        inputs, outputs = [], []
        for path, member, value in dut.signature.flatten(dut):
            (inputs if member.flow == wiring.In else outputs).append(value)
        in_bits = sum(len(Value.cast(v)) for v in inputs)
        out_bits = sum(len(Value.cast(v)) for v in outputs)
        in_chain = Signal(in_bits, name="in_chain")
        out_chain = Signal(out_bits, name="out_chain")
        offset = 0
        for value in inputs:
            width = len(Value.cast(value))
            m.d.comb += value.eq(in_chain[offset:offset + width])
            offset += width
        with m.If(self.shift):
            m.d.sync += [
                in_chain.eq(Cat(in_chain[1:], self.scan_in)),
                out_chain.eq(out_chain[1:]),
            ]
        with m.Else():
            m.d.sync += out_chain.eq(Cat(*[Value.cast(v) for v in outputs]))
        m.d.comb += self.scan_out.eq(out_chain[0])
        return m
