"""Random co-simulation of flat and hierarchical Verilog of one design under Verilator.

:func:`cosim_verilog` builds one Verilog file that holds the design twice, as Amaranth's flat
output (top ``gold``, ``to_verilog(flat=True)``) and as hierarchical Verilog (top ``gate``), and a
wrapper :class:`CoSimulation` (top ``fred_cosim``) with the design's own ports: every input goes to
both copies, the outputs are the hierarchical copy's, and ``mismatch`` goes high in the first
cycle any output of the two copies differs and stays high. A bench written for the design runs
on the wrapper unchanged (``cocotb_tests.bench_switch`` checks ``mismatch`` when the DUT has it),
so every cycle of every bench compares the two builds bit for bit, including ``ready``s, status
outputs and outputs nobody reads.
"""

from __future__ import annotations

import re

from amaranth import Module, Signal
from amaranth.hdl import Cat, ClockSignal, Instance, ResetSignal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.emit.verilog import to_verilog

__all__ = ["CoSimulation", "cosim_verilog", "TOP"]

TOP = "fred_cosim"


class CoSimulation(wiring.Component):
    """The design's ports plus ``mismatch``; instantiates black boxes ``gold`` and ``gate``.

    Parameters: ``signature`` (the design's), ``clocked`` (both copies have ``clk``/``rst``).
    """

    def __init__(self, signature: wiring.Signature, *, clocked: bool = True):
        self._clocked = clocked
        members = dict(signature.members)
        members["mismatch"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        gold, gate, differs = [], [], []
        for path, member, value in self.signature.flatten(self):
            name = "__".join(map(str, path))
            if name == "mismatch":
                continue
            value = Value.cast(value)
            if member.flow == In:
                gold.append(("i", name, value))
                gate.append(("i", name, value))
            else:
                reference = Signal(len(value), name=f"gold__{name}")
                gold.append(("o", name, reference))
                gate.append(("o", name, value))
                differs.append(reference != value)
        if self._clocked:
            for args in (gold, gate):
                args += [("i", "clk", ClockSignal()), ("i", "rst", ResetSignal())]
        m.submodules.gold = Instance("gold", *gold)
        m.submodules.gate = Instance("gate", *gate)
        differ = Signal()
        seen = Signal()
        m.d.comb += [differ.eq(Cat(*differs).any()), self.mismatch.eq(differ | seen)]
        with m.If(differ):
            m.d.sync += seen.eq(1)
        return m


def cosim_verilog(make) -> tuple[str, str]:
    """``(verilog, top)`` of the co-simulation of the component ``make()`` returns (called twice:
    each conversion elaborates a fresh component)."""
    gold = to_verilog(make(), name="gold", flat=True)
    component = make()
    gate = to_verilog(component, name="gate")
    header = re.search(r"^module gold\((.*?)\);", gold, re.S | re.M).group(1)
    clocked = {"clk", "rst"} <= {port.strip() for port in header.split(",")}
    wrapper = to_verilog(CoSimulation(component.signature, clocked=clocked), name=TOP, flat=True)
    return wrapper + gold + gate, TOP
