"""The mesh side of one NPU engine: addresses its flits, cuts them into packets, and holds
what arrives for it per engine stage."""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.flit import FlitFormat
from hdl.contracts.mesh import ENGINE_WORD_BITS, PORT_REGS, STAGE_BITS, MeshFabricSpec
from hdl.contracts.npu_engine import ENGINE_STAGES
from hdl.designs.layouts import flit_layout, struct_layout

__all__ = ["EnginePort"]



class EnginePort(wiring.Component):
    """Between an :class:`~hdl.designs.fabric.npu_engine.NpuEngine` and its NPU's router.

    Parameters: spec (:class:`MeshFabricSpec`), vc: the virtual channel of this engine's
    flits (the NPU's chunk: 0 routes X-Y, 1 Y-X), flit: the engine's :class:`FlitFormat`
    (the spec's ``dtype``: one int32 or two fp16 lanes, a 32-bit word).

    Members:
        tx: ``In(stream(engine flit))``: the engine's output. o: ``Out(stream(mesh flit))``:
            the same flit addressed to the current stage's destination, ``vc``, the engine's
            word, ``last`` and stage in the data, ``last`` of the mesh flit every
            ``packet_flits`` flits and at the stage's end. Combinational (no register):
            ``o.valid`` is ``tx.valid``.
        eject: ``In(link(mesh flit))``: flits of this VC that reached the NPU; each goes to the
            FIFO of the stage that sent it (``eject_depth`` flits each) and its credit returns
            at once on ``credit`` (the NPU's memory takes it). ``overflow`` (sticky): a FIFO was
            full (the program generator keeps every later stage's flits within ``eject_depth``; the
            current stage's are read as they arrive).
        rx: ``Out(stream(engine flit))``: the head of the FIFO of the stage the engine
            receives, to the engine's ``rx``.
        start, we/waddr/wdata: :data:`PORT_REGS` and the start pulse (stage counters clear).

    Latency: injection combinational; ejection 2 cycles (``fifo.SyncFIFOBuffered``) from
    ``eject`` to ``rx``. Backpressure: none towards the router (credits return on arrival);
    the engine's ``rx.ready`` holds flits in their stage FIFO.

    Why a FIFO per stage: a ring member can start the next stage (sending to a different
    NPU) while this NPU still receives the current one; its flits must not reach the engine
    before the current stage's last one. The engine's stages never have zero flits to send
    before one that has (the program generator checks), so both sides find the stage by
    counting transfers against :data:`PORT_REGS`, as the engine does.
    """

    def __init__(self, *, spec: MeshFabricSpec, vc: int, flit: FlitFormat):
        self.spec, self.vc, self.engine_flit = spec, vc, flit
        self.flit = spec.flit
        super().__init__({
            "tx": In(stream.Signature(flit_layout(flit))),
            "o": Out(stream.Signature(struct_layout(self.flit.fields))),
            "eject": In(wiring.Signature({"valid": Out(1),
                                          "payload": Out(struct_layout(self.flit.fields))})),
            "credit": Out(1),
            "overflow": Out(1),
            "rx": Out(stream.Signature(flit_layout(flit))),
            "start": In(1),
            "we": In(1), "waddr": In(range(len(PORT_REGS))), "wdata": In(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        regs = {name: Signal(32, name=f"reg_{name}") for name in PORT_REGS}
        with m.If(self.we):
            with m.Switch(self.waddr):
                for index, name in enumerate(PORT_REGS):
                    with m.Case(index):
                        m.d.sync += regs[name].eq(self.wdata)
        self._inject(m, regs)
        self._eject(m, regs)
        return m

    def _stage_counter(self, m, regs, kind: str, fire, name: str):
        """The stage and the transfers counted in it: the next stage after the stage's count."""
        stage = Signal(range(ENGINE_STAGES), name=f"{name}_stage")
        count = Signal(32, name=f"{name}_count")
        total = Signal(32, name=f"{name}_total")
        for s in range(ENGINE_STAGES):
            with m.If(stage == s):
                m.d.comb += total.eq(regs[f"{kind}{s}"])
        with m.If(self.start):
            m.d.sync += [stage.eq(0), count.eq(0)]
        with m.Elif(fire):
            with m.If((count + 1 == total) & (stage != ENGINE_STAGES - 1)):
                m.d.sync += [stage.eq(stage + 1), count.eq(0)]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        return stage, count, total

    def _inject(self, m, regs):
        fire = self.o.valid & self.o.ready
        stage, count, total = self._stage_counter(m, regs, "send", fire, "tx")
        # at least one bit: a one-flit packet's counter stays 0 (a zero-width signal would be
        # an ascending [-1:0] range in the Verilog)
        in_packet = Signal(range(max(2, self.flit.packet_flits)), name="in_packet")
        with m.If(self.start):
            m.d.sync += in_packet.eq(0)
        with m.Elif(fire):
            with m.If(self.o.payload.last):
                m.d.sync += in_packet.eq(0)
            with m.Else():
                m.d.sync += in_packet.eq(in_packet + 1)
        dest = Signal(32)
        for s in range(ENGINE_STAGES):
            with m.If(stage == s):
                m.d.comb += dest.eq(regs[f"dest{s}"])
        word = self.tx.payload
        m.d.comb += [
            self.o.valid.eq(self.tx.valid),
            self.tx.ready.eq(self.o.ready),
            self.o.payload.data.eq(Cat(word.data[:ENGINE_WORD_BITS], word.last, stage[:STAGE_BITS])),
            self.o.payload.last.eq((in_packet == self.flit.packet_flits - 1) | (count + 1 == total)),
            self.o.payload.vc.eq(self.vc),
            self.o.payload.dest_x.eq(dest[:8]),
            self.o.payload.dest_y.eq(dest[8:16]),
        ]

    def _eject(self, m, regs):
        fire = self.rx.valid & self.rx.ready
        stage, _, _ = self._stage_counter(m, regs, "recv", fire, "rx")
        width = ENGINE_WORD_BITS + 1
        data = self.eject.payload.data
        sent_stage = data[width:width + STAGE_BITS]
        m.d.comb += self.credit.eq(self.eject.valid)
        for s in range(ENGINE_STAGES):
            buf = m.submodules[f"stage{s}"] = fifo.SyncFIFOBuffered(width=width, depth=self.spec.eject_depth)
            write = self.eject.valid & (sent_stage == s)
            m.d.comb += [buf.w_data.eq(data[:width]), buf.w_en.eq(write)]
            with m.If(write & ~buf.w_rdy):
                m.d.sync += self.overflow.eq(1)
            with m.If(stage == s):
                # the whole payload from the FIFO word (data, last; the mesh carries no engine
                # tag, so it is zero-extended to 0): every payload bit is driven here, and the
                # Verilog has no separate constant block for the tag (Verilator: ALWNEVER)
                m.d.comb += [self.rx.valid.eq(buf.r_rdy),
                             self.rx.payload.eq(buf.r_data[:ENGINE_WORD_BITS + 1]),
                             buf.r_en.eq(self.rx.ready)]
