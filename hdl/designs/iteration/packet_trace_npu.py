"""``PacketTraceNpu``: an NPU of the packet fabric that runs its iteration trace
(docs/fabric_iteration.md, "The packet fabric")."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import ENGINE_REGS, NPU_BUFFER
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import PACE_BITS
from hdl.contracts.trace_program import PACKET_HEADER_REGS, PACKET_PACE_REG
from hdl.designs.fabric.depacketizer import Depacketizer
from hdl.designs.fabric.fabric_top import ENGINE_READ
from hdl.designs.fabric.npu_engine import NpuEngine, connect_rx_between_collectives
from hdl.designs.fabric.packet_assembler import none_held
from hdl.designs.fabric.packetizer import Packetizer, connect_engine_to_packetizer
from hdl.designs.fabric.write_pacer import WritePacer
from hdl.designs.fabric.io_controller import endpoint_link_members
from hdl.designs.layouts import chunked_flit_layout

from .loading_sequencer import LoadingTraceSequencer
from .stage_barrier import BOUNDARIES

__all__ = ["PacketTraceNpu"]


class PacketTraceNpu(wiring.Component):
    """The packet fabric's NPU (an :class:`NpuEngine` behind a :class:`Packetizer` and a
    :class:`Depacketizer`) started by a :class:`LoadingTraceSequencer`: a drop-in for the NPU
    of :class:`hdl.designs.fabric.packet_fabric_top.PacketFabricTop` (its ``npu`` parameter).

    Parameters: ``flit``, ``packet``, ``depth`` (the top's: flit format, packet format, flits
    per data VC of the buffers), ``nodes`` (trace nodes it holds), ``programs`` (program-loader
    entries: per collective, the engine's registers and the header registers
    :data:`~hdl.contracts.trace_program.PACKET_HEADER_REGS` that change), ``io_rate``
    (default None: no pacer, the engine feeds the packetizer directly; else the fabric's I/O
    controllers' rate, a :class:`~fractions.Fraction` of a flit per cycle: a
    :class:`~hdl.designs.fabric.write_pacer.WritePacer` between the engine and the packetizer,
    its divisor the program register :data:`~hdl.contracts.trace_program.PACKET_PACE_REG`).

    Pacing (host rule 4, docs/fabric_rtl.md "Writers paced to their controller"): a collective
    whose sends go into an I/O controller leaves at the controller's rate over its writers
    (the pace register, loaded per collective; 0: link rate, the pacer a wire). The pacer
    restarts at each run's start (its first packet unpaced, so the controller drains from the
    run's first packet on) and a run ends only once the pacer holds none of its flits: the
    restart empties the pacer's packet buffer, so it must never come while a flit is in it
    (the engine is ``done`` when its last flit has entered the pacer, up to a packet before it
    left). Unpaced, the pacer holds nothing, so nodes end as without it.

    Members: ``o`` / ``credit_in`` (to the L1 input, its credits back), ``i`` /
    ``credit_out`` (from the L1 output, credits to it), ``start`` (starts the trace and numbers
    the next packet sent and expected 0), ``may_start`` (In, default 1: a run may start; the
    packet iteration top's :class:`~.collective_barrier.CollectiveBarrier` drives it),
    ``run_over`` (Out: a run ends this cycle), ``we`` / ``waddr`` / ``wdata`` (the program port:
    below ``len(ENGINE_REGS)`` the engine, then the header registers, else the sequencer and
    its loader), ``done`` (every node of the trace finished) and the read registers
    :attr:`read_names`: the engine's (``done`` the trace's), the depacketizer's
    ``seq_errors`` (packets out of sequence over the whole trace), ``link_errors`` (sticky:
    a credit error or a receive overflow), ``run_started`` (the current collective node's run
    has started, not yet seen done: the engine's counters are its run's; low at a collective
    node, the NPU waits for its program or the barrier and the counters are the run's before),
    the sequencer's and its loader's.

    Packet numbers run on across collectives (the packetizer and depacketizer start with the
    trace only): every NPU of these iterations takes part in every collective with the same
    packet count, so a reduction's operands carry equal numbers at every switch and the
    switches' drain rule and start gate (which compare numbers of one flow) see a rising
    sequence, as in one long run; the depacketizer marks a run's end on packet ``base +
    packets - 1``, ``base`` the packets of the runs before. The engine takes a flit only while
    it runs and is not done, and only if its packet number is the run's (``base`` ..
    ``base + packets - 1``): a flit of a later run waits at the head of the receive buffer
    until the engine starts on it -- never added to this run's data, never counted as its
    extra (``connect_rx_between_collectives``'s ``current``). That gate cannot sort packets of
    two runs that arrive interleaved (the buffer is one FIFO: this run's packets behind a later
    one's would wait for ever), so the fabric must not interleave them: the packet iteration
    top's barrier makes every NPU start a run only once every NPU has finished the run before
    (docs/fabric_iteration.md, "Collectives kept apart at a packet NPU").
    ``staged`` (default False: built as before): the NPU runs multi-stage engine programs (the
    hierarchical all-reduce: a reduce-scatter ring in its L1, an all-reduce ring across the
    L1s, an all-gather ring in its L1, each stage to another destination). The ``flow`` header
    register then holds one destination per stage, stage s in bits ``s * flow_bits`` up (a
    one-stage program's loader writes its destination into every slice), and members
    ``stage_past`` (Out, bit s: the engine has received all of stage s of its run, or the NPU
    holds nobody back: its run is over and it waits at the collective barrier, or its trace is
    over) and ``stage_open`` (In, from the top's :class:`~.stage_barrier.StageBarrier`: every
    NPU is past stage s). The engine sends stage s + 1 only while ``stage_open[s]`` is high,
    and the packetizer's destination is the slice of the lower of the engine's send stage and
    the stage the open bits name: stage s's flits are sent only once every stage before is
    open, and stage s opens only once every flit of stage s was received, so every flit
    between the engine and the link is of that stage -- a pacer's buffer included, which the
    engine's send stage runs ahead of (without a pacer the two agree whenever a flit is
    offered; a top that holds ``stage_open`` high, no barrier, sends by the engine's stage). A
    stage ends at a chunk's end, so the packetizer's cut there also ends a packet at every
    stage's end: no packet carries two destinations.
    Latency: the packetizer's 0 and the depacketizer's 1 cycle, as on the fabric's NPU; the
    sequencer's start and done cycles per run (:class:`LoadingTraceSequencer`).

    ``overlap`` (default False: built as before): the sequencer runs compute under the
    collectives (:class:`~.trace_sequencer.TraceSequencer`'s ``overlap``); the runs, their
    barrier and packet numbers are the collective lane's, as they were the sequencer's.
    """

    read_names = ENGINE_READ + ("seq_errors", "link_errors", "run_started") + LoadingTraceSequencer.read_names

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, nodes: int, programs: int,
                 buffer: int = NPU_BUFFER, io_rate=None, staged: bool = False, overlap: bool = False):
        self.flit, self.packet, self.depth, self.nodes, self.programs = flit, packet, depth, nodes, programs
        self.staged, self.overlap = bool(staged), overlap
        if self.staged and (BOUNDARIES + 1) * packet.flow_bits > 32:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"a staged NPU packs {BOUNDARIES + 1} flow ids of {packet.flow_bits} bits into its "
                            f"32-bit flow register; at most {32 // (BOUNDARIES + 1)} bits each")
        self.buffer = buffer
        if io_rate is not None and not 0 < io_rate <= 1:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"io_rate must be a fraction of a flit per cycle in (0, 1], got {io_rate!r}")
        self.io_rate = io_rate
        super().__init__({
            **endpoint_link_members(flit, packet),
            "start": In(1), "we": In(1), "waddr": In(6), "wdata": In(32), "done": Out(1),
            "may_start": In(1, init=1), "run_over": Out(1),
            **{name: Out(32) for name in ("sent", "received", "errors", "extra", "first_error", "hash")},
            "seq_errors": Out(16), "link_errors": Out(1), "run_started": Out(1),
            **{name: Out(32) for name in LoadingTraceSequencer.read_names},
            **({"stage_past": Out(BOUNDARIES), "stage_open": In(BOUNDARIES)} if self.staged else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        engine = m.submodules.engine = NpuEngine(self.flit, buffer=self.buffer, stage_gate=self.staged)
        tx = m.submodules.tx = Packetizer(flit=self.flit, packet=self.packet, depth=self.depth)
        rx = m.submodules.rx = Depacketizer(flit=self.flit, packet=self.packet, depth=self.depth, with_seq=True)
        seq = m.submodules.sequencer = LoadingTraceSequencer(depth=self.nodes, programs=self.programs, lanes=1,
                                                             barrier=True, overlap=self.overlap)
        pacer_idle, pace = self._pacer(m, engine, tx, seq)
        run_done = engine.done if pacer_idle is None else engine.done & pacer_idle
        m.d.comb += [self.o.valid.eq(tx.o.valid), self.o.payload.eq(tx.o.payload),
                     rx.i.valid.eq(self.i.valid), rx.i.payload.eq(self.i.payload)]
        for v in range(len(DATA_VCS)):
            m.d.comb += [tx.credit[v].eq(self.credit_in[v]), self.credit_out[v].eq(rx.credit[v])]
        # the program port: the harness's writes before the start, the loader's after it
        loads = seq.lane_we[0]
        write = loads | self.we
        reg, value = Mux(loads, seq.lane_waddr, self.waddr), Mux(loads, seq.lane_wdata, self.wdata)
        header = {name: Signal(32, name=f"header_{name}") for name in PACKET_HEADER_REGS}
        for name, address in PACKET_HEADER_REGS.items():
            with m.If(write & (reg == address)):
                m.d.sync += header[name].eq(value)
        if pace is not None:
            with m.If(write & (reg == PACKET_PACE_REG)):
                m.d.sync += pace.eq(value)
        to_engine = self.waddr < len(ENGINE_REGS)
        m.d.comb += [engine.we.eq(write & (reg < len(ENGINE_REGS))), engine.waddr.eq(reg), engine.wdata.eq(value),
                     seq.we.eq(self.we & ~to_engine), seq.waddr.eq(self.waddr), seq.wdata.eq(self.wdata),
                     seq.start.eq(self.start), engine.start.eq(seq.engine_start),
                     seq.engine_done.eq(run_done),
                     seq.engine_errors.eq(engine.errors + engine.extra),
                     tx.start.eq(self.start), rx.start.eq(self.start), tx.hold.eq(0),
                     tx.phase.eq(header["phase"]), tx.vc.eq(header["vc"]), tx.flow.eq(self._flow(m, engine, seq, header))]
        # the run's last packet: the packets of the runs before (``base``) plus this run's
        base = Signal(self.packet.seq_bits)
        run_over = seq.engine_running & run_done        # the cycle a run's done is seen
        with m.If(self.start):
            m.d.sync += base.eq(0)
        with m.Elif(run_over):
            m.d.sync += base.eq(base + header["packets"])
        # the flit at the receive buffer's head is this run's: its packet number in base ..
        # base + packets - 1, modulo the sequence field (the numbers run on over the trace)
        current = (rx.o_seq - base)[:self.packet.seq_bits] < header["packets"]
        connect_rx_between_collectives(m, rx.o, engine, seq.engine_running, seq.done, current=current)
        m.d.comb += [seq.may_start.eq(self.may_start), self.run_over.eq(run_over),
                     self.run_started.eq(seq.engine_running),
                     rx.last_seq.eq(base + header["packets"] - 1),
                     self.done.eq(seq.done), self.seq_errors.eq(rx.seq_errors),
                     self.link_errors.eq(tx.credit_error | rx.overflow),
                     *(getattr(self, n).eq(getattr(engine, n))
                       for n in ("sent", "received", "errors", "extra", "first_error", "hash")),
                     *(getattr(self, n).eq(getattr(seq, n)) for n in LoadingTraceSequencer.read_names)]
        return m

    def _flow(self, m, engine, seq, header):
        """The packetizer's flow: the ``flow`` register; staged, the slice of the stage whose
        flits the packetizer sees (the stages the barrier opened) and the engine's gate."""
        if not self.staged:
            return header["flow"]
        bits = self.packet.flow_bits
        m.d.comb += [engine.stage_open.eq(self.stage_open),
                     self.stage_past.eq(Cat(seq.engine_running & engine.recv_past[s] | ~self.may_start | seq.done
                                            for s in range(BOUNDARIES)))]
        opened = Signal.like(engine.send_stage, name="opened_stage")     # the stages the barrier opened
        m.d.comb += opened.eq(sum(self.stage_open[s] for s in range(BOUNDARIES)))
        stage = Mux(opened < engine.send_stage, opened, engine.send_stage)
        return header["flow"].word_select(stage, bits)

    def _pacer(self, m, engine, tx, seq):
        """Connect the engine's sending side to the packetizer, through a :class:`WritePacer`
        if the NPU has one; returns (a signal high while the pacer holds none of the run's
        flits, the pacer's divisor register), (None, None) without a pacer."""
        if self.io_rate is None:
            connect_engine_to_packetizer(m, engine, tx)
            return None, None
        rate = self.io_rate
        pacer = m.submodules.pacer = WritePacer(chunked_flit_layout(self.flit),
                                                packet_flits=self.packet.packet_flits,
                                                rate=(rate.numerator, rate.denominator))
        connect_engine_to_packetizer(m, engine, tx, pacer)
        pace = Signal(PACE_BITS, name="pace")
        # at most a packet, +1 entering
        idle = none_held(m, pacer.i, pacer.o, most=self.packet.packet_flits + 1, name="pacer_held")
        m.d.comb += [pacer.divisor.eq(pace), pacer.restart.eq(self.start | seq.engine_start)]
        return idle, pace
