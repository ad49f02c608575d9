"""``RerunPhaseSequencer``: a switch's phase sequencer run once per collective of an iteration,
its phases' flit counts loaded for each (docs/fabric_iteration.md, "Several collectives per
NPU on the circuit FRED fabric")."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib.wiring import Component

from hdl.contracts.trace_program import PROG_ADDR, SLOT_BASE
from hdl.designs.fabric.phase_sequencer import PhaseSequencer, sequencer_members

from .program_loader import ProgramLoader

__all__ = ["RerunPhaseSequencer"]


class RerunPhaseSequencer(Component):
    """A :class:`PhaseSequencer` (same members; a drop-in for it in
    :class:`hdl.designs.fabric.FabricTop`, its ``sequencer`` parameter) that runs its phases
    once per collective: a :class:`ProgramLoader` of ``programs`` entries (one lane: the
    sequencer's own registers) writes collective 0's phase counts after ``start``, then starts
    the sequencer; once the sequencer's last phase has all its inputs (``finished``) and a
    collective is left, the loader writes that collective's counts (only those that change;
    ``cocotb_tests.iteration.fred_loading``) and the sequencer starts again at phase 0. A
    collective with no phase on this switch (0 phases) is skipped at once: the sequencer is
    not started (it would wait for flits that never come) and the next collective is loaded.

    Why this is enough: the switches hold the configured phases of every algorithm the
    iteration's collectives use, side by side in their slots (checked to fit when the loads
    are made); a collective's program
    gives the flits each of its phases takes and its first slot (:data:`SLOT_BASE`: phase k
    selects slot base + k), so the configuration is loaded once per iteration. A finished
    sequencer lets no flit in (``allow`` is low), so a flit of the
    next collective that reaches the switch early waits at its input; the sequencer's
    registers are read only when a phase is selected, so they can be rewritten once the last
    phase is selected -- all but the number of phases, which the sequencer compares with its
    phase index while it waits in the last phase: it is written in the cycle of the start. Selecting phase 0 again waits, as any phase change, until the switch's
    datapath has drained.

    Parameters: ``ports``, ``phases`` (the sequencer's), ``programs`` (loader entries).
    Program port: the sequencer's registers, :data:`SLOT_BASE`, and the loader's at
    :data:`PROG_ADDR` and above.
    Latency: a collective's counts are written one register per cycle after the one before it
    finished, then one cycle to start: a switch is ready for the next collective a few cycles
    after the last flit of the one before entered it (hidden under the NPUs' compute).
    """

    def __init__(self, *, ports: int, phases: int, programs: int):
        self.ports, self.phases, self.programs = ports, phases, programs
        super().__init__(sequencer_members(ports=ports, phases=phases, waddr=6))

    def elaborate(self, platform) -> Module:
        m = Module()
        seq = m.submodules.sequencer = PhaseSequencer(ports=self.ports, phases=self.phases)
        loader = m.submodules.loader = ProgramLoader(depth=self.programs, lanes=1)
        mine = loader.lane_we[0]
        armed = Signal()
        base = Signal.like(self.select_slot)          # the collective's first slot (SLOT_BASE)
        with m.If(mine & (loader.lane_waddr == SLOT_BASE)):
            m.d.sync += base.eq(loader.lane_wdata)
        with m.Elif(self.we & (self.waddr == SLOT_BASE)):
            m.d.sync += base.eq(self.wdata)
        # the number of phases (register 0) reaches the sequencer only with its start: written
        # while it waits in the last phase of the collective before (its count complete), a
        # larger n would make it select that collective's phase n - 1 + 1 at once (a phase the
        # run does not have, in the next collective's slots), and a start seen while it waits
        # for that select is lost
        ran, phases = Signal(), Signal(32)
        reg = Mux(mine, loader.lane_waddr, self.waddr)
        value = Mux(mine, loader.lane_wdata, self.wdata)
        write = mine | (self.we & (self.waddr < PROG_ADDR))
        with m.If(write & (reg == 0)):
            m.d.sync += phases.eq(value)
        with m.If(seq.start):
            m.d.sync += ran.eq(1)
        m.d.comb += [
            loader.we.eq(self.we), loader.waddr.eq(self.waddr), loader.wdata.eq(self.wdata),
            loader.start.eq(self.start), loader.release.eq(1),
            # before the first start (the sequencer idle) n goes straight in: its start needs it
            seq.we.eq(seq.start | (write & (reg != SLOT_BASE) & ((reg != 0) | ~ran))),
            seq.waddr.eq(Mux(seq.start, 0, reg)),
            seq.wdata.eq(Mux(seq.start, Mux(write & (reg == 0), value, phases), value)),
            seq.accepted.eq(self.accepted), self.allow.eq(seq.allow),
            self.select_valid.eq(seq.select_valid), self.select_slot.eq(seq.select_slot + base),
            seq.select_ready.eq(self.select_ready),
            self.index.eq(seq.index), self.count.eq(seq.count), self.finished.eq(seq.finished),
        ]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.next = "LOAD"
            with m.State("LOAD"):          # the loader writes this collective's counts
                with m.If(self.start):
                    m.next = "LOAD"
                with m.Elif(loader.loaded & (phases == 0)):
                    # the switch has no phase in this collective (e.g. Fred-C's L2 planes but
                    # the ring's): nothing to run, no flit of it to wait for -- on to the next
                    m.next = "SKIP"
                with m.Elif(loader.loaded):
                    m.d.comb += seq.start.eq(1)
                    m.d.sync += armed.eq(0)
                    m.next = "RUN"
            with m.State("SKIP"):
                with m.If(self.start):
                    m.next = "LOAD"
                with m.Elif(loader.pending):
                    m.d.comb += loader.go.eq(1)
                    m.next = "LOAD"
            with m.State("RUN"):
                # finished counts once the run's first phase is selected (before that it may
                # still show the last run's, or a power-on count of 0)
                with m.If(~seq.finished):
                    m.d.sync += armed.eq(1)
                with m.If(self.start):
                    m.next = "LOAD"
                with m.Elif(armed & seq.finished & loader.pending):
                    m.d.comb += loader.go.eq(1)
                    m.next = "LOAD"
        return m
