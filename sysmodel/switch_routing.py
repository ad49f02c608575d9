"""Adapter to the configuration compiler: how many phases an in-switch collective needs.

The only place the system model touches :mod:`hdl.compiler`. :func:`phases_for` takes the
flows one collective asks of one logical switch and returns the number of sequential phases
the compiler needs to route them on a Fred_3 switch of the size the fabric says (its chiplet's).
"""

from __future__ import annotations

from hdl.compiler import Flow, phase_count
from sysmodel.model_cache import current

__all__ = ["phases_for", "MIDDLE_SUBNETWORKS", "ROUTER"]

#: The paper builds every switch from Fred_3 chiplets.
MIDDLE_SUBNETWORKS = 3
#: What routes the flows (reported in results.json).
ROUTER = "hdl.compiler.route"


def _disjoint_groups(flows) -> list[list[tuple]]:
    """Greedy partition of flows into groups with pairwise disjoint inputs and outputs
    (flows that share a port can never run in the same phase)."""
    groups: list[tuple[set, set, list]] = []
    for inputs, outputs in flows:
        for used_in, used_out, members in groups:
            if used_in.isdisjoint(inputs) and used_out.isdisjoint(outputs):
                used_in.update(inputs)
                used_out.update(outputs)
                members.append((inputs, outputs))
                break
        else:
            groups.append((set(inputs), set(outputs), [(inputs, outputs)]))
    return [members for _, _, members in groups]


def phases_for(ports: int, middle: int, flows: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]) -> int:
    """Phases needed to route ``flows`` (tuples of (inputs, outputs) port tuples) on
    Fred_``middle``(``ports``) (the fabric's choice: the level's chiplet, or a Fred_3 of a power
    of two, :meth:`sysmodel.fred_tree.FredTreeNetwork.routing_switch`; the compiler takes any
    P >= 2).

    Flows sharing a port are first split into groups that can share a phase; the compiler
    then routes each group and may split it further when its conflict graph cannot be
    coloured with ``middle`` colours. Cached (:mod:`sysmodel.model_cache`, ``routing_phases``):
    the key is the arguments, all plain values."""
    if not flows:
        return 0
    memo = current().routing_phases
    key = (ports, middle, flows)
    hit = memo.get(key)
    if hit is not None:
        return hit
    return memo.put(key, _route_phases(ports, middle, flows))


def _route_phases(ports: int, middle: int, flows) -> int:
    # the number of phases only: hdl.compiler.phase_count is len(route(...).phases) without
    # making each phase's SwitchConfig (the search and its result are route's)
    return sum(phase_count(ports=ports, middle=middle, flows=[Flow(inputs=i, outputs=o) for i, o in group])
               for group in _disjoint_groups(flows))
