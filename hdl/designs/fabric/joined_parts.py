"""``JoinedParts``: the two parts of a fabric cut for the lock-step simulator, wired back to back
with the harness ports of the whole top, for the Amaranth simulator (docs/fabric_rtl.md,
"Simulation speed"): what ``eda/fabric/lockstep.cpp`` does between cycles, in one model.

A part's ``cut_out`` must depend only on its own registers (the lock-step simulator hands each
part the other's ``cut_out`` of the cycle before); wired directly, a part that broke that rule
would still run correctly here, so each part's ``cut_in`` is XORed with an input
(``perturb[p]``): a bench that changes it inside a cycle and sees ``cut_out[p]`` unchanged has
checked the rule on the running fabric.
"""

from __future__ import annotations

from amaranth import DomainRenamer, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

__all__ = ["JoinedParts"]

#: How the parts' harness outputs combine into the whole top's: ``all_done`` when both are,
#: ``cfg_ready`` from the part holding the addressed switch (the other's is 0); every other
#: output (``rd_data``: a part reads 0 for a unit it lacks; ``cycles``: the later part's count,
#: as the lock-step driver reads them) is the larger of the two.
_AND, _OR = ("all_done",), ("cfg_ready",)


class JoinedParts(wiring.Component):
    """``parts``: the two parts (e.g. ``PacketFabricTop(spec, partition=..., part=p)`` for p =
    0, 1), each with ``cut_out`` / ``cut_in`` and the same harness ports. Members: the parts'
    harness ports (inputs to both, outputs combined as above), ``perturb``
    (``In(width).array(2)``: XORed into part p's ``cut_in``; 0 = the plain wiring) and
    ``cut_out`` (``Out(width).array(2)``: part p's ``cut_out``). Each part makes its own clock
    domains from ``clk``; they are renamed apart."""

    def __init__(self, parts):
        if len(parts) != 2:
            raise FredError(f"JoinedParts joins two parts, got {len(parts)}")
        self.parts = list(parts)
        widths = [len(p.cut_out) for p in self.parts]
        if widths != [len(self.parts[1].cut_in), len(self.parts[0].cut_in)]:
            raise FredError(f"each part's cut_out must be the other's cut_in, got widths {widths} "
                            f"and {[len(p.cut_in) for p in self.parts]}")
        self.harness = {name: member for name, member in self.parts[0].signature.members.items()
                        if name not in ("cut_in", "cut_out")}
        super().__init__({**self.harness,
                          "perturb": In(max(widths)).array(2), "cut_out": Out(max(widths)).array(2)})

    def elaborate(self, platform) -> Module:
        m = Module()
        a, b = self.parts
        for p, part in enumerate(self.parts):
            m.submodules[f"part{p}"] = DomainRenamer({"sync": f"sync{p}", "por": f"por{p}"})(part)
        m.d.comb += [b.cut_in.eq(a.cut_out ^ self.perturb[1]), a.cut_in.eq(b.cut_out ^ self.perturb[0]),
                     self.cut_out[0].eq(a.cut_out), self.cut_out[1].eq(b.cut_out)]
        for name, member in self.harness.items():
            mine, x, y = getattr(self, name), getattr(a, name), getattr(b, name)
            if member.flow == In:
                m.d.comb += [x.eq(mine), y.eq(mine)]
            elif name in _AND:
                m.d.comb += mine.eq(x & y)
            elif name in _OR:
                m.d.comb += mine.eq(x | y)
            else:
                m.d.comb += mine.eq(Mux(x > y, x, y))
        return m
