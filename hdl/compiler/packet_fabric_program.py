"""What the packet fabric adds to a fabric program (docs/fabric_rtl.md, "Packet fabric"): the
header each NPU's packets carry and the last sequence number each NPU receives.

The switches' stored phases and the engines' stages are the circuit fabric's program
(:func:`hdl.compiler.fabric_program.fabric_program`), packed with ``aligned_slots=True``: a
packet switch stores the same configurations in the same slots and selects them from the
headers. A header's phase index must then name the right slot at every switch the packet
crosses, so a collective sits in the same slot index at each of its switches (the aligned
packing puts it there; :func:`packet_headers` checks it).

Endpoint algorithms (rings, chains: Fred-A/C) store nothing: every packet is a unicast of
the default phase index, routed online at each switch (docs/switch.md, "Online unicast
routing") to the output :func:`online_output` gives for its destination endpoint, which the
header carries in its ``flow`` field (:func:`online_headers`). Pure Python.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError
from hdl.contracts.npu_engine import ENGINE_STAGES
from hdl.contracts.packet import VC, PacketFormat, stream_packets

__all__ = ["slot_entries", "packet_headers", "flow_port_entries", "phase_orders", "online_output",
           "online_table", "online_headers", "runs_online", "write_paces", "stream_head",
           "received_packets"]


def flow_port_entries(program) -> list[list[tuple[int, int, int, int]]]:
    """Per switch, the entries of its flow-port table (``docs/switch.md``, "Starting a
    packet"): ``(slot, input, partners, outputs)`` for every input port of every stored phase,
    ``partners`` the mask of the other inputs of its flow (the operands it reduces with) and
    ``outputs`` the mask of the flow's outputs. Raises :class:`FredError` if two flows of a
    phase share an input (a routed phase never does)."""
    tables = []
    for s, phases in enumerate(program.switches):
        entries = []
        for k, phase in enumerate(phases):
            entries += slot_entries(k, phase.flows, f"{program.switch_name(s)} slot {k}")
        tables.append(entries)
    return tables


def slot_entries(slot: int, flows, where: str) -> list[tuple[int, int, int, int]]:
    """The flow-port table entries ``(slot, input, partners, outputs)`` of the ``flows`` stored
    in one slot (see :func:`flow_port_entries`); FredError naming ``where`` if two flows share
    an input."""
    entries, seen = [], set()
    for flow in flows:
        inputs = sorted(set(flow.inputs))
        outputs = sum(1 << o for o in set(flow.outputs))
        for n in inputs:
            if n in seen:
                raise FredError(f"{where}: input {n} is in two flows")
            seen.add(n)
            entries.append((slot, n, sum(1 << j for j in inputs if j != n), outputs))
    return entries


def packet_headers(program, request, packet: PacketFormat, *, vc: int = VC.DP,
                   vcs: dict | None = None, delays: dict | None = None) -> list[dict]:
    """Per NPU (rank order): ``{"phase", "vc", "flow", "last_seq", "delay"}`` for ``program`` (a
    :class:`~hdl.compiler.fabric_program.FabricProgram`) of ``request`` (its
    :class:`~hdl.contracts.fabric.FabricRequest`).

    * ``phase``: the slot of the NPU's collective (the same at every switch it crosses);
    * ``flow``: the collective's index for an in-switch collective (a reduction's inputs share
      it, as the switch's drain rule and the host rule of reductions need), the rank for an
      endpoint algorithm (every NPU's stream is its own flow);
    * ``vc``: ``vcs[collective index]`` when given (concurrent traffic classes), else ``vc``;
    * ``delay``: ``delays[collective index]`` cycles after the start before the NPU's first
      packet (default 0);
    * ``last_seq``: the sequence number of the last packet the NPU receives (its stream cut
      into ``packet.packet_flits``-flit packets by the sender, and at every chunk's end:
      :func:`received_packets`), 0 when it receives nothing.

    Raises :class:`FredError` for what the packet fabric does not run yet: an engine of more
    than one stage (the hierarchical all-reduce), a switch whose phases :func:`phase_orders`
    cannot order, or a collective in different slots at two switches."""
    for rank, engine in enumerate(program.engines):
        if len(engine["stages"]) > 1:
            raise FredError(f"the packet fabric runs one-stage engine programs so far; NPU "
                            f"{rank} runs {len(engine['stages'])} stages ({program.algorithm})")
    slot_of = {}
    vc_of = _vc_of(request, vc, vcs)
    phase_orders(program, request, packet, vc=vc, vcs=vcs)      # refuses what it cannot order
    for s, phases in enumerate(program.switches):
        for k, phase in enumerate(phases):
            for c in phase.collectives:
                if slot_of.setdefault(c, k) != k:
                    raise FredError(f"collective {c} is in slot {slot_of[c]} at one switch and "
                                    f"{k} at {program.switch_name(s)}: a header names one slot")
    # a program with stored phases and online collectives (concurrent classes): the stored
    # collectives' flows are their indices; the online ones' headers come from online_headers
    in_switch = program.algorithm == "in-switch" or bool(program.online_collectives)
    flows = len(request.collectives) if in_switch else len(program.engines)
    if flows > 1 << packet.flow_bits:
        raise FredError(f"{flows} flows need flow_bits >= {(flows - 1).bit_length()}, "
                        f"got {packet.flow_bits}")
    collective_of = {r: index for index, coll in enumerate(request.collectives)
                     for r in coll.ranks}
    headers = []
    for rank, engine in enumerate(program.engines):
        c = collective_of.get(rank)
        packets = received_packets(engine, packet)
        headers.append({"phase": slot_of.get(c, 0), "vc": vc_of.get(c, int(vc)),
                        "flow": (c or 0) if in_switch else rank,
                        "last_seq": max(packets - 1, 0) % (1 << packet.seq_bits),
                        "delay": int((delays or {}).get(c, 0))})
    return headers



def received_packets(engine: dict, packet: PacketFormat) -> int:
    """The packets an NPU running ``engine`` (a program's engine: its ``stages``) receives in
    a run: each stage's ``recv_count`` flits as its sender's packetizer cuts them,
    ``packet.packet_flits`` flits and a packet's end at every ``chunk``'s end
    (:func:`~hdl.contracts.packet.stream_packets`; a stage's ``chunk`` is its sender's, the
    ring's, and a stage's flits are whole chunks, so a stage ends a packet too; a stage
    without one, one chunk). Chunk 12, packets of 8: 2 packets (8 + 4) per chunk."""
    return sum(stream_packets(st["recv_count"], packet.packet_flits, st.get("chunk"))
               for st in engine["stages"])


def _vc_of(request, vc, vcs) -> dict:
    return {c: int((vcs or {}).get(c, vc)) for c in range(len(request.collectives))}


def phase_orders(program, request, packet: PacketFormat, *, vc: int = VC.DP,
                 vcs: dict | None = None) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per switch, the phase order its control unit follows (docs/switch.md, "Phase order"):
    ``(vc, [(slot, last_seq), ...])`` for a switch with more than one stored phase on VC
    ``vc``, the slots in increasing order (the same at every switch, as a collective has one
    slot everywhere), ``last_seq`` the number of the last packet each flow of the slot
    carries; ``(0, [])`` for a switch with at most one phase per VC (no order: phases picked
    by arrival), and for every switch when no phase carrying a collective of that VC reduces
    anywhere (no flow with two inputs: multicasts, broadcasts, an io-broadcast's trees).

    Why: switches that pick the order of two reductions' phases on one VC by arrival can serve
    them in different orders, and the next switch's input buffers (one FIFO per VC) then hold
    one reduction's operands behind the other's packets: nothing moves (the host rule of
    reductions between switches; docs/fabric_rtl.md, "Packet fabric"). Served in one order,
    each phase until its last packets have started, every switch sends them alike. Without a
    reduction a packet waits for no partner, only for room, so phases picked by arrival
    cannot hold each other up; an order there would only serve the phases one after another
    to their ends where the control unit's yield (docs/switch.md, "Control unit") serves
    paced streams' packets in turn (Fred-B's four DP groups' io-broadcast, each paced by its
    own controller: docs/fabric_validation.md, "Fred-B's DP-group I/O").

    Raises :class:`FredError` naming the switch when two VCs each have several phases there
    (a switch follows one order), or when the flows of an ordered slot carry different
    numbers of packets (an entry has one last sequence number)."""
    vc_of = _vc_of(request, vc, vcs)
    packets = _collective_packets(program, request, packet)
    reducing = _reducing_vcs(program, vc_of)
    orders = []
    for s, phases in enumerate(program.switches):
        slots_on = {}
        for k, phase in enumerate(phases):
            for c in phase.collectives:
                if vc_of[c] in reducing:
                    slots_on.setdefault(vc_of[c], set()).add(k)
        crowded = {v: sorted(k) for v, k in slots_on.items() if len(k) > 1}
        if len(crowded) > 1:
            raise FredError(f"{program.switch_name(s)} has several phases on VCs "
                            f"{[VC(v).name for v in crowded]}; a switch follows one phase order")
        if not crowded:
            orders.append((0, []))
            continue
        (v, slots), = crowded.items()
        entries = []
        for k in slots:
            counts = {packets[c] for c in phases[k].collectives}
            if len(counts) > 1:
                raise FredError(f"{program.switch_name(s)} slot {k}: its collectives carry "
                                f"{sorted(counts)} packets; an ordered phase has one last "
                                f"sequence number")
            entries.append((k, (counts.pop() - 1) % (1 << packet.seq_bits)))
        orders.append((v, entries))
    return orders


def _reducing_vcs(program, vc_of: dict) -> set[int]:
    """The VCs of ``vc_of`` ({collective: VC}) that carry a reduction: a phase, at some
    switch, with a flow of two inputs or more and a collective of that VC (a phase holding
    several VCs' collectives counts for each of them)."""
    return {vc_of[c] for phases in program.switches for phase in phases
            if any(len(f.inputs) > 1 for f in phase.flows) for c in phase.collectives}


def _collective_packets(program, request, packet: PacketFormat) -> dict[int, int]:
    """{collective index: packets of each of its streams}: every stream of an in-switch
    collective is its size cut into ``packet_flits``-flit packets (each NPU sends and receives
    ``size`` flits or nothing). FredError if a collective's NPUs send or receive different
    amounts."""
    counts = {}
    for c, coll in enumerate(request.collectives):
        sizes = {st[key] for r in coll.ranks for st in program.engines[r]["stages"]
                 for key in ("send_count", "recv_count") if st[key]}
        if len(sizes) > 1:
            raise FredError(f"collective {c} sends or receives {sorted(sizes)} flits at its "
                            f"NPUs; an ordered phase needs one stream size")
        counts[c] = max(1, stream_packets(sizes.pop() if sizes else 0, packet.packet_flits))
    return counts


def runs_online(program) -> bool:
    """Whether ``program`` runs as online-routed unicasts on the packet fabric (every
    algorithm but the in-switch collectives)."""
    return program.algorithm != "in-switch"


def online_output(spec, switch: int, endpoint: int) -> int:
    """The output port of switch ``switch`` (L1s ``0 .. l1_count - 1``, then the L2 planes)
    towards ``endpoint`` (an NPU or I/O controller): its own port on its L1; from another L1,
    uplink port ``u``; from the L2 plane, L1 ``l1_of(endpoint)``'s uplink ``u`` -- ``u`` = the
    endpoint's port on its L1 modulo the uplink ports, the circuit program's choice for
    groups of one local index (the DP groups: group ``i`` on uplink ``i mod uplink_ports``,
    so concurrent rings use different ports on Fred-C/D). FredError if the endpoint is not
    reachable from that switch along this route (an L2 plane that does not hold ``u``)."""
    j, port = spec.port_of(endpoint)
    if switch < spec.l1_count:
        return port if j == switch else spec.npus_per_l1 + port % spec.uplink_ports
    plane, l2_port = _l2_hop(spec, endpoint)
    if spec.l1_count + plane != switch:
        raise FredError(f"endpoint {endpoint} is reached over L2 plane {plane}, not switch "
                        f"{switch}")
    return l2_port


def online_table(spec, switch: int) -> dict[int, int]:
    """``{endpoint: output}`` of switch ``switch`` (:func:`online_output`) for every endpoint
    whose packets can cross it: all of them at an L1, at an L2 plane those reached over its
    uplink ports (a plane never sees the others)."""
    planes = spec.l2_planes
    if switch < spec.l1_count or planes == 1:
        return {e: online_output(spec, switch, e) for e in range(spec.endpoints)}
    plane = switch - spec.l1_count
    return {e: online_output(spec, switch, e) for e in range(spec.endpoints) if _l2_hop(spec, e)[0] == plane}


def _l2_hop(spec, endpoint: int) -> tuple[int, int]:
    """(L2 plane, its port) a packet for ``endpoint`` goes down from: the plane of the
    endpoint's L1 uplink ``u`` = its port on the L1 modulo the uplink ports
    (:func:`online_output`)."""
    j, port = spec.port_of(endpoint)
    return spec.l2_plane_of(j * spec.uplink_ports + port % spec.uplink_ports)


def online_headers(program, request, packet: PacketFormat, *, vc: int = VC.DP,
                   vcs: dict | None = None, delays: dict | None = None,
                   ranks=None, staged: bool = False) -> list[dict]:
    """Per endpoint, the header registers (as :func:`packet_headers`) of an endpoint algorithm
    run as online unicasts: ``phase`` = the default index, ``flow`` = the endpoint its stage
    sends to (the switches route on it, :func:`online_output`; every endpoint receives from
    one sender per run, so the receiver's sequence check holds), ``last_seq`` as
    :func:`packet_headers`; ``vc`` and ``delay`` of the endpoint's collective as
    :func:`packet_headers` (``vcs``, ``delays`` by collective index: concurrent traffic
    classes, each class's unicasts on its VC, so the switches serve the default index of the
    highest waiting VC first). ``staged`` (default False): the endpoints are the iteration's
    staged NPUs (:class:`hdl.designs.iteration.PacketTraceNpu`, a destination and a barrier per
    engine stage): a multi-stage program (the hierarchical all-reduce) runs, and each header
    also holds ``flows``, the destination of every engine stage (a one-stage program's
    repeated), for :func:`~hdl.contracts.trace_program.stage_flows_word`; ``flow`` stays stage
    0's. Raises :class:`FredError` for an engine of more than one stage without ``staged`` (its
    stages send to different endpoints and those NPUs hold one destination per run), for a
    stage whose packet numbers would not follow on at its receiver (its sender sent another
    number of packets in the stages before than the receiver received: the depacketizer's
    sequence check and the switches' drain rule need them to), and for more endpoints than
    ``flow`` ids.
    ``ranks`` (default all): the endpoints that send and receive online unicasts (a program
    that also stores phases, ``program.online_collectives``); the headers of the others are
    returned as for no traffic and must come from :func:`packet_headers`."""
    if len(program.engines) > 1 << packet.flow_bits:
        raise FredError(f"{len(program.engines)} endpoints need flow_bits >= "
                        f"{(len(program.engines) - 1).bit_length()}, got {packet.flow_bits}")
    stage_dest: list[dict] = [{} for _ in range(ENGINE_STAGES)]     # per stage, sender -> receiver
    ranks = set(range(len(program.engines)) if ranks is None else ranks)
    for rank, engine in enumerate(program.engines):
        if rank not in ranks:
            continue
        if len(engine["stages"]) > 1 and not staged:
            raise FredError(f"the packet fabric runs one-stage endpoint programs outside an iteration (one "
                            f"destination per endpoint and run; the iteration's NPUs run one per stage); "
                            f"endpoint {rank} runs {len(engine['stages'])} stages ({program.algorithm}: use "
                            f"the ring)")
        for s, stage in enumerate(engine["stages"]):
            if stage["recv_count"]:
                stage_dest[s][stage["sender"]] = rank
    if staged:
        _check_stage_numbers(program, ranks, stage_dest, packet)
    dest = stage_dest[0]
    vc_of = _vc_of(request, vc, vcs)
    collective_of = {r: index for index, coll in enumerate(request.collectives)
                     for r in coll.ranks}
    headers = []
    for rank, engine in enumerate(program.engines):
        c = collective_of.get(rank)
        if rank not in ranks:
            c, engine = None, {"stages": [{"send_count": 0, "recv_count": 0}]}
        for s, stage in enumerate(engine["stages"]):
            if stage["send_count"] and rank not in stage_dest[s]:
                raise FredError(f"endpoint {rank} sends" + (f" in stage {s}" if s else "")
                                + " but no endpoint names it as its sender")
        packets = received_packets(engine, packet)
        header = {"phase": packet.online_phase, "vc": vc_of.get(c, int(vc)),
                  "flow": dest.get(rank, 0),
                  "last_seq": max(packets - 1, 0) % (1 << packet.seq_bits),
                  "delay": int((delays or {}).get(c, 0))}
        if staged:
            last = len(engine["stages"]) - 1
            header["flows"] = tuple(stage_dest[min(s, last)].get(rank, 0) for s in range(ENGINE_STAGES))
        headers.append(header)
    return headers


def _check_stage_numbers(program, ranks, stage_dest, packet: PacketFormat) -> None:
    """FredError unless every stage's packets arrive numbered on from the stages before: the
    packets a stage's sender sent before it equal those its receiver received before it (the
    packetizer numbers a run's packets on over its stages, the depacketizer expects them so)."""
    def packets(stage, count):
        return stream_packets(stage[count], packet.packet_flits, stage.get("chunk"))

    for s, senders in enumerate(stage_dest):
        for sender, receiver in senders.items():
            if sender not in ranks:
                continue
            sent = sum(packets(st, "send_count") for st in program.engines[sender]["stages"][:s])
            got = sum(packets(st, "recv_count") for st in program.engines[receiver]["stages"][:s])
            if sent != got:
                raise FredError(f"endpoint {receiver}'s stage {s} packets from endpoint {sender} are numbered from "
                                f"{sent}, but it received {got} before that stage ({program.algorithm}); the "
                                f"packet numbers of a run must follow on across its stages")


def write_paces(spec, program, headers, ranks=None) -> dict[int, int]:
    """``{npu: writers}``: the pace of every NPU of ``spec``, for the writes into I/O
    controllers (``headers`` from :func:`online_headers`, ``flow`` >= ``spec.npus``). A
    *writer* is an NPU whose online unicasts go into a controller; the NPU that is paced for
    it is the **head of the stream it writes** (:func:`stream_head`): the writer itself when
    it sends only its own data, else the first NPU of the chain that feeds it (an
    ``io-reduce`` chain on Fred-A/C: the member that starts the partial sum), since the
    chain's forwarders send what they receive, as fast as it comes. The head's
    :class:`~hdl.designs.fabric.write_pacer.WritePacer` sends at the controller's rate
    (``spec.io_rate``, the fabric's) divided by the number of writers into that controller,
    so the writers together never inject faster than the controller drains (docs/fabric_rtl.md,
    "Host rules"). Why the head and not the writer: a paced writer at the end of a chain lets
    the chain's unpaced head run ahead, and the chain's packets then wait for the writer in
    the one FIFO per VC of every switch input on its way, where another chain's packets queue
    behind them (head-of-line blocking: four DP groups' chains crossing Fred-A's one-port
    uplinks, docs/fabric_validation.md, "Fred-A's DP-group io-reduce", session 15). Paced at
    its head, the stream reaches the writer at the controller's rate and nothing of it waits
    in the fabric beyond a packet or two. ``ranks`` (default all): the endpoints whose
    headers are online ones. Every other NPU (the writers of a chain among them):
    :data:`~hdl.contracts.fabric.UNPACED` (0, not paced).
    FredError for more writers into one controller than the pacer's divisor counts."""
    from hdl.contracts.fabric import PACE_BITS, UNPACED
    ranks = set(range(spec.npus) if ranks is None else ranks)
    writers: dict[int, list[int]] = {}
    for rank in range(spec.npus):
        stages = program.engines[rank]["stages"]
        if rank in ranks and stages[0]["send_count"] and headers[rank]["flow"] >= spec.npus:
            writers.setdefault(headers[rank]["flow"], []).append(rank)
    paces = {rank: UNPACED for rank in range(spec.npus)}
    for controller, group in writers.items():
        if len(group) >= 1 << PACE_BITS:
            raise FredError(f"{len(group)} NPUs write into I/O controller {controller}; the "
                            f"write pacer counts at most {(1 << PACE_BITS) - 1} writers")
        paces.update({stream_head(spec, program, rank): len(group) for rank in group})
    return paces


def stream_head(spec, program, rank: int) -> int:
    """The NPU whose own data starts the stream NPU ``rank`` sends in ``program``'s first
    stage: ``rank`` itself if that stage receives nothing (it sends its own data), else, while
    the stage receives and forwards from an NPU (``sender``: a chain's member adds what its
    predecessor sends and forwards it, :func:`hdl.compiler.fabric_program.chain_engine_stages`),
    that sender's head. FredError if the senders form a loop (a ring, not a chain)."""
    seen = [rank]
    while True:
        stage = program.engines[rank]["stages"][0]
        sender = stage.get("sender")
        if not stage.get("recv_count") or not stage.get("fwd_count") or sender is None \
                or sender >= spec.npus:
            return rank
        if sender in seen:
            raise FredError(f"NPUs {seen} forward in a loop; a paced write needs a chain with a head")
        seen.append(sender)
        rank = sender
