"""Fred_m(P): the recursive switch datapath (no configuration storage; see FredSwitchTop)."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.base.compiler.encoding import check_size, config_bits, layout
from hdl.base.flit import FlitFormat
from hdl.base.timing import switch_latency, switch_stages
from hdl.layouts import flit_layout

from .input_microswitch import InputMicroswitch
from .output_microswitch import OutputMicroswitch
from .rd_microswitch import RDMicroswitch

__all__ = ["FredSwitch"]


class FredSwitch(wiring.Component):
    """Fred_m(P) built recursively from input, output and RD microswitches.

    Parameters (keyword-only, validated):
        ports: P, a power of two >= 2.
        middle: m >= 2 middle subnetworks.
        flit: :class:`~hdl.base.flit.FlitFormat` (dtype, lanes, tag width).

    Members:
        i: ``In(stream.Signature(flit.layout)).array(P)``; o: ``Out(...).array(P)``.
        config: ``In(config_bits(P, m))``, the active configuration vector
            (``hdl.base.compiler.encoding.SwitchConfig.to_int()``); it must be legal and change
            only while ``busy`` is low.
        busy: ``Out(1)``: some flit is inside (the switch is not drained).

    Structure: r = P/2 input microswitches ``in[u]``, m middle subnetworks ``mid[k]`` (each a
    Fred_m(r)), r output microswitches ``out[v]``; Fred_m(2) is one RD microswitch. Wire k
    of ``in[u]`` is sub-port u of ``mid[k]``; sub-port v of ``mid[k]`` is wire k of ``out[v]``.

    Latency: every port-to-port path crosses :attr:`stages` = 2 log2(P) - 1 microswitches and
    takes :attr:`latency` cycles regardless of the modes: log2(P) input/RD stages of
    (reduction latency + 1) and log2(P) - 1 output stages of 1. One flit per cycle per port.
    """

    def __init__(self, *, ports: int, middle: int, flit: FlitFormat):
        check_size(ports, middle)
        if not isinstance(flit, FlitFormat):
            raise TypeError(f"flit must be a FlitFormat, got {type(flit).__name__}")
        self.ports = ports
        self.middle = middle
        self.flit = flit
        shape = flit_layout(flit)
        super().__init__({
            "i": In(stream.Signature(shape)).array(ports),
            "o": Out(stream.Signature(shape)).array(ports),
            "config": In(config_bits(ports, middle)),
            "busy": Out(1),
        })

    @property
    def config_bits(self) -> int:
        return config_bits(self.ports, self.middle)

    @property
    def stages(self) -> int:
        """Microswitches on every port-to-port path: 2 log2(P) - 1."""
        return switch_stages(self.ports)

    @property
    def latency(self) -> int:
        """Cycles from a flit's transfer on ``i[*]`` to the result being offered on ``o[*]``
        (no backpressure), the same for every path and configuration
        (``hdl.base.timing.switch_latency``)."""
        return switch_latency(ports=self.ports, middle=self.middle, dtype=self.flit.dtype)

    def elaborate(self, platform) -> Module:
        m = Module()
        flit, middle = self.flit, self.middle
        if self.ports == 2:
            rd = m.submodules.rd = RDMicroswitch(flit=flit)
            wiring.connect(m, wiring.flipped(self.i[0]), rd.in0)
            wiring.connect(m, wiring.flipped(self.i[1]), rd.in1)
            wiring.connect(m, rd.out0, wiring.flipped(self.o[0]))
            wiring.connect(m, rd.out1, wiring.flipped(self.o[1]))
            m.d.comb += [rd.mode.eq(self.config), self.busy.eq(rd.busy)]
            return m

        r = self.ports // 2
        inputs = [InputMicroswitch(flit=flit, middle=middle) for _ in range(r)]
        mids = [FredSwitch(ports=r, middle=middle, flit=flit) for _ in range(middle)]
        outputs = [OutputMicroswitch(flit=flit, middle=middle) for _ in range(r)]
        assert (inputs[0].latency + mids[0].latency + outputs[0].latency) == self.latency
        slots = {slot.name: slot for slot in layout(self.ports, self.middle)}
        mid_bits = config_bits(r, self.middle)
        busy = []
        for u, ms in enumerate(inputs):
            m.submodules[f"in{u}"] = ms
            slot = slots[f"in[{u}]"]
            m.d.comb += ms.mode.eq(self.config[slot.offset:slot.offset + slot.width])
            wiring.connect(m, wiring.flipped(self.i[2 * u]), ms.in0)
            wiring.connect(m, wiring.flipped(self.i[2 * u + 1]), ms.in1)
            busy.append(ms.busy)
        for k, sub in enumerate(mids):
            m.submodules[f"mid{k}"] = sub
            first = slots[f"mid[{k}].in[0]" if r > 2 else f"mid[{k}].rd"].offset
            m.d.comb += sub.config.eq(self.config[first:first + mid_bits])
            for u in range(r):
                wiring.connect(m, inputs[u].wire[k], sub.i[u])
            busy.append(sub.busy)
        for v, ms in enumerate(outputs):
            m.submodules[f"out{v}"] = ms
            slot = slots[f"out[{v}]"]
            m.d.comb += ms.mode.eq(self.config[slot.offset:slot.offset + slot.width])
            for k, sub in enumerate(mids):
                wiring.connect(m, sub.o[v], ms.wire[k])
            wiring.connect(m, ms.out0, wiring.flipped(self.o[2 * v]))
            wiring.connect(m, ms.out1, wiring.flipped(self.o[2 * v + 1]))
            busy.append(ms.busy)
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m
