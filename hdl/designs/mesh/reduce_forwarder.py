"""An NPU's side of a gradient reduce-out (``io-store``): its children's partial sums of each
reduce tree added to its own, sent on to the parent (docs/mesh_rtl.md, "I/O controllers on the
mesh")."""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS
from hdl.contracts.mesh_io import STORE_SEQ_BITS, STORE_VALUE_BITS, TREE_BITS, MeshIoSpec
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["ReduceForwarder"]

_STEP = {1: (0, -1), 2: (1, 0), 3: (0, 1), 4: (-1, 0)}   # NORTH, EAST, SOUTH, WEST


class ReduceForwarder(wiring.Component):
    """NPU ``rank``'s reduce: for tree ``t`` it waits for flit ``i`` from each of its
    ``len(children[t])`` children, adds them and its own ``store_value(rank, t, i)``, and sends
    the sum one hop to ``parents[t]`` (a neighbour, or out of the mesh to the controller at the
    root), on VC ``t % 2``. A leaf of ``t`` sends its own values, ``i`` = 0, 1, ... (leaf trees
    interleaved flit by flit).

    Parameters: spec (:class:`MeshIoSpec`), rank, children (per tree, the ports of
    ``hdl.compiler.mesh_io_program.tree_children``), parents (per tree,
    ``tree_parents``), max_stripe (flits per tree the partial-sum memory holds; a power of two).

    Members: ``start`` (restarts the leaf generator), ``per_tree`` (In(STORE_SEQ_BITS).array:
    flits of each tree), ``eject`` (In link: the router's local output; never backpressured:
    every arrival is added in the cycle it comes), ``o`` (Out link into the router's local
    input), ``credit`` (In(2): its credit pulses), ``hold`` (In(1): send nothing this cycle),
    ``overflow`` (a completed sum found the send queue full), ``idle`` (nothing left to send).

    Memory: ``trees x max_stripe`` partial sums with an arrival count each, read
    combinationally and written the cycle after an arrival (back to zero when complete, so the
    memory is clean for the next run). Arrivals of one tree come from each child in index
    order, so a tree's sums complete, and are sent, in index order. Latency: a completed sum is
    in the send queue the cycle after its last child's flit, and leaves it the cycle after at
    the earliest (``SyncFIFOBuffered``).
    """

    def __init__(self, *, spec: MeshIoSpec, rank: int, children, parents, max_stripe: int):
        if len(children) != spec.trees or len(parents) != spec.trees:
            raise FredError(f"ReduceForwarder needs children and parents for {spec.trees} trees")
        if max_stripe < 1 or max_stripe & (max_stripe - 1) or max_stripe > 1 << STORE_SEQ_BITS:
            raise FredError(f"max_stripe must be a power of two <= {1 << STORE_SEQ_BITS}, got {max_stripe!r}")
        self.spec, self.rank, self.max_stripe = spec, rank, max_stripe
        self.children, self.parents = [len(c) for c in children], list(parents)
        self.leaves = [t for t, n in enumerate(self.children) if n == 0]
        self.flit = spec.mesh.flit
        shape = struct_layout(self.flit.fields)
        super().__init__({"start": In(1), "per_tree": In(STORE_SEQ_BITS).array(spec.trees),
                          "eject": In(link_signature(shape)), "o": Out(link_signature(shape)),
                          "credit": In(MESH_VCS), "hold": In(1), "overflow": Out(1), "idle": Out(1)})

    def _dest(self, tree: int) -> tuple[int, int]:
        x, y = self.spec.mesh.position(self.rank)
        dx, dy = _STEP[self.parents[tree]]
        return x + dx, y + dy

    def _own(self, tree, seq):
        """``store_value(rank, tree, seq)`` in logic (constant factors)."""
        r = self.rank
        return (seq * (2 * r + 1) + tree * (4 * r + 3) + 7 * r + 1)[:STORE_VALUE_BITS]

    def elaborate(self, platform) -> Module:
        m = Module()
        sb, tb, vb = STORE_SEQ_BITS, TREE_BITS, STORE_VALUE_BITS
        data = self.eject.payload.data
        seq, tree, value = data[:sb], data[sb:sb + tb], data[sb + tb:sb + tb + vb]
        abits = (self.max_stripe - 1).bit_length()
        mem = m.submodules.sums = Memory(shape=vb + 2, depth=self.spec.trees * self.max_stripe, init=[])
        rd, wr = mem.read_port(domain="comb"), mem.write_port()
        need = Array(Const(n, 2) for n in self.children)
        entry_sum, entry_count = rd.data[:vb], rd.data[vb:]
        total = Signal(vb)
        done = Signal()
        m.d.comb += [
            rd.addr.eq(Cat(seq[:abits], tree) if abits else tree),
            wr.addr.eq(rd.addr), wr.en.eq(self.eject.valid),
            total.eq(entry_sum + value),
            done.eq(entry_count + 1 == need[tree]),
            wr.data.eq(Mux(done, 0, Cat(total, entry_count + 1))),
        ]
        width = sb + tb + vb
        queue = m.submodules.queue = fifo.SyncFIFOBuffered(width=width, depth=self.spec.queue_depth)
        m.d.comb += [queue.w_data.eq(Cat(seq, tree, total + self._own(tree, seq))),
                     queue.w_en.eq(self.eject.valid & done)]
        with m.If(queue.w_en & ~queue.w_rdy):
            m.d.sync += self.overflow.eq(1)
        gen_seq, gen_tree, gen_more, gen_pending = self._leaf_generator(m)
        # the head of the send queue first (it frees memory upstream), else a leaf's own value
        use_queue = queue.r_rdy
        out_seq, out_tree = Signal(sb), Signal(tb)
        m.d.comb += [out_seq.eq(Mux(use_queue, queue.r_data[:sb], gen_seq)),
                     out_tree.eq(Mux(use_queue, queue.r_data[sb:sb + tb], gen_tree))]
        out_value = Mux(use_queue, queue.r_data[sb + tb:], self._own(out_tree, out_seq))
        credits = [Signal(range(self.spec.mesh.depth + 2), init=self.spec.mesh.depth, name=f"credits{v}")
                   for v in range(MESH_VCS)]
        vc = out_tree[0]
        go = Signal()
        m.d.comb += go.eq((use_queue | gen_more) & ~self.hold & Cat(*(c != 0 for c in credits)).bit_select(vc, 1))
        dests = Array(Cat(Const(x, self.flit.coord_bits), Const(y, self.flit.coord_bits))
                      for x, y in (self._dest(t) for t in range(self.spec.trees)))
        m.d.comb += [self.o.valid.eq(go), self.o.payload.data.eq(Cat(out_seq, out_tree, out_value)),
                     self.o.payload.vc.eq(vc), self.o.payload.last.eq(1),
                     Cat(self.o.payload.dest_x, self.o.payload.dest_y).eq(dests[out_tree]),
                     queue.r_en.eq(go & use_queue)]
        self._gen_step = go & ~use_queue
        m.d.comb += self._gen_advance.eq(self._gen_step)
        for v, count in enumerate(credits):
            m.d.sync += count.eq(count - (go & (vc == v)) + self.credit[v])
        m.d.comb += self.idle.eq(~queue.r_rdy & ~gen_pending)
        return m

    def _leaf_generator(self, m):
        """The leaf trees' own values, flit ``i`` of every leaf tree that has one, then ``i + 1``:
        ``(seq, tree, more, pending)`` (``more``: this one is due; ``pending``: some still are);
        advances on ``self._gen_advance``."""
        sb = STORE_SEQ_BITS
        self._gen_advance = Signal()
        seq, tree = Signal(sb), Signal(TREE_BITS)
        more, pending = Signal(), Signal()
        if not self.leaves:
            return seq, tree, more, pending
        n = len(self.leaves)
        index = Signal(range(max(n, 2)))
        started = Signal()
        leaves = Array(Const(t, TREE_BITS) for t in self.leaves)
        m.d.comb += [tree.eq(leaves[index]), more.eq(started & (seq < Array(self.per_tree)[tree])),
                     pending.eq(started & Cat(*(seq < self.per_tree[t] for t in self.leaves)).any())]
        with m.If(self.start):
            m.d.sync += [seq.eq(0), index.eq(0), started.eq(1)]
        with m.Elif(self._gen_advance | (pending & ~more)):
            # next leaf tree at this index; after the last one, the next index (a leaf tree
            # with fewer flits is skipped)
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), seq.eq(seq + 1)]
            with m.Else():
                m.d.sync += index.eq(index + 1)
        return seq, tree, more, pending
