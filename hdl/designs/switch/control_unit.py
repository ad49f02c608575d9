"""The packet switch's control unit: picks the phase from the waiting headers, preempts a lower
priority phase (MP > PP > DP) at packet boundaries, and drives the configuration memory's
select."""

from __future__ import annotations

import enum

from amaranth import Const, Module, Signal
from amaranth.hdl import Mux, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import wire_bits
from hdl.contracts.errors import FredError
from hdl.contracts.packet import DATA_VCS, PRIORITY, PacketFormat
from hdl.designs.layouts import struct_layout

from .signal_folds import and_fold, or_fold

__all__ = ["ControlUnit", "CUState", "COUNTER_BITS", "check_entries", "check_claim_after", "check_claim_cycles"]

COUNTER_BITS = 16


class CUState(enum.IntEnum):
    """``ControlUnit.state`` codes."""

    RUN = 0      #: packets of the active phase start freely
    DRAIN = 1    #: only packets in flight and a reduction's lagging operands finish, then select
    SELECT = 2   #: the configuration memory copies the next phase in (datapath empty)
    SETTLE = 3   #: one cycle after the select completed, while ``active_phase`` updates


class ControlUnit(wiring.Component):
    """Header-driven phase control of a P-port packet switch.

    Parameters (keyword-only, validated): ports P >= 2; phases K (1..2**phase_bits); packet
    (:class:`PacketFormat`); online, ordered, middle (below); yield_after (0..4095 cycles, 0 =
    hold the active phase while its packets wait; the switch passes a select's cost);
    entries (a set of input ports, online only: their online packets need ``room2``, below);
    bubble_outputs (a set of output ports, or None = every output: the outputs on which an
    entry's packets need ``room2``; elsewhere they need ``room`` as any input's);
    claim_after (0 = never, else 1..4095 cycles, entries only): an entry whose packet has
    waited that long for a bubble output *claims* it (below, ``draining``).

    Members (from the P :class:`~hdl.designs.switch.vc_input_buffer.VCInputBuffer` s, the datapath and
    the :class:`~hdl.designs.switch.config_memory.ConfigMemory`):
        head_valid, head_first: ``In(3).array(P)``; head: ``In(header).array(3).array(P)``:
            each input's head flit per VC, whether it starts a packet, its header.
        started: ``In(P)``: input n passed the first flit of a packet to the datapath this cycle.
        busy: ``In(1)``: the datapath holds flits.
        header_select: ``In(1)``: 1 = header-driven (this unit selects phases); 0 = host-driven (the host
            selects through the configuration memory's port; every input forwards packets whose
            header names the active phase, read from VC ``host_vc``).
        host_vc: ``In(2)``.
        select: ``Out(stream.Signature(phase index))``: to the configuration memory (header mode).
        active_phase, active_valid, loaded, hold: ``In``: the configuration memory's state.
        vc: ``Out(2)``: the VC every input reads; enable: ``Out(P)``: input n may pass a flit.
        state: ``Out(2)`` (:class:`CUState`); waiting: ``Out(3)``: bit v, a packet of VC v waits
            at the head of some input; preemptions, selects: ``Out(COUNTER_BITS)`` counters.

    Policy (header mode):
        * RUN: an input passes flits when it is inside a packet of the current VC, or its head
          packet in that VC belongs to the active phase. Per input, the flow and sequence
          number of the last packet it started in this phase are recorded.
        * When a packet of a higher-priority VC waits at any input (MP > PP > DP), or no packet
          of the active phase waits or is partly sent while some other packet waits, the unit
          DRAINs: an input may still start its head packet (flow f, sequence number s) of the
          active phase only if some input already started a packet of flow f numbered >= s
          (serial-number arithmetic; sequence numbers count a flow's packets). That finishes
          every packet in flight, keeps the operands of a reduction aligned (if one input of a
          reduction started packet s, its partner must still send its packet s, possibly not
          arrived yet, or the reduction would hold the datapath for ever), and stops every
          other flow at its next packet boundary. Once no input is inside a packet, none may start,
          and the datapath is empty, the next phase is the one of the highest-priority waiting
          packet (lowest input index first) and is SELECTed (the memory's N + 2 cycle copy).
        * The preempted phase's packets stay in their VC buffers; when no higher-priority packet
          waits, it is selected again and resumes where it stopped (nothing lost or reordered:
          each input's VC buffer is a FIFO and a packet is never split across a switch).
        * Yield (``yield_after`` > 0 cycles; 0 = hold): when RUN has been stuck for
          ``yield_after`` cycles in a row -- packets of the active phase wait, none is inside a
          packet, none can start (no room downstream, or a reduction's operand missing) -- and
          a packet of another phase of the served VC waits at a head with room (``room``;
          stored: its entry's outputs, read through ``peek_*`` from the flow-port table), the
          unit DRAINs and selects that phase (:meth:`_yield`; docs/switch.md, "Control unit").

    Online routing (``online``; the default phase index ``packet.online_phase`` needs no
    stored configuration: selecting it is a drain and no copy, and ``online_mode`` then tells
    the switch to take its modes from the :class:`~hdl.designs.switch.online_router.OnlineRouter`):
        ended: ``In(P)``: input n passed the last flit of a packet to the datapath;
        out_last: ``In(P)``: output n passed the last flit of a packet out of the datapath;
        route_req / route_src / route_dst: ``Out``: set up a path (to the router);
        route_ok: ``In(1)``: the router can (always at m >= 3); release: ``Out(P)``: release
        the path ending at output n (its last flit left).
        In RUN, an input whose head packet (current VC, default index) names a free
        output and which is on no path gets a path (one per cycle, round-robin: the input
        after the last one granted first); it then forwards that packet and, in RUN,
        every next packet at its head for the same output (the path is kept: a stream of
        packets runs at one flit per cycle instead of waiting latency + 1 cycles per packet
        for the release and a new set-up), unless another input's packet asks for that output
        or its path waits behind (fair hand-over, the contested rule: the owner then starts no
        new packet there); the path is released when the
        last packet started on it leaves the output and no other has started. DRAIN lets only inputs inside a
        packet (or granted a path) finish and waits until every path is released. A path is
        granted only with ``room`` for a whole packet on its output, reserved at the grant;
        every later packet on it starts only with ``room``, reserved as it starts
        (``reserve``), so no online packet waits inside the datapath for another switch
        (docs/switch.md, "Room for every online packet"). An entry input (``entries``) needs
        ``room2`` instead (``In(P)``: room for two whole packets) for each of these on a
        bubble output (``bubble_outputs``), and to make such an output contested it needs
        ``room2`` or ``room`` while ``draining`` (``In(P)``: credits came back on output n's
        served VC within the last 2 x ``packet_flits`` cycles): it leaves a bubble there
        (docs/switch.md, "Entries leave a bubble"). With ``claim_after`` the contest with room
        for one waits until the entry's packet has waited ``claim_after`` cycles (a stripe's
        fair interval at the output), and then also keeps every other input from a new path to
        that output (none granted, none set up behind) until the entry's room reaches two: the
        claim, which lasts only while ``draining``.

    Phase order (``ordered``; ``order_*`` from a
    :class:`~hdl.designs.switch.phase_order.PhaseOrder`, docs/switch.md, "Phase order"): while
    ``order_active``, a select on VC ``order_vc`` takes ``order_slot`` instead of the first
    waiting packet's phase, and RUN stays on it (no drain for other phases of that VC; a
    higher-priority VC still preempts) until every input with a flow-port table entry in it
    has started its packet numbered ``order_last``; then ``order_advance`` (one cycle) and the
    unit drains to the next entry (``order_restart``: the order was rewritten, forget the
    inputs done). A stored phase of VC ``order_vc`` that is not the current entry (the one
    whose entry just completed) starts no packet in RUN: the unit drains and selects the entry
    (else it would serve the next run of that slot ahead of the order). So every switch with
    the same order sends those phases' packets in one order, whatever the arrival order of
    its inputs.

    A rewrite of the active slot (the slot unloaded from its first word on) makes the active
    copy stale: no packet starts in RUN until the unit has drained and selected the slot again,
    so the rewrite takes effect at the slot's next packet. A packet of a phase whose slot is
    rewritten while it waits makes the select fail (``NOT_LOADED``); the unit then retries
    until the slot is loaded again (host rule: do not rewrite a slot with traffic waiting). Timing: from the cycle a higher-priority header is at
    an input's head, DRAIN starts the next cycle; the datapath drains in its latency plus the
    rest of the packets in flight; SELECT takes the memory's N + 2 cycles; SETTLE one cycle.
    """

    def __new__(cls, *, ports: int, phases: int, packet: PacketFormat, online: bool = False,
                ordered: bool = False, middle: int = 3, yield_after: int = 0,
                entries: frozenset = frozenset(), bubble_outputs: frozenset | None = None,
                shared_phase: int | None = None, claim_after: int = 0):
        if isinstance(ports, bool) or not isinstance(ports, int) or ports < 2:
            raise FredError(f"ports must be an integer >= 2, got {ports!r}")
        if isinstance(phases, bool) or not isinstance(phases, int) or not 1 <= phases <= 1 << packet.phase_bits:
            raise FredError(f"phases must be in 1..{1 << packet.phase_bits}, got {phases!r}")
        if online and (phases > packet.online_phase or not packet.dest_bits
                       or ports > 1 << packet.dest_bits):
            raise FredError(f"online routing needs phases <= {packet.online_phase} (got {phases}) "
                            f"and dest_bits covering {ports} ports (got {packet.dest_bits})")
        if isinstance(yield_after, bool) or not isinstance(yield_after, int) or not 0 <= yield_after < 1 << 12:
            raise FredError(f"yield_after must be a whole number of cycles in 0..4095, got {yield_after!r}")
        check_entries(entries, ports, online, bubble_outputs)
        check_claim_after(claim_after, entries)
        if shared_phase is not None and (isinstance(shared_phase, bool) or not isinstance(shared_phase, int)
                                         or not 0 <= shared_phase < phases
                                         or online and shared_phase == packet.online_phase):
            raise FredError(f"shared_phase must be None or a slot index in 0..{phases - 1} (not the "
                            f"online phase), got {shared_phase!r}")
        return super().__new__(cls)

    def __init__(self, *, ports: int, phases: int, packet: PacketFormat, online: bool = False,
                 ordered: bool = False, middle: int = 3, yield_after: int = 0,
                 entries: frozenset = frozenset(), bubble_outputs: frozenset | None = None,
                 shared_phase: int | None = None, claim_after: int = 0):
        self.shared_phase, self.claim_after = shared_phase, claim_after
        self.ports, self.phases, self.packet, self.online = ports, phases, packet, bool(online)
        self.entries = frozenset(entries)
        self.bubble_outputs = frozenset(range(ports) if bubble_outputs is None else bubble_outputs)
        self.ordered, self.middle, self.yield_after = bool(ordered), middle, yield_after
        nvc = len(DATA_VCS)
        pw = packet.phase_bits
        order = {}
        if self.ordered:
            # the phase order (:class:`~hdl.designs.switch.phase_order.PhaseOrder`)
            order = {"order_active": In(1), "order_slot": In(pw), "order_last": In(packet.seq_bits),
                     "order_vc": In(2), "order_restart": In(1), "order_advance": Out(1)}
        paths = {}
        # several paths per input and paths behind others: P >= 3 (FredSwitch(routed)); a
        # Fred_m(2) is one RD microswitch, where two paths of one input would be a broadcast
        self.behind = self.online and ports >= 3
        if self.behind:
            # held links and routes of the online paths (OnlineRouter(held=True), FredSwitch(routed))
            w = wire_bits(middle)
            paths = {"route": Out(w).array(ports), "route_keep": Out(1), "route_wire": In(w),
                     "in_block": Out(middle), "out_block": Out(middle), "swap": Out(ports),
                     "swap_wire": Out(w).array(ports)}
        shared = {}
        if shared_phase is not None:
            # the shared stored flows (:class:`~hdl.designs.switch.shared_flows.SharedFlows`)
            shared = {"shared_mode": Out(1), "shared_run": Out(1), "shared_enable": In(ports),
                      "shared_pending": In(ports)}
        super().__init__({
            **order,
            **paths,
            **shared,
            "head_valid": In(nvc).array(ports),
            "head_first": In(nvc).array(ports),
            "head": In(struct_layout(packet.header)).array(nvc).array(ports),
            "started": In(ports),
            "busy": In(1),
            "header_select": In(1),
            "host_vc": In(2),
            "select": Out(stream.Signature(unsigned(pw))),
            "active_phase": In(pw),
            "active_valid": In(1),
            "loaded": In(phases),
            "hold": In(1),
            "vc": Out(2),
            "enable": Out(ports),
            "state": Out(2),
            "waiting": Out(nvc),
            "preemptions": Out(COUNTER_BITS),
            "selects": Out(COUNTER_BITS),
            # online routing (``online``; unused otherwise)
            "ended": In(ports),
            "out_last": In(ports),
            "online_mode": Out(1),
            "route_req": Out(1),
            "route_src": Out(range(ports)),
            "route_dst": Out(range(ports)),
            "route_ok": In(1),
            "release": Out(ports),
            # the start gate (:class:`~hdl.designs.switch.flow_port_table.FlowPortTable`)
            "partners": In(ports).array(ports),
            "outputs": In(ports).array(ports),
            "room": In(ports),
            "room2": In(ports),
            "draining": In(ports),
            "reserve": Out(ports),
            # the yield candidate's flow-port table entry (``yield_after``)
            "peek_slot": Out(pw),
            "peek_input": Out(range(ports)),
            "peek_outputs": In(ports),
        })

    def bubble(self, n: int, o: int) -> bool:
        """Input n's packets to output o need room for two packets (n an entry, o a bubble
        output: docs/switch.md, "Entries leave a bubble")."""
        return n in self.entries and o in self.bubble_outputs

    def _contest_room(self, n: int, o: int):
        """When input n's waiting packet makes output o contested (stops o's owner): any input
        at once, but an entry on a bubble output only with room for two packets (``room2``) or
        with room for one while o's credits keep returning (``draining``). Why the second term:
        at an output that stays backlogged (the L1's output to the NPU feeding a half-rate
        uplink) the room comes back one packet at a time and the owner's stream took each
        packet of it, so the entry never saw two and starved (docs/switch.md, "Entries leave
        a bubble": a stop lasts only while credits return; when they stop the owner moves)."""
        if not self.bubble(n, o):
            return 1
        return self.room2[o] | self.room[o] & self.draining[o] & self._aged[n]

    def _entry_ages(self, m, match):
        """``{entry: aged}``: the entry's head packet has waited ``claim_after`` cycles since it
        last started a packet or since its head came (a count saturating there); always 1
        without ``claim_after`` (the contest with room for one at once, session 15). Why wait:
        an entry carries one stripe where the through-stream it shares a backlogged output with
        carries the others, and that output's fair share per stripe is one packet per
        ``claim_after`` cycles (the packet fabric derives it, ``PacketFabricTop._claim_after``);
        a claim at once gave the entry one packet in two and backed the ring up
        (docs/switch.md, "Entries leave a bubble")."""
        limit = self.claim_after
        if not limit:
            return {n: 1 for n in self.entries}
        aged = {}
        for n in sorted(self.entries):
            waited = Signal(range(limit + 1), name=f"entry_waited{n}")
            m.d.sync += waited.eq(Mux(self.started[n] | ~match[n], 0,
                                      Mux(waited == limit, limit, waited + 1)))
            aged[n] = waited == limit
        return aged

    def elaborate(self, platform) -> Module:
        m = Module()
        P, nvc, sb = self.ports, len(DATA_VCS), self.packet.seq_bits
        pw = self.packet.phase_bits

        def seq_le(a, b):
            """a <= b modulo 2**sb (the difference's top bit clear)."""
            return ~(b - a)[sb - 1]

        state = Signal(2)
        cur_phase = Signal(pw)
        cur_vc = Signal(2)
        target = Signal(pw)
        target_vc = Signal(2)
        drain_ok = Signal(P)      # input n's head packet may start while DRAINing
        gate = Signal(P)          # ... its partners are present and its outputs have room

        # ---- what waits ---------------------------------------------------------------------
        first_phase = [Signal(pw, name=f"first_phase{v}") for v in range(nvc)]
        for v in range(nvc):
            waits = [self.head_valid[n][v] & self.head_first[n][v] for n in range(P)]
            m.d.comb += self.waiting[v].eq(0)
            for n in reversed(range(P)):   # the lowest input index wins
                with m.If(waits[n]):
                    m.d.comb += [self.waiting[v].eq(1), first_phase[v].eq(self.head[n][v].phase)]
        best_vc = Signal(2)
        best_phase = Signal(pw)
        any_wait = self.waiting.any()
        for v in reversed(PRIORITY):        # the highest priority wins
            with m.If(self.waiting[v]):
                m.d.comb += [best_vc.eq(v), best_phase.eq(first_phase[v])]
        rank = {v: len(PRIORITY) - 1 - PRIORITY.index(v) for v in PRIORITY}   # MP 2, PP 1, DP 0
        higher = Signal()
        for v in DATA_VCS:
            outranked = [w for w in DATA_VCS if rank[w] > rank[v]]
            with m.If(cur_vc == v):
                m.d.comb += higher.eq(0 if not outranked else
                                      or_fold(self.waiting[w] for w in outranked))

        # ---- per input ----------------------------------------------------------------------
        by_header = self.header_select
        m.d.comb += self.vc.eq(Mux(by_header, cur_vc, self.host_vc))
        online_mode = self.online_mode
        if self.online:
            m.d.comb += online_mode.eq(by_header & (cur_phase == self.packet.online_phase))
        # the shared phase's modes are its flows' (SharedFlows), not a stored copy
        shared_mode = Const(0, 1)
        if self.shared_phase is not None:
            shared_mode = self.shared_mode
            m.d.comb += [shared_mode.eq(by_header & (cur_phase == self.shared_phase)),
                         self.shared_run.eq(shared_mode & (state == CUState.RUN))]
        # the online phase needs no stored configuration: it is active whenever selected
        active_ok = online_mode | shared_mode | self.active_valid & (self.active_phase == cur_phase)
        # The active configuration is a copy: a rewrite of its slot (the slot unloaded from the
        # rewrite's first word on) makes it stale until a select copies a slot in again. A stale
        # phase starts no packet in RUN; the unit drains and selects the slot anew.
        stale = Signal()
        stale_now = Signal()
        select_done = self.select.valid & self.select.ready
        m.d.sync += stale.eq(self.active_valid & ~self.loaded.bit_select(self.active_phase, 1)
                             | stale & ~select_done)
        m.d.comb += stale_now.eq(stale & ~online_mode & ~shared_mode)
        # what keeps RUN from starting a packet of the active stored phase
        run_stop = stale_now
        if self.ordered:
            # a stored phase of the order's VC that is not the order's current entry (the unit
            # was running it when its entry completed) starts no packet either: left in RUN, it
            # went on serving the next run of the same slot that came before the order's next
            # entry -- one switch's order broken, a reduction's operands behind each other at the
            # next switch (a repeated ordered collective hung so, docs/fabric_iteration.md,
            # "Repeated ordered collectives"); the unit drains and selects the entry instead
            off_order = Signal(name="off_order")
            m.d.comb += off_order.eq(self.order_active & (cur_vc == self.order_vc)
                                     & (cur_phase != self.order_slot) & ~online_mode & ~shared_mode)
            run_stop = stale_now | off_order
        path_ok = Signal(P)      # input n's head packet (online) may start: its path is set up
        awaiting = Signal(P)     # ... a path was granted to it, its first packet not started yet
        partial, match, start_ok, heads, firsts = [], [], [], [], []
        for n in range(P):
            hv, hf = Signal(name=f"hv{n}"), Signal(name=f"hf{n}")
            h = Signal(struct_layout(self.packet.header), name=f"h{n}")
            for v in range(nvc):
                with m.If(self.vc == v):
                    m.d.comb += [hv.eq(self.head_valid[n][v]), hf.eq(self.head_first[n][v]),
                                 h.eq(self.head[n][v])]
            part = ~hf
            mt = Signal(name=f"match{n}")
            ok = Signal(name=f"start_ok{n}")
            m.d.comb += mt.eq(hv & hf & (h.phase == cur_phase) & active_ok)
            m.d.comb += ok.eq(mt & ~online_mode & ~shared_mode & gate[n]
                              & ((state == CUState.RUN) & ~run_stop
                                 | (state == CUState.DRAIN) & drain_ok[n]))
            manual_ok = ~self.hold & self.active_valid & (part | hv & hf & (h.phase == self.active_phase))
            running = (state == CUState.RUN) | (state == CUState.DRAIN)
            online_enable = 0          # (online_mode is never set without ``online``)
            if self.online:
                # an input forwards the rest of its packet, and a packet whose path is set up
                # (in RUN; a granted first packet also in DRAIN): a stream of packets to one
                # output keeps its path, and a packet to another output whose path is set up
                # follows at once
                online_enable = running & (
                    part | mt & path_ok[n] & (awaiting[n] | (state == CUState.RUN)))
            shared_pending, shared_enable = 0, 0
            if self.shared_phase is not None:
                # a granted packet starts also in DRAIN (its gang and room are committed)
                shared_pending = self.shared_pending[n]
                shared_enable = running & (part | self.shared_enable[n])
            with m.If(by_header & online_mode):
                m.d.comb += self.enable[n].eq(online_enable)
            with m.Elif(by_header & shared_mode):
                m.d.comb += self.enable[n].eq(shared_enable)
            with m.Elif(by_header):
                m.d.comb += self.enable[n].eq(part & running | ok)
            with m.Else():
                m.d.comb += self.enable[n].eq(manual_ok)
            partial.append(part | awaiting[n] | shared_pending)
            heads.append(h)
            firsts.append(hv & hf)
            match.append(mt)
            start_ok.append(ok)
        any_partial, any_match, any_start = or_fold(partial), or_fold(match), or_fold(start_ok)

        # The drain rule's record: per input, the flow and sequence number of the last packet it
        # started in this phase (an input carries one flow of a stored phase, so that is the
        # highest of its flow there). Cleared when a select completes.
        last_flow = [Signal(self.packet.flow_bits, name=f"last_flow{n}") for n in range(P)]
        last_seq = [Signal(sb, name=f"last_seq{n}") for n in range(P)]
        last_valid = Signal(P)
        for n in range(P):
            with m.If(self.started[n]):
                m.d.sync += [last_flow[n].eq(heads[n].flow), last_seq[n].eq(heads[n].seq),
                             last_valid[n].eq(1)]
        self._drain_rule(m, heads, last_valid, last_flow, last_seq, seq_le, drain_ok)

        # online, the reservations come from the paths while the default index is served
        table_reserve = Signal(P, name="table_reserve") if self.online else self.reserve
        self._start_gate(m, heads, match, last_valid, last_seq, seq_le, gate, table_reserve)
        # the phase a select takes, and whether RUN holds the active phase for the order
        want_phase, want_vc, order_hold = best_phase, best_vc, Const(0, 1)
        if self.ordered:
            want_phase, want_vc, order_hold = self._phase_order(m, heads, cur_phase, cur_vc,
                                                                active_ok, best_phase, best_vc,
                                                                state)

        # ---- online routing: paths set up behind others, released at their last flit out ---
        paths = Const(0, P)
        if self.online:
            online_reserve = Signal(P)
            paths = self._online_paths(m, heads, match, state, online_mode, path_ok, awaiting,
                                       online_reserve)
            # an online packet reserves its output's room by its path (the flow-port table,
            # read at the last stored slot, says nothing about it)
            m.d.comb += self.reserve.eq(Mux(online_mode, online_reserve, table_reserve))

        # ---- the work-conserving yield (``yield_after`` > 0) ----------------------------------
        yield_fire, yield_phase = Const(0, 1), Signal(pw, name="yield_phase")
        yielding = Signal()        # the DRAIN under way is a yield: select ``yield_target``
        yield_target = Signal(pw)
        if self.yield_after:
            run_ok = (state == CUState.RUN) & active_ok & ~stale_now & by_header & ~shared_mode
            yield_fire = self._yield(m, heads, firsts, match, gate, run_ok, online_mode,
                                     any_match, any_partial, cur_phase, yield_phase)

        # ---- state machine (header mode) --------------------------------------------------------
        m.d.comb += [self.state.eq(state), self.select.payload.eq(target)]
        with m.If(~by_header):
            m.d.sync += [state.eq(CUState.RUN), cur_phase.eq(self.active_phase), cur_vc.eq(self.host_vc),
                         last_valid.eq(0), yielding.eq(0)]
        with m.Elif(state == CUState.RUN):
            with m.If(~active_ok | run_stop):
                with m.If(any_wait):
                    m.d.sync += state.eq(CUState.DRAIN)
            with m.Elif(higher):
                m.d.sync += [state.eq(CUState.DRAIN), self.preemptions.eq(_inc(self.preemptions))]
            with m.Elif(~any_match & ~any_partial & any_wait & ~order_hold):
                m.d.sync += state.eq(CUState.DRAIN)
            with m.Elif(yield_fire & ~order_hold):
                m.d.sync += [state.eq(CUState.DRAIN), yielding.eq(1), yield_target.eq(yield_phase)]
        with m.Elif(state == CUState.DRAIN):
            with m.If(~any_partial & ~any_start & ~self.busy & ~paths.any()):
                # a yield selects its candidate unless a higher VC waits now (it preempts)
                to_yield = yielding & (want_vc == cur_vc)
                with m.If(~any_wait | ~to_yield & active_ok & ~stale_now & (want_phase == cur_phase)
                          & (want_vc == cur_vc)):
                    m.d.sync += [state.eq(CUState.RUN), yielding.eq(0)]
                with m.Else():
                    m.d.sync += [state.eq(CUState.SELECT), yielding.eq(0),
                                 target.eq(Mux(to_yield, yield_target, want_phase)),
                                 target_vc.eq(want_vc)]
        with m.Elif(state == CUState.SELECT):
            # the online phase has no stored configuration to copy
            to_online = Signal()
            if self.online:
                m.d.comb += to_online.eq(target == self.packet.online_phase)
            if self.shared_phase is not None:     # nor the shared phase (its flows' slots are)
                with m.If(target == self.shared_phase):
                    m.d.comb += to_online.eq(1)
            m.d.comb += self.select.valid.eq(~to_online)
            with m.If(self.select.ready | to_online):
                m.d.sync += [state.eq(CUState.SETTLE), cur_phase.eq(target), cur_vc.eq(target_vc),
                             last_valid.eq(0), self.selects.eq(_inc(self.selects))]
        with m.Else():
            m.d.sync += state.eq(CUState.RUN)
        return m

    def _online_paths(self, m, heads, match, state, online_mode, path_ok, awaiting,
                      online_reserve):
        """The online paths (docs/switch.md, "Online unicast routing"); returns the outputs
        with a path. Per output o: the path on it (source, first wire, packets started whose
        last flit has not left o) and at most one path waiting behind it (another input's,
        set up but for o's top-level lane, ``route_keep``). An input may own several paths
        (one per output, each on its own first wire: a packet takes its path's wire, carried
        with the flit, ``route``), so its next packet to another output starts as soon as
        that path is set up, while the previous one is still inside. One request per cycle,
        in round-robin order (the input after the last one granted first; input 0 first
        after reset): to a free output (a path), or to an output whose path is
        another input's and has nobody waiting (a path behind it; its first packet enters and
        waits inside, at o's top-level output microswitch). While a path waits behind
        o's, o's owner starts no new packet on it (fair hand-over: two streams to one output
        take turns); when the last packet started on o's path leaves o, the path is released
        and the waiting one, if any, takes o's lane (``swap``) the next cycle."""
        P, run = self.ports, online_mode & (state == CUState.RUN)
        w = wire_bits(self.middle)
        busy, pend = Signal(P, name="path_busy"), Signal(P, name="path_pend")
        src = [Signal(range(P), name=f"path_src{o}") for o in range(P)]
        wire = [Signal(w, name=f"path_wire{o}") for o in range(P)]
        flight = [Signal(8, name=f"path_flight{o}") for o in range(P)]   # < pipeline depth
        p_src = [Signal(range(P), name=f"pend_src{o}") for o in range(P)]
        p_wire = [Signal(w, name=f"pend_wire{o}") for o in range(P)]
        p_flight = [Signal(8, name=f"pend_flight{o}") for o in range(P)]
        cand, keep = Signal(P, name="route_cand"), Signal(P, name="route_cand_keep")
        # Room (docs/switch.md, "Online unicast routing", "Room for every online packet"): a
        # path is granted only when its output has room for a whole packet, reserved at the
        # grant, so the granted first packet starts unconditionally (also in DRAIN); every
        # later packet on a path starts only with room, reserved as it starts, and only once
        # its path owns the output (a waiting path holds one packet inside, so it takes one
        # packet's room from the stream ahead). At most one reservation per output and cycle:
        # no path is granted behind an owner starting a packet to that output. Fair hand-over:
        # an owner starts no new packet on o while another input's packet asks for o
        # (``contested``) or another input's path waits behind it: its packets in flight leave,
        # the room they free lets the asking input's path be set up behind, and o passes to it,
        # so two inputs streaming to one output alternate per packet. Before, the owner kept o
        # for as long as its packets kept coming: an input asking for o while the owner's next
        # packet was already waiting could not get a path behind it and starved, and its packet
        # blocked the packets behind it in its input's FIFO (e.g. an I/O write at the L2 of
        # Fred-A, waiting behind a DP stream down to the controller's L1 while the DP ring's
        # packets queued behind it: docs/fabric_validation.md, "Round-robin requests and the
        # contested output"; docs/switch.md, "Online unicast routing").
        self._aged = self._entry_ages(m, match)
        contested = Signal(P, name="path_contested")
        # ... of those, by an entry that waited claim_after cycles: a claim (below)
        claimed = Signal(P, name="path_claimed")
        owner_starts = Signal(P, name="path_owner_starts")
        for o in range(P):
            asks = [run & match[n] & ~awaiting[n] & (heads[n].dest == o) & (src[o] != n)
                    & self._contest_room(n, o) for n in range(P)]
            m.d.comb += contested[o].eq(or_fold(asks))
            if self.claim_after:
                m.d.comb += claimed[o].eq(or_fold([asks[n] for n in range(P) if self.bubble(n, o)]))
            for n in range(P):
                with m.If(src[o] == n):
                    m.d.comb += owner_starts[o].eq(busy[o] & self.started[n] & ~awaiting[n]
                                                   & (heads[n].dest == o))
        for n in range(P):
            live, mine = Signal(name=f"path_live{n}"), Signal(name=f"path_mine_pend{n}")
            # without paths behind others, an input asks only when it owns none (P = 2)
            alone = 1 if self.behind else ~or_fold([busy[o] & (src[o] == n) for o in range(P)])
            for o in range(P):
                # an entry input's packet to a bubble output needs room for two (the bubble it
                # leaves: docs/switch.md, "Entries leave a bubble")
                room = self.room2[o] if self.bubble(n, o) else self.room[o]
                # an output an aged entry claims gets no new path for another input (granted or
                # behind) while the entry's room grows to two packets: otherwise the released
                # output went back to the through-stream, which needs room for one, at every
                # turn where the downstream drains slower than about 1/2 flit per cycle
                # (docs/switch.md, "Entries leave a bubble"); the claim lapses with ``draining``
                free = 1 if self.bubble(n, o) or not self.claim_after else ~claimed[o]
                with m.If(heads[n].dest == o):
                    m.d.comb += [live.eq(busy[o] & (src[o] == n)), mine.eq(pend[o] & (p_src[o] == n)),
                                 path_ok[n].eq(awaiting[n] & (live | mine)
                                                 | room & live & ~pend[o] & ~contested[o]),
                                 cand[n].eq(run & match[n] & ~busy[o] & alone & room & free)]
                    if self.behind:
                        m.d.comb += [self.route[n].eq(Mux(mine, p_wire[o], wire[o])),
                                     keep[n].eq(run & match[n] & busy[o] & (src[o] != n) & ~pend[o]
                                                & ~self.release[o] & room
                                                & ~owner_starts[o] & free)]
        grant = self._request_in_turn(m, heads, cand, keep)
        for n in range(P):
            with m.If(grant & (self.route_src == n)):
                m.d.sync += awaiting[n].eq(1)
            with m.If(self.started[n] & awaiting[n]):
                m.d.sync += awaiting[n].eq(0)
        # the reservations: a grant's (for its first packet), a later packet's as it starts
        for o in range(P):
            m.d.comb += online_reserve[o].eq(
                grant & (self.route_dst == o)
                | or_fold([self.started[n] & ~awaiting[n] & (heads[n].dest == o) for n in range(P)]))
        lanes = (self.route_keep, self.route_wire) if self.behind else (Const(0, 1), Const(0, w))
        for o in range(P):
            self._output_path(m, o, heads, grant, lanes, (busy, src, wire, flight),
                              (pend, p_src, p_wire, p_flight))
        if self.behind:
            self._held_links(m, busy, src, wire, pend, p_src, p_wire)
        return busy

    def _request_in_turn(self, m, heads, cand, keep):
        """Drive the one online route request of the cycle from the candidates ``cand`` (a
        path to a free output) and ``keep`` (a path behind another input's), in round-robin
        order, each to its head's destination (``heads``); returns the grant (request and
        ``route_ok``)."""
        P = self.ports
        # Round-robin request order: the input after the last one granted asks first. A fixed
        # order (the lowest input first) starved a higher-numbered input whenever a lower one
        # re-requested the same output at every opening: at a half-rate uplink each packet's
        # path is released before the next can start, so a saturating stream asked again at
        # every packet and won every time (docs/fabric_validation.md, "The two misses that are
        # not head-of-line blocking"). The register starts at P - 1: input 0 first after reset.
        last = Signal(range(P), name="route_last", init=P - 1)
        for r in range(P):
            with m.If(last == r):
                order = [(r + 1 + k) % P for k in range(P)]
                for n in reversed(order):    # assigned last wins: the first in order
                    with m.If(cand[n] | keep[n]):
                        m.d.comb += [self.route_req.eq(1), self.route_src.eq(n),
                                     self.route_dst.eq(heads[n].dest)]
                        if self.behind:
                            m.d.comb += self.route_keep.eq(keep[n])
        grant = self.route_req & self.route_ok
        with m.If(grant):
            m.d.sync += last.eq(self.route_src)
        return grant

    def _held_links(self, m, busy, src, wire, pend, p_src, p_wire):
        """``in_block`` / ``out_block`` for the request: the top-level links held by paths."""
        P = self.ports
        # top-level links held by paths: from the requester's input microswitch (ports 2u, 2u+1;
        # the demux alone) and into the destination's output microswitch
        def link(cond, k):
            return Mux(cond, (Const(1, self.middle) << k)[:self.middle], 0)
        in_terms, out_terms = [], []
        for o in range(P):
            in_terms += [link(busy[o] & (src[o] >> 1 == self.route_src >> 1), wire[o]),
                         link(pend[o] & (p_src[o] >> 1 == self.route_src >> 1), p_wire[o])]
            near = (self.route_dst >> 1) == (o >> 1)
            out_terms += [link(busy[o] & near, wire[o]), link(pend[o] & near, p_wire[o])]
        m.d.comb += [self.in_block.eq(or_fold(in_terms)), self.out_block.eq(or_fold(out_terms))]

    def _output_path(self, m, o, heads, grant, request, live, waiting):
        """Output o's path and the one waiting behind it: count packets started on each, hand
        o over when the last of the current path's leaves, record a grant."""
        P = self.ports
        busy, src, wire, flight = live
        pend, p_src, p_wire, p_flight = waiting
        keep, chosen = request
        inc, p_inc = Signal(name=f"path_inc{o}"), Signal(name=f"pend_inc{o}")
        for n in range(P):
            starts = self.started[n] & (heads[n].dest == o)
            with m.If(src[o] == n):
                m.d.comb += inc.eq(busy[o] & starts)
            with m.If(p_src[o] == n):
                m.d.comb += p_inc.eq(pend[o] & starts)
        dec = Signal(name=f"path_dec{o}")
        m.d.comb += [dec.eq(busy[o] & self.out_last[o]),
                     self.release[o].eq(dec & ~inc & (flight[o] == 1))]
        if self.behind:
            m.d.comb += [self.swap[o].eq(self.release[o] & pend[o]), self.swap_wire[o].eq(p_wire[o])]
        m.d.sync += [flight[o].eq(flight[o] + inc - dec), p_flight[o].eq(p_flight[o] + p_inc)]
        with m.If(self.release[o] & pend[o]):      # the waiting path takes the output
            m.d.sync += [src[o].eq(p_src[o]), wire[o].eq(p_wire[o]),
                         flight[o].eq(p_flight[o] + p_inc), pend[o].eq(0), p_flight[o].eq(0)]
        with m.Elif(self.release[o]):
            m.d.sync += busy[o].eq(0)
        with m.If(grant & (self.route_dst == o)):
            with m.If(keep):
                m.d.sync += [pend[o].eq(1), p_src[o].eq(self.route_src), p_wire[o].eq(chosen),
                             p_flight[o].eq(0)]
            with m.Else():
                m.d.sync += [busy[o].eq(1), src[o].eq(self.route_src), wire[o].eq(chosen)]

    def _yield(self, m, heads, firsts, match, gate, run_ok, online_mode, any_match, any_partial,
               cur_phase, yield_phase):
        """The work-conserving yield (docs/switch.md, "Control unit"): returns the condition
        to DRAIN for another phase of the served VC, and sets ``yield_phase`` to it.

        *Stuck*: in RUN, packets of the active phase wait at some input's head, no input is
        inside a packet (or granted a path), and none of the waiting ones can start: each lacks
        room downstream (online: its output's ``room``; stored: its flow's outputs') or, in a
        reduction, an operand at a partner's head (the gate). The *candidate*: the lowest input
        whose head packet on the served VC belongs to another phase, if it has room (online:
        its output's ``room``; stored: the outputs of its flow-port table entry in its slot,
        ``peek_*``, and the slot is loaded). The unit yields when it has been stuck for
        ``yield_after`` cycles in a row (the guard against thrashing: a phase blocked for
        less than a select's cost keeps the switch, so the select a yield costs is paid only
        where the wait is longer than it) and the candidate has room: a sink-paced stream (an
        NPU's write into a 128 GBps I/O controller) no longer keeps the switch from a phase
        that can move. Another VC's packet is not a candidate (its room is counted on its own
        VC's credits, which the unit does not read); a higher VC preempts as before."""
        P, pw = self.ports, self.packet.phase_bits
        go = []
        for n in range(P):
            can = match[n] & gate[n]
            if self.online:
                dest_room = Signal(name=f"dest_room{n}")
                for o in range(P):
                    with m.If(heads[n].dest == o):
                        m.d.comb += dest_room.eq(self.room[o])
                can = Mux(online_mode, match[n] & dest_room, can)
            go.append(can)
        stuck = Signal(name="yield_stuck")
        m.d.comb += stuck.eq(run_ok & any_match & ~any_partial & ~or_fold(go))
        # the candidate: the lowest input whose head packet is of another phase
        found = Signal(name="yield_found")
        cand = Signal(range(P), name="yield_input")
        for n in reversed(range(P)):
            with m.If(firsts[n] & (heads[n].phase != cur_phase)):
                m.d.comb += [found.eq(1), cand.eq(n), yield_phase.eq(heads[n].phase)]
        m.d.comb += [self.peek_slot.eq(yield_phase), self.peek_input.eq(cand)]
        stored_room = self.loaded.bit_select(yield_phase, 1) & and_fold(
            ~self.peek_outputs[o] | self.room[o] for o in range(P))
        room = Signal(name="yield_room")
        m.d.comb += room.eq(stored_room)
        if self.online:
            with m.If(yield_phase == self.packet.online_phase):
                for n in range(P):
                    with m.If(cand == n):
                        for o in range(P):
                            with m.If(heads[n].dest == o):
                                m.d.comb += room.eq(self.room[o])
        # cycles stuck in a row before this one (saturating at yield_after)
        stuck_for = Signal(range(self.yield_after + 1), name="yield_stuck_for")
        m.d.sync += stuck_for.eq(Mux(stuck, Mux(stuck_for == self.yield_after, stuck_for,
                                                stuck_for + 1), 0))
        fire = Signal(name="yield_fire")
        m.d.comb += fire.eq(stuck & (stuck_for == self.yield_after) & found & room)
        return fire

    def _drain_rule(self, m, heads, last_valid, last_flow, last_seq, seq_le, drain_ok):
        """``drain_ok[n]``: input n's head packet may start while DRAINing (docs/switch.md,
        "Control unit")."""
        P = self.ports
        for n in range(P):
            # DRAIN: input n may start its head packet when some input already started a packet
            # of the same flow with a sequence number at least as high (its reduction partner
            # is ahead); its own previous packet has a lower number, so a lone flow stops.
            # With a flow-port table entry the partners are known: only they count. Why: an
            # all-reduce's up and down flows at an L1 carry one flow id, and by id alone the
            # down flow (numbered behind the up flow by the round trip) kept starting packets
            # until it caught up, a drain of several packets at the downlink's rate
            # (docs/switch.md, "Control unit").
            entry = self.outputs[n] != 0
            by_partner = or_fold(self.partners[n][j] & last_valid[j] & seq_le(heads[n].seq, last_seq[j])
                              for j in range(P) if j != n)
            by_flow = or_fold(last_valid[j] & (last_flow[j] == heads[n].flow)
                           & seq_le(heads[n].seq, last_seq[j]) for j in range(P))
            m.d.comb += drain_ok[n].eq(Mux(entry, by_partner, by_flow))

    def _phase_order(self, m, heads, cur_phase, cur_vc, active_ok, best_phase, best_vc, state):
        """The phase order (docs/switch.md, "Phase order"): returns (want_phase, want_vc,
        hold). ``want_*``: the order's current slot when the best waiting packet is on the
        order's VC, else the best waiting packet's phase; ``hold``: RUN keeps the active
        phase (it is the order's current entry, not complete). An input is done with the entry
        when it starts its packet numbered ``order_last``; the entry is complete when every
        input with a flow-port table entry in it (``outputs`` not zero) is done."""
        P = self.ports
        on_entry = Signal(name="on_order_entry")
        m.d.comb += on_entry.eq(self.order_active & active_ok & (cur_phase == self.order_slot)
                                & (cur_vc == self.order_vc))
        done = Signal(P, name="order_done")
        complete = Signal(name="order_complete")
        m.d.comb += complete.eq(on_entry & and_fold(done[n] | (self.outputs[n] == 0) for n in range(P)))
        for n in range(P):
            with m.If(on_entry & self.started[n] & (heads[n].seq == self.order_last)):
                m.d.sync += done[n].eq(1)
        with m.If(complete | self.order_restart):      # the next entry, or a new order
            m.d.sync += done.eq(0)
        m.d.comb += self.order_advance.eq(complete)
        want_phase = Signal.like(best_phase, name="want_phase")
        want_vc = Signal.like(best_vc, name="want_vc")
        ordered = self.order_active & (best_vc == self.order_vc)
        m.d.comb += [want_phase.eq(Mux(ordered, self.order_slot, best_phase)),
                     want_vc.eq(best_vc)]
        hold = Signal(name="order_hold")
        m.d.comb += hold.eq(on_entry & ~complete & (state == CUState.RUN))
        return want_phase, want_vc, hold

    def _start_gate(self, m, heads, match, last_valid, last_seq, seq_le, gate, reserve):
        """``gate[n]``: input n's head packet (sequence number s) may start as far as its
        partners and outputs go (``docs/switch.md``, "Starting a packet"): every partner input
        (``partners[n]``, the other operands of its reduction) has its packet s at the head or
        has started it, and either a partner started it already (the room is reserved) or
        every output of the flow (``outputs[n]``) has ``room`` for a whole packet. Why: a
        packet that starts with an operand missing, or without the room to leave, holds the
        datapath until another switch moves; if that switch waits for this one in another
        phase (a preemption that reached only some of a reduction's switches), nothing moves.
        ``reserve`` (bit o): a packet to output o starts (once per packet: the lowest partner
        starting it, unless one started it before)."""
        P = self.ports
        for n in range(P):
            s = heads[n].seq
            gang = Signal(name=f"gang{n}")
            ahead = Signal(name=f"ahead{n}")
            room_ok = Signal(name=f"room_ok{n}")
            m.d.comb += [
                gang.eq(and_fold(~self.partners[n][j] | match[j] & (heads[j].seq == s)
                             | last_valid[j] & seq_le(s, last_seq[j])
                             for j in range(P) if j != n)),
                ahead.eq(or_fold(self.partners[n][j] & last_valid[j] & seq_le(s, last_seq[j])
                              for j in range(P) if j != n)),
                room_ok.eq(and_fold(~self.outputs[n][o] | self.room[o] for o in range(P))),
                gate[n].eq(gang & (ahead | room_ok)),
            ]
            lead = Signal(name=f"lead{n}")
            first = self.started[n] & ~ahead
            if n:
                first = first & ~or_fold(self.partners[n][j] & self.started[j] for j in range(n))
            m.d.comb += lead.eq(first)
            for o in range(P):
                with m.If(lead & self.outputs[n][o]):
                    m.d.comb += reserve[o].eq(1)



def check_entries(entries, ports, online, bubble_outputs=None):
    """``entries``: a set of input ports, each < ``ports``; only with ``online``.
    ``bubble_outputs``: None or a set of output ports, each < ``ports``."""
    items = _ports("entries", entries, ports, "input")
    if items and not online:
        raise FredError(f"entries {items} need online routing (they change its room rule)")
    if bubble_outputs is not None:
        _ports("bubble_outputs", bubble_outputs, ports, "output")


def check_claim_cycles(claim_after, who: str = "") -> None:
    """``claim_after`` a whole number of cycles in 0..4095 (the claim's wait counter, a switch
    entry's or a stripe NPU's); FredError naming ``who`` otherwise."""
    if isinstance(claim_after, bool) or not isinstance(claim_after, int) or not 0 <= claim_after < 1 << 12:
        raise FredError(f"{who}claim_after must be a whole number of cycles in 0..4095, got {claim_after!r}")


def check_claim_after(claim_after, entries):
    """``claim_after``: 0, or a whole number of cycles in 1..4095 with ``entries``."""
    check_claim_cycles(claim_after)
    if claim_after and not entries:
        raise FredError(f"claim_after={claim_after} needs entries (only an entry claims an output)")


def _ports(what, ports_set, ports, kind):
    """``ports_set`` sorted, or FredError naming ``what`` if it is not a set of ``kind`` ports
    in 0..ports - 1."""
    if isinstance(ports_set, (str, bytes)):
        raise FredError(f"{what} must be a set of {kind} ports, got {ports_set!r}")
    try:
        items = sorted(ports_set)
    except TypeError:
        raise FredError(f"{what} must be a set of {kind} ports, got {ports_set!r}") from None
    for n in items:
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < ports:
            raise FredError(f"{what}: {kind} port {n!r} is not in 0..{ports - 1}")
    return items



def _inc(counter):
    """Saturating increment."""
    return counter + (counter != (1 << COUNTER_BITS) - 1)
