"""A registered stream buffer ("skid buffer") with full throughput.

Used wherever a pipeline stage must cut every combinational path between its input
and output stream: ``o.valid``/``o.payload`` come straight from flip-flops and so
does ``i.ready``, yet one transfer per cycle is sustained in steady state.
"""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.timing import BUFFER_LATENCY

__all__ = ["StreamBuffer"]


class StreamBuffer(wiring.Component):
    """Two-entry registered stream buffer.

    Parameters:
        shape: payload shape (any Amaranth shape-castable, e.g. a ``StructLayout``).

    Members:
        i: ``In(stream.Signature(shape))`` -- upstream.
        o: ``Out(stream.Signature(shape))`` -- downstream.

    Latency: :attr:`latency` = 1 cycle from an input transfer to ``o.valid``.

    Throughput: one transfer per cycle whenever ``o.ready`` stays high; any
    backpressure pattern on ``o.ready`` is respected without loss or duplication.

    Backpressure assumptions: none on the upstream side beyond the stream rules
    (``i.valid`` may rise without waiting for ``i.ready``, and payload is held while
    ``valid & ~ready``). ``i.ready`` is registered: it depends only on whether the
    skid register is full, never combinationally on ``o.ready``.
    """

    def __init__(self, shape):
        self._shape = shape
        Shape.cast(shape)  # fail early on a non-shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    @property
    def shape(self):
        return self._shape

    @property
    def latency(self) -> int:
        """Cycles from an input transfer to the same payload being offered on ``o``
        (``hdl.contracts.timing.BUFFER_LATENCY``)."""
        return BUFFER_LATENCY

    def elaborate(self, platform) -> Module:
        m = Module()
        # The skid register catches the one payload accepted while the output stalled:
        # i.ready was already high (registered) when o.ready dropped.
        skid_payload = Signal(self._shape, name="skid_payload")
        skid_valid = Signal(name="skid_valid")

        m.d.comb += self.i.ready.eq(~skid_valid)
        output_free = ~self.o.valid | self.o.ready

        with m.If(output_free):
            with m.If(skid_valid):
                m.d.sync += [
                    self.o.payload.eq(skid_payload),
                    self.o.valid.eq(1),
                    skid_valid.eq(0),
                ]
            with m.Else():
                m.d.sync += self.o.valid.eq(self.i.valid)
                with m.If(self.i.valid):
                    m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += [
                skid_payload.eq(self.i.payload),
                skid_valid.eq(1),
            ]
        return m
