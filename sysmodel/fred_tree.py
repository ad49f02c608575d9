"""The FRED wafer fabric: a two-level "almost fat-tree" of FRED switches.

NPU rank ``r`` attaches to L1 switch ``r // npus_per_l1`` by one link per direction of the
NPU's network bandwidth (3 TBps send, 3 TBps receive). Every L1 connects to the single L2
by one logical link per direction of the variant's ``l1_l2_gbps`` (Fred-A/B 1.5 TBps, the
mesh's bisection; Fred-C/D 12 TBps). I/O controllers attach to the L1s round-robin
(controller k on L1 ``k % L1s``) by links of ``io_gbps``. With a single L1 there is no L2.

Switch timing comes from :class:`sysmodel.switch_timing.SwitchTiming`: each switch a path
passes through adds its first-flit latency, every link touching a switch runs at
``throughput_fraction`` of its rate (1.0 = link rate; FRED needs no internal speed-up), and
transfers move whole flits of ``flit_bytes`` (each chunk rounded up).
A logical switch is built from several Fred_3 chiplets; concurrent collectives are assumed
to use disjoint chiplet ports, so only one collective's own flows are routed together
(:mod:`sysmodel.switch_routing`).
"""

from __future__ import annotations

from sysmodel.network import Network
from sysmodel.platform import GB, Platform

__all__ = ["FredTreeNetwork"]


class FredTreeNetwork(Network):
    """FRED fabric of one variant. Members: ``variant``, ``in_switch``, ``l1_nodes``,
    ``l2_node`` (None with one L1), ``npus_per_l1``, ``io_l1[k]`` (L1 index of controller k)."""

    kind = "fred"

    def __init__(self, platform: Platform, fabric: str):
        variant = platform.variant(fabric)
        super().__init__(fabric, platform.npus)
        self.platform = platform
        self.variant = variant
        self.in_switch = variant.in_switch
        self.npus_per_l1 = platform.npus_per_l1
        sw = platform.switch
        self.flit_bytes = sw.flit_bytes
        frac = sw.throughput_fraction * platform.link_efficiency
        lat = platform.link_latency_s
        self.l1_nodes = [self.add_node(f"l1.{j}", "switch", sw.latency_s)
                         for j in range(platform.l1_count)]
        self.l2_node = (self.add_node("l2", "switch", sw.latency_s)
                        if platform.l1_count > 1 else None)
        for rank in range(platform.npus):
            self.add_duplex(rank, self.l1_nodes[self.l1_of(rank)],
                            platform.npu_send_gbps * GB * frac,
                            platform.npu_recv_gbps * GB * frac, lat, "npu")
        if self.l2_node is not None:
            up = variant.l1_l2_gbps * GB * frac
            for l1 in self.l1_nodes:
                self.add_duplex(l1, self.l2_node, up, up, lat, "l1-l2")
        self.io_l1 = []
        io_bw = platform.io_gbps * GB * frac
        for k in range(platform.io_controllers):
            node = self.add_node(f"io{k}", "io")
            j = k % platform.l1_count
            self.io_l1.append(j)
            self.add_duplex(node, self.l1_nodes[j], io_bw, io_bw, lat, "io")
        self.finalize()

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
