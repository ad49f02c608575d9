"""What the packet FRED fabric's iteration run loads (docs/fabric_iteration.md, "The packet
fabric"): per switch the stored phases of every distinct in-switch algorithm side by side in
its slots with their flow-port tables and the phase order of the whole iteration (loaded once;
nothing per collective: the headers select the phases), and per NPU, per collective, its
engine program and its header registers (:data:`hdl.contracts.trace_program.PACKET_HEADER_REGS`)
in its program loader."""

from __future__ import annotations

from hdl.compiler.fabric_program import default_phases
from hdl.designs.switch.phase_order import MAX_ORDER_ENTRIES
from hdl.compiler.packet_fabric_program import (online_headers, packet_headers, phase_orders,
                                                received_packets, runs_online)
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes
from hdl.contracts.packet import VC, stream_packets
from hdl.contracts.trace_program import PACKET_HEADER_REGS, loader_entries, stage_flows_word

from .fred_loading import phases_key

__all__ = ["packet_iteration_format", "packet_online", "packet_staged", "packet_header_writes", "packet_loader_entries",
           "packet_slots", "packet_iteration_orders", "packet_order_entries", "packet_switch_writes"]


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


def packet_header_writes(program, request, packet, base: int, staged: bool = False,
                         vc: int = VC.DP) -> dict[int, list]:
    """Per rank, the (register, value) writes of its header registers for one collective
    (``program`` of ``request``): its phase slot (``base`` + the program's, the slot of the
    collective's phases at every switch it crosses), VC (``vc``, :func:`packet_iteration_orders`),
    flow id, and the packets it receives per run; ``staged`` (:func:`packet_staged`): the flow
    register holds every engine stage's destination
    (:func:`~hdl.contracts.trace_program.stage_flows_word`). FredError, naming it, for what the
    packet fabric does not run (:func:`~hdl.compiler.packet_fabric_program.packet_headers` /
    ``online_headers``)."""
    if runs_online(program):
        headers = online_headers(program, request, packet, staged=staged)
        if staged:
            headers = [{**h, "flow": stage_flows_word(h["flows"], packet.flow_bits)} for h in headers]
    else:
        vcs = {c: vc for c in range(len(request.collectives))}
        headers = [{**h, "phase": h["phase"] + base} for h in packet_headers(program, request, packet, vcs=vcs)]
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


def packet_iteration_orders(spec: FabricSpec, programs: list, requests: list, packet,
                            runs: list[int]) -> tuple[list[int], list[tuple[int, list]]]:
    """(per collective the VC of its packets; per switch the phase order it follows over the
    whole iteration, ``(vc, [(slot, last), ...])``, ``(0, [])`` for none): the orders are
    loaded once, with the switches' phases (docs/fabric_iteration.md, "Phase orders over an
    iteration"). ``runs``: each collective's runs (its node's repeat).

    A collective whose phases need an order at some switch
    (:func:`~hdl.compiler.packet_fabric_program.phase_orders`: several reducing phases of one
    VC there, Fred-B's four DP groups at every L1 and the L2) gets, for each of its runs, its
    entries at that switch, in run order: its slots moved to the iteration's (``packet_slots``)
    and ``last`` the absolute number of the run's last packet -- every NPU numbers its packets
    on across the trace and sends as many per run, so run k's are ``sent_k .. sent_k + P - 1``,
    ``sent_k`` the packets of the runs before. Such collectives go on VC DP, every other on
    VC MP: an active order takes every select on its VC (docs/switch.md, "Phase order"), so
    another collective's phase on that VC would wait for the order's next entry for ever; on
    another VC a switch picks it by arrival, as before. With no ordered collective every
    collective stays on VC DP and nothing is ordered (the iterations that ran before).

    FredError, naming it: a switch's order longer than ``MAX_ORDER_ENTRIES`` (an order longer
    than the slots is built deeper, :func:`packet_order_entries`; Transformer-17B MP4-DP5's
    eight DP all-reduces need 32 at every switch), a
    collective whose NPUs send different numbers of packets per run (their numbers would part
    from then on), or an ordered one whose NPUs receive another number than they send."""
    if len(runs) != len(programs):
        raise FredError(f"{len(runs)} run counts for {len(programs)} collectives")
    switches = len(spec.switch_ports)
    if packet_online(programs):
        return [VC.DP] * len(programs), [(0, [])] * switches
    bases = packet_slots(spec, programs)[1]
    orders = [phase_orders(p, r, packet) for p, r in zip(programs, requests)]
    ordered = [any(entries for _, entries in order) for order in orders]
    if not any(ordered):
        return [VC.DP] * len(programs), [(0, [])] * switches
    entries = [[] for _ in range(switches)]
    sent, modulus = 0, 1 << packet.seq_bits
    for k, (program, request, order) in enumerate(zip(programs, requests, orders)):
        # the packets each NPU's packetizer numbers in a run (it cuts at every chunk's end)
        counts = {sum(stream_packets(st["send_count"], packet.packet_flits, st.get("chunk")) for st in e["stages"])
                  for e in program.engines}
        if len(counts) > 1 or ordered[k] and counts != {received_packets(e, packet) for e in program.engines}:
            raise FredError(f"{request.label}: its NPUs send {sorted(counts)} packets per run; a phase order "
                            f"needs every NPU to send and receive one run of numbers per collective")
        per_run = counts.pop()
        for _ in range(runs[k]):
            for s, (_, run_entries) in enumerate(order):
                entries[s] += [(bases[k] + slot, (sent + last) % modulus) for slot, last in run_entries]
            sent += per_run
    full = [f"{programs[0].switch_name(s)} {len(e)}" for s, e in enumerate(entries) if len(e) > MAX_ORDER_ENTRIES]
    if full:
        runs_ordered = sum(n for n, o in zip(runs, ordered) if o)
        raise FredError(f"the iteration's {runs_ordered} ordered collective run(s) need phase-order entries "
                        f"{', '.join(full)}; a switch's order, loaded once, holds at most {MAX_ORDER_ENTRIES} "
                        f"(the program port's 8-bit index): reloading it per collective is not built")
    vcs = [VC.DP if o else VC.MP for o in ordered]
    return vcs, [(VC.DP, e) if e else (0, []) for e in entries]


def packet_order_entries(orders: list) -> int | None:
    """The switches' order depth an iteration's ``orders`` (:func:`packet_iteration_orders`)
    need (``PacketSwitch(order_entries=)``): None (one entry per slot, the switch as built
    before) while every order fits the slots, else the longest order rounded up to a power of
    two (so that iterations of similar length share a build; docs/fabric_iteration.md, "Deeper
    phase orders")."""
    longest = max((len(entries) for _, entries in orders), default=0)
    if longest <= default_phases():
        return None
    return min(MAX_ORDER_ENTRIES, 1 << (longest - 1).bit_length())


def packet_loader_entries(spec: FabricSpec, programs: list, requests: list, packet,
                          vcs: list[int] | None = None) -> dict[int, list]:
    """Per rank, its program loader's entries for ``programs`` (of ``requests``) in order: the
    engine's writes (``stages`` deferred, as on the circuit fabric) and the header registers
    (:func:`packet_header_writes`, every stage's destination when :func:`packet_staged`), only
    those that change. ``vcs``: each collective's VC, the first of
    :func:`packet_iteration_orders` (which the caller made for its switches' orders); by
    default made here for one run of each collective."""
    if vcs is None:
        vcs = packet_iteration_orders(spec, programs, requests, packet, [1] * len(programs))[0]
    bases = [0] * len(programs) if packet_online(programs) else packet_slots(spec, programs)[1]
    staged = packet_staged(programs)
    headers = [packet_header_writes(p, r, packet, b, staged, vc)
               for p, r, b, vc in zip(programs, requests, bases, vcs)]
    stages = frozenset({ENGINE_REGS.index("stages")})
    return {rank: loader_entries([{0: engine_writes(p.engines[rank]) + h[rank]} for p, h in zip(programs, headers)],
                                 1, deferred=stages)
            for rank in range(spec.npus)}


def packet_switch_writes(spec: FabricSpec, programs: list, orders: list | None = None) -> tuple[list, list]:
    """(configuration words ``[switch, slot, last, word]``, program writes ``[unit, register,
    value]``) of the switches: every distinct stored program of the iteration at its slots
    (:func:`packet_slots`) and its flow-port table entries at the same slots, then the
    switches' phase orders of ``orders`` (:func:`packet_iteration_orders`; nothing when no
    switch has one: the orders' length is 0 from reset); none for online unicasts."""
    from cocotb_tests.fabric.packet_fabric_sim import flow_port_writes, order_writes
    from cocotb_tests.fabric.run import configuration_words
    if packet_online(programs):
        return [], []
    config, writes = [], []
    for base, first in packet_slots(spec, programs)[0].values():
        config += configuration_words(programs[first], base)
        writes += flow_port_writes(spec, programs[first], base)
    if any(entries for _, entries in orders or ()):
        writes += order_writes(spec, orders)
    return config, writes
