"""Properties of :class:`~hdl.designs.switch.config_memory.ConfigMemory` and its checker: a bad
packet changes nothing that matters.

Switch Fred_2(2) (one RD microswitch, 4 configuration bits), 3 slots (so a slot index can be out
of range), 8-bit words (one word per packet, 4 padding bits). The harness reads the write and
select streams as the docstring defines them and keeps its own model: which slots hold a
complete legal configuration (legality written here again: no RD output sums while the other
passes an input; padding zero) and what each holds, and the active configuration. Asserted:

* ``loaded`` equals the model at every cycle: a slot is unloaded from the first word of a packet
  to it and loaded two cycles after the last word of a good packet (word count, one slot index
  < K throughout, legal modes) and never otherwise;
* ``modes`` equals the model's active configuration at every cycle: all zero after reset and
  replaced only by a select that takes effect, with the content of the last good packet to that
  slot (so a bad packet to any slot, or one that changes slot mid-way, corrupts nothing);
* ``modes`` changes only while ``hold`` was high (the switch was told to stop accepting flits).

Engine: BMC (the memory's contents are state the interface shows only through a select).
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Signal

from hdl.contracts.encoding import RD_IN0, RD_IN1, RD_SUM
from hdl.designs.switch import config_memory
from hdl.designs.switch.config_memory import ConfigMemory

from .checks import fire, free_stream_input
from .proof import Mutation, Proof, build, harness_module

__all__ = ["PROOFS", "config_memory_harness"]

PORTS, MIDDLE, PHASES, WORD = 2, 2, 3, 8
BITS = 4   # config_bits(2, 2): out0(2) out1(2)


def _legal(word):
    outs = (word[0:2], word[2:4])
    sums = (outs[0] == RD_SUM) | (outs[1] == RD_SUM)
    passes = (outs[0] == RD_IN0) | (outs[0] == RD_IN1) | (outs[1] == RD_IN0) | (outs[1] == RD_IN1)
    return ~(sums & passes) & (word[BITS:] == 0)


def _checker_accepts_all(checker, m):
    m.d.comb += checker.legal.eq(1)


def _hold_only_while_select(memory, m):
    m.d.comb += memory.hold.eq(0)


def _keeps_loaded(memory, m):
    m.d.comb += memory.loaded.eq((1 << PHASES) - 1)


MUTANTS = {
    "checker_accepts_all": Mutation("the checker calls every configuration legal",
                                    submodule=(config_memory, "ConfigChecker", _checker_accepts_all)),
    "no_hold": Mutation("hold stuck low: the switch is not stopped while the active set is copied",
                        design=_hold_only_while_select),
    "all_loaded": Mutation("loaded reports every slot as loaded", design=_keeps_loaded),
}


def config_memory_harness(mutant=None):
    m = harness_module()
    memory, fragment = build(ConfigMemory, MUTANTS.get(mutant), ports=PORTS, middle=MIDDLE,
                             phases=PHASES, word_width=WORD)
    m.submodules.dut = fragment
    assert memory.words == 1 and memory.bits == BITS
    free_stream_input(m, memory.write, name="write")
    free_stream_input(m, memory.select, name="select")
    m.d.comb += memory.drained.eq(AnySeq(1))
    word = memory.write.payload

    # ---- the model -----------------------------------------------------------------------
    in_packet = Signal()
    first_data = Signal(WORD)
    expected = [Signal(WORD, name=f"slot{k}_expected") for k in range(PHASES)]
    loaded = [Signal(name=f"slot{k}_loaded") for k in range(PHASES)]
    done_good = Signal()              # a good packet's last word was last cycle
    done_phase = Signal(2)
    active = Signal(WORD)

    first = ~in_packet
    # N = 1: a good packet is one word, first and last, slot < K, legal
    good = first & word.last & (word.phase < PHASES) & _legal(word.data)
    m.d.sync += done_good.eq(0)
    with m.If(done_good):        # the checker's cycle; loaded the cycle after
        for k in range(PHASES):
            with m.If(done_phase == k):
                m.d.sync += [loaded[k].eq(1), expected[k].eq(first_data)]
    with m.If(fire(memory.write)):
        m.d.sync += in_packet.eq(~word.last)
        with m.If(first):
            m.d.sync += first_data.eq(word.data)
            for k in range(PHASES):
                with m.If(word.phase == k):
                    m.d.sync += loaded[k].eq(0)   # a new packet wins over a check finishing
        with m.If(good):
            m.d.sync += [done_good.eq(1), done_phase.eq(word.phase)]
    # select: takes effect when it completes on a loaded slot
    target = memory.select.payload
    target_loaded = Signal()
    for k in range(PHASES):
        with m.If(target == k):
            m.d.comb += target_loaded.eq(loaded[k])
    with m.If(fire(memory.select) & (target < PHASES) & target_loaded):
        for k in range(PHASES):
            with m.If(target == k):
                m.d.sync += active.eq(expected[k])

    # ---- properties ----------------------------------------------------------------------
    m.d.comb += Assert(memory.modes == active[:BITS], "modes differ from the last selected good configuration")
    for k in range(PHASES):
        m.d.comb += Assert(memory.loaded[k] == loaded[k], f"slot {k}: loaded differs from the model")
    prev_modes = Signal(BITS)
    prev_hold = Signal()
    m.d.sync += [prev_modes.eq(memory.modes), prev_hold.eq(memory.hold)]
    m.d.comb += Assert((memory.modes == prev_modes) | prev_hold, "modes changed while hold was low")
    for k in range(PHASES):
        m.d.comb += Cover(fire(memory.select) & (target == k) & target_loaded & (expected[k][:BITS] != 0))
    m.d.comb += Cover(fire(memory.write) & word.last & ~good & (word.phase < PHASES))   # a bad packet
    return m


PROOFS = [
    Proof(name="config_memory.bad_packets", build=config_memory_harness, mode="bmc", depth=10,
          mutants=MUTANTS, quick=True, why_bounded="the memory's contents are hidden state, seen only through "
          "a select; 10 cycles hold a bad and a good packet, a select and its copy"),
    Proof(name="config_memory.cover", build=config_memory_harness, mode="cover", depth=10),
]
