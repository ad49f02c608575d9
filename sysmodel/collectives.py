"""Collectives on a fabric: algorithms, per-link byte accounting, time and effective bandwidth.

A :class:`Collective` names an operation on a group of NPU ranks. :func:`collective_traffic`
turns it into a :class:`~sysmodel.network.Traffic` (bytes on every directed link, bytes each
NPU injects, latency of its dependent hop chain) with the algorithm the fabric uses. What each
algorithm does (its stages and who sends how much to whom) is the plan of
:mod:`hdl.compiler.algorithms`, which the RTL fabric's engine programs are built from too; this
module adds the routes and the timing:

* **mesh** (endpoint algorithms only): all-reduce / reduce-scatter / all-gather on a group
  that fills a sub-rectangle of the mesh use the hierarchical 2D algorithm with two chunks
  in opposite dimension orders (one rows-then-columns, one columns-then-rows), timed as a
  schedule of the two chunks' dependent stages sharing links
  (:mod:`sysmodel.stage_schedule`); the split between the two chunks is the one that
  minimises that schedule. Other groups use a
  bidirectional logical ring in snake (boustrophedon) order. The faster of the available
  algorithms is used. Broadcast / multicast / reduce: pipelined chain of unicasts.
  I/O: dimension-ordered broadcast trees from every controller (reduce trees for stores),
  routed X-Y, Y-X or half-and-half, whichever has the least-loaded busiest link.
* **FRED without in-switch collectives** (Fred-A, Fred-C): the same endpoint algorithms on
  the tree: ring in rank order, or hierarchical (reduce-scatter inside each L1, ring across
  L1s, all-gather inside each L1) when the group has the same number (>1) of members on
  every L1 it spans, whichever is faster. I/O: each controller feeds one member, members
  forward along a chain (stores: chain reduce, then to the controller).
* **FRED with in-switch collectives** (Fred-B, Fred-D): all-reduce, reduce, broadcast,
  multicast and I/O load / store are flows: each NPU sends its data once, switches reduce
  on the way up and replicate on the way down, so every link of the tree carries the data
  once (at ``1 / in_switch_efficiency`` wire bytes per payload byte: the variant's
  :attr:`~sysmodel.platform.FredVariant.in_switch_efficiency`, 1.0 by default). The number of
  phases comes from the configuration compiler
  (:mod:`sysmodel.switch_routing`); concurrent in-switch collectives crossing one L1-L2 link
  share its physical ports (one flow per port per phase) and take turns beyond them. Phases
  run one after another: each costs a select (the configuration copy on an idle switch) and
  each after the first waits for the previous one: an all-reduce for a further pass of the hop
  chain (round trip), a reduce or multicast for its switches' drain (checked against the RTL
  fabric, docs/fabric_validation.md). Reduce-scatter,
  all-gather and all-to-all use the endpoint algorithms (their in-switch forms are
  sequences of reduce/broadcast phases that send at least as many bytes per NPU).

Sizes: all-reduce, reduce-scatter (input), all-gather (output), all-to-all: the buffer per
NPU; broadcast / multicast: bytes from the root to every member; reduce: bytes from every
member to the root; point-to-point: bytes per pair; io-load: bytes delivered to every
member (the same data, striped over all I/O controllers); io-store: bytes from every member,
reduced into external memory; io-write / io-read: every member writes / reads its own
``size`` bytes to / from external memory (unicast, striped over all controllers; used for
activation checkpoints that do not fit in HBM).

Time of concurrent collectives (:func:`evaluate`): bytes of every collective are summed per
directed link; the busiest link (bytes / bandwidth) sets the time, plus the longest
latency chain and phase-switch overheads. On FRED, link bytes are whole flits: every chunk a
transfer sends (a ring step's chunk, a message, an I/O stripe) is rounded up to the switch's
``flit_bytes``; the mesh is byte-granular (its link format is not specified) unless the
platform gives it a flit (``mesh_flit_bytes``, the model of the RTL mesh): then a ring or 2D
all-reduce's chunks are whole flits per piece, padded as the RTL's engines pad them, and an I/O
op's stripe per controller whole flits, as the RTL's I/O requests cut it (:func:`_io_stripe`). Effective
bandwidth per NPU = payload bytes sent per sending NPU / time (GBps = 1e9 B/s, as in the
paper). The result also lists the switch configurations the in-switch collectives need stored
and the one-time time to load them (:func:`configuration_load_s`; not part of ``time_s``:
configurations are loaded once, before the first use).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from hdl.compiler import algorithms
from hdl.compiler.algorithms import RING_OPS, Chain, Plan, Ring, RingStage
from hdl.contracts.errors import FredError
from sysmodel.fred_tree import FredTreeNetwork
from sysmodel.mesh import MeshNetwork
from sysmodel.network import Network, Traffic
from sysmodel.platform import FABRICS, Platform
from sysmodel.stage_schedule import chains_time, link_classes
from sysmodel.model_cache import FrozenDict, Ref, current
from sysmodel.switch_routing import phases_for

__all__ = ["OPS", "mesh_2d_split", "rectangle", "Collective", "CollectiveResult", "CollectiveTiming", "build_network",
           "collective_traffic", "evaluate", "collective_timing", "configuration_load_s"]

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "reduce",
       "multicast", "point-to-point", "io-load", "io-store", "io-write", "io-read")
_ROOTED = ("broadcast", "reduce", "multicast")


@dataclass(frozen=True)
class Collective:
    """One collective: ``op`` (one of :data:`OPS`), ``group`` (NPU ranks; stored sorted and
    de-duplicated, so the order given does not matter), ``size`` in bytes (see the module
    docstring), ``root`` for broadcast/reduce/multicast (default: lowest rank of the group),
    ``pairs`` ((src, dst) ranks) for point-to-point; ``controllers`` (io-load / io-store
    only): the I/O controllers (indices into the platform's) that serve it, the bytes split
    evenly over them (stored sorted); empty (the default, ``make eval``'s reading): striped over
    every controller of the platform. The RTL fabric's I/O requests name one per group
    (controller g serves group g: :func:`sysmodel.fabric_model.request_collectives`)."""

    op: str
    group: tuple[int, ...] = ()
    size: float = 0.0
    root: int | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    controllers: tuple[int, ...] = ()

    def __post_init__(self):
        if self.op not in OPS:
            raise FredError(f"unknown collective {self.op!r}; expected one of {', '.join(OPS)}")
        size = self.size
        if isinstance(size, bool) or not isinstance(size, (int, float, np.integer, np.floating)) \
                or not np.isfinite(size) or size <= 0:
            raise FredError(f"collective size must be a positive number of bytes, got {size!r}")
        if self.op == "point-to-point":
            pairs = tuple((int(a), int(b)) for a, b in self.pairs)
            if not pairs:
                raise FredError("point-to-point needs at least one (src, dst) pair")
            for a, b in pairs:
                if a == b:
                    raise FredError(f"point-to-point pair ({a}, {b}) sends to itself")
            object.__setattr__(self, "pairs", tuple(sorted(pairs)))
            group = {r for p in pairs for r in p}
        else:
            group = set(int(r) for r in self.group)
            if not group:
                raise FredError(f"{self.op}: the group is empty")
            if len(group) != len(tuple(self.group)):
                raise FredError(f"{self.op}: group {tuple(self.group)} lists an NPU twice")
        if self.op in _ROOTED:
            root = min(group) if self.root is None else int(self.root)
            if self.op != "multicast" and root not in group:
                raise FredError(f"{self.op}: root {root} is not in the group {sorted(group)}")
            object.__setattr__(self, "root", root)
            group.add(root)
        object.__setattr__(self, "group", tuple(sorted(group)))
        object.__setattr__(self, "size", float(size))
        controllers = tuple(int(k) for k in self.controllers)
        if controllers:
            if self.op not in ("io-load", "io-store"):
                raise FredError(f"{self.op}: only io-load and io-store name their I/O controllers, "
                                f"got controllers {controllers}")
            if len(set(controllers)) != len(controllers) or min(controllers) < 0:
                raise FredError(f"{self.op}: controllers {controllers} must be distinct indices >= 0")
        object.__setattr__(self, "controllers", tuple(sorted(controllers)))

    def check(self, npus: int) -> None:
        if len(self.group) > npus:
            raise FredError(f"{self.op}: group of {len(self.group)} NPUs is larger than the "
                            f"wafer's {npus} NPUs")
        bad = [r for r in self.group if r < 0 or r >= npus]
        if bad:
            raise FredError(f"{self.op}: NPU rank(s) {bad} out of range 0..{npus - 1}")


@dataclass
class CollectiveResult:
    """Time and traffic of a set of concurrent collectives on one fabric.

    ``time_s`` = ``bandwidth_time_s`` (busiest link) + ``latency_s``, the latency the link time
    does not hide: one pass of the hop chain, what a ring's pipelined steps take beyond the link
    time plus its last hop, and the phases (``phase_overhead_s`` of it)."""

    fabric: str
    time_s: float
    bandwidth_time_s: float
    latency_s: float
    bytes_sent_per_npu: float
    effective_bandwidth_per_npu_gbps: float
    busiest_link: str
    busiest_link_bytes: float
    phases: int
    algorithms: list = field(default_factory=list)
    #: bytes per directed link and the links' bandwidths (for link sharing in the engine)
    link_loads: object = field(default=None, repr=False)
    link_bw: object = field(default=None, repr=False)
    #: switch configurations the collectives need stored: (switch node, flows, phases)
    configurations: frozenset = field(default=frozenset(), repr=False)
    #: one-time load of those configurations (:func:`configuration_load_s`), s
    config_load_s: float = 0.0
    #: the part of ``latency_s`` the phases add (selects, and further passes of the hop chain
    #: for phases after the first; the rest is one pass), s
    phase_overhead_s: float = 0.0
    #: the part of ``latency_s`` the configured rings' turns add: rings routed as configured
    #: flows that take turns on an uplink's ports, run one after another, beyond the time they
    #: would take sharing the links (``Traffic.ring_turns_s``; 0 where none take turns), s
    ring_turns_s: float = 0.0

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("link_loads", "link_bw", "configurations")}


# -------------------------------------------------------------------------------------------
def build_network(platform: Platform, fabric: str) -> Network:
    """The network of ``fabric`` (``mesh`` or ``fred-a`` .. ``fred-d``) on ``platform``, cached
    by ``platform.network_spec`` (:mod:`sysmodel.model_cache`): platforms that differ only in
    compute or training (``--compute-scale``, the calibration's scans) share networks and
    collective results."""
    if fabric not in FABRICS and fabric not in platform.variants:
        raise FredError(f"unknown fabric {fabric!r}; expected one of "
                        f"{', '.join(platform.fabrics or FABRICS)}")
    if fabric == "mesh" and not platform.has_mesh:
        raise FredError(f"platform {platform.name!r} has no mesh; its fabrics: {', '.join(platform.fabrics)}")
    networks = current().networks
    key = (platform.network_spec, fabric)
    net = networks.get(key)
    if net is None:
        net = MeshNetwork(platform) if fabric == "mesh" else FredTreeNetwork(platform, fabric)
        # routes, their latencies and the switches' ports depend on neither efficiency: a
        # network built again at another one (the uncertainty block's points) shares them
        routes = current().network_routes
        shared = routes.get(_efficiency_free_key(net))
        if shared is None:
            routes.put(_efficiency_free_key(net), (net.path, net._route_latency, net._ports))
        else:
            net.path, net._route_latency, net._ports = shared
        networks.put(key, net)
    return net


# -- building blocks ------------------------------------------------------------------------
def _ring(net: Network, ring: Ring, buffer: float, t: Traffic | None = None,
          dim_order: str = "xy") -> Traffic:
    """``ring`` (:class:`~hdl.compiler.algorithms.Ring`: its members, order and steps) on a
    ``buffer`` of bytes, run bidirectionally (:meth:`~hdl.compiler.algorithms.Ring.directions`):
    half the data clockwise, half counter-clockwise; each hop of each direction carries half of
    what a member sends (``per_hop``, ``ring.fraction`` buffers) as one chunk per step.

    Time: the ``steps`` dependent steps are pipelined flit by flit: a member forwards a chunk
    as its first flits arrive, so step k+1 on the next hop starts max(hop latency h, chunk
    time c) after step k (its link is still sending the previous chunk, or the chunk has not
    arrived yet), and the last step ends min(h, c) later. A chunk's chain walks the ring's
    actual hops, so the chain is the longest run of ``steps`` consecutive hops (either
    direction, any start) of max(h, c) each: ``pipelined_s``, which runs under the link time
    (``Traffic.time`` takes the longer); the last step's min(h, c) adds to it (``latency_s``,
    the hop where it is largest). Bandwidth-bound, this is link time + one hop; latency-bound,
    the sum of the hops the chain walks + one chunk. A member's forwarding latency
    (``npu.forward_latency_ns``) adds to every step's hop. The RTL fabric checks both regimes
    (docs/fabric_validation.md)."""
    t = t or net.traffic()
    per_hop, steps = ring.fraction * buffer, ring.steps
    if ring.n < 2 or per_hop <= 0:
        return t
    directions, split = ring.directions(2)
    share = per_hop / split  # a two-member ring is the single pair, both ways
    forward = net.platform.forward_latency_ns * 1e-9
    per_step = net.wire_bytes(share, steps) / steps
    chain, tail, paths = 0.0, 0.0, []
    for direction in directions:
        step_s = []
        routes = t.add_transfers(direction, share, dim_order, chunks=steps)
        paths += routes
        for links in routes:
            hop = net.path_latency(links)
            chunk = per_step / net.path_min_bw(links) if links else 0.0
            step_s.append(max(hop + forward, chunk))
            tail = max(tail, min(hop, chunk))
        chain = max(chain, _longest_run(step_s, steps))
    t.pipelined_s += chain
    t.latency_s += tail
    _configured_unicasts(net, t, paths)
    _configured_ring_turns(net, t, paths)
    return t


def _configured_ring_turns(net: Network, t: Traffic, paths) -> None:
    """A ring routed as configured flows (``[fred] unicast_routing = "configured"``, the
    circuit fabric's switches) across L1 uplinks: the compiler gives each ring crossing an
    uplink port a phase of its own there, which holds the port for the ring's whole run, so
    rings of one stage or of concurrent collectives that share an uplink beyond its ports run
    one after another (:attr:`Traffic.ring_turns`; the RTL: docs/fabric_validation.md, "Rings
    that take turns on the circuit fabric"). Records the uplinks ``t``'s ring (alone in
    ``t``) crosses, its time alone and the slowest select of its switches. Nothing on online
    routing (packets share a port flit by flit) or inside one L1."""
    if not isinstance(net, FredTreeNetwork) or net.platform.unicast_routing != "configured":
        return
    crossed = _uplink_users(net, paths)
    if not crossed:
        return
    t.ring_users = crossed
    t.ring_alone_s = t.time()
    t.ring_select_s = max(net.switch_timing(node).phase_select_s for node in (*crossed, net.l2_node))


def _longest_run(step_s: list[float], steps: int) -> float:
    """The largest sum of ``steps`` consecutive entries of ``step_s`` read cyclically (any
    start), each sum taken as the difference of running sums from 0, in order (the walk a
    ring's chunk makes; a Python loop, as ``numpy.cumsum`` adds, for a few dozen hops)."""
    n = len(step_s)
    walk = [0.0]
    total = 0.0
    for k in range(n + steps):
        total += step_s[k % n]
        walk.append(total)
    return max(walk[steps + j] - walk[j] for j in range(n))


def _ring_stage(net: Network, stage: RingStage, size: float) -> Traffic:
    """One stage of an algorithm's plan (:class:`~hdl.compiler.algorithms.RingStage`): its
    rings, all at once, each on ``size / stage.divisor`` bytes."""
    traffic = net.traffic()
    for ring in stage.rings:
        traffic.merge(_ring(net, ring, size / stage.divisor))
    return traffic


def _chain(net: Network, chain: Chain, nbytes: float, t: Traffic | None = None) -> Traffic:
    """A pipelined chain (:class:`~hdl.compiler.algorithms.Chain`: order[0] -> order[1] ->
    ..., reversed for a reduce), ``nbytes`` on every hop."""
    t = t or net.traffic()
    hops = chain.hops()
    paths = t.add_transfers(hops, nbytes)
    t.latency_s += _chain_latency(net, paths)
    _configured_unicasts(net, t, paths)
    return t


def _chain_latency(net: Network, paths) -> float:
    """A chain's dependent latency: its hops' routes ``paths`` one after another, every member
    between the ends receiving and sending on (``npu.forward_latency_ns``)."""
    latency = 0.0
    for links in paths:
        latency += net.path_latency(links)
    return latency + max(len(paths) - 1, 0) * net.platform.forward_latency_ns * 1e-9


def _configured_unicasts(net: Network, t: Traffic, paths) -> None:
    """On a tree whose switches route unicasts as configured flows (``fred.unicast_routing =
    "configured"``), the transfers of an endpoint algorithm are one phase selected when the
    collective starts: like an in-switch collective's first phase, each switch's select delays
    the flits by what is left of it when the first flit can reach the switch
    (``first_select_s``). With online routing (the paper's switches) nothing is set up ahead;
    on header-selected packet switches the first packets select the default index and set up
    their paths on the way (:func:`_online_selects`)."""
    if not isinstance(net, FredTreeNetwork) or not paths:
        return
    if net.platform.unicast_routing == "online":
        _online_selects(net, t, paths)
        return
    if net.platform.unicast_routing != "configured":
        return
    arrival = _first_arrivals(net, paths, [], None)
    first = max((_select_left(net, node, arrival) for node in arrival), default=0.0)
    t.phases = max(t.phases, 1)
    t.first_select_s = max(t.first_select_s, first, 0.0)


def _online_selects(net: FredTreeNetwork, t: Traffic, paths) -> None:
    """Online unicasts on header-selected packet switches (``[fred] phase_select = "header"``):
    each switch selects the default index when the first packet's header reaches it (the
    measured ``online_select_cycles``), in series along a path as the stored phases' header
    selects (:func:`_header_selects`), and sets up one path per cycle: the busiest switch's
    ``n`` paths add ``n - 1`` set-ups (``online_path_setup_cycles``) once, not at every switch
    of a path (a path's set-up overlaps the other switches' selects). Docs/fabric_rtl.md,
    "Endpoint algorithms as online unicasts". Nothing with selects at the start (the paper's
    platform) or when the characterization does not measure them."""
    if net.platform.phase_select != "header":
        return
    users: dict[int, int] = {}
    for links in paths:
        for node in {int(net.link_dst[link]) for link in links}:
            if net.node_kind[node] == "switch":
                users[node] = users.get(node, 0) + 1

    def select_s(node) -> float:
        timing = net.switch_timing(node)
        return (timing.online_select_cycles or 0.0) * timing.cycle_s

    setups = max(((n - 1) * (net.switch_timing(node).online_path_setup_cycles or 0.0)
                  * net.switch_timing(node).cycle_s for node, n in users.items()), default=0.0)
    first = _header_selects(net, paths, [], None, select_of=select_s) + setups
    if first > 0:
        t.phases = max(t.phases, 1)
        t.first_select_s = max(t.first_select_s, first)


def _order(net: Network, members) -> list[int]:
    if isinstance(net, MeshNetwork):
        return sorted(members, key=net.snake_index)
    return sorted(members)


def _minimum(candidates: list[tuple[str, Traffic]]) -> tuple[str, Traffic]:
    return min(candidates, key=lambda c: c[1].time())


def _named(candidates: list[tuple[str, Traffic]], algorithm: str, c: "Collective") -> tuple[str, Traffic]:
    for name, traffic in candidates:
        if name == algorithm:
            return name, traffic
    raise FredError(f"{c.op} on group {list(c.group)} has no {algorithm!r} algorithm here; "
                    f"available: {', '.join(n for n, _ in candidates)}")


# -- mesh: hierarchical 2D ------------------------------------------------------------------
def rectangle(net: MeshNetwork, group) -> tuple[list[int], list[int]] | None:
    """(rows, cols) the group fills as a rectangle of at least 2 x 2 mesh positions, else None."""
    pos = [net.position(r) for r in group]
    rows = sorted({r for r, _ in pos})
    cols = sorted({c for _, c in pos})
    if len(rows) < 2 or len(cols) < 2 or len(rows) * len(cols) != len(group):
        return None
    if rows != list(range(rows[0], rows[-1] + 1)) or cols != list(range(cols[0], cols[-1] + 1)):
        return None
    return rows, cols


def _mesh_2d(net: MeshNetwork, op: str, rows, cols, size: float) -> Traffic:
    """Hierarchical 2D (:func:`hdl.compiler.algorithms.mesh_2d`) with two chunks in opposite
    dimension orders, split between them by :func:`mesh_2d_split`.

    The loads are both chunks' stages summed (what the collective puts on each link, for
    sharing with concurrent collectives); the time is the stage schedule's
    (:func:`sysmodel.stage_schedule.chains_time`): a chunk's stages depend on each other and
    each loads one dimension's links only, so the summed loads' busiest link is not reached
    (a chunk's row stage waits for its column stage while the row links idle or serve the
    other chunk). What the schedule takes beyond the summed loads' time is latency the link
    time cannot hide, as the FRED hierarchical algorithm's stages (checked against the RTL
    mesh fabric, docs/fabric_validation.md)."""
    plans = _mesh_2d_plans(net, op, rows, cols)
    flit = net.platform.mesh_flit_bytes
    if flit:   # the split of the whole flits the engines get, and what they send of each chunk
        size = _whole_flits(size, flit) * flit
    a = mesh_2d_split(net, op, rows, cols, size)[0]
    sizes = _whole_flit_chunks(net, plans, size, a) if flit else (a * size, (1 - a) * size)
    chunks = [_mesh_2d_stages(net, plan, chunk) for plan, chunk in zip(plans, sizes)]
    out = net.traffic()
    for stages in chunks:
        chunk = net.traffic()
        for stage in stages:
            chunk.then(stage)
        out.merge(chunk)
    scheduled = chains_time([[(s.time(), s.link_times()) for s in stages] for stages in chunks])
    out.latency_s += max(0.0, scheduled - out.time())
    return out


def _whole_flits(size: float, flit: int) -> int:
    """A buffer of ``size`` bytes in whole flits (at least one)."""
    return max(1, math.ceil(size / flit - 1e-9))


def _whole_flit_chunks(net: MeshNetwork, plans, size: float, split: float) -> tuple[float, float]:
    """Bytes each of the two chunks of a mesh algorithm (``plans``: the 2D all-reduce's rows
    first and columns first, or a ring's two directions) sends on a mesh of whole flits
    (``mesh_flit_bytes``): ``split`` of ``size`` in whole flits per piece, as the RTL mesh's
    engines cut and pad it (:func:`hdl.compiler.algorithms.two_chunk_flits`)."""
    flit = net.platform.mesh_flit_bytes
    chunks = algorithms.two_chunk_flits(_whole_flits(size, flit), split, plans[0].pieces)
    return tuple(float(algorithms.padded_to_pieces(c, plan.pieces) * flit) for c, plan in zip(chunks, plans))


def _mesh_ring_bytes(net: MeshNetwork, plan: Plan, size: float) -> float:
    """The buffer a mesh ring all-reduce runs on: ``size``, or on a mesh of whole flits both
    directions' padded chunks (the model's ring halves its buffer between the directions, so
    twice the larger)."""
    if not net.platform.mesh_flit_bytes:
        return size
    return 2 * max(_whole_flit_chunks(net, (plan, plan), size, 0.5))


def _mesh_2d_plans(net: MeshNetwork, op: str, rows, cols) -> tuple[Plan, Plan]:
    """(rows-first, columns-first) plans of the rectangle ``rows`` x ``cols``."""
    return algorithms.mesh_2d(op, [[net.rank(r, c) for c in cols] for r in rows])


def _mesh_2d_stages(net: MeshNetwork, plan: Plan, size: float) -> list[Traffic]:
    """Each stage's traffic of one chunk's ``plan`` on ``size`` bytes."""
    return [_ring_stage(net, stage, size) for stage in plan.stages]


def _split_time(a: float, rows_first, cols_first) -> float:
    """The stage schedule of the two chunks at split ``a`` (stages as (bandwidth-or-pipelined
    time, latency, link times) on the whole buffer: the first two scale with the share)."""
    chains = [[(share * busy + lat, share * link_s) for busy, lat, link_s in chain]
              for chain, share in ((rows_first, a), (cols_first, 1 - a))]
    return chains_time(chains)


def mesh_2d_split(net: MeshNetwork, op: str, rows, cols, size: float) -> tuple[float, Traffic, Traffic]:
    """(the share ``a`` of the buffer the rows-first chunk carries, the rows-first chunk's
    traffic on the whole buffer, the columns-first chunk's): ``a`` minimises the two chunks'
    stage schedule (:func:`sysmodel.stage_schedule.chains_time`; the RTL mesh fabric splits its
    chunks so). The search takes each stage at share ``a`` as ``a`` x its bytes (link time and
    pipelined steps) plus its whole-buffer latency, a grid of 1/48 then a golden-section
    refinement around the best point; :func:`_mesh_2d` then times the chosen split exactly."""
    plans = _mesh_2d_plans(net, op, rows, cols)
    per_chunk = [_mesh_2d_stages(net, plan, size) for plan in plans]
    compact = link_classes([[(s.time(), s.link_times()) for s in stages] for stages in per_chunk])
    chains = [[(max(s.bandwidth_time(), s.pipelined_s), s.time() - max(s.bandwidth_time(), s.pipelined_s),
                link_s) for s, (_, link_s) in zip(stages, chain)]
              for stages, chain in zip(per_chunk, compact)]
    grid = np.arange(1, 48) / 48
    best = int(np.argmin([_split_time(a, *chains) for a in grid]))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    golden = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        m1, m2 = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if _split_time(m1, *chains) <= _split_time(m2, *chains):
            hi = m2
        else:
            lo = m1
    totals = []
    for stages in per_chunk:
        total = net.traffic()
        for stage in stages:
            total.then(stage)
        totals.append(total)
    return float((lo + hi) / 2), totals[0], totals[1]


# -- FRED in-switch flows --------------------------------------------------------------------
def _switch_phases(net: FredTreeNetwork, up_paths, down_paths, top: int | None,
                   flows: tuple) -> tuple[int, tuple[float, float], float, frozenset]:
    """:func:`_phases_of_paths`, kept in the model's cache (``switch_phases``) under the
    network's :func:`_efficiency_free_key`: what the switches store and how long their selects take
    depends on the topology, the routes, the latencies and the switches' timing, none of which
    the link or in-switch efficiency changes (the uncertainty block and the in-switch
    sensitivity vary those two and time the same flows again). ``flows``: the paths'
    :func:`_switch_flows`, which the caller keeps (a function of the topology and the paths,
    so not in the key)."""
    key = (_efficiency_free_key(net), tuple(up_paths), tuple(down_paths), top)
    memo = current().switch_phases
    found = memo.get(key)
    if found is None:
        found = memo.put(key, _phases_of_paths(net, up_paths, down_paths, top, flows))
    return found


def _efficiency_free_key(net: Network) -> tuple:
    """The network's spec and fabric with its link efficiency and in-switch efficiencies set
    to 1: they scale only its bandwidths and an in-switch flow's wire bytes (sysmodel.fred_tree,
    sysmodel.mesh), which neither :func:`_phases_of_paths` nor the routes read. Made once per
    network."""
    key = getattr(net, "_efficiency_free_key", None)
    if key is None:
        spec = net.platform.network_spec
        variants = FrozenDict({name: replace(v, in_switch_efficiency=1.0) for name, v in spec.variants.items()})
        key = net._efficiency_free_key = (replace(spec, link_efficiency=1.0, variants=variants), net.name)
    return key


def _switch_flows(net: FredTreeNetwork, up_paths, down_paths, top: int | None = None) -> tuple:
    """The flows these paths ask of each switch, as the compiler routes them: per switch they
    pass, (the switch, its ports, its flows as sorted (input ports, output ports) tuples).

    Up paths (towards a sink) give each switch they pass through one reducing flow (inputs =
    the neighbours data arrives from, output = the next hop); down paths give one
    broadcasting flow. ``top`` is the switch where an all-reduce turns round: one flow whose
    inputs and outputs are the member-side neighbours. It reads the topology (the links' ends
    and each switch's ports) and the paths, nothing else: an in-switch collective's shape
    keeps it (:func:`_in_switch_shape`)."""
    per_switch: dict[int, list] = {}
    src, dst = net.link_src_ids, net.link_dst_ids
    for slot, paths in ((0, up_paths), (1, down_paths)):
        for links in paths:
            for l_in, l_out in zip(links, links[1:]):
                entry = per_switch.get(dst[l_in])
                if entry is None:
                    entry = per_switch[dst[l_in]] = [[set(), set()], [set(), set()], None]
                entry[slot][0].add(src[l_in])
                entry[slot][1].add(dst[l_out])
    if top is not None:
        entry = per_switch.setdefault(top, [[set(), set()], [set(), set()], None])
        entry[2] = ({src[p[-1]] for p in up_paths if p}, {dst[p[0]] for p in down_paths if p})
    out = []
    for switch, entry in per_switch.items():
        port = net.ports(switch)
        flows = [f for f in (entry[0], entry[1], entry[2]) if f and f[0] and f[1]]
        key = tuple(sorted((tuple(sorted(port[n] for n in i)), tuple(sorted(port[n] for n in o)))
                           for i, o in flows))
        out.append((switch, len(port), key))
    return tuple(out)


def _phases_of_paths(net: FredTreeNetwork, up_paths, down_paths,
                     top: int | None = None, flows=None) -> tuple[int, tuple[float, float], float, frozenset]:
    """(the most phases any switch needs, (the slowest select, the slowest phase switch = drain +
    select) among the switches that need one, what the first phase's selects delay the flits,
    the configurations stored) for the flows these paths ask of each switch
    (:func:`_switch_flows`; ``flows``: those, when the caller has them), as the compiler
    routes them.

    The first phase is selected on every switch at once when the collective starts (as the
    fabric's phase sequencers, or a host, do), while the flits are still on their way: a
    switch's select delays them only by what is left of it when the first flit can arrive
    (the hop latency before that switch); the slowest such remainder is the first phase's cost.
    A configuration is a (switch node, flows as port tuples, phases) triple: the switch stores
    that many phases for those flows."""
    if flows is None:
        flows = _switch_flows(net, up_paths, down_paths, top)
    arrival = _first_arrivals(net, up_paths, down_paths, top)
    phases, select, switch_s, first, configurations = 0, 0.0, 0.0, 0.0, set()
    for switch, ports, key in flows:
        needed = phases_for(*net.routing_switch(switch, ports), key)
        phases = max(phases, needed)
        if needed:
            # switches select in parallel, each at its own level's (chiplet's) speed
            timing = net.switch_timing(switch)
            own = timing.phase_select_s
            select = max(select, own)
            switch_s = max(switch_s, timing.phase_switch_s, own)
            first = max(first, _select_left(net, switch, arrival))
            configurations.add((switch, key, needed))
    if phases and net.platform.phase_select == "header":
        first = _header_selects(net, up_paths, down_paths, top)
    return phases, (select, switch_s), first, frozenset(configurations)


def _select_left(net: FredTreeNetwork, switch: int, arrival: dict[int, float]) -> float:
    """What is left of ``switch``'s phase select, started with the collective, when its first
    flit can reach it (``arrival``: :func:`_first_arrivals`); negative when none is."""
    return net.switch_timing(switch).phase_select_s - arrival.get(switch, 0.0)


def _header_selects(net: FredTreeNetwork, up_paths, down_paths, top, *, select_of=None) -> float:
    """What header-driven selects (``[fred] phase_select = "header"``, the packet switch) add to
    the first flit's arrival at the end of these paths: each switch selects the phase when the
    first header reaches it (its measured ``header_select_s``), and a flit leaves a switch only
    once it is selected, so the selects add up along a path; a switch the collective reached
    earlier on another path (an L1 whose own NPUs' packets went up before the reduction comes
    back down) is selected already. Up paths start at 0; down paths leave the top once every
    up path has arrived there and the top is selected (an all-reduce), or from their root.
    ``select_of(switch)``: seconds of a switch's select (default its ``header_select_s``)."""
    def ends(select_s) -> float:
        selected: dict[int, float] = {}
        for _ in range(4):      # a switch's select starts at its earliest arrival: relax
            before = dict(selected)
            end, at_top = _walk_with_selects(net, up_paths, 0.0, selected, select_s, top)
            if top is not None and up_paths:
                leave = max(at_top, selected.get(top, at_top)) + float(net.node_latency[top])
                end = _walk_with_selects(net, down_paths, leave, selected, select_s, None)[0]
            elif down_paths:
                end = _walk_with_selects(net, down_paths, 0.0, selected, select_s, None)[0]
            if selected == before:
                break
        return end

    with_selects = ends(select_of or (lambda node: net.switch_timing(node).header_select_s))
    return max(with_selects - ends(lambda node: 0.0), 0.0)


def _walk_with_selects(net, paths, start: float, selected: dict, select_s, top) -> tuple[float, float]:
    """(latest arrival at the end of ``paths`` from ``start``, latest arrival at ``top``) when
    each switch passes flits from ``selected[switch]`` on (set, or lowered, to its earliest
    arrival plus ``select_s(switch)``)."""
    end = at_top = start
    link_latency, dst, node_latency, kind = net.link_latency_s, net.link_dst_ids, net.node_latency_s, net.node_kind
    for links in paths:
        t = start
        for link in links:
            t += link_latency[link]
            node = dst[link]
            if kind[node] != "switch":
                continue
            selected[node] = min(selected.get(node, float("inf")), t + select_s(node))
            if node == top:
                at_top = max(at_top, t)
                break
            t = max(t, selected[node]) + node_latency[node]
        end = max(end, t)
    return end, at_top


def _first_arrivals(net: FredTreeNetwork, up_paths, down_paths, top) -> dict[int, float]:
    """Earliest time a flit can reach each switch's input on these paths, from the start (hop
    latency only): up paths from their sources; down paths from the top once the slowest up
    path has reached it and crossed it (an all-reduce), or from their root (a multicast)."""
    arrival: dict[int, float] = {}
    link_latency, dst, node_latency, kind = net.link_latency_s, net.link_dst_ids, net.node_latency_s, net.node_kind

    def walk(paths, start: float) -> None:
        for links in paths:
            t = start
            for link in links:
                t += link_latency[link]
                node = dst[link]
                if kind[node] == "switch":
                    arrival[node] = min(arrival.get(node, t), t)
                    t += node_latency[node]

    walk(up_paths, 0.0)
    down_start = 0.0
    if top is not None and up_paths:
        down_start = max(net.path_latency(p) for p in up_paths) + float(net.node_latency[top])
    walk(down_paths, down_start)
    return arrival


def configuration_load_s(net: Network, configurations) -> float:
    """One-time load of the stored ``configurations`` ((switch node, flows, phases) triples)
    on ``net``: a switch loads each of its stored phases once, its own level's
    ``config_load_cycles`` each, one after another; switches load in parallel, so the busiest
    switch sets the time."""
    per_switch: dict[int, int] = {}
    for node, _, phases in configurations:
        per_switch[node] = per_switch.get(node, 0) + phases
    return max((phases * net.switch_timing(node).config_load_s for node, phases in per_switch.items()),
               default=0.0)


def _in_switch(net: FredTreeNetwork, c: Collective) -> Traffic:
    """An in-switch collective's traffic: its size-free plan (:func:`_in_switch_plan`, kept in
    the model's cache ``in_switch_plans``) with ``c.size``'s bytes added as a fresh
    construction adds them: the same additions, in the same order, on fresh arrays."""
    key = (_link_rate_free_key(net), c.op, c.group, c.root, c.controllers)
    memo = current().in_switch_plans
    plan = memo.get(key)
    if plan is None:
        plan = memo.put(key, _in_switch_plan(net, c))
    senders, link_sets, lat, phases, turn, first, configurations, uplink_users, io_stripes, rows = plan
    t = net.traffic()
    # io-load / io-store: one flow per controller stripe (io_stripes: the controllers' count)
    nbytes = c.size / io_stripes if io_stripes else c.size
    # per flow group its senders' payload and its links' wire bytes (Traffic.add_links), the
    # groups' rows added in group order: numpy.add.accumulate's running sum adds one row at a
    # time, the additions the group-by-group loop made (0.0 where a group has no entry)
    (send_group, send_node), (link_group, link_id) = rows
    sent = np.zeros((len(senders), net.npus))
    sent[send_group, send_node] = nbytes
    t.sent = np.add.accumulate(sent, axis=0)[-1].copy()
    loads = np.zeros((len(link_sets), net.n_links))
    loads[link_group, link_id] = net.wire_bytes(nbytes / net.in_switch_efficiency)
    t.loads = np.add.accumulate(loads, axis=0)[-1].copy()
    t.latency_s = lat
    t.phases = phases
    t.phase_turn_s = turn
    t.first_select_s = max(first, 0.0)
    t.configurations = configurations
    t.uplink_users = dict(uplink_users)
    if io_stripes:   # io-load / io-store: streams from (into) the controllers' paced links
        t.controller_flit_bytes = net.controller_flit_bytes()
    if c.op == "io-store" and c.controllers:
        t.paced_turn_s = _paced_turn_s(net, c, net.wire_bytes(nbytes), turn)
    return t


def _paced_turn_s(net: FredTreeNetwork, c: Collective, wire: float, phase_turn_s: float) -> float:
    """What one later turn of ``c`` (an io-store whose controllers are named) adds beyond its
    phase turn ``phase_turn_s`` when it waits for other reduce-outs at a switch port they share
    (:attr:`Traffic.paced_turn_s`). The turn, from one group's stream into its controller to the
    next's, is the hand-over at the *controller's* L1 (docs/fabric_validation.md, "The turn's
    hand-over"): that L1 serves the group's phase (one VC, in the phase order) until it has
    started the group's last packet into the controller, and only then selects the next group's
    phase and sends its own member's operand of it up, which the next reduction waits for.
    Its cost, each piece a figure of the model's own network:

    * the controller L1 starts the last packet only when the controller's receive buffer has
      room for a whole packet (the start gate), i.e. with ``[fred] vc_buffer_flits`` (B: the
      RTL controller's receive buffer, ``default_depth``) flits of the stream still to write:
      (``wire`` - B flits) / r after the stream began, then the packet crosses the controller
      L1 (its latency) and its P - 1 later flits leave one per switch cycle (P the packet's
      flits, ``preemption_packet_flits``: the characterization's packet);
    * unless the stream cannot reach the controller L1 that fast: its flits come at the slowest
      rate u on the group's paths before the controller's link (Fred-B: the half-rate uplink),
      the last (``wire`` - 1 flit) / u after the first (B >= S: the buffer holds the stream);
    * then the controller L1's select (its header select on packet switches, else its phase
      select) and the next group's first flit's pass from the controller L1's input to its
      controller's input: the group's path latency less its first link (the NPU's, behind
      which the operand already waits) and its last (the controller's, which both streams
      cross).

    r is each named controller's link; with several controllers the slowest turn counts. 0 if
    the turn is no longer than the phase turn."""
    flit = float(net.flit_bytes or 0)
    held = net.platform.vc_buffer_flits * flit
    turn = 0.0
    for k in c.controllers:
        paths = [net.path(m, net.io_nodes[k]) for m in c.group]   # each ends at the controller's link
        rate = float(net.link_bw[paths[0][-1]])
        through = min(float(net.link_bw[list(p[:-1])].min()) for p in paths)
        l1 = int(net.link_src[paths[0][-1]])          # the switch feeding the controller
        timing = net.switch_timing(l1)
        packet_tail = max(timing.preemption_packet_flits - 1, 0) * timing.cycle_s \
            / min(timing.throughput_flits_per_cycle_per_port, 1.0)
        stream = max(wire - held, 0.0) / rate + float(net.node_latency[l1]) + packet_tail
        fabric = max(wire - flit, 0.0) / through
        select = timing.header_select_s if net.platform.phase_select == "header" else timing.phase_select_s
        chain = max(net.path_latency(p) - float(net.link_latency[p[0]]) - float(net.link_latency[p[-1]])
                    for p in paths)
        turn = max(turn, max(stream, fabric) + select + chain)
    return max(turn - phase_turn_s, 0.0)


def _in_switch_plan(net: FredTreeNetwork, c: Collective) -> tuple:
    """What an in-switch collective's traffic is made of besides its bytes: (per flow group,
    the NPUs that send the payload; per flow group, the set of links it loads; latency; phases;
    phase turn; first select; configurations; uplink users; the number of controller stripes,
    0 for a collective that is not striped; the groups' senders and links as index arrays,
    :func:`_group_rows`). It reads ``c``'s op, group and root and, of the
    network, its topology, routes, latencies and switches' timing and routing (the flows,
    :func:`_switch_phases`): never ``c.size``, a link rate or an efficiency, so the model's
    cache keys it on (:func:`_link_rate_free_key`, op, group, root) and the design-space
    sweep's strategies (the same groups with other bytes) and L1-L2 fractions share it. What
    it reads of the topology alone -- the paths, senders, link sets, uplink users, rows and
    switch flows -- is the collective's :func:`_in_switch_shape`, shared further (by the
    grid's switch designs too). The traffic adds ``c.size`` (``/ stripes``) to each group's
    senders, then its links, group by group, as the construction did before the plan was kept
    (``_in_switch``)."""
    groups, senders, link_sets, uplink_users, rows = _in_switch_shape(net, c)
    path_latency = net.path_latency
    if c.op in (*_ROOTED, "all-reduce"):
        (up, down, top, flows), = groups
        if c.op == "all-reduce":
            lat = max(path_latency(u) for u in up) + max(path_latency(d) for d in down) \
                + float(net.node_latency[top])
        else:
            lat = max((path_latency(p) for p in (up or down)), default=0.0)
        phases, select, first, configurations = _switch_phases(net, up, down, top, flows)
        # a later phase: an all-reduce's switches wait for the round trip (their phase includes
        # the flows coming back down), one-way flows for their own drain (the measured phase switch)
        turn = select[0] + lat if c.op == "all-reduce" else select[1]
        return (senders, link_sets, lat, phases, turn, first, configurations, uplink_users, 0, rows)
    # io-load / io-store: one flow per controller stripe
    lat, phases, select, first, configurations = 0.0, 0, (0.0, 0.0), 0.0, frozenset()
    for up, down, _, flows in groups:
        needed, needed_s, first_s, stored = _switch_phases(net, up, down, None, flows)
        phases, configurations = max(phases, needed), configurations | stored
        select = (max(select[0], needed_s[0]), max(select[1], needed_s[1]))
        first = max(first, first_s)
        lat = max(lat, max(path_latency(p) for p in (up or down)))
    return (senders, link_sets, lat, phases, select[1], first, configurations, uplink_users, len(groups), rows)


def _in_switch_shape(net: FredTreeNetwork, c: Collective) -> tuple:
    """What :func:`_in_switch_plan` reads of the network's topology alone, kept in the model's
    cache ``in_switch_shapes`` under (:func:`_topology_key`, op, group, root, controllers):
    (per flow group (its up paths, its down paths, the all-reduce's top switch or None, their
    :func:`_switch_flows`); per flow group the NPUs that send the payload; per flow group the
    set of links it loads; the uplink users (:func:`_uplink_users`); the groups' senders and
    links as index arrays, :func:`_group_rows`). An all-reduce, broadcast, multicast or reduce
    is one flow group; an io-load / io-store one per controller stripe, its paths between the
    controller and every member. The paths come from :meth:`Network.path` (the routes, a
    function of the topology), the flows from the ports (the same), so networks that differ in
    link rates, latencies or switch timing (the design-space grid's chiplets) share it."""
    key = (_topology_key(net), c.op, c.group, c.root, c.controllers)
    memo = current().in_switch_shapes
    shape = memo.get(key)
    if shape is None:
        shape = memo.put(key, _make_in_switch_shape(net, c))
    return shape


def _make_in_switch_shape(net: FredTreeNetwork, c: Collective) -> tuple:
    """:func:`_in_switch_shape`, made."""
    g = c.group
    flow = (algorithms.in_switch(c.op, g, c.root, net.l1_of).stages[0]
            if c.op in (*_ROOTED, "all-reduce") else None)
    if c.op == "all-reduce":
        top = net.l1_nodes[flow.top] if flow.top is not None else net.l2_node
        up = tuple(net.path(r, top) for r in flow.senders)
        down = tuple(net.path(top, r) for r in flow.receivers)
        senders = (tuple(flow.senders),)
    elif c.op in ("broadcast", "multicast"):
        top, up, down = None, (), tuple(net.path(flow.root, d) for d in flow.receivers)
        senders = ((flow.root,),)
    elif c.op == "reduce":
        # the root's data is part of the sum but crosses no link here: the model's root adds it
        # as the sum arrives (the RTL's root engine sends it into its L1 switch)
        srcs = [r for r in flow.senders if r != flow.root]
        top, up, down = None, tuple(net.path(s, flow.root) for s in srcs), ()
        senders = (tuple(srcs),)
    else:  # io-load / io-store: one flow per controller stripe
        groups, senders, link_sets, every = [], [], [], []
        for io in (net.io_nodes[k] for k in _io_controllers(net, c)):
            if c.op == "io-load":
                up, down = (), tuple(net.path(io, r) for r in g)
                senders.append(())
            else:
                up, down = tuple(net.path(r, io) for r in g), ()
                senders.append(tuple(g))
            paths = up or down
            groups.append((up, down, None, _switch_flows(net, up, down)))
            link_sets.append(set().union(*paths))
            every += paths
        return (tuple(groups), tuple(senders), tuple(link_sets), _uplink_users(net, every),
                _group_rows(senders, link_sets))
    links = set().union(*up, *down) if (up or down) else set()
    return (((up, down, top, _switch_flows(net, up, down, top)),), senders, (links,),
            _uplink_users(net, up + down), _group_rows(senders, (links,)))


def _topology_key(net: FredTreeNetwork) -> tuple:
    """The network's topology as a value (made once per network): its class, NPUs, NPUs per L1
    (``l1_of``), the L1s', the L2's and the controllers' nodes, each controller's L1
    (``io_l1``) and every link's ends (``link_src``, ``link_dst``: the link numbers a route
    gives; with the nodes they also fix each link's kind). With these the routes
    (:meth:`Network.path`), the switches' ports, the NPUs' L1s and the uplinks are the same:
    not a rate, a latency or a switch's timing."""
    key = getattr(net, "_topology_key", None)
    if key is None:
        key = net._topology_key = (
            type(net), net.npus, net.npus_per_l1, tuple(net.l1_nodes), net.l2_node, tuple(net.io_nodes),
            tuple(net.io_l1), net.link_src.tobytes(), net.link_dst.tobytes())
    return key


def _group_rows(senders, link_sets) -> tuple:
    """((group, NPU) of every sender, (group, link) of every loaded link) of an in-switch plan's
    flow groups, as index arrays (read-only: kept in the model's cache), for ``_in_switch``'s
    per-group rows."""
    def pairs(per_group) -> tuple:
        if any(len(set(members)) != len(members) for members in per_group):   # a row sets each once
            raise AssertionError(f"internal: a flow group lists a member twice: {per_group}")
        return _sparse_rows(per_group, counted=False)
    return pairs(senders), pairs(link_sets)


def _uplink_users(net: FredTreeNetwork, paths) -> dict[int, int]:
    """The L1 uplinks ``paths`` cross, one user each (:attr:`Traffic.sequential_phases`)."""
    crossed = {int(net.link_dst[l]) if net.link_src[l] == net.l2_node else int(net.link_src[l])
               for path in paths for l in path if net.link_kind[l] == "l1-l2"}
    return {node: 1 for node in crossed}


def _io_controllers(net: Network, c: Collective) -> tuple[int, ...]:
    """The I/O controllers (indices into ``net.io_nodes``) serving ``c``: the ones it names,
    else every one (striped); an error names a controller the platform does not have."""
    if not c.controllers:
        return tuple(range(len(net.io_nodes)))
    bad = [k for k in c.controllers if k >= len(net.io_nodes)]
    if bad:
        raise FredError(f"{c.op}: I/O controller(s) {bad} out of range: {net.name} has "
                        f"{len(net.io_nodes)} (its [io] controllers)")
    return c.controllers


# -- endpoint algorithms on either fabric ----------------------------------------------------
def _endpoint(net: Network, c: Collective, algorithm: str | None = None) -> tuple[str, Traffic]:
    g = list(c.group)
    n = len(g)
    if c.op in RING_OPS:
        if n == 1:
            return "local", net.traffic()
        ring = algorithms.ring(c.op, _order(net, g))
        size = _mesh_ring_bytes(net, ring, c.size) if isinstance(net, MeshNetwork) else c.size
        candidates = [("ring", _ring_stage(net, ring.stages[0], size))]
        if isinstance(net, MeshNetwork):
            rect = rectangle(net, g)
            if rect:
                candidates.append(("hierarchical-2d", _mesh_2d(net, c.op, *rect, c.size)))
        else:
            candidates += _fred_hierarchical(net, c)
        if algorithm is not None:
            return _named(candidates, algorithm, c)
        return _minimum(candidates)
    if c.op == "all-to-all":
        t = net.traffic()
        routes = t.add_transfers([(a, b) for a in g for b in g if a != b], c.size / n)
        t.latency_s = max(map(net.path_latency, routes), default=0.0)
        return "direct", t
    if c.op == "point-to-point":
        t = net.traffic()
        t.latency_s = max(map(net.path_latency, t.add_transfers(c.pairs, c.size)), default=0.0)
        return "direct", t
    if c.op in ("io-write", "io-read"):
        t = net.traffic()
        stripe = _io_stripe(net, c.size)
        pairs = [(r, io) if c.op == "io-write" else (io, r) for r in g for io in net.io_nodes]
        t.latency_s = max(net.path_latency(route) for route in t.add_transfers(pairs, stripe))
        t.controller_flit_bytes = net.controller_flit_bytes()
        return "unicast", t
    if c.op in _ROOTED:
        plan = algorithms.chain(c.op, c.root, _order(net, [r for r in g if r != c.root]))
        return "chain", _chain(net, plan.stages[0], c.size)
    if isinstance(net, MeshNetwork):
        return _mesh_io(net, c, algorithm)
    return "chain", _fred_io_chain(net, c)


def _fred_hierarchical(net: FredTreeNetwork, c: Collective) -> list[tuple[str, Traffic]]:
    """The hierarchical algorithm's traffic (:func:`hdl.compiler.algorithms.hierarchical`),
    none where it does not apply."""
    plan = algorithms.hierarchical(c.op, c.group, net.l1_of)
    if plan is None:
        return []
    t = net.traffic()
    alone = 0.0
    for index, ring_stage in enumerate(plan.stages):
        stage = _ring_stage(net, ring_stage, c.size)
        alone += stage.time()
        t.then(stage)
        if index == 0:  # configured unicasts: the first stage's routes are selected at the start
            t.phases, t.first_select_s = stage.phases, stage.first_select_s
    # each stage needs the previous one's result: alone, the collective takes the sum of its
    # stages' times, not the busiest link of all their bytes together (the stages load different
    # links: NPU links inside the L1s, then the uplinks). What the summed loads leave out of that
    # sum is latency the link time cannot hide (checked against the RTL fabric's hierarchical
    # engines, docs/fabric_validation.md).
    t.latency_s += max(0.0, alone - t.time())
    return [("hierarchical", t)]


def _io_stripe(net: Network, size: float) -> float:
    """Bytes of each controller's stripe of an I/O op of ``size`` bytes per member striped over
    every controller: ``size / controllers``, or, on a mesh of whole flits (``mesh_flit_bytes``,
    the model of the RTL mesh), that in whole flits -- the stripe the RTL's I/O request gives
    every controller (:class:`hdl.contracts.trace_program.IoRequest`: ``ceil(ceil(size / flit)
    / controllers)`` flits, which is ``ceil(size / controllers / flit)``), at least one. Why:
    a scaled iteration's I/O nodes of a fraction of a flit per controller move as whole 1-flit
    stripes in the RTL (docs/fabric_iteration.md, "Checkpoint spills in the iteration"). A FRED
    tree pads its stripes where it puts them on links (:meth:`~sysmodel.network.Network.wire_bytes`)."""
    stripe = size / len(net.io_nodes)
    flit = net.platform.mesh_flit_bytes if isinstance(net, MeshNetwork) else 0
    return _whole_flits(stripe, flit) * flit if flit else stripe


def _mesh_io(net: MeshNetwork, c: Collective, algorithm: str | None = None) -> tuple[str, Traffic]:
    """Broadcast (io-load) or reduce (io-store) trees from every controller, X-Y/Y-X/split (the
    fastest, or the one ``algorithm`` names)."""
    if c.controllers:
        raise FredError(f"{c.op} on the mesh runs from every edge controller; naming controllers "
                        f"({list(c.controllers)}) is a FRED fabric's reading (the RTL's I/O requests)")
    stripe = _io_stripe(net, c.size)

    # a reducing member sends its sum of flit i on only when every child's flit i has arrived:
    # each NPU on the deepest leaf's path receives, adds and sends on (``npu.forward_latency_ns``,
    # as a chain's member, or the platform's own reducer latency, ``reduce_forward_latency_ns``);
    # a broadcast's members forward what arrives, which the busiest link's time hides
    # (docs/mesh_rtl.md, "Gradient reduce-out")
    reducer = net.platform.reduce_forward_latency_ns
    forward = (net.platform.forward_latency_ns if reducer is None else reducer) * 1e-9 if c.op == "io-store" else 0.0

    def trees(order: str) -> Traffic:
        t = net.traffic()
        lat = 0.0
        for io in net.io_nodes:
            links = t.tree_links(io, c.group, order)
            paths = [net.path(io, r, order) for r in c.group]
            # every link of a path but the controller's ends at an NPU that sends on
            lat = max(lat, max(net.path_latency(p) + (len(p) - 1) * forward for p in paths))
            if c.op == "io-store":  # the reduce tree is the broadcast tree reversed
                links = {net.link_id[(int(net.link_dst[l]), int(net.link_src[l]))] for l in links}
                for l in links:
                    if net.link_src[l] < net.npus:
                        t.sent[net.link_src[l]] += stripe
            t.add_links(links, stripe)
        t.latency_s = lat
        t.controller_flit_bytes = net.controller_flit_bytes()
        return t

    xy, yx = trees("xy"), trees("yx")
    split = xy.scaled(0.5)
    split.loads += yx.loads * 0.5
    split.sent += yx.sent * 0.5
    split.latency_s = max(xy.latency_s, yx.latency_s)
    candidates = [("tree-xy", xy), ("tree-yx", yx), ("tree-split", split)]
    return _named(candidates, algorithm, c) if algorithm is not None else _minimum(candidates)


def _fred_io_chain(net: FredTreeNetwork, c: Collective) -> Traffic:
    """No in-switch multicast/reduce: each controller's stripe enters (leaves) the group at
    one member near it and is forwarded (reduced) along a chain of the members.

    The routes and latency come from the size-free plan (:func:`_io_chain_plan`, kept in the
    model's cache ``io_chain_plans``). The stripe's bytes are added with the sums
    :meth:`Traffic.add_routes` and :func:`_chain` make (senders by :meth:`Network.route`'s rule), controller by controller (the entry
    route's links and sender, then the chain's hops: into a fresh traffic with ``numpy.add.at``
    in hop order, so ``n`` hops over a link give ``n`` additions of the bytes onto 0.0, which
    is then added whole), as one array operation: each controller's two rows (its entry's
    bytes, its chain's repeated sums) added in row order by ``numpy.add.accumulate``, whose
    running sum adds one row at a time (the same additions in the same order;
    ``tests/sysmodel/test_sysmodel_collectives.py`` checks it bit for bit against the loop)."""
    key = (_io_chain_plan_key(net), c.op, c.group, c.controllers)
    memo = current().io_chain_plans
    plan = memo.get(key)
    if plan is None:
        plan = memo.put(key, _io_chain_plan(net, c))
    per_controller, lat, (entry_links, hop_links, entry_sent, hop_sent), heads, layout = plan
    t = net.traffic()
    stripe = c.size / len(per_controller)
    wire = net.wire_bytes(stripe)
    # the bytes read the plan (and, through ``key``, the network's links and NPUs), the stripe
    # and its wire bytes (the flit, which the plan's key does not hold), nothing else: kept
    # per (key, stripe, wire), copied (a traffic's arrays are its own)
    rows_key = (key, stripe, wire)
    rows = current().io_chain_rows.get(rows_key)
    if rows is None:
        rows = (_controller_rows_added((len(per_controller), net.n_links), entry_links, hop_links, wire),
                _controller_rows_added((len(per_controller), net.npus), entry_sent, hop_sent, stripe))
        for a in rows:
            a.flags.writeable = False
        current().io_chain_rows.put(rows_key, rows)
    t.loads, t.sent = rows[0].copy(), rows[1].copy()
    t.latency_s = lat
    t.controller_flit_bytes = net.controller_flit_bytes()
    # the chains cross a shared link at different points of their way: what a link's load adds
    # to them is what the chains' streams overlapping on it cannot hide (_io_chain_time); the
    # latency is what that time adds to the busiest link's and the controllers' flit
    times = t.link_times()
    flit_s = t.controller_flit_s()
    # the chains' time reads the heads, ``wire``, ``flit_s`` and the rates of the links the
    # chains cross, nothing else: with those it is the same number. The layout stands for the
    # heads' value (one layout per equal heads: _io_chain_plan); the design-space grid's points
    # repeat all four across designs that differ only in in-switch timing
    times_key = (Ref(layout), wire, flit_s, net.link_bw[layout[4]].tobytes())
    chain_times = current().io_chain_times
    chains_s = chain_times.get(times_key)
    if chains_s is None:
        chains_s = chain_times.put(times_key, _io_chain_time(net, heads, wire, flit_s, layout))
    t.latency_s = max(chains_s - t.bandwidth_time(times) - t.controller_lead_s(times), 0.0)
    return t


#: How far the streams' summed demand on a link must exceed (fall short of) its rate before
#: the model counts a backlog growing (draining): their sum of fractions rounds
_RATE_EPS = 1e-9


def _io_chain_time(net: FredTreeNetwork, heads, wire: float, flit_s: float, layout=None) -> float:
    """The time of the striped chains (:func:`_fred_io_chain`): ``heads`` per controller
    ((link, head) in traversal order, the chain's latency: :func:`_io_chain_plan`), ``wire``
    bytes of every stripe on every link it crosses, ``flit_s`` a controller's paced flit;
    ``layout``: :func:`_io_chain_layout` of ``heads`` when the caller keeps it (the plan does).

    A chain's stripe streams at its slowest link's rate (a controller's link: the controller
    paces it), so it reaches a link ``L`` over ``F`` = wire / that rate from its head there,
    ``h``, asking ``L`` for rate / ``L``'s rate of its time. ``L`` serves that fluid input and
    is backlogged only while the streams arriving at once ask more than all of it. A chain whose
    last byte reaches ``L`` outside a backlog leaves ``L`` with it and takes the rest of its way:
    h + F + (its latency - h), the chain's own time. One whose last byte reaches ``L`` in a
    backlog waits for the backlog's end ``E`` (the same for any service order); whichever
    chain's flit ``L`` sends last then has its way on ahead: E + ``flit_s`` (the backlog's
    first flits reached ``L`` a paced controller flit late: :meth:`Traffic.controller_lead_s`)
    + the longest way on of the chains with bytes in the backlog (the order-free figure, as
    the mesh's trees take the deepest path: docs/mesh_rtl.md). A link loaded from the start to
    the end gives the busiest link + the longest chain, as before; a link the chains reach one
    after another adds nothing to them. The time is the most of every chain's and every
    backlog's figure (docs/fabric_validation.md, "The chain rule", session 13).

    The event loop per shared link is O(e log e) in its e stream starts and ends: the chains
    with bytes in a backlog are those streaming at some event of it, kept as the set streaming
    now (updated once per event time) and, of those, the ones not yet counted; only their
    longest way on is kept. A link whose streams' rates sum to at most 1 + eps/2 is skipped
    (no backlog can start on it). The figure is the loop's it replaced, to the last bit (the
    same inflow, backlog and time operations in the same order), which rebuilt that set by
    scanning every chain at each event (``tests/sysmodel/test_io_chain_time.py`` keeps that
    loop and checks the two equal on random chains)."""
    if layout is None:
        layout = _io_chain_layout(heads)
    chain_links, starts, totals, shared = layout[:4]
    bw = net.link_bw
    # a chain's stripe streams at its slowest link's rate: the same min and division per chain
    spans = (wire / np.minimum.reduceat(bw[chain_links], starts)).tolist()
    best = max(0.0, max(map(float.__add__, spans, totals), default=0.0))  # each chain on its own
    for link, entries, hs, tails in shared:
        work = wire / float(bw[link])                       # a stripe's time on the link
        fs = [spans[k] for k in entries]
        rates = [work / f for f in fs]                      # time asked per second, per stream
        if math.fsum(rates) <= 1.0 + _RATE_EPS / 2:
            # never asked more than all of it: the loop's running inflow is a sum of some of
            # these rates, off from its true value by a few ulps per term (far less than
            # _RATE_EPS / 2 below about a million streams), so it never exceeds 1 + _RATE_EPS,
            # no backlog starts and the loop would leave ``best`` as it is (most shared links
            # of the grids: an uplink the paced stripes fill only in part)
            continue
        ends = list(map(float.__add__, hs, fs))
        events = sorted([(h, 1, i) for i, h in enumerate(hs)] + [(e, -1, i) for i, e in enumerate(ends)])
        n = len(events)
        inflow, backlog, now = 0.0, 0.0, events[0][0]       # time asked per second; queued time
        streaming: set[int] = set()     # streams with h <= now < h + F (none with F lost to rounding)
        uncounted: set[int] = set()     # of those, the ones not yet in the backlog's members
        way_on = None                   # the longest way on of the backlog's members (None: none)
        g, at = 0, None                 # the next event whose start/end is not applied; its time
        for when, step, i in events:
            if when != at:              # apply every start and end at this time at once
                at = when
                while g < n and events[g][0] == when:
                    _, s, j = events[g]
                    if s > 0:
                        if hs[j] < ends[j]:
                            streaming.add(j)
                            uncounted.add(j)
                    else:
                        streaming.discard(j)
                        uncounted.discard(j)
                    g += 1
            dt = when - now
            if inflow > 1.0 + _RATE_EPS:
                backlog += (inflow - 1.0) * dt
            elif backlog > 0.0 and inflow < 1.0 - _RATE_EPS:
                if backlog <= (1.0 - inflow) * dt:          # the backlog ends before this event
                    best = max(best, now + backlog / (1.0 - inflow) + flit_s + _longest(way_on))
                    backlog, way_on = 0.0, None
                    uncounted = set(streaming)
                else:
                    backlog -= (1.0 - inflow) * dt
            now = when
            if step > 0:
                inflow += rates[i]
            else:
                inflow -= rates[i]
            if (inflow > 1.0 + _RATE_EPS or backlog > 0.0) and uncounted:
                longest = max([tails[j] for j in uncounted])
                way_on = longest if way_on is None else max(way_on, longest)
                uncounted.clear()
        if backlog > 0.0:                                   # the streams ended in a backlog
            best = max(best, now + backlog + flit_s + _longest(way_on))
    return best


def _longest(way_on: float | None) -> float:
    """The backlog's members' longest way on; a backlog always has a member (an error if not)."""
    if way_on is None:
        raise ValueError("a backlog with no chain streaming into it (collectives._io_chain_time)")
    return way_on


def _io_chain_layout(heads) -> tuple:
    """What :func:`_io_chain_time` reads of ``heads`` apart from the rates, made once per plan:
    (every chain's links, concatenated, and where each chain's start (for one
    ``numpy.minimum.reduceat``), the chains' latencies, per link that two or more (chain, head)
    entries cross: (link, the entries' chains, heads, ways on = latency - head), entries in
    chain order then traversal order, every link the chains cross, sorted). Read-only: kept
    in the plan (:func:`_io_chain_plan`)."""
    per_link: dict[int, list[tuple[int, float, float]]] = {}
    chain_links, starts, totals = [], [], []
    for k, (route_heads, total) in enumerate(heads):
        starts.append(len(chain_links))
        totals.append(float(total))
        for link, head in route_heads:
            chain_links.append(int(link))
            per_link.setdefault(int(link), []).append((k, head, total - head))
    shared = tuple((link, tuple(k for k, _, _ in entries), tuple(h for _, h, _ in entries),
                    tuple(w for _, _, w in entries))
                   for link, entries in per_link.items() if len(entries) >= 2)
    arrays = (np.array(chain_links, dtype=np.int64), np.array(starts, dtype=np.int64),
              np.array(sorted(per_link), dtype=np.int64))
    for a in arrays:
        a.flags.writeable = False
    return arrays[0], arrays[1], tuple(totals), shared, arrays[2]

def _controller_rows_added(shape: tuple[int, int], entry: tuple, hops: tuple, nbytes: float) -> np.ndarray:
    """Per column of ``shape`` (controllers, columns), ``((entry_0 + chain_0) + entry_1) +
    chain_1 ...``: controller ``k`` adds ``nbytes`` at its entry's columns (``entry``: (controller,
    column) index arrays), then its chain's, ``nbytes`` added ``n`` times onto 0.0 (a fresh
    ``numpy.add.at``'s sum) at each column its hops cross ``n`` times (``hops``: (controller,
    column, n) index arrays); controllers in order (:func:`_fred_io_chain`). The indices are
    kept sparse: a plan holds a few links per controller, not a row of every link."""
    hop_rows, hop_cols, counts = hops
    most = int(counts.max()) if counts.size else 0
    sums, total = [0.0], 0.0
    for _ in range(most):   # n additions of nbytes onto 0.0, in order, for every n up to the most
        total += nbytes
        sums.append(total)
    rows = np.zeros((2 * shape[0], shape[1]))
    rows[2 * entry[0], entry[1]] = nbytes
    rows[2 * hop_rows + 1, hop_cols] = np.array(sums)[counts]
    return np.add.accumulate(rows, axis=0)[-1].copy()


def _io_chain_plan_key(net: FredTreeNetwork) -> tuple:
    """What :func:`_io_chain_plan` reads of the network, as a value (the model's cache keys the
    plan on it with the collective's op and group; made once per network):

    * the topology (:func:`_topology_key`); with it :meth:`FredTreeNetwork.route` (its nodes'
      ancestors, the link ids, the NPU sender rule) and
      :func:`hdl.compiler.algorithms.io_chain_order` give the same routes, senders and orders;
    * the latencies :meth:`Network.path_latency` sums, every link's and every node's
      (``link_latency``, ``node_latency``: the wire latencies and the switches' first-flit
      latency, with a packet switch's input buffer), and the NPUs' forwarding latency
      (:func:`_chain_latency`, the heads' gaps).

    Nothing else: not a link rate, the flit, the in-switch efficiency, the switches' phase
    select or configuration load timing, the fabric's name or the platform's labels. So two
    switch designs that differ only in in-switch timing (the design-space grid's Fred_2(P) and
    Fred_3(P)), or fabrics that differ only in their L1-L2 rate (Fred-A and Fred-C), share
    their plans; ``tests/sysmodel/test_io_chain_plan_key.py`` checks that such networks'
    plans, made apart, are equal, and that a change in what the key holds changes it."""
    key = getattr(net, "_io_chain_plan_key", None)
    if key is None:
        key = net._io_chain_plan_key = (_topology_key(net), net.link_latency.tobytes(),
                                        net.node_latency.tobytes(), float(net.platform.forward_latency_ns))
    return key


def _io_chain_plan(net: FredTreeNetwork, c: Collective) -> tuple:
    """(per controller: (the route between it and the chain's entry member, the NPU that sends
    on it or None, the chain's hop links in hop order, the chain's senders in hop order; routes
    and senders by :meth:`Network.route`, one sender rule for every transfer),
    the latency, the same as sparse per-controller rows for :func:`_controller_rows_added`:
    (entry links, hop counts per link, entry sender, hops sent per NPU) as index arrays,
    the chains' heads and their :func:`_io_chain_layout` for :func:`_io_chain_time`) of
    :func:`_fred_io_chain`. It reads ``c``'s op and group and, of the network,
    its routes, latencies, controllers' L1s and the NPUs' forwarding latency: never ``c.size``
    or a link rate, so the model's cache keys it on (:func:`_io_chain_plan_key`, op, group)."""
    g = sorted(c.group)
    lat = 0.0
    per_controller = []
    heads = []
    for k in _io_controllers(net, c):
        io = net.io_nodes[k]
        order = list(algorithms.io_chain_order(g, net.l1_of, net.io_l1[k], k))
        entry = order[0]
        if c.op == "io-load":
            src, dst, chain = io, entry, Chain(tuple(order))
        else:
            src, dst, chain = entry, io, Chain(tuple(order), reverse=True)
        links, sender = net.route(src, dst)
        hop_routes = [net.route(a, b) for a, b in chain.hops()]
        routes = [route for route, _ in hop_routes]
        hop_links = [link for route in routes for link in route]
        hop_senders = [by for _, by in hop_routes if by is not None]
        chain_s = _chain_latency(net, routes)
        per_controller.append((links, sender, hop_links, hop_senders))
        total = net.path_latency(links) + chain_s
        lat = max(lat, total)
        # the stripe's way in traversal order: a load enters by the controller's route, then
        # the hops; a store runs the hops, then leaves by the controller's route
        # (_chain_latency's forwarding charge sits between two hops, none next to the controller's)
        forward = net.platform.forward_latency_ns * 1e-9
        gaps = [forward] * max(len(routes) - 1, 0)
        order_routes, gaps = (([links, *routes], [0.0, *gaps]) if c.op == "io-load"
                              else ([*routes, links], [*gaps, 0.0]))
        heads.append((_route_heads(net, order_routes, gaps), total))
    # the same as sparse rows for _controller_rows_added
    entry_links = _sparse_rows([links for links, _, _, _ in per_controller], counted=False)
    hop_links = _sparse_rows([hops for _, _, hops, _ in per_controller], counted=True)
    entry_sent = _sparse_rows([() if sender is None else (sender,) for _, sender, _, _ in per_controller],
                              counted=False)
    hop_sent = _sparse_rows([senders for _, _, _, senders in per_controller], counted=True)
    # equal heads (plans whose keys differ in what the chains do not read, e.g. the in-switch
    # timing of two switch designs) share one heads object and layout, so the chains' times
    # kept on the layout (_fred_io_chain) are found again across them
    heads = tuple(heads)
    heads, layout = current().io_chain_layouts.get_or_make(heads, lambda: (heads, _io_chain_layout(heads)))
    return tuple(per_controller), lat, (entry_links, hop_links, entry_sent, hop_sent), heads, layout


def _route_heads(net: Network, routes, gaps) -> tuple[tuple[int, float], ...]:
    """``(link, head)`` for every link of ``routes`` (one stripe's routes in traversal order,
    ``gaps[j]`` the latency between route ``j`` and ``j + 1``): head is the latency before a
    flit enters the link, the routes before it and the part of its own route before it
    (:meth:`Network.path_latency`), so a chain's latency is a link's head + what follows it."""
    out = []
    start = 0.0
    for j, route in enumerate(routes):
        for i, link in enumerate(route):
            out.append((int(link), start + net.path_latency(route[:i])))
        start += net.path_latency(route) + (gaps[j] if j < len(gaps) else 0.0)
    return tuple(out)


def _sparse_rows(per_row, *, counted: bool) -> tuple:
    """(row, column[, count]) index arrays of the columns each row lists (``per_row``: per row a
    collection of columns, integers >= 0): each distinct column once per row, with ``counted``
    how many times the row lists it; rows in order, columns ascending. Read-only: kept in the
    model's cache. Made with one lexicographic sort of the (row, column) pairs rather than a
    ``Counter`` per row (a plan is made for every new group of the design-space grids:
    docs/sysmodel.md, Speed, thirteenth increment); ``tests/sysmodel/test_sysmodel_collectives.py``
    checks it against the ``Counter`` form."""
    lengths = np.fromiter(map(len, per_row), dtype=np.int64, count=len(per_row))
    cols = np.fromiter(itertools.chain.from_iterable(per_row), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(len(per_row), dtype=np.int64), lengths)
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    new = np.ones(len(cols), dtype=bool)     # the first of each run of one (row, column)
    new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    starts = np.flatnonzero(new)
    arrays = (rows[starts], cols[starts], np.diff(np.append(starts, len(cols))))[:3 if counted else 2]
    for a in arrays:
        a.flags.writeable = False
    return arrays


# -------------------------------------------------------------------------------------------
def collective_traffic(net: Network, c: Collective, algorithm: str | None = None) -> tuple[str, Traffic]:
    """(algorithm name, traffic) of one collective on ``net``: the fabric's algorithm, the
    fastest where it has several; ``algorithm`` names one of those instead (e.g. ``ring`` where
    ``hierarchical`` would be faster; an error if it does not apply)."""
    c.check(net.npus)
    if c.op.startswith("io-") and not net.io_nodes:
        # every I/O algorithm stripes the bytes over the controllers; with none there is no path
        raise FredError(f"{c.op} on {net.name} needs I/O controllers; the platform has none "
                        "(its [io] controllers = 0)")
    if getattr(net, "in_switch", False) and c.op in (*_ROOTED, "all-reduce", "io-load", "io-store"):
        if len(c.group) == 1 and c.op not in ("io-load", "io-store"):
            return "local", net.traffic()
        if algorithm not in (None, "in-switch"):
            raise FredError(f"{net.name} runs {c.op} in the switches; {algorithm!r} does not apply")
        return "in-switch", _in_switch(net, c)
    named = ("all-reduce", "reduce-scatter", "all-gather", "io-load", "io-store")
    name, traffic = _endpoint(net, c, algorithm if c.op in named else None)
    if algorithm is not None and name not in (algorithm, "local"):
        raise FredError(f"{c.op} on {net.name} runs {name!r}; {algorithm!r} does not apply")
    return name, traffic


def evaluate(platform: Platform, fabric: str, collectives, *, algorithm: str | None = None) -> CollectiveResult:
    """Time of ``collectives`` (an iterable of :class:`Collective`) running concurrently, each
    with its fabric's fastest algorithm or, if given, ``algorithm``
    (:func:`collective_traffic`)."""
    collectives = tuple(collectives)
    if not collectives:
        raise FredError("no collectives to evaluate")
    results = current().collectives
    key = _result_key(platform, fabric, collectives, algorithm)
    cached = results.get(key)
    if cached is not None:
        return cached
    net = build_network(platform, fabric)
    total, algorithms, times, bandwidth_s, time = _timed_traffic(net, collectives, algorithm)
    senders = total.sent > 0
    per_npu = float(total.sent[senders].mean()) if senders.any() else 0.0
    link, nbytes = total.busiest_link(times)
    result = CollectiveResult(
        fabric=fabric, time_s=time, bandwidth_time_s=bandwidth_s,
        latency_s=time - bandwidth_s, bytes_sent_per_npu=per_npu,
        effective_bandwidth_per_npu_gbps=(per_npu / time / 1e9) if time > 0 else 0.0,
        busiest_link=link, busiest_link_bytes=nbytes, phases=total.sequential_phases,
        algorithms=sorted(set(algorithms)), link_loads=total.loads, link_bw=net.link_bw,
        configurations=total.configurations,
        config_load_s=configuration_load_s(net, total.configurations),
        phase_overhead_s=total.overhead_s,
        ring_turns_s=max(0.0, time - total.shared_time(bandwidth_s, times)) if total.ring_users else 0.0)
    return results.put(key, result)


@dataclass(frozen=True)
class CollectiveTiming:
    """What a task graph reads of concurrent collectives (:func:`collective_timing`): the
    :class:`CollectiveResult` fields of the same names, equal to the last bit."""

    time_s: float
    link_loads: object = field(repr=False)
    link_bw: object = field(repr=False)
    configurations: frozenset = field(repr=False)


def collective_timing(platform: Platform, fabric: str, collectives: tuple) -> CollectiveTiming | CollectiveResult:
    """:func:`evaluate`'s time, link loads and bandwidths and stored configurations of
    ``collectives`` (a tuple, fastest algorithms) without the rest of its result: the
    communication timer's view (:meth:`sysmodel.comm_timing.CommTimer.concurrent`, which keeps
    what it returns in the model cache's ``comm_times``). The result :func:`evaluate` keeps is
    returned where there is one; else the same traffic and time computed as :func:`evaluate`
    computes them (:func:`_timed_traffic`), not kept: the busiest link's name, the bytes sent
    per NPU and the configurations' load are left out (about a tenth of a design-space point's
    time, ``fred dse``; docs/sysmodel.md, Speed, thirty-third increment)."""
    if not collectives:
        raise FredError("no collectives to evaluate")
    cached = current().collectives.get(_result_key(platform, fabric, collectives, None))
    if cached is not None:
        return cached
    net = build_network(platform, fabric)
    total, _, _, _, time = _timed_traffic(net, collectives, None)
    return CollectiveTiming(time, total.loads, net.link_bw, total.configurations)


def _result_key(platform: Platform, fabric: str, collectives: tuple, algorithm: str | None) -> tuple:
    """The model cache's ``collectives`` key of :func:`evaluate`'s result (which
    :func:`collective_timing` looks up too)."""
    return (platform.network_spec, fabric, collectives, algorithm)


def _timed_traffic(net: Network, collectives: tuple, algorithm: str | None) -> tuple:
    """(merged traffic, algorithm names, per-link times, busiest link's time, time) of
    ``collectives`` at once on ``net``: the one computation of a collective set's time that
    :func:`evaluate` and :func:`collective_timing` share."""
    total, algorithms = _merged_traffic(net, collectives, algorithm)
    times = total.link_times()   # the busiest link's time and name from one division
    bandwidth_s = total.bandwidth_time(times)
    return total, algorithms, times, bandwidth_s, total.time(bandwidth_s, times)


# -- traffic that reads no link rate, shared across networks ------------------------------------
def _merged_traffic(net: Network, collectives: tuple, algorithm: str | None) -> tuple[Traffic, list[str]]:
    """(the traffic of ``collectives`` run at once on ``net``, each one's algorithm name).

    When no collective's traffic reads a link rate (:func:`_reads_link_rates`), the traffic is
    kept in the model's cache (``rate_free_traffic``) under the network's
    :func:`_link_rate_free_key` and copied onto every network that differs only in link rates
    (the design-space sweep's L1-L2 fractions, the uncertainty block's link efficiencies, a
    changed NPU link rate): its bytes per link, senders, latencies, phases and configurations
    are what a fresh construction there gives. What does read the rates -- the time, the
    busiest link, the effective bandwidth, the uplinks' port turns -- is computed from the copy
    on this network by :func:`evaluate`, as for a traffic built here."""
    shared = all(not _reads_link_rates(net, c) for c in collectives)
    if shared:
        key = (_link_rate_free_key(net), collectives, algorithm)
        memo = current().rate_free_traffic
        hit = memo.get(key)
        if hit is not None:
            return hit[0].onto(net), list(hit[1])
    total = net.traffic()
    names = []
    for c in collectives:
        name, t = collective_traffic(net, c, algorithm)
        names.append(name)
        total.merge(t)
    if shared:
        memo.put(key, (total.onto(net), tuple(names)))
    return total, names


def _reads_link_rates(net: Network, c: Collective) -> bool:
    """Whether building ``c``'s traffic on ``net`` reads a link's bandwidth: on the mesh always
    (its algorithms pick the fastest split and trees); on a FRED tree only the endpoint ring
    algorithms (ring and hierarchical all-reduce, reduce-scatter, all-gather of two members or
    more: their pipelined chunk times and the fastest-of choice) and the striped I/O chains
    (io-load, io-store without in-switch collectives: which shared link a stripe meets in a
    backlog, :func:`_io_chain_time`). In-switch flows, rooted chains, unicasts and all-to-all
    read routes, latencies, flits and switch timing only."""
    if not isinstance(net, FredTreeNetwork):
        return True
    if net.in_switch and c.op in (*_ROOTED, "all-reduce", "io-load", "io-store"):
        return False
    return (c.op in RING_OPS and len(c.group) > 1) or c.op in ("io-load", "io-store")


def _link_rate_free_key(net: Network) -> tuple:
    """The network's spec and fabric with every link rate set to 0: the NPU links' send and
    receive rates, the I/O links', the mesh's, the variants' L1-L2 rates and the link
    efficiency. They set only the network's bandwidths (``link_bw``) and an uplink's port
    count (``uplink_ports``, read when a traffic's time is computed, not when it is built);
    everything else a traffic's construction reads -- topology, routes, latencies, flits,
    switch timing, in-switch efficiency -- stays in the key. Made once per network."""
    key = getattr(net, "_link_rate_free_key", None)
    if key is None:
        spec = net.platform.network_spec
        variants = FrozenDict({name: replace(v, l1_l2_gbps=0.0) for name, v in spec.variants.items()})
        key = net._link_rate_free_key = (
            replace(spec, npu_send_gbps=0.0, npu_recv_gbps=0.0, io_gbps=0.0, mesh_link_gbps=0.0,
                    link_efficiency=0.0, variants=variants), net.name)
    return key
