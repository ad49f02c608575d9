"""The FRED wafer fabric: a two-level "almost fat-tree" of FRED switches.

NPU rank ``r`` attaches to L1 switch ``r // npus_per_l1`` by one link per direction of the
NPU's network bandwidth (3 TBps send, 3 TBps receive). Every L1 connects to the single L2
by one logical link per direction of the variant's ``l1_l2_gbps`` (Fred-A/B 1.5 TBps, the
mesh's bisection; Fred-C/D 12 TBps). I/O controllers attach to the L1s round-robin
(controller k on L1 ``k % L1s``) by links of ``io_gbps``. With a single L1 there is no L2.

Switch timing comes from :class:`sysmodel.switch_timing.SwitchTiming`, one per level
(``platform.switch_at("l1")``, ``("l2")``: the chiplet each level is built from, see
docs/sysmodel.md "Chiplets"): each switch a path passes through adds its own level's
first-flit latency, every link touching a switch runs at ``throughput_fraction`` of its rate
(an L1-L2 link: the lower of the two levels'; 1.0 = link rate, FRED needs no internal
speed-up), and transfers move whole flits of ``flit_bytes`` (each chunk rounded up).
A logical switch is built from several Fred_3 chiplets; concurrent collectives are assumed
to use disjoint chiplet ports, so only one collective's own flows are routed together
(:mod:`sysmodel.switch_routing`).
"""

from __future__ import annotations

import math

from hdl.contracts.errors import FredError
from sysmodel.network import Network
from sysmodel.platform import GB, Platform
from sysmodel.switch_routing import MIDDLE_SUBNETWORKS

__all__ = ["FredTreeNetwork"]


class FredTreeNetwork(Network):
    """FRED fabric of one variant. Members: ``variant``, ``in_switch``, ``l1_nodes``,
    ``l2_node`` (None with one L1), ``npus_per_l1``, ``io_l1[k]`` (L1 index of controller k),
    ``uplink_ports`` (physical switch ports of one L1-L2 link)."""

    kind = "fred"

    def __init__(self, platform: Platform, fabric: str):
        variant = platform.variant(fabric)
        super().__init__(fabric, platform.npus)
        self.platform = platform
        self.variant = variant
        self.in_switch = variant.in_switch
        # in-switch flows move 1 / in_switch_efficiency wire bytes per payload byte
        self.in_switch_efficiency = variant.in_switch_efficiency
        self.npus_per_l1 = platform.npus_per_l1
        l1, l2 = platform.switch_at("l1"), platform.switch_at("l2")
        self.flit_bytes = l1.flit_bytes   # the platform checks that both levels agree
        frac = l1.throughput_fraction * platform.link_efficiency
        # an L1-L2 link runs at the rate of the slower of the two switch ports it joins
        frac_up = min(l1.throughput_fraction, l2.throughput_fraction) * platform.link_efficiency
        lat = platform.link_latency_s
        # a packet switch (header-selected phases) adds its input VC buffer to every traversal
        header = platform.phase_select == "header"
        l1_lat, l2_lat = ((l1.packet_latency_s, l2.packet_latency_s) if header
                          else (l1.latency_s, l2.latency_s))
        self.l1_nodes = [self.add_node(f"l1.{j}", "switch", l1_lat)
                         for j in range(platform.l1_count)]
        self.l2_node = (self.add_node("l2", "switch", l2_lat)
                        if platform.l1_count > 1 else None)
        self._timing = {n: l1 for n in self.l1_nodes}
        if self.l2_node is not None:
            self._timing[self.l2_node] = l2
        for rank in range(platform.npus):
            self.add_duplex(rank, self.l1_nodes[self.l1_of(rank)],
                            platform.npu_send_gbps * GB * frac,
                            platform.npu_recv_gbps * GB * frac, lat, "npu")
        # an L1-L2 link of B is B / (an NPU link's rate) parallel switch ports, at least one
        # (Fred-A/B: 1.5 / 3 TBps -> 1 port at half rate; Fred-C/D: 12 / 3 -> 4 ports); a
        # port carries one flow per phase, so concurrent in-switch collectives crossing the
        # link take turns beyond that many (sysmodel.network.Traffic.sequential_phases)
        self.uplink_ports = max(1, math.ceil(variant.l1_l2_gbps / platform.npu_send_gbps - 1e-9))
        if self.l2_node is not None:
            up = variant.l1_l2_gbps * GB * frac_up
            for l1 in self.l1_nodes:
                self.add_duplex(l1, self.l2_node, up, up, platform.l1_l2_latency_s, "l1-l2")
        self.io_l1 = []
        io_bw = platform.io_gbps * GB * frac
        for k in range(platform.io_controllers):
            node = self.add_node(f"io{k}", "io")
            j = k % platform.l1_count
            self.io_l1.append(j)
            self.add_duplex(node, self.l1_nodes[j], io_bw, io_bw, lat, "io")
        self.finalize()

    def switch_timing(self, node: int):
        """The :class:`~sysmodel.switch_timing.SwitchTiming` of switch ``node`` (its level's)."""
        try:
            return self._timing[node]
        except KeyError:
            raise ValueError(f"node {node} is not a switch of {self.name}") from None

    def routing_switch(self, node: int, neighbours: int) -> tuple[int, int]:
        """(P, m) of the Fred_m(P) the compiler routes ``node``'s flows on: its level's chiplet
        (every chiplet of a logical switch reaches all ``neighbours``; a level with more
        neighbours than its chiplet has ports is an error), or, on a platform that names no
        chiplets, a Fred_3 of the next power of two >= ``neighbours``."""
        level = "l2" if node == self.l2_node else "l1"
        chiplet = self.platform.chiplets.get(level)
        if chiplet is None:
            return _power_of_two(max(neighbours, 2)), MIDDLE_SUBNETWORKS
        if neighbours > chiplet["ports"]:
            raise FredError(f"the {level.upper()} switch of {self.platform.name} has {neighbours} "
                            f"neighbours but its chiplet Fred_{chiplet['middle']}({chiplet['ports']}) "
                            f"has {chiplet['ports']} ports ([fred.chiplets] {level})")
        return chiplet["ports"], chiplet["middle"]

    def l1_of(self, rank: int) -> int:
        return rank // self.npus_per_l1

    def _ancestors(self, node: int) -> list[int]:
        """``node`` and the switches above it, bottom up."""
        chain = [node]
        if self.node_kind[node] != "switch":
            j = self.io_l1[self.io_nodes.index(node)] if self.node_kind[node] == "io" else self.l1_of(node)
            chain.append(self.l1_nodes[j])
        if chain[-1] != self.l2_node and self.l2_node is not None:
            chain.append(self.l2_node)
        return chain

    def _route(self, src: int, dst: int, order: str) -> list[int]:
        up, down = self._ancestors(src), self._ancestors(dst)
        common = next(n for n in up if n in down)  # lowest common ancestor
        return up[:up.index(common) + 1] + list(reversed(down[:down.index(common)]))


def _power_of_two(n: int) -> int:
    p = 2
    while p < n:
        p *= 2
    return p
