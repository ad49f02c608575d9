"""``FabricTop``: the wafer fabric of FRED switches with its NPU engines (docs/fabric_rtl.md; the Verilog
top ``fred_fabric``)."""

from __future__ import annotations

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import phase_index_width
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.fabric_partition import FabricPartition, uplinks
from hdl.compiler.fabric_program import default_phases
from hdl.contracts.npu_engine import ENGINE_REGS, NPU_BUFFER
from hdl.contracts.flit import FlitFormat
from hdl.designs.layouts import flit_layout
from hdl.designs.switch.switch_top import FredSwitchTop

from .cut import cut_ports as cut_ports_of, cut_slices, link_cut_fields
from .link import Link, LinkReceiver, LinkSender
from .npu_engine import NpuEngine
from .phase_sequencer import PhaseSequencer

__all__ = ["FabricTop", "harness_inputs", "harness_ports", "count_cycles", "read_register", "NPU_BUFFER", "POR_CYCLES", "ENGINE_READ", "SWITCH_READ", "GLOBAL_UNIT", "GLOBAL_READ", "TAG_WIDTH", "PROG_REG_WIDTH"]

#: Read-bus registers of an engine unit (``rd_unit`` = rank), in register order.
ENGINE_READ = ("sent", "received", "errors", "extra", "first_error", "done", "hash")
#: Read-bus registers of a switch unit (``rd_unit`` = npus + switch index; L2 last).
SWITCH_READ = ("index", "count", "finished", "loaded", "error", "active_phase", "active_valid", "busy")
#: The unit of the fabric-wide registers, and its registers.
GLOBAL_UNIT = 63
GLOBAL_READ = ("cycles", "all_done", "running")
#: Cycles of the fabric's internal power-on reset (the top has no reset input).
POR_CYCLES = 4
#: Bits of the flit tag in the fabric (the engines send tag 0; the field must exist).
TAG_WIDTH = 1
#: Bits of the program port's register address (engines: ``len(ENGINE_REGS)`` registers).
PROG_REG_WIDTH = 6


def harness_ports(*, switches: int | None = None, phases: int | None = None) -> dict:
    """The harness ports of a fabric top, in this order: ``clk``, ``start``, the program port
    (``prog_we/unit/reg/data``), with ``switches`` the configuration stream of that many
    switches of ``phases`` phases (``cfg_valid/switch/data/last/phase`` -> ``cfg_ready``: the
    circuit and packet fabrics; without, the mesh fabric and the mesh I/O tops), the
    registered read port (``rd_unit/rd_reg`` -> ``rd_data``), ``all_done`` and ``cycles``.
    :func:`harness_inputs` registers the inputs."""
    ports = {"clk": In(1), "start": In(1),
             "prog_we": In(1), "prog_unit": In(6), "prog_reg": In(PROG_REG_WIDTH), "prog_data": In(32)}
    if switches is not None:
        ports.update({"cfg_valid": In(1), "cfg_switch": In(range(switches)), "cfg_data": In(32),
                      "cfg_last": In(1), "cfg_phase": In(phase_index_width(phases)), "cfg_ready": Out(1)})
    return {**ports, "rd_unit": In(6), "rd_reg": In(5), "rd_data": Out(32), "all_done": Out(1), "cycles": Out(32)}


def harness_inputs(m: Module, top) -> tuple[Signal, ...]:
    """The harness side every fabric top shares (FabricTop, PacketFabricTop, MeshFabricTop):
    the ``sync`` domain on ``top.clk`` with its power-on reset, and ``top``'s ``start``,
    program and read inputs registered once. Returns the registered (start, prog_we,
    prog_unit, prog_reg, prog_data, rd_unit, rd_reg); each acts one cycle after its input.

    Reset from inside (power-on: the first POR_CYCLES cycles), not a top input: Verilator
    re-evaluates all logic that depends on a top input at every eval, i.e. at both clock
    edges, and Amaranth's next-state logic of every register depends on the reset. With
    ``rst`` a port, that was 47 % of the fred-d run time (perf, 2026-11-23). The program and
    read ports are registered for the same reason: no logic but these registers depends on a
    top input."""
    m.domains.sync = ClockDomain("sync")
    m.domains.por = ClockDomain("por", reset_less=True)
    por = Signal(range(POR_CYCLES + 1), init=0)
    m.d.comb += [ClockSignal("sync").eq(top.clk), ClockSignal("por").eq(top.clk),
                 ResetSignal("sync").eq(por != POR_CYCLES)]
    with m.If(por != POR_CYCLES):
        m.d.por += por.eq(por + 1)
    start, prog_we = Signal(), Signal()
    prog_unit, prog_reg, prog_data = Signal(6), Signal(PROG_REG_WIDTH), Signal(32)
    rd_unit, rd_reg = Signal(6), Signal(5)
    m.d.sync += [start.eq(top.start), prog_we.eq(top.prog_we), prog_unit.eq(top.prog_unit),
                 prog_reg.eq(top.prog_reg), prog_data.eq(top.prog_data),
                 rd_unit.eq(top.rd_unit), rd_reg.eq(top.rd_reg)]
    return start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg


def count_cycles(m: Module, start, running, all_done, cycles) -> None:
    """``start`` sets ``running`` and clears ``cycles``; ``cycles`` then counts every cycle
    of the run until ``all_done``."""
    with m.If(start):
        m.d.sync += [running.eq(1), cycles.eq(0)]
    with m.Elif(running & ~all_done):
        m.d.sync += cycles.eq(cycles + 1)


def read_register(m: Module, rd_reg, rd_data, values) -> None:
    """The read port inside one unit's case: ``rd_data`` = ``values[rd_reg]`` (combinational)."""
    with m.Switch(rd_reg):
        for index, value in enumerate(values):
            with m.Case(index):
                m.d.comb += rd_data.eq(value)


def _gated(m, source, sink, allow):
    """Connect stream ``source`` to the switch input ``sink`` through ``allow`` (the
    sequencer's, a function of its registers only: no combinational path from valid or ready
    is added; a port not allowed holds its flit)."""
    m.d.comb += [sink.valid.eq(source.valid & allow), sink.payload.eq(source.payload),
                 source.ready.eq(sink.ready & allow)]


class FabricTop(wiring.Component):
    """The fabric of ``spec`` (:class:`hdl.contracts.fabric.FabricSpec`): ``l1_count`` L1 switches
    Fred_m(npus_per_l1 + uplink_ports) and the L2 as ``l2_planes`` switches
    Fred_m(l2_plane_ports) (``FabricSpec.l2_plane_of`` says which plane and port an L1 uplink
    reaches; one plane = one Fred_m(l1_count * uplink_ports)), each a :class:`FredSwitchTop`
    with ``phases`` configuration slots and a :class:`PhaseSequencer`; one :class:`NpuEngine`
    per NPU, and a :class:`Link` for every direction of every cable: NPU <-> L1
    (``npu_link_latency`` cycles, 1 flit/cycle), L1 uplink port <-> L2 plane port
    (``uplink_latency`` cycles, ``uplink_rate`` flits/cycle). Switch ``s`` (configuration port
    ``cfg_switch``, read unit ``npus + s``): L1s ``0 .. l1_count - 1``, then the planes.

    The top's I/O is small on purpose (Verilator speed; the harness never touches flits):
    ``clk`` (no reset input: the fabric resets itself for :data:`POR_CYCLES` cycles after
    power-on), ``start`` (pulse: engines and sequencers start, the cycle counter clears), the program write
    port ``prog_we/prog_unit/prog_reg/prog_data`` (unit = rank for engines, ``npus + s`` for the
    sequencer of switch ``s``), the configuration port ``cfg_valid/cfg_switch/cfg_data/
    cfg_last/cfg_phase`` -> ``cfg_ready`` (the selected switch's configuration stream,
    ``docs/switch.md``), and the read port ``rd_unit/rd_reg`` -> ``rd_data`` (combinational;
    :data:`ENGINE_READ`, :data:`SWITCH_READ`, :data:`GLOBAL_READ`), plus ``all_done`` and
    ``cycles``: cycles from the cycle after ``start`` is seen (one register after the port) until every engine is done (every flit
    sent, every expected flit received and checked).

    One part of a cut fabric (``partition``, a :class:`FabricPartition` of ``spec``, and
    ``part``; the lock-step simulator, ``eda/fabric/lockstep.py``): only the part's
    switches with their sequencers, and the NPUs under its L1s; an uplink to or from another
    part is a :class:`LinkSender` or :class:`LinkReceiver` whose cut signals are the ports
    ``cut_out`` / ``cut_in`` (:meth:`cut_fields`). The harness ports are the same; a unit of
    another part ignores writes and reads 0, ``cfg_ready`` is 0 for another part's switch,
    and ``all_done`` / ``cycles`` cover the part's own engines (done at once without any).
    """

    def __init__(self, spec: FabricSpec, *, phases: int | None = None,
                 partition: FabricPartition | None = None, part: int | None = None,
                 npu=None, sequencer=None):
        self.spec = spec
        # the component at each NPU port: ``npu(flit, buffer=...)`` with the NpuEngine's members
        # and its read registers in ``read_names`` (default: the NpuEngine itself)
        self.npu = NpuEngine if npu is None else npu
        # each switch's phase sequencer: ``sequencer(ports=, phases=)`` with the PhaseSequencer's
        # members (default: the PhaseSequencer; the iteration top's reruns it per collective)
        self.sequencer = PhaseSequencer if sequencer is None else sequencer
        self.phases = default_phases() if phases is None else phases
        self.flit = FlitFormat(dtype=spec.dtype, lanes=spec.lanes, tag_width=TAG_WIDTH)
        self.switch_ports = spec.switch_ports
        problem = None
        if (partition is None) != (part is None):
            problem = ("FabricTop: give both partition and part (one part of a cut fabric) or "
                       "neither (the whole fabric)")
        elif partition is not None and partition.spec != spec:
            problem = f"FabricTop: the partition is of fabric {partition.spec.name}, not of {spec.name}"
        elif partition is not None and (isinstance(part, bool) or not isinstance(part, int)
                                        or not 0 <= part < partition.count):
            problem = f"FabricTop: part must be in 0..{partition.count - 1}, got {part!r}"
        if problem:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(problem)
        self.partition, self.part = partition, part
        cut_ports = cut_ports_of(self.cut_fields()) if partition is not None else {}
        super().__init__({**cut_ports, **harness_ports(switches=len(self.switch_ports), phases=self.phases)})

    def _owns(self, switch: int) -> bool:
        return self.partition is None or self.partition.parts[switch] == self.part

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """This part's cut signals, LSB first: ``(bus, name, width)`` with bus ``cut_out`` or
        ``cut_in``; for every cut uplink (``FabricPartition.cut_links`` order) the sender's
        part drives ``<link>_valid`` and ``<link>_data`` and reads ``<link>_credit``, the
        receiver's the reverse. Part p's ``cut_out`` is, field for field, part q's ``cut_in``
        when the fabric has two parts."""
        width = Shape.cast(flit_layout(self.flit)).width
        cuts = [(c.ends.name, c.source_part, c.sink_part) for c in self.partition.cut_links()]
        return link_cut_fields(cuts, self.part, [("valid", 1), ("data", width)], [("credit", 1)])

    def cut_widths(self) -> tuple[int, int]:
        """Bits of (``cut_out``, ``cut_in``)."""
        fields = self.cut_fields()
        return (sum(w for bus, _, w in fields if bus == "cut_out"),
                sum(w for bus, _, w in fields if bus == "cut_in"))

    def elaborate(self, platform) -> Module:
        m = Module()
        start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        spec, shape = self.spec, flit_layout(self.flit)
        k = spec.npus_per_l1
        rate = (spec.uplink_rate.numerator, spec.uplink_rate.denominator)
        switches, sequencers, gates = [], [], []
        for s, ports in enumerate(self.switch_ports):
            if not self._owns(s):     # another part's switch
                switches.append(None)
                sequencers.append(None)
                gates.append(None)
                continue
            name = (f"l1_{s}" if s < spec.l1_count else
                    "l2" if spec.l2_planes == 1 else f"l2_{s - spec.l1_count}")
            sw = FredSwitchTop(ports=ports, middle=spec.middle, dtype=spec.dtype, lanes=spec.lanes,
                               phases=self.phases, tag_width=TAG_WIDTH, word_width=32)
            seq = self.sequencer(ports=ports, phases=self.phases)
            m.submodules[f"switch_{name}"] = sw
            m.submodules[f"seq_{name}"] = seq
            switches.append(sw)
            sequencers.append(seq)
            unit = spec.npus + s
            m.d.comb += [
                sw.config.valid.eq(self.cfg_valid & (self.cfg_switch == s)),
                sw.config.payload.data.eq(self.cfg_data),
                sw.config.payload.last.eq(self.cfg_last),
                sw.config.payload.phase.eq(self.cfg_phase),
                seq.start.eq(start),
                seq.we.eq(prog_we & (prog_unit == unit)),
                seq.waddr.eq(prog_reg), seq.wdata.eq(prog_data),
                sw.phase.valid.eq(seq.select_valid), sw.phase.payload.eq(seq.select_slot),
                seq.select_ready.eq(sw.phase.ready),
                seq.accepted.eq(sum((sw.i[p].valid & sw.i[p].ready) << p for p in range(ports))),
            ]
            # each input port takes only the flits its phase expects (PhaseSequencer.allow)
            gates.append(seq.allow)
        with m.Switch(self.cfg_switch):
            for s, sw in enumerate(switches):
                if sw is not None:
                    with m.Case(s):
                        m.d.comb += self.cfg_ready.eq(sw.config.ready)
        engines = {}   # rank -> engine (this part's NPUs)
        for rank in range(spec.npus):
            if switches[rank // k] is None:
                continue
            engine = m.submodules[f"npu_{rank}"] = self.npu(self.flit, buffer=NPU_BUFFER)
            engines[rank] = engine
            m.d.comb += [engine.start.eq(start),
                         engine.we.eq(prog_we & (prog_unit == rank)),
                         engine.waddr.eq(prog_reg), engine.wdata.eq(prog_data)]
            l1, port = switches[rank // k], rank % k
            to_l1 = m.submodules[f"link_npu{rank}_up"] = Link(shape, latency=spec.npu_link_latency)
            to_npu = m.submodules[f"link_npu{rank}_down"] = Link(shape, latency=spec.npu_link_latency)
            wiring.connect(m, engine.tx, to_l1.i)
            _gated(m, to_l1.o, l1.i[port], gates[rank // k][port])
            wiring.connect(m, l1.o[port], to_npu.i)
            wiring.connect(m, to_npu.o, engine.rx)
        cut = cut_slices(self, self.cut_fields()) if self.partition is not None else {}
        for ends in uplinks(spec):
            source, sink = switches[ends.source], switches[ends.sink]
            if source is not None and sink is not None:
                link = m.submodules[ends.name] = Link(shape, latency=spec.uplink_latency, rate=rate)
                wiring.connect(m, source.o[ends.source_port], link.i)
                _gated(m, link.o, sink.i[ends.sink_port], gates[ends.sink][ends.sink_port])
            elif source is not None:      # the far end is in another part
                sender = m.submodules[f"{ends.name}_sender"] = LinkSender(
                    shape, latency=spec.uplink_latency, rate=rate)
                wiring.connect(m, source.o[ends.source_port], sender.i)
                m.d.comb += [cut[f"{ends.name}_valid"].eq(sender.wire_valid),
                             cut[f"{ends.name}_data"].eq(sender.wire_data),
                             sender.credit.eq(cut[f"{ends.name}_credit"])]
            elif sink is not None:
                receiver = m.submodules[f"{ends.name}_receiver"] = LinkReceiver(
                    shape, latency=spec.uplink_latency)
                _gated(m, receiver.o, sink.i[ends.sink_port], gates[ends.sink][ends.sink_port])
                m.d.comb += [receiver.wire_valid.eq(cut[f"{ends.name}_valid"]),
                             receiver.wire_data.eq(cut[f"{ends.name}_data"]),
                             cut[f"{ends.name}_credit"].eq(receiver.credit)]
        # -- cycle counter ------------------------------------------------------------------
        all_done = Signal()
        running = Signal()
        # a part without engines is done as soon as it runs (the lock-step simulator ANDs the parts')
        everyone_done = (sum(e.done for e in engines.values()) == len(engines)) if engines else 1
        m.d.comb += [all_done.eq(running & everyone_done),
                     self.all_done.eq(all_done)]
        count_cycles(m, start, running, all_done, self.cycles)
        # -- read port ----------------------------------------------------------------------
        with m.Switch(rd_unit):
            for rank, engine in engines.items():
                with m.Case(rank):
                    read_register(m, rd_reg, self.rd_data,
                                  [getattr(engine, n) for n in getattr(engine, "read_names", ENGINE_READ)])
            for s, (sw, seq) in enumerate(zip(switches, sequencers)):
                if sw is None:
                    continue
                values = dict(index=seq.index, count=seq.count, finished=seq.finished,
                              loaded=sw.loaded, error=sw.error, active_phase=sw.active_phase,
                              active_valid=sw.active_valid, busy=sw.busy)
                with m.Case(spec.npus + s):
                    read_register(m, rd_reg, self.rd_data, [values[n] for n in SWITCH_READ])
            with m.Case(GLOBAL_UNIT):
                read_register(m, rd_reg, self.rd_data, [self.cycles, all_done, running])
        return m
