"""What the fabric RTL is loaded with for one request (pure Python; docs/fabric_rtl.md).

:func:`fabric_program` turns a :class:`~hdl.contracts.fabric.FabricSpec` and a
:class:`~hdl.contracts.fabric.FabricRequest` into

* per switch (L1 switches 0..l1_count-1, then the L2's planes 0..l2_planes-1), its phases: the flows of each phase
  (routed onto Fred_m(P) by the configuration compiler, :mod:`hdl.compiler`), the
  configuration words and the number of flits its inputs accept in that phase, in all and
  per input port (what the RTL's phase sequencer counts before selecting the next phase, and
  lets each port take);
* per endpoint (the NPUs, then the I/O controllers, ``FabricSpec.endpoints``), its engine's stages (:data:`~hdl.contracts.npu_engine.STAGE_REGS` each,
  :func:`~hdl.contracts.npu_engine.engine_writes` loads them):
  flits to send and receive, the weights of the data it sends and of the data it must
  receive; and the sink's backpressure threshold and LFSR seed.

Every algorithm's steps -- who sends how much to whom, in which stage -- come from the one
description the system model's timing is derived from too (:mod:`hdl.compiler.algorithms`);
this module adds the switch ports, the chunks' flit padding and the engines' registers.

In-switch collectives (Fred-B/D, ``algorithm="in-switch"``, :func:`~hdl.compiler.algorithms.in_switch`):
every member sends its buffer once towards the lowest switch
common to the group (its L1 if the group is inside one L1, else the L2), reduced on the way up,
replicated on the way down. A group spanning several L1s uses one uplink port ``u`` of each of
its L1s: ``u`` = the local index of the group's lowest rank, modulo the uplink ports, so that
on Fred-C/D concurrent groups with different local indices (the DP groups of MP2-DP5-PP2) use
different uplink ports, the model's one logical 4-flit/cycle link spread over 4 ports.

Endpoint collectives (Fred-A/C): a unidirectional ring all-reduce in rank order; the
hierarchical all-reduce (:func:`~hdl.compiler.algorithms.hierarchical`): a reduce-scatter
ring in each L1 (k members: k chunks of S/k), an all-reduce ring across the L1s among the
members of the same local index i (on uplink port i mod uplink ports: on Fred-C/D the k rings
cross at once, on Fred-A/B's one port they take turns), an all-gather ring in each L1 -- three
engine stages, and at each L1 switch three (or 2 + k) phases; and chain reduce / multicast in
rank order from the root (:func:`~hdl.compiler.algorithms.chain`).

Phases: at each switch, the flows of the collectives (per engine stage, in request order) are
packed greedily into phases (an item -- a collective, or one ring of a hierarchical stage --
joins the current phase if its ports are free there, its input ports take as many flits as
the phase's, and the compiler routes the union in one phase; an item's own flows at one switch
are always in one phase). Every switch's phases are therefore contiguous runs of the same
global order, so the lowest unfinished item is always in the active phase of every switch it
crosses: no deadlock. Each input port takes exactly its share of each phase (the sequencer
gates it), so a flit of a later phase that reaches a port early waits there.

L2 planes (``FabricSpec.l2_planes``): the collectives' flows are first computed on the logical
L2 (port ``j * uplink_ports + u`` = L1 ``j``'s uplink port ``u``), then each flow is moved to
the plane that holds its ports, renumbered to that plane's switch (:func:`plane_flows`); a
flow whose ports lie on two planes cannot run on that fabric and is refused with an error
naming it and the planes.


Data: see :mod:`hdl.contracts.npu_engine` (the engine's register map and data, shared with the
RTL and the golden model): :func:`~hdl.contracts.npu_engine.mix` is the non-linear 32-bit
function both sides compute, :func:`~hdl.contracts.npu_engine.rank_weights` a rank's
pseudo-random ``(w, h)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdl.compiler import Flow, Router
from hdl.compiler import algorithms
from hdl.compiler.algorithms import Plan, padded_to_pieces
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import IO_OPS, SWITCH_PHASES, FabricRequest, FabricSpec
from hdl.contracts.npu_engine import DTYPES_RUN, ENGINE_STAGES, NPU_BUFFER, mix, rank_weights
from hdl.compiler.fabric_golden import expected_hashes

__all__ = ["ALGORITHMS", "empty_phase", "in_switch_flows", "ring_engine_stages", "chain_engine_stages", "finish_engines", "SwitchPhase", "FabricProgram", "fabric_program", "resolve_algorithm",
           "default_phases", "plane_flows", "switch_label"]

_MASK = 0xFFFFFFFF

#: Algorithms per kind of fabric: in-switch (B/D) and endpoint (A/C), per op. On B/D an
#: io-reduce may also run as the chain: with one member, that NPU's unicast write into its
#: controller (an activation-checkpoint offload, online on the packet fabric; the concurrent
#: scenario dp-under-write, studies/concurrent_case.py).
ALGORITHMS = {
    True: {"all-reduce": ("in-switch",), "reduce": ("in-switch",), "multicast": ("in-switch",),
           "io-broadcast": ("in-switch",), "io-reduce": ("in-switch", "chain")},
    False: {"all-reduce": ("ring", "hierarchical"), "reduce": ("chain",), "multicast": ("chain",),
            "io-broadcast": ("chain",), "io-reduce": ("chain",)},
}
#: Algorithms the RTL engines implement.
IMPLEMENTED = ("in-switch", "ring", "hierarchical", "chain")

def default_phases() -> int:
    """Configuration slots per switch in the RTL fabric (:data:`~hdl.contracts.fabric.SWITCH_PHASES`)."""
    return SWITCH_PHASES



@dataclass
class SwitchPhase:
    """One phase of one switch: its flows, the routed configuration (``SwitchConfig``), the
    flits its inputs accept in it (``input_flits``, summed over ports; ``port_flits`` per input
    port, the same for every input port of the phase; ``input_ports`` the ports it uses) and the
    collectives (indices into the request) whose flows it carries."""

    flows: tuple[Flow, ...]
    config: object
    input_flits: int
    collectives: tuple[int, ...]
    port_flits: int = 0

    @property
    def input_ports(self) -> tuple[int, ...]:
        return tuple(sorted({p for f in self.flows for p in f.inputs}))

    @property
    def port_mask(self) -> int:
        return sum(1 << p for p in self.input_ports)

    def to_dict(self) -> dict:
        return {"flows": [str(f) for f in self.flows], "input_flits": self.input_flits,
                "port_flits": self.port_flits, "collectives": list(self.collectives)}


@dataclass
class FabricProgram:
    """Everything loaded into the fabric for one request (see the module docstring).
    ``engines[r]``: endpoint r's engine (NPU r, or I/O controller r - npus): ``stages`` (a list of :data:`~hdl.contracts.npu_engine.STAGE_REGS` dicts),
    ``backpressure``, ``seed``, its own data's ``ws``/``hs``, and for reports the totals
    ``send_count``/``recv_count``/``check_count`` and the last stage's ``wr``/``hr``."""

    algorithm: str
    switch_ports: tuple[int, ...]
    switches: list[list[SwitchPhase]]
    engines: list[dict]
    flits_sent: int
    flits_received: int
    contributors: list[tuple[int, ...]] = field(default_factory=list)
    #: fp16: per NPU, the hash of every flit it must receive (hdl.compiler.fabric_golden); None: int32
    expected_hashes: list[int] | None = None

    @property
    def flits_to_check(self) -> int:
        """Received flits the engines check (all but the rings' partial sums)."""
        return sum(e["check_count"] for e in self.engines)

    @property
    def phases(self) -> list[int]:
        return [len(p) for p in self.switches]

    planes: int = 1
    #: a concurrent run's program that also stores phases (``algorithm`` "in-switch + ..."):
    #: the collectives (request indices) whose packets are online unicasts of the default
    #: index (endpoint algorithms among in-switch classes,
    #: :func:`hdl.compiler.concurrent_program.concurrent_program`); empty otherwise
    online_collectives: frozenset = frozenset()

    def switch_name(self, index: int) -> str:
        return switch_label(len(self.switches) - self.planes, self.planes, index)


def switch_label(l1_count: int, planes: int, index: int) -> str:
    """Name of switch ``index`` of the fabric (``L1.j``; ``L2``, or ``L2.p`` when the L2 has
    several planes)."""
    if index < l1_count:
        return f"L1.{index}"
    return "L2" if planes == 1 else f"L2.{index - l1_count}"


def plane_flows(spec: FabricSpec, flows) -> dict[int, list]:
    """The logical L2's ``flows`` (items ``(Flow, flits)``, ports ``j * uplink_ports + u``)
    per L2 plane, renumbered to the plane's switch (``FabricSpec.l2_plane_of``). Raises
    FredError for a flow whose ports are on more than one plane."""
    out: dict[int, list] = {}
    for flow, flits in flows:
        where = {p: spec.l2_plane_of(p) for p in set(flow.inputs) | set(flow.outputs)}
        planes = sorted({plane for plane, _ in where.values()})
        if len(planes) != 1:
            raise FredError(f"L2 flow {flow} of fabric {spec.name} joins ports of L2 planes "
                            f"{', '.join(map(str, planes))}; its L2 is {spec.l2_planes} separate "
                            f"Fred_{spec.middle}({spec.l2_plane_ports}) planes (l2_planes; plane p "
                            f"takes uplink ports {spec.uplink_ports // spec.l2_planes} x p .. of "
                            f"every L1), so an L2 flow must stay inside one plane")
        out.setdefault(planes[0], []).append(
            (Flow([where[p][1] for p in flow.inputs], [where[p][1] for p in flow.outputs]), flits))
    return out


def resolve_algorithm(spec: FabricSpec, request: FabricRequest, algorithm: str | None) -> str:
    """The algorithm to run (None = the spec's default), or FredError if it does not apply to
    this fabric and op or the RTL does not implement it."""
    allowed = ALGORITHMS[spec.in_switch][request.op]
    if algorithm is None:
        algorithm = allowed[0]
    if algorithm not in allowed:
        kind = "in-switch" if spec.in_switch else "endpoint"
        raise FredError(f"algorithm {algorithm!r} does not apply to {request.op} on {spec.name} "
                        f"({kind} collectives: {', '.join(allowed)})")
    if algorithm not in IMPLEMENTED:
        raise FredError(f"the RTL fabric does not implement the endpoint algorithm {algorithm!r} "
                        f"yet; it runs {', '.join(IMPLEMENTED)}")
    return algorithm


def in_switch_flows(spec: FabricSpec, coll, top: int | None, *, uplink: int | None = None) -> dict[int, list[Flow]]:
    """Flows per switch index (L2 = l1_count) of one in-switch collective (``top``: the L1 an
    all-reduce turns round in, None for the L2: :class:`~hdl.compiler.algorithms.InSwitch`) on
    uplink port ``uplink`` of each L1 (default: the local index of the group's lowest rank,
    modulo the uplink ports: the module docstring)."""
    per_l1: dict[int, list[int]] = {}
    for rank in coll.members:
        j, local = spec.port_of(rank)
        per_l1.setdefault(j, []).append(local)
    k, up, l2 = spec.npus_per_l1, spec.uplink_ports, spec.l1_count
    lowest = min(coll.members)       # an NPU (an I/O op's root, a controller, is not a member)
    u = (lowest % k) % up if uplink is None else uplink
    port = k + u                                  # the uplink port used on each L1
    flows: dict[int, list[Flow]] = {}
    if coll.op == "all-reduce":
        if top is not None:
            flows[top] = [Flow(per_l1[top], per_l1[top])]
        else:
            for j, local in per_l1.items():
                flows[j] = [Flow(local, [port]), Flow([port], local)]
            l2_ports = [j * up + u for j in per_l1]
            flows[l2] = [Flow(l2_ports, l2_ports)]
    elif coll.op in ("reduce", "io-reduce"):
        root_l1, root_local = spec.port_of(coll.root)
        if set(per_l1) == {root_l1}:
            flows[root_l1] = [Flow(per_l1[root_l1], [root_local])]
        else:
            for j, local in per_l1.items():
                if j != root_l1:
                    flows[j] = [Flow(local, [port])]
            flows[root_l1] = [Flow(per_l1.get(root_l1, []) + [port], [root_local])]
            flows[l2] = [Flow([j * up + u for j in per_l1 if j != root_l1], [root_l1 * up + u])]
    elif coll.op in ("multicast", "io-broadcast"):
        root_l1, root_local = spec.port_of(coll.root)
        others = [j for j in per_l1 if j != root_l1]
        flows[root_l1] = [Flow([root_local], per_l1.get(root_l1, []) + ([port] if others else []))]
        if others:
            flows[l2] = [Flow([root_l1 * up + u], [j * up + u for j in others])]
            for j in others:
                flows[j] = [Flow([port], per_l1[j])]
    else:
        raise FredError(f"the fabric runs no op {coll.op!r}")
    return flows


def _validate(spec: FabricSpec, request: FabricRequest) -> None:
    if request.size_flits < 1 or request.size_flits >= 2 ** 31:
        raise FredError(f"size must be 1 .. 2^31-1 flits, got {request.size_flits}")
    seen: set[int] = set()
    for coll in request.collectives:
        for rank in coll.ranks:
            spec.check_rank(rank)
        if seen & set(coll.ranks):
            raise FredError(f"collectives of one request must use disjoint NPUs; "
                            f"{sorted(seen & set(coll.ranks))} appear twice")
        seen |= set(coll.ranks)
        if coll.op != request.op:
            raise FredError(f"request {request.label}: collective op {coll.op} differs from {request.op}")
        if coll.op in ("reduce", "multicast") and coll.root is None:
            raise FredError(f"a {coll.op} needs a root")
        if coll.op == "multicast" and coll.root in coll.members:
            raise FredError(f"a multicast's destinations exclude its root {coll.root}")
        if coll.op == "reduce" and coll.root not in coll.members:
            raise FredError(f"a reduce's members include its root {coll.root}")
        if len(coll.ranks) < 2:
            raise FredError(f"collective {coll} has one NPU: nothing to communicate")
        _validate_io(spec, coll)


def _validate_io(spec: FabricSpec, coll) -> None:
    """An I/O op's root is an I/O controller and its members are NPUs; an NPU collective's
    endpoints are NPUs. Any data format: fp16 is checked against the golden model's addition
    order (:mod:`hdl.compiler.fabric_golden`), the controllers' engines hashing what they
    receive as the NPUs' do."""
    if coll.op in IO_OPS:
        if coll.root is None or coll.root < spec.npus:
            raise FredError(f"an {coll.op} is rooted at an I/O controller (endpoint >= {spec.npus}); "
                            f"got root {coll.root!r}")
        if any(r >= spec.npus for r in coll.members):
            raise FredError(f"an {coll.op}'s members are NPUs (ranks < {spec.npus}); got {list(coll.members)}")
    elif any(r >= spec.npus for r in coll.ranks):
        raise FredError(f"a {coll.op} runs between NPUs (ranks < {spec.npus}); {list(coll.ranks)} "
                        f"names an I/O controller")


def _hop_flows(spec: FabricSpec, hops, u: int) -> dict[int, list[Flow]]:
    """Flows per switch of point-to-point hops ``(src, dst)`` (one flow per hop and switch:
    src's port to dst's port inside an L1, else up uplink port ``u``, across the L2, down)."""
    k, up, l2 = spec.npus_per_l1, spec.uplink_ports, spec.l1_count
    flows: dict[int, list[Flow]] = {}
    for src, dst in hops:
        (a, p), (b, q) = spec.port_of(src), spec.port_of(dst)   # NPUs or I/O controllers
        if a == b:
            flows.setdefault(a, []).append(Flow([p], [q]))
        else:
            flows.setdefault(a, []).append(Flow([p], [k + u]))
            flows.setdefault(l2, []).append(Flow([a * up + u], [b * up + u]))
            flows.setdefault(b, []).append(Flow([k + u], [q]))
    return flows


def _uplink_of(spec: FabricSpec, ranks) -> int:
    """The uplink port a group's flows use on every L1: the local index of its lowest rank
    modulo the uplink ports (concurrent groups of different local indices: different ports)."""
    return (min(ranks) % spec.npus_per_l1) % spec.uplink_ports


def _stage(engine: dict, **fields) -> dict:
    """A stage dict of :data:`~hdl.contracts.npu_engine.STAGE_REGS`: nothing sent or received, own data = the NPU's."""
    stage = dict(send_count=0, recv_count=0, ws=engine["ws"], hs=engine["hs"], wr=0, hr=0,
                 own_only=0, add_until=0, fwd_count=0, check_from=0, chunk=_MASK, last_base=0,
                 out_base=0, in_base=0, org=0)
    stage.update(fields)
    return stage


def _sum_weights(weights) -> tuple[int, int]:
    weights = list(weights)
    return sum(w for w, _ in weights) & _MASK, sum(h for _, h in weights) & _MASK


def _ring_stage(kind: str, i: int, n: int, chunk: int, own: tuple[int, int],
                result: tuple[int, int], org: int = 0) -> dict:
    """Stage registers of position ``i`` of a unidirectional ring of ``n`` in chunks of
    ``chunk`` flits over data indices ``org`` .. ``org + n * chunk - 1``; position i sends to
    i + 1. ``own``: the (w, h) of what the NPU holds (added or sent); ``result``: the (w, h) of
    the group's sum. ``kind``:

    * ``all-reduce``: 2(n - 1) steps; step j sends chunk (i - j) mod n: own data at step 0,
      received + own at steps 1 .. n - 1 (the last of them is the fully reduced chunk
      (i + 1) mod n), received at steps n .. 2n - 3 (all-gather); the n - 1 fully reduced
      chunks received are checked;
    * ``reduce-scatter``: n - 1 steps of the above (received + own); the last chunk received,
      the others' sum of chunk (i + 1) mod n, is checked (against ``result`` - ``own``) and
      kept: the NPU then holds the group's sum of that chunk;
    * ``all-gather``: the NPU holds the group's sum of chunk (i + 1) mod n (``own`` =
      ``result``): sends it, then forwards; every received chunk is checked.
    """
    c = chunk
    steps = algorithms.ring_steps(kind, n)    # one chunk sent and one received per step
    common = dict(ws=own[0], hs=own[1], chunk=c, last_base=(n - 1) * c, org=org,
                  send_count=steps * c, recv_count=steps * c, fwd_count=(steps - 1) * c, own_only=c)
    if kind == "all-reduce":
        return dict(common, add_until=n * c, check_from=(n - 1) * c,
                    wr=result[0], hr=result[1], out_base=i * c, in_base=((i - 1) % n) * c)
    if kind == "reduce-scatter":
        return dict(common, add_until=(n - 1) * c, check_from=(n - 2) * c,
                    wr=(result[0] - own[0]) & _MASK, hr=(result[1] - own[1]) & _MASK,
                    out_base=i * c, in_base=((i - 1) % n) * c)
    if kind == "all-gather":
        return dict(common, add_until=0, check_from=0, wr=result[0], hr=result[1],
                    out_base=((i + 1) % n) * c, in_base=(i % n) * c)
    raise FredError(f"no ring stage {kind!r}")


@dataclass
class _Item:
    """A unit of phase packing: flows of one collective (or of one ring of a hierarchical
    stage) per switch, each flow with the flits each of its input ports accepts."""

    collective: int
    flows: dict[int, list[tuple[Flow, int]]]


def _check_chunk(size: int, n: int, chunk: int, what: str) -> None:
    if chunk > NPU_BUFFER:
        raise FredError(f"a {what} of {size} flits over {n} NPUs moves chunks of {chunk} flits; "
                        f"the RTL NPUs buffer {NPU_BUFFER} (at most {NPU_BUFFER * n} flits for "
                        f"this group)")


def _plan(spec: FabricSpec, coll, algorithm: str) -> Plan:
    """The description's plan (:mod:`hdl.compiler.algorithms`) of one collective, or FredError
    where the algorithm does not apply to its group."""
    if algorithm == "in-switch" and coll.op == "io-reduce":
        # every member sends, the controller (not a member: it adds nothing) receives the sum
        return Plan("in-switch", coll.op, (algorithms.InSwitch(coll.op, coll.members, (coll.root,),
                                                               coll.root),))
    if algorithm == "in-switch":
        op = "multicast" if coll.op == "io-broadcast" else coll.op
        return algorithms.in_switch(op, coll.ranks, coll.root, spec.l1_of)
    if algorithm == "ring":
        return algorithms.ring(coll.op, coll.members)
    if algorithm == "hierarchical":
        plan = algorithms.hierarchical(coll.op, coll.members, spec.l1_of)
        if plan is None:
            by_l1 = algorithms.l1_groups(coll.members, spec.l1_of)
            raise FredError(f"the hierarchical all-reduce needs the same number (> 1) of members on "
                            f"each of at least two L1 switches; group {list(coll.members)} has "
                            f"{ {j: len(v) for j, v in sorted(by_l1.items())} } per L1 (use the ring)")
        return plan
    if coll.op in IO_OPS:
        # the model's I/O chain (algorithms.io_chain_order): the group's controller (k = its
        # index) enters the group at a member on its L1, then the members in rank order
        k = coll.root - spec.npus
        order = algorithms.io_chain_order(coll.members, spec.l1_of, spec.l1_of(coll.root), k)
        return algorithms.chain("multicast" if coll.op == "io-broadcast" else "reduce",
                                coll.root, order)
    return algorithms.chain(coll.op, coll.root, [r for r in coll.members if r != coll.root])


def _ring_engines(spec, index, coll, plan: Plan, size, engines, items, contributors) -> None:
    """Engine stages (:func:`ring_engine_stages`) and packing items of a plan of ring stages
    (the ring, the hierarchical all-reduce): each ring member sends to its successor."""
    ring_engine_stages(plan, size, coll.members, engines, contributors)
    for s, stage in enumerate(plan.stages):
        items[s] += [_hop_item(spec, index, ring.hops(), _uplink_of(spec, ring.order), engines, s)
                     for ring in stage.rings]


def ring_engine_stages(plan: Plan, size: int, members, engines, contributors) -> None:
    """Append one engine stage per plan stage (ring stages: the ring, the hierarchical and 2D
    all-reduce) to ``engines[r]["stages"]`` of every member r, and set ``contributors[r]``.

    Data: the buffer is padded to a whole number of the finest chunks (the product of the
    reduce-scatter and all-reduce rings' sizes: S/(k x l1s) for the hierarchical all-reduce);
    each NPU tracks the part of it it holds and the weights of what that part sums: a
    reduce-scatter leaves position i with chunk (i + 1) mod n of its part (``_ring_stage``),
    an all-reduce sums the part, an all-gather gathers the n chunks back."""
    if len(plan.stages) > ENGINE_STAGES:
        raise FredError(f"the {plan.name} {plan.op} has {len(plan.stages)} stages; the RTL engines "
                        f"run {ENGINE_STAGES}")
    # the last chunks may carry padding flits
    held = {r: (0, padded_to_pieces(size, plan.pieces), (engines[r]["ws"], engines[r]["hs"])) for r in members}
    for stage in plan.stages:
        what = f"{plan.name} {plan.op}" + (f"'s {stage.op}" if len(plan.stages) > 1 else "")
        for ring in stage.rings:
            n, order = ring.n, ring.order
            length = held[order[0]][1]
            chunk = length if ring.op == "all-gather" else length // n
            _check_chunk(size, n, chunk, what)
            ring_sum = _sum_weights(held[r][2] for r in order)
            for i, r in enumerate(order):
                org, length, own = held[r]
                if ring.op == "all-gather":   # r holds chunk (i + 1) mod n of the gathered part
                    org, result = org - ((i + 1) % n) * chunk, own
                    held[r] = (org, chunk * n, own)
                else:
                    result = ring_sum
                    keep = ((i + 1) % n) * chunk if ring.op == "reduce-scatter" else 0
                    held[r] = (org + keep, chunk if ring.op == "reduce-scatter" else length, result)
                engines[r]["stages"].append(dict(_ring_stage(ring.op, i, n, chunk, own, result, org=org),
                                                 sender=order[(i - 1) % n]))
                contributors[r] = tuple(members)


def _chain_engines(spec, index, coll, plan: Plan, size, engines, items, contributors) -> None:
    """Engine stages (:func:`chain_engine_stages`) and the packing item of a chain."""
    chain_engine_stages(plan, size, engines, contributors)
    items[0].append(_hop_item(spec, index, plan.stages[0].hops(), _uplink_of(spec, coll.ranks), engines, 0))


def chain_engine_stages(plan: Plan, size: int, engines, contributors) -> None:
    """Append the one engine stage of a chain (:func:`hdl.compiler.algorithms.chain`;
    multicast: from the root, each member forwarding what it receives; reduce: to the root,
    each member adding what it receives to its own) to ``engines[r]["stages"]`` of every member
    r, and set ``contributors[r]``; the RTL mesh fabric's chains use it too."""
    chain = plan.stages[0]
    flow = chain.flow()
    first = engines[flow[0]]
    first["stages"].append(_stage(first, send_count=size, own_only=size))
    for x in range(1, len(flow)):
        r = flow[x]
        fwd = size if x < len(flow) - 1 else 0
        if chain.reverse:      # reduce: the sum of everything upstream arrives
            upstream = tuple(reversed(flow[:x]))
            w, h = _sum_weights((engines[q]["ws"], engines[q]["hs"]) for q in upstream)
            engines[r]["stages"].append(_stage(engines[r], recv_count=size, send_count=fwd,
                                               fwd_count=fwd, add_until=fwd, wr=w, hr=h,
                                               sender=flow[x - 1]))
            contributors[r] = upstream
        else:                  # multicast: the root's data arrives
            engines[r]["stages"].append(_stage(engines[r], send_count=fwd, recv_count=size,
                                               fwd_count=fwd, wr=first["ws"], hr=first["hs"],
                                               sender=flow[x - 1]))
            contributors[r] = (flow[0],)


def _hop_item(spec: FabricSpec, index: int, hops, uplink: int, engines, stage: int) -> _Item:
    """The packing item of point-to-point ``hops`` (a ring's or a chain's, from the plan):
    each hop's flows through the switches (uplink port ``uplink``), each taking the flits its
    sender's engine stage ``stage`` sends."""
    flows: dict[int, list[tuple[Flow, int]]] = {}
    for src, dst in hops:
        for sw, fl in _hop_flows(spec, [(src, dst)], uplink).items():
            flows.setdefault(sw, []).extend((f, engines[src]["stages"][stage]["send_count"]) for f in fl)
    return _Item(index, flows)


def _check_run_options(spec: FabricSpec, seed, sink_backpressure) -> None:
    """What the engines can run: their data types and lanes, a backpressure probability, a seed."""
    if spec.dtype not in DTYPES_RUN:
        raise FredError(f"the RTL fabric's engines run {' and '.join(DTYPES_RUN)} data; dtype "
                        f"{spec.dtype} is not supported")
    if spec.dtype != "int32" and spec.lanes > 2:
        raise FredError(f"the RTL fabric's engines hash {spec.dtype} flits of up to 2 lanes; got "
                        f"{spec.lanes}")
    if not isinstance(sink_backpressure, (int, float)) or not 0 <= sink_backpressure < 1:
        raise FredError(f"sink_backpressure must be a probability in [0, 1), got {sink_backpressure!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise FredError(f"seed must be a non-negative integer, got {seed!r}")


def _new_engines(spec: FabricSpec, seed: int, sink_backpressure: float) -> list[dict]:
    """One engine per endpoint (NPU or I/O controller) with its data weights, backpressure threshold and seed, no stage yet."""
    threshold = round(sink_backpressure * 65536)
    engines = []
    for rank in range(spec.endpoints):      # the NPUs, then the I/O controllers
        w, h = rank_weights(rank, seed)
        engines.append(dict(ws=w, hs=h, backpressure=threshold,
                            seed=(mix(rank, seed + 3) & 0xFFFF) or 1, stages=[]))
    return engines


def _in_switch_engines(spec, index, coll, plan, size, engines, items, contributors) -> None:
    """The one engine stage of an in-switch collective: its senders send their own data, its
    receivers expect the senders' sum; the switches' flows are one item of stage 0."""
    flow = plan.stages[0]
    wr, hr = _sum_weights((engines[r]["ws"], engines[r]["hs"]) for r in flow.senders)
    stage = {r: _stage(engines[r]) for r in coll.ranks}
    for r in flow.senders:
        stage[r].update(send_count=size, own_only=size)
    for r in flow.receivers:
        stage[r].update(recv_count=size, wr=wr, hr=hr)
        contributors[r] = tuple(flow.senders)
    for r in coll.ranks:
        engines[r]["stages"].append(stage[r])
    items[0].append(_Item(index, {sw: [(f, size) for f in fl]
                                  for sw, fl in in_switch_flows(spec, coll, flow.top).items()}))


def finish_engines(dtype: str, engines: list[dict]) -> None:
    """Every engine's totals (an engine no collective uses gets one empty stage); fp16 engines
    hash every received flit instead of checking it (:class:`NpuEngine`)."""
    for e in engines:
        if not e["stages"]:
            e["stages"].append(_stage(e))
        e["send_count"] = sum(st["send_count"] for st in e["stages"])
        e["recv_count"] = sum(st["recv_count"] for st in e["stages"])
        e["check_count"] = sum(max(0, st["recv_count"] - st["check_from"]) for st in e["stages"])
        e["wr"], e["hr"] = e["stages"][-1]["wr"], e["stages"][-1]["hr"]
    if dtype != "int32":
        for e in engines:
            for st in e["stages"]:
                st.update(check_from=0, wr=0, hr=0)
            e["check_count"], e["wr"], e["hr"] = e["recv_count"], 0, 0


#: How each algorithm's plan becomes engine stages and switch items.
_ENGINE_BUILDERS = {"in-switch": _in_switch_engines, "chain": _chain_engines}


def fabric_program(spec: FabricSpec, request: FabricRequest, *, algorithm: str | None = None,
                   seed: int = 0, sink_backpressure: float = 0.0,
                   phases: int | None = None, aligned_slots: bool = False) -> FabricProgram:
    """The switch phases and engine programs of ``request`` on ``spec`` (module docstring).
    ``aligned_slots``: every collective in one slot index at every switch it crosses (the
    packet fabric, whose headers name one slot: :func:`_pack`). Raises FredError, before
    anything is built, for anything the fabric cannot run."""
    phases = default_phases() if phases is None else phases
    _check_run_options(spec, seed, sink_backpressure)
    _validate(spec, request)
    algorithm = resolve_algorithm(spec, request, algorithm)
    if spec.dtype != "int32" and algorithm == "hierarchical":
        # its later stages add what the earlier ones left in the NPU (an L1's sum of a chunk):
        # exact int32 sums are regenerated from their weights, fp16 sums would need the
        # engine to store them
        raise FredError(f"the RTL fabric runs the hierarchical all-reduce on int32 data only; "
                        f"{spec.dtype} runs the ring (--algorithm ring)")
    engines = _new_engines(spec, seed, sink_backpressure)
    contributors: list[tuple[int, ...]] = [() for _ in range(spec.endpoints)]
    # packing items per engine stage: every item of stage s comes before those of stage s + 1
    items: list[list[_Item]] = [[] for _ in range(ENGINE_STAGES)]
    build = _ENGINE_BUILDERS.get(algorithm, _ring_engines)   # ring and hierarchical: ring stages
    for index, coll in enumerate(request.collectives):
        build(spec, index, coll, _plan(spec, coll, algorithm), request.size_flits, engines, items, contributors)
    finish_engines(spec.dtype, engines)
    switches = _pack(spec, request, [it for stage in items for it in stage], phases, aligned=aligned_slots)
    program = FabricProgram(algorithm, spec.switch_ports, switches, engines, sum(e["send_count"] for e in engines),
                            sum(e["recv_count"] for e in engines), contributors, planes=spec.l2_planes)
    if spec.dtype != "int32":
        program.expected_hashes = expected_hashes(spec, request, program)
    return program


def empty_phase(router) -> SwitchPhase:
    """A slot holding no flow, routed on ``router``'s switch (a slot a switch stores only so
    that the later slots keep their index at every switch: aligned packing, concurrent
    classes)."""
    config, status = router.try_one_phase(())
    if config is None:       # cannot happen: nothing to route
        raise FredError(f"an empty phase does not route ({status})")
    return SwitchPhase((), config, 0, (), 0)


def _pack(spec: FabricSpec, request: FabricRequest, items: list[_Item], phases: int, *,
          aligned: bool = False) -> list[list[SwitchPhase]]:
    """Each switch's phases: its items' flows in order, packed greedily (an item joins the
    switch's current phase if its ports are free there, its input ports take as many flits as
    the phase's, and the compiler routes the union in one phase). Every switch's phases are
    contiguous runs of one global order, so the lowest unfinished item is in the active phase
    of every switch it crosses: no deadlock. The logical L2's flows go to the plane holding
    their ports (:func:`plane_flows`).

    ``aligned`` (the packet fabric: a header names one slot for every switch a packet
    crosses): an item takes one slot index at all its switches, the lowest every one of them
    can give (the last phase where it joins there, else the next new one). Where each switch's
    own greedy choice already agreed this is the same program; where they differed (Fred-B's
    MP2-DP5-PP2 I/O groups: two groups share a phase at the L1s where their ports are
    disjoint and not at the one where both cross the uplink) the item starts a new phase
    where it could have joined. A switch with fewer phases than the slot gets empty ones
    before it (:func:`empty_phase`, as concurrent classes' slots at a switch a class does not
    cross: a header never names them). A
    collective of several items (the hierarchical all-reduce's stages) is packed as without
    ``aligned``: its stages sit in several slots, which no header names, and the packet
    fabric refuses it by what it is (``packet_headers``: one-stage programs)."""
    ports = spec.switch_ports
    routers = [Router(ports=p, middle=spec.middle) for p in ports]
    switches: list[list[SwitchPhase]] = [[] for _ in ports]

    def name(s):
        return switch_label(spec.l1_count, spec.l2_planes, s)

    def joined(s, flows, share, flits, collective):
        """The phase of switch ``s``'s last one with ``flows`` added, or None where they do
        not join it (ports taken, another share, or the union does not route)."""
        current = switches[s][-1] if switches[s] else None
        if current is None or current.port_flits != share:
            return None
        used_in = {p for f in current.flows for p in f.inputs}
        used_out = {p for f in current.flows for p in f.outputs}
        if (used_in & {p for f in flows for p in f.inputs}
                or used_out & {p for f in flows for p in f.outputs}):
            return None
        config, _ = routers[s].try_one_phase(current.flows + flows)
        if config is None:
            return None
        return SwitchPhase(current.flows + flows, config, current.input_flits + flits,
                           current.collectives + ((collective,) if collective
                                                  not in current.collectives else ()), share)

    items_of = {}
    for item in items:
        items_of[item.collective] = items_of.get(item.collective, 0) + 1
    for item in items:
        coll = request.collectives[item.collective]
        align = aligned and items_of[item.collective] == 1
        item_flows = dict(item.flows)
        for plane, counted in plane_flows(spec, item_flows.pop(spec.l1_count, [])).items():
            item_flows[spec.l1_count + plane] = counted
        placed = {}     # switch -> (flows, share, flits, the last phase with them joined, or None)
        for s, counted in sorted(item_flows.items()):
            flows = tuple(f for f, _ in counted)
            shares = {n for _, n in counted}
            if len(shares) != 1:   # cannot happen with the algorithms above; say so if it does
                raise FredError(f"collective {item.collective} ({coll}) has flows of unequal sizes "
                                f"{sorted(shares)} on switch {name(s)}; a phase's input ports each "
                                f"take the same number of flits")
            share = shares.pop()
            flits = sum(share * len(f.inputs) for f in flows)
            placed[s] = (flows, share, flits, joined(s, flows, share, flits, item.collective))
        # the slot of each switch's own greedy choice; aligned: the highest of them everywhere
        lowest = {s: len(switches[s]) - (merged is not None) for s, (_, _, _, merged) in placed.items()}
        slot = max(lowest.values(), default=0)
        for s, (flows, share, flits, merged) in placed.items():
            while align and len(switches[s]) < slot:     # slots this switch has nothing in
                switches[s].append(empty_phase(routers[s]))
            if merged is not None and (not align or slot == len(switches[s]) - 1):
                switches[s][-1] = merged
                continue
            config, status = routers[s].try_one_phase(flows)
            if config is None:
                raise FredError(f"collective {item.collective} ({coll}) needs flows "
                                f"{'; '.join(map(str, flows))} on switch {name(s)} "
                                f"(Fred_{spec.middle}({ports[s]})) that do not route in one phase ({status})")
            switches[s].append(SwitchPhase(flows, config, flits, (item.collective,), share))
    for s, plist in enumerate(switches):
        if len(plist) > phases:
            raise FredError(f"request {request.label} needs {len(plist)} phases on switch "
                            f"{name(s)}; the RTL stores {phases}")
    return switches
