"""The reduction unit: element-wise sum of two lane-parallel streams (a + b -> o)."""

from __future__ import annotations

from amaranth.hdl import EnableInserter, Module, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.dtypes import DType, get_dtype
from hdl.contracts.errors import FredError
from hdl.contracts.timing import adder_stages, reduction_latency
from hdl.emit.hierarchy import SeparateModule
from hdl.designs.stream_buffer import StreamBuffer

from .float_adder import FloatAdder
from .formats import FloatFormat, adder_format
from .int_adder import IntAdder

__all__ = ["ReductionUnit", "MAX_LANES"]

#: Upper bound on ``lanes`` (a 512 B flit of fp16 is 256 lanes; more is surely a mistake).
MAX_LANES = 1024


class ReductionUnit(SeparateModule, wiring.Component):
    """Joins streams ``a`` and ``b`` and emits their lane-wise sum on ``o``.

    Parameters (keyword-only, validated):
        dtype: ``"fp16"``, ``"bf16"``, ``"fp32"``, ``"int32"`` (or a :class:`hdl.contracts.dtypes.DType`).
        lanes: elements per flit, 1 .. :data:`MAX_LANES`.
        sideband: ``None``, or a shape carried alongside the data (the switch passes
            the flit framing); the sum carries ``a``'s sideband, ``b``'s is ignored.

    Members:
        a, b: ``In(stream.Signature(P))``; o: ``Out(stream.Signature(P))`` where
        ``P = unsigned(lanes * width)`` (lane 0 at the LSBs) when ``sideband`` is
        ``None``, else ``StructLayout({"data": unsigned(lanes * width), "sideband": sideband})``.
        Lane ``i`` of ``o`` is ``dtype.add(a_i, b_i)`` (:mod:`hdl.contracts.dtypes`), bit for bit.

    Handshake: ``a`` and ``b`` transfer together, in the same cycle
    (``a.ready = accept & b.valid``, ``b.ready = accept & a.valid``: each ready
    depends combinationally on the other stream's valid, as the stream rules allow).
    ``accept`` is a register (the output skid buffer has room), so there is no
    combinational path from ``o.ready`` to anything; ``o.valid``/``o.payload`` are
    registers.

    Latency: :attr:`latency` cycles from the joint a/b transfer to ``o.valid`` (the
    adder pipeline plus the output register). Fully pipelined: one flit per cycle
    while ``o.ready`` is high; the pipeline stalls as a whole while the output
    buffer is full, so any backpressure is respected without loss or duplication.
    """

    def __new__(cls, *, dtype, lanes, sideband=None):
        # Validate before the object exists: a rejected unit must not be reported by Amaranth
        # as an Elaboratable that was never elaborated.
        cls._check(dtype, lanes, sideband)
        return super().__new__(cls)

    def __init__(self, *, dtype, lanes: int, sideband=None):
        self._check(dtype, lanes, sideband)
        self.dtype: DType = get_dtype(dtype)
        self.lanes = lanes
        self.sideband = sideband
        self.format = adder_format(self.dtype)
        data_shape = unsigned(lanes * self.dtype.width)
        if sideband is None:
            self.payload_shape = data_shape
        else:
            self.payload_shape = data.StructLayout({"data": data_shape, "sideband": sideband})
        super().__init__({
            "a": In(stream.Signature(self.payload_shape)),
            "b": In(stream.Signature(self.payload_shape)),
            "o": Out(stream.Signature(self.payload_shape)),
        })

    @staticmethod
    def _check(dtype, lanes, sideband) -> None:
        get_dtype(dtype)
        if not isinstance(lanes, int) or isinstance(lanes, bool):
            raise FredError(f"ReductionUnit: lanes must be an int, got {lanes!r}")
        if not 1 <= lanes <= MAX_LANES:
            raise FredError(f"ReductionUnit: lanes must be in 1..{MAX_LANES}, got {lanes}")
        if sideband is not None:
            try:
                Shape.cast(sideband)
            except TypeError as exc:
                raise FredError(f"ReductionUnit: sideband must be None or an Amaranth shape: {exc}") from None

    def _make_adder(self):
        if isinstance(self.format, FloatFormat):
            return FloatAdder(fmt=self.format)
        return IntAdder(fmt=self.format)

    @property
    def adder_latency(self) -> int:
        """Pipeline registers inside one lane's adder (``hdl.contracts.timing.adder_stages``)."""
        return adder_stages(self.dtype)

    @property
    def latency(self) -> int:
        """Cycles from the joint a/b transfer to the sum being offered on ``o``
        (``hdl.contracts.timing.reduction_latency``)."""
        return reduction_latency(self.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation: ``fred_reduction_fp16x4`` or, with a
        sideband, ``fred_reduction_fp16x4_sb9`` (its width)."""
        name = f"fred_reduction_{self.dtype.name}x{self.lanes}"
        if self.sideband is not None:
            name += f"_sb{Shape.cast(self.sideband).width}"
        return name

    @property
    def module_key(self):
        # the sideband's layout, not only its width, must agree for two units to share a module
        return (type(self).__qualname__, self.module_name, repr(self.sideband))

    def _data(self, payload):
        return payload if self.sideband is None else payload.data

    def elaborate(self, platform) -> Module:
        m = Module()
        width = self.dtype.width
        m.submodules.output_buffer = output_buffer = StreamBuffer(self.payload_shape)
        wiring.connect(m, wiring.flipped(self.o), output_buffer.o)

        # The whole pipeline advances when the output buffer can take a flit. The
        # buffer's ready is a register, so o.ready never reaches the inputs in one cycle.
        advance = output_buffer.i.ready
        m.d.comb += [
            self.a.ready.eq(advance & self.b.valid),
            self.b.ready.eq(advance & self.a.valid),
        ]

        a_data, b_data = self._data(self.a.payload), self._data(self.b.payload)
        out_data = self._data(output_buffer.i.payload)
        for lane in range(self.lanes):
            adder = EnableInserter(advance)(self._make_adder())
            m.submodules[f"lane{lane}"] = adder
            lane_bits = slice(lane * width, (lane + 1) * width)
            m.d.comb += [
                adder.a.eq(a_data[lane_bits]),
                adder.b.eq(b_data[lane_bits]),
                out_data[lane_bits].eq(adder.o),
            ]

        # valid (and sideband) travel beside the datapath through as many registers
        valid = self.a.valid & self.b.valid
        sideband = None if self.sideband is None else self.a.payload.sideband
        for stage in range(self.adder_latency):
            next_valid = Signal(name=f"valid_{stage + 1}")
            with m.If(advance):
                m.d.sync += next_valid.eq(valid)
            valid = next_valid
            if sideband is not None:
                next_sideband = Signal(self.sideband, name=f"sideband_{stage + 1}", reset_less=True)
                with m.If(advance):
                    m.d.sync += next_sideband.eq(sideband)
                sideband = next_sideband
        m.d.comb += output_buffer.i.valid.eq(valid)
        if sideband is not None:
            m.d.comb += output_buffer.i.payload.sideband.eq(sideband)
        return m
