"""A router input shared by several sending units that never send at once (one I/O collective
at a time): the link muxed by the collective's op, each credit back to the unit that spent it."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal

from hdl.contracts.mesh import MESH_VCS

__all__ = ["share_input"]


def share_input(m: Module, name: str, select, outs: dict, credit):
    """Drive one router input from ``outs`` (``{key: Out link}``, the units' links) by
    ``select`` (the running op's key; another value: nothing), and split its credit pulses
    ``credit`` (In(2)) among them. Returns ``(valid, payload, owners)``: the input's valid and
    payload (as a value), and ``{key: Signal(2)}`` each unit's credit pulses.

    Credits return in the order the flits were sent and the units never send at once, so a
    credit on a VC belongs to a unit of an earlier op while that one still has flits on the VC
    whose credit has not returned (a count per unit and VC), the first such in key order, then
    to the running op's unit. A credit that returns after the next collective started (the
    end of a collective is seen a few cycles after its last flits left, their credits a few
    cycles after that) thus reaches its own unit, whose count would otherwise lose it for good.
    A unit not of ``select`` that sends is the caller's error to flag.

    Latency: combinational on the link; the counts move the cycle after.
    """
    valid, payload = Signal(name=f"{name}_valid"), Signal(len(next(iter(outs.values())).payload.as_value()),
                                                          name=f"{name}_payload")
    pick_valid, pick_payload = 0, 0
    for key, o in outs.items():
        pick_valid = Mux(select == key, o.valid, pick_valid)
        pick_payload = Mux(select == key, o.payload.as_value(), pick_payload)
    m.d.comb += [valid.eq(pick_valid), payload.eq(pick_payload)]
    owners = {key: Signal(MESH_VCS, name=f"{name}_credit_{key}") for key in outs}
    for vc in range(MESH_VCS):
        owed = {key: Signal(16, name=f"{name}_owed_{key}_{vc}") for key in outs}
        earlier = {key: (owed[key] != 0) & (select != key) for key in outs}
        for key, o in outs.items():
            before = [earlier[k] for k in outs if k < key]
            others = [earlier[k] for k in outs if k != key]
            mine = Mux(earlier[key], ~_any(before), ~_any(others) & (select == key))
            m.d.comb += owners[key][vc].eq(credit[vc] & mine)
            m.d.sync += owed[key].eq(owed[key] + ((select == key) & o.valid & (o.payload.vc == vc))
                                     - owners[key][vc])
    return valid, payload, owners


def _any(signals):
    return sum(signals) != 0 if signals else Const(0, 1)
