"""The packet switch's shared stored flows: several stored flows of one VC served at once,
interleaved per packet at the outputs they share (docs/switch.md, "Shared stored flows")."""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Module, Signal
from amaranth.hdl import Array, Cat, Const, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import config_words, phase_index_width
from hdl.contracts.dtypes import get_dtype
from hdl.contracts.encoding import RD_SUM, InputMode, RDMode, check_size, config_bits, layout
from hdl.contracts.errors import FredError
from hdl.contracts.packet import PacketFormat
from hdl.contracts.timing import microswitch_offsets, reduction_latency

from .signal_folds import and_fold, or_fold

__all__ = ["SharedFlows", "check_shared"]

#: packets started towards one output whose last flit has not left it (< the pipeline depth
#: in packets, plus one granted): 8 bits as the online paths' counters
FLIGHT_BITS = 8


def check_shared(*, shared_phase, flows, phases, packet, online):
    """Validate the packet switch's shared-flow parameters (keyword-only): ``shared_phase``
    None (the mode off) or a slot index in 0..phases-1 (the header phase of the shared flows;
    its stored configuration is never selected), ``flows`` the flow ids the table maps
    (1..2**flow_bits; only with ``shared_phase``)."""
    if shared_phase is None:
        if flows:
            raise FredError(f"flows={flows!r} needs shared_phase (the shared flows' header phase)")
        return
    if isinstance(shared_phase, bool) or not isinstance(shared_phase, int) or not 0 <= shared_phase < phases:
        raise FredError(f"shared_phase must be a slot index in 0..{phases - 1}, got {shared_phase!r}")
    if phases < 2:
        raise FredError(f"shared flows need at least one slot besides shared_phase: phases >= 2, "
                        f"got {phases}")
    limit = 1 << packet.flow_bits
    if isinstance(flows, bool) or not isinstance(flows, int) or not 1 <= flows <= limit:
        raise FredError(f"flows must be the number of flow ids the table maps, in 1..{limit} "
                        f"(2**flow_bits), got {flows!r}")
    if online and shared_phase == packet.online_phase:
        raise FredError(f"shared_phase {shared_phase} is the online phase index")


class SharedFlows(wiring.Component):
    """Serves the packets of the shared phase: each flow id names a stored slot (its lanes),
    and the packets of slots whose lanes are disjoint run at once; slots that share a lane
    (an output, a middle link) take turns per packet.

    Parameters (keyword-only): ports P, middle m (the datapath's), phases K, packet
    (:class:`PacketFormat`), flows F (flow ids in the table), word_width (the configuration
    port's), dtype (None, the default: a slot's lanes change hands only once its flits have
    left; a dtype name, the datapath's: *hand-over behind*, below; the caller passes it only
    when the datapath's outputs never stall a granted packet), lockstep (False, the default:
    a reducing slot is released only once its flits have left; True, only with ``dtype``: a
    reducing slot is handed over behind too when its gang entered in lock step, below).

    Members:
        cfg_we, cfg_slot, cfg_data, cfg_last: ``In``: a word taken by the configuration port
            (snooped: every slot's lane modes are kept in registers here, so a flow's lanes can be
            set in one cycle instead of a select's N + 2 copy).
        loaded: ``In(K)``: the configuration memory's loaded slots (checked legal).
        map_we, map_flow, map_slot, map_valid: ``In``: write the table entry of flow id
            ``map_flow``: its slot (``map_valid`` 0 clears it).
        head_ok, head_flow, head_seq: ``In``, per input: the input's head flit on the served VC
            starts a packet of the shared phase, and its header's flow and seq.
        in_slot: ``Out(phase index).array(P)``: the slot of each head's flow, read back as
            in_partners / in_outputs (``In(P).array(P)``) and slot_outputs (``In(P).array(K)``)
            from the :class:`~hdl.designs.switch.flow_port_table.FlowPortTable`.
        room: ``In(P)``: an output can take a whole packet (the start gate's room).
        run: ``In(1)``: new packets may be granted (the control unit serves the shared phase in
            RUN).
        started: ``In(P)``: input n passed its head packet's first flit; ended: ``In(P)``:
            input n passed a packet's last flit (read in registers only); out_last: ``In(P)``:
            output n passed a packet's last flit.
        passed: ``In(P)`` (only with ``lockstep``): input n passed a flit into the datapath.
        enable: ``Out(P)``: input n may start its head packet (granted, not started yet);
        pending: ``Out(P)``: the same without this cycle's grant (registered).
        reserve: ``Out(P)``: room reserved at a grant (one packet per output of the flow).
        modes: ``Out(config_bits)``: the datapath's configuration, the OR of the slots set up.
        active: ``Out(1)``: some slot is set up; set_up: ``Out(K)``: which (its modes are the
            datapath's at the inputs).
        unknown: ``Out(1)``: sticky, a shared-phase packet waited whose flow id has no table
            entry, or whose slot is not loaded or has no flow-port table entry for its input
            (it waits: the host writes the table before sending).

    Policy (per cycle, at most one grant; docs/switch.md, "Shared stored flows"):
        * A head packet (flow f, seq s) at input n is *ready* when f maps to a loaded slot k,
          k has a flow-port entry for n, every partner of n's entry has (f, s) at its head, no
          packet of k is granted but not started, and every output of the entry has ``room``.
        * It may be granted when k is set up already (its lanes carry k's packets: no set-up)
          and no ready packet of another slot wants a lane of k (fair hand-over), or when
          k's lanes are disjoint from those of every slot set up and not releasable.
        * Round robin among the inputs that can start: the input after the last one granted
          *in a contest* first (a grant while another input could start too; an uncontested
          grant leaves the pointer, so inputs that wait for room are not put behind an input
          that never contends with them at that moment).
        * A grant sets k up (its modes join the datapath's the next cycle: a set-up costs one
          cycle; a grant of a slot already set up enables at once), marks every input of the
          gang (n and its partners) to start the packet, reserves one packet of room on each
          output of the entry, and counts the packet in flight on those outputs.
        * Slot k is released (its lanes free) when it is set up, nothing of it is granted but
          not started, no packet of it is in flight on its outputs, and it is not granted now.

    Lanes are the microswitches: slot k's lane mask holds a bit per microswitch whose mode in
    k is not idle. Two slots with a common microswitch are never set up together, so the OR
    of the set-up slots' modes is each one's modes on its own microswitches. Without
    ``dtype`` a slot's microswitches change only when none of its flits is inside (it is
    released only when its last flit has left every output of it).

    Hand-over behind (``dtype`` given): each microswitch's field of ``modes`` is the set-up
    slots' OR delayed by the microswitch's offset (``hdl.contracts.timing.microswitch_offsets``),
    so a flit meets, at every microswitch, the modes of the cycle it entered, as long as it is
    never stalled inside. A slot none of whose modes reduces (no stall: its gang is one input,
    and the caller's outputs take every granted flit) is *passed* once every packet granted to
    it has entered the datapath (nothing granted and unstarted, no input still sending one)
    and ``reduction_latency`` - 1 more cycles have gone (an input or RD microswitch reads its
    mode again that long after a flit entered); a passed slot is released although its flits
    are still inside, and the next slot sharing its lanes is granted: its first flit enters
    ``reduction_latency`` + 1 cycles after the last one of the passed slot, and at a shared
    output follows it after ``reduction_latency`` idle cycles (1 on int32) instead of the
    switch's latency + 1. A reducing slot is released as without ``dtype``, unless
    ``lockstep``: then it is passed like the others when every packet of it entered *in lock
    step* since it was last quiet (in every cycle either every input of its gang passed a flit
    or none did; a sticky per-slot ``apart`` flag, cleared only when nothing of the slot is in
    flight). Why that is safe: a reduction waits inside only for an operand that entered later
    (the adder joins its two operands; every path through a microswitch has the same latency,
    ``hdl.designs.switch.reduce_path``), so operands that enter in the same cycle meet at every
    adder in the same cycle and, with outputs that never stall a granted packet, no flit of the
    slot ever stops inside: each flit meets at every microswitch the modes of the cycle it
    entered, exactly as a non-reducing slot's, and the next tree's first flit enters
    ``reduction_latency`` + 1 cycles behind the last one, so no flit of the old tree is added
    into the new one and none is dropped or doubled. A gang that entered apart (an operand
    arriving late through a slow link, an input's next flit not there yet) keeps the release
    after its flits have left. The flag is a register: an apart cycle holds the slot from the
    next cycle on, and the slot is passed no sooner than ``reduction_latency`` - 1 cycles after
    its last flit entered, so the flag of that flit's cycle is always seen.

    Latency: a grant in cycle t enables the gang in t (slot already set up) or t + 1 (set-up);
    from there the packet switch's latency. Backpressure: none inside (a packet is granted
    only with room on every output, reserved); an input whose datapath port is not ready keeps
    its grant until it starts.
    """

    def __init__(self, *, ports: int, middle: int, phases: int, packet: PacketFormat,
                 flows: int, word_width: int = 32, dtype=None, lockstep: bool = False):
        check_size(ports, middle)
        if not isinstance(packet, PacketFormat):
            raise FredError(f"packet must be a PacketFormat, got {packet!r}")
        if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
            raise FredError(f"phases must be an integer >= 1, got {phases!r}")
        limit = 1 << packet.flow_bits
        if isinstance(flows, bool) or not isinstance(flows, int) or not 1 <= flows <= limit:
            raise FredError(f"flows must be in 1..{limit} (2**flow_bits), got {flows!r}")
        if dtype is not None:
            get_dtype(dtype)   # a clear error naming an unknown dtype
        if lockstep and dtype is None:
            raise FredError("lockstep (reducing slots handed over behind) needs dtype (the "
                            "hand-over behind's staged modes)")
        self.lockstep = bool(lockstep)
        self.ports, self.middle, self.phases, self.packet = ports, middle, phases, packet
        self.flows, self.word_width, self.dtype = flows, word_width, dtype
        P, K = ports, phases
        pw = phase_index_width(phases)
        super().__init__({
            "cfg_we": In(1), "cfg_slot": In(pw), "cfg_data": In(word_width), "cfg_last": In(1),
            "loaded": In(K),
            "map_we": In(1), "map_flow": In(range(flows)), "map_slot": In(pw), "map_valid": In(1),
            "head_ok": In(P), "head_flow": In(packet.flow_bits).array(P),
            "head_seq": In(packet.seq_bits).array(P),
            "in_slot": Out(pw).array(P), "in_partners": In(P).array(P), "in_outputs": In(P).array(P),
            "slot_outputs": In(P).array(K),
            "room": In(P), "run": In(1), "started": In(P), "ended": In(P), "out_last": In(P),
            "enable": Out(P), "pending": Out(P), "reserve": Out(P),
            "modes": Out(config_bits(ports, middle)), "active": Out(1), "set_up": Out(K),
            "unknown": Out(1),
            **({"passed": In(P)} if self.lockstep else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        slot_modes, lanes = self._slot_registers(m)
        slot_of, valid_of = self._flow_table(m)
        state = self._state(m, lanes)
        self._internals = state   # the formal harness's mutants reach the grant rule's state
        heads = self._heads(m, state, slot_of, valid_of)
        grant = self._grant(m, state, heads, lanes)
        self._update(m, state, heads, grant, slot_modes)
        return m

    def _slot_registers(self, m):
        """Every slot's modes, kept as the configuration port writes them, and the lanes
        (microswitch fields) each slot's configuration uses."""
        K = self.phases
        bits = config_bits(self.ports, self.middle)
        words = config_words(self.ports, self.middle, self.word_width)
        fields = layout(self.ports, self.middle)
        index = Signal(range(words + 1), name="cfg_index")
        regs = [[Signal(self.word_width, name=f"slot{k}_word{w}") for w in range(words)]
                for k in range(K)]
        with m.If(self.cfg_we):
            m.d.sync += index.eq(Mux(self.cfg_last, 0, Mux(index == words, index, index + 1)))
            for k in range(K):
                for w in range(words):
                    with m.If((self.cfg_slot == k) & (index == w)):
                        m.d.sync += regs[k][w].eq(self.cfg_data)
        slot_modes, lanes = [], []
        for k in range(K):
            vec = Signal(bits, name=f"slot_modes{k}")
            flat = regs[k][0]
            for w in range(1, words):
                flat = flat | (regs[k][w].as_unsigned() << (w * self.word_width))
            m.d.comb += vec.eq(flat)
            lane = Signal(len(fields), name=f"slot_lanes{k}")
            m.d.comb += lane.eq(_cat(vec[f.offset:f.offset + f.width].any() for f in fields))
            slot_modes.append(vec)
            lanes.append(lane)
        return slot_modes, lanes

    def _flow_table(self, m):
        """The flow table: flow id -> slot, and whether the flow id is mapped (both indexed by
        a header's flow field, the ids beyond ``flows`` unmapped)."""
        F, pw = self.flows, len(self.map_slot)
        map_slot = [Signal(pw, name=f"flow_slot{f}") for f in range(F)]
        map_valid = Signal(F, name="flow_valid")
        for f in range(F):
            with m.If(self.map_we & (self.map_flow == f)):
                m.d.sync += [map_slot[f].eq(self.map_slot), map_valid[f].eq(self.map_valid)]
        pad = 1 << len(self.head_flow[0])
        slot_of = Array(map_slot + [Const(0, pw)] * (pad - F))
        valid_of = Array([map_valid[f] for f in range(F)] + [Const(0, 1)] * (pad - F))
        return slot_of, valid_of

    def _state(self, m, lanes):
        """The slots' set-up and pending state, the outputs' packets in flight, the lanes held
        by slots set up and not releasable, each indexable by a slot number."""
        P, K, pw = self.ports, self.phases, len(self.map_slot)
        fields = layout(self.ports, self.middle)
        st = SimpleNamespace(lanes=lanes)
        st.up = Signal(K, name="slot_up")
        st.pend = [Signal(P, name=f"slot_pending{k}") for k in range(K)]
        st.flight = [Signal(FLIGHT_BITS, name=f"out_flight{o}") for o in range(P)]
        pad = (1 << pw) - K
        st.lanes_of = Array(lanes + [Const(0, len(fields))] * pad)
        st.up_of = Array([st.up[k] for k in range(K)] + [Const(0, 1)] * pad)
        st.pend_of = Array(st.pend + [Const(0, P)] * pad)
        st.loaded_of = Array([self.loaded[k] for k in range(K)] + [Const(0, 1)] * pad)
        # releasable: set up, nothing granted and unstarted, nothing in flight on its outputs
        st.free = [Signal(name=f"slot_free{k}") for k in range(K)]
        st.quiet = [Signal(name=f"slot_quiet{k}") for k in range(K)]
        for k in range(K):
            m.d.comb += st.quiet[k].eq(and_fold([(st.flight[o] == 0) | ~self.slot_outputs[k][o]
                                                 for o in range(P)]))
            if self.dtype is None:
                m.d.comb += st.free[k].eq(st.up[k] & (st.pend[k] == 0) & st.quiet[k])
        if self.dtype is not None:
            self._passed(m, st)
        st.held = Signal(len(fields), name="lanes_held")   # lanes of slots set up, not releasable
        m.d.comb += st.held.eq(or_fold([Mux(st.up[k] & ~st.free[k], lanes[k], 0) for k in range(K)]))
        return st

    def _passed(self, m, st):
        """Hand-over behind (``dtype``): per slot, the inputs still sending a packet of it
        (``sending``, from the start to the last flit's entry) and the cycles since the last
        one entered; a slot that does not reduce is releasable (``free``) once passed."""
        P, K = self.ports, self.phases
        wait = reduction_latency(self.dtype) - 1   # >= 0: the output register
        st.sending = [Signal(P, name=f"slot_sending{k}") for k in range(K)]
        st.reduces = Signal(K, name="slot_reduces")
        if self.lockstep:
            st.apart = Signal(K, name="slot_apart")
        for k in range(K):
            age = Signal(range(wait + 1), name=f"slot_age{k}")
            busy = (st.pend[k] != 0) | (st.sending[k] != 0)
            m.d.sync += age.eq(Mux(busy, 0, Mux(age == wait, age, age + 1)))
            # never while a packet of it still enters (its outputs' flight implies as much)
            behind = ~st.reduces[k]
            if self.lockstep:
                behind = behind | ~st.apart[k]
            m.d.comb += st.free[k].eq(st.up[k] & ~busy & (st.quiet[k] | (age == wait) & behind))

    def _reduces(self, slot_modes):
        """Whether a slot's modes sum anywhere (an input microswitch's ``reduce``, an RD
        microswitch output ``RD_SUM``): its flits may wait inside for their partners."""
        terms = []
        reduce_bit = InputMode.layout(self.middle)["reduce"].offset
        for f in layout(self.ports, self.middle):
            if f.kind == "input":
                terms.append(slot_modes[f.offset + reduce_bit])
            elif f.kind == "rd":
                for out in RDMode.layout(self.middle):
                    start = f.offset + out.offset
                    terms.append(slot_modes[start:start + out.width] == RD_SUM)
        return or_fold(terms)

    def _heads(self, m, st, slot_of, valid_of):
        """Per input, what its head packet asks: its slot, whether it is known (mapped, loaded,
        an entry), its gang present (every reduction partner's head the same flow and seq),
        wanted (known, gang present, its slot without pending inputs) and ready (room on every
        output too)."""
        P, pw = self.ports, len(self.map_slot)
        h = SimpleNamespace(slot=[Signal(pw, name=f"head_slot{n}") for n in range(P)])
        h.known = Signal(P, name="head_known")
        h.gang = Signal(P, name="head_gang")
        h.ready = Signal(P, name="head_ready")
        h.want = Signal(P, name="head_wants")      # known and its gang present (room aside)
        for n in range(P):
            flow, seq = self.head_flow[n], self.head_seq[n]
            m.d.comb += [h.slot[n].eq(slot_of[flow]), self.in_slot[n].eq(h.slot[n])]
            entry = self.in_outputs[n] != 0
            m.d.comb += [
                h.known[n].eq(self.head_ok[n] & valid_of[flow] & st.loaded_of[h.slot[n]] & entry),
                h.gang[n].eq(and_fold([~self.in_partners[n][j] | self.head_ok[j]
                                   & (self.head_flow[j] == flow) & (self.head_seq[j] == seq)
                                   for j in range(P) if j != n])),
                h.want[n].eq(h.known[n] & h.gang[n] & (st.pend_of[h.slot[n]] == 0)),
                h.ready[n].eq(h.want[n] & and_fold([~self.in_outputs[n][o] | self.room[o] for o in range(P)])),
            ]
        return h

    def _grant(self, m, st, h, lanes):
        """The one packet granted this cycle (round robin over the inputs that can start), its
        slot, gang and outputs; ``reserve`` its outputs."""
        P, K, pw = self.ports, self.phases, len(self.map_slot)
        can = Signal(P, name="head_can")
        # fair hand-over: a slot set up keeps its lanes for its next packet only while no ready
        # packet of another slot (gang present, room on its outputs) wants one of them. Room
        # counts: a slot that cannot go anyway does not stop the holder (its lanes would idle)
        contested = Signal(K, name="slot_contested")
        for k in range(K):
            m.d.comb += contested[k].eq(or_fold([h.ready[n] & (h.slot[n] != k)
                                              & (st.lanes_of[h.slot[n]] & lanes[k]).any()
                                              for n in range(P)]))
        contested_of = Array([contested[k] for k in range(K)] + [Const(0, 1)] * ((1 << pw) - K))
        for n in range(P):
            k = h.slot[n]
            # its slot set up: the next packet on the same lanes, unless another slot wants one
            keep = st.up_of[k] & ~contested_of[k]
            # not set up: its lanes must be free of every slot set up and not releasable (a
            # releasable slot has no flit inside, so its lanes change hands this cycle)
            new = ~st.up_of[k] & ~(st.lanes_of[k] & st.held).any()
            m.d.comb += can[n].eq(self.run & h.ready[n] & (keep | new))
        g = SimpleNamespace(valid=Signal(name="grant"), input=Signal(range(P), name="grant_input"),
                            slot=Signal(pw, name="grant_slot"))
        last = Signal(range(P), name="grant_last", init=P - 1)
        # round robin: the input after the last one granted in a contest first
        for r in range(P):
            with m.If(last == r):
                for n in reversed([(r + 1 + i) % P for i in range(P)]):
                    with m.If(can[n]):
                        m.d.comb += [g.valid.eq(1), g.input.eq(n), g.slot.eq(h.slot[n])]
        g.gang = Signal(P, name="grant_gang")
        g.outs = Signal(P, name="grant_outputs")
        for n in range(P):
            with m.If(g.input == n):
                m.d.comb += [g.gang.eq(self.in_partners[n] | (1 << n)), g.outs.eq(self.in_outputs[n])]
        # the pointer moves only on a contested grant (another input could start too): an
        # uncontested grant (e.g. an L1's downlink tree, whose NPU outputs have room while its
        # controllers wait for room on the uplink) would reset it before those inputs every
        # time and turn their round robin into a fixed priority (the last starved, issue 29)
        contested_grant = Signal(name="grant_contested")
        m.d.comb += contested_grant.eq(or_fold([can[n] & (g.input != n) for n in range(P)]))
        with m.If(g.valid & contested_grant):
            m.d.sync += last.eq(g.input)
        m.d.comb += self.reserve.eq(Mux(g.valid, g.outs, 0))
        g.was_up = Signal(name="grant_was_up")
        m.d.comb += g.was_up.eq(st.up_of[g.slot])
        return g

    def _update(self, m, st, h, g, slot_modes):
        """Per slot: set up by a grant, its granted inputs until they start, released when
        free; the outputs' flight counts; the enables, modes and flags out."""
        P, K = self.ports, self.phases
        for k in range(K):
            granted = g.valid & (g.slot == k)
            left = st.pend[k] & ~self.started
            m.d.sync += st.pend[k].eq(Mux(granted, g.gang & ~Mux(g.was_up, self.started, 0), left))
            if self.dtype is not None:
                # an input sends slot k's packet from its first flit (granted before, or now on
                # a slot set up) until its last flit entered (a one-flit packet: never)
                now = self.started & (st.pend[k] | Mux(granted & g.was_up, g.gang, 0))
                m.d.sync += st.sending[k].eq((st.sending[k] | now) & ~self.ended)
                m.d.comb += st.reduces[k].eq(self._reduces(slot_modes[k]))
                if self.lockstep:
                    self._lockstep(m, st, k, granted & g.was_up, g.gang)
            with m.If(granted):
                m.d.sync += st.up[k].eq(1)
            with m.Elif(st.free[k]):
                m.d.sync += st.up[k].eq(0)
        # enable: granted and not started; a slot already set up starts in the grant's cycle
        pending = or_fold([st.pend[k] for k in range(K)])
        m.d.comb += [self.pending.eq(pending),
                     self.enable.eq(pending | Mux(g.valid & g.was_up, g.gang, 0)),
                     self.active.eq(st.up.any()), self.set_up.eq(st.up),
                     self.modes.eq(self._staged(m, or_fold([Mux(st.up[k], slot_modes[k], 0)
                                                              for k in range(K)])))]
        for o in range(P):
            inc = g.valid & g.outs[o]
            dec = self.out_last[o] & (st.flight[o] != 0)
            m.d.sync += st.flight[o].eq(st.flight[o] + inc - dec)
        with m.If(or_fold([self.head_ok[n] & ~h.known[n] for n in range(P)])):
            m.d.sync += self.unknown.eq(1)

    def _lockstep(self, m, st, k, granted_up, gang):
        """``st.apart[k]``: since slot k was last quiet (no packet of it in flight on its
        outputs), some cycle had an input of its gang pass a flit while another did not. The
        gang this cycle: its inputs granted and unstarted, sending, or starting now on a grant
        of a slot already set up."""
        carrying = st.pend[k] | st.sending[k] | Mux(granted_up, gang, 0)
        moved = self.passed & carrying
        apart_now = (moved != 0) & (moved != carrying)
        m.d.sync += st.apart[k].eq(apart_now | st.apart[k] & ~st.quiet[k])

    def _staged(self, m, modes):
        """The datapath's modes: without ``dtype`` the set-up slots' OR as it is; with it,
        each microswitch's field delayed by its offset (registers), so that a flit meets the
        modes of the cycle it entered at every microswitch (hand-over behind)."""
        if self.dtype is None:
            return modes
        offsets = microswitch_offsets(ports=self.ports, middle=self.middle, dtype=self.dtype)
        fields = []
        for f, offset in zip(layout(self.ports, self.middle), offsets):
            value = modes[f.offset:f.offset + f.width]
            for d in range(offset):
                stage = Signal(f.width, name=f"staged_{_name(f.name)}_{d}")
                m.d.sync += stage.eq(value)
                value = stage
            fields.append(value)
        return Cat(*fields)


def _cat(bits):
    return Cat(*list(bits))


def _name(microswitch):
    """A microswitch's layout name as a signal name: ``mid[1].in[0]`` -> ``mid1_in0``."""
    return microswitch.replace("].", "_").replace("[", "").replace("]", "")
