"""``PacketIterationTop``: the packet FRED fabric whose NPUs run iteration traces, with a barrier
per collective run (docs/fabric_iteration.md, "The packet fabric" and "Collectives kept apart
at a packet NPU")."""

from __future__ import annotations

from amaranth import Module

from hdl.designs.fabric.cut import exchange_fields, exchanged
from hdl.designs.fabric.packet_fabric_top import PacketFabricTop

from .collective_barrier import add_collective_barrier
from .stage_barrier import BOUNDARIES, add_stage_barrier

__all__ = ["PacketIterationTop"]


class PacketIterationTop(PacketFabricTop):
    """:class:`PacketFabricTop` (the same parameters; ``npu`` a
    :class:`~.packet_trace_npu.PacketTraceNpu` factory) whose trace NPUs share one
    :class:`CollectiveBarrier`: an NPU starts a collective run only once every NPU has finished
    the run before. Why: an NPU's receive buffer is one FIFO in arrival order and its ring
    predecessors of different collectives (MP: i - 1, DP: i - k) both send into it, so a
    predecessor that ran ahead would put the next collective's packets among the current
    one's. With the barrier every packet in the fabric belongs to the one run all NPUs are in
    (or have just finished), so each run meets the fabric as a one-collective run does.
    Latency: one cycle after the last NPU's run ends. Built for in-switch collectives too:
    an in-switch all-reduce could do without (an NPU receives only reductions that include
    its own packets, sent after it finished the run before), but a multicast of another
    member's packets (an all-gather, a broadcast) could not, and the barrier costs only the
    NPUs' skew. NPUs built ``staged`` (multi-stage programs: the hierarchical all-reduce)
    share a :class:`~.stage_barrier.StageBarrier` too: an NPU sends a stage only once every
    NPU has received all of the stage before. Harness ports, units and reads as
    :class:`PacketFabricTop`'s. A cut fabric (``partition`` and ``part``, the lock-step
    simulator): each part builds both barriers over its own NPUs, split
    (``CollectiveBarrier(split=True)``, ``StageBarrier(split=True)``), their ``ended`` crossing
    the cut as fields of their own (:meth:`cut_fields`)."""

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """:meth:`PacketFabricTop.cut_fields` and, last on both buses, the barriers': part p
        drives ``collective_ended_<p>`` and ``stage_ended_<p>`` (a bit per stage boundary) and
        reads the other part's, so part 0's ``cut_out`` is still part 1's ``cut_in``."""
        return [*super().cut_fields(),
                *exchange_fields(self.part, [("collective_ended", 1), ("stage_ended", BOUNDARIES)])]

    def coordinate(self, m: Module, components: dict) -> None:
        npus = [components[r] for r in sorted(components) if r < self.spec.npus]
        collective_cut = stage_cut = None
        if self.partition is not None:
            fields = self.cut_fields()
            collective_cut = exchanged(self, fields, self.part, "collective_ended")
            stage_cut = exchanged(self, fields, self.part, "stage_ended")
        add_collective_barrier(m, npus[0].start if npus else 0, [(x.run_over, x.done, x.may_start) for x in npus],
                               cut=collective_cut)
        staged = [x for x in npus if getattr(x, "staged", False)]
        if staged or stage_cut is not None:
            add_stage_barrier(m, staged[0].start if staged else 0, [(x.stage_past, x.stage_open) for x in staged],
                              cut=stage_cut)
