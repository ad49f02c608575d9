"""The packet switch's flow-port table: per stored phase and input, the inputs that reduce with
it and the outputs its flow reaches (written by the host with the phase's configuration)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Array, Const
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import phase_index_width
from hdl.contracts.errors import FredError

__all__ = ["FlowPortTable"]


class FlowPortTable(wiring.Component):
    """K x P entries of (partners, outputs), both P-bit masks, read for one slot at a time.

    Why: the configuration's microswitch modes say where flits go, not which inputs are the
    operands of one reduction or which outputs one input's packets leave by; the control unit
    needs both to start a reduction's packet only with every operand present and the room for
    it downstream (``docs/switch.md``, "Starting a packet"). The configuration compiler knows
    the flows, so the host writes them; an entry that is never written (all zero) leaves its
    input as before: no partners to wait for, no output room to check.

    Parameters: ports P >= 2, phases K >= 1.

    Members:
        we, slot, input, partners, outputs: ``In``: write entry (slot, input) when ``we`` (one
            per cycle; takes effect the next cycle). ``partners`` must not hold ``input``.
        read_slot: ``In(phase index)``; read_partners, read_outputs: ``Out(P).array(P)``: the
            entries of ``read_slot``, per input (combinational).
        peek_slot, peek_input: ``In``; peek_outputs: ``Out(P)``: the outputs of one more entry
            (combinational): the control unit's yield candidate, a packet of another phase
            whose room it checks (docs/switch.md, "Control unit").

    Shared flows (``shared``; the packet switch's :class:`~hdl.designs.switch.shared_flows.SharedFlows`,
    docs/switch.md, "Shared stored flows"): several slots are served at once, so the entries
    are also read per input and per slot:
        in_slot: ``In(phase index).array(P)``; in_partners, in_outputs: ``Out(P).array(P)``:
            input n's entry in slot ``in_slot[n]`` (the slot of the flow at its head).
        slot_outputs: ``Out(P).array(K)``: the outputs of slot k, the union of its entries'.

    Storage: K x P x 2P flip-flops (small: the slots are few and the masks P bits).
    """

    def __init__(self, *, ports: int, phases: int, shared: bool = False):
        if isinstance(ports, bool) or not isinstance(ports, int) or ports < 2:
            raise FredError(f"ports must be an integer >= 2, got {ports!r}")
        if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
            raise FredError(f"phases must be an integer >= 1, got {phases!r}")
        if shared not in (False, True):
            raise FredError(f"shared must be a bool, got {shared!r}")
        self.ports, self.phases, self.shared = ports, phases, shared
        pw = phase_index_width(phases)
        extra = {}
        if shared:
            extra = {"in_slot": In(pw).array(ports), "in_partners": Out(ports).array(ports),
                     "in_outputs": Out(ports).array(ports),
                     "slot_outputs": Out(ports).array(phases)}
        super().__init__({
            **extra,
            "we": In(1), "slot": In(pw), "input": In(range(ports)),
            "partners": In(ports), "outputs": In(ports),
            "read_slot": In(pw),
            "read_partners": Out(ports).array(ports),
            "read_outputs": Out(ports).array(ports),
            "peek_slot": In(pw), "peek_input": In(range(ports)), "peek_outputs": Out(ports),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        P, K = self.ports, self.phases
        partners = [[Signal(P, name=f"partners{k}_{n}") for n in range(P)] for k in range(K)]
        outputs = [[Signal(P, name=f"outputs{k}_{n}") for n in range(P)] for k in range(K)]
        for k in range(K):
            for n in range(P):
                with m.If(self.we & (self.slot == k) & (self.input == n)):
                    m.d.sync += [partners[k][n].eq(self.partners), outputs[k][n].eq(self.outputs)]
        # every value of the slot index has an entry (slots >= K read as empty), so the
        # selection is a complete case (Verilator's CASEINCOMPLETE)
        pad = [Const(0, P)] * ((1 << len(self.read_slot)) - K)
        for n in range(P):
            m.d.comb += [
                self.read_partners[n].eq(Array([partners[k][n] for k in range(K)] + pad)[self.read_slot]),
                self.read_outputs[n].eq(Array([outputs[k][n] for k in range(K)] + pad)[self.read_slot]),
            ]
        by_input = [Array([outputs[k][n] for k in range(K)] + pad)[self.peek_slot] for n in range(P)]
        pad_in = [Const(0, P)] * ((1 << len(self.peek_input)) - P)
        m.d.comb += self.peek_outputs.eq(Array(by_input + pad_in)[self.peek_input])
        if self.shared:
            for n in range(P):
                m.d.comb += [
                    self.in_partners[n].eq(Array([partners[k][n] for k in range(K)] + pad)[self.in_slot[n]]),
                    self.in_outputs[n].eq(Array([outputs[k][n] for k in range(K)] + pad)[self.in_slot[n]]),
                ]
            for k in range(K):
                union = outputs[k][0]
                for n in range(1, P):
                    union = union | outputs[k][n]
                m.d.comb += self.slot_outputs[k].eq(union)
        return m
