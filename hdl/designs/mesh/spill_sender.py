"""The sender of a checkpoint spill (``io-write`` at an NPU, ``io-read`` at a controller): its
stripe to each of its destinations, as unicasts, interleaved flit by flit."""

from __future__ import annotations

from amaranth import Array, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS
from hdl.contracts.mesh_io import CHECK_BITS, SPILL_NPU_BITS, SPILL_SEQ_BITS, MeshIoSpec
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .output_credits import OutputCredits

__all__ = ["SpillSender"]


class SpillSender(wiring.Component):
    """After ``start``, sends ``stripe`` flits to each of ``dests`` (``(x, y, vc, npu,
    controller)``: the router coordinates the flit is addressed to, its VC, and the stripe it
    belongs to), destination by destination in turn: flit ``n`` goes to ``dests[n % D]`` as that
    stripe's flit ``n // D``, with the word ``hdl.contracts.mesh_io.spill_word(seq, npu,
    controller)`` and ``spill_check`` in the rest of the data field. The interleave keeps every
    destination (every controller's link, the bound of a spill) busy from the start.

    Parameters: spec (:class:`MeshIoSpec`), dests (at least one), rate ``(a, b)`` of the link
    it sends into (a controller's ``spec.io_rate``; an NPU's port (1, 1)); ``paced`` (a
    controller: :class:`OutputCredits`' paced counter, restarted by ``start``: every flit, the
    first included, waits its whole ``b / a`` cycles, as a 128 GBps device).

    Members: ``start`` (restart; the count goes back to 0), ``stripe`` (In(SPILL_SEQ_BITS)),
    ``o`` (Out link), ``credit`` (In(2): the router input's credit pulses;
    ``spec.mesh.depth`` per VC to start with), ``hold`` (In(1): send nothing this cycle, the
    bench's random idle), ``sent`` (Out(32): flits sent since the start), ``done`` (Out(1):
    ``stripe`` to every destination sent), ``error`` (a credit returned that was never given).

    Rate and backpressure: a flit when the link's token and a credit of its destination's VC
    allow (the turn waits for it: destinations keep their order); ``o`` is combinational from
    registers and the credits (a producer waits for nothing else).
    """

    def __init__(self, *, spec: MeshIoSpec, dests, rate=(1, 1), paced: bool = False):
        dests = [tuple(d) for d in dests]
        if not dests or any(len(d) != 5 for d in dests):
            raise FredError(f"SpillSender needs destinations (x, y, vc, npu, controller), got {dests!r}")
        self.spec, self.dests, self.rate, self.paced = spec, dests, rate, bool(paced)
        self.flit = spec.mesh.flit
        super().__init__({
            "start": In(1), "stripe": In(SPILL_SEQ_BITS),
            "o": Out(link_signature(struct_layout(self.flit.fields))), "credit": In(MESH_VCS),
            "hold": In(1), "sent": Out(32), "done": Out(1), "error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        credits = m.submodules.credits = OutputCredits(flit=self.flit, depth=self.spec.mesh.depth, rate=self.rate,
                                                       paced=self.paced)
        cb = self.flit.coord_bits
        table = Array(Const(x | y << cb | vc << 2 * cb | npu << (2 * cb + 1)
                            | ctl << (2 * cb + 1 + SPILL_NPU_BITS), 2 * cb + 1 + SPILL_NPU_BITS + 5)
                      for x, y, vc, npu, ctl in self.dests)
        turn = Signal(range(len(self.dests)))      # the destination of the next flit
        seq = Signal(SPILL_SEQ_BITS)               # its index in that destination's stripe
        entry = Signal(2 * cb + 1 + SPILL_NPU_BITS + 5)
        dest_x, dest_y, vc = entry[:cb], entry[cb:2 * cb], entry[2 * cb]
        npu, ctl = entry[2 * cb + 1:2 * cb + 1 + SPILL_NPU_BITS], entry[2 * cb + 1 + SPILL_NPU_BITS:]
        running, finished, fire = Signal(), Signal(), Signal()
        word = Signal(32)
        m.d.comb += [
            entry.eq(table[turn]),
            finished.eq(seq == self.stripe),          # every destination's stripe sent
            self.done.eq(running & finished),
            fire.eq(running & ~self.hold & ~finished & credits.has.bit_select(vc, 1)),
            credits.spend.eq(fire << vc),
            credits.give.eq(self.credit),
            *([credits.restart.eq(self.start), credits.waiting.eq(running & ~finished)] if self.paced else []),
            self.error.eq(credits.error),
            word.eq(seq | npu << SPILL_SEQ_BITS | ctl << (SPILL_SEQ_BITS + SPILL_NPU_BITS)),
            self.o.valid.eq(fire),
            self.o.payload.data.eq(word | ((seq ^ (seq >> 3) ^ npu ^ ctl)[:CHECK_BITS] << 32)),
            self.o.payload.last.eq(1),
            self.o.payload.vc.eq(vc),
            self.o.payload.dest_x.eq(dest_x),
            self.o.payload.dest_y.eq(dest_y),
        ]
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.sent.eq(0), turn.eq(0), seq.eq(0)]
        with m.Elif(fire):
            m.d.sync += self.sent.eq(self.sent + 1)
            with m.If(turn == len(self.dests) - 1):
                m.d.sync += [turn.eq(0), seq.eq(seq + 1)]
            with m.Else():
                m.d.sync += turn.eq(turn + 1)
        return m
