"""``StageBarrier``: no NPU of the packet fabric's iteration sends a stage of a multi-stage
collective (the hierarchical all-reduce) before every NPU has received all of the stage before
(docs/fabric_iteration.md, "The hierarchical all-reduce on the packet fabric")."""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.npu_engine import ENGINE_STAGES

from .wafer_collective import all_of

__all__ = ["StageBarrier", "add_stage_barrier"]

#: stage boundaries of an engine program: stage s + 1 waits for stage s (s < this)
BOUNDARIES = ENGINE_STAGES - 1


class StageBarrier(wiring.Component):
    """A barrier between the stages of the collective run every NPU is in.

    Parameters: ``npus``. Members: ``start`` (In: the trace's start), ``past`` (In, bits
    ``BOUNDARIES * r + s``: NPU r has received every flit of stage s of its current run, or
    holds nobody back -- it has finished the run and waits for the others, or its trace is
    over; :class:`~.packet_trace_npu.PacketTraceNpu`'s ``stage_past``), ``open`` (Out, bit s:
    every NPU was past stage s in the cycle before; an engine sends stage s + 1 only while it
    is high, :class:`~hdl.designs.fabric.npu_engine.NpuEngine`'s ``stage_open``).

    Why registered: ``open`` reaches every NPU's send side and packetizer, so one register
    keeps the AND over the wafer's NPUs off the links' combinational paths. Latency: one cycle
    from the last NPU's ``past`` to ``open``; the engine leaves a stage's receive side one
    cycle after its last flit too, so NPUs that end a stage in one cycle lose nothing, and the
    barrier adds the NPUs' skew at a stage's end. ``open`` is 0 after ``start``; it stays low
    at a run's start because every NPU's ``past`` is low in the cycle before any engine of the
    run runs (the collective barrier frees a run one cycle after the last run ended, and an
    engine runs one cycle after its start; :class:`~.packet_trace_npu.PacketTraceNpu`).


    ``split`` (default False): the barrier of one part of a fabric cut for the lock-step
    simulator, over that part's NPUs: ``ended`` (Out, bit s: every one of them is past stage s)
    crosses the cut, ``others_ended`` (In) is the other part's of the same cycle, and ``open``
    registers both ANDed: the whole barrier cycle for cycle (``past`` depends on the part's
    registers only, the lock-step rule for a cut signal).
    """

    def __init__(self, npus: int, *, split: bool = False):
        if isinstance(npus, bool) or not isinstance(npus, int) or npus < 1:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"a stage barrier joins at least 1 NPU, got {npus!r}")
        self.npus, self.split = npus, bool(split)
        members = {"start": In(1), "past": In(npus * BOUNDARIES), "open": Out(BOUNDARIES)}
        if self.split:
            members.update({"ended": Out(BOUNDARIES), "others_ended": In(BOUNDARIES)})
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        everyone = Cat(all_of(self.past[BOUNDARIES * r + s] for r in range(self.npus)) for s in range(BOUNDARIES))
        if self.split:
            m.d.comb += self.ended.eq(everyone)
            everyone = everyone & self.others_ended
        m.d.sync += self.open.eq(everyone)
        with m.If(self.start):
            m.d.sync += self.open.eq(0)
        return m


def add_stage_barrier(m: Module, start, units, *, cut=None) -> None:
    """Build a :class:`StageBarrier` into ``m`` between ``units``: per NPU ``(past, open)`` (its
    ``stage_past`` to read, its ``stage_open`` to drive), ``start`` the trace's start. Nothing
    for no units (with ``cut``: this part's ``ended`` all ones, it holds nobody back). ``cut``:
    ``(ended, others_ended)``, the cut signals of one part of a cut fabric (a split barrier)."""
    units = list(units)
    if not units:
        if cut is not None:
            m.d.comb += cut[0].eq(-1)
        return
    barrier = m.submodules.stage_barrier = StageBarrier(len(units), split=cut is not None)
    m.d.comb += [barrier.start.eq(start), barrier.past.eq(Cat(past for past, _ in units))]
    if cut is not None:
        m.d.comb += [cut[0].eq(barrier.ended), barrier.others_ended.eq(cut[1])]
    for _, opened in units:
        m.d.comb += opened.eq(barrier.open)
