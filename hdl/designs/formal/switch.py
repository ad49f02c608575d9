"""End-to-end properties of a whole small switch, Fred_2(4) and Fred_3(3), in compiled configurations.

Each case is a set of flows (``hdl.compiler.flows``) routed by the configuration compiler
(:func:`hdl.compiler.router.route_one_phase`); the switch's ``modes`` are that configuration,
constant. Data and backpressure are free (``AnySeq``; inputs obey the stream rules). For every
output the compiler's addition tree (:func:`hdl.compiler.functional.symbolic`) names the input
ports whose flits it owes; per (output, input) pair the harness keeps a shadow queue of that
input's transfers. Asserted, every cycle:

* an output transfers only when every input it sums has a flit owed to it (no duplicate, no
  invented flit), and the value is the sum of those inputs' oldest owed flits (lane-wise int32
  wrap-around; ``last`` and ``tag`` of the tree's leftmost leaf), so each flit comes out exactly
  once per destination, in order, uncorrupted; at most ``depth`` flits are owed (none lost);
* an output no flow feeds never raises ``valid``; an input no flow uses is never consumed, and
  with every used input valid and every output ready, each used input is taken within
  :data:`INPUT_BOUND` cycles (so a switch that takes nothing cannot pass with nothing owed);
* outputs obey the stream rules; with every output ready, owed flits come out within a bound;
* ``busy`` is high while a flit is owed anywhere.

This is the composition the microswitch proofs do not cover: the compiler's mode bits, their
slicing across the recursion (``hdl.contracts.encoding.layout``), the demux/mux of odd P and the
joins of flits that travel different paths. Engine: BMC from reset (the whole pipeline is hidden
state); data restricted to :data:`SWITCH_FREE_DATA_BITS` free bits per lane (the microswitch proofs
keep 4).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cat, Cover, Signal, Value

from hdl.compiler.flows import Flow
from hdl.compiler.functional import leaves, symbolic
from hdl.compiler.router import route_one_phase
from hdl.contracts.errors import FredError
from hdl.designs.reduction import reduction_unit
from hdl.designs.switch import output_microswitch, rd_microswitch
from hdl.designs.switch.fred_switch import FredSwitch

from .checks import ShadowQueue, assert_progress, assert_stream_rules, fire, free_stream_input
from .microswitches import FLIT, adder_without_carry, fork_without_pending_mask, assume_small_data
from .proof import Mutation, Proof, build, harness_module

__all__ = ["CASES", "PROOFS", "switch_harness", "compiled_modes", "SWITCH_FREE_DATA_BITS"]

#: free data bits per lane (the rest assumed zero): sums of up to four inputs still carry across
#: them; the four-input all-reduce took over 10 min at depth 9 with 4 free bits (docs/verification.md)
SWITCH_FREE_DATA_BITS = 2
#: cycles a used input may wait with every used input valid and every output ready (the
#: stall-release ripple back through the stages' skid buffers is shorter)
INPUT_BOUND = 4

#: name -> (P, m, flows). Fred_2(4): every port sends and receives; Fred_3(3): the odd size with
#: its demux and mux.
CASES = {
    "fred2_4.permutation": (4, 2, [Flow((0,), (2,)), Flow((1,), (3,)), Flow((2,), (0,)), Flow((3,), (1,))]),
    "fred2_4.allreduce": (4, 2, [Flow((0, 1, 2, 3), (0, 1, 2, 3))]),
    "fred2_4.reduce_multicast": (4, 2, [Flow((0, 1), (1, 2, 3)), Flow((3,), (0,))]),
    "fred3_3.allreduce": (3, 3, [Flow((0, 1, 2), (0, 1, 2))]),
    "fred3_3.rotate": (3, 3, [Flow((0,), (1,)), Flow((1,), (2,)), Flow((2,), (0,))]),
}


def compiled_modes(ports: int, middle: int, flows) -> tuple[int, list]:
    """``(modes as an int, addition tree per output)`` of the compiler's one-phase configuration."""
    config, status = route_one_phase(ports=ports, middle=middle, flows=flows)
    if config is None:
        raise FredError(f"Fred_{middle}({ports}): the compiler found no one-phase configuration ({status})")
    used = sorted({p for f in flows for p in f.inputs})
    trees, problems = symbolic(config, present=used)
    if problems:
        raise FredError(f"Fred_{middle}({ports}): configuration problems {problems}")
    return config.to_int(), trees


def _leftmost(tree) -> int:
    while isinstance(tree, tuple):
        tree = tree[1]
    return tree


def _golden(heads: dict, tree):
    """The flit ``tree`` must produce from the inputs' oldest owed flits ``heads`` (port -> value):
    int32 lane sums of the leaves, framing (``last``, ``tag``) of the leftmost leaf."""
    width = FLIT.element.width
    ports = sorted(leaves(tree))
    lanes = []
    for k in range(FLIT.lanes):
        total = 0
        for p in ports:
            total = total + heads[p][k * width:(k + 1) * width]
        lanes.append(total[:width])
    return Cat(*lanes, heads[_leftmost(tree)][FLIT.lanes * width:])


def switch_harness(case: str, mutant=None):
    ports, middle, flows = CASES[case]
    modes, trees = compiled_modes(ports, middle, flows)
    m = harness_module()
    dut, fragment = build(FredSwitch, SWITCH_MUTANTS.get(mutant), ports=ports, middle=middle, flit=FLIT)
    m.submodules.dut = fragment
    m.d.comb += dut.modes.eq(modes)
    used = {p for f in flows for p in f.inputs}
    for p in range(ports):
        free_stream_input(m, dut.i[p], name=f"i{p}")
        assume_small_data(m, dut.i[p].payload, bits=SWITCH_FREE_DATA_BITS)
        if p not in used:
            m.d.comb += Assert(~dut.i[p].ready, f"i{p} is consumed while no flow uses it")
    all_ready = Signal(name="all_ready")
    m.d.comb += all_ready.eq(Cat(*(o.ready for o in dut.o)).all())
    depth = dut.latency + 2 * dut.stages + 2     # buffering on a path, generously
    owed_anywhere = []
    for o, tree in enumerate(trees):
        port = dut.o[o]
        m.d.comb += port.ready.eq(AnySeq(1))
        assert_stream_rules(m, port, name=f"o{o}")
        if tree is None:
            m.d.comb += Assert(~port.valid, f"o{o}: valid on a port no flow feeds")
            continue
        heads, counts = {}, []
        for p in sorted(leaves(tree)):
            head = Signal(FLIT.width, name=f"o{o}_from{p}_head")
            queue = ShadowQueue(m, name=f"o{o}_from{p}", width=FLIT.width, depth=depth,
                                push=fire(dut.i[p]), push_value=dut.i[p].payload,
                                pop=fire(port), pop_value=head)
            m.d.comb += head.eq(queue.head)   # the sum is checked below, not each operand
            heads[p] = queue.head
            counts.append(queue.count != 0)
            owed_anywhere.append(queue.count != 0)
        m.d.comb += Assert(~fire(port) | (Value.cast(port.payload) == _golden(heads, tree)),
                           f"o{o}: the flit is not the sum of its inputs' oldest owed flits")
        complete = SimpleNamespace(count=Cat(*counts).all())      # every operand has arrived
        # bound: the path latency + 1, so that a lost flit fails within the BMC depth
        assert_progress(m, complete, port, bound=dut.latency + 1, name=f"o{o}", ready=all_ready)
        m.d.comb += Cover(fire(port))
    m.d.comb += Assert(~Cat(*owed_anywhere).any() | dut.busy, "busy is low while a flit is inside")
    _assert_inputs_taken(m, dut, sorted(used), all_ready)
    return m


def _assert_inputs_taken(m, dut, used, all_ready):
    """With every used input offering a flit and every output ready, each used input transfers
    within :data:`INPUT_BOUND` cycles: a switch that stops taking an input (a route not set up,
    a lost enable) fails here rather than passing with nothing owed."""
    saturated = Signal(name="saturated")
    m.d.comb += saturated.eq(all_ready & Cat(*(dut.i[p].valid for p in used)).all())
    for p in used:
        waiting = Signal(range(INPUT_BOUND + 2), name=f"i{p}_waiting")
        with m.If(saturated & ~fire(dut.i[p])):
            with m.If(waiting <= INPUT_BOUND):
                m.d.sync += waiting.eq(waiting + 1)
        with m.Else():
            m.d.sync += waiting.eq(0)
        m.d.comb += Assert(waiting <= INPUT_BOUND, f"i{p}: offered with every output ready but not taken")


# ---- mutants --------------------------------------------------------------------------------

def _input_always_ready(switch, m):
    m.d.comb += switch.i[0].ready.eq(1)      # a flit offered while the switch is full is lost


def _busy_low(switch, m):
    m.d.comb += switch.busy.eq(0)


def _mode_bit_flipped(switch, m):
    # the lowest mode bit of the first input microswitch inverted: the compiled route is not taken
    m.d.comb += m.submodules.in0.mode.as_value()[0].eq(~switch.modes[0])


SWITCH_MUTANTS = {
    "input_always_ready": Mutation("i0.ready stuck high: flits offered while the switch is full are lost",
                                   design=_input_always_ready),
    "busy_low": Mutation("busy stuck low", design=_busy_low),
    "mode_bit_flipped": Mutation("one mode bit of the first input microswitch inverted",
                                 design=_mode_bit_flipped),
    "adder_without_carry": Mutation("the int32 adder drops its carries (a ^ b)",
                                    submodule=(reduction_unit, "IntAdder", adder_without_carry)),
    "fork_without_pending_mask": Mutation("output microswitch broadcast forgets which output took a flit",
                                          submodule=(output_microswitch, "SelectFork", fork_without_pending_mask)),
    "rd_fork_without_pending_mask": Mutation("RD microswitch broadcast forgets which output took a flit",
                                             submodule=(rd_microswitch, "SelectFork", fork_without_pending_mask)),
}

#: which mutants each case must kill within its depth (a unicast case has no sum to corrupt; a
#: flit lost at a full input needs the buffers filled first, deeper than these bounds, so
#: ``input_always_ready`` is killed only where a reduction partner lets it lose a flit at once;
#: the broadcast forks need a stall behind a multicast, hence depth 12 for that case)
KILLS = {
    "fred2_4.permutation": ("busy_low", "mode_bit_flipped"),
    "fred2_4.allreduce": ("adder_without_carry", "input_always_ready", "mode_bit_flipped"),
    "fred2_4.reduce_multicast": ("fork_without_pending_mask", "rd_fork_without_pending_mask",
                                 "adder_without_carry", "mode_bit_flipped"),
    "fred3_3.allreduce": ("adder_without_carry", "input_always_ready", "busy_low", "mode_bit_flipped"),
    "fred3_3.rotate": ("busy_low", "mode_bit_flipped"),
}
#: BMC depth per case: 8 = the path latency (5 cycles) + 3; the four-input all-reduce at depth 10
#: did not finish in 150 s (at 9 with 4 free data bits, not in 10 min)
DEPTHS = {"fred2_4.permutation": 12, "fred2_4.allreduce": 8, "fred2_4.reduce_multicast": 12,
          "fred3_3.allreduce": 8, "fred3_3.rotate": 8}

SWITCH_BMC_REASON = ("the whole switch's pipeline (every microswitch's delay lines, adders, pending "
                     "masks and skid registers) is hidden state; the depth lets a flit cross the "
                     "switch, stall behind a full path and drain")


def _proof(case: str, depth: int, quick: bool = False) -> Proof:
    return Proof(name=f"switch.{case}", build=lambda mutant, case=case: switch_harness(case, mutant),
                 mode="bmc", depth=depth, why_bounded=SWITCH_BMC_REASON, quick=quick,
                 mutants={name: SWITCH_MUTANTS[name] for name in KILLS[case]})


#: Fred_3(3)'s all-reduce (sum, demux, mux) is the quick one
PROOFS = [_proof(case, depth=DEPTHS[case], quick=case == "fred3_3.allreduce") for case in CASES] + [
    Proof(name="switch.fred2_4.reduce_multicast.cover", mode="cover", depth=8,
          build=lambda mutant: switch_harness("fred2_4.reduce_multicast", mutant)),
]
