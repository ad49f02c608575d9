"""What the packet fabric adds to a fabric program (docs/fabric_rtl.md, "Packet fabric"): the
header each NPU's packets carry and the last sequence number each NPU receives.

The switches' stored phases and the engines' stages are the circuit fabric's program
(:func:`hdl.compiler.fabric_program.fabric_program`): a packet switch stores the same
configurations in the same slots and selects them from the headers. A header's phase index
must then name the right slot at every switch the packet crosses, so a collective must sit in
the same slot index at each of its switches. Pure Python.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, PacketFormat

__all__ = ["packet_headers"]


def packet_headers(program, request, packet: PacketFormat, *, vc: int = VC.DP) -> list[dict]:
    """Per NPU (rank order): ``{"phase", "vc", "flow", "last_seq"}`` for ``program`` (a
    :class:`~hdl.compiler.fabric_program.FabricProgram`) of ``request`` (its
    :class:`~hdl.contracts.fabric.FabricRequest`).

    * ``phase``: the slot of the NPU's collective (the same at every switch it crosses);
    * ``flow``: the collective's index for an in-switch collective (a reduction's inputs share
      it, as the switch's drain rule and the host rule of reductions need), the rank for an
      endpoint algorithm (every NPU's stream is its own flow);
    * ``last_seq``: the sequence number of the last packet the NPU receives (its stream cut
      into ``packet.packet_flits``-flit packets by the sender), 0 when it receives nothing.

    Raises :class:`FredError` for what the packet fabric does not run yet: an engine of more
    than one stage (the hierarchical all-reduce), a switch with more than one phase (its
    collectives would share a VC across phases: see the host rule of reductions), or a
    collective in different slots at two switches."""
    slot_of = {}
    for s, phases in enumerate(program.switches):
        if len(phases) > 1:
            raise FredError(f"the packet fabric runs one phase per switch so far; "
                            f"{program.switch_name(s)} has {len(phases)} for this request")
        for k, phase in enumerate(phases):
            for c in phase.collectives:
                if slot_of.setdefault(c, k) != k:
                    raise FredError(f"collective {c} is in slot {slot_of[c]} at one switch and "
                                    f"{k} at {program.switch_name(s)}: a header names one slot")
    in_switch = program.algorithm == "in-switch"
    flows = len(request.collectives) if in_switch else len(program.engines)
    if flows > 1 << packet.flow_bits:
        raise FredError(f"{flows} flows need flow_bits >= {(flows - 1).bit_length()}, "
                        f"got {packet.flow_bits}")
    collective_of = {r: index for index, coll in enumerate(request.collectives)
                     for r in coll.ranks}
    headers = []
    for rank, engine in enumerate(program.engines):
        if len(engine["stages"]) > 1:
            raise FredError(f"the packet fabric runs one-stage engine programs so far; NPU "
                            f"{rank} runs {len(engine['stages'])} stages ({program.algorithm})")
        c = collective_of.get(rank)
        received = sum(st["recv_count"] for st in engine["stages"])
        packets = -(-received // packet.packet_flits)
        headers.append({"phase": slot_of.get(c, 0), "vc": int(vc),
                        "flow": (c or 0) if in_switch else rank,
                        "last_seq": max(packets - 1, 0) % (1 << packet.seq_bits)})
    return headers

