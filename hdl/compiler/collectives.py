"""Lowering of collectives on a port group to phases of flows.

Data model (used to define every collective and by the tests that check the lowering):
each port p holds a *send buffer* of ``chunks`` equal chunks and a *receive buffer* that
starts as a copy of it. A :class:`Transfer` is a flow plus chunk indices: every input port
of the flow contributes its send-buffer chunk ``send``, and every output port stores the
sum into its receive-buffer chunk ``recv``. Every collective here reads only the initial
send buffers, so phases are independent of each other's results; a phase's flows have
disjoint inputs and outputs and so can share one switch phase (the router may still split
a phase it cannot route at once).

=============== ========================== =============================================
op              parameters                 lowering (n = len(group), g_i = group[i])
=============== ========================== =============================================
all-reduce      group                      1 phase: flow G > G (chunks = 1)
reduce          group, root (in group)     1 phase: flow G > {root}
broadcast       group, root (in group)     1 phase: flow {root} > G
multicast       group, root (any port)     1 phase: flow {root} > G (root need not be in G)
unicast /       pairs [(src, dst), ...]    1 phase: one flow {src} > {dst} per pair; srcs
permutation                                distinct, dsts distinct (a partial permutation)
reduce-scatter  group                      n phases; phase i: G > {g_i} on chunk i
                                           (chunks = n; g_i ends with chunk i reduced)
all-gather      group                      n phases; phase i: {g_i} > G on chunk i
                                           (every port ends with every g_i's chunk i)
all-to-all      group                      n - 1 phases; phase s: g_i sends chunk
                                           (i+s) mod n to g_(i+s) mod n, stored in slot
                                           i (chunk i stays local: no transfer)
=============== ========================== =============================================

reduce-scatter and all-gather need n phases in this flow model: every port takes part in
every chunk's reduction (or broadcast), and a port inputs one stream per phase.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError
from hdl.compiler.flows import Flow

__all__ = ["COLLECTIVES", "Transfer", "Schedule", "lower_collective", "schedule_collective",
           "reference_result", "chunk_count"]

COLLECTIVES = ("all-reduce", "reduce", "broadcast", "multicast", "unicast", "permutation",
               "reduce-scatter", "all-gather", "all-to-all")


@dataclass(frozen=True)
class Transfer:
    """A flow and the chunks it moves: inputs send chunk ``send``, outputs store into ``recv``."""

    flow: Flow
    send: int = 0
    recv: int = 0


@dataclass(frozen=True)
class Schedule:
    """A lowered collective: ``phases`` (each a tuple of transfers) and buffer ``chunks``."""

    op: str
    chunks: int
    phases: tuple[tuple[Transfer, ...], ...]

    def flow_phases(self) -> list[list[Flow]]:
        return [[t.flow for t in phase] for phase in self.phases]


def _normalise_op(op: str) -> str:
    if not isinstance(op, str):
        raise FredError(f"collective must be a name, got {op!r}")
    name = op.strip().lower().replace("_", "-")
    aliases = {"allreduce": "all-reduce", "allgather": "all-gather", "alltoall": "all-to-all",
               "reducescatter": "reduce-scatter"}
    name = aliases.get(name, name)
    if name not in COLLECTIVES:
        raise FredError(f"unknown collective {op!r}; choose one of {', '.join(COLLECTIVES)}")
    return name


def _check_port(port, ports: int, what: str) -> int:
    if isinstance(port, bool) or not isinstance(port, (int, np.integer)):
        raise FredError(f"{what} must be a port number, got {port!r}")
    port = int(port)
    if not 0 <= port < ports:
        raise FredError(f"{what} {port} out of range for a {ports}-port switch (0..{ports - 1})")
    return port


def _check_group(group, ports: int) -> tuple[int, ...]:
    if group is None:
        raise FredError("this collective needs group= (the participating ports)")
    if isinstance(group, (str, bytes)) or not hasattr(group, "__iter__"):
        raise FredError(f"group must be a collection of ports, got {group!r}")
    members = [_check_port(p, ports, "group port") for p in group]
    if not members:
        raise FredError("group is empty")
    if len(set(members)) != len(members):
        raise FredError(f"group {list(group)} lists a port more than once")
    return tuple(members)  # order matters for the compound collectives (g_i)


def schedule_collective(op: str, *, ports: int, group=None, root=None, pairs=None) -> Schedule:
    """Lower a collective to phases of :class:`Transfer` (see the module docstring)."""
    if isinstance(ports, bool) or not isinstance(ports, int) or ports < 1:
        raise FredError(f"ports must be a positive integer, got {ports!r}")
    name = _normalise_op(op)
    if name in ("unicast", "permutation"):
        if group is not None or root is not None:
            raise FredError(f"{name} takes pairs=, not group= or root=")
        if not pairs:
            raise FredError(f"{name} needs pairs=[(src, dst), ...] (non-empty)")
        srcs, dsts, transfers = set(), set(), []
        for pair in pairs:
            try:
                src, dst = pair
            except (TypeError, ValueError):
                raise FredError(f"{name}: pair {pair!r} is not (src, dst)") from None
            src = _check_port(src, ports, "source port")
            dst = _check_port(dst, ports, "destination port")
            if src in srcs:
                raise FredError(f"{name}: source port {src} appears in more than one pair")
            if dst in dsts:
                raise FredError(f"{name}: destination port {dst} appears in more than one pair")
            srcs.add(src)
            dsts.add(dst)
            transfers.append(Transfer(Flow((src,), (dst,))))
        return Schedule(name, 1, (tuple(transfers),))
    if pairs is not None:
        raise FredError(f"{name} takes group= (and root=), not pairs=")
    members = _check_group(group, ports)
    if name in ("reduce", "broadcast", "multicast"):
        if root is None:
            raise FredError(f"{name} needs root=")
        root = _check_port(root, ports, "root port")
        if name != "multicast" and root not in members:
            raise FredError(f"{name}: root {root} is not in the group {list(members)}")
        flow = Flow(members, (root,)) if name == "reduce" else Flow((root,), members)
        return Schedule(name, 1, ((Transfer(flow),),))
    if root is not None:
        raise FredError(f"{name} takes no root=")
    n = len(members)
    if name == "all-reduce":
        return Schedule(name, 1, ((Transfer(Flow(members, members)),),))
    if name == "reduce-scatter":
        return Schedule(name, n, tuple((Transfer(Flow(members, (g,)), i, i),)
                                       for i, g in enumerate(members)))
    if name == "all-gather":
        return Schedule(name, n, tuple((Transfer(Flow((g,), members), i, i),)
                                       for i, g in enumerate(members)))
    # all-to-all: g_i's chunk j goes to g_j's slot i.
    phases = []
    for shift in range(1, n):
        phases.append(tuple(Transfer(Flow((members[i],), (members[(i + shift) % n],)),
                                     (i + shift) % n, i) for i in range(n)))
    return Schedule(name, n, tuple(phases))


def lower_collective(op: str, *, group=None, ports: int, root=None, pairs=None) -> list[list[Flow]]:
    """Phases of flows for a collective (contract API); see :func:`schedule_collective`."""
    return schedule_collective(op, ports=ports, group=group, root=root, pairs=pairs).flow_phases()


def chunk_count(op: str, *, group=None, pairs=None) -> int:
    name = _normalise_op(op)
    if name in ("reduce-scatter", "all-gather", "all-to-all"):
        return len(list(group))
    return 1


def reference_result(op: str, send: np.ndarray, *, group=None, root=None, pairs=None,
                     add=None) -> np.ndarray:
    """The collective's definition on data, independent of any lowering.

    ``send`` has shape (ports, chunks, ...); returns the receive buffers (same shape).
    ``add(a, b)`` is the element-wise sum (default: int64 ``+``); its order is
    irrelevant for exact (integer) arithmetic, which is what the tests use.
    """
    add = add or (lambda a, b: a + b)
    name = _normalise_op(op)
    recv = send.copy()

    def total(chunk):
        members = list(group)
        value = send[members[0], chunk]
        for q in members[1:]:
            value = add(value, send[q, chunk])
        return value

    if name in ("unicast", "permutation"):
        for src, dst in pairs:
            recv[dst, 0] = send[src, 0]
    elif name == "all-reduce":
        for p in group:
            recv[p, 0] = total(0)
    elif name == "reduce":
        recv[root, 0] = total(0)
    elif name in ("broadcast", "multicast"):
        for p in group:
            recv[p, 0] = send[root, 0]
    elif name == "reduce-scatter":
        for i, g in enumerate(group):
            recv[g, i] = total(i)
    elif name == "all-gather":
        for i, g in enumerate(group):
            for p in group:
                recv[p, i] = send[g, i]
    else:  # all-to-all
        members = list(group)
        for i, gi in enumerate(members):
            for j, gj in enumerate(members):
                recv[gj, i] = send[gi, j]
    return recv
