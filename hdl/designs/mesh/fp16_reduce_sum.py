"""An NPU's fp16 sum in a reduce-out: its children's partial sums and its own value added in a
fixed order, whatever order the children's flits arrived in (docs/mesh_rtl.md, "Gradient
reduce-out", fp16)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh_io import FP16_REDUCE_LEVELS
from hdl.designs.reduction.float_adder import FloatAdder
from hdl.designs.reduction.formats import adder_format

__all__ = ["Fp16ReduceSum"]


class Fp16ReduceSum(wiring.Component):
    """``o_value = ((slots[0] + slots[1]) + (slots[2] + slots[3])) + own`` in fp16, with the
    project's bit-exact pipelined adder (``hdl.designs.reduction.float_adder.FloatAdder``), the
    order the golden model ``hdl.compiler.mesh_io_program.store_fp16_sums`` uses. Slots are
    the children's sums by the direction they arrived from (N, E, S, W); an absent child's
    slot is +0.

    Parameters: tag_width (bits of ``tag``, carried alongside).

    Members: ``valid``, ``slots`` (In(16).array(4)), ``own`` (In(16)), ``tag`` (In(tag_width));
    ``o_valid``, ``o_value`` (Out(16)), ``o_tag``: the sum of the inputs of :attr:`latency`
    cycles earlier. Latency: :data:`FP16_REDUCE_LEVELS` x ``FloatAdder.latency`` = 18 cycles;
    a new sum may enter every cycle, and the pipeline never stalls (the caller takes every
    result).
    """

    latency = FP16_REDUCE_LEVELS * FloatAdder.latency

    def __init__(self, *, tag_width: int):
        if isinstance(tag_width, bool) or not isinstance(tag_width, int) or tag_width < 1:
            raise FredError(f"Fp16ReduceSum needs a tag width >= 1, got {tag_width!r}")
        self.tag_width = tag_width
        super().__init__({"valid": In(1), "slots": In(16).array(4), "own": In(16), "tag": In(tag_width),
                          "o_valid": Out(1), "o_value": Out(16), "o_tag": Out(tag_width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        fmt = adder_format("fp16")
        pairs = (FloatAdder(fmt=fmt), FloatAdder(fmt=fmt))       # (N + E), (S + W)
        m.submodules.pair0, m.submodules.pair1 = pairs
        both = m.submodules.both = FloatAdder(fmt=fmt)
        total = m.submodules.total = FloatAdder(fmt=fmt)
        step = FloatAdder.latency
        own = self._delay(m, self.own, 2 * step, "own")
        m.d.comb += [pairs[0].a.eq(self.slots[0]), pairs[0].b.eq(self.slots[1]),
                     pairs[1].a.eq(self.slots[2]), pairs[1].b.eq(self.slots[3]),
                     both.a.eq(pairs[0].o), both.b.eq(pairs[1].o),
                     total.a.eq(both.o), total.b.eq(own),
                     self.o_value.eq(total.o),
                     self.o_valid.eq(self._delay(m, self.valid, self.latency, "valid")),
                     self.o_tag.eq(self._delay(m, self.tag, self.latency, "tag"))]
        return m

    @staticmethod
    def _delay(m: Module, value, cycles: int, name: str) -> Signal:
        """``value`` ``cycles`` registers later (a shift register)."""
        for i in range(cycles):
            reg = Signal(len(value), name=f"{name}_d{i + 1}")
            m.d.sync += reg.eq(value)
            value = reg
        return value
