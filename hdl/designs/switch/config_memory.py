"""Configuration storage of the switch: K phases, a write port, and a drained-only phase select."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Cat, Mux, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import DEFAULT_WORD_WIDTH, check_size, config_bits
from hdl.contracts.config_port import (ERROR_WIDTH, ConfigError, check_port_parameters, config_word_layout,
                                  config_words, phase_index_width, select_cycles)
from hdl.emit.hierarchy import SeparateModule
from hdl.designs.layouts import struct_layout

from .config_checker import ConfigChecker

__all__ = ["ConfigMemory"]


class ConfigMemory(SeparateModule, wiring.Component):
    """Holds ``phases`` configurations of Fred_m(P) and drives the active one.

    Parameters (keyword-only, validated):
        ports, middle: the switch size; phases: K >= 1 slots; word_width: bits per word (32).

    Members:
        write: ``In(stream.Signature(config_word_layout(K)))`` (``hdl.contracts.config_port``). A *packet* loads one slot: the
            N = ceil(config_bits / word_width) words of ``SwitchConfig.encode()`` in order, every
            word carrying the slot in ``phase``, ``last`` set on word N-1. The slot is unloaded
            from the first word on; one cycle after ``last`` the packet is checked (word count,
            slot index, every mode legal and canonical, padding zero) and the slot becomes
            loaded, or ``error`` reports why not. Never blocked except during a select's copy.
        select: ``In(stream.Signature(unsigned(phase_index_width(K))))``: make a slot active.
            While ``select.valid`` is high, ``hold`` asks the switch to stop accepting flits;
            the select waits (``ready`` low) until ``drained`` and no packet is being written
            or checked, then copies the slot into the active register (N + 2 cycles in all) and
            completes (``ready`` high for one cycle). A select that cannot take effect does not
            wait for the datapath: an out-of-range slot completes at once (``BAD_PHASE``), a
            slot that is not loaded as soon as no packet is being written, checked or offered
            (``NOT_LOADED``; at once when the write port is idle). Either leaves the active
            phase unchanged.
        drained: ``In(1)``: the datapath holds no flit.
        hold: ``Out(1)``: a select is pending or copying; the switch must accept no flit.
        modes: ``Out(config_bits)``: the active configuration (all zero = idle after reset).
        active_phase: ``Out(phase_index_width(K))``: the slot of the most recent select that
            took effect (it changes in the cycle after that select's ``ready``); active_valid:
            ``Out(1)``: 0 after reset until a first select takes effect, then 1 for good. A later
            select's copy does not lower it: while the active register holds parts of two
            configurations the datapath is empty and ``hold`` keeps it so, so no flit can see
            the mixture, and a host that polls ``active_valid`` to know whether the switch has
            a configuration at all must not see it flicker.
        loaded: ``Out(K)``: slot k holds a complete, legal configuration.
        error: ``Out(ERROR_WIDTH)``: :class:`ConfigError` of the most recent failure; cleared by
            the next packet that loads or select that takes effect.

    Storage: a ``K * N`` x ``word_width`` memory plus two ``N * word_width`` registers (the
    staging copy that is checked, and the active configuration), and the checker's verdict on
    the packet (one flip-flop, taken with its last word: the legality check is evaluated in
    that word's cycle only, not every cycle; the verdict is that of the staging register the
    check stage sees, so no cycle or value changes).
    """

    def __init__(self, *, ports: int, middle: int, phases: int, word_width: int = DEFAULT_WORD_WIDTH):
        check_size(ports, middle)
        check_port_parameters(phases=phases, word_width=word_width)
        self.ports, self.middle, self.phases, self.word_width = ports, middle, phases, word_width
        self.bits = config_bits(ports, middle)
        self.words = config_words(ports, middle, word_width)
        pw = phase_index_width(phases)
        super().__init__({
            "write": In(stream.Signature(struct_layout(config_word_layout(phases, word_width)))),
            "select": In(stream.Signature(unsigned(pw))),
            "drained": In(1),
            "hold": Out(1),
            "modes": Out(self.bits),
            "active_phase": Out(pw),
            "active_valid": Out(1),
            "loaded": Out(phases),
            "error": Out(ERROR_WIDTH),
        })

    @property
    def select_cycles(self) -> int:
        """Cycles a select takes once the switch is drained (``hdl.contracts.config_port.select_cycles``)."""
        return select_cycles(self.ports, self.middle, self.word_width)

    @property
    def module_name(self) -> str:
        """Verilog module of hierarchical generation, e.g. ``fred_config_memory_m3_p16_k4_w32``."""
        return (f"fred_config_memory_m{self.middle}_p{self.ports}_k{self.phases}"
                f"_w{self.word_width}")

    def elaborate(self, platform) -> Module:
        m = Module()
        K, N, wb = self.phases, self.words, self.word_width
        pw = phase_index_width(K)
        mem = m.submodules.memory = Memory(shape=unsigned(wb), depth=K * N, init=[])
        write_port = mem.write_port()
        read_port = mem.read_port()
        checker = m.submodules.checker = ConfigChecker(ports=self.ports, middle=self.middle,
                                                       width=N * wb)

        staging = Signal(N * wb)
        active = Signal(N * wb)
        loaded = Signal(K)
        error = Signal(ERROR_WIDTH)
        # The checker reads the staging register as it will be after the packet's last word
        # (the shift below), and its verdict is registered with that word: the check stage
        # one cycle later reads the same verdict it would compute from the shifted staging
        # register, and the checker's logic has one reader, inside that word's branch, so a
        # cycle-based simulator evaluates it only then (Verilator: one `if` instead of the
        # whole legality check every cycle; docs/fabric_rtl.md, "Simulation speed").
        shifted = Signal(N * wb)
        legal = Signal()
        m.d.comb += [self.modes.eq(active[:self.bits]), self.loaded.eq(loaded),
                     self.error.eq(error), checker.modes.eq(shifted)]

        # ---- write path ------------------------------------------------------------------
        in_packet = Signal()
        packet_phase = Signal(pw)
        packet_bad = Signal()          # a word had an out-of-range or changed phase
        words_seen = Signal(range(N + 2))  # saturates at N + 1 (too long)
        check_pending = Signal()
        check_phase = Signal(pw)
        copying = Signal()

        # Check stage first: a new packet starting in the same cycle must win on `loaded`.
        with m.If(check_pending):
            m.d.sync += check_pending.eq(0)
            with m.If(legal):
                m.d.sync += error.eq(ConfigError.NONE)
                for k in range(K):  # a loop, not bit_select: K need not be a power of two
                    with m.If(check_phase == k):
                        m.d.sync += loaded[k].eq(1)
            with m.Else():
                m.d.sync += error.eq(ConfigError.ILLEGAL_MODE)

        word = self.write.payload
        first = ~in_packet
        phase = Mux(first, word.phase, packet_phase)
        phase_ok = (word.phase < K) & (first | (word.phase == packet_phase))
        bad = (packet_bad & ~first) | ~phase_ok
        index = Mux(first, 0, words_seen)
        count = Signal(range(N + 2))
        m.d.comb += [
            shifted.eq(Cat(staging[wb:], word.data) if N > 1 else word.data),
            count.eq(Mux(index == N + 1, N + 1, index + 1)),
            self.write.ready.eq(~copying),
            write_port.addr.eq(phase * N + index),
            write_port.data.eq(word.data),
        ]
        with m.If(self.write.valid & self.write.ready):
            m.d.comb += write_port.en.eq(~bad & (index < N))
            with m.If(index < N):
                m.d.sync += staging.eq(shifted)
            m.d.sync += [words_seen.eq(count), packet_bad.eq(bad)]
            with m.If(first):
                m.d.sync += packet_phase.eq(word.phase)
                for k in range(K):
                    with m.If(word.phase == k):
                        m.d.sync += loaded[k].eq(0)
            with m.If(word.last):
                m.d.sync += in_packet.eq(0)
                with m.If(bad):
                    m.d.sync += error.eq(ConfigError.BAD_PHASE)
                with m.Elif(count != N):
                    m.d.sync += error.eq(ConfigError.WORD_COUNT)
                with m.Else():
                    m.d.sync += [check_pending.eq(1), check_phase.eq(phase), legal.eq(checker.legal)]
            with m.Else():
                m.d.sync += in_packet.eq(1)

        # ---- select path -----------------------------------------------------------------
        m.d.comb += self.hold.eq(self.select.valid | copying)
        target = self.select.payload
        issued = Signal(range(N + 1))
        received = Signal(range(N + 1))
        read_valid = Signal()
        m.d.comb += read_port.addr.eq(target * N + issued)
        with m.If(~copying):
            # A packet being written or checked may be loading the target: decide once it is
            # done. A select that fails does not wait for the datapath to drain.
            write_quiet = ~in_packet & ~check_pending & ~self.write.valid
            with m.If(self.select.valid):
                with m.If(target >= K):
                    m.d.comb += self.select.ready.eq(1)
                    m.d.sync += error.eq(ConfigError.BAD_PHASE)
                with m.Elif(write_quiet & ~(loaded >> target)[0]):
                    m.d.comb += self.select.ready.eq(1)
                    m.d.sync += error.eq(ConfigError.NOT_LOADED)
                with m.Elif(write_quiet & self.drained):
                    # active_valid stays as it is (see the class docstring)
                    m.d.sync += [copying.eq(1), issued.eq(0), received.eq(0), read_valid.eq(0)]
        with m.Else():
            # Issue N reads (the read port returns data one cycle later); shift each word in.
            with m.If(issued < N):
                m.d.comb += read_port.en.eq(1)
                m.d.sync += issued.eq(issued + 1)
            m.d.sync += read_valid.eq(issued < N)
            with m.If(read_valid):
                m.d.sync += [active.eq(Cat(active[wb:], read_port.data) if N > 1 else read_port.data),
                             received.eq(received + 1)]
                with m.If(received == N - 1):
                    m.d.comb += self.select.ready.eq(1)
                    m.d.sync += [copying.eq(0), self.active_phase.eq(target),
                                 self.active_valid.eq(1), error.eq(ConfigError.NONE)]
        return m
