"""``LoadingTraceSequencer``: a trace sequencer for several collectives per NPU, loading each
one's engine programs while the NPU computes (docs/fabric_iteration.md)."""

from __future__ import annotations

from amaranth import Mux, Signal
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import LOADER_READ, REPEAT_MASK, TRACE_READ

from .program_loader import ProgramLoader
from .trace_sequencer import TraceSequencer

__all__ = ["LoadingTraceSequencer"]


class LoadingTraceSequencer(TraceSequencer):
    """:class:`TraceSequencer` whose collective nodes each run their own engine program, from a
    :class:`ProgramLoader` of ``programs`` entries writing ``lanes`` engines (the mesh: an
    NPU's two chunks), and repeat (the node word's ``REPEAT_MASK`` bits: that many runs).

    Parameters: ``depth`` (trace nodes), ``programs`` (loader entries), ``lanes``.

    Members added to the sequencer's: ``lane_we``/``lane_waddr``/``lane_wdata`` (Out: the
    loader's writes into the engines' program ports, which the fabric top ORs with the
    harness's), ``engine_errors`` (In: the engines' bad plus extra flits of the current run),
    ``load_stall`` and ``run_errors`` (Out, :data:`LOADER_READ`).

    Timing: the loader writes collective 0's program from ``start`` and collective k + 1's
    from the cycle collective k finishes, one entry per cycle, while the compute nodes run. A
    collective node starts its engines once its program (and then its deferred entries) is
    written: with the compute before it longer than its entries, in its first cycle, as the
    one-program sequencer; every cycle it waits is counted in ``load_stall``. Each repeat:
    the start cycle, the engines' run, the cycle their done is seen.

    ``barrier`` (default False): a member ``may_start`` (In): a run (each repeat too) starts
    only in a cycle it is high, e.g. once every NPU has finished the run before
    (:class:`~.collective_barrier.CollectiveBarrier`); the cycles it waits for it are not
    counted in ``load_stall``. Off, the module is built as before.

    ``overlap``, ``issue_depth``: :class:`TraceSequencer`'s (compute under collectives); the
    collective lane then runs the loader's programs, each collective's from the cycle the one
    before finished.
    """

    read_names = TRACE_READ + LOADER_READ

    def __init__(self, *, depth: int, programs: int, lanes: int, barrier: bool = False, overlap: bool = False,
                 issue_depth: int = 64):
        if isinstance(programs, bool) or not isinstance(programs, int) or not 1 <= programs <= 1 << 16:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"program memory must be an integer in 1..65536 entries, got {programs!r}")
        self.programs, self.lanes, self.barrier = programs, lanes, bool(barrier)
        super().__init__(depth=depth, overlap=overlap, issue_depth=issue_depth)

    def _extra_members(self) -> dict:
        lanes = self.lanes
        return {"lane_we": Out(lanes), "lane_waddr": Out(6 * lanes), "lane_wdata": Out(32 * lanes),
                "engine_errors": In(32), "load_stall": Out(32), "run_errors": Out(32),
                **({"may_start": In(1)} if self.barrier else {})}

    def _collective(self, m, running, collective, count, word):
        active = running & collective
        loader = m.submodules.loader = ProgramLoader(depth=self.programs, lanes=self.lanes)
        m.d.comb += [loader.we.eq(self.we), loader.waddr.eq(self.waddr), loader.wdata.eq(self.wdata),
                     loader.start.eq(self.start), self.lane_we.eq(loader.lane_we),
                     self.lane_waddr.eq(loader.lane_waddr), self.lane_wdata.eq(loader.lane_wdata)]
        runs, started = Signal(8), Signal()
        repeat = Mux((word & REPEAT_MASK) == 0, 1, word & REPEAT_MASK)
        waiting = active & ~started
        seen = active & started & self.engine_done
        last = runs + 1 >= repeat
        go = loader.loaded & self.may_start if self.barrier else loader.loaded
        m.d.comb += [loader.release.eq(waiting), self.engine_start.eq(waiting & go),
                     self.engine_running.eq(active & started), loader.go.eq(seen & last)]
        with m.If(self.start):
            m.d.sync += [runs.eq(0), started.eq(0), self.load_stall.eq(0), self.run_errors.eq(0)]
        with m.Else():
            with m.If(waiting & go):
                m.d.sync += started.eq(1)
            with m.Elif(seen):
                m.d.sync += [started.eq(0), runs.eq(Mux(last, 0, runs + 1)),
                             self.run_errors.eq(self.run_errors + self.engine_errors)]
            with m.If(waiting & ~loader.loaded):
                m.d.sync += self.load_stall.eq(self.load_stall + 1)
        return collective & seen & last
