"""``TracedIoController``: an I/O controller of the packet FRED fabric run by the iteration's
trace: its engine program and header per I/O collective from a program loader, its runs
started and ended with the wafer's I/O collectives (docs/fabric_iteration.md, "The packet FRED
fabric's I/O iteration")."""

from __future__ import annotations

from fractions import Fraction

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import ENGINE_REGS
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.contracts.trace_program import CONTROLLER_STRIPE_REG, PACKET_HEADER_REGS
from hdl.designs.fabric.io_controller import IoController, endpoint_link_members
from hdl.designs.fabric.packet_assembler import none_held
from hdl.emit.hierarchy import SeparateModule, flit_suffix, packet_suffix

from .program_loader import ProgramLoader

__all__ = ["TracedIoController", "CONTROLLER_READ"]

#: Read registers of a traced controller: its trace's end (``done``), the runs started, the
#: flits its engine sent in the last run, the engine's bad plus extra flits summed over every
#: run, its links' sticky error flags (credit error | overflow, of the last run).
CONTROLLER_READ = ("done", "runs", "sent", "run_errors", "link_errors")


class TracedIoController(SeparateModule, wiring.Component):
    """An :class:`IoController` (the paced memory, its one-packet assembler, packetizer and
    depacketizer, unchanged) with a :class:`ProgramLoader` of ``programs`` entries writing,
    per I/O collective, its engine's program (registers below ``len(ENGINE_REGS)``), its
    header (:data:`PACKET_HEADER_REGS`: phase, VC, flow, the packets it receives in a run)
    and its stripe (:data:`CONTROLLER_STRIPE_REG`).

    Parameters: ``flit``, ``packet``, ``depth``, ``rate`` (the controller's), ``programs``.

    Members: the link (``o`` / ``credit_in`` / ``i`` / ``credit_out``, as the controller's);
    ``start`` (the trace's start: the loader back to the first program, and loads it);
    ``we`` / ``waddr`` / ``wdata`` (the harness's writes: the loader's memory,
    ``PROG_ADDR`` / ``PROG_HEAD`` / ``PROG_VALUE``; nothing else is written by the harness);
    ``release`` (In: every NPU has reached the collective, so the loader may write its
    deferred entries, e.g. the engine's ``stages``); ``ready`` (Out: a program loaded and
    not yet run); ``run`` (In, pulse: the wafer's start of the collective: the engine, the
    limiters, the assembler, packetizer and depacketizer start on the loaded program);
    ``run_done`` (Out: the run's engine is done *and* its assembler and limiter hold none of
    its flits -- the run ends when the assembler is empty, :func:`none_held`: the next run's
    start empties them); ``next`` (In, pulse: the wafer's end of the collective: load the
    next program); ``done`` (Out: every program ran, none is loaded and unrun) and the read
    registers :data:`CONTROLLER_READ`.

    Hierarchical Verilog emits it as one module (:attr:`module_name`), instantiated at every
    controller port.

    Timing: as :class:`IoController` from ``run`` (packet p's first flit ceil((p + 1) k /
    rate) cycles after it); the loader writes one entry per cycle from ``start`` / ``next``.
    Packets are numbered from 0 in every run: every unit of the collective restarts with it
    and nothing of the run before is in flight (the wafer's end waits for every NPU's last
    flit).
    """

    read_names = CONTROLLER_READ

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, rate, programs: int):
        if isinstance(programs, bool) or not isinstance(programs, int) or not 1 <= programs <= 1 << 16:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"controller program memory must be an integer in 1..65536 entries, got {programs!r}")
        self.flit, self.packet, self.depth, self.rate, self.programs = flit, packet, depth, rate, programs
        super().__init__({
            **endpoint_link_members(flit, packet),
            "start": In(1), "we": In(1), "waddr": In(6), "wdata": In(32),
            "release": In(1), "ready": Out(1), "run": In(1), "run_done": Out(1), "next": In(1),
            "done": Out(1), "runs": Out(32), "sent": Out(32), "run_errors": Out(32), "link_errors": Out(1),
        })

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation: every parameter (the rate as numerator
        and denominator), e.g. ``fred_traced_io_controller_int32x1_t1_k8_ph1_s16_f8_d5_st5_b8_r16_375_p2048``."""
        rate = Fraction(self.rate)
        return (f"fred_traced_io_controller_{flit_suffix(self.flit)}_{packet_suffix(self.packet)}_b{self.depth}"
                f"_r{rate.numerator}_{rate.denominator}_p{self.programs}")

    def elaborate(self, platform) -> Module:
        m = Module()
        io = m.submodules.io = IoController(flit=self.flit, packet=self.packet, depth=self.depth, rate=self.rate)
        loader = m.submodules.loader = ProgramLoader(depth=self.programs, lanes=1)
        engine, tx, rx = io.engine, io.tx, io.rx
        wiring.connect(m, wiring.flipped(self.o), io.o)
        wiring.connect(m, wiring.flipped(self.i), io.i)
        for v in range(len(DATA_VCS)):
            m.d.comb += [io.credit_in[v].eq(self.credit_in[v]), self.credit_out[v].eq(io.credit_out[v])]
        # -- the loader's writes: the engine's program, the header, the stripe
        write, reg, value = loader.lane_we[0], loader.lane_waddr, loader.lane_wdata
        header = {name: Signal(32, name=f"header_{name}") for name in PACKET_HEADER_REGS}
        stripe = Signal(32, name="stripe")
        for name, address in PACKET_HEADER_REGS.items():
            with m.If(write & (reg == address)):
                m.d.sync += header[name].eq(value)
        with m.If(write & (reg == CONTROLLER_STRIPE_REG)):
            m.d.sync += stripe.eq(value)
        m.d.comb += [loader.we.eq(self.we), loader.waddr.eq(self.waddr), loader.wdata.eq(self.wdata),
                     loader.start.eq(self.start), loader.go.eq(self.next), loader.release.eq(self.release),
                     engine.we.eq(write & (reg < len(ENGINE_REGS))), engine.waddr.eq(reg), engine.wdata.eq(value),
                     tx.phase.eq(header["phase"]), tx.vc.eq(header["vc"]), tx.flow.eq(header["flow"]),
                     tx.hold.eq(0), rx.last_seq.eq(header["packets"] - 1)]
        if self.packet.stripe_bits:
            m.d.comb += tx.stripe.eq(stripe)
        # -- runs: started by the wafer, ended once the paced side holds none of the run's flits
        m.d.comb += [engine.start.eq(self.run), tx.start.eq(self.run), rx.start.eq(self.run)]
        # the read limiter and the assembler: at most a flit in the limiter and a packet (+1
        # entering) in the assembler
        empty = none_held(m, engine.tx, tx.i, most=self.packet.packet_flits + 2, name="memory_held")
        busy, fresh, was_loaded = Signal(), Signal(), Signal()
        m.d.sync += was_loaded.eq(loader.loaded)
        with m.If(self.start | self.run):
            m.d.sync += fresh.eq(0)
        with m.Elif(loader.loaded & ~was_loaded):     # a program finished loading
            m.d.sync += fresh.eq(1)
        with m.If(self.start | self.next):
            m.d.sync += busy.eq(0)
        with m.Elif(self.run):
            m.d.sync += busy.eq(1)
        with m.If(self.start):
            m.d.sync += [self.runs.eq(0), self.run_errors.eq(0)]
        with m.Elif(self.run):
            m.d.sync += self.runs.eq(self.runs + 1)
        with m.Elif(self.next & busy):      # the run's counters, before the next start clears them
            m.d.sync += self.run_errors.eq(self.run_errors + engine.errors + engine.extra)
        m.d.comb += [self.ready.eq(fresh & loader.loaded), self.run_done.eq(busy & engine.done & empty),
                     self.done.eq(loader.loaded & ~loader.pending & ~fresh & ~busy),
                     self.sent.eq(engine.sent), self.link_errors.eq(tx.credit_error | rx.overflow)]
        return m
