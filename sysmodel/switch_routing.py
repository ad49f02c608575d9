"""Adapter to the configuration compiler: how many phases an in-switch collective needs.

The only place the system model touches :mod:`hdl.compiler`. :func:`phases_for` takes the
flows one collective asks of one logical switch and returns the number of sequential phases
the compiler needs to route them on a Fred_3 switch of the next power-of-two size.

Fallback (documented, reported by :func:`compiler_status`): when ``hdl.compiler.route`` is
not importable (the compiler branch not merged yet), flows with disjoint input and output
ports count as one phase -- the paper's claim for Fred_3 with the placement used here -- and
flows that share a port are serialised greedily (each phase takes the flows that fit).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["phases_for", "compiler_status", "MIDDLE_SUBNETWORKS"]

#: The paper builds every switch from Fred_3 chiplets.
MIDDLE_SUBNETWORKS = 3

try:  # pragma: no cover - depends on whether the compiler branch is merged
    from hdl.compiler import Flow as _Flow, route as _route
    _HAVE_COMPILER = True
except ImportError:  # the compiler's route() is not available yet
    _HAVE_COMPILER = False


def compiler_status() -> str:
    """``"hdl.compiler.route"`` when the real router is used, else a description of the fallback."""
    if _HAVE_COMPILER:
        return "hdl.compiler.route"
    return "fallback: disjoint flows = 1 phase (hdl.compiler.route not available)"


def _power_of_two(n: int) -> int:
    p = 2
    while p < n:
        p *= 2
    return p


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


@lru_cache(maxsize=4096)
def phases_for(ports: int, flows: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]) -> int:
    """Phases needed to route ``flows`` (tuples of (inputs, outputs) port tuples) on a switch
    with ``ports`` ports (rounded up to a power of two for the compiler).

    Flows sharing a port are first split into groups that can share a phase; the compiler
    then routes each group and may split it further when its conflict graph cannot be
    coloured with 3 middle subnetworks. The fallback counts one phase per group."""
    if not flows:
        return 0
    size = _power_of_two(max(ports, 2))
    groups = _disjoint_groups(flows)
    if not _HAVE_COMPILER:
        return len(groups)
    return sum(len(_route(ports=size, middle=MIDDLE_SUBNETWORKS,
                          flows=[_Flow(inputs=i, outputs=o) for i, o in group]).phases)
               for group in groups)
