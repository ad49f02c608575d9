"""The ports of one part of a fabric cut for the lock-step simulator (``eda/fabric/lockstep.py``;
docs/fabric_rtl.md, "Simulation speed"): the signals of every cut link packed into two buses,
``cut_out`` (driven by this part) and ``cut_in`` (the other part's ``cut_out``, field for field).
Written once for the circuit fabric (``FabricTop``), the packet fabric (``PacketFabricTop``) and
the mesh (``MeshFabricTop``); each top says which links are cut and what crosses them.
"""

from __future__ import annotations

from amaranth.lib.wiring import In, Out

__all__ = ["link_cut_fields", "exchange_fields", "exchanged", "cut_ports", "cut_slices"]


def link_cut_fields(cuts, part: int, forward, backward) -> list[tuple[str, str, int]]:
    """The cut fields of part ``part``, LSB first, as ``(bus, name, width)``: for each cut link
    ``(name, source_part, sink_part)`` of ``cuts`` (in the order both parts agree on), the
    sender's part drives the ``forward`` fields ``(suffix, width)`` (``<name>_<suffix>``) and
    reads the ``backward`` ones, the receiver's part the reverse; a link with neither end here
    adds nothing."""
    fields = []
    for name, source_part, sink_part in cuts:
        if part not in (source_part, sink_part):
            continue
        out, back = ("cut_out", "cut_in") if source_part == part else ("cut_in", "cut_out")
        fields += [(out, f"{name}_{suffix}", width) for suffix, width in forward]
        fields += [(back, f"{name}_{suffix}", width) for suffix, width in backward]
    return fields


def exchange_fields(part: int, signals) -> list[tuple[str, str, int]]:
    """The cut fields of signals each part of a two-part cut drives for the other (a split
    barrier's "all my NPUs are done"): for each ``(name, width)`` of ``signals``, part ``part``
    drives ``<name>_<part>`` on ``cut_out`` and reads ``<name>_<other part>`` on ``cut_in``,
    every ``cut_out`` field first, in order, then every ``cut_in`` field, so that appended
    after the same link fields part 0's ``cut_out`` is still part 1's ``cut_in``."""
    other = 1 - part
    return ([("cut_out", f"{name}_{part}", width) for name, width in signals]
            + [("cut_in", f"{name}_{other}", width) for name, width in signals])


def exchanged(component, fields, part: int, name: str) -> tuple:
    """(this part's signal, the other part's) of an :func:`exchange_fields` signal ``name``:
    slices of ``component.cut_out`` / ``cut_in`` (``fields``: the component's whole field list)."""
    slices = cut_slices(component, fields)
    return slices[f"{name}_{part}"], slices[f"{name}_{1 - part}"]


def cut_ports(fields) -> dict:
    """The component members ``cut_out`` / ``cut_in`` of ``fields`` (a bus without a field is
    left out: a part that only sends has no ``cut_in``)."""
    ports = {}
    for bus, direction in (("cut_out", Out), ("cut_in", In)):
        width = sum(w for b, _, w in fields if b == bus)
        if width:
            ports[bus] = direction(width)
    return ports


def cut_slices(component, fields) -> dict:
    """``{field name: its slice of component.cut_out / cut_in}``, packed LSB first in the order
    of ``fields``."""
    at, out = {"cut_out": 0, "cut_in": 0}, {}
    for bus, name, width in fields:
        out[name] = getattr(component, bus)[at[bus]:at[bus] + width]
        at[bus] += width
    return out
