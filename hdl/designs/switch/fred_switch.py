"""Fred_m(P): the recursive switch datapath (no configuration storage; see FredSwitchTop)."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import check_size, config_bits, layout, wire_bits
from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import switch_latency, switch_stages
from hdl.emit.hierarchy import SeparateModule, flit_suffix
from hdl.designs.layouts import flit_layout

from .demux import Demux
from .input_microswitch import InputMicroswitch
from .mux import Mux
from .output_microswitch import OutputMicroswitch
from .rd_microswitch import RDMicroswitch

__all__ = ["FredSwitch"]


class FredSwitch(SeparateModule, wiring.Component):
    """Fred_m(P) built recursively from input, output and RD microswitches.

    Parameters (keyword-only, validated):
        ports: P >= 2 (any; ``hdl.contracts.encoding.check_size``).
        middle: m >= 2 middle subnetworks.
        flit: :class:`~hdl.contracts.flit.FlitFormat` (dtype, lanes, tag width).

    Members:
        i: ``In(stream.Signature(flit.layout)).array(P)``; o: ``Out(...).array(P)``.
        modes: ``In(config_bits(P, m))``, the active configuration vector
            (``hdl.contracts.encoding.SwitchConfig.to_int()``); it must be legal and change
            only while ``busy`` is low.
        busy: ``Out(1)``: some flit is inside (the switch is not drained).
        route: ``In(wire_bits(m)).array(P)``, use_route: ``In(1)`` (only ``routed``, P >= 3):
            while ``use_route``, the top level's input microswitches and demux take every
            input and send each passed flit to the wire ``route[n]`` named when it entered
            (carried through their delay lines), whatever the modes' input fields say; the
            modes still drive everything else. So an input may change its first wire between
            two packets while the previous one is still inside (the packet switch's online
            paths, ``docs/switch.md``, "Online unicast routing"). Without ``use_route`` the
            switch behaves as one built without ``routed``.

    Structure (the compiler's, ``hdl.contracts.encoding.layout``): r = floor(P/2) input
    microswitches ``in[u]``, m middle subnetworks ``mid[k]`` (each a Fred_m(ceil(P/2))), r output
    microswitches ``out[v]``; Fred_m(2) is one RD microswitch. Wire k of ``in[u]`` is sub-port u
    of ``mid[k]``; sub-port v of ``mid[k]`` is wire k of ``out[v]``. Odd P = 2r + 1 adds a
    :class:`Demux` for port 2r (wire k = sub-port r of ``mid[k]``) and a :class:`Mux` (port 2r
    takes sub-port r of one ``mid[k]``); Fred_m(3) is in[0], demux, m RD microswitches, out[0],
    mux.

    Latency: every port-to-port path crosses :attr:`stages` = 2 ceil(log2 P) - 1 microswitches
    and takes :attr:`latency` cycles regardless of the modes: ceil(log2 P) input/RD/demux stages
    of (reduction latency + 1) and ceil(log2 P) - 1 output/mux stages of 1 (the demux and mux
    are delay-matched to the microswitches beside them). One flit per cycle per port.
    """

    def __init__(self, *, ports: int, middle: int, flit: FlitFormat, routed: bool = False):
        check_size(ports, middle)
        if not isinstance(flit, FlitFormat):
            raise TypeError(f"flit must be a FlitFormat, got {type(flit).__name__}")
        if routed and ports < 3:
            raise FredError(f"a routed Fred_m(P) needs P >= 3 (input microswitches at its top "
                            f"level), got P = {ports}")
        self.ports = ports
        self.middle = middle
        self.flit = flit
        self.routed = bool(routed)
        shape = flit_layout(flit)
        routes = {}
        if self.routed:
            routes = {"route": In(wire_bits(middle)).array(ports), "use_route": In(1)}
        super().__init__({
            **routes,
            "i": In(stream.Signature(shape)).array(ports),
            "o": Out(stream.Signature(shape)).array(ports),
            # not `config`: a Verilog keyword, which Verilator's hierarchical blocks cannot
            # have as a port name (cocotb_tests.runner.hierarchical_blocks)
            "modes": In(config_bits(ports, middle)),
            "busy": Out(1),
        })

    @property
    def config_bits(self) -> int:
        return config_bits(self.ports, self.middle)

    @property
    def stages(self) -> int:
        """Microswitches on every port-to-port path: 2 ceil(log2 P) - 1."""
        return switch_stages(self.ports)

    @property
    def latency(self) -> int:
        """Cycles from a flit's transfer on ``i[*]`` to the result being offered on ``o[*]``
        (no backpressure), the same for every path and configuration
        (``hdl.contracts.timing.switch_latency``)."""
        return switch_latency(ports=self.ports, middle=self.middle, dtype=self.flit.dtype)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation: ``fred_m3_p16_fp16x4_t8`` is a Fred_3(16)
        level for fp16 x 4 lanes and 8-bit tags."""
        routed = "_routed" if self.routed else ""
        return f"fred_m{self.middle}_p{self.ports}_{flit_suffix(self.flit)}{routed}"

    def elaborate(self, platform) -> Module:
        m = Module()
        flit, middle = self.flit, self.middle
        if self.ports == 2:
            rd = m.submodules.rd = RDMicroswitch(flit=flit)
            wiring.connect(m, wiring.flipped(self.i[0]), rd.in0)
            wiring.connect(m, wiring.flipped(self.i[1]), rd.in1)
            wiring.connect(m, rd.out0, wiring.flipped(self.o[0]))
            wiring.connect(m, rd.out1, wiring.flipped(self.o[1]))
            m.d.comb += [rd.mode.eq(self.modes), self.busy.eq(rd.busy)]
            return m

        r, odd = self.ports // 2, self.ports % 2
        sub_ports = r + odd   # middles are Fred_m(ceil(P/2)); odd P's last sub-port is the demux's
        routed = self.routed
        inputs = [InputMicroswitch(flit=flit, middle=middle, routed=routed) for _ in range(r)]
        mids = [FredSwitch(ports=sub_ports, middle=middle, flit=flit) for _ in range(middle)]
        outputs = [OutputMicroswitch(flit=flit, middle=middle) for _ in range(r)]
        assert (inputs[0].latency + mids[0].latency + outputs[0].latency) == self.latency
        slots = {slot.name: slot for slot in layout(self.ports, self.middle)}
        mid_bits = config_bits(sub_ports, self.middle)

        def mode_bits(name):
            slot = slots[name]
            return self.modes[slot.offset:slot.offset + slot.width]

        busy = []
        for u, ms in enumerate(inputs):
            m.submodules[f"in{u}"] = ms
            m.d.comb += ms.mode.eq(mode_bits(f"in[{u}]"))
            if routed:
                self._route_lanes(m, ms.mode, [(ms.route0, 2 * u, "in0_"), (ms.route1, 2 * u + 1, "in1_")])
            wiring.connect(m, wiring.flipped(self.i[2 * u]), ms.in0)
            wiring.connect(m, wiring.flipped(self.i[2 * u + 1]), ms.in1)
            busy.append(ms.busy)
        if odd:
            demux = m.submodules.demux = Demux(flit=flit, middle=middle, routed=routed)
            assert demux.latency == inputs[0].latency
            m.d.comb += demux.mode.eq(mode_bits("demux"))
            if routed:
                self._route_lanes(m, demux.mode, [(demux.route, 2 * r, "")])
            wiring.connect(m, wiring.flipped(self.i[2 * r]), demux.port)
            busy.append(demux.busy)
        for k, sub in enumerate(mids):
            m.submodules[f"mid{k}"] = sub
            first = slots[f"mid[{k}].in[0]" if sub_ports > 2 else f"mid[{k}].rd"].offset
            m.d.comb += sub.modes.eq(self.modes[first:first + mid_bits])
            for u in range(r):
                wiring.connect(m, inputs[u].wire[k], sub.i[u])
            if odd:
                wiring.connect(m, demux.wire[k], sub.i[r])
            busy.append(sub.busy)
        for v, ms in enumerate(outputs):
            m.submodules[f"out{v}"] = ms
            m.d.comb += ms.mode.eq(mode_bits(f"out[{v}]"))
            for k, sub in enumerate(mids):
                wiring.connect(m, sub.o[v], ms.wire[k])
            wiring.connect(m, ms.out0, wiring.flipped(self.o[2 * v]))
            wiring.connect(m, ms.out1, wiring.flipped(self.o[2 * v + 1]))
            busy.append(ms.busy)
        if odd:
            mux = m.submodules.mux = Mux(flit=flit, middle=middle)
            assert mux.latency == outputs[0].latency
            m.d.comb += mux.mode.eq(mode_bits("mux"))
            for k, sub in enumerate(mids):
                wiring.connect(m, sub.o[r], mux.wire[k])
            wiring.connect(m, mux.port, wiring.flipped(self.o[2 * r]))
            busy.append(mux.busy)
        m.d.comb += self.busy.eq(Cat(*busy).any())
        return m

    def _route_lanes(self, m, mode, lanes):
        """A routed top-level microswitch's lanes: (its route input, port, mode field prefix).
        With ``use_route`` every lane is enabled (the packet switch lets a flit in only on a
        path) and takes ``route[port]``; else the modes' enable and wire, as unrouted."""
        for route, port, prefix in lanes:
            en, wire = getattr(mode, prefix + "en"), getattr(mode, prefix + "wire")
            with m.If(self.use_route):
                m.d.comb += [route.eq(self.route[port]), en.eq(1)]
            with m.Else():
                m.d.comb += route.eq(wire)
