"""An NPU's check of every I/O flit it receives: each tree's flits in order, uncorrupted."""

from __future__ import annotations

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh_io import CHECK_BITS, SEQ_BITS, TREE_BITS, MeshIoSpec
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["IoChecker", "count_checked_flits"]


def count_checked_flits(m: Module, checker, *, valid, good) -> None:
    """The counters every mesh I/O checker keeps (:class:`IoChecker`, the store and spill
    checkers): ``checker.start`` clears ``received``, ``errors`` and ``first_error``; a flit
    (``valid``) counts in ``received`` and, when not ``good``, in ``errors``, the first bad one's
    arrival number (from 1) in ``first_error``; ``complete`` is ``received == expect``. The
    checker's own per-flit state (its sequence counters) is its own."""
    m.d.comb += checker.complete.eq(checker.received == checker.expect)
    with m.If(checker.start):
        m.d.sync += [checker.received.eq(0), checker.errors.eq(0), checker.first_error.eq(0)]
    with m.Elif(valid):
        m.d.sync += checker.received.eq(checker.received + 1)
        with m.If(~good):
            m.d.sync += checker.errors.eq(checker.errors + 1)
            with m.If(checker.first_error == 0):
                m.d.sync += checker.first_error.eq(checker.received + 1)


class IoChecker(wiring.Component):
    """Checks the flits a router ejects to its NPU (``hdl.contracts.mesh_io``'s word): the
    tree exists, its VC is the tree's (``tree % 2``), the flit's index is the next of that
    tree (one counter per tree: a lost, duplicated or reordered flit is a gap), the check bits
    match, and no more than ``expect`` flits arrive.

    Parameters: spec (:class:`MeshIoSpec`).

    Members: ``start`` (clears the counters), ``eject`` (In link: the router's local output),
    ``expect`` (In(32)), ``received`` (Out(32)), ``errors`` (Out(32): bad flits),
    ``first_error`` (Out(32): the arrival number of the first bad flit, from 1; 0: none),
    ``complete`` (Out(1): ``received == expect``).

    Latency: counters move the cycle after the flit. Never backpressures (the flit is in the
    NPU's memory).
    """

    def __init__(self, *, spec: MeshIoSpec):
        self.spec = spec
        super().__init__({
            "start": In(1), "eject": In(link_signature(struct_layout(spec.mesh.flit.fields))),
            "expect": In(32), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "complete": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        next_seq = Array(Signal(SEQ_BITS, name=f"next{t}") for t in range(self.spec.trees))
        data = self.eject.payload.data
        seq, tree = data[:SEQ_BITS], data[SEQ_BITS:SEQ_BITS + TREE_BITS]
        check = data[32:32 + CHECK_BITS]
        good = Signal()
        m.d.comb += [
            good.eq((tree < self.spec.trees) & (self.eject.payload.vc == tree[0])
                    & (seq == next_seq[tree])
                    & (check == seq[:CHECK_BITS] ^ seq[3:3 + CHECK_BITS] ^ tree[:CHECK_BITS])
                    & (self.received != self.expect)),
        ]
        count_checked_flits(m, self, valid=self.eject.valid, good=good)
        with m.If(self.start):
            m.d.sync += [n.eq(0) for n in next_seq]
        with m.Elif(self.eject.valid & (tree < self.spec.trees)):
            m.d.sync += next_seq[tree].eq(seq + 1)   # resynchronise: one gap, one error
        return m
