"""What the fabric RTL is loaded with for one request (pure Python; issue 15).

:func:`fabric_program` turns a :class:`~hdl.base.fabric.FabricSpec` and a
:class:`~hdl.base.fabric.FabricRequest` into

* per switch (L1 switches 0..l1_count-1, then the L2's planes 0..l2_planes-1), its phases: the flows of each phase
  (routed onto Fred_m(P) by the configuration compiler, :mod:`hdl.base.compiler`), the
  configuration words and the number of flits its inputs accept in that phase (what the RTL's
  phase sequencer counts before selecting the next phase);
* per NPU, its engine registers (:data:`ENGINE_REGS`): flits to send and receive, the weights of
  the data it sends and of the data it must receive, the sink's backpressure threshold and LFSR
  seed.

In-switch collectives (Fred-B/D, ``algorithm="in-switch"``), as the system model assumes
(``sysmodel/collectives.py``): every member sends its buffer once towards the lowest switch
common to the group (its L1 if the group is inside one L1, else the L2), reduced on the way up,
replicated on the way down. A group spanning several L1s uses one uplink port ``u`` of each of
its L1s: ``u`` = the local index of the group's lowest rank, modulo the uplink ports, so that
on Fred-C/D concurrent groups with different local indices (the DP groups of MP2-DP5-PP2) use
different uplink ports, the model's one logical 4-flit/cycle link spread over 4 ports.

L2 planes (``FabricSpec.l2_planes``): the collectives' flows are first computed on the logical
L2 (port ``j * uplink_ports + u`` = L1 ``j``'s uplink port ``u``), then each flow is moved to
the plane that holds its ports, renumbered to that plane's switch (:func:`plane_flows`); a
flow whose ports lie on two planes cannot run on that fabric and is refused with an error
naming it and the planes.

Phases: at each switch, the flows of the collectives, in request order, are packed greedily
into phases (a collective joins the current phase if its ports are free there and the compiler
routes the union in one phase; a collective's own flows at one switch are always in one phase).
Every switch's phases are therefore contiguous runs of the same global order, so the lowest
unfinished collective is always in the active phase of every switch it crosses: no deadlock.

Data: see :mod:`hdl.fabric.npu_engine`; :func:`mix` is the non-linear 32-bit function both
sides compute, :func:`rank_weights` a rank's pseudo-random ``(w, h)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdl.base.compiler import Flow, Router
from hdl.base.errors import FredError
from hdl.base.fabric import FabricRequest, FabricSpec

__all__ = ["ENGINE_REGS", "NPU_BUFFER", "MIX_CONSTANTS", "ALGORITHMS", "mix", "rank_weights", "SwitchPhase",
           "FabricProgram", "fabric_program", "resolve_algorithm", "default_phases", "plane_flows",
           "switch_label"]

#: Engine program registers, in register-address order.
ENGINE_REGS = ("send_count", "recv_count", "ws", "hs", "wr", "hr", "backpressure", "seed",
               "own_only", "add_until", "fwd_count", "check_from", "chunk", "last_base",
               "out_base", "in_base")
#: Constants of :func:`mix` (odd multipliers of a 32-bit finaliser).
MIX_CONSTANTS = (0x9E3779B1, 0x85EBCA77, 0x2C1B3C6D)
#: Algorithms per kind of fabric: in-switch (B/D) and endpoint (A/C), per op.
ALGORITHMS = {
    True: {"all-reduce": ("in-switch",), "reduce": ("in-switch",), "multicast": ("in-switch",)},
    False: {"all-reduce": ("ring", "hierarchical"), "reduce": ("chain",), "multicast": ("chain",)},
}
#: Algorithms the RTL engines implement today.
IMPLEMENTED = ("in-switch", "ring", "chain")
_MASK = 0xFFFFFFFF
#: Flits each NPU engine can hold between receiving a flit and forwarding it
#: (:class:`hdl.fabric.npu_engine.NpuEngine`): a ring's chunk must fit, since every NPU sends
#: its own chunk before it forwards.
NPU_BUFFER = 4096


def default_phases() -> int:
    """Configuration slots per switch in the RTL fabric."""
    return 8


def mix(index: int, lane: int) -> int:
    """The 32-bit non-linear function of a flit index and lane (the RTL's ``_mix``)."""
    c1, c2, c3 = MIX_CONSTANTS
    x = (index * c1 + ((lane + 1) * c2 & _MASK)) & _MASK
    x ^= x >> 15
    x = (x * c3) & _MASK
    return x ^ (x >> 12)


def rank_weights(rank: int, seed: int = 0) -> tuple[int, int]:
    """``(w, h)`` of the data NPU ``rank`` sends: flit k lane l = w * mix(k, l) + h mod 2^32."""
    w = mix(0x10000 + rank, seed) | 1
    h = mix(0x20000 + rank, seed + 7)
    return w, h


def flit_value(weights: tuple[int, int], index: int, lane: int) -> int:
    w, h = weights
    return (w * mix(index, lane) + h) & _MASK


@dataclass
class SwitchPhase:
    """One phase of one switch: its flows, the routed configuration (``SwitchConfig``) and the
    flits its inputs accept in it."""

    flows: tuple[Flow, ...]
    config: object
    input_flits: int
    collectives: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"flows": [str(f) for f in self.flows], "input_flits": self.input_flits,
                "collectives": list(self.collectives)}


@dataclass
class FabricProgram:
    """Everything loaded into the fabric for one request (see the module docstring)."""

    algorithm: str
    switch_ports: tuple[int, ...]
    switches: list[list[SwitchPhase]]
    engines: list[dict]
    flits_sent: int
    flits_received: int
    contributors: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def flits_to_check(self) -> int:
        """Received flits the engines check (all but the ring's partial sums)."""
        return sum(max(0, e["recv_count"] - e["check_from"]) for e in self.engines)

    @property
    def phases(self) -> list[int]:
        return [len(p) for p in self.switches]

    planes: int = 1

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


def _in_switch_flows(spec: FabricSpec, coll) -> dict[int, list[Flow]]:
    """Flows per switch index (L2 = l1_count) of one in-switch collective."""
    per_l1: dict[int, list[int]] = {}
    for rank in coll.members:
        per_l1.setdefault(spec.l1_of(rank), []).append(rank % spec.npus_per_l1)
    k, up, l2 = spec.npus_per_l1, spec.uplink_ports, spec.l1_count
    lowest = min(coll.ranks)
    u = (lowest % k) % up
    port = k + u                                  # the uplink port used on each L1
    flows: dict[int, list[Flow]] = {}
    if coll.op == "all-reduce":
        if len(per_l1) == 1:
            (j, local), = per_l1.items()
            flows[j] = [Flow(local, local)]
        else:
            for j, local in per_l1.items():
                flows[j] = [Flow(local, [port]), Flow([port], local)]
            l2_ports = [j * up + u for j in per_l1]
            flows[l2] = [Flow(l2_ports, l2_ports)]
    elif coll.op == "reduce":
        root_l1, root_local = spec.l1_of(coll.root), coll.root % k
        if len(per_l1) == 1:
            flows[root_l1] = [Flow(per_l1[root_l1], [root_local])]
        else:
            for j, local in per_l1.items():
                if j != root_l1:
                    flows[j] = [Flow(local, [port])]
            flows[root_l1] = [Flow(per_l1.get(root_l1, []) + [port], [root_local])]
            flows[l2] = [Flow([j * up + u for j in per_l1 if j != root_l1], [root_l1 * up + u])]
    elif coll.op == "multicast":
        root_l1, root_local = spec.l1_of(coll.root), coll.root % k
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


def _hop_flows(spec: FabricSpec, hops, u: int) -> dict[int, list[Flow]]:
    """Flows per switch of point-to-point hops ``(src, dst)`` (one flow per hop and switch:
    src's port to dst's port inside an L1, else up uplink port ``u``, across the L2, down)."""
    k, up, l2 = spec.npus_per_l1, spec.uplink_ports, spec.l1_count
    flows: dict[int, list[Flow]] = {}
    for src, dst in hops:
        a, b = spec.l1_of(src), spec.l1_of(dst)
        if a == b:
            flows.setdefault(a, []).append(Flow([src % k], [dst % k]))
        else:
            flows.setdefault(a, []).append(Flow([src % k], [k + u]))
            flows.setdefault(l2, []).append(Flow([a * up + u], [b * up + u]))
            flows.setdefault(b, []).append(Flow([k + u], [dst % k]))
    return flows


def _endpoint(spec, coll, algorithm, size, engines):
    """Engine programs (updated in ``engines``) and per-switch ``(flows, flits per flow)`` of one
    endpoint collective. Returns (flows per switch, flits per flow per switch, receivers and
    their senders)."""
    if coll.op == "all-reduce":
        members = list(coll.members)
        n = len(members)
        chunk = -(-size // n)                    # ceil: the last chunks may carry padding flits
        if chunk > NPU_BUFFER:
            raise FredError(f"a ring all-reduce of {size} flits over {n} NPUs moves chunks of "
                            f"{chunk} flits; the RTL NPUs buffer {NPU_BUFFER} (at most "
                            f"{NPU_BUFFER * n} flits for this group)")
        total = (2 * n - 2) * chunk
        w = sum(engines[r]["ws"] for r in members) & _MASK
        h = sum(engines[r]["hs"] for r in members) & _MASK
        for i, r in enumerate(members):
            engines[r].update(send_count=total, recv_count=total, own_only=chunk,
                              add_until=n * chunk, fwd_count=(2 * n - 3) * chunk,
                              check_from=(n - 1) * chunk, chunk=chunk, last_base=(n - 1) * chunk,
                              out_base=i * chunk, in_base=((i - 1) % n) * chunk, wr=w, hr=h)
        hops = [(members[i], members[(i + 1) % n]) for i in range(n)]
        received = {r: tuple(members) for r in members}
    elif coll.op == "multicast":
        order = [coll.root] + list(coll.members)
        root = engines[coll.root]
        root.update(send_count=size, own_only=size)
        for x, r in enumerate(order[1:], start=1):
            fwd = size if x < len(order) - 1 else 0
            engines[r].update(send_count=fwd, recv_count=size, fwd_count=fwd, own_only=0,
                              wr=root["ws"], hr=root["hs"])
        hops = list(zip(order, order[1:]))
        received = {r: (coll.root,) for r in order[1:]}
    else:   # reduce: chain from the highest member down to the root (the lowest)
        order = list(coll.members)
        received = {}
        engines[order[-1]].update(send_count=size, own_only=size)
        for x in range(len(order) - 2, -1, -1):
            r, upstream = order[x], order[x + 1:]
            fwd = size if x > 0 else 0
            engines[r].update(recv_count=size, send_count=fwd, fwd_count=fwd, own_only=0,
                              add_until=fwd,
                              wr=sum(engines[q]["ws"] for q in upstream) & _MASK,
                              hr=sum(engines[q]["hs"] for q in upstream) & _MASK)
            received[r] = tuple(upstream)
        hops = [(order[x + 1], order[x]) for x in range(len(order) - 1)]
    u = (min(coll.ranks) % spec.npus_per_l1) % spec.uplink_ports
    flows: dict[int, list[Flow]] = {}
    for src, dst in hops:
        for s, fl in _hop_flows(spec, [(src, dst)], u).items():
            flows.setdefault(s, []).extend((f, engines[src]["send_count"]) for f in fl)
    return flows, received


def fabric_program(spec: FabricSpec, request: FabricRequest, *, algorithm: str | None = None,
                   seed: int = 0, sink_backpressure: float = 0.0,
                   phases: int | None = None) -> FabricProgram:
    """The switch phases and engine programs of ``request`` on ``spec`` (module docstring).
    Raises FredError, before anything is built, for anything the fabric cannot run."""
    phases = default_phases() if phases is None else phases
    if spec.dtype != "int32":
        raise FredError(f"the RTL fabric's engines check int32 data; dtype {spec.dtype} is not supported")
    if not isinstance(sink_backpressure, (int, float)) or not 0 <= sink_backpressure < 1:
        raise FredError(f"sink_backpressure must be a probability in [0, 1), got {sink_backpressure!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise FredError(f"seed must be a non-negative integer, got {seed!r}")
    _validate(spec, request)
    algorithm = resolve_algorithm(spec, request, algorithm)
    size = request.size_flits
    threshold = round(sink_backpressure * 65536)
    engines = []
    for rank in range(spec.npus):
        w, h = rank_weights(rank, seed)
        engines.append(dict(send_count=0, recv_count=0, ws=w, hs=h, wr=0, hr=0,
                            backpressure=threshold, seed=(mix(rank, seed + 3) & 0xFFFF) or 1,
                            own_only=0, add_until=0, fwd_count=0, check_from=0, chunk=_MASK,
                            last_base=0, out_base=0, in_base=0))
    contributors: list[tuple[int, ...]] = [() for _ in range(spec.npus)]
    per_collective = []
    for coll in request.collectives:
        if algorithm == "in-switch":
            if coll.op == "all-reduce":
                senders, receivers = coll.members, coll.members
            elif coll.op == "reduce":
                senders, receivers = coll.members, (coll.root,)
            else:
                senders, receivers = (coll.root,), coll.members
            wr = sum(engines[r]["ws"] for r in senders) & _MASK
            hr = sum(engines[r]["hs"] for r in senders) & _MASK
            for r in senders:
                engines[r].update(send_count=size, own_only=size)
            for r in receivers:
                engines[r].update(recv_count=size, wr=wr, hr=hr)
                contributors[r] = tuple(senders)
            per_collective.append({s: [(f, size * len(f.inputs)) for f in fl]
                                   for s, fl in _in_switch_flows(spec, coll).items()})
        else:
            flows, received = _endpoint(spec, coll, algorithm, size, engines)
            for r, senders in received.items():
                contributors[r] = senders
            per_collective.append(flows)
    n_switch = spec.l1_count + spec.l2_planes
    ports = tuple([spec.l1_ports] * spec.l1_count + [spec.l2_plane_ports] * spec.l2_planes)
    routers = [Router(ports=p, middle=spec.middle) for p in ports]
    switches: list[list[SwitchPhase]] = [[] for _ in range(n_switch)]
    for index, coll_flows in enumerate(per_collective):
        coll = request.collectives[index]
        coll_flows = dict(coll_flows)
        logical_l2 = coll_flows.pop(spec.l1_count, [])
        for plane, counted in plane_flows(spec, logical_l2).items():
            coll_flows[spec.l1_count + plane] = counted
        for s, counted in sorted(coll_flows.items()):
            flows = [f for f, _ in counted]
            flits = sum(n for _, n in counted)
            current = switches[s][-1] if switches[s] else None
            if current is not None:
                used_in = {p for f in current.flows for p in f.inputs}
                used_out = {p for f in current.flows for p in f.outputs}
                free = not (used_in & {p for f in flows for p in f.inputs}
                            or used_out & {p for f in flows for p in f.outputs})
                if free:
                    config, _ = routers[s].try_one_phase(current.flows + tuple(flows))
                    if config is not None:
                        switches[s][-1] = SwitchPhase(current.flows + tuple(flows), config,
                                                      current.input_flits + flits,
                                                      current.collectives + (index,))
                        continue
            config, status = routers[s].try_one_phase(tuple(flows))
            if config is None:
                raise FredError(f"collective {index} ({coll}) needs flows "
                                f"{'; '.join(map(str, flows))} on switch "
                                f"{switch_label(spec.l1_count, spec.l2_planes, s)} "
                                f"(Fred_{spec.middle}({ports[s]})) that do not route in one phase ({status})")
            switches[s].append(SwitchPhase(tuple(flows), config, flits, (index,)))
    for s, plist in enumerate(switches):
        if len(plist) > phases:
            raise FredError(f"request {request.label} needs {len(plist)} phases on switch "
                            f"{switch_label(spec.l1_count, spec.l2_planes, s)}; the RTL stores {phases}")
    return FabricProgram(algorithm, ports, switches, engines,
                         sum(e["send_count"] for e in engines), sum(e["recv_count"] for e in engines),
                         contributors, planes=spec.l2_planes)
