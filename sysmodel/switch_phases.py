"""One phase active at a time per FRED switch, as link data the engine shares.

The shared spec (FRED.md section 2, "Datapath and control") says a FRED switch serves one
communication phase at a time and that a higher-priority phase preempts (MP > PP > DP); the
packet switch's control unit does exactly that (docs/switch.md, "Control unit": it reads one
VC and serves one phase; another waiting phase is selected only after a drain). So two
transfers that cross a common switch take turns there even where their links are disjoint,
e.g. an MP and a DP all-reduce on different ports of Fred-D's 4-port L1-L2 connection.

The engine (:mod:`sysmodel.engine`) shares links. This module expresses each switch as two
more *pseudo-links* (capacity 1: a time share, bandwidth 1, loads in seconds), appended to a
transfer's link loads (:func:`switch_links`): the switch's stored phases' and its default
phase's. A transfer that holds switch ``s`` loads one of them with the time it holds ``s``:
its busiest-link time alone, so at full speed it uses the whole switch (share 1) and alone it
runs as before -- its packets wait at the switch for as long as it runs -- or, where it is
paced at its sources or its sinks (its busiest links join endpoints and switches and its
other links are faster: an I/O controller's 128 GBps stream, an NPU's write into a
controller), its bytes' time through the switch (share below 1: its packets arrive with gaps,
or wait for room, while the switch selects another waiting phase, docs/switch.md, "Control
unit": a phase that cannot move yields). The engine's strict-priority max-min filling then
gives:

* one transfer alone: unchanged;
* two classes at one switch: strict priority gives the higher level the whole switch, the lower
  one waits (rate ~0) until it ends -- they take turns, MP first -- and the higher one's start
  while the lower is served on the switch costs that switch's drain (``preempt_s``,
  :mod:`sysmodel.preemption`);
* two stored phases of one level: they take turns in program order (the engine's tiers,
  :func:`sysmodel.engine.entry_tiers`; the packet fabric's phase order, docs/switch.md, "Phase
  order"), the first as if alone, the other on what is left (a paced stream's gaps);
* online transfers of one level: one phase, run together (the engine counts their largest use
  on the switch, not the sum); of two levels: turns, as two stored phases;
* transfers that share no switch: unchanged.

Which phase a transfer holds at a switch (docs/sysmodel.md, "One phase active at a time per
switch"): a transfer whose collectives store phases (``CollectiveResult.configurations``:
in-switch collectives, the I/O controllers' in-switch multicast and reduce, endpoint
algorithms' routes where the platform configures them, ``[fred] unicast_routing =
"configured"``) holds those, each its own, at the switches where they are stored (as before:
a switch it only passes through is not counted). A transfer storing none is routed online (the
paper's default, ``unicast_routing = "online"``): it holds every switch it crosses (has bytes
on a link into or out of) in the default phase of its VC, which every online packet of that VC
shares (docs/switch.md, "Online unicast routing"). So each switch has two pseudo-links:
the first loaded by the transfers holding a stored phase there (additive: each its own phase,
they take turns), the second by those holding the default phase. The engine adds the second to
the first's time as the sum over priority levels (the VCs) of the *largest* use among that
level's online holders (:func:`shared_phase_links`; :class:`sysmodel.engine.Engine`): online
transfers of one class run together through a switch, classes take turns. The mesh has routers,
no phases: nothing is held there.

What the fluid share leaves out (docs/sysmodel.md, "One phase active at a time"): the selects
a switch pays each time a paced stream's gap lets another phase in; a sink-paced transfer's
packets filling the one FIFO per VC at every switch input on its way, so a transfer of its VC
sharing a *link* with it waits behind it (measured: docs/fabric_validation.md,
dp-under-far-write; the model shares the link's bandwidth); the order between the
default phase and stored phases of one VC (the model serves the default phase first); the L2
is one logical switch in the model (one resource), whereas the RTL's L2 is built from planes,
one per uplink port, each with its own phase.
"""

from __future__ import annotations

import heapq
import weakref

import numpy as np

from sysmodel.collectives import build_network
from sysmodel.switch_links_compiled import BUSIEST, held_times

__all__ = ["holds_switches", "switch_links", "stored_switches", "collective_links", "transfer_links",
           "switch_held_times", "held_times_reference", "shared_phase_links", "hold_offsets"]

#: network -> its :func:`switch_links`, built once per network
_SWITCHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def holds_switches(platform, net) -> bool:
    """Whether transfers on ``net`` hold the switches they cross (FRED fabrics, unless the
    platform's ``[fred] one_phase_per_switch`` is false: a documented what-if)."""
    return getattr(net, "kind", None) == "fred" and platform.one_phase_per_switch


def switch_links(net) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """The switch nodes of ``net`` (in node order), the ids of each one's links (either
    direction), and the bandwidth array of ``net``'s links extended by two pseudo-links
    (bandwidth 1) per switch: first every switch's stored-phase pseudo-link, then every
    switch's default-phase (online) one (module docstring)."""
    found = _SWITCHES.get(net)
    if found is None:
        nodes = [n for n, kind in enumerate(net.node_kind) if kind == "switch"]
        incident = [np.flatnonzero((net.link_src == s) | (net.link_dst == s)) for s in nodes]
        bw = np.concatenate([np.asarray(net.link_bw, dtype=float), np.ones(2 * len(nodes))])
        found = _SWITCHES[net] = (nodes, incident, bw)
        _INCIDENCE[net] = _Incidence(incident)
        _ENDS[net] = _LinkEnds(net, nodes)
    return found


class _Incidence:
    """Every switch's links (``incident``) laid end to end, so a per-switch reduction over its
    links is one ``reduceat`` (a transfer's crossed switches and busy times are asked for once
    per distinct collective set: a Python loop over the switches was about a tenth of `fred
    validate`). ``flat``: the link ids in switch order; ``starts``: where each switch with a
    link begins in ``flat``; ``has``: which switches have a link (the others reduce to 0)."""

    def __init__(self, incident):
        lengths = np.array([len(links) for links in incident], dtype=np.int64)
        self.flat = np.concatenate(incident).astype(np.int64) if incident else np.zeros(0, dtype=np.int64)
        self.has = lengths > 0
        self.starts = (np.cumsum(lengths) - lengths)[self.has]
        self.switches = len(incident)
        #: switch s's links are flat[ptr[s]:ptr[s + 1]] (every switch, with links or not)
        self.ptr = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(lengths)])

    def any_positive(self, values) -> np.ndarray:
        """Per switch, whether any of its links has ``values`` > 0."""
        out = np.zeros(self.switches, dtype=bool)
        if len(self.flat):
            out[self.has] = np.logical_or.reduceat(values[self.flat] > 0, self.starts)
        return out

    def largest(self, values) -> np.ndarray:
        """Per switch, the largest of ``values`` (each >= 0) on its links; 0 for none."""
        out = np.zeros(self.switches)
        if len(self.flat):
            out[self.has] = np.maximum.reduceat(values[self.flat], self.starts)
        return out


#: network -> the :class:`_Incidence` of its :func:`switch_links`
_INCIDENCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _LinkEnds:
    """A network's per-link and per-switch facts that :func:`transfer_links` reads for every
    transfer, as arrays made once per network (built with :func:`switch_links`): ``into``
    (per link: it leaves an endpoint into a switch), ``out_of`` (it leaves a switch into an
    endpoint), ``nodes`` (the switch nodes, in node order) and ``position`` (per node, its index
    among them, -1 for no switch). Why: reading them per link and
    per switch in Python was most of ``transfer_links`` on networks of thousands of links
    (docs/sysmodel.md, Speed, thirteenth increment)."""

    def __init__(self, net, nodes):
        is_switch = np.array([kind == "switch" for kind in net.node_kind], dtype=bool)
        src, dst = is_switch[np.asarray(net.link_src)], is_switch[np.asarray(net.link_dst)]
        self.into = ~src & dst
        self.out_of = src & ~dst
        self.nodes = np.array(nodes, dtype=np.int64)
        #: per node of the network, its position among the switch nodes (-1: not a switch)
        self.position = np.full(len(net.node_kind), -1, dtype=np.int64)
        self.position[self.nodes] = np.arange(len(self.nodes))

    def stored(self, switches) -> np.ndarray:
        """Per switch node, whether it is in ``switches`` (a set of the network's nodes)."""
        out = np.zeros(len(self.nodes), dtype=bool)
        if switches:
            given = np.fromiter(switches, dtype=np.int64, count=len(switches))
            at = self.position[given[(given >= 0) & (given < len(self.position))]]
            out[at[at >= 0]] = True           # a node that is no switch of the network: none
        return out


#: network -> the :class:`_LinkEnds` of its :func:`switch_links`
_ENDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def stored_switches(result) -> frozenset:
    """The switch nodes where a :class:`~sysmodel.collectives.CollectiveResult`'s collectives
    store a phase (the first of each ``configurations`` triple)."""
    return frozenset(node for node, _, _ in result.configurations)


def collective_links(platform, fabric: str, result) -> tuple:
    """:func:`transfer_links` of a :class:`~sysmodel.collectives.CollectiveResult` (or
    :class:`~sysmodel.collectives.CollectiveTiming`) of
    ``fabric`` on ``platform`` (its network from the model's cache): its link loads and
    bandwidths, holding the switches where it stores a phase."""
    return transfer_links(platform, build_network(platform, fabric), result.link_loads,
                          result.link_bw, stored_switches(result))


def transfer_links(platform, net, loads, bw, switches) -> tuple:
    """The (loads, bandwidths) a transfer with link ``loads`` (bytes per link of ``net``) and
    bandwidths ``bw`` carries into the engine when it stores a phase at the switch nodes
    ``switches``: unchanged where :func:`holds_switches` is false or nothing is loaded; else
    with two pseudo-links per switch of ``net`` (:func:`switch_links`): the stored-phase one of
    each switch in ``switches`` it crosses, or, for a transfer storing no phase (routed online),
    the default-phase one of every switch it crosses, loaded with the time the transfer holds
    the switch (s), 0 elsewhere: its
    busiest-link time alone (its packets wait at the switch while it runs), or, for a transfer
    paced at its source or its sink (its busiest link joins an endpoint and a switch and is
    slower than its other links: an I/O controller's stream, an NPU's write into a controller),
    its busiest time on the switch's other links (its packets arrive with gaps, or wait for
    room, while the switch serves other phases; module docstring)."""
    if loads is None or bw is None or not holds_switches(platform, net):
        return loads, bw
    loads = np.asarray(loads, dtype=float)
    if not np.any(loads > 0):
        return loads, bw
    _, incident, held_bw = switch_links(net)
    time = loads / np.asarray(bw, dtype=float)
    held = switch_held_times(net, loads, time, _ENDS[net].stored(switches))
    if bw is not net.link_bw:
        held_bw = np.concatenate([np.asarray(bw, dtype=float), np.ones(2 * len(incident))])
    return np.concatenate([loads, held]), held_bw


def switch_held_times(net, loads: np.ndarray, time: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """:func:`held_times_reference`'s figures, to the last bit, from one compiled loop
    (:func:`sysmodel.switch_links_compiled.held_times` over ``net``'s switch incidence and
    link ends)."""
    switch_links(net)
    incidence, ends = _INCIDENCE[net], _ENDS[net]
    return held_times(loads, time, incidence.flat, incidence.ptr, ends.into, ends.out_of, stored,
                      not stored.any())


def held_times_reference(net, loads: np.ndarray, time: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """What :func:`sysmodel.switch_links_compiled.held_times` computes for :func:`transfer_links`,
    in NumPy (kept as its specification and compared with it in the tests): per switch of
    ``net`` (:func:`switch_links`) the seconds a transfer with link ``loads`` and link times
    ``time`` holds its stored-phase pseudo-link (the switches in ``stored``), then its
    default-phase one (where it stores none: routed online) -- its busy time at every switch
    it crosses, 0 elsewhere."""
    switch_links(net)
    t_alone = float(time.max())
    incidence = _INCIDENCE[net]
    crossed = incidence.any_positive(loads)
    paced = _paced_links(net, time)
    busy = _busy_times(time, incidence, paced) if len(paced) else t_alone
    online = not stored.any()     # a transfer storing phases is routed by them (module docstring)
    return np.concatenate([np.where(crossed & stored, busy, 0.0), np.where(crossed & online, busy, 0.0)])


def _paced_links(net, time) -> np.ndarray:
    """The links that pace a transfer at its sources or its sinks (``time``: per link, its
    bytes' time): its busiest links, where every one leaves an endpoint (an I/O controller's
    stream, an NPU) into a switch, or every one leaves a switch into an endpoint (an NPU's
    write into a 128 GBps I/O controller), and some link it loads beyond them is faster; empty where a link between switches is among its busiest (its packets then
    wait at the switches: it is not paced). A sink-paced transfer's packets wait for room at
    every switch on its way, and the control unit yields the switch to a phase that can move
    (docs/switch.md, "Control unit": the work-conserving yield, measured in the RTL:
    docs/fabric_validation.md, dp-under-write), so it leaves the switches the gaps a
    source-paced stream leaves."""
    n = len(net.link_bw)
    busiest = np.flatnonzero(time[:n] >= time.max() * BUSIEST)
    switch_links(net)
    ends = _ENDS[net]
    # all into switches (paced at the sources) or all out of them (at the sinks); a transfer
    # whose busiest links are both, an all-reduce at full speed, moves at its links' rate
    if not len(busiest) or not (ends.into[busiest].all() or ends.out_of[busiest].all()):
        return np.zeros(0, dtype=np.int64)
    return busiest if np.count_nonzero(time[:n] > 0) > len(busiest) else np.zeros(0, dtype=np.int64)


def _busy_times(time, incidence: _Incidence, paced: np.ndarray) -> np.ndarray:
    """Per switch, how long a transfer paced by the links ``paced`` keeps it busy:
    its busiest time on the switch's other links (the time its bytes take through it; 0 where
    it has none: every time is >= 0)."""
    others = np.array(time, dtype=float)
    others[paced] = 0.0
    return incidence.largest(others)


def shared_phase_links(platform, net) -> np.ndarray:
    """Per link of ``net`` and pseudo-link (:func:`switch_links`), the link whose time it
    shares as a phase several transfers hold together: a switch's default-phase pseudo-link
    names that switch's stored-phase pseudo-link, every other link -1 (the engine's
    ``shared_phase``, :class:`sysmodel.engine.Engine`). Empty where transfers hold no switch."""
    if not holds_switches(platform, net):
        return np.zeros(0, dtype=np.int64)
    nodes, _, _ = switch_links(net)
    n, s = len(net.link_bw), len(nodes)
    return np.concatenate([np.full(n + s, -1, dtype=np.int64), np.arange(n, n + s, dtype=np.int64)])


def hold_offsets(platform, net):
    """The engine's per-switch hold (``Engine(hold=)``, docs/sysmodel.md, "A switch held per
    switch") for transfers on ``net``: None where transfers hold no switch
    (:func:`holds_switches`), else a function of a transfer's (loads, bandwidths) as
    :func:`transfer_links` gives them, and its latency beyond its bytes (``latency_s``),
    returning two arrays over those links, ``(head, after)`` (s):

    * ``head``: when the transfer's first packet reaches the link after the transfer starts --
      for a network link, its first packet's arrival at the link's source node plus that
      node's latency if it is a switch (0 leaving an endpoint); for a switch's pseudo-link, the
      arrival at the switch;
    * ``after``: for a switch's pseudo-link, how long before the transfer's end its last
      packet leaves the switch (so the switch is held until the end minus it); ``inf`` for
      network links (a link is not held beyond the transfer's bytes). Held in the default
      phase (an online transfer: an endpoint algorithm, whose steps all cross the switch
      until the last one's packets), the latency from leaving the switch (arrival + its
      latency) to the nearest sink. Held in a stored phase (an in-switch tree, which its
      packets pass once each way), the larger of that and ``latency_s`` (the transfer's
      latency beyond its bytes) minus the head's last departure from the switch (the longest
      way there from the senders): the last packet leaves its bytes' time after the head, and
      in between the phase has nothing to move (the control unit yields it, docs/switch.md,
      "Control unit").

    Both are the path latencies the collectives sum (``net.link_latency``, ``net.node_latency``),
    walked over the links the transfer loads: shortest arrival from the endpoints it sends from
    (the first packet), shortest way on to an endpoint it delivers to (the last packet's
    remaining latency, so the hold is the longest the loads allow). Switches it does not reach
    get ``head`` 0 and ``after`` inf. Kept per network (the function, and per set of links
    loaded and latency its arrays, read only: every collective of one shape is one walk)."""
    if not holds_switches(platform, net):
        return None
    forward = platform.forward_latency_ns * 1e-9
    found = _HOLDS.get(net)
    if found is None or found[0] != forward:
        found = _HOLDS[net] = (forward, _hold_function(net, forward))
    return found[1]


#: network -> (forwarding latency, its :func:`hold_offsets` function)
_HOLDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _hold_function(net, forward: float):
    """:func:`hold_offsets`' function for ``net`` and an NPU forwarding latency ``forward`` (s)."""
    nodes, _, _ = switch_links(net)
    n, s = len(net.link_bw), len(nodes)
    index = {node: k for k, node in enumerate(nodes)}
    src, dst = net.link_src.tolist(), net.link_dst.tolist()
    link_lat, node_lat = net.link_latency_s, net.node_latency_s
    switch = [kind == "switch" for kind in net.node_kind]
    # per node, its hops from the nearest endpoint (a tree's levels: up is away from them)
    height = [0 if not sw else len(switch) for sw in switch]
    neighbours: dict[int, list[int]] = {}
    for u, v in zip(src, dst):
        neighbours.setdefault(u, []).append(v)
    frontier = [node for node, sw in enumerate(switch) if not sw]
    while frontier:                     # breadth first from the endpoints
        nxt = []
        for u in frontier:
            for v in neighbours.get(u, ()):
                if height[v] > height[u] + 1:
                    height[v] = height[u] + 1
                    nxt.append(v)
        frontier = nxt
    memo: dict = {}

    def offsets(loads, bw, latency_s):
        loads = np.asarray(loads, dtype=float)
        # the offsets depend on which links are loaded and the latency, not on the bytes
        key = (len(loads), np.packbits(loads > 0).tobytes(), latency_s)
        found = memo.get(key)
        if found is not None:
            return found
        used = [int(l) for l in np.flatnonzero(loads[:n] > 0)]
        head = np.zeros(len(loads))
        after = np.full(len(loads), np.inf)
        out: dict[int, list[int]] = {}
        into: dict[int, list[int]] = {}
        for l in used:
            out.setdefault(src[l], []).append(l)
            into.setdefault(dst[l], []).append(l)
        # the first packet's arrivals from the senders; the last one's latency on to a sink
        arrive = _first_arrivals(used, out, into, src, dst, link_lat, node_lat, switch, forward)
        rest = _remaining_latencies(used, into, src, dst, link_lat, node_lat, switch)
        for l in used:
            h = arrive.get(src[l])
            if h is not None:
                head[l] = h + (node_lat[src[l]] if switch[src[l]] else 0.0)
        # a stored phase's collective passes each switch once per direction (a tree: up, then
        # down): its last packet leaves a switch its bytes' time after the head's last
        # departure there, the longest way from the senders (the switches' latencies on it)
        last = _last_departures(used, out, src, dst, link_lat, node_lat, switch, arrive, height)
        for node, k in index.items():
            for column in (n + k, n + s + k):
                if column < len(loads) and loads[column] > 0:
                    head[column] = arrive.get(node, 0.0)
                    if node in rest and node in arrive:
                        after[column] = rest[node]
                        if column < n + s and node in last:
                            after[column] = max(rest[node], latency_s - last[node])
        head.setflags(write=False)
        after.setflags(write=False)
        found = memo[key] = (head, after)
        return found
    return offsets


def _shortest(start: dict, steps) -> dict:
    """Dijkstra's walk: per node reached, its smallest value, from ``start`` (node -> value)
    along ``steps(node, value)`` (an iterable of (next node, its value through ``node``),
    never below ``value``: latencies are >= 0). A node is expanded once, at its smallest
    value; a reached node keeps its first value on ties."""
    best = dict(start)
    heap = [(t, node) for node, t in best.items()]
    heapq.heapify(heap)
    done = set()
    while heap:
        t, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        for nxt, value in steps(node, t):
            if value < best.get(nxt, np.inf):
                best[nxt] = value
                heapq.heappush(heap, (value, nxt))
    return best


def _first_arrivals(used, out, into, src, dst, link_lat, node_lat, switch, forward) -> dict:
    """Per node the transfer reaches, its first packet's arrival (s after the start) over the
    ``used`` links (``out`` / ``into``: per node, its used links leaving / entering it;
    ``src``, ``dst``, ``link_lat``: per link; ``node_lat``, ``switch``: per node).

    Dijkstra from the endpoints the transfer sends from. Where some endpoint sends without
    receiving (a chain's or a multicast's root, a reduce's leaves, a controller's stream),
    those start at 0 and an endpoint that receives forwards what it got (a chain's member:
    after the platform's forwarding latency ``forward``, s); where every sender also receives
    (a ring, an in-switch all-reduce), all of them send at 0. A switch passes a packet on
    after its own latency."""
    senders = {src[l] for l in used if not switch[src[l]]}
    pure = {node for node in senders if node not in into}

    def steps(node, t):
        if switch[node]:
            leave = t + node_lat[node]
        elif t == 0.0 and (node in pure or not pure):
            leave = 0.0            # a sender: it sends from the start
        else:
            leave = t + forward
        return ((dst[l], leave + link_lat[l]) for l in out.get(node, ()))

    return _shortest({node: 0.0 for node in (pure or senders)}, steps)


def _remaining_latencies(used, into, src, dst, link_lat, node_lat, switch) -> dict:
    """Per switch on the ``used`` links, the last packet's remaining latency (s): from leaving
    the switch, over the links and the switches' latencies, to the nearest endpoint the
    transfer delivers to (0 at those endpoints; arguments as :func:`_first_arrivals`'). A
    Dijkstra walk backwards from the sinks, through switches only (an endpoint on the way is
    a sink or a sender, not a place a packet passes)."""
    def steps(node, t):
        # leaving the switch src[l], then the link, then (through a switch) its latency and
        # what follows
        return ((src[l], link_lat[l] + (t + node_lat[node] if switch[node] else 0.0))
                for l in into.get(node, ()) if switch[src[l]])

    return _shortest({dst[l]: 0.0 for l in used if not switch[dst[l]]}, steps)


def _last_departures(used, out, src, dst, link_lat, node_lat, switch, arrive, height) -> dict:
    """Per switch reached (``arrive``: first arrivals), the head's last departure from it: the
    longest way from the senders over the ``used`` links through switches (their latencies
    on it) plus its own latency (``out``: per node, its used links leaving it), where a way goes up the tree and then down (``height``: per
    node, its hops from the nearest endpoint), as a tree's packets do: the up pass and the
    down pass of an in-switch all-reduce meet at a switch twice, the down one later."""
    latest = {(node, False): 0.0 for node in arrive if not switch[node] and arrive[node] == 0.0}
    for _ in range(2 * len(used) + 2):
        moved = False
        for (u, down), t in list(latest.items()):
            leave = t + (node_lat[u] if switch[u] else 0.0)
            if not switch[u] and t != 0.0:
                continue           # endpoints send (at 0) and receive; they pass nothing on
            for l in out.get(u, ()):
                if not switch[dst[l]]:
                    continue
                up = height[dst[l]] > height[u]
                if up and down:
                    continue
                state = (dst[l], down or not up)
                a = leave + link_lat[l]
                if a > latest.get(state, -1.0):
                    latest[state] = a
                    moved = True
        if not moved:
            break
    out: dict = {}
    for (node, _), t in latest.items():
        if switch[node]:
            out[node] = max(out.get(node, 0.0), t + node_lat[node])
    return out
