"""``PhaseSequencer``: steps one switch through its programmed phases in hardware (docs/fabric_rtl.md)."""

from __future__ import annotations

from amaranth import Array, Cat, Module, Signal
from amaranth.lib.wiring import Component, In, Out

from hdl.contracts.config_port import phase_index_width

__all__ = ["PhaseSequencer", "sequencer_members", "sequencer_registers"]


def sequencer_registers(phases: int, plist) -> list[tuple[int, int]]:
    """(register, value) writes that program a :class:`PhaseSequencer` of ``phases`` slots with
    ``plist``: per phase ``(total input flits, flits per input port, input port mask)``."""
    writes = [(0, len(plist))]
    for k, (total, share, mask) in enumerate(plist):
        writes += [(1 + k, total), (1 + phases + k, share), (1 + 2 * phases + k, mask)]
    return writes


def sequencer_members(*, ports: int, phases: int, waddr) -> dict:
    """The members of a phase sequencer of ``ports`` ports and ``phases`` phases with program
    addresses of shape ``waddr`` (:class:`PhaseSequencer`'s, and those of sequencers that stand
    in for it in :class:`hdl.designs.fabric.FabricTop`)."""
    return {
        "start": In(1),
        "we": In(1), "waddr": In(waddr), "wdata": In(32),
        "accepted": In(ports), "allow": Out(ports),
        "select_valid": Out(1), "select_slot": Out(phase_index_width(phases)),
        "select_ready": In(1),
        "index": Out(range(phases + 1)), "count": Out(32), "finished": Out(1),
    }


class PhaseSequencer(Component):
    """Selects phase 0 at ``start``, then phase k + 1 once phase k's inputs are all in; lets
    each input port accept only the flits the active phase expects from it.

    Parameters: ``ports`` (P of the switch), ``phases`` (K slots; phase k uses slot k).

    Program registers (``we``/``waddr``/``wdata``, :func:`sequencer_registers`): register 0 =
    the number of phases n (0: the switch is not used); register 1 + k = the flits phase k
    accepts at the switch's inputs, summed over its ports (size x input ports of its flows);
    register 1 + K + k = the flits each input port of phase k accepts; register 1 + 2K + k =
    the input ports phase k uses (bit p = port p).

    Mechanism: ``accepted`` (In, P bits) is each input port's valid & ready; their sum is
    counted, and per port too. ``allow`` (Out, P bits, from registers only) is high for a port
    of the active phase that has not yet accepted its share: the fabric gates the port's
    valid and ready with it, so a flit of a later phase that reaches a port early (its sender
    moved on, e.g. a ring neighbour already in the next stage, or the next phase's flits in a
    link behind the last of this phase's) waits at the port instead of being switched by this
    phase's configuration. When the count of phase k reaches its programmed total and
    k + 1 < n, the sequencer offers slot k + 1 on ``select`` (``select_valid`` held until
    ``select_ready``, the switch's phase-select stream; the switch waits until its datapath has
    drained, and holds its inputs meanwhile), then counts phase k + 1 from 0. ``index`` is the
    phase in progress (incremented when phase k's inputs are all in, before the select),
    ``count`` its accepted flits, ``finished`` high once the last phase's flits are all in.
    """

    def __init__(self, *, ports: int, phases: int):
        self.ports, self.phases = ports, phases
        super().__init__(sequencer_members(ports=ports, phases=phases, waddr=range(3 * phases + 1)))

    def elaborate(self, platform) -> Module:
        m = Module()
        K, P = self.phases, self.ports
        count_of = [Signal(32, name=f"phase_flits_{k}") for k in range(K)]
        share_of = [Signal(32, name=f"port_flits_{k}") for k in range(K)]
        mask_of = [Signal(P, name=f"port_mask_{k}") for k in range(K)]
        n = Signal(range(K + 1))
        with m.If(self.we):
            with m.Switch(self.waddr):
                with m.Case(0):
                    m.d.sync += n.eq(self.wdata)
                for k in range(K):
                    with m.Case(1 + k):
                        m.d.sync += count_of[k].eq(self.wdata)
                    with m.Case(1 + K + k):
                        m.d.sync += share_of[k].eq(self.wdata)
                    with m.Case(1 + 2 * K + k):
                        m.d.sync += mask_of[k].eq(self.wdata)
        # the active phase's total, per-port share and ports, registered when it is selected
        target, share, mask = Signal(32), Signal(32), Signal(P)
        port_count = [Signal(32, name=f"port_count_{p}") for p in range(P)]
        counting = Signal()
        m.d.comb += self.allow.eq(Cat(counting & mask[p] & (port_count[p] != share)
                                      for p in range(P)))
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
                    m.d.sync += [counting.eq(1), target.eq(Array(count_of)[self.index]),
                                 share.eq(Array(share_of)[self.index]),
                                 mask.eq(Array(mask_of)[self.index]),
                                 *(c.eq(0) for c in port_count)]
                    m.next = "COUNT"
            with m.State("COUNT"):
                m.d.sync += self.count.eq(self.count + incoming)
                for p in range(P):
                    with m.If(self.accepted[p]):
                        m.d.sync += port_count[p].eq(port_count[p] + 1)
                with m.If((self.count == target) & (self.index + 1 < n)):
                    m.d.sync += [self.index.eq(self.index + 1), self.count.eq(0), counting.eq(0),
                                 self.select_slot.eq(self.index + 1)]
                    m.next = "SELECT"
                with m.If(self.start):
                    m.d.sync += [self.index.eq(0), self.count.eq(0), self.select_slot.eq(0),
                                 counting.eq(0)]
                    m.next = "SELECT"
        return m
