"""Properties of the input, output and RD microswitches, in every legal mode.

The mode is a free constant (``AnyConst``) constrained only by the legality rules of
``docs/configuration.md`` (written here again, independently of the design's checker), so one
proof covers every legal mode at once. Per output port the harness keeps a shadow queue of the
flits that port owes: the flits of the input the mode routes to it, or for a reducing route the
golden sum of each joint transfer (lane-wise int32 wrap-around, framing of in0). Asserted:

* every output delivers exactly what it owes, in order, once (no loss, duplicate, corruption),
  and a port no route feeds never raises ``valid``;
* a reducing route takes in0 and in1 in the same cycle; the sum is the sum;
* an input no route uses is never consumed (``ready`` low);
* output streams obey the stream rules and ``valid`` never waits for ``ready``;
* with every output ready, owed flits come out within a bound (a silent drop cannot hide);
* ``busy`` is high while a flit is inside (input and RD microswitches).

Engine: bounded model checking from reset (depth in :data:`PROOFS`): the delay lines, adder
pipeline, pending masks and buffers are hidden state that the interface does not pin down, so
plain k-induction does not close without invariants on every stage (see docs/verification.md).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal, Value

from hdl.contracts.encoding import RD_IN0, RD_IN1, RD_SUM
from hdl.contracts.flit import FlitFormat
from hdl.designs.reduction import reduction_unit
from hdl.designs.switch import output_microswitch, rd_microswitch, reduce_path
from hdl.designs.switch.input_microswitch import InputMicroswitch
from hdl.designs.switch.modes import RD_MODE_LAYOUT, input_mode_layout, output_mode_layout
from hdl.designs.switch.output_microswitch import OutputMicroswitch
from hdl.designs.switch.rd_microswitch import RDMicroswitch

from .checks import (ShadowQueue, assert_progress, assert_stream_rules, assert_valid_without_ready,
                     fire, free_stream_input)
from .proof import Mutation, Proof, build, harness_module

__all__ = ["PROOFS", "FLIT", "input_harness", "output_harness", "rd_harness", "adder_without_carry",
           "fork_without_pending_mask"]

#: int32 so that the golden sum is plain addition; one lane, one tag bit (framing is carried
#: whole, so wider flits add width, not cases)
FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=1)
MIDDLE = 2


def golden_sum(flit: FlitFormat, a, b):
    """The flit the reduction of ``a`` and ``b`` must produce: lane-wise sums modulo 2**width
    (int32), ``last`` and ``tag`` of ``a``."""
    width = flit.element.width
    lanes = [(a.data[k * width:(k + 1) * width] + b.data[k * width:(k + 1) * width])[:width]
             for k in range(flit.lanes)]
    return Cat(*lanes, a.last, a.tag)


#: data bits left free per lane; the rest are assumed zero so that BMC reaches its depth in seconds
#: rather than hours (carries across these bits still occur; docs/verification.md)
FREE_DATA_BITS = 4


def assume_small_data(m, payload, flit: FlitFormat = FLIT, *, bits: int = FREE_DATA_BITS):
    """Assume each lane of ``payload.data`` below ``2**bits``."""
    width = flit.element.width
    for k in range(flit.lanes):
        m.d.comb += Assume(payload.data[k * width + bits:(k + 1) * width] == 0)


def _free_mode(m, dut, layout):
    mode = Signal(layout, name="mode")
    m.d.comb += [Value.cast(mode).eq(AnyConst(layout.size)), dut.mode.eq(mode)]
    return mode


def _owed_queues(m, dut, outputs, *, latency: int, name_of):
    """``outputs``: ``[(port, [(condition, event, value), ...]), ...]``: a flit is owed to ``port``
    when ``event`` happens under the mode ``condition``. Adds every per-output assertion; returns
    the queues."""
    all_ready = Cat(*(port.ready for port, _ in outputs)).all()
    queues = []
    for j, (port, routes) in enumerate(outputs):
        name = name_of(j)
        push = Cat(*(cond & event for cond, event, _ in routes)).any()
        value = 0
        for cond, _, route_value in reversed(routes):
            value = Mux(cond, route_value, value)
        fed = Cat(*(cond for cond, _, _ in routes)).any()
        queue = ShadowQueue(m, name=name, width=FLIT.width, depth=latency + 2, push=push,
                            push_value=value, pop=fire(port), pop_value=port.payload)
        assert_stream_rules(m, port, name=name)
        assert_progress(m, queue, port, bound=latency + 3, name=name, ready=all_ready)
        assert_valid_without_ready(m, queue, port, latency=latency, name=name)
        m.d.comb += Assert(fed | ~port.valid, f"{name}: valid on a port no route feeds")
        for cond, _, _ in routes:
            m.d.comb += Cover(cond & fire(port))
        queues.append(queue)
    return queues


def _assert_busy(m, dut, queues):
    owed = Cat(*(q.count != 0 for q in queues)).any()
    m.d.comb += Assert(~owed | dut.busy, "busy is low while a flit is inside")


def _two_inputs(m, dut):
    free_stream_input(m, dut.in0, name="in0")
    free_stream_input(m, dut.in1, name="in1")
    assume_small_data(m, dut.in0.payload)
    assume_small_data(m, dut.in1.payload)
    return golden_sum(FLIT, dut.in0.payload, dut.in1.payload)


def _check_inputs(m, dut, *, reduce, uses_in0, uses_in1):
    m.d.comb += [
        Assert(uses_in0 | ~dut.in0.ready, "in0 is consumed while no route uses it"),
        Assert(uses_in1 | ~dut.in1.ready, "in1 is consumed while no route uses it"),
        Assert(~reduce | (fire(dut.in0) == fire(dut.in1)), "a reduction takes in0 without in1 or back"),
    ]


# ---- input microswitch ----------------------------------------------------------------------

def _legal_input_mode(mode, middle):
    both = mode.in0_en & mode.in1_en
    return ((mode.in0_en & (mode.in0_wire < middle) | ~mode.in0_en & (mode.in0_wire == 0))
            & (mode.in1_en & (mode.in1_wire < middle) | ~mode.in1_en & (mode.in1_wire == 0))
            & (~mode.reduce | both & (mode.in0_wire == mode.in1_wire))
            & (mode.reduce | ~both | (mode.in0_wire != mode.in1_wire)))


def input_harness(mutant=None, *, middle: int = MIDDLE):
    m = harness_module()
    dut, fragment = build(InputMicroswitch, INPUT_MUTANTS.get(mutant), flit=FLIT, middle=middle)
    m.submodules.dut = fragment
    total = _two_inputs(m, dut)
    mode = _free_mode(m, dut, input_mode_layout(middle))
    m.d.comb += Assume(_legal_input_mode(mode, middle))
    outputs = []
    for k in range(middle):
        m.d.comb += dut.wire[k].ready.eq(AnySeq(1))
        routes = [
            (mode.reduce & (mode.in0_wire == k), fire(dut.in0) & fire(dut.in1), total),
            (mode.in0_en & ~mode.reduce & (mode.in0_wire == k), fire(dut.in0), dut.in0.payload),
            (mode.in1_en & ~mode.reduce & (mode.in1_wire == k), fire(dut.in1), dut.in1.payload),
        ]
        outputs.append((dut.wire[k], routes))
    queues = _owed_queues(m, dut, outputs, latency=dut.latency, name_of=lambda j: f"wire{j}")
    _check_inputs(m, dut, reduce=mode.reduce, uses_in0=mode.in0_en, uses_in1=mode.in1_en)
    _assert_busy(m, dut, queues)
    return m


# ---- RD microswitch -------------------------------------------------------------------------

def rd_harness(mutant=None):
    m = harness_module()
    dut, fragment = build(RDMicroswitch, RD_MUTANTS.get(mutant), flit=FLIT)
    m.submodules.dut = fragment
    total = _two_inputs(m, dut)
    mode = _free_mode(m, dut, RD_MODE_LAYOUT)
    out_modes = (mode.out0, mode.out1)
    sums = Cat(*(o == RD_SUM for o in out_modes)).any()
    passes = Cat(*((o == RD_IN0) | (o == RD_IN1) for o in out_modes)).any()
    m.d.comb += Assume(~(sums & passes))
    outputs = []
    for port, out_mode in zip((dut.out0, dut.out1), out_modes):
        m.d.comb += port.ready.eq(AnySeq(1))
        outputs.append((port, [
            (out_mode == RD_SUM, fire(dut.in0) & fire(dut.in1), total),
            (out_mode == RD_IN0, fire(dut.in0), dut.in0.payload),
            (out_mode == RD_IN1, fire(dut.in1), dut.in1.payload),
        ]))
    queues = _owed_queues(m, dut, outputs, latency=dut.latency, name_of=lambda j: f"out{j}")
    uses = [Cat(*((o == value) | (o == RD_SUM) for o in out_modes)).any() for value in (RD_IN0, RD_IN1)]
    _check_inputs(m, dut, reduce=sums, uses_in0=uses[0], uses_in1=uses[1])
    _assert_busy(m, dut, queues)
    for value in range(16):   # every legal mode is reachable with a transfer on each output it drives
        o0, o1 = value & 3, value >> 2
        if (RD_SUM in (o0, o1)) and ({o0, o1} & {RD_IN0, RD_IN1}):
            continue
        m.d.comb += Cover((Value.cast(mode) == value) & Cat(*(fire(p) for p, o in
                          zip((dut.out0, dut.out1), (o0, o1)) if o)).all())
    return m


# ---- output microswitch ---------------------------------------------------------------------

def output_harness(mutant=None, *, middle: int = MIDDLE):
    """Flits are owed from the cycle a wire first offers them (a broadcast output may take a flit
    before the wire is consumed, which waits for both outputs)."""
    m = harness_module()
    dut, fragment = build(OutputMicroswitch, OUTPUT_MUTANTS.get(mutant), flit=FLIT, middle=middle)
    m.submodules.dut = fragment
    mode = _free_mode(m, dut, output_mode_layout(middle))
    m.d.comb += Assume((mode.out0_en & (mode.out0_wire < middle) | ~mode.out0_en & (mode.out0_wire == 0))
                       & (mode.out1_en & (mode.out1_wire < middle) | ~mode.out1_en & (mode.out1_wire == 0)))
    offered = []
    for k in range(middle):
        free_stream_input(m, dut.wire[k], name=f"wire{k}")
        assume_small_data(m, dut.wire[k].payload)
        waited = Signal(name=f"wire{k}_waited")   # the flit on wire k was already offered
        m.d.sync += waited.eq(dut.wire[k].valid & ~dut.wire[k].ready)
        offered.append(dut.wire[k].valid & ~waited)
        selected = ((mode.out0_en & (mode.out0_wire == k)) | (mode.out1_en & (mode.out1_wire == k)))
        m.d.comb += Assert(selected | ~dut.wire[k].ready, f"wire{k} is consumed while no output selects it")
    outputs = []
    for port, en, wire in ((dut.out0, mode.out0_en, mode.out0_wire), (dut.out1, mode.out1_en, mode.out1_wire)):
        m.d.comb += port.ready.eq(AnySeq(1))
        outputs.append((port, [(en & (wire == k), offered[k], dut.wire[k].payload) for k in range(middle)]))
    _owed_queues(m, dut, outputs, latency=dut.latency, name_of=lambda j: f"out{j}")
    m.d.comb += Cover(mode.out0_en & mode.out1_en & (mode.out0_wire == mode.out1_wire)
                      & fire(dut.out0) & fire(dut.out1))   # broadcast
    return m


# ---- mutants --------------------------------------------------------------------------------

def _gate_ignores_enable(ms, m):
    m.d.comb += ms.in1.ready.eq(m.submodules.path.in1.ready)


def _valid_waits_for_ready(port_name, buffer_name):
    def mutation(ms, m):
        port = getattr(ms, port_name) if not port_name.startswith("wire") else ms.wire[int(port_name[4:])]
        buffer = m.submodules[buffer_name]
        m.d.comb += port.valid.eq(buffer.o.valid & port.ready)
    return mutation


def _busy_low(ms, m):
    m.d.comb += ms.busy.eq(0)


def fork_without_pending_mask(fork, m):
    """Mutation of a ``SelectFork`` (``fork``, in its module ``m``): an output that already took
    the current flit is offered it again (a duplicate the proofs must catch)."""
    for j in range(len(fork.o)):
        m.d.comb += fork.o[j].valid.eq(Cat(*(fork.enable[j] & (fork.select[j] == k) & fork.i[k].valid
                                              for k in range(len(fork.i)))).any())


def adder_without_carry(adder, m):
    """Mutation of an ``IntAdder`` (``adder``, in its module ``m``): it drops its carries
    (``a ^ b``)."""
    m.d.comb += adder.o.eq(adder.a ^ adder.b)


def _reduction_unjoined(unit, m):
    m.d.comb += unit.a.ready.eq(m.submodules.output_buffer.i.ready)   # a transfers without b


def _sum_mutants():
    return {
        "adder_without_carry": Mutation("the int32 adder drops its carries (a ^ b)",
                                        submodule=(reduction_unit, "IntAdder", adder_without_carry)),
        "reduction_unjoined": Mutation("the reduction unit takes a without waiting for b",
                                       submodule=(reduce_path, "ReductionUnit", _reduction_unjoined)),
    }


def _wire0_takes_lane0(ms, m):
    m.d.comb += m.submodules.fork.select[0].eq(0)


# No legal input mode sends one lane to two wires, so a fork without its pending mask is an
# equivalent mutant here (it is killed in the RD and output microswitches, which broadcast).
INPUT_MUTANTS = {
    "gate_ignores_enable": Mutation("in1.ready ignores in1_en: a disabled input is consumed", design=_gate_ignores_enable),
    "wire0_takes_lane0": Mutation("wire 0 always selects lane 0 (in0), even when the mode routes in1 there",
                                  design=_wire0_takes_lane0),
    "valid_waits_for_ready": Mutation("wire0.valid is gated by wire0.ready",
                                      design=_valid_waits_for_ready("wire0", "wire0_buffer")),
    "busy_low": Mutation("busy stuck low", design=_busy_low),
    **_sum_mutants(),
}

RD_MUTANTS = {
    "gate_ignores_enable": Mutation("in1.ready ignores whether a route uses in1", design=_gate_ignores_enable),
    "fork_without_pending_mask": Mutation("broadcast forgets which output took a flit (duplicates)",
                                          submodule=(rd_microswitch, "SelectFork", fork_without_pending_mask)),
    "valid_waits_for_ready": Mutation("out1.valid is gated by out1.ready",
                                      design=_valid_waits_for_ready("out1", "out1_buffer")),
    "busy_low": Mutation("busy stuck low", design=_busy_low),
    **_sum_mutants(),
}


def _takes_unselected_wire(ms, m):
    m.d.comb += ms.wire[1].ready.eq(1)


OUTPUT_MUTANTS = {
    "takes_unselected_wire": Mutation("wire1.ready stuck high: a wire no output selects is consumed", design=_takes_unselected_wire),
    "fork_without_pending_mask": Mutation("broadcast forgets which output took a flit (duplicates)",
                                          submodule=(output_microswitch, "SelectFork", fork_without_pending_mask)),
    "valid_waits_for_ready": Mutation("out0.valid is gated by out0.ready",
                                      design=_valid_waits_for_ready("out0", "out0_buffer")),
}

BMC_REASON = ("hidden pipeline state (delay lines, adder, pending mask, skid registers) is not "
              "pinned by the interface; the depth covers a flit entering, filling every buffer behind a stall and draining")

PROOFS = [
    Proof(name="input_microswitch.modes", build=input_harness, mode="bmc", depth=12,
          mutants=INPUT_MUTANTS, why_bounded=BMC_REASON),
    Proof(name="input_microswitch.cover", build=input_harness, mode="cover", depth=8),
    Proof(name="rd_microswitch.modes", build=rd_harness, mode="bmc", depth=8,
          mutants=RD_MUTANTS, why_bounded=BMC_REASON, quick=True),
    Proof(name="rd_microswitch.modes_deep", build=rd_harness, mode="bmc", depth=12,
          mutants=RD_MUTANTS, why_bounded=BMC_REASON),
    Proof(name="rd_microswitch.cover", build=rd_harness, mode="cover", depth=8),
    Proof(name="output_microswitch.modes", build=output_harness, mode="bmc", depth=12,
          mutants=OUTPUT_MUTANTS, why_bounded=BMC_REASON),
    Proof(name="output_microswitch.cover", build=output_harness, mode="cover", depth=8),
]
