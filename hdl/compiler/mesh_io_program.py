"""Weight streaming (the model's ``io-load``) on the RTL mesh with I/O controllers: the trees,
what each NPU forwards where, and what each NPU must receive (docs/mesh_rtl.md, "I/O
controllers on the mesh").

Tree ``2 k + vc`` of controller ``k`` is the union of the dimension-order routes (VC 0 X-Y,
VC 1 Y-X: :func:`hdl.contracts.mesh.route_hops`) from the NPU the controller is attached to to
every NPU: the model's tree (``sysmodel.collectives._mesh_io``). In it each NPU has 0 to 3
children, all neighbours: an NPU that receives a tree's flit keeps it and sends one copy to each
child (one hop each). Pure Python; the RTL is ``hdl/designs/mesh/mesh_io_top.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hdl.contracts.dtypes import get_dtype
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import LOCAL, VC_ORDERS, route_hops
from hdl.contracts.mesh import EAST, WEST
from hdl.contracts.mesh_io import IO_MODES, SEQ_BITS, SPILL_OPS, SPILL_SEQ_BITS, MeshIoSpec, store_seq_bits
from hdl.contracts.npu_engine import fold_hash

__all__ = ["tree_children", "tree_flits", "link_stripes", "IoLoadProgram", "io_load_program", "neighbour",
           "tree_parents", "IoStoreProgram", "io_store_program", "store_fp16_sums", "spill_dests",
           "spill_order", "IoSpillProgram", "io_spill_program"]

_STEP = {1: (0, -1), 2: (1, 0), 3: (0, 1), 4: (-1, 0)}   # NORTH, EAST, SOUTH, WEST


def tree_children(spec: MeshIoSpec) -> list[list[tuple[int, ...]]]:
    """``children[rank][tree]``: the router ports (``hdl.contracts.mesh`` numbering) by which
    NPU ``rank`` forwards tree ``tree``'s flits, in port order."""
    mesh = spec.mesh
    out = [[set() for _ in range(spec.trees)] for _ in range(mesh.npus)]
    for k in range(spec.controllers):
        root = mesh.position(spec.attach_rank(k))
        for vc, order in enumerate(VC_ORDERS):
            for rank in range(mesh.npus):
                for (x, y), _, port in route_hops(root, mesh.position(rank), order):
                    if port != LOCAL:
                        out[(y - 1) * mesh.cols + (x - 1)][2 * k + vc].add(port)
    return [[tuple(sorted(ports)) for ports in per_tree] for per_tree in out]


def tree_flits(spec: MeshIoSpec, stripe_flits: int, mode: str) -> list[int]:
    """Flits of each tree when every controller streams ``stripe_flits`` in ``mode``
    (``tree-split``: flits alternate between the two trees, the odd one on the X-Y tree of an
    even controller and on the Y-X tree of an odd one: ``hdl.designs.mesh.io_controller``)."""
    if mode not in IO_MODES:
        raise FredError(f"unknown I/O mode {mode!r}; expected one of {', '.join(IO_MODES)}")
    share = {"tree-xy": (stripe_flits, 0), "tree-yx": (0, stripe_flits),
             "tree-split": ((stripe_flits + 1) // 2, stripe_flits // 2)}[mode]
    # tree t = 2 k + vc; on the split trees an odd controller k starts on the Y-X tree
    first = [k % 2 if mode == "tree-split" else 0 for k in range(spec.controllers)]
    return [share[(vc + first[k]) % 2] for k in range(spec.controllers) for vc in (0, 1)]


def link_stripes(spec: MeshIoSpec, mode: str) -> dict[tuple[int, int], float]:
    """Stripes each NPU-to-NPU link carries, ``{(rank, port): stripes}`` (a whole stripe per
    tree crossing the link; half in ``tree-split``): the load the model's busiest link is."""
    share = tree_flits(spec, 2, mode)
    loads: dict[tuple[int, int], float] = {}
    for rank, per_tree in enumerate(tree_children(spec)):
        for tree, ports in enumerate(per_tree):
            for port in ports:
                loads[(rank, port)] = loads.get((rank, port), 0.0) + share[tree] / 2
    return loads


@dataclass
class IoLoadProgram:
    """What the RTL is told (``stripe_flits``, ``mode``) and what it must do: ``per_tree``
    flits of each tree, ``expect`` flits every NPU receives, ``forwarded[rank][port]`` flits
    NPU ``rank`` sends by ``port``, ``hottest`` stripes on the busiest link."""

    stripe_flits: int
    mode: str
    per_tree: list[int]
    expect: int
    forwarded: list[dict[int, int]]
    hottest: float

    @property
    def recv_total(self) -> int:
        """Flits every NPU checks, summed over the NPUs."""
        return self.expect * len(self.forwarded)

    @property
    def mode_index(self) -> int:
        return IO_MODES.index(self.mode)


def io_load_program(spec: MeshIoSpec, stripe_flits: int, mode: str = "tree-split") -> IoLoadProgram:
    """Check a weight-streaming request and say what every NPU must receive and forward; raises
    :class:`FredError` for a stripe < 1 or too long for the flit word, an unknown mode, or a
    direction whose forwarded flits could exceed an NPU's ``queue_depth``."""
    if isinstance(stripe_flits, bool) or not isinstance(stripe_flits, int) or stripe_flits < 1:
        raise FredError(f"stripe must be a positive number of flits per controller, got {stripe_flits!r}")
    if stripe_flits >= 1 << SEQ_BITS:
        raise FredError(f"a stripe of {stripe_flits} flits does not fit the {SEQ_BITS}-bit flit index")
    per_tree = tree_flits(spec, stripe_flits, mode)
    forwarded = []
    for rank, per in enumerate(tree_children(spec)):
        sends: dict[int, int] = {}
        for tree, ports in enumerate(per):
            for port in ports:
                sends[port] = sends.get(port, 0) + per_tree[tree]
        for port, flits in sends.items():
            # worst case: every flit of the direction arrives before the first leaves
            if flits > spec.queue_depth:
                raise FredError(f"NPU {rank} forwards {flits} flits by port {port}; it holds "
                                f"{spec.queue_depth} per direction (MeshIoSpec.queue_depth): use a "
                                f"shorter stripe or a deeper queue")
        forwarded.append(sends)
    hottest = max(link_stripes(spec, mode).values())
    return IoLoadProgram(stripe_flits, mode, per_tree, stripe_flits * spec.controllers, forwarded, hottest)


def neighbour(spec: MeshIoSpec, rank: int, port: int) -> int:
    """The NPU next to ``rank`` by ``port`` (a :class:`FredError` off the mesh)."""
    dx, dy = _STEP[port]
    row, col = divmod(rank, spec.mesh.cols)
    row, col = row + dy, col + dx
    if not (0 <= row < spec.mesh.rows and 0 <= col < spec.mesh.cols):
        raise FredError(f"NPU {rank} has no neighbour by port {port}")
    return row * spec.mesh.cols + col



_BACK = {1: 3, 3: 1, 2: 4, 4: 2}   # the port a neighbour's link enters by: NORTH <-> SOUTH, EAST <-> WEST


def tree_parents(spec: MeshIoSpec) -> list[list[int]]:
    """``parents[rank][tree]``: the router port by which NPU ``rank`` sends its partial sums of
    ``tree`` in a gradient reduce-out (``io-store``): towards the neighbour it receives the
    tree's flits from in weight streaming, or, at the tree's root, out of the mesh by the side
    the controller is attached to (:func:`hdl.contracts.mesh_io.edge_io_ports`)."""
    mesh = spec.mesh
    parents = [[0] * spec.trees for _ in range(mesh.npus)]
    for k, (_, _, side) in enumerate(spec.ports()):
        for vc in (0, 1):
            parents[spec.attach_rank(k)][2 * k + vc] = side
    for rank, per_tree in enumerate(tree_children(spec)):
        for tree, ports in enumerate(per_tree):
            for port in ports:
                parents[neighbour(spec, rank, port)][tree] = _BACK[port]
    return parents


@dataclass
class IoStoreProgram:
    """A gradient reduce-out: ``per_tree`` flits of each tree (``tree_flits``, the same split as
    weight streaming), ``expect[k]`` flits controller ``k`` receives (its two trees' flits, each
    the sum over every NPU), ``hottest`` stripes on the busiest link (the broadcast trees'
    links reversed carry the same loads)."""

    stripe_flits: int
    mode: str
    per_tree: list[int]
    expect: list[int]
    hottest: float
    #: fp16: per controller, the hashes (``fold_hash`` from 0 over the sums in index order) of
    #: its VC 0 and VC 1 trees' sums (:func:`store_fp16_sums`); empty in int32
    expected_hashes: list = field(default_factory=list)

    @property
    def mode_index(self) -> int:
        return IO_MODES.index(self.mode)

    @property
    def recv_total(self) -> int:
        """Flits the controllers check (each a sum over every NPU), summed over the controllers."""
        return sum(self.expect)


def io_store_program(spec: MeshIoSpec, stripe_flits: int, mode: str = "tree-split", *,
                     max_stripe: int) -> IoStoreProgram:
    """Check a gradient reduce-out of ``stripe_flits`` per controller; raises :class:`FredError`
    for a stripe < 1, a tree's flits beyond the NPUs' partial-sum memory (``max_stripe`` flits
    per tree, a build parameter of the store top) or the in-band index, or an unknown mode."""
    if isinstance(stripe_flits, bool) or not isinstance(stripe_flits, int) or stripe_flits < 1:
        raise FredError(f"stripe must be a positive number of flits per controller, got {stripe_flits!r}")
    per_tree = tree_flits(spec, stripe_flits, mode)
    seq_bits = store_seq_bits(spec.mesh.dtype)
    if max(per_tree) > min(max_stripe, 1 << seq_bits):
        raise FredError(f"a stripe of {stripe_flits} flits puts {max(per_tree)} flits on a tree; the NPUs "
                        f"hold partial sums of {min(max_stripe, 1 << seq_bits)} per tree (max_stripe "
                        f"{max_stripe}, {seq_bits}-bit index): use a shorter stripe or a larger build")
    expect = [per_tree[2 * k] + per_tree[2 * k + 1] for k in range(spec.controllers)]
    program = IoStoreProgram(stripe_flits, mode, per_tree, expect, max(link_stripes(spec, mode).values()))
    if spec.mesh.dtype == "fp16":
        sums = store_fp16_sums(spec, per_tree)
        program.expected_hashes = [tuple(_hash(sums[2 * k + vc]) for vc in (0, 1))
                                   for k in range(spec.controllers)]
    return program


def _hash(values) -> int:
    h = 0
    for v in values:
        h = fold_hash(h, int(v))
    return h


def _own_fp16(rank: int, tree: int, seqs: np.ndarray) -> np.ndarray:
    """:func:`hdl.contracts.mesh_io.store_value_fp16` of every index in ``seqs`` at once."""
    value = (seqs * (2 * rank + 1) + tree * (4 * rank + 3) + 7 * rank + 1) & 0x3FF
    mix = seqs ^ tree ^ rank
    return ((mix & 1) << 15 | (14 + (mix >> 1 & 1)) << 10 | value).astype(np.uint16)


def store_fp16_sums(spec: MeshIoSpec, per_tree) -> list[np.ndarray]:
    """The golden model of an fp16 reduce-out: per tree, the fp16 sums (uint16 bit patterns, in
    index order) its controller receives. Every NPU sends, for flit ``i`` of tree ``t``, its
    children's sums in the slots of the directions they arrive from (N, E, S, W; +0 where it
    has no child) and its own ``store_value_fp16`` added as
    ``((N + E) + (S + W)) + own`` with the bit-exact fp16 addition of
    :mod:`hdl.contracts.dtypes` (``hdl.designs.mesh.fp16_reduce_sum``); a leaf sends its own
    value."""
    fp16 = get_dtype("fp16")
    children = tree_children(spec)
    out = []
    for tree, flits in enumerate(per_tree):
        seqs = np.arange(flits, dtype=np.int64)

        def value(rank: int) -> np.ndarray:
            own = _own_fp16(rank, tree, seqs)
            ports = children[rank][tree]
            if not ports:
                return own
            slots = [value(neighbour(spec, rank, p)) if p in ports else np.zeros(flits, np.uint16)
                     for p in (1, 2, 3, 4)]
            return fp16.add(fp16.add(fp16.add(slots[0], slots[1]), fp16.add(slots[2], slots[3])), own)

        out.append(value(spec.attach_rank(tree // 2)))
    return out


# -- checkpoint spills (io-write / io-read) -------------------------------------------------------
def spill_dests(spec: MeshIoSpec) -> list[tuple[int, int, int]]:
    """``(x, y, vc)`` per controller: the I/O position an NPU's io-write flit for controller
    ``k`` is addressed to (the coordinates next to its NPU's router on the controller's side,
    outside the mesh: the router there sends it out by that side) and the VC whose dimension
    order reaches it. A controller on the north or south side is reached X first (VC 0, X-Y:
    the last hops run along the column, out by that side), one on the east or west side Y
    first (VC 1, Y-X): the other order would leave the mesh by the same side in the source's
    row or column, at another controller or none. The model routes every spill X-Y
    (``sysmodel.mesh.MeshNetwork``); the controllers' links bound the spills, not the mesh's."""
    out = []
    for k, (_, _, side) in enumerate(spec.ports()):
        x, y = spec.mesh.position(spec.attach_rank(k))
        dx, dy = _STEP[side]
        out.append((x + dx, y + dy, int(side in (EAST, WEST))))
    return out


def _check_spill_op(op: str) -> None:
    if op not in SPILL_OPS:
        raise FredError(f"a checkpoint spill is {' or '.join(SPILL_OPS)}, got {op!r}")


def spill_order(spec: MeshIoSpec, op: str, sender: int) -> list[int]:
    """The order in which a spill's sender serves its destinations (its :class:`SpillSender`
    sends flit ``n`` to the ``n % D``-th): ``io-write``, NPU ``sender``'s controllers nearest
    first; ``io-read``, controller ``sender``'s NPUs farthest first (distance: the routers the X-Y
    route between the NPU and the controller's NPU crosses, ``route_hops``; ties by index).

    Why: a spill is bound by the controllers' links (one flit per 375/16 cycles); what a
    sender's order decides is how soon each controller's link starts and how long its last
    flit still travels. io-write: every controller gets its nearest NPUs' flits first, so its
    link starts within a few cycles of the start (in index order, a controller last in every
    NPU's order waited for the whole first burst of 18 flits per NPU through the 1/4 links:
    1-flit stripes 533 cycles against 20 x 375/16 = 468.75, measured). io-read: the last flit a
    paced controller sends goes to its nearest NPU (in index order every controller sent to the
    same NPU at the same moment and their last 18 flits met at NPU 19: 519 cycles)."""
    _check_spill_op(op)
    mesh = spec.mesh
    senders = mesh.npus if op == "io-write" else spec.controllers
    if isinstance(sender, bool) or not isinstance(sender, int) or not 0 <= sender < senders:
        raise FredError(f"{op}'s senders are 0..{senders - 1} ({'NPUs' if op == 'io-write' else 'controllers'}), "
                        f"got {sender!r}")

    def hops(rank: int, k: int) -> int:
        return len(route_hops(mesh.position(rank), mesh.position(spec.attach_rank(k))))

    if op == "io-write":
        return sorted(range(spec.controllers), key=lambda k: (hops(sender, k), k))
    return sorted(range(mesh.npus), key=lambda r: (-hops(r, sender), r))


@dataclass
class IoSpillProgram:
    """A checkpoint spill: ``op`` (``io-write``: every NPU sends its own ``stripe_flits`` to
    every controller; ``io-read``: every controller sends every NPU its stripe), the flits each
    receiver checks (``expect``: a controller gets one stripe from every NPU, an NPU one from
    every controller) and each sender sends (``sends``)."""

    op: str
    stripe_flits: int
    npus: int
    controllers: int

    @property
    def mode(self) -> str:
        """The spill top's ``mode``: the op (as an io-load's trees name its run)."""
        return self.op

    @property
    def mode_index(self) -> int:
        """The spill top's ``mode`` register: the op's index in ``SPILL_OPS``."""
        return SPILL_OPS.index(self.op)

    @property
    def expect(self) -> int:
        """Flits each receiver checks: a controller's (io-write) or an NPU's (io-read)."""
        return self.stripe_flits * (self.npus if self.op == "io-write" else self.controllers)

    @property
    def sends(self) -> int:
        """Flits each sender sends: an NPU's (io-write) or a controller's (io-read)."""
        return self.stripe_flits * (self.controllers if self.op == "io-write" else self.npus)

    @property
    def recv_total(self) -> int:
        """Flits checked, summed over the receivers (every NPU's stripes, once each)."""
        return self.stripe_flits * self.npus * self.controllers


def io_spill_program(spec: MeshIoSpec, stripe_flits: int, op: str) -> IoSpillProgram:
    """Check a checkpoint spill of ``stripe_flits`` per NPU and controller; raises
    :class:`FredError` for an op other than ``io-write`` / ``io-read``, a stripe < 1, one too
    long for the spill flit's index, or a mesh with more NPUs than the flit's NPU field names."""
    from hdl.contracts.mesh_io import SPILL_NPU_BITS
    _check_spill_op(op)
    if isinstance(stripe_flits, bool) or not isinstance(stripe_flits, int) or stripe_flits < 1:
        raise FredError(f"stripe must be a positive number of flits per NPU and controller, got {stripe_flits!r}")
    if stripe_flits >= 1 << SPILL_SEQ_BITS:
        raise FredError(f"a spill stripe of {stripe_flits} flits does not fit the {SPILL_SEQ_BITS}-bit flit index")
    if spec.mesh.npus > 1 << SPILL_NPU_BITS:
        raise FredError(f"{spec.mesh.npus} NPUs do not fit the spill flit's {SPILL_NPU_BITS}-bit NPU field")
    return IoSpillProgram(op, stripe_flits, spec.mesh.npus, spec.controllers)
