"""All-reduce on a WDM optical ring: ring, recursive doubling and WRHT (docs/optical.md).

The network (Dai et al., "Efficient All-reduce for Distributed DNN Training in Optical
Interconnect System", 2022; its successor OpTree, Dai et al., IEEE OJ-COMS 2024, compares
against it): ``n`` nodes on a bidirectional optical ring (one fiber each way), each fiber
carrying ``wavelengths`` WDM channels of ``wavelength_gbps`` GBps (1e9 B/s) each. A transfer
occupies one wavelength on every link of its path (no wavelength conversion on the way) and
is converted optical -> electrical -> optical only at its end (``oeo_ns`` per step: the
receiver, the reduction in the node, the transmitter). On the way it passes intermediate
nodes' micro-ring filters, each hop costing ``hop_loss_db`` of insertion loss; a path whose
loss exceeds ``loss_budget_db`` (laser power minus detector sensitivity) cannot be received.

Only the papers' abstracts were reachable here, not their bodies: the formulas below are this
project's derivation of the scheme the WRHT abstract describes (it "derives the required
number of wavelengths, the minimum number of communication steps, and the communication time
... the constraint of insertion loss is also considered"); the papers' own equations and
section numbers could not be checked, and the docs say so.

Algorithms on ``n`` nodes, message ``S`` bytes per node, ``b`` bytes/s per wavelength, ``d``
the O/E/O latency of one step:

* ``ring``: reduce-scatter then all-gather, ``2 (n-1)`` steps of ``S/n`` to the neighbour
  (1 hop, 1 wavelength): ``2 (n-1) (S / (n b) + d)``. More wavelengths do not help: each node
  sends one piece per step (as the authors' later optical-vs-electrical comparison reports for
  ring: its time does not fall with the wavelengths).
* ``recursive-doubling`` (``n`` a power of two): ``log2 n`` steps, step ``k`` exchanging the
  whole ``S`` with the partner ``2^(k-1)`` away; on each fiber direction ``2^(k-1)`` transfers
  cross every link, so the step needs ``2^(k-1)`` wavelengths and, with ``W``, runs in
  ``ceil(2^(k-1) / W)`` rounds: ``sum_k ceil(2^(k-1)/W) (S/b + d)``.
* ``wrht`` (Wavelength Reused Hierarchical Tree): nodes form groups of ``m`` consecutive nodes;
  the middle member (root) receives the other members' ``S`` at once, each on its own
  wavelength, and reduces them; the roots then form groups of ``m`` at the next level, and so on
  (reduce); the same tree backwards broadcasts the result. Transfers towards a root from one
  side share the fiber entering it, so a group needs ``ceil((m-1)/2)`` wavelengths, and
  disjoint groups reuse the same ones: with ``W`` wavelengths ``m <= 2W + 1``. Steps:
  ``2 L`` with ``L = ceil(log_m n)`` levels; the group size used is the smallest ``m`` that
  reaches the fewest levels (``m = ceil(n^(1/L))``), which needs the fewest wavelengths and the
  shortest paths for that step count. Time ``2 L (S/b + d)``. Insertion loss: at level ``k``
  (groups of nodes ``m^(k-1)`` apart) the farthest member is ``ceil((g-1)/2) m^(k-1)`` hops from
  its root (``g`` the members of the level's largest group); every level must fit the budget.

A request needing more wavelengths than the ring has cannot happen for ring or WRHT (they take
what there is; WRHT picks ``m`` from ``W``) and serializes recursive doubling's steps; a path
breaking the loss budget is an error naming the hops, the loss and the budget (no fallback:
the papers' abstracts describe none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hdl.contracts.errors import FredError

__all__ = ["OPTICAL_ALGORITHMS", "OpticalRing", "OpticalPlan", "wrht_group_size",
           "wrht_wavelengths", "wrht_levels", "wrht_hops_per_level", "plan_allreduce",
           "allreduce_time"]

OPTICAL_ALGORITHMS = ("wrht", "ring", "recursive-doubling")


@dataclass(frozen=True)
class OpticalRing:
    """A WDM ring: ``wavelengths`` per fiber direction, ``wavelength_gbps`` GBps each,
    ``oeo_ns`` per step, ``hop_loss_db`` per hop, ``loss_budget_db`` per path."""

    wavelengths: int
    wavelength_gbps: float
    oeo_ns: float
    hop_loss_db: float
    loss_budget_db: float

    @property
    def max_hops(self) -> int:
        """The longest path (hops) within the loss budget."""
        if self.hop_loss_db <= 0:
            return 1 << 62
        return int(math.floor(self.loss_budget_db / self.hop_loss_db + 1e-9))


@dataclass(frozen=True)
class OpticalPlan:
    """An all-reduce's schedule: ``steps`` (each ``step_bytes`` per transfer), the
    ``wavelengths`` it needs at most, its longest path in ``hops`` and, for WRHT, the group size
    ``group`` (0 otherwise)."""

    algorithm: str
    nodes: int
    steps: int
    step_bytes: tuple[float, ...]
    wavelengths: int
    hops: int
    group: int = 0

    def time_s(self, ring: OpticalRing) -> float:
        b = ring.wavelength_gbps * 1e9
        return sum(s / b for s in self.step_bytes) + self.steps * ring.oeo_ns * 1e-9


def wrht_wavelengths(group: int) -> int:
    """Wavelengths a WRHT group of ``group`` members needs: the larger side of its root,
    ``ceil((group-1)/2)``, each sender there crossing the fiber entering the root."""
    if group < 2:
        raise FredError(f"a WRHT group has at least 2 members, got {group}")
    return group // 2                          # = ceil((group - 1) / 2)


def wrht_levels(nodes: int, group: int) -> int:
    """Levels of the tree: the fewest ``L`` with ``group^L >= nodes`` (exact integers)."""
    levels, reach = 0, 1
    while reach < nodes:
        reach *= group
        levels += 1
    return levels


def wrht_group_size(nodes: int, wavelengths: int) -> int:
    """The group size WRHT uses on ``nodes`` with ``wavelengths``: the fewest levels reachable
    with ``m <= 2 W + 1``, then the smallest ``m`` that still reaches them."""
    if nodes < 2:
        return 1
    largest = min(2 * wavelengths + 1, nodes)
    levels = wrht_levels(nodes, largest)
    # one below the float root (which may round up past the exact integer), then step up
    m = max(2, math.ceil(nodes ** (1.0 / levels)) - 1)
    while wrht_levels(nodes, m) > levels:
        m += 1
    return m


def wrht_hops_per_level(nodes: int, group: int) -> list[int]:
    """The farthest member's distance (hops) to its root at each level of the tree."""
    hops, spacing, remaining = [], 1, nodes
    while remaining > 1:
        members = min(group, remaining)           # the level's largest group
        hops.append((members // 2) * spacing)    # ceil((members - 1) / 2) groups apart
        remaining = math.ceil(remaining / group)
        spacing *= group
    return hops


def _check_loss(ring: OpticalRing, algorithm: str, nodes: int, hops: int) -> None:
    if hops > ring.max_hops:
        raise FredError(f"{algorithm} on an optical ring of {nodes} nodes needs a {hops}-hop path: "
                        f"{hops * ring.hop_loss_db:g} dB of insertion loss ({ring.hop_loss_db:g} dB per hop) "
                        f"exceeds the loss budget of {ring.loss_budget_db:g} dB (at most {ring.max_hops} hops)")


def plan_allreduce(ring: OpticalRing, algorithm: str, nodes: int, size: float) -> OpticalPlan:
    """The schedule of an all-reduce of ``size`` bytes per node on ``nodes`` of ``ring``
    (module docstring); errors when a path breaks the loss budget or the algorithm does not
    apply (recursive doubling on a node count that is not a power of two)."""
    if algorithm not in OPTICAL_ALGORITHMS:
        raise FredError(f"optical algorithm {algorithm!r} is not one of {', '.join(OPTICAL_ALGORITHMS)}")
    if nodes < 2:
        return OpticalPlan(algorithm, nodes, 0, (), 0, 0)
    if algorithm == "ring":
        plan = OpticalPlan("ring", nodes, 2 * (nodes - 1), (size / nodes,) * (2 * (nodes - 1)), 1, 1)
    elif algorithm == "recursive-doubling":
        if nodes & (nodes - 1):
            raise FredError(f"recursive doubling needs a power-of-two node count, got {nodes}")
        rounds = [math.ceil((1 << k) / ring.wavelengths) for k in range(nodes.bit_length() - 1)]
        plan = OpticalPlan(algorithm, nodes, sum(rounds), (size,) * sum(rounds),
                           min(nodes // 2, ring.wavelengths), nodes // 2)
    else:
        m = wrht_group_size(nodes, ring.wavelengths)
        levels = wrht_levels(nodes, m)
        plan = OpticalPlan("wrht", nodes, 2 * levels, (size,) * (2 * levels), wrht_wavelengths(m),
                           max(wrht_hops_per_level(nodes, m)), m)
    _check_loss(ring, algorithm, nodes, plan.hops)
    return plan


def allreduce_time(ring: OpticalRing, algorithm: str, nodes: int, size: float) -> float:
    """Seconds of an all-reduce of ``size`` bytes per node (:func:`plan_allreduce`)."""
    return plan_allreduce(ring, algorithm, nodes, size).time_s(ring)
