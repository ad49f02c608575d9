"""The I/O controllers of the 2D mesh: where they sit, the trees they stream over, the flit word
(docs/mesh_rtl.md, "I/O controllers on the mesh").

Pure Python (no Amaranth). The system model (``sysmodel.mesh.MeshNetwork``) and the RTL
(``hdl/designs/mesh/mesh_io_top.py``) place the controllers with the same function,
:func:`edge_io_ports`, and the RTL's trees are the model's (the union of the dimension-order
routes from the controller's NPU to every NPU, ``sysmodel.network.Traffic.tree_links``).

Weight streaming (the model's ``io-load``): every controller holds ``1 / controllers`` of the
data (its stripe) and broadcasts it to every NPU over a tree rooted at the NPU it is attached
to; every NPU keeps what arrives (it is the weights it needs) and forwards it to its children
in the tree. Two trees per controller: the X-Y tree (VC 0) and the Y-X tree (VC 1); the model
sends all of a stripe on one of them or half on each (:data:`IO_MODES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, NORTH, ROUTER_LATENCY, SOUTH, WEST, MeshFabricSpec, check_link_rate
from hdl.contracts.timing import FLOAT_ADDER_STAGES

__all__ = ["edge_io_ports", "IO_MODES", "MeshIoSpec", "SEQ_BITS", "TREE_BITS", "CHECK_BITS",
           "STORE_SEQ_BITS", "STORE_VALUE_BITS", "store_value", "store_sum", "store_sum_factors", "store_word",
           "REDUCE_LATENCY", "reduce_member_cycles", "STORE_DIR_BITS", "FP16_REDUCE_LEVELS", "store_seq_bits",
           "store_value_fp16",
           "io_word", "io_check", "SPILL_OPS", "SPILL_SEQ_BITS", "SPILL_NPU_BITS", "spill_word", "spill_check"]

#: How a controller's stripe is split between its two trees: all X-Y, all Y-X, or half each
#: (alternate flits). The model's names (``sysmodel.collectives._mesh_io``).
IO_MODES = ("tree-xy", "tree-yx", "tree-split")

#: The I/O flit's 32-bit word: the flit's index in its tree (low bits) and the tree (high).
SEQ_BITS = 24
TREE_BITS = 6
#: Check bits in the rest of the mesh flit's data field (``io_check``).
CHECK_BITS = 3


def edge_io_ports(rows: int, cols: int, n: int) -> list[tuple[int, int, int]]:
    """``(row, col, side)`` of each of ``n`` controllers on the free boundary ports of an
    ``rows`` x ``cols`` mesh: the north side of row 0 (west to east), the east side of the last
    column (north to south), the south side of the last row (east to west), the west side of
    column 0 (south to north), spread evenly when ``n`` is smaller than the ``2 (rows + cols)``
    ports. ``side`` is the router port (``hdl.contracts.mesh.NORTH`` ...) the controller's link
    enters by."""
    ports = ([(0, c, NORTH) for c in range(cols)]
             + [(r, cols - 1, EAST) for r in range(rows)]
             + [(rows - 1, c, SOUTH) for c in reversed(range(cols))]
             + [(r, 0, WEST) for r in reversed(range(rows))])
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(ports):
        raise FredError(f"{n!r} I/O controllers do not fit the {len(ports)} boundary ports of a "
                        f"{rows} x {cols} mesh")
    return [ports[(k * len(ports)) // n] for k in range(n)]


def io_check(seq: int, tree: int) -> int:
    """The :data:`CHECK_BITS` check bits of flit ``seq`` of ``tree`` (a corrupted index or tree
    bit shows as a wrong check, a wrong index as a gap)."""
    return (seq ^ (seq >> 3) ^ tree) & ((1 << CHECK_BITS) - 1)


def io_word(seq: int, tree: int) -> int:
    """The 32-bit word of flit ``seq`` of ``tree`` (tree ``2 k + vc`` of controller k)."""
    return seq | tree << SEQ_BITS


@dataclass(frozen=True)
class MeshIoSpec:
    """The mesh with I/O controllers (the RTL top ``fred_mesh_io``).

    Parameters (keyword-only, validated): ``mesh`` (:class:`MeshFabricSpec`: its rows, cols,
    link rate, link latency, router depth); ``controllers`` on the edge (:func:`edge_io_ports`;
    the paper's 18 on 5 x 4); ``io_rate`` (a, b): a controller's link carries a flits every b
    cycles (one cycle moves one flit through an NPU's 3 TBps port: 128 GBps is (16, 375));
    ``queue_depth``: flits an NPU holds per neighbour direction between receiving and forwarding
    (part of its memory; every arriving flit is taken at once, so the program refuses a stripe
    whose forwarded flits might not fit).
    """

    mesh: MeshFabricSpec = MeshFabricSpec()
    controllers: int = 18
    io_rate: tuple = (16, 375)
    queue_depth: int = 2048

    def __post_init__(self):
        if not isinstance(self.mesh, MeshFabricSpec):
            raise FredError(f"MeshIoSpec.mesh must be a MeshFabricSpec, got {self.mesh!r}")
        if isinstance(self.controllers, bool) or not isinstance(self.controllers, int) or self.controllers < 1:
            raise FredError(f"controllers must be an integer >= 1, got {self.controllers!r}")
        edge_io_ports(self.mesh.rows, self.mesh.cols, self.controllers)
        if 2 * self.controllers > 1 << TREE_BITS:
            raise FredError(f"{self.controllers} controllers need {2 * self.controllers} trees; the "
                            f"flit word names {1 << TREE_BITS}")
        object.__setattr__(self, "io_rate", check_link_rate(self.io_rate))
        if isinstance(self.queue_depth, bool) or not isinstance(self.queue_depth, int) or not 2 <= self.queue_depth <= 1 << 16:
            raise FredError(f"queue_depth must be an integer in 2..65536, got {self.queue_depth!r}")

    @property
    def trees(self) -> int:
        return 2 * self.controllers

    def ports(self) -> list[tuple[int, int, int]]:
        return edge_io_ports(self.mesh.rows, self.mesh.cols, self.controllers)

    def attach_rank(self, k: int) -> int:
        """The NPU controller ``k`` is attached to."""
        row, col, _ = self.ports()[k]
        return row * self.mesh.cols + col


# Gradient reduce-out (the model's ``io-store``): every NPU holds a contribution to every
# controller's stripe; each tree is reversed (children send to their parent, the root to the
# controller) and every NPU adds its children's flits to its own before sending. The mesh flit
# has no header beyond its 35-bit data field, so a store flit carries its tag in-band: the
# index in its tree (low STORE_SEQ_BITS), the tree (TREE_BITS), and a STORE_VALUE_BITS partial
# sum (the timing is the flit's; the sum is wrap-around, wide enough to catch a lost,
# duplicated or wrong contribution).
STORE_SEQ_BITS = 13
STORE_VALUE_BITS = 16
#: Cycles from a child's flit on the reducer's ``eject`` to the sum at its output
#: (``hdl.designs.mesh.reduce_forwarder.ReduceForwarder``: the sum enters the send queue the
#: cycle after the last child's flit, and leaves the buffered queue the cycle after).
REDUCE_LATENCY = 2


#: fp16 reduce-out: a member adds its children's slots and its own value in a fixed order,
#: ((N + E) + (S + W)) + own, three levels of the project's pipelined adder
#: (``hdl.designs.mesh.fp16_reduce_sum.Fp16ReduceSum``).
FP16_REDUCE_LEVELS = 3
#: fp16 reduce-out: the low STORE_SEQ_BITS of a store flit are its index (low) and the slot
#: (the direction it arrives from at the receiver, N/E/S/W = 0..3) it fills there (high
#: STORE_DIR_BITS): the order of an fp16 sum cannot be the children's arrival order.
STORE_DIR_BITS = 2


def store_seq_bits(dtype: str = "int32") -> int:
    """Bits of a store flit's index: :data:`STORE_SEQ_BITS`, less :data:`STORE_DIR_BITS` in fp16."""
    return STORE_SEQ_BITS - (STORE_DIR_BITS if dtype == "fp16" else 0)


def reduce_member_cycles(dtype: str = "int32") -> int:
    """Cycles a reducing NPU adds to a store flit's path beyond the link into it (a wire and
    the sending router, ``hdl.contracts.mesh.router_latency`` + ``link_latency``): its own
    router to the local output and its reducer (:data:`REDUCE_LATENCY`): 4; in fp16 also its
    :data:`FP16_REDUCE_LEVELS` adder levels (6 cycles each): 22. The model's platform of the
    RTL mesh charges it per member on the deepest leaf's path
    (``sysmodel.mesh_rtl_model.mesh_io_platform``)."""
    adders = FP16_REDUCE_LEVELS * FLOAT_ADDER_STAGES if dtype == "fp16" else 0
    return ROUTER_LATENCY + REDUCE_LATENCY + adders


def store_value(rank: int, tree: int, seq: int) -> int:
    """NPU ``rank``'s contribution to flit ``seq`` of ``tree``: linear in the index and the
    tree with odd per-rank factors, so the sum over the NPUs (:func:`store_sum`) is cheap in
    logic and a missing or duplicated NPU, or a wrong index, changes it."""
    return (seq * (2 * rank + 1) + tree * (4 * rank + 3) + 7 * rank + 1) & ((1 << STORE_VALUE_BITS) - 1)


def store_value_fp16(rank: int, tree: int, seq: int) -> int:
    """NPU ``rank``'s fp16 contribution (bit pattern) to flit ``seq`` of ``tree``: sign
    ``seq ^ tree ^ rank`` (bit 0), exponent 14 + bit 1 of the same, fraction the low 10 bits
    of :func:`store_value` -- magnitudes 1/2 .. 2, never zero, so sums of 20 stay finite and no
    -0 arises (an exact cancellation gives +0)."""
    mix = seq ^ tree ^ rank
    return (mix & 1) << 15 | (14 + (mix >> 1 & 1)) << 10 | store_value(rank, tree, seq) & 0x3FF


def store_sum(npus: int, tree: int, seq: int) -> int:
    """What the controller of ``tree`` must receive as flit ``seq``: every NPU's
    :func:`store_value` added, wrapped to STORE_VALUE_BITS."""
    return sum(store_value(r, tree, seq) for r in range(npus)) & ((1 << STORE_VALUE_BITS) - 1)


def store_sum_factors(npus: int) -> tuple[int, int, int]:
    """``(a, b, c)`` with ``store_sum(npus, t, i) == (a i + b t + c) mod 2^STORE_VALUE_BITS``."""
    return (sum(2 * r + 1 for r in range(npus)), sum(4 * r + 3 for r in range(npus)),
            sum(7 * r + 1 for r in range(npus)))


def store_word(seq: int, tree: int, value: int) -> int:
    """The data field of a store flit."""
    return seq | tree << STORE_SEQ_BITS | value << (STORE_SEQ_BITS + TREE_BITS)


# Checkpoint spills (the model's ``io-write`` / ``io-read``): every NPU writes its own stripe to
# each controller, or reads it back, as unicasts (no tree, nothing added). A spill flit names
# its flit index in the stripe (low SPILL_SEQ_BITS), the NPU whose stripe it is
# (SPILL_NPU_BITS) and the controller (TREE_BITS - 1 bits above), so the receiver checks which
# NPU, which controller and which flit; check bits (:func:`spill_check`) in the rest of the data
# field, where io-load keeps its :func:`io_check`.
#: The spill ops, in the order of the spill top's ``mode`` register.
SPILL_OPS = ("io-write", "io-read")
SPILL_SEQ_BITS = 16
SPILL_NPU_BITS = 8


def spill_word(seq: int, npu: int, controller: int) -> int:
    """The 32-bit word of flit ``seq`` of NPU ``npu``'s stripe at ``controller``."""
    return seq | npu << SPILL_SEQ_BITS | controller << (SPILL_SEQ_BITS + SPILL_NPU_BITS)


def spill_check(seq: int, npu: int, controller: int) -> int:
    """The :data:`CHECK_BITS` check bits of a spill flit (a corrupted index, NPU or controller
    bit shows as a wrong check, a wrong index as a gap)."""
    return (seq ^ (seq >> 3) ^ npu ^ controller) & ((1 << CHECK_BITS) - 1)
