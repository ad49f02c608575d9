"""``fred_switch``: the Fred_m(P) datapath with its configuration memory (the Verilog top)."""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import check_size
from hdl.contracts.config_port import (ERROR_WIDTH, check_port_parameters, config_word_layout, config_words,
                                  phase_index_width, select_cycles)
from hdl.contracts.flit import FlitFormat
from hdl.contracts.timing import switch_latency, switch_stages
from hdl.designs.layouts import flit_layout, struct_layout

from .config_memory import ConfigMemory
from .fred_switch import FredSwitch

__all__ = ["FredSwitchTop"]


class FredSwitchTop(wiring.Component):
    """A complete FRED switch: Fred_m(P) plus K stored phases.

    Parameters (keyword-only, all required, validated before anything is built; the defaults
    ``fred verilog`` uses live in the design registry, ``hdl.designs.registry``):
        ports: P >= 2, any (odd P: the last port's demux/mux; the test-suite checks 2..16, 3, 5,
            10, 12 and, in the full suite, 32 and 64).
        middle: m >= 2. dtype: ``fp16``/``bf16``/``fp32``/``int32``. lanes: elements per flit.
        phases: K stored configurations (1..256). tag_width: bits of the flit tag.
        word_width: configuration word bits (8..256).

    Members (Verilog ports in brackets; Amaranth joins names with ``__``):
        i: ``In(stream.Signature(flit)).array(P)`` [``i__<n>__valid/ready/payload``];
        o: ``Out(stream.Signature(flit)).array(P)`` [``o__<n>__...``]. The flit payload is
            ``data(lanes*width) last(1) tag(tag_width)``, LSB first (:class:`FlitFormat`).
        config: ``In(stream.Signature(config_word_layout(K)))`` [``config__*``]: configuration
            words ``data(32) last(1) phase``; see :class:`ConfigMemory` and ``docs/switch.md``.
        phase: ``In(stream.Signature(phase index))`` [``phase__*``]: phase select.
        busy: ``Out(1)``: flits in flight or a phase select in progress.
        error: ``Out(ERROR_WIDTH)`` (:class:`~hdl.contracts.config_port.ConfigError`).
        active_phase, active_valid, loaded: as in :class:`ConfigMemory`.

    While a phase select is pending or copying, no input flit is accepted (``i[n].ready`` low);
    a select takes effect once the datapath has drained. Flits on a port the active phase does
    not use wait (never dropped). Latency :attr:`latency` and :attr:`stages` as
    :class:`FredSwitch`; one flit per cycle per port; no combinational path from any ``ready``
    to any ``valid``.
    """

    def __new__(cls, *, ports, middle, dtype, lanes, phases, tag_width, word_width):
        # Validate before the object exists: Amaranth warns about an Elaboratable that is never
        # elaborated, which is what a rejected parameter would otherwise leave behind.
        check_size(ports, middle)
        FlitFormat(dtype=dtype, lanes=lanes, tag_width=tag_width)
        check_port_parameters(phases=phases, word_width=word_width)
        return super().__new__(cls)

    def __init__(self, *, ports: int, middle: int, dtype: str, lanes: int, phases: int,
                 tag_width: int, word_width: int):
        self.flit = FlitFormat(dtype=dtype, lanes=lanes, tag_width=tag_width)
        self.ports, self.middle, self.phases, self.word_width = ports, middle, phases, word_width
        shape = flit_layout(self.flit)
        super().__init__({
            "i": In(stream.Signature(shape)).array(ports),
            "o": Out(stream.Signature(shape)).array(ports),
            "config": In(stream.Signature(struct_layout(config_word_layout(phases, word_width)))),
            "phase": In(stream.Signature(unsigned(phase_index_width(phases)))),
            "busy": Out(1),
            "error": Out(ERROR_WIDTH),
            "active_phase": Out(phase_index_width(phases)),
            "active_valid": Out(1),
            "loaded": Out(phases),
        })

    @property
    def stages(self) -> int:
        return switch_stages(self.ports)

    @property
    def latency(self) -> int:
        return switch_latency(ports=self.ports, middle=self.middle, dtype=self.flit.dtype)

    @property
    def config_words(self) -> int:
        """Words in one configuration packet (``hdl.contracts.config_port.config_words``)."""
        return config_words(self.ports, self.middle, self.word_width)

    @property
    def select_cycles(self) -> int:
        """Cycles a phase select takes once the switch is drained
        (``hdl.contracts.config_port.select_cycles``)."""
        return select_cycles(self.ports, self.middle, self.word_width)

    def elaborate(self, platform) -> Module:
        m = Module()
        memory = m.submodules.config_memory = ConfigMemory(
            ports=self.ports, middle=self.middle, phases=self.phases, word_width=self.word_width)
        switch = m.submodules.switch = FredSwitch(ports=self.ports, middle=self.middle,
                                                  flit=self.flit)
        assert memory.select_cycles == self.select_cycles and switch.latency == self.latency
        wiring.connect(m, wiring.flipped(self.config), memory.write)
        wiring.connect(m, wiring.flipped(self.phase), memory.select)
        m.d.comb += [
            switch.modes.eq(memory.modes),
            memory.drained.eq(~switch.busy),
            self.busy.eq(switch.busy | memory.hold),
            self.error.eq(memory.error),
            self.active_phase.eq(memory.active_phase),
            self.active_valid.eq(memory.active_valid),
            self.loaded.eq(memory.loaded),
        ]
        hold = memory.hold
        for n in range(self.ports):
            m.d.comb += [
                switch.i[n].valid.eq(self.i[n].valid & ~hold),
                switch.i[n].payload.eq(self.i[n].payload),
                self.i[n].ready.eq(switch.i[n].ready & ~hold),
            ]
            wiring.connect(m, switch.o[n], wiring.flipped(self.o[n]))
        return m
