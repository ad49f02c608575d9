"""``CollectiveBarrier``: no NPU of the packet fabric's iteration starts a collective until every
NPU has finished the one before (docs/fabric_iteration.md, "Collectives kept apart at a packet
NPU")."""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

from .wafer_collective import all_of

__all__ = ["CollectiveBarrier", "add_collective_barrier"]


class CollectiveBarrier(wiring.Component):
    """A barrier between consecutive collective runs of ``npus`` NPUs that run the same
    collectives in the same order (each repeat a run of its own).

    Members: ``start`` (In: the trace's start; nobody has finished a run), ``run_over`` (In,
    bit r: NPU r's run ends this cycle), ``trace_done`` (In, bit r: NPU r's trace is over --
    it runs nothing more, so it holds nobody back), ``may_start`` (Out, bit r: NPU r may start
    its next run).

    NPU r's bit ``finished[r]`` is set by its run's end; once every NPU has finished (or ended
    its trace), the bits clear together and every NPU may start its next run. An NPU that has
    finished run k thus starts run k + 1 only after every NPU has finished run k, so no NPU
    ever sends a packet of run k + 1 before every receiver has taken all of run k's; an NPU can
    never be two runs ahead, so one bit per NPU counts it. Latency: one cycle from the last
    NPU's run end to ``may_start`` (the clear); between a compute node and the run, nothing
    (``may_start`` is high while the NPU has not finished a run the others have not).

    ``split`` (default False): the barrier of one part of a fabric cut for the lock-step
    simulator (``eda/fabric/lockstep.py``), over that part's NPUs: ``ended`` (Out) is 1 when
    every one of them has finished the run (or ended its trace), ``others_ended`` (In) the
    other part's ``ended`` of the same cycle; every NPU may start its next run when both are.
    The two halves are the whole barrier cycle for cycle, because ``ended`` depends only on
    the part's registers (``finished``, and ``run_over`` / ``trace_done`` of sequencers whose
    engines' done flags are counters): the lock-step rule for a cut signal.
    """

    def __init__(self, npus: int, *, split: bool = False):
        if isinstance(npus, bool) or not isinstance(npus, int) or npus < 1:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"a collective barrier joins at least 1 NPU, got {npus!r}")
        self.npus, self.split = npus, bool(split)
        members = {"start": In(1), "run_over": In(npus), "trace_done": In(npus), "may_start": Out(npus)}
        if self.split:
            members.update({"ended": Out(1), "others_ended": In(1)})
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        finished = Signal(self.npus)
        ended = finished | self.run_over | self.trace_done
        everyone = all_of(ended[r] for r in range(self.npus))
        if self.split:
            m.d.comb += self.ended.eq(everyone)
            everyone = everyone & self.others_ended
        with m.If(self.start | everyone):
            m.d.sync += finished.eq(0)
        with m.Else():
            m.d.sync += finished.eq(finished | self.run_over)
        m.d.comb += self.may_start.eq(~finished)
        return m


def add_collective_barrier(m: Module, start, units, *, cut=None) -> None:
    """Build a :class:`CollectiveBarrier` into ``m`` between ``units``: per NPU
    ``(run_over, trace_done, may_start)`` (its run ends this cycle, its trace is over, the
    barrier's answer to drive), ``start`` the trace's start. Nothing for no units. ``cut``:
    ``(ended, others_ended)``, the cut signals of one part of a cut fabric (a split barrier
    over this part's units: ``ended`` driven, ``others_ended`` read; a part without units
    drives ``ended`` high: it holds nobody back)."""
    units = list(units)
    if not units:
        if cut is not None:
            m.d.comb += cut[0].eq(1)
        return
    barrier = m.submodules.collective_barrier = CollectiveBarrier(len(units), split=cut is not None)
    m.d.comb += [barrier.start.eq(start), barrier.run_over.eq(Cat(u[0] for u in units)),
                 barrier.trace_done.eq(Cat(u[1] for u in units))]
    if cut is not None:
        ended, others_ended = cut
        m.d.comb += [ended.eq(barrier.ended), barrier.others_ended.eq(others_ended)]
    for r, (_, _, may_start) in enumerate(units):
        m.d.comb += may_start.eq(barrier.may_start[r])
