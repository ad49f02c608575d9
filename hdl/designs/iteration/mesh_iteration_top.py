"""``MeshIterationTop``: the 2D mesh whose NPUs run iteration traces, with a barrier per
collective run (docs/fabric_iteration.md, "Several collectives per NPU (the mesh)" and
"Collectives kept apart at a packet NPU")."""

from __future__ import annotations

from amaranth import Module

from hdl.designs.fabric.cut import exchange_fields, exchanged
from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop

from .collective_barrier import add_collective_barrier

__all__ = ["MeshIterationTop"]


class MeshIterationTop(MeshFabricTop):
    """:class:`MeshFabricTop` of ``spec`` whose ``sequencer`` factory builds
    :class:`~.loading_sequencer.LoadingTraceSequencer` with ``barrier=True``: one
    :class:`~.collective_barrier.CollectiveBarrier` lets an NPU start a collective run only
    once every NPU has finished the run before (a run ends when both of its chunk engines are
    done). Why: each chunk engine takes, by VC, whatever reaches it while it runs, from every
    predecessor of every collective, and the mesh's flits carry no packet number; an NPU's DP
    predecessor that ran ahead would put its DP flits into the NPU's MP run (wrong sums) or
    after its receive count (extras, lost). With the barrier every flit in the mesh belongs to
    the run every NPU is in or has just finished. Latency: one cycle after the last NPU's run
    ends. A cut mesh (``partition`` and ``part``, the lock-step simulator): each part builds
    the barrier over its own NPUs, split (``CollectiveBarrier(split=True)``), and the two
    halves' ``ended`` cross the cut as one more field each way (:meth:`cut_fields`)."""

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """:meth:`MeshFabricTop.cut_fields` and, last on both buses, the barrier's: part p
        drives ``barrier_ended_<p>`` and reads the other part's (so part 0's ``cut_out`` is
        still part 1's ``cut_in``, field for field)."""
        return [*super().cut_fields(), *exchange_fields(self.part, [("barrier_ended", 1)])]

    def coordinate(self, m: Module, sequencers: dict) -> None:
        seqs = [sequencers[r] for r in sorted(sequencers)]
        cut = exchanged(self, self.cut_fields(), self.part, "barrier_ended") if self.partition is not None else None
        add_collective_barrier(m, seqs[0].start if seqs else 0,
                               [(s.engine_running & s.engine_done, s.done, s.may_start) for s in seqs], cut=cut)
