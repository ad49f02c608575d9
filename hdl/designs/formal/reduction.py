"""Properties of :class:`~hdl.designs.reduction.ReductionUnit`: the join and the framing.

``a`` and ``b`` transfer together; each output flit is the lane-wise sum of one joint transfer
(int32, golden wrap-around sum) carrying ``a``'s sideband (the flit's framing ``last tag``), in
order, exactly once; the output obeys the stream rules, ``valid`` never waits for ``ready``,
and the latency is :attr:`ReductionUnit.latency`. For fp16 only the framing is compared (the
float datapath is bit-exact against the golden model in the simulation tests; its logic would
dominate the solver), which still checks that the sideband travels in step with the pipeline.

int32 (no adder pipeline registers) is proven by k-induction with the output buffer's skid
register as the one invariant; fp16 (pipeline registers inside the float adders) by BMC.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cat, Cover, Value

from hdl.contracts.flit import FlitFormat
from hdl.designs.layouts import framing_layout
from hdl.designs.reduction import reduction_unit
from hdl.designs.reduction.reduction_unit import ReductionUnit

from .checks import (ShadowQueue, assert_progress, assert_stream_rules, assert_valid_without_ready,
                     fire, free_stream_input)
from .microswitches import adder_without_carry, assume_small_data
from .proof import Mutation, Proof, build, harness_module, internal_signal

__all__ = ["PROOFS", "reduction_harness"]

LANES = 2


def _sideband_skips_stage(unit, m):
    # the sum takes b's framing instead of a's
    buffer = m.submodules.output_buffer
    m.d.comb += buffer.i.payload.sideband.eq(unit.b.payload.sideband)


def _unjoined(unit, m):
    m.d.comb += unit.a.ready.eq(m.submodules.output_buffer.i.ready)


MUTANTS = {
    "framing_of_b": Mutation("the sum carries b's framing instead of a's", design=_sideband_skips_stage),
    "unjoined": Mutation("a transfers without b", design=_unjoined),
    "adder_without_carry": Mutation("the int32 adder drops its carries (a ^ b)",
                                    submodule=(reduction_unit, "IntAdder", adder_without_carry)),
}


def reduction_harness(mutant=None, *, dtype: str = "int32"):
    flit = FlitFormat(dtype=dtype, lanes=LANES if dtype == "int32" else 1, tag_width=1)
    sideband = framing_layout(flit)
    m = harness_module()
    unit, fragment = build(ReductionUnit, MUTANTS.get(mutant), dtype=dtype, lanes=flit.lanes,
                           sideband=sideband)
    m.submodules.dut = fragment
    width = flit.element.width
    compare_data = dtype == "int32"
    for name in ("a", "b"):
        port = getattr(unit, name)
        free_stream_input(m, port, name=name)
        if compare_data:
            assume_small_data(m, port.payload, flit)
    m.d.comb += unit.o.ready.eq(AnySeq(1))
    if compare_data:
        lanes = [(unit.a.payload.data[k * width:(k + 1) * width]
                  + unit.b.payload.data[k * width:(k + 1) * width])[:width] for k in range(flit.lanes)]
        expected, observed, bits = Cat(*lanes, unit.a.payload.sideband), unit.o.payload, flit.width
    else:
        expected, observed, bits = unit.a.payload.sideband, unit.o.payload.sideband, sideband.size
    queue = ShadowQueue(m, name="o", width=bits, depth=unit.latency + 1,
                        push=fire(unit.a) & fire(unit.b), push_value=expected,
                        pop=fire(unit.o), pop_value=observed)
    m.d.comb += Assert(fire(unit.a) == fire(unit.b), "a and b transfer in different cycles")
    assert_stream_rules(m, unit.o, name="o")
    assert_progress(m, queue, unit.o, bound=unit.latency + 1, name="o")
    assert_valid_without_ready(m, queue, unit.o, latency=unit.latency, name="o")
    if unit.adder_latency == 0:
        # induction invariant: the output buffer (the only state) against the shadow queue
        skid = internal_signal(fragment, "skid_payload", path=("output_buffer",))
        skid_valid = internal_signal(fragment, "skid_valid", path=("output_buffer",))
        skid_bits = Value.cast(skid) if compare_data else Value.cast(skid)[-bits:]
        m.d.comb += [
            Assert(unit.o.valid == (queue.count != 0), "o.valid is high exactly when a sum is inside"),
            Assert(~unit.o.valid | (Value.cast(observed) == queue.head), "o.payload is the oldest sum"),
            Assert(skid_valid == (queue.count == 2), "the skid register is full exactly when two sums are inside"),
            Assert((queue.count != 2) | (skid_bits == queue.entries[1]), "the skid register holds the younger sum"),
        ]
    m.d.comb += Cover(fire(unit.o) & fire(unit.a) & (queue.count == 1))   # one sum per cycle
    return m


PROOFS = [
    Proof(name="reduction_unit.int32", build=reduction_harness, mode="prove", depth=4,
          mutants=MUTANTS, quick=True),
    Proof(name="reduction_unit.fp16_framing", build=lambda mutant: reduction_harness(mutant, dtype="fp16"),
          mode="bmc", depth=10, mutants={k: MUTANTS[k] for k in ("framing_of_b", "unjoined")},
          why_bounded="the float adders' pipeline registers are hidden state; the depth covers "
                      "the pipeline filled behind a stall and drained"),
]
