"""Properties of the packet switch's shared stored flows
(:class:`~hdl.designs.switch.shared_flows.SharedFlows`), with the hand-over behind (``dtype``).

Small instance: Fred_2(3) (an input microswitch, the demux, two RD microswitches, the output
microswitch and the mux: 21 configuration bits, three 8-bit words per slot), K = 3 slots, two
flow ids, int32 (a slot is passed the cycle after its last flit entered). Everything around it
is free: the configuration words, ``loaded``, the shared table, the heads and their flow-port
entries, ``room``, ``run``, ``started``, ``ended``, ``out_last``. The environment's rules
(the packet switch's): a slot is not written while set up or loaded (the configuration
memory unloads it from the first word) and the shared table not while a slot is set up, a grant pends or a head waits (the host loads both before the flows run); an input starts a packet only when
enabled and with a head of the shared phase, and a head stays put until it starts (the
input FIFO's); an input ends a packet only while it sends one (a one-flit packet: in its start
cycle). The harness keeps each slot's configuration as written (the port's word order) and,
per input, the slot of the packet it sends (its head's at the start) until its last flit.

Asserted, every cycle: (1) *a lane is never granted to two flows*: the slots set up have
pairwise disjoint lanes (microswitches whose mode is not idle); (2) *a packet enters the
datapath only under its own modes*: while an input sends a packet of slot k (from its first
flit to the cycle its last flit enters), k is set up, so the modes the flit meets at every
microswitch, each delayed by its offset, are k's (``hdl.contracts.timing.microswitch_offsets``).
Covered: two slots sharing a lane set up one after the other while the first one's packet
was sent the cycle before (the hand-over behind reached).

Lock-step build (``SharedFlows(lockstep=True)``, ``shared_flows.lockstep_*``): the same
harness and properties, with each input's ``passed`` free under the environment's rule that an
input passes flits only while it sends a packet (from its start to its end, both cycles
included, a flit passed in each). Covered: a *reducing* slot released behind (a packet of it
still in flight on its outputs) and a slot sharing one of its lanes set up the next cycle.
``shared_flows.lockstep_never_apart`` proves the same properties with the ``apart`` fallback
removed (``NEVER_APART``): they hold without it, so they do not show it is needed -- they speak
of the modes a flit meets where it *enters* and of the slots' lanes, not of a flit waiting
inside for a partner, which a harness without the datapath cannot see (docs/verification.md).

Engine: BMC (slot registers, flow table and grant state are hidden).
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal

from hdl.contracts.config_port import config_words
from hdl.contracts.encoding import config_bits, layout
from hdl.contracts.packet import PacketFormat
from hdl.designs.switch.shared_flows import SharedFlows

from .proof import Mutation, Proof, build, harness_module

__all__ = ["PROOFS", "shared_flows_harness"]

PACKET = PacketFormat(phase_bits=2, seq_bits=2, flow_bits=1, packet_flits=2)
PORTS, MIDDLE, PHASES, FLOWS, WORD = 3, 2, 3, 2, 8


def _ignores_held_lanes(flows, m):
    # a slot not set up is granted whatever the slots set up hold
    m.d.comb += flows._internals.held.eq(0)


def _passes_at_once(flows, m):
    # a slot is released as soon as nothing of it is granted and unstarted, its packets
    # still entering the datapath
    st = flows._internals
    for k in range(PHASES):
        m.d.comb += st.free[k].eq(st.up[k] & (st.pend[k] == 0))


def _never_apart(flows, m):
    # every reducing slot is passed behind its last packet, whether its gang entered in lock
    # step or apart (a later sync assignment wins: the sticky flag stays 0)
    m.d.sync += flows._internals.apart.eq(0)


MUTANTS = {
    "ignores_held_lanes": Mutation("a new slot is set up over the lanes of one set up",
                                   design=_ignores_held_lanes),
    "passes_at_once": Mutation("a slot is released while its packet still enters",
                               design=_passes_at_once),
}
#: the lock-step build (``shared_flows.lockstep_lanes``) is checked against the same two; the
#: `apart` fallback removed is NOT caught by these properties: ``shared_flows.lockstep_never_apart``
#: proves they hold without it
NEVER_APART = Mutation("a reducing slot is passed behind even when its gang entered apart",
                       design=_never_apart)


def _slot_vectors(m, dut):
    """Each slot's configuration as the port writes it: words in order, ``last`` ends one."""
    words = config_words(PORTS, MIDDLE, WORD)
    index = Signal(range(words + 1), name="model_index")
    slots = [[Signal(WORD, name=f"model_slot{k}_word{w}") for w in range(words)] for k in range(PHASES)]
    with m.If(dut.cfg_we):
        m.d.sync += index.eq(Mux(dut.cfg_last, 0, Mux(index == words, index, index + 1)))
        for k in range(PHASES):
            for w in range(words):
                with m.If((dut.cfg_slot == k) & (index == w)):
                    m.d.sync += slots[k][w].eq(dut.cfg_data)
    return [Cat(*row)[:config_bits(PORTS, MIDDLE)] for row in slots]


def shared_flows_harness(mutant=None, *, lockstep=False, mutation=None, apart_cover=False):
    """The harness (module docstring). ``lockstep``: ``SharedFlows(lockstep=True)`` with each
    input's ``passed`` free under the rule that an input passes flits only while it sends a
    packet (its first flit in the start cycle, its last in the end cycle), and a second cover:
    a *reducing* slot handed over behind. ``mutation``: a :class:`Mutation` used instead of
    ``MUTANTS[mutant]`` (the proven-surviving ``NEVER_APART``). ``apart_cover`` (with
    ``lockstep``): cover instead a reducing slot released behind after two inputs sending its
    packets passed apart since it was last quiet (only the build without the fallback can)."""
    m = harness_module()
    if mutation is None:
        mutation = MUTANTS.get(mutant)
    dut, fragment = build(SharedFlows, mutation, ports=PORTS, middle=MIDDLE,
                          phases=PHASES, packet=PACKET, flows=FLOWS, word_width=WORD, dtype="int32",
                          lockstep=lockstep)
    m.submodules.dut = fragment
    free = [dut.cfg_we, dut.cfg_slot, dut.cfg_data, dut.cfg_last, dut.loaded, dut.map_we,
            dut.map_flow, dut.map_slot, dut.map_valid, dut.head_ok, dut.room, dut.run,
            dut.started, dut.ended, dut.out_last, *dut.head_flow, *dut.head_seq,
            *dut.in_partners, *dut.in_outputs, *dut.slot_outputs,
            *([dut.passed] if lockstep else [])]
    m.d.comb += [s.eq(AnySeq(len(s))) for s in free]
    set_up = dut.set_up
    # the host: a slot is not rewritten while set up, the table not while any slot is
    for k in range(PHASES):
        m.d.comb += Assume(~(dut.cfg_we & (dut.cfg_slot == k) & (set_up[k] | dut.loaded[k])))
    m.d.comb += Assume(~(dut.map_we & (set_up.any() | dut.pending.any() | dut.head_ok.any())))

    vectors = _slot_vectors(m, dut)
    lanes = [Cat(*(v[f.offset:f.offset + f.width].any() for f in layout(PORTS, MIDDLE))) for v in vectors]
    for k in range(PHASES):
        for j in range(k):
            m.d.comb += Assert(~(set_up[k] & set_up[j]) | ~(lanes[k] & lanes[j]).any(),
                               f"slots {j} and {k} set up with a lane in common")

    carrying = []   # per input: sends a packet now, and of which slot
    for n in range(PORTS):
        sending = Signal(name=f"model_sending{n}")
        slot = Signal(range(PHASES + 1), name=f"model_slot{n}")
        head = Signal(PACKET.flow_bits + 1, name=f"model_head{n}")
        waited = Signal(name=f"model_waited{n}")
        m.d.sync += [waited.eq(dut.head_ok[n] & ~dut.started[n]),
                     head.eq(Cat(dut.head_flow[n], dut.head_ok[n]))]
        m.d.comb += [Assume(~waited | (Cat(dut.head_flow[n], dut.head_ok[n]) == head)),
                     Assume(~dut.started[n] | dut.enable[n] & dut.head_ok[n] & ~sending),
                     Assume(~dut.ended[n] | sending | dut.started[n])]
        if lockstep:
            # an input passes flits only from its packet's start to its end, both included
            passed = dut.passed[n]
            m.d.comb += [Assume(~passed | sending | dut.started[n]),
                         Assume(~dut.started[n] | passed), Assume(~dut.ended[n] | passed)]
        current = Mux(dut.started[n], dut.in_slot[n], slot)
        carrying.append((sending | dut.started[n], current))
        with m.If(dut.started[n]):
            m.d.sync += slot.eq(dut.in_slot[n])
        m.d.sync += sending.eq((sending | dut.started[n]) & ~dut.ended[n])
        for k in range(PHASES):
            m.d.comb += Assert(~((sending | dut.started[n]) & (current == k)) | set_up[k],
                               f"input {n} sends a packet of slot {k}, which is not set up")
    prev_up = Signal(PHASES, name="model_prev_up")
    m.d.sync += prev_up.eq(set_up)

    def handed(released):
        # slot j released last cycle (``released[j]``), a slot sharing one of its lanes set up now
        return Cat(*((released[j] & ~set_up[j] & set_up[k] & ~prev_up[k] & (lanes[j] & lanes[k]).any())
                     for k in range(PHASES) for j in range(PHASES) if j != k)).any()
    if not lockstep:
        m.d.comb += Cover(handed(prev_up))
        return m
    # the new behaviour: a reducing slot released behind (some of its packets still in flight
    # on its outputs), and a slot sharing one of its lanes set up the next cycle
    st = dut._internals
    released_behind = Signal(PHASES, name="model_released_behind")
    m.d.sync += released_behind.eq(Cat(*(set_up[j] & st.free[j] & st.reduces[j] & ~st.quiet[j]
                                         for j in range(PHASES))))
    if not apart_cover:
        m.d.comb += Cover(handed(released_behind))
        return m
    # the harness's own record: two inputs sending packets of slot j, one passing a flit and
    # the other not, since j was last quiet
    seen_apart = Signal(PHASES, name="model_seen_apart")
    for j in range(PHASES):
        apart_now = Cat(*((sa & (ca == j) & sb & (cb == j) & (dut.passed[a] != dut.passed[b]))
                          for a, (sa, ca) in enumerate(carrying)
                          for b, (sb, cb) in enumerate(carrying) if a < b)).any()
        m.d.sync += seen_apart[j].eq(apart_now | seen_apart[j] & ~st.quiet[j])
    m.d.comb += Cover((released_behind & seen_apart).any())
    return m


def lockstep_harness(mutant=None):
    """The lock-step build's harness (``shared_flows_harness(lockstep=True)``)."""
    return shared_flows_harness(mutant, lockstep=True)


def never_apart_cover_harness(mutant=None):
    """``NEVER_APART`` reaching what the fallback forbids (the proof above is not vacuous)."""
    return shared_flows_harness(None, lockstep=True, mutation=NEVER_APART, apart_cover=True)


def never_apart_harness(mutant=None):
    """The lock-step build without its ``apart`` fallback (``NEVER_APART``), and on top of it
    ``MUTANTS[mutant]`` if given (the properties still catch those)."""
    if mutant is None:
        return shared_flows_harness(None, lockstep=True, mutation=NEVER_APART)
    other = MUTANTS[mutant].design

    def both(flows, m):
        NEVER_APART.design(flows, m)
        other(flows, m)
    return shared_flows_harness(None, lockstep=True, mutation=Mutation(MUTANTS[mutant].text, design=both))


PROOFS = [
    Proof(name="shared_flows.lanes", build=shared_flows_harness, mode="bmc", depth=10,
          mutants=MUTANTS,
          why_bounded="the slot registers, flow table and grant state are hidden; 10 cycles write "
                      "two slots' three words, map two flows, grant, send and hand over (the cover reaches "
                      "the hand-over within 10; depth 12 took 411 s on the loaded machine)"),
    Proof(name="shared_flows.cover", build=shared_flows_harness, mode="cover", depth=10),
    Proof(name="shared_flows.lockstep_lanes", build=lockstep_harness, mode="bmc", depth=10,
          mutants=MUTANTS,
          why_bounded="as shared_flows.lanes, plus the sticky apart bits; 10 cycles reach a "
                      "reducing slot handed over behind (the cover)"),
    Proof(name="shared_flows.lockstep_cover", build=lockstep_harness, mode="cover", depth=10),
    Proof(name="shared_flows.lockstep_never_apart", build=never_apart_harness, mode="bmc", depth=10,
          mutants=MUTANTS,
          why_bounded="as shared_flows.lockstep_lanes: the same properties hold with the apart "
                      "fallback removed (NEVER_APART), so they do not need it"),
    Proof(name="shared_flows.lockstep_never_apart_cover", build=never_apart_cover_harness,
          mode="cover", depth=10),
]
