"""``TraceNpu``: an NPU of the fabric that runs its iteration trace (docs/fabric_iteration.md)."""

from __future__ import annotations

from amaranth import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import ENGINE_REGS, NPU_BUFFER
from hdl.contracts.trace_program import LOADER_READ, TRACE_READ
from hdl.designs.fabric.fabric_top import ENGINE_READ
from hdl.designs.fabric.npu_engine import NpuEngine, connect_rx_between_collectives
from hdl.designs.layouts import flit_layout

from .loading_sequencer import LoadingTraceSequencer
from .trace_sequencer import TraceSequencer

__all__ = ["TraceNpu"]


class TraceNpu(wiring.Component):
    """The fabric's :class:`NpuEngine` started by a :class:`TraceSequencer` instead of the
    fabric's ``start``: a drop-in for the engine at an NPU port of
    :class:`hdl.designs.fabric.FabricTop` (its ``npu`` parameter).

    Parameters: ``flit``, ``buffer`` (the engine's), ``depth`` (trace nodes it holds),
    ``programs`` (None: one collective, its program written by the harness; else a
    :class:`LoadingTraceSequencer` with that many program entries writes each collective's
    engine program, and ``load_stall``/``run_errors`` (:data:`LOADER_READ`) are read too),
    ``overlap`` (default False: built as before): the sequencer runs compute under
    collectives (:class:`TraceSequencer`'s ``overlap``).

    Members: the engine's (``tx``, ``rx``, ``start``, ``we``/``waddr``/``wdata``, ``sent``,
    ``received``, ``errors``, ``extra``, ``first_error``, ``hash``) and the sequencer's
    (``nodes_done``, ``node_start``, ``node_end``); ``start`` starts the sequencer; a program
    write below ``len(ENGINE_REGS)`` goes to the engine, any other to the sequencer; ``done``
    is the sequencer's (every node of the trace finished). ``rx`` is held (not ready) unless the
    sequencer runs the engine on a collective it is not done with (or the trace is finished),
    so flits of the next collective wait for its start. ``read_names``: the read registers
    the fabric top exposes (the engine's, then :data:`TRACE_READ`)."""

    read_names = ENGINE_READ + TRACE_READ

    def __init__(self, flit: FlitFormat, *, buffer: int = NPU_BUFFER, depth: int = 128,
                 programs: int | None = None, overlap: bool = False):
        self.flit, self.buffer, self.depth, self.programs = flit, buffer, depth, programs
        self.overlap = overlap
        if programs is not None:      # several collectives: their programs from a loader
            self.read_names = ENGINE_READ + LoadingTraceSequencer.read_names
        shape = flit_layout(flit)
        super().__init__({
            "tx": Out(stream.Signature(shape)),
            "rx": In(stream.Signature(shape)),
            "start": In(1),
            "we": In(1), "waddr": In(6), "wdata": In(32),
            "done": Out(1), "sent": Out(32), "received": Out(32), "errors": Out(32),
            "extra": Out(32), "first_error": Out(32), "hash": Out(32),
            "nodes_done": Out(32), "node_start": Out(32), "node_end": Out(32),
            **({"load_stall": Out(32), "run_errors": Out(32)} if programs is not None else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        engine = m.submodules.engine = NpuEngine(self.flit, buffer=self.buffer)
        if self.programs is None:
            seq = m.submodules.sequencer = TraceSequencer(depth=self.depth, overlap=self.overlap)
            loads, reg, value = 0, self.waddr, self.wdata
        else:
            seq = m.submodules.sequencer = LoadingTraceSequencer(depth=self.depth, programs=self.programs, lanes=1,
                                                                 overlap=self.overlap)
            loads = seq.lane_we[0]
            reg, value = Mux(loads, seq.lane_waddr, self.waddr), Mux(loads, seq.lane_wdata, self.wdata)
            m.d.comb += [seq.engine_errors.eq(engine.errors + engine.extra),
                         *(getattr(self, n).eq(getattr(seq, n)) for n in LOADER_READ)]
        wiring.connect(m, engine.tx, wiring.flipped(self.tx))
        connect_rx_between_collectives(m, wiring.flipped(self.rx), engine, seq.engine_running, seq.done)
        to_engine = self.waddr < len(ENGINE_REGS)
        m.d.comb += [
            engine.we.eq(loads | (self.we & to_engine)), engine.waddr.eq(reg), engine.wdata.eq(value),
            seq.we.eq(self.we & ~to_engine), seq.waddr.eq(self.waddr), seq.wdata.eq(self.wdata),
            seq.start.eq(self.start), engine.start.eq(seq.engine_start),
            seq.engine_done.eq(engine.done), self.done.eq(seq.done),
            *(getattr(self, n).eq(getattr(engine, n))
              for n in ("sent", "received", "errors", "extra", "first_error", "hash")),
            *(getattr(self, n).eq(getattr(seq, n)) for n in TRACE_READ),
        ]
        return m
