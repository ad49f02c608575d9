"""What the packet FRED fabric's iteration run loads (docs/fabric_iteration.md, "The packet
fabric"): per switch the stored phases of every distinct in-switch algorithm side by side in
its slots with their flow-port tables (loaded once; nothing per collective: the headers select
the phases), and per NPU, per collective, its engine program and its header registers
(:data:`hdl.contracts.trace_program.PACKET_HEADER_REGS`) in its program loader."""

from __future__ import annotations

from hdl.compiler.fabric_program import default_phases
from hdl.compiler.packet_fabric_program import (online_headers, packet_headers, phase_orders,
                                                received_packets, runs_online)
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes
from hdl.contracts.trace_program import PACKET_HEADER_REGS, loader_entries, stage_flows_word

from .fred_loading import phases_key

__all__ = ["packet_iteration_format", "packet_online", "packet_staged", "packet_header_writes", "packet_loader_entries",
           "packet_slots", "packet_switch_writes"]


def packet_online(programs: list) -> bool:
    """Whether the iteration's collectives (``programs``, each a
    :class:`~hdl.compiler.fabric_program.FabricProgram`) run as online unicasts (endpoint
    algorithms) or as stored phases (in-switch); FredError if they mix (a packet fabric build
    routes one way)."""
    kinds = {runs_online(p) for p in programs}
    if len(kinds) > 1:
        raise FredError("the iteration mixes in-switch collectives and endpoint algorithms ("
                        + ", ".join(sorted({p.algorithm for p in programs})) + "); a packet fabric "
                        "build runs one of them (stored phases, or online unicasts)")
    return kinds.pop() if kinds else False


def packet_staged(programs: list) -> bool:
    """Whether the iteration's NPUs are built ``staged``
    (:class:`~hdl.designs.iteration.PacketTraceNpu`: a destination and a barrier per engine
    stage): some collective's engines run more than one stage (the hierarchical all-reduce).
    Only then: every other iteration's top stays the one it was."""
    return any(len(engine["stages"]) > 1 for p in programs for engine in p.engines)


def packet_iteration_format(spec: FabricSpec, online: bool, stripes: int = 0):
    """The header format of the iteration's packet fabric (:class:`PacketFabricTop`'s);
    ``stripes``: the I/O iteration's stripe field (online only)."""
    from hdl.designs.fabric.packet_fabric_top import packet_format
    return packet_format(default_phases(), dest_ports=max(spec.switch_ports) if online else 0,
                         stripes=stripes if online else 0)


def packet_header_writes(program, request, packet, base: int, staged: bool = False) -> dict[int, list]:
    """Per rank, the (register, value) writes of its header registers for one collective
    (``program`` of ``request``): its phase slot (``base`` + the program's, the slot of the
    collective's phases at every switch it crosses), VC, flow id, and the packets it receives
    per run; ``staged`` (:func:`packet_staged`): the flow register holds every engine stage's
    destination (:func:`~hdl.contracts.trace_program.stage_flows_word`). FredError, naming it,
    for what the packet fabric does not run
    (:func:`~hdl.compiler.packet_fabric_program.packet_headers` / ``online_headers``) or for a
    collective whose phases need a phase order (several phases of one VC at a switch:
    the orders would have to be reloaded per collective, not built)."""
    if runs_online(program):
        headers = online_headers(program, request, packet, staged=staged)
        if staged:
            headers = [{**h, "flow": stage_flows_word(h["flows"], packet.flow_bits)} for h in headers]
    else:
        ordered = [program.switch_name(s) for s, (_, entries) in enumerate(phase_orders(program, request, packet))
                   if entries]
        if ordered:
            raise FredError(f"{request.label}: switches {', '.join(ordered)} serve several phases of one VC "
                            f"in a phase order; an iteration on the packet fabric does not load orders per "
                            f"collective yet")
        headers = [{**h, "phase": h["phase"] + base} for h in packet_headers(program, request, packet)]
    out = {}
    for rank, (engine, header) in enumerate(zip(program.engines, headers)):
        packets = received_packets(engine, packet)      # the cut the packetizer makes, chunks too
        out[rank] = [(PACKET_HEADER_REGS["phase"], header["phase"]), (PACKET_HEADER_REGS["vc"], header["vc"]),
                     (PACKET_HEADER_REGS["flow"], header["flow"]), (PACKET_HEADER_REGS["packets"], packets)]
    return out


def packet_slots(spec: FabricSpec, programs: list) -> tuple[dict, list[int]]:
    """(the iteration's distinct stored programs -> (first slot, the first collective with it);
    per collective, the slot of its phase 0). A header names one slot for every switch its
    packets cross, so a collective's phases sit at the same slots at every switch: each
    distinct program (its phases at all switches) takes the slots after the ones before it
    (as many as its most phases at one switch) at every switch. FredError if they do not fit
    ``default_phases()``."""
    slots: dict = {}
    bases, used = [], 0
    for k, program in enumerate(programs):
        key = tuple(phases_key(phases) for phases in program.switches)
        if key not in slots:
            slots[key] = (used, k)
            used += max(len(phases) for phases in program.switches)
            if used > default_phases():
                raise FredError(f"the iteration's {len(slots)} distinct in-switch programs need {used} stored "
                                f"phases at every switch (collective {k}: {program.algorithm}); a switch has "
                                f"{default_phases()} slots")
        bases.append(slots[key][0])
    return slots, bases


def packet_loader_entries(spec: FabricSpec, programs: list, requests: list, packet) -> dict[int, list]:
    """Per rank, its program loader's entries for ``programs`` (of ``requests``) in order: the
    engine's writes (``stages`` deferred, as on the circuit fabric) and the header registers
    (:func:`packet_header_writes`, every stage's destination when :func:`packet_staged`), only
    those that change."""
    bases = [0] * len(programs) if packet_online(programs) else packet_slots(spec, programs)[1]
    staged = packet_staged(programs)
    headers = [packet_header_writes(p, r, packet, b, staged) for p, r, b in zip(programs, requests, bases)]
    stages = frozenset({ENGINE_REGS.index("stages")})
    return {rank: loader_entries([{0: engine_writes(p.engines[rank]) + h[rank]} for p, h in zip(programs, headers)],
                                 1, deferred=stages)
            for rank in range(spec.npus)}


def packet_switch_writes(spec: FabricSpec, programs: list) -> tuple[list, list]:
    """(configuration words ``[switch, slot, last, word]``, program writes ``[unit, register,
    value]``) of the switches: every distinct stored program of the iteration at its slots
    (:func:`packet_slots`) and its flow-port table entries at the same slots; none for online
    unicasts."""
    from cocotb_tests.fabric.packet_fabric_sim import flow_port_writes
    from cocotb_tests.fabric.run import configuration_words
    if packet_online(programs):
        return [], []
    config, writes = [], []
    for base, first in packet_slots(spec, programs)[0].values():
        config += configuration_words(programs[first], base)
        writes += flow_port_writes(spec, programs[first], base)
    return config, writes

