"""Reusable property pieces for the harnesses: stream rules, shadow queues, progress bounds.

All helpers add statements to the caller's module ``m`` (sync domain, the harness drives its reset
low) and return the signals a harness may want to cover or reuse.
"""

from __future__ import annotations

from amaranth import Signal
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Mux, Value

__all__ = ["free_stream_input", "assume_stream_rules", "assert_stream_rules", "ShadowQueue",
           "assert_progress", "assert_valid_without_ready", "fire"]


def fire(port):
    """A transfer on stream ``port`` this cycle."""
    return port.valid & port.ready


def free_stream_input(m, port, *, name: str) -> None:
    """Drive stream ``port`` (an input of the design) with free ``valid``/``payload`` values that
    obey the stream rules (held while ``valid & ~ready``)."""
    width = Value.cast(port.payload).shape().width
    m.d.comb += [port.valid.eq(AnySeq(1)), Value.cast(port.payload).eq(AnySeq(width))]
    assume_stream_rules(m, port, name=name)


def _stalled_last_cycle(m, port, name: str):
    """Registers: ``port`` was ``valid & ~ready`` last cycle, and its payload then."""
    stalled = Signal(name=f"{name}_stalled")
    held = Signal(Value.cast(port.payload).shape(), name=f"{name}_held")
    m.d.sync += [stalled.eq(port.valid & ~port.ready), held.eq(port.payload)]
    return stalled, held


def assume_stream_rules(m, port, *, name: str) -> None:
    """The environment's side of a stream: a producer keeps ``valid`` and ``payload`` until the
    transfer (``amaranth.lib.stream`` rules)."""
    stalled, held = _stalled_last_cycle(m, port, name)
    with m.If(stalled):
        m.d.comb += Assume(port.valid & (Value.cast(port.payload) == held))


def assert_stream_rules(m, port, *, name: str) -> None:
    """The design's side of an output stream: once ``valid`` it stays so, payload unchanged,
    until ``ready`` (a flit offered is never withdrawn or altered)."""
    stalled, held = _stalled_last_cycle(m, port, name)
    with m.If(stalled):
        m.d.comb += Assert(port.valid & (Value.cast(port.payload) == held),
                           f"{name}: valid or payload changed before ready")


class ShadowQueue:
    """A reference FIFO in the harness: what an output must deliver, in order, exactly once.

    ``push``/``push_value``: a flit the output owes (e.g. an input transfer routed to it, or the
    golden sum of a joint transfer); ``pop``/``pop_value``: the output's transfer. Asserts, every
    cycle: no transfer while nothing is owed (no duplicate, no invented flit), every transfer
    equals the oldest owed flit (none lost, reordered or corrupted), and at most ``depth`` flits
    are owed (the design cannot hide more than its capacity).

    Members after construction: ``count`` (flits owed), ``entries`` (oldest first), ``head``.
    """

    def __init__(self, m, *, name: str, width: int, depth: int, push, push_value, pop, pop_value):
        self.depth = depth
        entries = [Signal(width, name=f"{name}_owed{k}") for k in range(depth)]
        self.count = count = Signal(range(depth + 2), name=f"{name}_count")
        self.head = entries[0]
        self.entries = entries
        m.d.comb += [
            Assert(~pop | (count != 0), f"{name}: a transfer nobody sent (duplicate or invented)"),
            Assert(~pop | (count == 0) | (Value.cast(pop_value) == entries[0]),
                   f"{name}: transfer differs from the oldest owed flit (lost, reordered or corrupt)"),
            Assert(count <= depth, f"{name}: more than {depth} flits owed (one was lost)"),
        ]
        after_pop = Signal(range(depth + 2), name=f"{name}_after_pop")
        m.d.comb += after_pop.eq(Mux(pop & (count != 0), count - 1, count))
        for k in range(depth):
            shifted = Mux(pop, entries[k + 1] if k + 1 < depth else 0, entries[k])
            with m.If(push & (after_pop == k)):
                m.d.sync += entries[k].eq(push_value)
            with m.Else():
                m.d.sync += entries[k].eq(shifted)
        with m.If(count <= depth):  # saturate: the assertion above has already failed
            m.d.sync += count.eq(after_pop + push)


def assert_progress(m, queue: ShadowQueue, port, *, bound: int, name: str, ready=None):
    """While ``ready`` (default ``port.ready``; pass the AND of every output's ready when outputs
    share flits) stays high and flits are owed, ``port`` transfers within ``bound`` cycles (a
    design that silently drops a flit and goes quiet fails here). Returns the counter."""
    waiting = Signal(range(bound + 2), name=f"{name}_waiting")
    ready = port.ready if ready is None else ready
    with m.If((queue.count != 0) & ready & ~fire(port)):
        with m.If(waiting <= bound):
            m.d.sync += waiting.eq(waiting + 1)
    with m.Else():
        m.d.sync += waiting.eq(0)
    m.d.comb += Assert(waiting <= bound, f"{name}: owed flits but no transfer for {bound} ready cycles")
    return waiting


def assert_valid_without_ready(m, queue: ShadowQueue, port, *, latency: int, name: str):
    """``valid`` never waits for ``ready``: with ``port.ready`` low since reset, the first owed
    flit is offered (``valid`` high) ``latency`` cycles after the transfer that made it owed (it
    counts as owed from the next cycle on), and stays offered."""
    ever_ready = Signal(name=f"{name}_ever_ready")
    age = Signal(range(latency + 2), name=f"{name}_first_age")
    owed = Signal(name=f"{name}_ever_owed")
    m.d.sync += ever_ready.eq(ever_ready | port.ready)
    with m.If(owed | (queue.count != 0)):
        m.d.sync += owed.eq(1)
        with m.If(age <= latency):
            m.d.sync += age.eq(age + 1)
    with m.If(~ever_ready & (age + 1 >= latency) & (owed | (queue.count != 0))):
        m.d.comb += Assert(port.valid, f"{name}: valid waits for ready")
    return age
