"""Credit counters of one mesh-router output: one per virtual channel of the downstream buffer."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_VCS, MeshFlitFormat, check_link_rate, check_router_parameters

from .rate_token import RateToken

__all__ = ["OutputCredits"]


class OutputCredits(wiring.Component):
    """Credits of one output link, per VC, starting at the downstream buffer's ``depth``.

    Parameters (keyword-only): flit (:class:`MeshFlitFormat`), depth (the downstream FIFO per VC),
    rate: ``(a, b)``: the link carries ``a`` flits in every ``b`` cycles (default ``(1, 1)``,
    one per cycle). The links' token counter (:class:`RateToken`, the fabric links'
    ``rate_gate``: ``a`` tokens per cycle, a flit costs ``b``, an idle link saves at most one
    flit); ``has`` and ``room`` are low while the link has no token: a slower link is a router
    port that moves a flit every ``b / a`` cycles. ``paced`` (default False): the counter is
    :class:`RateToken`'s paced one -- every flit, the first included, waits its whole ``b / a``
    cycles, as an I/O controller's 128 GBps link (docs/mesh_rtl.md, "I/O controllers on the
    mesh") -- with two more members, ``restart`` (In(1): the run's start) and ``waiting``
    (In(1): the sender has a flit to move; nothing is saved while it has none).

    Members:
        spend: ``In(2)``: bit v = a VC v flit enters the output register this cycle.
        give: ``In(2)``: bit v = the downstream freed a VC v slot (its ``credit`` pulse).
        has: ``Out(2)``: VC v holds at least one credit (a flit may move).
        room: ``Out(2)``: VC v holds ``packet_flits`` credits (a packet may start: virtual
            cut-through, so a started packet never waits for downstream space).
        error: ``Out(1)``: sticky, a counter went above ``depth`` (the downstream returned a
            credit it was never given). Underflow cannot happen: a flit moves only with a credit.

    Latency: a credit given in cycle t counts from cycle t + 1.
    """

    def __new__(cls, *, flit: MeshFlitFormat, depth: int, rate=(1, 1), paced: bool = False):
        check_router_parameters(flit=flit, depth=depth)
        check_link_rate(rate)
        return super().__new__(cls)

    def __init__(self, *, flit: MeshFlitFormat, depth: int, rate=(1, 1), paced: bool = False):
        self.flit, self.depth, self.rate = flit, depth, check_link_rate(rate)
        self.paced = bool(paced)
        super().__init__({
            "spend": In(MESH_VCS), "give": In(MESH_VCS),
            "has": Out(MESH_VCS), "room": Out(MESH_VCS), "error": Out(1),
            **({"restart": In(1), "waiting": In(1)} if self.paced else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        rate = m.submodules.rate = RateToken(self.rate, paced=self.paced)
        token = rate.token
        m.d.comb += rate.spend.eq(self.spend != 0)
        if self.paced:
            m.d.comb += [rate.restart.eq(self.restart), rate.waiting.eq(self.waiting)]
        for v in range(MESH_VCS):
            count = Signal(range(self.depth + 2), init=self.depth, name=f"credits{v}")
            after = count - self.spend[v] + self.give[v]
            m.d.sync += count.eq(after)
            with m.If(after > self.depth):
                m.d.sync += self.error.eq(1)
            m.d.comb += [self.has[v].eq((count != 0) & token),
                         self.room[v].eq((count >= self.flit.packet_flits) & token)]
        return m
