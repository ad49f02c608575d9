"""A stream pipeline of fixed latency, used to match the reduction unit's latency on pass paths."""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

__all__ = ["DelayLine"]


class DelayLine(wiring.Component):
    """``depth`` registered stages; an input transfer is offered on ``o`` exactly ``depth`` cycles later.

    Parameters:
        shape: payload shape.
        depth: number of register stages (0 = a wire).

    Members:
        i: ``In(stream.Signature(shape))``; o: ``Out(stream.Signature(shape))``.
        busy: ``Out(1)``, high while any stage holds a flit.

    Latency: :attr:`latency` = ``depth``. Throughput: one flit per cycle; a stage accepts when
    it is empty or its successor accepts (bubbles collapse), so ``i.ready`` depends
    combinationally on ``o.ready`` (a ready-to-ready path) but ``o.valid`` is a register.
    """

    def __init__(self, shape, *, depth: int):
        if not isinstance(depth, int) or depth < 0:
            raise FredError(f"delay line depth must be an integer >= 0, got {depth!r}")
        Shape.cast(shape)
        self._shape = shape
        self._depth = depth
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        return self._depth

    def elaborate(self, platform) -> Module:
        m = Module()
        if self._depth == 0:
            m.d.comb += [
                self.o.valid.eq(self.i.valid),
                self.o.payload.eq(self.i.payload),
                self.i.ready.eq(self.o.ready),
            ]
            return m
        valids = [Signal(name=f"stage{k}_valid") for k in range(self._depth)]
        payloads = [Signal(self._shape, name=f"stage{k}_payload") for k in range(self._depth)]
        readies = [Signal(name=f"stage{k}_ready") for k in range(self._depth)]
        for k in range(self._depth):
            next_ready = self.o.ready if k == self._depth - 1 else readies[k + 1]
            m.d.comb += readies[k].eq(~valids[k] | next_ready)
            prev_valid = self.i.valid if k == 0 else valids[k - 1]
            prev_payload = self.i.payload if k == 0 else payloads[k - 1]
            with m.If(readies[k]):
                m.d.sync += valids[k].eq(prev_valid)
                with m.If(prev_valid):
                    m.d.sync += payloads[k].eq(prev_payload)
        m.d.comb += [
            self.i.ready.eq(readies[0]),
            self.o.valid.eq(valids[-1]),
            self.o.payload.eq(payloads[-1]),
            self.busy.eq(Cat(*valids).any()),
        ]
        return m
