"""Combinational legality check of one phase's configuration vector."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Cat
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.base.compiler.encoding import RD_IN0, RD_IN1, RD_SUM, check_size, config_bits, layout

from .modes import mode_layout

__all__ = ["ConfigChecker"]


class ConfigChecker(wiring.Component):
    """Checks every microswitch mode of a Fred_m(P) configuration against the contract.

    Parameters:
        ports, middle: the switch size (P a power of two >= 2, m >= 2).
        width: bits of ``config`` (>= config_bits; bits above config_bits are padding).

    Members:
        config: ``In(width)``; legal: ``Out(1)``, combinational.

    Rules (as ``hdl.base.compiler.encoding.SwitchConfig.decode`` enforces them): wire indices < m;
    a disabled input/output has wire 0 (canonical form); ``reduce`` needs both inputs enabled
    on the same wire; two enabled inputs without ``reduce`` use different wires; an RD output
    that sums excludes an output that passes an input; padding bits are zero.
    """

    def __init__(self, *, ports: int, middle: int, width: int | None = None):
        check_size(ports, middle)
        self.ports, self.middle = ports, middle
        self.bits = config_bits(ports, middle)
        self.width = self.bits if width is None else width
        if self.width < self.bits:
            raise ValueError(f"width {self.width} < {self.bits} configuration bits")
        super().__init__({"config": In(self.width), "legal": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        mid = self.middle
        checks = []
        for slot in layout(self.ports, self.middle):
            mode = data.View(mode_layout(slot.kind, mid),
                             self.config[slot.offset:slot.offset + slot.width])
            ok = Signal(name=f"ok_{slot.index}")
            if slot.kind == "input":
                both = mode.in0_en & mode.in1_en
                m.d.comb += ok.eq(
                    (~mode.in0_en & (mode.in0_wire == 0) | mode.in0_en & (mode.in0_wire < mid))
                    & (~mode.in1_en & (mode.in1_wire == 0) | mode.in1_en & (mode.in1_wire < mid))
                    & (~mode.reduce | both & (mode.in0_wire == mode.in1_wire))
                    & (mode.reduce | ~both | (mode.in0_wire != mode.in1_wire)))
            elif slot.kind == "output":
                m.d.comb += ok.eq(
                    (~mode.out0_en & (mode.out0_wire == 0) | mode.out0_en & (mode.out0_wire < mid))
                    & (~mode.out1_en & (mode.out1_wire == 0) | mode.out1_en & (mode.out1_wire < mid)))
            else:
                sums = (mode.out0 == RD_SUM) | (mode.out1 == RD_SUM)
                passes = Cat(*((o == RD_IN0) | (o == RD_IN1) for o in (mode.out0, mode.out1))).any()
                m.d.comb += ok.eq(~(sums & passes))
            checks.append(ok)
        padding_zero = (self.config[self.bits:] == 0) if self.width > self.bits else 1
        m.d.comb += self.legal.eq(Cat(*checks).all() & padding_zero)
        return m
