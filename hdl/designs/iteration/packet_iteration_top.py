"""``PacketIterationTop``: the packet FRED fabric whose NPUs run iteration traces, with a barrier
per collective run (docs/fabric_iteration.md, "The packet fabric" and "Collectives kept apart
at a packet NPU")."""

from __future__ import annotations

from amaranth import Module

from hdl.contracts.errors import FredError
from hdl.designs.fabric.packet_fabric_top import PacketFabricTop

from .collective_barrier import add_collective_barrier
from .stage_barrier import add_stage_barrier

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
    :class:`PacketFabricTop`'s. A cut fabric (``partition``) is refused: the barrier joins
    every NPU, and a part holds only its own."""

    def __init__(self, spec, **kwargs):
        if kwargs.get("partition") is not None:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError("PacketIterationTop: the collective barrier joins every NPU of the fabric; "
                            "a cut fabric (partition) is not built")
        super().__init__(spec, **kwargs)

    def coordinate(self, m: Module, components: dict) -> None:
        npus = [components[r] for r in sorted(components) if r < self.spec.npus]
        add_collective_barrier(m, npus[0].start if npus else 0, [(x.run_over, x.done, x.may_start) for x in npus])
        staged = [x for x in npus if getattr(x, "staged", False)]
        if staged:
            add_stage_barrier(m, staged[0].start, [(x.stage_past, x.stage_open) for x in staged])
