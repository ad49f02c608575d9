"""A fabric as a graph of nodes and directed links, with per-link byte accounting.

:class:`Network` holds nodes (NPUs first, ranks ``0 .. npus-1``; then switches and I/O
controllers) and directed links with a bandwidth (bytes/s) and a latency (s). Subclasses
(:class:`sysmodel.mesh.MeshNetwork`, :class:`sysmodel.fred_tree.FredTreeNetwork`) add the
nodes and define routing (``_route``). :class:`Traffic` accumulates, for a set of transfers
that run concurrently, the bytes on every directed link and the bytes each NPU injects; its
time is that of the busiest link plus the latency of the longest dependent chain of hops.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from hdl.contracts.errors import FredError

__all__ = ["Network", "Traffic"]


class Network:
    """Nodes and directed links. Build with :meth:`add_node` / :meth:`add_link`, then route.

    Members: ``name``, ``npus`` (NPU ranks are node ids ``0 .. npus-1``), ``node_names``,
    ``node_kind`` (``"npu" | "switch" | "io"``), ``io_nodes`` (I/O controller node ids),
    arrays ``link_src``, ``link_dst``, ``link_bw`` (bytes/s), ``link_latency`` (s),
    ``node_latency`` (s added when a path passes *through* the node, e.g. a switch),
    ``flit_bytes`` (transfers move whole flits of this size; None: byte-granular); after
    :meth:`finalize`, ``link_src_ids``, ``link_dst_ids``, ``link_latency_s`` and
    ``node_latency_s``: the same ends and latencies as Python lists (ints, floats).
    """

    #: Flit size of the fabric's transfers; None where the model does not packetize.
    flit_bytes: int | None = None

    def __init__(self, name: str, npus: int):
        self.name = name
        self.npus = npus
        self.node_names: list[str] = []
        self.node_kind: list[str] = []
        self._node_latency: list[float] = []
        self._links: list[tuple[int, int, float, float, str]] = []
        self.link_id: dict[tuple[int, int], int] = {}
        self.io_nodes: list[int] = []
        for rank in range(npus):
            self.add_node(f"npu{rank}", "npu")
        # memos of this network's own derived data, as long-lived as the network (which the
        # model's cache keeps: sysmodel/model_cache.py); keyed by node ids of this network only
        self.path = lru_cache(maxsize=None)(self._path)
        self._ports: dict[int, dict[int, int]] = {}
        self._route_latency: dict[tuple[int, ...], float] = {}   # route (link ids) -> latency
        # route -> its slowest link's bandwidth; this network's own (networks that share
        # routes and latencies may differ in bandwidth: sysmodel.collectives.build_network)
        self._route_min_bw: dict[tuple[int, ...], float] = {}

    # -- construction ------------------------------------------------------------------------
    def add_node(self, name: str, kind: str, latency_s: float = 0.0) -> int:
        self.node_names.append(name)
        self.node_kind.append(kind)
        self._node_latency.append(latency_s)
        node = len(self.node_names) - 1
        if kind == "io":
            self.io_nodes.append(node)
        return node

    def add_link(self, src: int, dst: int, bandwidth_Bps: float, latency_s: float, kind: str) -> int:
        if (src, dst) in self.link_id:
            raise FredError(f"duplicate link {self.node_names[src]}->{self.node_names[dst]}")
        self._links.append((src, dst, bandwidth_Bps, latency_s, kind))
        self.link_id[(src, dst)] = len(self._links) - 1
        return len(self._links) - 1

    def add_duplex(self, a: int, b: int, bw_ab: float, bw_ba: float, latency_s: float, kind: str):
        self.add_link(a, b, bw_ab, latency_s, kind)
        self.add_link(b, a, bw_ba, latency_s, kind)

    def ports(self, switch: int) -> dict[int, int]:
        """Port number of each neighbour of ``switch`` (neighbours in node order)."""
        ports = self._ports.get(switch)
        if ports is None:
            neighbours = sorted({int(d) for s, d in zip(self.link_src, self.link_dst) if s == switch})
            ports = self._ports[switch] = {n: i for i, n in enumerate(neighbours)}
        return ports

    def finalize(self) -> None:
        self.link_src = np.array([l[0] for l in self._links], dtype=np.int64)
        self.link_dst = np.array([l[1] for l in self._links], dtype=np.int64)
        self.link_bw = np.array([l[2] for l in self._links], dtype=float)
        self.link_latency = np.array([l[3] for l in self._links], dtype=float)
        self.link_kind = [l[4] for l in self._links]
        # the I/O controllers' links: paced, a flit crosses one in its whole serialisation time
        # (Traffic.controller_lead_s)
        self.io_link_mask = np.array([l[4] == "io" for l in self._links], dtype=bool)
        self.node_latency = np.array(self._node_latency, dtype=float)
        # the same values as Python lists, for code that walks routes link by link (a list
        # index is a fraction of a numpy scalar read: sysmodel.collectives' switch phases)
        self.link_dst_ids = [l[1] for l in self._links]
        self.link_src_ids = [l[0] for l in self._links]
        self.link_latency_s = [float(l[3]) for l in self._links]
        self.node_latency_s = [float(x) for x in self._node_latency]

    @property
    def n_links(self) -> int:
        return len(self._links)

    def link_name(self, link: int) -> str:
        return f"{self.node_names[self.link_src[link]]}->{self.node_names[self.link_dst[link]]}"

    # -- routing -------------------------------------------------------------------------------
    def _route(self, src: int, dst: int, order: str) -> list[int]:
        """Node sequence from ``src`` to ``dst`` (inclusive); subclasses implement it."""
        raise NotImplementedError

    def _path(self, src: int, dst: int, order: str = "xy") -> tuple[int, ...]:
        """Link ids from ``src`` to ``dst`` (empty when equal); cached."""
        if src == dst:
            return ()
        nodes = self._route(src, dst, order)
        try:
            return tuple(self.link_id[(a, b)] for a, b in zip(nodes, nodes[1:]))
        except KeyError as exc:  # a routing bug, not bad input
            raise AssertionError(f"route {nodes} uses a missing link {exc}") from None

    def route(self, src: int, dst: int, order: str = "xy") -> tuple[tuple[int, ...], int | None]:
        """(links, sender) of a transfer from node ``src`` to ``dst``: the route's link ids
        (:meth:`path`) and the NPU that counts as sending its bytes, ``src`` when it is an NPU
        other than ``dst``, else None (an I/O controller's or a switch's bytes are no NPU's
        injection; a transfer to itself moves nothing). The one sender rule of every
        transfer the model adds (:meth:`Traffic.add_transfers`, the I/O chain's plan)."""
        return self.path(src, dst, order), (src if src < self.npus and src != dst else None)

    def path_latency(self, links) -> float:
        """Wire latency of the links plus the latency of every node passed through. A route
        as :meth:`path` gives it (a tuple) is summed once per network: collectives ask for the
        same routes' latencies thousands of times (the same value each time: the sum is a
        function of the tuple)."""
        if not links:
            return 0.0
        if type(links) is tuple:
            latency = self._route_latency.get(links)
            if latency is None:
                latency = self._route_latency[links] = self._links_latency(links)
            return latency
        return self._links_latency(links)

    def path_min_bw(self, links: tuple[int, ...]) -> float:
        """Bandwidth of the slowest link of the route ``links`` (a non-empty tuple, as
        :meth:`path` gives it), bytes/s; kept per route."""
        bw = self._route_min_bw.get(links)
        if bw is None:
            bw = self._route_min_bw[links] = float(self.link_bw[list(links)].min())
        return bw

    def _links_latency(self, links) -> float:
        links = list(links)
        through = self.link_dst[links[:-1]]
        return float(self.link_latency[links].sum() + self.node_latency[through].sum())

    def controller_flit_bytes(self) -> float:
        """The unit an I/O controller's link serialises whole before a flit moves on (a load)
        or is stored (a store): the fabric's flit; 0 where the model is byte-granular (no
        flit, no such term: :meth:`Traffic.controller_lead_s`)."""
        return float(self.flit_bytes or 0)

    def wire_bytes(self, nbytes: float, chunks: int = 1) -> float:
        """Bytes a transfer of ``nbytes``, sent as ``chunks`` equal chunks, puts on each link:
        with flits, every chunk rounded up to whole flits; else ``nbytes``."""
        if self.flit_bytes is None or nbytes <= 0:
            return nbytes
        # a chunk that is a whole number of flits up to float rounding is not padded; any
        # non-empty chunk is at least one flit
        flits = max(math.ceil(nbytes / chunks / self.flit_bytes - 1e-9), 1)
        return chunks * flits * self.flit_bytes

    def traffic(self) -> "Traffic":
        return Traffic(self)


def _port_turns(users: dict, ports: int) -> int:
    """The turns the busiest uplink's ``ports`` take for ``users`` (per L1 node, the flows that
    each need a port of its uplink for a phase): users over ports rounded up, at least 1."""
    return max(max((-(-n // ports) for n in users.values()), default=1), 1)


class Traffic:
    """Bytes per directed link and bytes injected per NPU for transfers running concurrently.

    ``loads`` counts the bytes on the wire (whole flits, :meth:`Network.wire_bytes`); ``sent``
    the payload each NPU injects. ``latency_s`` is the latency of the longest chain of
    dependent hops among the merged collectives that adds to the link time (an in-switch
    collective's one pass, a chain's hops, a ring's last hop); ``pipelined_s`` is a dependent
    chain that runs *under* the link time (a ring's steps: each step's hop overlaps the
    previous chunk's transfer, so only the longer of the two counts, see
    :attr:`time`); ``phases`` the switch phases an in-switch collective runs one
    after another: the first pays ``first_select_s`` (its selects start with the collective and
    overlap the first hops), each later one ``phase_turn_s``: the select at the slowest switch
    plus the wait for the previous phase, a further pass of the hop chain when the flows turn
    round at a top switch (an all-reduce: a switch's phase includes the flows coming back down,
    so it ends after the round trip), else the switch's drain (a reduce or a multicast: a
    switch's phase ends when its own inputs are done; the measured phase switch, drain + copy); ``uplink_users`` counts, per L1 switch node, the in-switch
    collectives whose flows cross that L1's uplink: they share its ``net.uplink_ports``
    physical ports, a port carries one flow per phase, so more collectives than ports
    take turns (:attr:`sequential_phases`); ``paced_turn_s`` is what each later turn of the
    busiest uplink adds beyond its phase turn when the collectives taking turns are reduce-outs
    into their own controllers (an io-store whose controllers are named): the switches serve
    one phase of a VC at a time, and the previous group's controller L1 hands over only once it
    has started that group's last packet (when its controller's receive buffer has room for it,
    or when the uplink has brought it), then selects and sends its member's operand of the next
    group, whose first flit then needs a pass to its controller
    (:func:`sysmodel.collectives._paced_turn_s`; docs/fabric_validation.md, "Fred-B's DP-group
    I/O (session 15)", "The turn's hand-over"); ``configurations`` are the switch configurations the
    traffic needs stored, as (switch node, flows, phases) triples; ``controller_flit_bytes``
    (0: none) is the flit an I/O collective's streams serialise on their controllers' links
    (:meth:`Network.controller_flit_bytes`): a controller's link is paced, a 128 GBps device
    needs a flit's whole time on it before the flit moves on (a load) or is stored (a store),
    so one flit's controller time adds to a busiest link elsewhere on the path
    (:meth:`controller_lead_s`). ``ring_users`` counts, per L1 switch node, the endpoint rings
    routed as configured flows (``[fred] unicast_routing = "configured"``: the circuit fabric's
    switches) that cross that L1's uplink: a port carries one flow per phase, and a ring's
    phase holds it for the ring's whole run, so more rings than ports run one after another
    (:attr:`ring_turns`), each taking ``ring_alone_s`` (the slowest ring's time alone) and each
    later one a select, ``ring_select_s`` (:meth:`ring_turns_s`; docs/fabric_validation.md,
    "Rings that take turns on the circuit fabric").
    """

    __slots__ = ("net", "loads", "sent", "latency_s", "pipelined_s", "phase_turn_s", "first_select_s", "phases",
                 "configurations", "uplink_users", "controller_flit_bytes", "paced_turn_s",
                 "ring_users", "ring_alone_s", "ring_select_s")

    def __init__(self, net: Network):
        self.net = net
        self.loads = np.zeros(net.n_links)
        self.sent = np.zeros(net.npus)
        self.latency_s = 0.0
        self.pipelined_s = 0.0
        self.phase_turn_s = 0.0
        self.first_select_s = 0.0
        self.phases = 0
        self.configurations: frozenset = frozenset()
        self.uplink_users: dict[int, int] = {}
        self.controller_flit_bytes = 0.0
        self.paced_turn_s = 0.0
        self.ring_users: dict[int, int] = {}
        self.ring_alone_s = 0.0
        self.ring_select_s = 0.0

    def add_links(self, links, nbytes: float, chunks: int = 1) -> None:
        """``nbytes`` (sent as ``chunks`` equal chunks) on every link of ``links``."""
        if links:
            self.loads[list(links)] += self.net.wire_bytes(nbytes, chunks)

    def add_transfer(self, src: int, dst: int, nbytes: float, order: str = "xy",
                     chunks: int = 1) -> tuple[int, ...]:
        """Route ``nbytes`` (sent as ``chunks`` equal chunks) from node ``src`` to ``dst``; an
        NPU source counts as sending them (:meth:`Network.route`'s sender)."""
        links, sender = self.net.route(src, dst, order)
        self.add_links(links, nbytes, chunks)
        if sender is not None:
            self.sent[sender] += nbytes
        return links

    def add_transfers(self, pairs, nbytes: float, order: str = "xy",
                      chunks: int = 1) -> list[tuple[int, ...]]:
        """:meth:`add_transfer` of ``nbytes`` (sent as ``chunks`` equal chunks) for every
        (src, dst) of ``pairs``, in order (:meth:`add_routes` of their
        :meth:`Network.route`); returns the routes."""
        routes = [self.net.route(src, dst, order) for src, dst in pairs]
        self.add_routes(routes, nbytes, chunks)
        return [links for links, _ in routes]

    def add_routes(self, routes, nbytes: float, chunks: int = 1) -> None:
        """``nbytes`` (sent as ``chunks`` equal chunks) on every ``(links, sender)`` of
        ``routes`` (:meth:`Network.route`'s), in order, in one ``numpy.add.at`` for the links
        and one for the senders (which adds in index order: every link and sender gets the same
        sums, in the same order, as one transfer at a time)."""
        links = [link for route, _ in routes for link in route]
        if links:
            np.add.at(self.loads, links, self.net.wire_bytes(nbytes, chunks))
        senders = [sender for _, sender in routes if sender is not None]
        if senders:
            np.add.at(self.sent, senders, nbytes)

    def tree_links(self, src: int, dsts, order: str = "xy") -> set[int]:
        """Links of the multicast tree that is the union of the routes from ``src``."""
        links: set[int] = set()
        for dst in dsts:
            links.update(self.net.path(src, dst, order))
        return links

    def scaled(self, factor: float) -> "Traffic":
        out = Traffic(self.net)
        out.loads = self.loads * factor
        out.sent = self.sent * factor
        out.latency_s, out.phase_turn_s, out.phases = self.latency_s, self.phase_turn_s, self.phases
        out.pipelined_s = self.pipelined_s
        out.first_select_s = self.first_select_s
        out.configurations = self.configurations
        out.uplink_users = dict(self.uplink_users)
        out.controller_flit_bytes = self.controller_flit_bytes
        out.paced_turn_s = self.paced_turn_s
        out.ring_users = dict(self.ring_users)
        out.ring_alone_s, out.ring_select_s = self.ring_alone_s, self.ring_select_s
        return out

    def onto(self, net: Network) -> "Traffic":
        """A copy of this traffic on ``net`` (a network of the same topology, routes, latencies
        and switches; its link rates may differ): its own arrays, the same values."""
        out = Traffic.__new__(Traffic)
        out.net = net
        out.loads = self.loads.copy()
        out.sent = self.sent.copy()
        out.latency_s, out.pipelined_s, out.phase_turn_s = self.latency_s, self.pipelined_s, self.phase_turn_s
        out.first_select_s, out.phases, out.configurations = self.first_select_s, self.phases, self.configurations
        out.uplink_users = dict(self.uplink_users)
        out.controller_flit_bytes = self.controller_flit_bytes
        out.paced_turn_s = self.paced_turn_s
        out.ring_users = dict(self.ring_users)
        out.ring_alone_s, out.ring_select_s = self.ring_alone_s, self.ring_select_s
        return out

    def merge(self, other: "Traffic") -> "Traffic":
        """Add ``other`` as running concurrently with this traffic (in place)."""
        self.loads += other.loads
        self.sent += other.sent
        self.latency_s = max(self.latency_s, other.latency_s)
        self.pipelined_s = max(self.pipelined_s, other.pipelined_s)
        self.phase_turn_s = max(self.phase_turn_s, other.phase_turn_s)
        self.first_select_s = max(self.first_select_s, other.first_select_s)
        self.phases = max(self.phases, other.phases)
        self.configurations = self.configurations | other.configurations
        for node, users in other.uplink_users.items():
            self.uplink_users[node] = self.uplink_users.get(node, 0) + users
        self.controller_flit_bytes = max(self.controller_flit_bytes, other.controller_flit_bytes)
        self.paced_turn_s = max(self.paced_turn_s, other.paced_turn_s)
        for node, users in other.ring_users.items():
            self.ring_users[node] = self.ring_users.get(node, 0) + users
        self.ring_alone_s = max(self.ring_alone_s, other.ring_alone_s)
        self.ring_select_s = max(self.ring_select_s, other.ring_select_s)
        return self

    def then(self, stage: "Traffic") -> "Traffic":
        """Add ``stage`` as running after this traffic, on its result (in place): its bytes add
        to the links and the senders, its dependent chains to this one's. A stage's rings that
        take turns (:attr:`ring_turns`) are not carried: the caller composing stages adds what
        each stage's own time exceeds their sum by (``collectives._fred_hierarchical``)."""
        self.loads += stage.loads
        self.sent += stage.sent
        self.latency_s += stage.latency_s
        self.pipelined_s += stage.pipelined_s
        self.controller_flit_bytes = max(self.controller_flit_bytes, stage.controller_flit_bytes)
        return self

    def link_times(self) -> np.ndarray:
        return self.loads / self.net.link_bw

    def bandwidth_time(self, times: np.ndarray | None = None) -> float:
        """The busiest link's bytes / bandwidth; ``times``: :meth:`link_times` when the caller
        has them."""
        if not self.net.n_links:
            return 0.0
        return float((self.link_times() if times is None else times).max())

    @property
    def sequential_phases(self) -> int:
        """Phases run one after another: each collective's own, times the turns the busiest
        uplink's ports take when more in-switch collectives cross it than it has ports."""
        if not self.phases:
            return 0
        return self.phases * self.uplink_turns

    @property
    def uplink_turns(self) -> int:
        """The turns the busiest uplink's ports take: its in-switch collectives over its ports,
        rounded up (1 when none shares a port)."""
        return _port_turns(self.uplink_users, getattr(self.net, "uplink_ports", 1))

    @property
    def ring_turns(self) -> int:
        """The turns the busiest uplink's ports take for configured rings (:attr:`ring_users`
        over ``net.uplink_ports``, rounded up; 1 when none shares a port)."""
        return _port_turns(self.ring_users, getattr(self.net, "uplink_ports", 1))

    def ring_turns_s(self) -> float:
        """The rings taking turns, one after another: :attr:`ring_turns` times the slowest
        ring's time alone, plus a select per later turn; 0 with one turn."""
        turns = self.ring_turns
        if turns < 2:
            return 0.0
        return turns * self.ring_alone_s + (turns - 1) * self.ring_select_s

    @property
    def overhead_s(self) -> float:
        """What the phases add to one pass: the first phase what is left of its selects when
        the flits arrive (``first_select_s``), every later phase ``phase_turn_s`` (its select and
        the wait for the previous phase to be done), and every later turn of the busiest uplink
        ``paced_turn_s`` (paced reduce-outs served in turn; 0 otherwise)."""
        n = self.sequential_phases
        if not n:
            return 0.0
        # paced reduce-outs taking turns: each later turn's stream too (0 for any other traffic)
        streams = (self.uplink_turns - 1) * self.paced_turn_s if self.paced_turn_s else 0.0
        return self.first_select_s + (n - 1) * self.phase_turn_s + streams

    def controller_flit_s(self) -> float:
        """A controller's paced flit, f = ``controller_flit_bytes`` / the slowest loaded
        controller link's bandwidth; 0 without controller flits or loaded controller links."""
        if not self.controller_flit_bytes:
            return 0.0
        loaded = self.net.io_link_mask & (self.loads > 0)
        if not loaded.any():
            return 0.0
        return self.controller_flit_bytes / float(self.net.link_bw[loaded].min())

    def controller_lead_s(self, times: np.ndarray | None = None) -> float:
        """What the I/O controllers' paced links add to the busiest link's time: a flit leaves
        a controller's link (a load) or is stored from it (a store) only after its whole time
        on it, f = ``controller_flit_bytes`` / the slowest loaded controller link's bandwidth.
        As a pipeline of links, the streams take max(C, O + f), C the busiest controller
        link's time (every flit's f, the first or last included), O the busiest other link's:
        this returns that minus max(C, O). So f where another link is the busiest (the mesh's
        io-load and io-store: the busiest link's flits start f late, or its last flit is
        stored f after it crossed), 0 where a controller's link is the busiest by f or more
        (its time counts every flit's f already). 0 without controller flits; ``times``:
        :meth:`link_times` when the caller has them. O is over every link of the traffic,
        merged collectives' too (an upper bound for them: at most f)."""
        flit_s = self.controller_flit_s()
        if not flit_s:
            return 0.0
        io = self.net.io_link_mask
        if times is None:
            times = self.link_times()
        controller = float(times[io].max())
        other = float(times[~io].max()) if (~io).any() else 0.0
        return max(controller, other + flit_s) - max(controller, other)

    def time(self, bandwidth_s: float | None = None, times: np.ndarray | None = None) -> float:
        """The longer of the busiest link's bytes / bandwidth and the pipelined dependent chain
        (:attr:`pipelined_s`), plus the latency that adds to both (one pass of the hop chain,
        a ring's last hop, the controllers' paced flit: :meth:`controller_lead_s`), plus the
        phases' selects and further passes (:attr:`overhead_s`); at least the configured rings'
        turns one after another (:meth:`ring_turns_s`) where they take turns. ``bandwidth_s`` and
        ``times``: :meth:`bandwidth_time` and :meth:`link_times` when the caller has them."""
        if bandwidth_s is None:
            bandwidth_s = self.bandwidth_time(times)
        shared = self.shared_time(bandwidth_s, times)
        # configured rings that take turns on an uplink's ports: their runs one after another
        return max(shared, self.ring_turns_s()) if self.ring_users else shared

    def shared_time(self, bandwidth_s: float, times: np.ndarray | None = None) -> float:
        """:meth:`time` without the configured rings' turns: the busiest link (or the pipelined
        chain), the latency that adds to it, the controllers' lead and the phases."""
        return (max(bandwidth_s, self.pipelined_s) + self.latency_s + self.controller_lead_s(times)
                + self.overhead_s)

    def busiest_link(self, times: np.ndarray | None = None) -> tuple[str, float]:
        """(name, bytes) of the link with the longest time; ``times``: :meth:`link_times` when
        the caller has them."""
        if times is None:
            times = self.link_times()
        link = int(times.argmax())
        return self.net.link_name(link), float(self.loads[link])
