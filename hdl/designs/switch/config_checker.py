"""Combinational legality check of one phase's configuration vector."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Cat
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import RD_IN0, RD_IN1, RD_SUM, check_size, config_bits, layout
from hdl.emit.hierarchy import SeparateModule

from .modes import mode_layout

__all__ = ["ConfigChecker"]


def _mode_ok(mode, kind: str, middle: int):
    """The legality of one microswitch's mode (a View of its ``mode_layout``), as an expression."""
    if kind == "input":
        both = mode.in0_en & mode.in1_en
        return ((~mode.in0_en & (mode.in0_wire == 0) | mode.in0_en & (mode.in0_wire < middle))
                & (~mode.in1_en & (mode.in1_wire == 0) | mode.in1_en & (mode.in1_wire < middle))
                & (~mode.reduce | both & (mode.in0_wire == mode.in1_wire))
                & (mode.reduce | ~both | (mode.in0_wire != mode.in1_wire)))
    if kind == "output":
        return ((~mode.out0_en & (mode.out0_wire == 0) | mode.out0_en & (mode.out0_wire < middle))
                & (~mode.out1_en & (mode.out1_wire == 0) | mode.out1_en & (mode.out1_wire < middle)))
    if kind in ("demux", "mux"):
        return ~mode.en & (mode.wire == 0) | mode.en & (mode.wire < middle)
    sums = (mode.out0 == RD_SUM) | (mode.out1 == RD_SUM)
    passes = Cat(*((o == RD_IN0) | (o == RD_IN1) for o in (mode.out0, mode.out1))).any()
    return ~(sums & passes)


class ConfigChecker(SeparateModule, wiring.Component):
    """Checks every microswitch mode of a Fred_m(P) configuration against the contract.

    Parameters:
        ports, middle: the switch size (any P >= 2, m >= 2).
        width: bits of ``modes`` (>= config_bits; bits above config_bits are padding).

    Members:
        modes: ``In(width)`` (the configuration vector; not ``config``, a Verilog keyword);
            legal: ``Out(1)``, combinational.

    Rules (as ``hdl.contracts.encoding.SwitchConfig.decode`` enforces them): wire indices < m;
    a disabled input/output/demux/mux has wire 0 (canonical form); ``reduce`` needs both inputs
    enabled on the same wire; two enabled inputs without ``reduce`` use different wires; an RD
    output that sums excludes an output that passes an input; padding bits are zero.

    Structure: the checker follows the switch's recursion (the modes of this level's input and
    output microswitches, demux and mux, and one ``ConfigChecker`` of Fred_m(ceil(P/2)) per
    middle subnetwork), so hierarchical Verilog holds one small module per level instead of one
    check per microswitch in a single module.
    """

    def __init__(self, *, ports: int, middle: int, width: int | None = None):
        check_size(ports, middle)
        self.ports, self.middle = ports, middle
        self.bits = config_bits(ports, middle)
        self.width = self.bits if width is None else width
        if self.width < self.bits:
            raise ValueError(f"width {self.width} < {self.bits} configuration bits")
        super().__init__({"modes": In(self.width), "legal": Out(1)})

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_config_check_m3_p16`` (with a
        ``_w<width>`` suffix when ``modes`` carries padding)."""
        name = f"fred_config_check_m{self.middle}_p{self.ports}"
        return name if self.width == self.bits else f"{name}_w{self.width}"

    def elaborate(self, platform) -> Module:
        m = Module()
        P, mid = self.ports, self.middle
        checks = []
        slots = layout(P, mid)
        r, odd = P // 2, P % 2
        own = slots if P == 2 else [s for s in slots if not s.name.startswith("mid[")]
        for slot in own:
            mode = data.View(mode_layout(slot.kind, mid),
                             self.modes[slot.offset:slot.offset + slot.width])
            ok = Signal(name=f"ok_{slot.index}")
            m.d.comb += ok.eq(_mode_ok(mode, slot.kind, mid))
            checks.append(ok)
        if P > 2:
            sub_ports = r + odd
            sub_bits = config_bits(sub_ports, mid)
            first = {k: next(s.offset for s in slots if s.name.startswith(f"mid[{k}]."))
                     for k in range(mid)}
            for k in range(mid):
                sub = m.submodules[f"mid{k}"] = ConfigChecker(ports=sub_ports, middle=mid)
                m.d.comb += sub.modes.eq(self.modes[first[k]:first[k] + sub_bits])
                checks.append(sub.legal)
        padding_zero = (self.modes[self.bits:] == 0) if self.width > self.bits else 1
        m.d.comb += self.legal.eq(Cat(*checks).all() & padding_zero)
        return m
