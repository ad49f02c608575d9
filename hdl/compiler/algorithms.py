"""What each collective algorithm does, as data: the one description the system model's timing
(``sysmodel/collectives.py``) and the RTL fabric's engine programs
(``hdl/compiler/fabric_program.py``) are both derived from, so the two cannot drift.

A :class:`Plan` is an algorithm applied to one collective: its stages in order, each stage
depending on the one before it (it runs on that stage's result, :attr:`Plan.dependencies`).
A stage is one of

* :class:`RingStage` -- logical rings (:class:`Ring`), all at once, each a ring all-reduce,
  reduce-scatter or all-gather of ``size / divisor`` bytes among its members in ring order.
  A ring of n runs :func:`ring_steps` dependent steps; in each step every member sends one
  chunk of ``buffer / n`` to its successor, so it sends ``ring_fraction = steps / n``
  buffers in all;
* :class:`Chain` -- a pipelined chain of unicasts along ``order`` (data flows from
  ``order[0]`` onwards; reversed for a reduce, which ends at the root ``order[0]``); every
  hop carries the whole size;
* :class:`InSwitch` -- one flow through the tree's switches: ``senders`` send their data up,
  the switches reduce it on the way and replicate it on the way down to ``receivers``; an
  all-reduce turns round at ``top`` (the group's L1 when it lies inside one, else the L2).

The algorithms (builders below): ``ring`` (:func:`ring`), ``hierarchical`` on the FRED tree
(:func:`hierarchical`: reduce-scatter within each L1, all-reduce across the L1s among the
members of the same local index, all-gather within each L1), ``hierarchical-2d`` on the mesh
(:func:`mesh_2d`: the same two-level algorithm on the rows and columns of a rectangle, one
plan per dimension order), ``chain`` (:func:`chain`) and ``in-switch`` (:func:`in_switch`).
Both two-level algorithms are :func:`two_level`: ``outer`` lines (L1 groups, mesh rows) and
the ``inner`` lines that are their transpose (the members of one local index, mesh columns).

What stays with each user: the model adds the timing (link sharing, latencies, a ring's two
directions: :meth:`Ring.directions`), the RTL the register packing, the flit padding of the
chunks and the switch ports. Pure Python (it imports only the contracts' ``FredError``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError

__all__ = ["RING_OPS", "two_chunk_flits", "padded_to_pieces", "io_chain_order", "Ring", "RingStage", "Chain", "InSwitch", "Plan", "ring_steps",
           "ring_fraction", "TWO_LEVEL", "ring", "two_level", "hierarchical", "l1_groups",
           "hierarchical_groups", "mesh_2d", "chain", "in_switch"]

#: The operations a ring runs.
RING_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def ring_steps(op: str, n: int) -> int:
    """Dependent steps of a ring ``op`` among ``n`` members: 2(n - 1) for an all-reduce (a
    reduce-scatter, then an all-gather), n - 1 for a reduce-scatter or an all-gather."""
    if op not in RING_OPS:
        raise FredError(f"no ring {op!r}; a ring runs {', '.join(RING_OPS)}")
    return 2 * (n - 1) if op == "all-reduce" else n - 1


def ring_fraction(op: str, n: int) -> float:
    """Bytes each member of a ring of ``n`` sends, as a fraction of the ring's buffer: one
    chunk of 1/n per step."""
    return ring_steps(op, n) / n


@dataclass(frozen=True)
class Ring:
    """One logical ring: ``op`` (one of :data:`RING_OPS`) among ``order`` (ring order; member
    i sends to member i + 1)."""

    op: str
    order: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.order)

    @property
    def steps(self) -> int:
        return ring_steps(self.op, self.n)

    @property
    def fraction(self) -> float:
        return ring_fraction(self.op, self.n)

    def hops(self) -> list[tuple[int, int]]:
        """(sender, receiver) of every member (none for a ring of fewer than two)."""
        n = self.n
        return [(self.order[i], self.order[(i + 1) % n]) for i in range(n)] if n > 1 else []

    def directions(self, count: int) -> tuple[list[list[tuple[int, int]]], int]:
        """The ring run in ``count`` (1 or 2) directions: (the hops of each direction, the
        number of parts each member's bytes are split into). Two directions send half the
        data clockwise and half counter-clockwise; a ring of two is its one pair both ways,
        each way carrying all of a member's bytes in either case."""
        hops = self.hops()
        if count == 1 or not hops:
            return [hops], 1
        if count != 2:
            raise FredError(f"a ring runs in 1 or 2 directions, not {count}")
        if self.n == 2:
            return [hops[:1], hops[1:]], 1
        return [hops, [(b, a) for a, b in reversed(hops)]], 2


@dataclass(frozen=True)
class RingStage:
    """Rings that run at once, each on a buffer of ``size / divisor`` bytes; ``level``:
    ``"flat"`` (a single ring), ``"outer"`` or ``"inner"`` (the lines of a two-level
    algorithm, :func:`two_level`)."""

    rings: tuple[Ring, ...]
    divisor: int = 1
    level: str = "flat"

    @property
    def op(self) -> str:
        return self.rings[0].op

    @property
    def groups(self) -> list[list[int]]:
        return [list(r.order) for r in self.rings]


@dataclass(frozen=True)
class Chain:
    """A pipelined chain along ``order`` (``reverse``: towards ``order[0]``); every hop
    carries the whole size."""

    order: tuple[int, ...]
    reverse: bool = False

    def hops(self) -> list[tuple[int, int]]:
        """(sender, receiver) of each hop, in ``order``'s order."""
        return [(b, a) if self.reverse else (a, b) for a, b in zip(self.order, self.order[1:])]

    def flow(self) -> tuple[int, ...]:
        """The members in the order the data passes them (first sender .. last receiver)."""
        return tuple(reversed(self.order)) if self.reverse else self.order


@dataclass(frozen=True)
class InSwitch:
    """One in-switch flow: ``senders`` (sorted) send ``size`` each, reduced in the switches;
    ``receivers`` (sorted) get the result; ``root`` of a reduce / multicast (a reduce's root
    is among its senders: its data is part of the sum); ``top``: the L1 where an all-reduce
    turns round when the group lies inside one, else None (the L2)."""

    op: str
    senders: tuple[int, ...]
    receivers: tuple[int, ...]
    root: int | None = None
    top: int | None = None


@dataclass(frozen=True)
class Plan:
    """An algorithm applied to one collective: ``name``, ``op`` and ``stages`` in order; stage
    s runs on the result of stage s - 1."""

    name: str
    op: str
    stages: tuple

    @property
    def pieces(self) -> int:
        """The finest chunk count of the plan's data: the product of its reduce-scatter and
        all-reduce rings' sizes (S / (k x l1s) for the hierarchical all-reduce). An engine
        moves whole flits, so its ring stages pad a buffer to a whole number of flits per
        piece (:func:`hdl.compiler.fabric_program.ring_engine_stages`)."""
        pieces = 1
        for stage in self.stages:
            if isinstance(stage, RingStage) and stage.op != "all-gather":
                pieces *= stage.rings[0].n
        return pieces

    @property
    def dependencies(self) -> list[tuple[int, ...]]:
        """Per stage, the stages it waits for."""
        return [(s - 1,) if s else () for s in range(len(self.stages))]

    def sends(self, size: float) -> list[dict[int, float]]:
        """Per stage, the bytes each sending member sends (``size`` as in the model:
        an all-reduce's buffer per member, a chain's or in-switch flow's message)."""
        out = []
        for stage in self.stages:
            sent: dict[int, float] = {}
            if isinstance(stage, RingStage):
                for r in stage.rings:
                    for member in r.order if r.n > 1 else ():
                        sent[member] = sent.get(member, 0.0) + r.fraction * (size / stage.divisor)
            elif isinstance(stage, Chain):
                for src, _ in stage.hops():
                    sent[src] = sent.get(src, 0.0) + size
            else:
                for src in stage.senders:
                    sent[src] = sent.get(src, 0.0) + size
            out.append(sent)
        return out


# -- builders ------------------------------------------------------------------------------
def ring(op: str, order) -> Plan:
    """One ring ``op`` among ``order`` (the caller's ring order: rank order on the tree, snake
    order on the mesh)."""
    return Plan("ring", op, (RingStage((Ring(op, tuple(order)),)),))


#: Two-level algorithms per op: the stages as (ring op, lines); "outer" lines carry the whole
#: buffer, "inner" lines (one member of each outer line) the 1/k of it the outer
#: reduce-scatter left with each member (k = members of an outer line).
TWO_LEVEL = {
    "all-reduce": (("reduce-scatter", "outer"), ("all-reduce", "inner"), ("all-gather", "outer")),
    "reduce-scatter": (("reduce-scatter", "outer"), ("reduce-scatter", "inner")),
    "all-gather": (("all-gather", "inner"), ("all-gather", "outer")),
}


def two_level(name: str, op: str, outer) -> Plan:
    """The two-level algorithm ``name`` of ``op`` on ``outer`` lines (equal lengths k, each in
    ring order): the inner lines are their transpose (member i of every outer line); stages
    from :data:`TWO_LEVEL`."""
    outer = [tuple(line) for line in outer]
    k = len(outer[0])
    inner = [tuple(line[i] for line in outer) for i in range(k)]
    lines = {"outer": (outer, 1), "inner": (inner, k)}
    stages = []
    for ring_op, level in TWO_LEVEL[op]:
        groups, divisor = lines[level]
        stages.append(RingStage(tuple(Ring(ring_op, g) for g in groups), divisor, level))
    return Plan(name, op, tuple(stages))


def l1_groups(members, l1_of) -> dict[int, list[int]]:
    """The members on each L1 (``l1_of(rank)``), in the order given, L1s in first-seen order."""
    by_l1: dict[int, list[int]] = {}
    for r in members:
        by_l1.setdefault(l1_of(r), []).append(r)
    return by_l1


def hierarchical_groups(members, l1_of) -> list[list[int]] | None:
    """The members of each L1 the group spans (sorted, L1s in order) where the hierarchical
    algorithm applies -- the same number, more than one, of members on each of at least two
    L1s -- else None."""
    by_l1 = l1_groups(members, l1_of)
    counts = {len(v) for v in by_l1.values()}
    if len(by_l1) < 2 or len(counts) != 1 or counts == {1}:
        return None
    return [sorted(v) for _, v in sorted(by_l1.items())]


def hierarchical(op: str, members, l1_of) -> Plan | None:
    """The hierarchical ``op`` on the FRED tree (outer lines: each L1's members), or None where
    it does not apply (:func:`hierarchical_groups`)."""
    groups = hierarchical_groups(members, l1_of)
    return None if groups is None else two_level("hierarchical", op, groups)


def mesh_2d(op: str, row_lines) -> tuple[Plan, Plan]:
    """The hierarchical 2D ``op`` on a mesh rectangle (``row_lines``: its ranks row by row,
    each row in column order): the plan with rows outer (rows, then columns) and the one with
    columns outer."""
    row_lines = [tuple(line) for line in row_lines]
    col_lines = [tuple(line[i] for line in row_lines) for i in range(len(row_lines[0]))]
    return two_level("hierarchical-2d", op, row_lines), two_level("hierarchical-2d", op, col_lines)


def padded_to_pieces(flits: int, pieces: int) -> int:
    """``flits`` rounded up to a whole number of flits per piece (what an engine's ring stages
    send for a chunk of ``flits`` cut into ``pieces``: :attr:`Plan.pieces`)."""
    return -(-flits // pieces) * pieces


def two_chunk_flits(size_flits: int, split: float, pieces: int) -> tuple[int, int]:
    """Flits per NPU of the two chunks of a two-chunk algorithm on a whole-flit fabric (the RTL
    mesh's hierarchical 2D all-reduce, chunk 0 rows first and chunk 1 columns first, or its ring
    run both ways): chunk 0 ``split`` of ``size_flits`` in whole multiples of its ``pieces`` (at
    least one piece, leaving chunk 1 at least one flit), chunk 1 the rest; each chunk is sent
    padded (:func:`padded_to_pieces`). Written once for the RTL program
    (:func:`hdl.compiler.mesh_program.mesh_program`) and the model of the RTL mesh
    (``sysmodel.collectives``), which time the same flits."""
    if size_flits <= 1:
        return 1, 1
    first = min(max(pieces, round(size_flits * split / pieces) * pieces), size_flits - 1)
    return first, max(1, size_flits - first)


def chain(op: str, root: int, others) -> Plan:
    """A chain from ``root`` through ``others`` (in the caller's order) for a broadcast or
    multicast; the same chain reversed, ending at ``root``, for a reduce."""
    if op not in ("broadcast", "multicast", "reduce"):
        raise FredError(f"no chain {op!r}; a chain runs broadcast, multicast and reduce")
    return Plan("chain", op, (Chain((root, *others), reverse=(op == "reduce")),))


def io_chain_order(group, l1_of, controller_l1: int, k: int) -> tuple[int, ...]:
    """The members in the order I/O controller ``k`` (on L1 ``controller_l1``) chains through
    them where the switches cannot multicast or reduce (Fred-A/C): its stripe enters (leaves)
    the group at a member on its own L1 (the ``k mod n``-th of them; any member ``k mod n`` if
    none), then runs along the members in rank order from there, wrapping round."""
    g = sorted(group)
    near = [r for r in g if l1_of(r) == controller_l1]
    entry = near[k % len(near)] if near else g[k % len(g)]
    i = g.index(entry)
    return tuple(g[i:] + g[:i])


def in_switch(op: str, group, root: int | None, l1_of) -> Plan:
    """The in-switch ``op`` on ``group`` (every rank taking part, root included): an
    all-reduce's members send and receive; a reduce's members (root included) send, its root
    receives; a broadcast's or multicast's root sends, the others receive."""
    group = tuple(sorted(group))
    if op == "all-reduce":
        l1s = {l1_of(r) for r in group}
        top = l1_of(group[0]) if len(l1s) == 1 else None
        return Plan("in-switch", op, (InSwitch(op, group, group, None, top),))
    if op == "reduce":
        return Plan("in-switch", op, (InSwitch(op, group, (root,), root),))
    if op in ("broadcast", "multicast"):
        return Plan("in-switch", op, (InSwitch(op, (root,), tuple(r for r in group if r != root), root),))
    raise FredError(f"no in-switch {op!r}; the switches run all-reduce, reduce, broadcast and multicast")
