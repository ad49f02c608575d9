"""Switch allocation of the mesh router: per output, round-robin among the VC heads that ask
for it, held for a whole packet."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_PORTS, MESH_VCS

__all__ = ["SwitchAllocator"]


class SwitchAllocator(wiring.Component):
    """Allocates each output to one requester (an input port's VC: requester ``k`` is input
    ``k // 2``, VC ``k % 2``) from a packet's first flit to its last.

    Every input VC has its own crossbar input (the crossbar is 10 x 5), so a requester only
    competes for its output, never for its input port: no input-side allocation, and no
    two outputs can grant one requester (a requester asks for one output at a time).

    Members:
        request: ``In(5).array(10)``: one-hot output requester k's head flit asks for.
        head_valid, last: ``In(10)``: requester k holds a head flit; it ends its packet.
        room, has: ``In(2).array(5)``: output o's credits for VC v: a whole packet / one flit.
        move: ``Out(5)``: a flit enters output o's register this cycle.
        select: ``Out(range(10)).array(5)``: the requester feeding output o.
        read: ``Out(10)``: requester k's head flit moves this cycle.
        spend: ``Out(2).array(5)``: output o spends a VC v credit this cycle.

    Policy: a free output goes, in the same cycle, to the first eligible requester at or after
    its round-robin pointer (eligible: asks for it, with credits for a whole packet of its VC);
    the pointer then moves past the winner. A held output moves its owner's head flit whenever
    there is one and a credit; it is freed by the owner's ``last`` flit, and another packet may
    start on it in the next cycle (no idle cycle between packets).

    Latency: combinational from requests to ``move``/``read``; owner and pointer registered.
    """

    def __init__(self):
        self.requesters = MESH_PORTS * MESH_VCS
        super().__init__({
            "request": In(MESH_PORTS).array(self.requesters),
            "head_valid": In(self.requesters),
            "last": In(self.requesters),
            "room": In(MESH_VCS).array(MESH_PORTS),
            "has": In(MESH_VCS).array(MESH_PORTS),
            "move": Out(MESH_PORTS),
            "select": Out(range(self.requesters)).array(MESH_PORTS),
            "read": Out(self.requesters),
            "spend": Out(MESH_VCS).array(MESH_PORTS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        for o in range(MESH_PORTS):
            self._output(m, o)
        for k in range(self.requesters):
            m.d.comb += self.read[k].eq(
                sum(self.move[o] & (self.select[o] == k) for o in range(MESH_PORTS)) != 0)
        return m

    def _output(self, m: Module, o: int) -> None:
        n = self.requesters
        held = Signal(name=f"held{o}")
        owner = Signal(range(n), name=f"owner{o}")
        pointer = Signal(range(n), name=f"pointer{o}")
        eligible = Signal(n, name=f"eligible{o}")
        winner = Signal(range(n), name=f"winner{o}")
        m.d.comb += eligible.eq(sum((self.head_valid[k] & self.request[k][o]
                                     & self.room[o][k % MESH_VCS]) << k for k in range(n)))
        # Round robin: the lowest eligible index overall, overridden by the lowest at or after
        # the pointer (a later comb assignment wins).
        for k in reversed(range(n)):
            with m.If(eligible[k]):
                m.d.comb += winner.eq(k)
        for k in reversed(range(n)):
            with m.If(eligible[k] & (pointer <= k)):
                m.d.comb += winner.eq(k)
        owner_vc = Signal(range(MESH_VCS), name=f"owner_vc{o}")
        m.d.comb += owner_vc.eq(self.select[o] % MESH_VCS)
        with m.If(held):
            m.d.comb += [self.select[o].eq(owner),
                         self.move[o].eq(self.head_valid.bit_select(owner, 1)
                                         & self.has[o].bit_select(owner_vc, 1))]
        with m.Else():
            m.d.comb += [self.select[o].eq(winner), self.move[o].eq(eligible != 0)]
        with m.If(self.move[o]):
            m.d.comb += self.spend[o].eq(1 << owner_vc)
            m.d.sync += [held.eq(~self.last.bit_select(self.select[o], 1)),
                         owner.eq(self.select[o])]
            with m.If(~held):
                m.d.sync += pointer.eq(Mux(winner == n - 1, 0, winner + 1))
