"""``PacketFabricTop``: the wafer fabric built of packet switches (docs/fabric_rtl.md, "Packet
fabric"; the Verilog top ``fred_packet_fabric``)."""

from __future__ import annotations

import math
from fractions import Fraction

from amaranth import Module, Shape, Signal
from amaranth.lib import wiring

from hdl.contracts.fabric import FabricSpec, default_depth
from hdl.contracts.errors import FredError
from hdl.contracts.fabric_partition import FabricPartition, uplinks
from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import NPU_BUFFER
from hdl.contracts.packet import DATA_VCS, VC, PacketFormat, phase_field_bits
from hdl.compiler.fabric_program import default_phases
from hdl.compiler.packet_fabric_program import online_table
from hdl.designs.layouts import chunked_flit_layout, flit_layout
from hdl.designs.switch.packet_switch import PacketSwitch

from .cut import cut_ports, cut_slices, link_cut_fields
from .depacketizer import Depacketizer
from .io_controller import IoController
from .fabric_top import (ENGINE_READ, GLOBAL_READ, GLOBAL_UNIT, TAG_WIDTH, count_cycles, harness_inputs,
                         harness_ports, read_register)
from .npu_engine import NpuEngine
from .packet_link import PacketLink
from .packetizer import Packetizer, connect_engine_to_packetizer
from .write_pacer import PACE_BITS, WritePacer

__all__ = ["PacketFabricTop", "claim_interval", "PACKET_ENGINE_READ", "PACKET_SWITCH_READ", "PACKET_REGS",
           "FLOW_PORT_REGS", "ORDER_REGS", "SHARED_REG", "PACE_REG", "packet_format", "default_depth"]

#: Read-bus registers of an NPU unit on the packet fabric: the engine's, then its
#: depacketizer's sequence errors, both ends' sticky flags (credit error | overflow), and
#: ``done_cycle``: the value of ``cycles`` when the engine's ``done`` first rose (0 while not
#: done), so concurrent traffic classes each have a completion time (docs/fabric_rtl.md,
#: "Concurrent traffic classes").
PACKET_ENGINE_READ = ENGINE_READ + ("seq_errors", "link_errors", "done_cycle")
#: Read-bus registers of a packet switch unit.
PACKET_SWITCH_READ = ("selects", "preemptions", "state", "loaded", "error", "active_phase",
                      "busy", "flags")
#: ``flags`` bits: the switch's bad_header, overflow, credit_error, and an overflow of an
#: uplink's queue into it.
#: Program registers of an NPU's packet header and expected stream (unit = rank), after the
#: engine's: the phase index its packets carry, their VC, their flow id, the sequence number
#: of the last packet it receives, and the cycles after ``start`` before it sends its first
#: packet (a traffic class that starts later, to measure preemption).
PACKET_REGS = {"phase": 56, "vc": 57, "flow": 58, "last_seq": 59, "delay": 60}
#: Program register of an I/O controller's stripe (the header's ``stripe``), in a fabric built
#: for the striped I/O request (``stripes`` > 0; docs/fabric_rtl.md, "Striped I/O").
STRIPE_REG = 61
#: Program register of an NPU's write pacing (a fabric with I/O controllers): the number of
#: writers sharing the I/O controller its online unicasts go to, 0 for none
#: (:class:`~hdl.designs.fabric.write_pacer.WritePacer`; docs/fabric_rtl.md, "Host rules").
PACE_REG = 62
#: Program registers of a packet switch unit (unit = NPUs + switch index): an entry of its
#: flow-port table (:class:`~hdl.designs.switch.flow_port_table.FlowPortTable`): the partner
#: and output masks, then ``slot << 8 | input``, whose write stores the entry.
FLOW_PORT_REGS = {"partners": 0, "outputs": 1, "entry": 2}
#: Program registers of a packet switch unit's phase order
#: (:class:`~hdl.designs.switch.phase_order.PhaseOrder`): an entry's last sequence number,
#: then ``index << 8 | slot``, whose write stores the entry; ``vc << 8 | length`` sets the
#: order and restarts it (length 0: none).
ORDER_REGS = {"last": 3, "entry": 4, "set": 5}
#: Program register of a packet switch unit's shared table (a fabric built with
#: ``shared_flows``; docs/switch.md, "Shared stored flows"): ``valid << 16 | slot << 8 | flow``
#: writes the entry of flow id ``flow`` (``valid`` 0 clears it).
SHARED_REG = 6


def packet_format(phases: int, packet_flits: int = 8, *, dest_ports: int = 0, stripes: int = 0) -> PacketFormat:
    """The packet fabric's header: the phase field names ``phases`` slots
    (:func:`~hdl.contracts.packet.phase_field_bits`: 3 bits for the default 8, 4 for Fred-D's
    striped I/O's 9), 16-bit sequence numbers, 6-bit flow ids (a collective's index, or the
    destination endpoint of an online unicast). ``dest_ports`` > 0 (online routing): a
    ``dest`` field for that many switch ports, and a phase field with room for the default
    index above the ``phases`` slots. ``stripes`` > 0: a ``stripe`` field for that many I/O
    stripes (online routing only)."""
    online = bool(dest_ports)
    bits = phase_field_bits(phases, online=online, where="a packet fabric's switch")
    if not online:
        return PacketFormat(phase_bits=bits, seq_bits=16, flow_bits=6, packet_flits=packet_flits)
    return PacketFormat(phase_bits=bits, seq_bits=16, flow_bits=6,
                        packet_flits=packet_flits, dest_bits=max(1, (dest_ports - 1).bit_length()),
                        stripe_bits=max(1, (stripes - 1).bit_length()) if stripes else 0)


def claim_interval(spec: FabricSpec, packet_flits: int) -> int:
    """One stripe's fair interval, in cycles, at the output a striped request's entries wait
    for (0: no claim): the L1's output to the NPU that forwards the chains' ring onto the L1's
    uplinks (Fred-A: NPU 3 of each L1, draining at 1/2 flit per cycle), and likewise that NPU's
    own L1 input for the stripe it starts in a reduce-out. Every controller's stripe but the
    one ending there crosses it, so each of those ``io_controllers - 1`` stripes' fair share is
    one packet per ``packet_flits x (io_controllers - 1) / uplink bandwidth`` cycles (rounded
    up: the 18-controller wafer 8 x 17 x 2 = 272; 12 controllers on 3 L1s 176). An entry (a
    controller's port, ``PacketSwitch(claim_after=)``; a started stripe,
    ``StripeNpu(claim_after=)``) whose packet has waited that long claims the output
    (docs/switch.md, "Entries leave a bubble"). 0 with fewer than two controllers, or where the
    L1's uplinks take a flit per cycle or more (Fred-C/D: 4): that output then drains as fast
    as the through-stream can come and holds no entry back, and the switch is as before."""
    uplink = spec.uplink_ports * Fraction(spec.uplink_rate)
    if spec.io_controllers < 2 or uplink >= 1:
        return 0
    return math.ceil(packet_flits * (spec.io_controllers - 1) / uplink)


class PacketFabricTop(wiring.Component):
    """The fabric of ``spec`` with :class:`PacketSwitch` es in header mode instead of
    ``FredSwitchTop`` s and phase sequencers: the same switches (L1s Fred_m(npus_per_l1 +
    uplink_ports), the L2 planes), NPU engines (:class:`NpuEngine`) behind a
    :class:`Packetizer` and a :class:`Depacketizer`, and a credit-based :class:`PacketLink`
    for every direction of every cable; the I/O controllers of ``spec`` (``io_controllers``,
    endpoints ``npus ..``, :class:`IoController`) on their L1 ports
    (``FabricSpec.port_of``). A switch selects its phases from the packet headers
    (MP > PP > DP preemption), so the fabric needs no sequencer: the program loads every
    switch's slots and each NPU's header (``PACKET_REGS``).

    Parameters: ``spec``; ``phases``: slots per switch (default the circuit fabric's);
    ``packet_flits`` (default 8, the paper's); ``depth``: flits per data VC of every input
    buffer (default :func:`default_depth`: 24 on Fred-A..D, 16 on the small test fabrics).

    Ports: as :class:`FabricTop` (``clk``, ``start``, ``prog_*``, ``cfg_*``, ``rd_*``,
    ``all_done``, ``cycles``; the top resets itself for :data:`POR_CYCLES` cycles), with the
    read registers :data:`PACKET_ENGINE_READ` and :data:`PACKET_SWITCH_READ`. Units of the
    program and read ports: endpoint ``e`` (NPU, then I/O controller) is unit ``e``, switch
    ``s`` unit ``spec.endpoints + s``.

    ``online`` (default False): the switches also route unicasts online (the default phase
    index; endpoint algorithms, Fred-A/C): the header gains ``dest``, and every switch input
    rewrites it from the header's ``flow`` (the destination endpoint) to the output towards
    that endpoint (:func:`~hdl.compiler.packet_fabric_program.online_table`: a table of
    constants per switch, a combinational lookup on the link's output, no cycle).

    Switches of in-switch programs (not ``online``) follow a programmed phase order
    (``ORDER_REGS``; docs/switch.md, "Phase order"): several stored phases of one VC at a
    switch (Fred-B's DP groups) are served in the same order at every switch.
    ``order_entries`` (default None: one per slot): every such order's depth
    (``PacketSwitch(order_entries=)``), e.g. 32 for an iteration whose ordered runs, loaded
    once, need an entry per run and group (docs/fabric_iteration.md, "Deeper phase orders").

    ``shared_flows`` (default 0: off): every switch serves the shared stored flows
    (``PacketSwitch(shared_phase=phases - 1, flows=shared_flows)``, docs/switch.md, "Shared
    stored flows"): packets whose header names the last slot are served per flow id, each
    naming through the switch's shared table (``SHARED_REG``) the slot holding its tree; Fred-B's
    striped I/O, one flow id per stripe (docs/fabric_rtl.md, "Fred-B/D, the shared stored flows").
    The last slot is then never loaded. Off, every switch is built as before.
    ``shared_lockstep`` (default False; only with ``shared_flows``): every switch hands a
    reducing tree's lanes over behind its last packet when its operands entered in lock step
    (``PacketSwitch(shared_lockstep=True)``; the striped reduce-out's tops set it).

    ``yield_after`` (default None: the switches' default, a select's cost): every switch's
    work-conserving yield guard, :class:`~hdl.designs.switch.packet_switch.PacketSwitch`; 0
    keeps the active phase while any of its packets waits (tests compare the two rules).

    ``npu`` (default None): the component at each NPU port instead of the engine with its
    packetizer, depacketizer and header registers, ``npu(flit=, packet=, depth=)`` (e.g. an
    NPU that runs an iteration trace, ``hdl.designs.iteration.PacketTraceNpu``), with members
    ``o`` / ``credit_in`` / ``i`` / ``credit_out`` (as :class:`IoController`'s), ``start``,
    ``we`` / ``waddr`` / ``wdata`` (every program write to its unit), ``done`` (the fabric's
    ``all_done`` ANDs it) and ``read_names`` (its read registers, read by name).
    ``controller`` (default None): the same for each I/O controller port, instead of
    :class:`IoController` and its header registers (e.g. a controller run by the trace,
    ``hdl.designs.iteration.TracedIoController``); :meth:`coordinate` connects the
    components to each other.

    Uplinks below full rate (Fred-A/B) queue at the link's entry, a queue per VC served MP > PP >
    DP at packet boundaries (:class:`PacketLink`).

    One part of a cut fabric (``partition``, a
    :class:`~hdl.contracts.fabric_partition.FabricPartition` of ``spec`` -- the circuit
    fabric's, the same switches and uplinks --, and ``part``; the lock-step simulator,
    ``eda/fabric/lockstep.py``): only the part's switches and the endpoints at its L1s. A cut
    uplink's :class:`PacketLink` (its queue and registers) is in the sender's part: its output
    (``<link>_valid``, ``<link>_data`` and its sticky ``<link>_overflow``) leaves on ``cut_out``,
    and the receiving switch's credits (``<link>_credit``, 2 bits per VC) come back on
    ``cut_in``; the receiver's part applies the online ``dest`` rewrite. Every cut signal is a
    function of its own part's registers only (the link's output: the sending switch's output
    and the link's queue and registers; the credits: the input buffer's read, from its own
    state, and its registered drop credit, docs/switch.md "Links and credits"), so two parts
    evaluate a cycle at the same time and swap them between cycles with the one model's result.
    The harness ports are the same; a unit of another part ignores writes and reads 0,
    ``cfg_ready`` is 0 for another part's switch, and ``all_done`` / ``cycles`` cover the part's
    own endpoints (done at once without any).
    """

    def __init__(self, spec: FabricSpec, *, phases: int | None = None, packet_flits: int = 8,
                 depth: int | None = None, online: bool = False,
                 partition: FabricPartition | None = None, part: int | None = None, npu=None,
                 stripes: int = 0, yield_after: int | None = None, controller=None,
                 shared_flows: int = 0, shared_lockstep: bool = False,
                 order_entries: int | None = None):
        problem = _partition_problem(spec, partition, part)
        if problem:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(problem)
        self.partition, self.part = partition, part
        self.npu, self.controller = npu, controller
        self.yield_after = yield_after
        self.spec = spec
        if isinstance(shared_flows, bool) or not isinstance(shared_flows, int) or shared_flows < 0:
            self._MustUse__silence = True
            raise FredError(f"PacketFabricTop: shared_flows must be a whole number of flow ids, got {shared_flows!r}")
        if shared_flows and online:
            self._MustUse__silence = True
            raise FredError("PacketFabricTop: the shared stored flows (shared_flows) are for the in-switch "
                            "fabrics' trees; a fabric with online routing has none")
        if shared_lockstep and not shared_flows:
            self._MustUse__silence = True
            raise FredError("PacketFabricTop: shared_lockstep is a mode of the shared stored flows "
                            "(shared_flows)")
        self.shared_flows = shared_flows
        self.shared_lockstep = bool(shared_lockstep)
        self.online = bool(online)
        if order_entries is not None and self.online:
            self._MustUse__silence = True
            raise FredError("PacketFabricTop: order_entries sizes the in-switch fabrics' phase orders; "
                            "a fabric with online routing has none")
        self.order_entries = order_entries
        self.phases = default_phases() if phases is None else phases
        self.packet = packet_format(self.phases, packet_flits,
                                    dest_ports=max(spec.switch_ports) if online else 0,
                                    stripes=stripes if online else 0)
        self.depth = default_depth(spec, packet_flits) if depth is None else depth
        self.flit = FlitFormat(dtype=spec.dtype, lanes=spec.lanes, tag_width=TAG_WIDTH)
        self.switch_ports = spec.switch_ports
        self.link_shape = flit_layout(FlitFormat(dtype=spec.dtype, lanes=spec.lanes,
                                                 tag_width=self.packet.header_width))
        cut = cut_ports(self.cut_fields()) if partition is not None else {}
        super().__init__({**cut, **harness_ports(switches=len(self.switch_ports), phases=self.phases)})

    def _owns(self, switch: int) -> bool:
        return self.partition is None or self.partition.parts[switch] == self.part

    def _endpoint_links(self, m, rank: int, l1, j: int, port: int, ends) -> None:
        """Endpoint ``rank``'s two links to port ``port`` of its L1 switch ``l1`` (switch ``j``):
        ``ends`` = (its output, that output's credit input, its input, that input's credit
        output); the uplink's headers get their ``dest`` from ``l1``'s table (:meth:`_route`)."""
        latency = self.spec.npu_link_latency
        up = m.submodules[f"link_npu{rank}_up"] = PacketLink(self.link_shape, latency=latency)
        down = m.submodules[f"link_npu{rank}_down"] = PacketLink(self.link_shape, latency=latency)
        _join(m, ends[0], ends[1], up, l1.i[port], l1.i_credit[port], self._route(j))
        _join(m, l1.o[port], l1.o_credit[port], down, ends[2], ends[3])

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """This part's cut signals, LSB first: ``(bus, name, width)``, bus ``cut_out`` or
        ``cut_in``; for every cut uplink (``FabricPartition.cut_links`` order) the sender's part
        drives ``<link>_valid``, ``<link>_data``, ``<link>_overflow`` and reads
        ``<link>_credit`` (3 VCs x 2 bits), the receiver's part the reverse: part 0's
        ``cut_out`` is, field for field, part 1's ``cut_in``."""
        width = Shape.cast(self.link_shape).width
        cuts = [(c.ends.name, c.source_part, c.sink_part) for c in self.partition.cut_links()]
        return link_cut_fields(cuts, self.part, [("valid", 1), ("data", width), ("overflow", 1)],
                               [("credit", 2 * len(DATA_VCS))])

    def elaborate(self, platform) -> Module:
        m = Module()
        start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        spec, fmt = self.spec, self.packet
        link_shape = self.link_shape
        switches = []
        for s, ports in enumerate(self.switch_ports):
            if not self._owns(s):     # another part's switch
                switches.append(None)
                continue
            name = (f"l1_{s}" if s < spec.l1_count else
                    "l2" if spec.l2_planes == 1 else f"l2_{s - spec.l1_count}")
            sw = m.submodules[f"switch_{name}"] = PacketSwitch(
                ports=ports, middle=spec.middle, dtype=spec.dtype, lanes=spec.lanes,
                phases=self.phases, packet=fmt, depth=self.depth, word_width=32,
                online=self.online, ordered=not self.online, yield_after=self.yield_after,
                order_entries=self.order_entries,
                entries=self._entries(s), bubble_outputs=self._bubble_outputs(s),
                claim_after=self._claim_after(s), **self._shared(s))
            switches.append(sw)
            m.d.comb += [
                sw.header_select.eq(1), sw.host_vc.eq(VC.DP),
                sw.config.valid.eq(self.cfg_valid & (self.cfg_switch == s)),
                sw.config.payload.data.eq(self.cfg_data),
                sw.config.payload.last.eq(self.cfg_last),
                sw.config.payload.phase.eq(self.cfg_phase),
            ]
            self._flow_ports(m, sw, spec.endpoints + s, prog_we, prog_unit, prog_reg, prog_data)
        with m.Switch(self.cfg_switch):
            for s, sw in enumerate(switches):
                if sw is None:
                    continue
                with m.Case(s):
                    m.d.comb += self.cfg_ready.eq(sw.config.ready)
        npus = {}   # rank -> (engine, tx, rx): this part's endpoints
        for rank in range(spec.endpoints):
            j, port = spec.port_of(rank)
            if switches[j] is None:     # at another part's L1
                continue
            component = self.npu if rank < spec.npus else self.controller
            if component is not None:     # e.g. an iteration's trace NPU, a traced controller
                name = f"npu_{rank}" if rank < spec.npus else f"io_{rank - spec.npus}"
                engine = m.submodules[name] = component(flit=self.flit, packet=fmt, depth=self.depth)
                m.d.comb += [engine.start.eq(start), engine.we.eq(prog_we & (prog_unit == rank)),
                             engine.waddr.eq(prog_reg), engine.wdata.eq(prog_data)]
                self._endpoint_links(m, rank, switches[j], j, port,
                                     (engine.o, engine.credit_in, engine.i, engine.credit_out))
                npus[rank] = (engine, None, None)
                continue
            if rank < spec.npus:
                engine = m.submodules[f"npu_{rank}"] = NpuEngine(self.flit, buffer=NPU_BUFFER)
                tx = m.submodules[f"packetizer_{rank}"] = Packetizer(flit=self.flit, packet=fmt,
                                                                      depth=self.depth)
                rx = m.submodules[f"depacketizer_{rank}"] = Depacketizer(flit=self.flit, packet=fmt,
                                                                          depth=self.depth)
                if spec.io_controllers:
                    # a write into a controller leaves at the controller's rate over its
                    # writers (PACE_REG), whole packets: the host rule of docs/fabric_rtl.md
                    pacer = m.submodules[f"pacer_{rank}"] = WritePacer(
                        chunked_flit_layout(self.flit), packet_flits=fmt.packet_flits,
                        rate=(spec.io_rate.numerator, spec.io_rate.denominator))
                    pace = Signal(PACE_BITS, name=f"npu{rank}_pace")
                    with m.If(prog_we & (prog_unit == rank) & (prog_reg == PACE_REG)):
                        m.d.sync += pace.eq(prog_data)
                    m.d.comb += [pacer.divisor.eq(pace), pacer.restart.eq(start)]
                    connect_engine_to_packetizer(m, engine, tx, pacer)
                else:
                    connect_engine_to_packetizer(m, engine, tx)
                wiring.connect(m, rx.o, engine.rx)
                ends = (tx.o, tx.credit, rx.i, rx.credit)
            else:
                io = m.submodules[f"io_{rank - spec.npus}"] = IoController(
                    flit=self.flit, packet=fmt, depth=self.depth, rate=spec.io_rate)
                engine, tx, rx = io.engine, io.tx, io.rx
                ends = (io.o, io.credit_in, io.i, io.credit_out)
            regs = {name: Signal(32, name=f"npu{rank}_{name}") for name in PACKET_REGS}
            for name, address in PACKET_REGS.items():
                with m.If(prog_we & (prog_unit == rank) & (prog_reg == address)):
                    m.d.sync += regs[name].eq(prog_data)
            waited = Signal(32, name=f"npu{rank}_waited")
            with m.If(start):
                m.d.sync += waited.eq(0)
            with m.Elif(waited < regs["delay"]):
                m.d.sync += waited.eq(waited + 1)
            m.d.comb += [engine.start.eq(start), tx.start.eq(start), rx.start.eq(start),
                         tx.hold.eq(waited < regs["delay"]),
                         engine.we.eq(prog_we & (prog_unit == rank) & (prog_reg < 56)),
                         engine.waddr.eq(prog_reg), engine.wdata.eq(prog_data),
                         tx.phase.eq(regs["phase"]), tx.vc.eq(regs["vc"]),
                         tx.flow.eq(regs["flow"]), rx.last_seq.eq(regs["last_seq"])]
            if fmt.stripe_bits:         # the striped I/O request: the controller's stripe
                stripe = Signal(fmt.stripe_bits, name=f"npu{rank}_stripe")
                with m.If(prog_we & (prog_unit == rank) & (prog_reg == STRIPE_REG)):
                    m.d.sync += stripe.eq(prog_data)
                m.d.comb += tx.stripe.eq(stripe)
            self._endpoint_links(m, rank, switches[j], j, port, ends)
            npus[rank] = (engine, tx, rx)
        self.coordinate(m, {rank: engine for rank, (engine, tx, _) in npus.items() if tx is None})
        rate = (spec.uplink_rate.numerator, spec.uplink_rate.denominator)
        link_overflow = [Signal(name=f"link_overflow_{s}") for s in range(len(switches))]
        cut = cut_slices(self, self.cut_fields()) if self.partition is not None else {}
        for ends in uplinks(spec):
            source, sink = switches[ends.source], switches[ends.sink]
            name = ends.name
            if source is not None:
                link = m.submodules[name] = PacketLink(link_shape, latency=spec.uplink_latency,
                                                       rate=rate, depth=self.depth, packet=fmt)
                _send(m, source.o[ends.source_port], source.o_credit[ends.source_port], link)
                if sink is None:        # the receiver is in the other part
                    credit = cut[f"{name}_credit"]
                    m.d.comb += [cut[f"{name}_valid"].eq(link.o.valid),
                                 cut[f"{name}_data"].eq(link.o.payload.as_value()),
                                 cut[f"{name}_overflow"].eq(link.overflow),
                                 *(link.credit_in[v].eq(credit[2 * v:2 * v + 2])
                                   for v in range(len(DATA_VCS)))]
                    continue
                valid, payload, credit_back, overflow = (link.o.valid, link.o.payload,
                                                         list(link.credit_in), link.overflow)
            elif sink is not None:      # the sender is in the other part
                payload = Signal(link_shape, name=f"{name}_payload")
                credit = cut[f"{name}_credit"]
                m.d.comb += payload.as_value().eq(cut[f"{name}_data"])
                valid, overflow = cut[f"{name}_valid"], cut[f"{name}_overflow"]
                credit_back = [credit[2 * v:2 * v + 2] for v in range(len(DATA_VCS))]
            else:
                continue
            _receive(m, valid, payload, credit_back, sink.i[ends.sink_port],
                     sink.i_credit[ends.sink_port], self._route(ends.sink))
            link_overflow[ends.sink] = link_overflow[ends.sink] | overflow
        # -- cycle counter (as FabricTop) ----------------------------------------------------
        all_done, running = Signal(), Signal()
        # a part without endpoints is done as soon as it runs (the lock-step simulator ANDs the parts')
        everyone_done = (sum(e.done for e, _, _ in npus.values()) == len(npus)) if npus else 1
        m.d.comb += [all_done.eq(running & everyone_done), self.all_done.eq(all_done)]
        count_cycles(m, start, running, all_done, self.cycles)
        done_cycles = {rank: self._done_cycle(m, rank, engine, start, running)
                       for rank, (engine, _, _) in npus.items()}
        self._read_port(m, rd_unit, rd_reg, npus, switches, link_overflow, all_done, running,
                        done_cycles)
        return m

    @property
    def shared_phase(self) -> int | None:
        """The header phase of the shared stored flows (the last slot), None without them."""
        return self.phases - 1 if self.shared_flows else None

    def _shared(self, switch: int) -> dict:
        """The switch's shared-flow parameters (none without ``shared_flows``: the switch as
        before)."""
        if not self.shared_flows:
            return {}
        lockstep = {"shared_lockstep": True} if self.shared_lockstep else {}
        return {"shared_phase": self.shared_phase, "flows": self.shared_flows, **lockstep}

    def _entries(self, switch: int) -> frozenset:
        """The switch's entry inputs (online only): an L1's I/O controller ports. A controller
        only sends, so its packets enter the NPUs' chains and rings there; they start only with
        room for two packets on their output (docs/switch.md, "Entries leave a bubble"), which
        keeps the striped I/O's ring of NPU chains from filling up (docs/fabric_validation.md,
        "The contested output's ring deadlock")."""
        spec = self.spec
        if not self.online or switch >= spec.l1_count:
            return frozenset()
        first = spec.npus_per_l1 + spec.uplink_ports
        return frozenset(range(first, first + spec.io_ports_per_l1))

    def _bubble_outputs(self, switch: int) -> frozenset:
        """Where the entries of :meth:`_entries` leave their bubble: the L1's NPU ports, where
        a controller's packets join the NPUs' chains (the striped request's controllers send
        only to a member on their own L1). Not the uplinks: a bubble there made a controller's
        stream wait behind a DP stream that kept the half-rate uplink nearly full
        (``dp-under-io``: I/O 105,943 cycles against the model's 94,968.3; docs/switch.md,
        "Entries leave a bubble", says what this leaves out)."""
        return frozenset(range(self.spec.npus_per_l1)) if switch < self.spec.l1_count else frozenset()

    def _claim_after(self, switch: int) -> int:
        """How long an entry of :meth:`_entries` waits for a backlogged bubble output before it
        claims it (``PacketSwitch(claim_after=)``; docs/switch.md, "Entries leave a bubble"):
        :func:`claim_interval`, 0 (no claim) on an L2 or without entries."""
        return claim_interval(self.spec, self.packet.packet_flits) if self._entries(switch) else 0

    def coordinate(self, m: Module, components: dict) -> None:
        """Logic between the endpoints' components (``{endpoint: component}`` of ``npu`` and
        ``controller``), e.g. the wafer-wide start and end of an iteration's I/O collectives
        (``hdl.designs.iteration.PacketIoIterationTop``); none here."""
        return None

    def _route(self, switch: int):
        """The online ``dest`` rewrite of an input of ``switch`` (None without ``online``):
        ``(flow offset, flow bits, dest offset, dest bits, {endpoint: output})``."""
        if not self.online:
            return None
        fields = {f.name: f for f in self.packet.header}
        table = online_table(self.spec, switch)
        return fields["flow"], fields["dest"], table

    @staticmethod
    def _flow_ports(m, sw, unit, prog_we, prog_unit, prog_reg, prog_data):
        """The program port's writes of switch unit ``unit``'s flow-port table
        (:data:`FLOW_PORT_REGS`), on a switch with shared flows its shared table
        (:data:`SHARED_REG`) and, on an ordered switch, its phase order (:data:`ORDER_REGS`)."""
        partners = Signal(sw.ports, name=f"unit{unit}_partners")
        outputs = Signal(sw.ports, name=f"unit{unit}_outputs")
        mine = prog_we & (prog_unit == unit)
        with m.If(mine & (prog_reg == FLOW_PORT_REGS["partners"])):
            m.d.sync += partners.eq(prog_data)
        with m.If(mine & (prog_reg == FLOW_PORT_REGS["outputs"])):
            m.d.sync += outputs.eq(prog_data)
        m.d.comb += [sw.flow_we.eq(mine & (prog_reg == FLOW_PORT_REGS["entry"])),
                     sw.flow_slot.eq(prog_data[8:]), sw.flow_input.eq(prog_data[:8]),
                     sw.flow_partners.eq(partners), sw.flow_outputs.eq(outputs)]
        if sw.shared_phase is not None:
            entry = prog_data
            m.d.comb += [sw.shared_we.eq(mine & (prog_reg == SHARED_REG)),
                         sw.shared_flow.eq(entry[:8]), sw.shared_slot.eq(entry[8:16]),
                         sw.shared_valid.eq(entry[16])]
        if not sw.ordered:
            return
        last = Signal(sw.packet.seq_bits, name=f"unit{unit}_order_last")
        with m.If(mine & (prog_reg == ORDER_REGS["last"])):
            m.d.sync += last.eq(prog_data)
        m.d.comb += [sw.order_we.eq(mine & (prog_reg == ORDER_REGS["entry"])),
                     sw.order_index.eq(prog_data[8:16]), sw.order_slot.eq(prog_data[:8]),
                     sw.order_last.eq(last),
                     sw.order_set.eq(mine & (prog_reg == ORDER_REGS["set"])),
                     sw.order_length.eq(prog_data[:8]), sw.order_vc.eq(prog_data[8:10])]

    def _done_cycle(self, m, rank, engine, start, running):
        """``cycles`` when endpoint ``rank``'s engine was first done in this run (0 before):
        one register, cleared by ``start``, written once."""
        done_cycle = Signal(32, name=f"npu{rank}_done_cycle")
        seen = Signal(name=f"npu{rank}_done_seen")
        with m.If(start):
            m.d.sync += [done_cycle.eq(0), seen.eq(0)]
        with m.Elif(running & engine.done & ~seen):
            m.d.sync += [done_cycle.eq(self.cycles), seen.eq(1)]
        return done_cycle

    def _read_port(self, m, rd_unit, rd_reg, npus, switches, link_overflow, all_done, running,
                   done_cycles):
        spec = self.spec
        with m.Switch(rd_unit):
            for rank, (engine, tx, rx) in npus.items():
                if tx is None:      # an ``npu`` component: its own read registers
                    with m.Case(rank):
                        read_register(m, rd_reg, self.rd_data, [getattr(engine, n) for n in engine.read_names])
                    continue
                values = {name: getattr(engine, name) for name in ENGINE_READ}
                values.update(seq_errors=rx.seq_errors, link_errors=tx.credit_error | rx.overflow,
                              done_cycle=done_cycles[rank])
                with m.Case(rank):
                    read_register(m, rd_reg, self.rd_data, [values[n] for n in PACKET_ENGINE_READ])
            for s, sw in enumerate(switches):
                if sw is None:
                    continue
                values = dict(selects=sw.selects, preemptions=sw.preemptions, state=sw.state,
                              loaded=sw.loaded, error=sw.error, active_phase=sw.active_phase,
                              busy=sw.busy,
                              flags=sw.bad_header | sw.overflow << 1 | sw.credit_error << 2
                              | link_overflow[s] << 3)
                with m.Case(spec.endpoints + s):
                    read_register(m, rd_reg, self.rd_data, [values[n] for n in PACKET_SWITCH_READ])
            with m.Case(GLOBAL_UNIT):
                read_register(m, rd_reg, self.rd_data, [self.cycles, all_done, running])
        assert len(GLOBAL_READ) == 3


def _join(m, out, out_credit, link, inp, inp_credit, route=None):
    """Sender port (``out``, its credit input) -> ``link`` -> receiver port (``inp``, its
    credit output); ``route`` (:meth:`PacketFabricTop._route`): the header's ``dest`` set from
    its ``flow`` by the receiving switch's table on the way in."""
    _send(m, out, out_credit, link)
    _receive(m, link.o.valid, link.o.payload, list(link.credit_in), inp, inp_credit, route)


def _send(m, out, out_credit, link):
    """Sender port (``out``, its credit input) -> ``link``'s input (and its credits back)."""
    m.d.comb += [link.i.valid.eq(out.valid), link.i.payload.eq(out.payload)]
    for v in range(len(out_credit)):
        m.d.comb += out_credit[v].eq(link.credit_out[v])


def _receive(m, valid, payload, credit_back, inp, inp_credit, route):
    """A link's output (``valid``, ``payload``; ``credit_back[v]`` the link's credit inputs)
    -> receiver port (``inp``, its credit output), with the online ``dest`` rewrite
    (``route``, :meth:`PacketFabricTop._route`) on the way in."""
    m.d.comb += [inp.valid.eq(valid), inp.payload.eq(payload)]
    if route is not None:
        flow, dest, table = route
        tag = payload.tag
        with m.Switch(tag[flow.offset:flow.offset + flow.width]):
            for endpoint, output in table.items():
                with m.Case(endpoint):
                    m.d.comb += inp.payload.tag[dest.offset:dest.offset + dest.width].eq(output)
    for v in range(len(credit_back)):
        m.d.comb += credit_back[v].eq(inp_credit[v])


def _partition_problem(spec, partition, part) -> str:
    """What is wrong with a part of a cut packet fabric ("" if nothing)."""
    if (partition is None) != (part is None):
        return ("PacketFabricTop: give both partition and part (one part of a cut fabric) or "
                "neither (the whole fabric)")
    if partition is None:
        return ""
    if not isinstance(partition, FabricPartition) or partition.spec != spec:
        return f"PacketFabricTop: the partition must be a FabricPartition of fabric {spec.name}, got {partition!r}"
    if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < partition.count:
        return f"PacketFabricTop: part must be in 0..{partition.count - 1}, got {part!r}"
    return ""
