"""An NPU's side of a gradient reduce-out (``io-store``): its children's partial sums of each
reduce tree added to its own, sent on to the parent (docs/mesh_rtl.md, "I/O controllers on the
mesh")."""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS, PORT_NAMES
from hdl.contracts.mesh_io import (STORE_DIR_BITS, STORE_SEQ_BITS, STORE_VALUE_BITS, TREE_BITS, MeshIoSpec,
                                   store_seq_bits)
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .fp16_reduce_sum import Fp16ReduceSum
from .rate_token import RateToken

__all__ = ["ReduceForwarder", "LEAF_ORDERS"]

#: The order in which an NPU interleaves its leaf trees' own values, flit ``i`` of each in
#: turn: ``tree`` (tree index, the build's default), ``farthest-first`` (the trees whose
#: controller is farthest from this NPU first), ``nearest-first`` (nearest first). Only the
#: latency-bound reduce-out depends on it (docs/mesh_rtl.md, "Gradient reduce-out": which
#: flit crosses the busiest link last).
LEAF_ORDERS = ("tree", "farthest-first", "nearest-first")

_STEP = {1: (0, -1), 2: (1, 0), 3: (0, 1), 4: (-1, 0)}   # NORTH, EAST, SOUTH, WEST
_OPPOSITE = {1: 3, 2: 4, 3: 1, 4: 2}


class ReduceForwarder(wiring.Component):
    """NPU ``rank``'s reduce: for tree ``t`` it waits for flit ``i`` from each of its
    ``len(children[t])`` children, adds them and its own ``store_value(rank, t, i)``, and sends
    the sum one hop to ``parents[t]`` (a neighbour, or out of the mesh to the controller at the
    root), on VC ``t % 2``. A leaf of ``t`` sends its own values, ``i`` = 0, 1, ... (leaf trees
    interleaved flit by flit).

    Parameters: spec (:class:`MeshIoSpec`), rank, children (per tree, the ports of
    ``hdl.compiler.mesh_io_program.tree_children``), parents (per tree,
    ``tree_parents``), max_stripe (flits per tree the partial-sum memory holds; a power of two),
    leaf_order (:data:`LEAF_ORDERS`: the order of the leaf trees at each index; ties keep the
    tree order).

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

    fp16 (``spec.mesh.dtype``): an fp16 sum depends on the order of its additions, so an entry
    holds one slot per direction a child's flit arrives from (the sender writes that direction
    into the flit's ``STORE_DIR_BITS``, above an index of ``store_seq_bits("fp16")`` bits) and
    presence bits; the last child's flit sends the slots and the NPU's own
    ``store_value_fp16`` through :class:`Fp16ReduceSum` (+18 cycles) into the send queue.
    """

    def __init__(self, *, spec: MeshIoSpec, rank: int, children, parents, max_stripe: int,
                 leaf_order: str = "tree"):
        if len(children) != spec.trees or len(parents) != spec.trees:
            raise FredError(f"ReduceForwarder needs children and parents for {spec.trees} trees")
        if leaf_order not in LEAF_ORDERS:
            raise FredError(f"leaf_order must be one of {', '.join(LEAF_ORDERS)}, got {leaf_order!r}")
        if max_stripe < 1 or max_stripe & (max_stripe - 1) or max_stripe > 1 << STORE_SEQ_BITS:
            raise FredError(f"max_stripe must be a power of two <= {1 << STORE_SEQ_BITS}, got {max_stripe!r}")
        self.spec, self.rank, self.max_stripe = spec, rank, max_stripe
        self.children, self.parents = [len(c) for c in children], list(parents)
        self.child_ports = [tuple(c) for c in children]
        self.fp16 = spec.mesh.dtype == "fp16"
        self.leaves = [t for t, n in enumerate(self.children) if n == 0]
        if leaf_order != "tree":
            self.leaves.sort(key=self._hops_to_controller, reverse=leaf_order == "farthest-first")
        self.flit = spec.mesh.flit
        shape = struct_layout(self.flit.fields)
        super().__init__({"start": In(1), "per_tree": In(STORE_SEQ_BITS).array(spec.trees),
                          "eject": In(link_signature(shape)), "o": Out(link_signature(shape)),
                          "credit": In(MESH_VCS), "hold": In(1), "overflow": Out(1), "idle": Out(1)})

    def _hops_to_controller(self, tree: int) -> int:
        """Mesh hops from this NPU to the NPU tree ``tree``'s controller is attached to (the
        dimension-order routes are shortest)."""
        (x, y) = self.spec.mesh.position(self.rank)
        ax, ay = self.spec.mesh.position(self.spec.attach_rank(tree // 2))
        return abs(ax - x) + abs(ay - y)

    def _dest(self, tree: int) -> tuple[int, int]:
        x, y = self.spec.mesh.position(self.rank)
        dx, dy = _STEP[self.parents[tree]]
        return x + dx, y + dy

    def _own(self, tree, seq):
        """``store_value(rank, tree, seq)`` in logic (constant factors)."""
        r = self.rank
        return (seq * (2 * r + 1) + tree * (4 * r + 3) + 7 * r + 1)[:STORE_VALUE_BITS]

    def _own_fp16(self, tree, seq):
        """``store_value_fp16(rank, tree, seq)`` in logic."""
        mix = seq ^ tree ^ self.rank
        return Cat(self._own(tree, seq)[:10], mix[1], Const(0b0111, 4), mix[0])

    def _fp16_sums(self, m, seq, tree, value, address):
        """fp16: the slot memory and the fixed-order sum (class docstring); returns ``(valid,
        word)`` of a completed sum, :data:`Fp16ReduceSum.latency` cycles after its last
        child's flit, the word addressed to the tree's parent."""
        sb, tb, vb = STORE_SEQ_BITS, TREE_BITS, STORE_VALUE_BITS
        fsb = store_seq_bits("fp16")
        slot = self.eject.payload.data[fsb:sb]
        mem = m.submodules.slots = Memory(shape=4 * vb + 4, depth=self.spec.trees * self.max_stripe, init=[])
        rd, wr = mem.read_port(domain="comb"), mem.write_port()
        need = Array(Const(sum(1 << (p - 1) for p in ports), 4) for ports in self.child_ports)
        present = Signal(4)
        slots = [Signal(vb, name=f"slot{j}") for j in range(4)]
        done = Signal()
        m.d.comb += [rd.addr.eq(address), wr.addr.eq(rd.addr), wr.en.eq(self.eject.valid),
                     present.eq(rd.data[4 * vb:] | (1 << slot)),
                     *(s.eq(Mux(slot == j, value, rd.data[j * vb:(j + 1) * vb])) for j, s in enumerate(slots)),
                     done.eq(present == need[tree]),
                     wr.data.eq(Mux(done, 0, Cat(*slots, present)))]
        adder = m.submodules.fp16_sum = Fp16ReduceSum(tag_width=fsb + tb)
        m.d.comb += [adder.valid.eq(self.eject.valid & done), adder.own.eq(self._own_fp16(tree, seq)),
                     adder.tag.eq(Cat(seq, tree)), *(adder.slots[j].eq(s) for j, s in enumerate(slots))]
        out_seq, out_tree = adder.o_tag[:fsb], adder.o_tag[fsb:]
        return adder.o_valid, out_tree, Cat(out_seq, self._arrival_slot(out_tree), out_tree, adder.o_value)

    def _arrival_slot(self, tree):
        """The slot (direction - 1) a flit of ``tree`` sent to this NPU's parent fills there."""
        return Array(Const(_OPPOSITE[p] - 1 if p in _OPPOSITE else 0, STORE_DIR_BITS)
                     for p in self.parents)[tree]

    def elaborate(self, platform) -> Module:
        m = Module()
        sb, tb, vb = STORE_SEQ_BITS, TREE_BITS, STORE_VALUE_BITS
        data = self.eject.payload.data
        seq, tree, value = data[:sb], data[sb:sb + tb], data[sb + tb:sb + tb + vb]
        abits = (self.max_stripe - 1).bit_length()
        if self.fp16:
            seq = data[:store_seq_bits("fp16")]
            fp_valid, fp_tree, fp_word = self._fp16_sums(m, seq, tree, value, Cat(seq[:abits], tree) if abits else tree)
        else:
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
        parent = Array(Const(p, 3) for p in self.parents)
        sources = []      # per direction: its queue of completed sums, then its leaf values
        idle = []
        for port in sorted(set(self.parents)):
            name = PORT_NAMES[port]
            queue = m.submodules[f"queue_{name}"] = fifo.SyncFIFOBuffered(width=width, depth=self.spec.queue_depth)
            rate = m.submodules[f"rate_{name}"] = RateToken(self.spec.mesh.link_rate)
            if self.fp16:
                m.d.comb += [queue.w_data.eq(fp_word), queue.w_en.eq(fp_valid & (parent[fp_tree] == port))]
            else:
                m.d.comb += [queue.w_data.eq(Cat(seq, tree, total + self._own(tree, seq))),
                             queue.w_en.eq(self.eject.valid & done & (parent[tree] == port))]
            with m.If(queue.w_en & ~queue.w_rdy):
                m.d.sync += self.overflow.eq(1)
            sources.append((queue.r_rdy, queue.r_data, queue.r_en, rate))
            leaves = [t for t in self.leaves if self.parents[t] == port]
            gen_seq, gen_tree, gen_more, gen_pending, advance = self._leaf_generator(m, leaves, name)
            if self.fp16:
                fsb = store_seq_bits("fp16")
                leaf = Cat(gen_seq[:fsb], self._arrival_slot(gen_tree), gen_tree, self._own_fp16(gen_tree, gen_seq))
            else:
                leaf = Cat(gen_seq, gen_tree, self._own(gen_tree, gen_seq))
            sources.append((gen_more, leaf, advance, rate))
            idle += [~queue.r_rdy, ~gen_pending]
        self._send(m, sources)
        m.d.comb += self.idle.eq(Cat(*idle).all())
        return m

    def _send(self, m, sources):
        """Round robin over the sources that can send (data, their direction's rate token, a
        credit of their VC): each direction paced at its link's rate, so the router's shared
        local input never holds one direction's flit behind another's (as ``TreeForwarder``)."""
        sb, tb = STORE_SEQ_BITS, TREE_BITS
        credits = [Signal(range(self.spec.mesh.depth + 2), init=self.spec.mesh.depth, name=f"credits{v}")
                   for v in range(MESH_VCS)]
        has = Cat(*(c != 0 for c in credits))
        ready = [Signal(name=f"ready{j}") for j in range(len(sources))]
        for r, (valid, data, _, rate) in zip(ready, sources):
            m.d.comb += r.eq(valid & rate.token & has.bit_select(data[sb], 1))
        n = len(sources)
        last, pick = Signal(range(max(n, 2))), Signal(range(max(n, 2)))
        go = Signal()
        m.d.comb += go.eq(Cat(*ready).any() & ~self.hold)
        for after in range(n):
            with m.If(last == after):
                for j in reversed([(after + 1 + i) % n for i in range(n)]):
                    with m.If(ready[j]):
                        m.d.comb += pick.eq(j)
        with m.If(go):
            m.d.sync += last.eq(pick)
        dests = Array(Cat(Const(x, self.flit.coord_bits), Const(y, self.flit.coord_bits))
                      for x, y in (self._dest(t) for t in range(self.spec.trees)))
        out = Signal(len(sources[0][1]))
        spend = {}
        for j, (_, data, pop, rate) in enumerate(sources):
            chosen = go & (pick == j)
            m.d.comb += pop.eq(chosen)
            spend.setdefault(id(rate), (rate, []))[1].append(chosen)
            with m.If(chosen):
                m.d.comb += out.eq(data)
        for rate, chosen in spend.values():
            m.d.comb += rate.spend.eq(Cat(*chosen).any())
        vc = out[sb]
        m.d.comb += [self.o.valid.eq(go), self.o.payload.data.eq(out), self.o.payload.vc.eq(vc),
                     self.o.payload.last.eq(1),
                     Cat(self.o.payload.dest_x, self.o.payload.dest_y).eq(dests[out[sb:sb + tb]])]
        for v, count in enumerate(credits):
            m.d.sync += count.eq(count - (go & (vc == v)) + self.credit[v])

    def _leaf_generator(self, m, leaf_trees, name):
        """The leaf trees' own values, flit ``i`` of every leaf tree that has one, then ``i + 1``:
        ``(seq, tree, more, pending)`` (``more``: this one is due; ``pending``: some still are);
        ``leaf_trees``: the trees it serves; advances on the returned ``advance``."""
        sb = STORE_SEQ_BITS
        advance = Signal(name=f"leaf_advance_{name}")
        seq, tree = Signal(sb, name=f"leaf_seq_{name}"), Signal(TREE_BITS, name=f"leaf_tree_{name}")
        more, pending = Signal(name=f"leaf_more_{name}"), Signal(name=f"leaf_pending_{name}")
        if not leaf_trees:
            return seq, tree, more, pending, advance
        n = len(leaf_trees)
        index = Signal(range(max(n, 2)), name=f"leaf_index_{name}")
        started = Signal(name=f"leaf_started_{name}")
        leaves = Array(Const(t, TREE_BITS) for t in leaf_trees)
        m.d.comb += [tree.eq(leaves[index]), more.eq(started & (seq < Array(self.per_tree)[tree])),
                     pending.eq(started & Cat(*(seq < self.per_tree[t] for t in self.leaves)).any())]
        with m.If(self.start):
            m.d.sync += [seq.eq(0), index.eq(0), started.eq(1)]
        with m.Elif(advance | (pending & ~more)):
            # next leaf tree at this index; after the last one, the next index (a leaf tree
            # with fewer flits is skipped)
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), seq.eq(seq + 1)]
            with m.Else():
                m.d.sync += index.eq(index + 1)
        return seq, tree, more, pending, advance
