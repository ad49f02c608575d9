"""``StripeTraceNpu``: an NPU of the packet Fred-A/C fabric's I/O iteration: the striped weight
streaming's :class:`~hdl.designs.fabric.stripe_npu.StripeNpu` behind a trace sequencer whose
loader writes its receiver table, routes and header per I/O collective (docs/fabric_iteration.md,
"The packet FRED fabric's I/O iteration")."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.contracts.trace_program import LOADER_READ, TRACE_READ
from hdl.designs.fabric.stripe_npu import StripeNpu
from hdl.designs.fabric.io_controller import endpoint_link_members
from hdl.emit.hierarchy import SeparateModule, flit_suffix, packet_suffix

from .loading_sequencer import LoadingTraceSequencer

__all__ = ["StripeTraceNpu"]


class StripeTraceNpu(SeparateModule, wiring.Component):
    """A :class:`StripeNpu` (``stripes``) and a :class:`LoadingTraceSequencer` (``nodes`` trace
    nodes, ``programs`` loader entries, one lane: the StripeNpu's paged program port,
    :func:`hdl.contracts.io_stripes.stripe_npu_writes`, written only by the loader).

    Members: the link (``o`` / ``credit_in`` / ``i`` / ``credit_out``, the StripeNpu's);
    ``start`` (the trace's start); ``we`` / ``waddr`` / ``wdata`` (the harness's writes, all to
    the sequencer and its loader: :data:`~hdl.contracts.trace_program.TRACE_TABLE_ADDR` ..
    ``PROG_VALUE``); ``engine_start`` (Out: the sequencer reached an I/O node with its program
    written) and ``engine_done`` (In: the wafer's end of that collective), to the wafer's
    :class:`~.wafer_collective.WaferCollective`; ``run`` (In, pulse: the wafer's start of the
    collective: the StripeNpu starts); ``run_done`` (Out: the StripeNpu's ``done``, every
    stripe received); ``done`` (Out: every node of the trace finished); the read registers
    :attr:`read_names`: the StripeNpu's of its last run (``done`` replaced by the trace's),
    then :data:`TRACE_READ` and :data:`LOADER_READ` (``run_errors``: the receiver's bad flits,
    sequence errors and link errors summed over every run).

    Hierarchical Verilog emits it as one module (:attr:`module_name`), instantiated at every
    NPU port: the 20 NPUs of a wafer are one module's text, not 20 copies.

    Latency: the sequencer's (a collective node: one cycle to raise ``engine_start``, one to
    see ``engine_done``), the wafer's, the StripeNpu's. The receive side is not held between
    collectives (unlike :func:`~hdl.designs.fabric.npu_engine.connect_rx_between_collectives`):
    no flit of an I/O collective is in flight outside it, since it starts and ends for every
    unit at once.

    ``overlap`` (default False: built as before, the same module name): the sequencer runs
    compute under the I/O collectives (:class:`~.trace_sequencer.TraceSequencer`'s ``overlap``);
    the module name then ends with ``_ov``.
    """

    read_names = ("done", "received", "errors", "first_error", "seq_errors", "link_errors") + TRACE_READ + LOADER_READ

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, stripes: int, nodes: int, programs: int,
                 overlap: bool = False):
        self.flit, self.packet, self.depth, self.stripes = flit, packet, depth, stripes
        self.nodes, self.programs, self.overlap = nodes, programs, overlap
        super().__init__({
            **endpoint_link_members(flit, packet),
            "start": In(1), "we": In(1), "waddr": In(6), "wdata": In(32), "done": Out(1),
            "engine_start": Out(1), "engine_done": In(1), "run": In(1), "run_done": Out(1),
            **{name: Out(32) for name in ("received", "errors", "first_error", "seq_errors", "link_errors")},
            **{name: Out(32) for name in TRACE_READ + LOADER_READ},
        })

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation: every parameter, e.g.
        ``fred_stripe_trace_npu_int32x1_t1_k8_ph1_s16_f8_d5_st5_b8_x18_n512_p16384``."""
        return (f"fred_stripe_trace_npu_{flit_suffix(self.flit)}_{packet_suffix(self.packet)}_b{self.depth}"
                f"_x{self.stripes}_n{self.nodes}_p{self.programs}" + ("_ov" if self.overlap else ""))

    def elaborate(self, platform) -> Module:
        m = Module()
        npu = m.submodules.npu = StripeNpu(flit=self.flit, packet=self.packet, depth=self.depth, stripes=self.stripes)
        seq = m.submodules.sequencer = LoadingTraceSequencer(depth=self.nodes, programs=self.programs, lanes=1,
                                                             overlap=self.overlap)
        wiring.connect(m, wiring.flipped(self.o), npu.o)
        wiring.connect(m, wiring.flipped(self.i), npu.i)
        for v in range(len(DATA_VCS)):
            m.d.comb += [npu.credit_in[v].eq(self.credit_in[v]), self.credit_out[v].eq(npu.credit_out[v])]
        m.d.comb += [
            seq.we.eq(self.we), seq.waddr.eq(self.waddr), seq.wdata.eq(self.wdata), seq.start.eq(self.start),
            npu.we.eq(seq.lane_we[0]), npu.waddr.eq(seq.lane_waddr), npu.wdata.eq(seq.lane_wdata),
            self.engine_start.eq(seq.engine_start), seq.engine_done.eq(self.engine_done),
            seq.engine_errors.eq(npu.errors + npu.seq_errors + npu.link_errors),
            npu.start.eq(self.run), self.run_done.eq(npu.done), self.done.eq(seq.done),
            *(getattr(self, n).eq(getattr(npu, n)) for n in ("received", "errors", "first_error", "seq_errors",
                                                              "link_errors")),
            *(getattr(self, n).eq(getattr(seq, n)) for n in TRACE_READ + LOADER_READ),
        ]
        return m
