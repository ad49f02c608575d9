"""A link's rate as a token counter: ``a`` flits in every ``b`` cycles (the fabric links' rule,
:func:`hdl.designs.fabric.link.rate_gate`, as a component for the mesh's ports)."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import check_link_rate
from hdl.designs.fabric.link import rate_gate

__all__ = ["RateToken"]


class RateToken(wiring.Component):
    """The links' token accumulator (:func:`~hdl.designs.fabric.link.rate_gate`, one rule for
    the FRED fabric and the mesh): ``a`` tokens per cycle, a flit costs ``b``; ``token`` is
    high when a flit may move.

    Parameters: rate ``(a, b)``, 0 < a <= b (``(1, 1)`` unpaced: always a token, no counter);
    ``paced`` (default False): a link starts with a saved token (its first flit moves at once,
    then one every ``b / a`` cycles: a router port whose flit crosses in one cycle); paced, a
    device that needs ``b / a`` cycles for every flit, the first included -- an I/O
    controller's 128 GBps memory and link (docs/mesh_rtl.md, "I/O controllers on the mesh";
    the FRED controllers' rule, docs/fabric_rtl.md, "I/O controllers").

    Members: ``spend`` (In(1): a flit moves this cycle; only while ``token``), ``token`` (Out(1));
    with ``paced`` also ``restart`` (In(1): tokens back to 0, the run's start) and ``waiting``
    (In(1): the device has a flit to move; tokens accumulate only then, so a paced device
    saves nothing while idle).

    Latency: unpaced, after a flit at cycle t the next may move at t + ceil(b / a) (a = 1:
    t + b), and an idle link saves at most one flit; paced, with ``waiting`` high from cycle
    s (the restart's cycle + 1, or an idle device's first waiting cycle), flit k moves in cycle
    s + ceil((k + 1) b / a) - 1 (16/375: cycles s + 23, s + 46, s + 70, ...).
    """

    def __init__(self, rate, *, paced: bool = False):
        self.rate = check_link_rate(rate)
        self.paced = bool(paced)
        members = {"spend": In(1), "token": Out(1)}
        if self.paced:
            members |= {"restart": In(1), "waiting": In(1)}
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        if self.paced:
            ok = rate_gate(m, self.rate, self.spend, restart=self.restart, paced=True, waiting=self.waiting)
        else:
            ok = rate_gate(m, self.rate, self.spend)
        m.d.comb += self.token.eq(ok)
        return m
