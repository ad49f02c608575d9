"""A receiver's check of a checkpoint spill: at a controller (``io-write``) every NPU's stripe,
at an NPU (``io-read``) every controller's, each in order and uncorrupted."""

from __future__ import annotations

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh_io import CHECK_BITS, SPILL_NPU_BITS, SPILL_SEQ_BITS, MeshIoSpec
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .io_checker import count_checked_flits

__all__ = ["SpillChecker"]


class SpillChecker(wiring.Component):
    """Checks the spill flits (``hdl.contracts.mesh_io.spill_word``) that reach receiver
    ``index`` -- controller ``index`` (``at="controller"``: an io-write, one stripe from each
    NPU) or NPU ``index`` (``at="npu"``: an io-read, one from each controller). A flit is good
    when it names this receiver, a sender that exists, came on ``vc`` (the VC its route needs:
    ``hdl.compiler.mesh_io_program.spill_dests``), is the next flit of its sender's stripe (one
    counter per sender: a lost, duplicated or reordered flit is a gap), its check bits match,
    and no more than ``expect`` arrived.

    Parameters: spec (:class:`MeshIoSpec`), at (``"controller"`` or ``"npu"``), index, vc.

    Members: ``start`` (clears the counters), ``i`` (In link), ``expect`` (In(32)),
    ``received``, ``errors`` (bad flits), ``first_error`` (the arrival number of the first bad
    flit, from 1; 0: none) (Out(32)), ``complete`` (Out(1): ``received == expect``).

    Latency: counters move the cycle after the flit. Never backpressures (the receiver writes
    what arrives to its memory): the caller returns each flit's credit on arrival.
    """

    def __init__(self, *, spec: MeshIoSpec, at: str, index: int, vc: int):
        if at not in ("controller", "npu"):
            raise FredError(f"a spill checker sits at a controller or an npu, got {at!r}")
        self.spec, self.at, self.index, self.vc = spec, at, index, vc
        self.senders = spec.mesh.npus if at == "controller" else spec.controllers
        super().__init__({
            "start": In(1), "i": In(link_signature(struct_layout(spec.mesh.flit.fields))),
            "expect": In(32), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "complete": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        data = self.i.payload.data
        seq = data[:SPILL_SEQ_BITS]
        npu = data[SPILL_SEQ_BITS:SPILL_SEQ_BITS + SPILL_NPU_BITS]
        ctl = data[SPILL_SEQ_BITS + SPILL_NPU_BITS:32]
        mine, sender = (ctl, npu) if self.at == "controller" else (npu, ctl)
        next_seq = Array(Signal(SPILL_SEQ_BITS, name=f"next{s}") for s in range(self.senders))
        check = data[32:32 + CHECK_BITS]
        good = Signal()
        m.d.comb += [
            good.eq((mine == self.index) & (sender < self.senders) & (self.i.payload.vc == self.vc)
                    & (seq == next_seq[sender])
                    & (check == (seq ^ (seq >> 3) ^ npu ^ ctl)[:CHECK_BITS])
                    & (self.received != self.expect)),
        ]
        count_checked_flits(m, self, valid=self.i.valid, good=good)
        with m.If(self.start):
            m.d.sync += [n.eq(0) for n in next_seq]
        with m.Elif(self.i.valid & (sender < self.senders)):
            m.d.sync += next_seq[sender].eq(seq + 1)   # resynchronise: one gap, one error
        return m
