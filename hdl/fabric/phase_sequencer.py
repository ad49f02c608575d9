"""``PhaseSequencer``: steps one switch through its programmed phases in hardware (issue 15)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib.wiring import Component, In, Out

from hdl.base.config_port import phase_index_width

__all__ = ["PhaseSequencer"]


class PhaseSequencer(Component):
    """Selects phase 0 at ``start``, then phase k + 1 once phase k's inputs are all in.

    Parameters: ``ports`` (P of the switch), ``phases`` (K slots; phase k uses slot k).

    Program registers (``we``/``waddr``/``wdata``): register 0 = the number of phases n
    (0: the switch is not used), register 1 + k = the flits phase k accepts at the switch's
    inputs, summed over its ports (size x input ports of its flows).

    Mechanism: ``accepted`` (In, P bits) is each input port's valid & ready; their sum is
    counted. When the count of phase k reaches its programmed total and k + 1 < n, the
    sequencer offers slot k + 1 on ``select`` (``select_valid`` held until ``select_ready``,
    the switch's phase-select stream; the switch waits until its datapath has drained, and holds
    its inputs meanwhile), then counts phase k + 1 from 0. Why a total and not per-port counts:
    a port of phase k only accepts flits of a later phase once its sender has moved on, which
    (for the in-switch flows, whose every sender depends on this switch's last outputs or sends
    nothing later) is after the total was reached and the inputs are held; and a port the
    active phase does not use accepts nothing. ``index`` is the phase in progress, ``count``
    its accepted flits, ``finished`` high once the last phase's flits are all in.
    """

    def __init__(self, *, ports: int, phases: int):
        self.ports, self.phases = ports, phases
        super().__init__({
            "start": In(1),
            "we": In(1), "waddr": In(range(phases + 1)), "wdata": In(32),
            "accepted": In(ports),
            "select_valid": Out(1), "select_slot": Out(phase_index_width(phases)),
            "select_ready": In(1),
            "index": Out(range(phases + 1)), "count": Out(32), "finished": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        count_of = [Signal(32, name=f"phase_flits_{k}") for k in range(self.phases)]
        n = Signal(range(self.phases + 1))
        with m.If(self.we):
            with m.Switch(self.waddr):
                with m.Case(0):
                    m.d.sync += n.eq(self.wdata)
                for k in range(self.phases):
                    with m.Case(k + 1):
                        m.d.sync += count_of[k].eq(self.wdata)
        target = Signal(32)
        with m.Switch(self.index):
            for k in range(self.phases):
                with m.Case(k):
                    m.d.comb += target.eq(count_of[k])
        incoming = sum(self.accepted[p] for p in range(self.ports))
        m.d.comb += self.finished.eq((n > 0) & (self.index == n - 1) & (self.count == target))
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start & (n > 0)):
                    m.d.sync += [self.index.eq(0), self.count.eq(0), self.select_slot.eq(0)]
                    m.next = "SELECT"
            with m.State("SELECT"):
                m.d.comb += self.select_valid.eq(1)
                with m.If(self.select_ready):
                    m.next = "COUNT"
            with m.State("COUNT"):
                m.d.sync += self.count.eq(self.count + incoming)
                with m.If((self.count == target) & (self.index + 1 < n)):
                    m.d.sync += [self.index.eq(self.index + 1), self.count.eq(0),
                                 self.select_slot.eq(self.index + 1)]
                    m.next = "SELECT"
                with m.If(self.start):
                    m.d.sync += [self.index.eq(0), self.count.eq(0), self.select_slot.eq(0)]
                    m.next = "SELECT"
        return m
