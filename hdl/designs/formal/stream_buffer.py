"""Properties of :class:`~hdl.designs.stream_buffer.StreamBuffer`: an ideal two-entry FIFO.

Proven by k-induction (unbounded). The harness's shadow queue is the buffer's contract. Induction
needs the invariant tying it to the buffer's state: the registered outputs (``o.valid``,
``i.ready``) say how many flits are inside, and the skid register (found by name) holds the
younger of two.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Value, unsigned

from hdl.designs.stream_buffer import StreamBuffer

from .checks import (ShadowQueue, assert_progress, assert_stream_rules, assert_valid_without_ready,
                     fire, free_stream_input)
from .proof import Proof, elaborated, harness_module, internal_signal, mutated

__all__ = ["PROOFS", "stream_buffer_harness"]

#: payload bits: wide enough that a lost, duplicated or swapped flit shows as a different value
WIDTH = 4


def _accepts_when_full(buffer, m):
    m.d.comb += buffer.i.ready.eq(1)          # takes a third flit with nowhere to keep it


def _drops_on_stall(buffer, m):
    with m.If(buffer.o.valid & ~buffer.o.ready):
        m.d.sync += buffer.o.valid.eq(0)      # withdraws an offered flit


def _skips_skid(buffer, m):
    with m.If(~buffer.o.valid | buffer.o.ready):
        m.d.sync += buffer.o.payload.eq(buffer.i.payload)   # loads the input even when the skid is full


def _valid_waits_for_ready(buffer, m):
    # raises valid only once ready is high (the producer waits for the consumer)
    with m.If(~buffer.o.valid & ~buffer.o.ready):
        m.d.sync += buffer.o.valid.eq(0)


MUTANTS = {
    "accepts_when_full": (_accepts_when_full, "i.ready stuck high: a flit arriving while both entries are full is lost"),
    "drops_on_stall": (_drops_on_stall, "o.valid falls while o.ready is low: the offered flit is withdrawn"),
    "skips_skid": (_skips_skid, "the output register loads the input payload even when the skid register holds an older flit"),
    "valid_waits_for_ready": (_valid_waits_for_ready, "o.valid rises only in a cycle with o.ready high"),
}


def stream_buffer_harness(mutant: str | None = None):
    """StreamBuffer(unsigned(WIDTH)) with free input and free ``o.ready``."""
    design = StreamBuffer if mutant is None else mutated(StreamBuffer, MUTANTS[mutant][0])
    m = harness_module()
    dut = design(unsigned(WIDTH))
    m.submodules.dut = fragment = elaborated(dut)
    free_stream_input(m, dut.i, name="i")
    m.d.comb += dut.o.ready.eq(AnySeq(1))
    assert_stream_rules(m, dut.o, name="o")
    queue = ShadowQueue(m, name="o", width=WIDTH, depth=2, push=fire(dut.i),
                        push_value=dut.i.payload, pop=fire(dut.o), pop_value=dut.o.payload)
    assert_progress(m, queue, dut.o, bound=1, name="o")
    assert_valid_without_ready(m, queue, dut.o, latency=dut.latency, name="o")
    # induction strengthening: the registered outputs count the flits inside, and the skid
    # register (the one piece of state the interface hides) holds the younger of two
    skid = internal_signal(fragment, "skid_payload")
    m.d.comb += [
        Assert((queue.count != 2) | (Value.cast(skid) == queue.entries[1]),
               "the skid register holds the younger flit"),
        Assert(dut.o.valid == (queue.count != 0), "o.valid is high exactly when a flit is inside"),
        Assert(~dut.i.ready == (queue.count == 2), "i.ready is low exactly when both entries are full"),
        Assert(~dut.o.valid | (Value.cast(dut.o.payload) == queue.head), "o.payload is the oldest flit"),
        Cover(queue.count == 2),                      # the skid register is used
        Cover(fire(dut.i) & fire(dut.o) & (queue.count == 1)),   # full throughput
    ]
    return m


PROOFS = [
    Proof(name="stream_buffer.fifo", build=stream_buffer_harness, mode="prove", depth=4,
          mutants={name: text for name, (_, text) in MUTANTS.items()}, quick=True),
    Proof(name="stream_buffer.cover", build=stream_buffer_harness, mode="cover", depth=6, quick=True),
]
