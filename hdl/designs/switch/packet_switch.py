"""``fred_packet_switch``: Fred_m(P) with VC input buffers, credit-based links and a control unit
that selects the phase from the packet headers (MP > PP > DP preemption)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Mux
from amaranth.hdl import unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import check_size
from hdl.contracts.config_port import (ERROR_WIDTH, check_port_parameters, config_word_layout,
                                  config_words, phase_index_width, select_cycles)
from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.contracts.timing import switch_latency
from hdl.designs.layouts import flit_layout, struct_layout

from .config_memory import ConfigMemory
from .control_unit import COUNTER_BITS, ControlUnit, check_claim_after, check_entries
from .fred_switch import FredSwitch
from .online_router import OnlineRouter
from .control_vc import MAX_FLOW_BITS, ControlRouter
from .flow_port_table import FlowPortTable
from .phase_order import MAX_ORDER_ENTRIES, PhaseOrder
from .shared_flows import SharedFlows, check_shared
from .signal_folds import or_fold
from .vc_input_buffer import VCInputBuffer, link_signature

__all__ = ["PacketSwitch", "credits_returning"]


def credits_returning(m: Module, vc, credits, packet_flits: int, *, suffix: str = ""):
    """1 while a credit came back on VC ``vc`` of ``credits`` (one credit signal per data VC)
    within the last 2 x ``packet_flits`` cycles: a count of quiet cycles, saturating there
    (registered; it starts saturated, i.e. 0). The window an entry's contest or claim of a
    backlogged output lasts without returning credits (docs/switch.md, "Entries leave a
    bubble"): the switch's ``draining`` and :class:`~hdl.designs.fabric.stripe_npu.StripeNpu`'s
    claim. ``suffix`` ends the signals' names."""
    limit = 2 * packet_flits
    returned = Signal(name=f"credit_back{suffix}")
    for v in range(len(DATA_VCS)):
        with m.If(vc == v):
            m.d.comb += returned.eq(credits[v] != 0)
    quiet = Signal(range(limit + 1), init=limit, name=f"credit_quiet{suffix}")
    m.d.sync += quiet.eq(Mux(returned, 0, Mux(quiet == limit, limit, quiet + 1)))
    return quiet != limit


class PacketSwitch(wiring.Component):
    """The FRED switch as the paper describes it, scaled down (``docs/switch.md``, "Packet
    switch").

    Parameters (keyword-only, validated): ports P, middle m, dtype, lanes (as
    :class:`~hdl.designs.switch.switch_top.FredSwitchTop`); phases K (1..2**packet.phase_bits);
    packet (:class:`PacketFormat`; the flit's tag is its header); depth: flits per data VC of
    each input buffer, and the credits each output starts with (the downstream buffer has the
    same depth); word_width: configuration word bits; entries (online only, a set of input
    ports, depth >= 2 packets): inputs whose online packets start only with room for two
    packets on their output, leaving a bubble for the packets already in a ring or chain
    (docs/switch.md, "Entries leave a bubble"; the packet fabric names the L1s' controller
    ports); bubble_outputs (a set of output ports, None = every output): the outputs where
    entries leave that bubble (elsewhere their packets need room for one; the packet fabric
    names an L1's NPU ports, where the striped chains' ring is entered); claim_after (0 =
    never, else 1..4095 cycles, with entries): an entry's packet that waited that long for a
    backlogged bubble output claims it (:class:`~hdl.designs.switch.control_unit.ControlUnit`;
    docs/switch.md, "Entries leave a bubble").

    Members (Verilog names joined with ``__``):
        i: ``In(link_signature(flit)).array(P)``: input links (no ready).
        i_credit: ``Out(2).array(3).array(P)``: credits returned to input n's sender, per VC
            (a count per cycle, :class:`VCInputBuffer`).
        o: ``Out(link_signature(flit)).array(P)``: output links; a flit of
            VC v leaves port n only while the port holds a credit for v.
        o_credit: ``In(2).array(3).array(P)``: credits the downstream returns, per VC.
        config: configuration words, as ``fred_switch``. phase: host select (used when
            ``header_select`` is 0); host_vc: the VC the inputs read in host mode.
        header_select: ``In(1)``: 1 = the control unit selects phases from the headers.
        active_phase, active_valid, loaded, error: the configuration memory's.
        busy: the datapath holds flits or a select is in progress.
        state: :class:`~hdl.designs.switch.control_unit.CUState`; waiting: VCs with a packet waiting;
        vc: the VC being served; preemptions, selects: counters.
        dropped: ``Out(COUNTER_BITS).array(P)``: malformed packets dropped per input;
        bad_header: any input dropped a packet (sticky); overflow: some input's VC received a
            flit with no free slot (sticky, the upstream broke the credit protocol);
        credit_error: some output got more credits back than its downstream buffer holds
            (sticky). Benches require overflow and credit_error stay 0: credit counters never
            overflow, and never underflow by construction (a flit leaves only with a credit).

    Control VC (``ctrl_depth`` > 0 flits per input; 0 = none, a ``vc`` = 3 packet is then
    malformed): one-flit ACK / NACK packets, credited per port by ``i_ctrl_credit`` /
    ``o_ctrl_credit`` (the downstream control buffer also holds ``ctrl_depth``), are sent to
    every input port of their flow (:class:`~hdl.designs.switch.control_vc.ControlRouter`, which learns
    a flow's input ports from the data packets forwarded; ``flow_clear`` forgets them;
    ``ctrl_unknown`` counts control packets of a flow not seen yet, dropped). A control flit
    leaves an output only between data packets, ahead of the next data packet.

    Online unicast routing (``online``; ``packet.dest_bits`` must cover P and K <
    ``2**phase_bits``): a packet whose ``phase`` is the default index ``packet.online_phase``
    goes to output ``dest``; the control unit sets up a path through free middle subnetworks
    (:class:`~hdl.designs.switch.online_router.OnlineRouter`, one per cycle, round-robin from the input after the last one granted) when
    the input and the output are both free, the input forwards the packet, and the path is
    released when its last flit leaves the datapath (``docs/switch.md``, "Online unicast
    routing"). An online packet starts only with room for it on its output, reserved as a
    flow-port table entry's packet reserves it ("Room for every online packet").

    Flow-port table (``flow_we``, ``flow_slot``, ``flow_input``, ``flow_partners``,
    ``flow_outputs``: :class:`~hdl.designs.switch.flow_port_table.FlowPortTable`): per slot and
    input, the other operands of its reduction and the outputs of its flow. With an entry, a
    packet starts only when its partners' packets of the same number are at their heads and
    every output of the flow has room for a whole packet (its credits minus the flits still
    owed to packets started before); a switch with every entry written is then virtual
    cut-through end to end, which is what lets MP preempt DP on only some switches of a
    reduction (``docs/switch.md``, "Starting a packet"). Without entries (all zero after
    reset) packets start as before.

    Phase order (``ordered``; ``order_we``, ``order_index``, ``order_slot``, ``order_last``
    write an entry, ``order_set``, ``order_length``, ``order_vc`` set the order and restart it:
    :class:`~hdl.designs.switch.phase_order.PhaseOrder`): the stored phases of one VC served
    in a programmed order, each until its inputs have started their last packet, so switches
    that feed one reduction send several phases of a VC in the same order (docs/switch.md,
    "Phase order"). Without it (or with length 0) phases are picked by arrival as before.
    ``order_entries`` (default None: one per slot): the order's depth, apart from the slots, so
    one order loaded once can hold an iteration's every ordered run (1..255, with ``ordered``).

    Work-conserving phases (``yield_after``, cycles; default None: :attr:`select_cycles`, a
    select's cost; 0: hold the active phase while any of its packets waits, the rule before
    2026-11-27): when every waiting packet of the active phase has been unable to start for
    ``yield_after`` cycles (no room downstream, or a reduction's operand missing) and a packet
    of another phase of the served VC waits with room, the control unit drains and selects
    that phase (docs/switch.md, "Control unit").

    Shared stored flows (``shared_phase``: a slot index, default None = off; ``flows``: the
    flow ids its table maps; ``shared_we``, ``shared_flow``, ``shared_slot``, ``shared_valid``
    write the table, ``shared_unknown`` is sticky: a packet of the shared phase waited with no
    usable entry): packets whose header names ``shared_phase`` are served per flow id, each
    flow id naming the stored slot of its lanes and its flow-port table entries; slots whose
    lanes are disjoint run at once, slots sharing a lane (an output) take turns per packet,
    round robin, each packet granted with all its reduction partners at their heads and room on
    all its outputs at once (:class:`~hdl.designs.switch.shared_flows.SharedFlows`,
    docs/switch.md, "Shared stored flows"). The slot ``shared_phase`` itself is never selected.
    Without a control VC (``ctrl_depth`` 0, whose flits could stall an output between two
    packets) the shared flows hand a non-reducing slot's lanes over behind its last packet:
    the datapath's modes are delayed per microswitch, and a change of flow at a shared output
    costs the reduction latency in idle cycles (1 on int32) instead of the switch's latency + 1.
    ``shared_lockstep`` (default False: off, the switch's Verilog as before; only with
    ``shared_phase`` and no control VC): a reducing slot's lanes are handed over behind too
    when every packet of it entered in lock step (``SharedFlows(lockstep=True)``, each input's
    flit transfers into the datapath read per cycle).

    Latency: one cycle in the input FIFO, then the Fred_m(P) latency (:attr:`latency` counts
    both); outputs are combinational from the datapath's registered outputs and the credit
    counters. The datapath and configuration memory are those of ``fred_switch``.
    """

    def __new__(cls, *, ports, middle, dtype, lanes, phases, packet, depth, word_width=32,
                ctrl_depth=0, online=False, ordered=False, order_entries=None, yield_after=None,
                entries=frozenset(),
                bubble_outputs=None, shared_phase=None, flows=0, claim_after=0,
                shared_lockstep=False):
        check_size(ports, middle)
        if not isinstance(packet, PacketFormat):
            raise FredError(f"packet must be a PacketFormat, got {packet!r}")
        if online not in (False, True):
            raise FredError(f"online must be a bool, got {online!r}")
        if ordered not in (False, True):
            raise FredError(f"ordered must be a bool, got {ordered!r}")
        if order_entries is not None and (not ordered or isinstance(order_entries, bool)
                                          or not isinstance(order_entries, int)
                                          or not 1 <= order_entries <= MAX_ORDER_ENTRIES):
            raise FredError(f"order_entries must be None (one per slot) or, with ordered, a whole number "
                            f"of entries in 1..{MAX_ORDER_ENTRIES}, got {order_entries!r}"
                            f"{'' if ordered else ' without ordered'}")
        if yield_after is not None and (isinstance(yield_after, bool) or not isinstance(yield_after, int)
                                        or not 0 <= yield_after < 1 << 12):
            raise FredError(f"yield_after must be None or a whole number of cycles in 0..4095, "
                            f"got {yield_after!r}")
        flit = FlitFormat(dtype=dtype, lanes=lanes, tag_width=packet.header_width)
        check_port_parameters(phases=phases, word_width=word_width)
        check_shared(shared_phase=shared_phase, flows=flows, phases=phases, packet=packet,
                     online=online)
        if not isinstance(shared_lockstep, bool):
            raise FredError(f"shared_lockstep must be a bool, got {shared_lockstep!r}")
        if shared_lockstep and (shared_phase is None or ctrl_depth):
            raise FredError("shared_lockstep hands reducing shared slots over behind: it needs "
                            "shared_phase and no control VC (ctrl_depth 0)")
        VCInputBuffer.check(flit=flit, packet=packet, phases=phases, depth=depth,
                            ctrl_depth=ctrl_depth, dest_limit=ports if online else 0)
        check_entries(entries, ports, online, bubble_outputs)
        check_claim_after(claim_after, entries)
        if entries and depth < 2 * packet.packet_flits:
            raise FredError(f"entries need room for two packets: depth >= {2 * packet.packet_flits} "
                            f"flits, got {depth}")
        if ctrl_depth and packet.flow_bits > MAX_FLOW_BITS:
            raise FredError(f"the control VC's flow table takes flow_bits <= {MAX_FLOW_BITS}, "
                            f"got {packet.flow_bits}")
        return super().__new__(cls)

    def __init__(self, *, ports: int, middle: int, dtype: str, lanes: int, phases: int,
                 packet: PacketFormat, depth: int, word_width: int = 32, ctrl_depth: int = 0,
                 online: bool = False, ordered: bool = False, order_entries: int | None = None,
                 yield_after: int | None = None,
                 entries=frozenset(), bubble_outputs=None, shared_phase: int | None = None,
                 flows: int = 0, claim_after: int = 0, shared_lockstep: bool = False):
        self.entries, self.bubble_outputs = frozenset(entries), bubble_outputs
        self.shared_lockstep = shared_lockstep
        self.claim_after = claim_after
        self.shared_phase, self.flows = shared_phase, flows
        self.flit = FlitFormat(dtype=dtype, lanes=lanes, tag_width=packet.header_width)
        self.online, self.ordered = online, ordered
        # the order's depth is apart from the slots: an iteration's ordered runs need an entry
        # per run and group, the stored phases only one slot per group (docs/switch.md)
        self.order_entries = phases if order_entries is None else order_entries
        self.ports, self.middle, self.phases, self.word_width = ports, middle, phases, word_width
        # the control unit's yield guard: a select's cost by default (docs/switch.md, "Control unit")
        self.yield_after = self.select_cycles if yield_after is None else yield_after
        self.packet, self.depth, self.ctrl_depth = packet, depth, ctrl_depth
        shape = flit_layout(self.flit)
        nvc = len(DATA_VCS)
        pw = phase_index_width(phases)
        super().__init__({
            "i": In(link_signature(shape)).array(ports),
            "i_credit": Out(2).array(nvc).array(ports),
            "o": Out(link_signature(shape)).array(ports),
            "o_credit": In(2).array(nvc).array(ports),
            "config": In(stream.Signature(struct_layout(config_word_layout(phases, word_width)))),
            "phase": In(stream.Signature(unsigned(pw))),
            "host_vc": In(2),
            "header_select": In(1),
            "active_phase": Out(pw),
            "active_valid": Out(1),
            "loaded": Out(phases),
            "error": Out(ERROR_WIDTH),
            "busy": Out(1),
            "state": Out(2),
            "waiting": Out(nvc),
            "vc": Out(2),
            "preemptions": Out(COUNTER_BITS),
            "selects": Out(COUNTER_BITS),
            "dropped": Out(16).array(ports),
            "bad_header": Out(1),
            "overflow": Out(1),
            "credit_error": Out(1),
            "i_ctrl_credit": Out(2).array(ports),
            "o_ctrl_credit": In(2).array(ports),
            "flow_clear": In(1),
            "ctrl_unknown": Out(16),
            "flow_we": In(1), "flow_slot": In(pw), "flow_input": In(range(ports)),
            "flow_partners": In(ports), "flow_outputs": In(ports),
            **self._order_ports(ordered, self.order_entries, pw, packet),
            **self._shared_ports(shared_phase, flows, pw),
        })

    @staticmethod
    def _shared_ports(shared_phase, flows, pw) -> dict:
        """The shared flows' table ports (only with ``shared_phase``)."""
        if shared_phase is None:
            return {}
        return {"shared_we": In(1), "shared_flow": In(range(flows)), "shared_slot": In(pw),
                "shared_valid": In(1), "shared_unknown": Out(1)}

    @staticmethod
    def _order_ports(ordered, entries, pw, packet) -> dict:
        """The phase order's write ports (only with ``ordered``: no unused Verilog inputs)."""
        if not ordered:
            return {}
        return {"order_we": In(1), "order_index": In(range(entries)), "order_slot": In(pw),
                "order_last": In(packet.seq_bits), "order_set": In(1),
                "order_length": In(range(entries + 1)), "order_vc": In(2)}

    def _phase_order(self, m, cu):
        """The phase order's table (:class:`~hdl.designs.switch.phase_order.PhaseOrder`),
        written through the ``order_*`` ports, read by the control unit."""
        order = m.submodules.phase_order = PhaseOrder(phases=self.phases,
                                                      seq_bits=self.packet.seq_bits,
                                                      entries=self.order_entries)
        m.d.comb += [order.we.eq(self.order_we), order.index.eq(self.order_index),
                     order.slot.eq(self.order_slot), order.last.eq(self.order_last),
                     order.set_we.eq(self.order_set), order.length.eq(self.order_length),
                     order.vc.eq(self.order_vc), order.advance.eq(cu.order_advance),
                     cu.order_active.eq(order.active), cu.order_slot.eq(order.current_slot),
                     cu.order_last.eq(order.current_last), cu.order_vc.eq(order.current_vc),
                     cu.order_restart.eq(self.order_set)]

    @property
    def latency(self) -> int:
        """Cycles from a flit on ``i`` (its phase active, credits available) to it on ``o``:
        the input FIFO's 1 plus Fred_m(P)'s."""
        return 1 + switch_latency(ports=self.ports, middle=self.middle, dtype=self.flit.dtype)

    @property
    def config_words(self) -> int:
        return config_words(self.ports, self.middle, self.word_width)

    @property
    def select_cycles(self) -> int:
        return select_cycles(self.ports, self.middle, self.word_width)

    def elaborate(self, platform) -> Module:
        m = Module()
        P, nvc = self.ports, len(DATA_VCS)
        memory = m.submodules.config_memory = ConfigMemory(
            ports=P, middle=self.middle, phases=self.phases, word_width=self.word_width)
        # paths behind others need input microswitches at the top level (P >= 3)
        routed = self.online and P >= 3
        core = m.submodules.switch = FredSwitch(ports=P, middle=self.middle, flit=self.flit,
                                                routed=routed)
        cu = m.submodules.control = ControlUnit(ports=P, phases=self.phases, packet=self.packet,
                                                online=self.online, ordered=self.ordered,
                                                middle=self.middle, yield_after=self.yield_after,
                                                entries=self.entries,
                                                bubble_outputs=self.bubble_outputs,
                                                shared_phase=self.shared_phase,
                                                claim_after=self.claim_after)
        if self.ordered:
            self._phase_order(m, cu)
        wiring.connect(m, wiring.flipped(self.config), memory.write)
        shared = self.shared_phase is not None
        table = m.submodules.flow_ports = FlowPortTable(ports=P, phases=self.phases, shared=shared)
        m.d.comb += [table.we.eq(self.flow_we), table.slot.eq(self.flow_slot),
                     table.input.eq(self.flow_input), table.partners.eq(self.flow_partners),
                     table.outputs.eq(self.flow_outputs), table.read_slot.eq(memory.active_phase)]
        for n in range(P):
            m.d.comb += [cu.partners[n].eq(table.read_partners[n]),
                         cu.outputs[n].eq(table.read_outputs[n])]
        m.d.comb += [table.peek_slot.eq(cu.peek_slot), table.peek_input.eq(cu.peek_input),
                     cu.peek_outputs.eq(table.peek_outputs)]
        # The configuration memory's select: the control unit's in header mode, the host's else.
        with m.If(self.header_select):
            m.d.comb += [memory.select.valid.eq(cu.select.valid),
                         memory.select.payload.eq(cu.select.payload),
                         cu.select.ready.eq(memory.select.ready)]
        with m.Else():
            m.d.comb += [memory.select.valid.eq(self.phase.valid),
                         memory.select.payload.eq(self.phase.payload),
                         self.phase.ready.eq(memory.select.ready)]
        core_modes = Signal.like(memory.modes, name="core_modes")
        out_last = [core.o[n].valid & core.o[n].ready & core.o[n].payload.last for n in range(P)]
        if self.online:
            # the default phase index: modes of the paths set up online
            router = m.submodules.online_router = OnlineRouter(ports=P, middle=self.middle,
                                                               held=routed)
            m.d.comb += [
                router.req.eq(cu.route_req), router.src.eq(cu.route_src),
                router.dst.eq(cu.route_dst), cu.route_ok.eq(router.ok), router.rel.eq(cu.release),
                core_modes.eq(Mux(cu.online_mode, router.modes, memory.modes)),
            ]
            if routed:
                m.d.comb += [router.in_block.eq(cu.in_block), router.out_block.eq(cu.out_block),
                             router.keep_out.eq(cu.route_keep), router.swap.eq(cu.swap),
                             cu.route_wire.eq(router.wire), core.use_route.eq(cu.online_mode)]
                for n in range(P):
                    m.d.comb += [router.swap_wire[n].eq(cu.swap_wire[n]),
                                 core.route[n].eq(cu.route[n])]
            for n in range(P):
                m.d.comb += cu.out_last[n].eq(out_last[n])
        else:
            m.d.comb += core_modes.eq(memory.modes)
        m.d.comb += [
            memory.drained.eq(~core.busy),
            cu.busy.eq(core.busy),
            cu.header_select.eq(self.header_select),
            cu.host_vc.eq(self.host_vc),
            cu.active_phase.eq(memory.active_phase),
            cu.active_valid.eq(memory.active_valid),
            cu.loaded.eq(memory.loaded),
            cu.hold.eq(memory.hold),
            self.busy.eq(core.busy | memory.hold),
            self.error.eq(memory.error),
            self.active_phase.eq(memory.active_phase),
            self.active_valid.eq(memory.active_valid),
            self.loaded.eq(memory.loaded),
            self.state.eq(cu.state),
            self.waiting.eq(cu.waiting),
            self.vc.eq(cu.vc),
            self.preemptions.eq(cu.preemptions),
            self.selects.eq(cu.selects),
        ]
        bad, overflow, bufs = [], [], []
        for n in range(P):
            buf = m.submodules[f"in{n}"] = VCInputBuffer(flit=self.flit, packet=self.packet,
                                                          phases=self.phases, depth=self.depth,
                                                          ctrl_depth=self.ctrl_depth,
                                                          dest_limit=P if self.online else 0)
            bufs.append(buf)
            m.d.comb += [
                buf.i.valid.eq(self.i[n].valid),
                buf.i.payload.eq(self.i[n].payload),
                # the shared phase's packets are well formed: their flows' slots are loaded
                buf.loaded.eq(memory.loaded | (1 << self.shared_phase if shared else 0)),
                buf.sel.eq(cu.vc),
                cu.head_valid[n].eq(buf.head_valid),
                cu.head_first[n].eq(buf.head_first),
                self.dropped[n].eq(buf.dropped),
            ]
            for v in range(nvc):
                m.d.comb += [cu.head[n][v].eq(buf.head[v]), self.i_credit[n][v].eq(buf.credit[v])]
            enable = cu.enable[n]
            m.d.comb += [
                core.i[n].valid.eq(buf.o.valid & enable),
                core.i[n].payload.eq(buf.o.payload),
                buf.o.ready.eq(core.i[n].ready & enable),
                cu.started[n].eq(buf.o.valid & enable & core.i[n].ready
                                 & (buf.head_first >> cu.vc)[0]),
                cu.ended[n].eq(buf.o.valid & enable & core.i[n].ready & buf.o.payload.last),
            ]
            bad.append(buf.bad_header)
            overflow.append(buf.overflow)

        flows = self._shared_flows(m, table, cu, bufs, out_last, core) if shared else None
        m.d.comb += core.modes.eq(Mux(cu.shared_mode, flows.modes, core_modes) if shared
                                  else core_modes)

        # ---- control VC ---------------------------------------------------------------------
        router = None
        if self.ctrl_depth:
            router = m.submodules.control_vc = ControlRouter(ports=P, flit=self.flit, packet=self.packet)
            m.d.comb += [router.clear.eq(self.flow_clear), self.ctrl_unknown.eq(router.unknown)]
            flow = self.packet.header["flow"]
            for n, buf in enumerate(bufs):
                head_flow = Signal(flow.width, name=f"head_flow{n}")
                for v in range(nvc):
                    with m.If(cu.vc == v):
                        m.d.comb += head_flow.eq(buf.head[v].flow)
                m.d.comb += [router.learn[n].eq(cu.started[n]), router.learn_flow[n].eq(head_flow),
                             self.i_ctrl_credit[n].eq(buf.ctrl_credit)]
                wiring.connect(m, buf.ctrl, router.i[n])

        # ---- outputs: one credit counter per VC of the downstream buffer -------------------
        credit_error = []
        for n in range(P):
            flit = core.o[n].payload
            out_vc = flit.tag[self.packet.phase_bits:self.packet.phase_bits + 2]
            has_credit = Signal(name=f"has_credit{n}")
            send = Signal(name=f"send{n}")
            err = Signal(name=f"credit_error{n}")
            counters = [Signal(range(self.depth + 3), init=self.depth, name=f"credits{n}_{v}")
                        for v in range(nvc)]
            for v in range(nvc):
                with m.If(out_vc == v):
                    m.d.comb += has_credit.eq(counters[v] != 0)
                spent = send & (out_vc == v)
                after = counters[v] - spent + self.o_credit[n][v]
                m.d.sync += counters[v].eq(after)
                with m.If(after > self.depth):
                    m.d.sync += err.eq(1)
            ctrl_go = Signal(name=f"ctrl_go{n}")
            if router is not None:
                # a control flit goes between data packets, ahead of the next one
                mid = Signal(name=f"out_mid{n}")
                ctrl_credits = Signal(range(self.ctrl_depth + 3), init=self.ctrl_depth,
                                      name=f"ctrl_credits{n}")
                m.d.comb += [ctrl_go.eq(router.o[n].valid & ~mid & (ctrl_credits != 0)),
                             router.o[n].ready.eq(ctrl_go)]
                after_ctrl = ctrl_credits - ctrl_go + self.o_ctrl_credit[n]
                m.d.sync += ctrl_credits.eq(after_ctrl)
                with m.If(after_ctrl > self.ctrl_depth):
                    m.d.sync += err.eq(1)
                with m.If(send):
                    m.d.sync += mid.eq(~flit.last)
            m.d.comb += [
                send.eq(core.o[n].valid & has_credit & ~ctrl_go),
                core.o[n].ready.eq(has_credit & ~ctrl_go),
                self.o[n].valid.eq(send | ctrl_go),
                self.o[n].payload.eq(flit),
            ]
            if router is not None:
                with m.If(ctrl_go):
                    m.d.comb += self.o[n].payload.eq(router.o[n].payload)
            credit_error.append(err)
            reserve = Mux(cu.shared_mode, flows.reserve[n], cu.reserve[n]) if shared else cu.reserve[n]
            self._room(m, n, counters, cu, send, flit.last, reserve)
            if self.entries:
                self._draining(m, n, cu)
        m.d.comb += [self.bad_header.eq(or_fold(bad)), self.overflow.eq(or_fold(overflow)),
                     self.credit_error.eq(or_fold(credit_error))]
        return m

    def _shared_flows(self, m, table, cu, bufs, out_last, core):
        """The shared stored flows (:class:`~hdl.designs.switch.shared_flows.SharedFlows`):
        their table written through the ``shared_*`` ports, every slot's modes snooped from the
        configuration port, the heads of the served VC, the flow-port table read per input and
        per slot, the room and the control unit's grants."""
        P, nvc = self.ports, len(DATA_VCS)
        # hand-over behind needs outputs that never stall a granted packet: room is reserved
        # per packet, but a control VC's flit goes between two packets (ctrl_go)
        behind = self.flit.dtype if not self.ctrl_depth else None
        flows = m.submodules.shared_flows = SharedFlows(
            ports=P, middle=self.middle, phases=self.phases, packet=self.packet, flows=self.flows,
            word_width=self.word_width, dtype=behind, lockstep=self.shared_lockstep)
        m.d.comb += [
            flows.cfg_we.eq(self.config.valid & self.config.ready),
            flows.cfg_slot.eq(self.config.payload.phase), flows.cfg_data.eq(self.config.payload.data),
            flows.cfg_last.eq(self.config.payload.last), flows.loaded.eq(self.loaded),
            flows.map_we.eq(self.shared_we), flows.map_flow.eq(self.shared_flow),
            flows.map_slot.eq(self.shared_slot), flows.map_valid.eq(self.shared_valid),
            self.shared_unknown.eq(flows.unknown),
            flows.room.eq(cu.room), flows.run.eq(cu.shared_run), flows.started.eq(cu.started),
            flows.ended.eq(cu.ended),
            cu.shared_enable.eq(flows.enable), cu.shared_pending.eq(flows.pending),
        ]
        for n, buf in enumerate(bufs):
            for v in range(nvc):
                with m.If(cu.vc == v):
                    head = buf.head[v]
                    m.d.comb += [flows.head_ok[n].eq(buf.head_valid[v] & buf.head_first[v]
                                                     & (head.phase == self.shared_phase)),
                                 flows.head_flow[n].eq(head.flow), flows.head_seq[n].eq(head.seq)]
            m.d.comb += [table.in_slot[n].eq(flows.in_slot[n]),
                         flows.in_partners[n].eq(table.in_partners[n]),
                         flows.in_outputs[n].eq(table.in_outputs[n]),
                         flows.out_last[n].eq(out_last[n])]
            if self.shared_lockstep:
                m.d.comb += flows.passed[n].eq(core.i[n].valid & core.i[n].ready)
        for k in range(self.phases):
            m.d.comb += flows.slot_outputs[k].eq(table.slot_outputs[k])
        return flows

    def _draining(self, m, n, cu):
        """``cu.draining[n]``: a credit came back on output n's served VC within the last
        2 x ``packet_flits`` cycles (a count of quiet cycles, saturating there). It lets an
        entry contest a backlogged bubble output with room for one packet while the
        downstream drains (docs/switch.md, "Entries leave a bubble"): the stop on the owner
        then lapses by itself once the downstream stops freeing room."""
        m.d.comb += cu.draining[n].eq(credits_returning(m, cu.vc, self.o_credit[n],
                                                         self.packet.packet_flits, suffix=f"{n}"))

    def _room(self, m, n, counters, cu, send, last, reserve):
        """``cu.room[n]``: output n can take a whole packet on the served VC: its credits minus
        the flits it still owes to packets started towards it (``cu.reserve``: one packet of
        ``packet_flits`` each, ``reserve``: the control unit's, or the shared flows' in the
        shared phase; a short last packet returns the rest at its last flit). Owed
        flits saturate at 0, so packets started without a table entry (never reserved) leave
        the count alone."""
        pf = self.packet.packet_flits
        owed = Signal(range(self.depth + 2 * pf + 1), name=f"owed{n}")
        in_packet = Signal(range(pf + 1), name=f"sent_in_packet{n}")
        paid = Signal(range(pf + 1), name=f"paid{n}")
        with m.If(send):
            m.d.comb += paid.eq(Mux(last, pf - in_packet, 1))
            m.d.sync += in_packet.eq(Mux(last, 0, in_packet + 1))
        grown = owed + Mux(reserve, pf, 0)
        m.d.sync += owed.eq(Mux(grown > paid, grown - paid, 0))
        credits = Signal(range(self.depth + 3), name=f"vc_credits{n}")
        for v, counter in enumerate(counters):
            with m.If(cu.vc == v):
                m.d.comb += credits.eq(counter)
        m.d.comb += [cu.room[n].eq(credits >= owed + pf), cu.room2[n].eq(credits >= owed + 2 * pf)]
