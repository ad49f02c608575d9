"""A controller's check of the reduced gradient flits it receives in a reduce-out: each of its
trees' flits in order, each the sum of every NPU's contribution."""

from __future__ import annotations

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh_io import (STORE_SEQ_BITS, STORE_VALUE_BITS, TREE_BITS, MeshIoSpec, store_seq_bits,
                                   store_sum_factors)
from hdl.contracts.npu_engine import HASH_MULTIPLIER
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .io_checker import count_checked_flits

__all__ = ["StoreChecker"]


class StoreChecker(wiring.Component):
    """Controller ``index``'s sink: a flit is good when its tree is one of the controller's two
    (``2 index + vc``), it came on the tree's VC, its index is the next of that tree (a lost,
    duplicated or reordered flit is a gap), its value is ``store_sum`` (every NPU's
    ``store_value`` added once: a lost, doubled or misplaced contribution changes it), and no
    more than ``expect`` arrived.

    Parameters: spec (:class:`MeshIoSpec`), index (controller k).

    Members: ``start`` (clears the counters), ``i`` (In link: the wire from the router's
    outward port), ``expect`` (In(32)), ``received``, ``errors``, ``first_error`` (Out(32): the
    arrival number of the first bad flit, from 1; 0: none), ``complete`` (Out(1)).

    fp16 (``spec.mesh.dtype``): the index has ``store_seq_bits("fp16")`` bits and the value is
    not checked here but hashed per tree, ``hash[vc] = (hash[vc] ^ value) * HASH_MULTIPLIER``
    (``hdl.contracts.npu_engine.fold_hash``) in arrival order, which is index order; the run
    compares ``hash`` (Out(32).array(2)) with the golden model's
    (``hdl.compiler.mesh_io_program.store_fp16_sums``).

    Never backpressures (the controller writes what arrives to its memory): the caller returns
    each flit's credit on arrival. Counters move the cycle after the flit.
    """

    def __init__(self, *, spec: MeshIoSpec, index: int):
        self.spec, self.index = spec, index
        self.fp16 = spec.mesh.dtype == "fp16"
        super().__init__({
            "start": In(1), "i": In(link_signature(struct_layout(spec.mesh.flit.fields))),
            "expect": In(32), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "complete": Out(1), **({"hash": Out(32).array(2)} if self.fp16 else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        sb, tb, vb = STORE_SEQ_BITS, TREE_BITS, STORE_VALUE_BITS
        fsb = store_seq_bits(self.spec.mesh.dtype)
        next_seq = Array(Signal(fsb, name=f"next{v}") for v in range(2))
        data = self.i.payload.data
        seq, tree, value = data[:fsb], data[sb:sb + tb], data[sb + tb:sb + tb + vb]
        a, b, c = store_sum_factors(self.spec.mesh.npus)
        right = 1 if self.fp16 else value == (seq * a + tree * b + c)[:vb]
        good = Signal()
        m.d.comb += [
            good.eq((tree[1:] == self.index) & (self.i.payload.vc == tree[0]) & (seq == next_seq[tree[0]])
                    & right & (self.received != self.expect)),
        ]
        count_checked_flits(m, self, valid=self.i.valid, good=good)
        with m.If(self.start):
            m.d.sync += [n.eq(0) for n in next_seq]
            if self.fp16:
                m.d.sync += [h.eq(0) for h in self.hash]
        with m.Elif(self.i.valid):
            m.d.sync += next_seq[tree[0]].eq(seq + 1)
            if self.fp16:
                hashes = Array(self.hash)
                m.d.sync += hashes[tree[0]].eq(((hashes[tree[0]] ^ value) * HASH_MULTIPLIER)[:32])
        return m
