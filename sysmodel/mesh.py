"""The 2D-mesh baseline: an R x C mesh of NPUs with dimension-ordered routing.

NPU rank ``r`` sits at row ``r // C``, column ``r % C`` (row-major; consecutive ranks are
neighbours along a row, which is the placement favouring MP). Each neighbour pair is joined
by one link per direction of ``mesh_link_gbps``. I/O controllers attach to the free
boundary ports of the edge NPUs (north side of row 0, east of column C-1, south of row R-1,
west of column 0, in that order), spread evenly when there are fewer controllers than ports.

Routing is X-Y (along the row first, then the column); ``order="yx"`` gives Y-X, used by the
collective algorithms that send two chunks in opposite dimension orders.
"""

from __future__ import annotations

from hdl.contracts.mesh_io import edge_io_ports
from sysmodel.network import Network
from sysmodel.platform import GB, Platform

__all__ = ["MeshNetwork"]


class MeshNetwork(Network):
    """Mesh fabric for ``platform`` (``rows``, ``cols`` members; ``io_attach[k]`` = NPU of
    controller k). Link latency is the platform's; NPU routers add no further latency."""

    kind = "mesh"
    in_switch = False

    def __init__(self, platform: Platform):
        super().__init__("mesh", platform.npus)
        self.platform = platform
        self.rows, self.cols = platform.mesh_rows, platform.mesh_cols
        lat = platform.link_latency_s
        bw = platform.mesh_link_gbps * GB * platform.link_efficiency
        for r in range(self.rows):
            for c in range(self.cols):
                if c + 1 < self.cols:
                    self.add_duplex(self.rank(r, c), self.rank(r, c + 1), bw, bw, lat, "mesh")
                if r + 1 < self.rows:
                    self.add_duplex(self.rank(r, c), self.rank(r + 1, c), bw, bw, lat, "mesh")
        # the placement the RTL uses too (hdl/contracts/mesh_io.py)
        chosen = edge_io_ports(self.rows, self.cols, platform.io_controllers)
        self.io_attach = []
        io_bw = platform.io_gbps * GB * platform.link_efficiency
        for k, (r, c, _) in enumerate(chosen):
            node = self.add_node(f"io{k}", "io")
            self.io_attach.append(self.rank(r, c))
            self.add_duplex(node, self.rank(r, c), io_bw, io_bw, lat, "io")
        self.finalize()

    def controller_flit_bytes(self) -> float:
        """The mesh's flit where the platform gives it one (``mesh_flit_bytes``, the model of
        the RTL mesh); 0 on a byte-granular mesh (the paper's: its link format is not given)."""
        return float(self.platform.mesh_flit_bytes)

    def rank(self, row: int, col: int) -> int:
        return row * self.cols + col

    def position(self, rank: int) -> tuple[int, int]:
        return divmod(rank, self.cols)

    def snake_index(self, rank: int) -> int:
        """Boustrophedon order: rows alternate direction so consecutive indices are neighbours."""
        r, c = self.position(rank)
        return r * self.cols + (c if r % 2 == 0 else self.cols - 1 - c)

    def _route(self, src: int, dst: int, order: str) -> list[int]:
        head, tail = [], []
        if self.node_kind[src] == "io":
            head, src = [src], self.io_attach[self.io_nodes.index(src)]
        if self.node_kind[dst] == "io":
            tail, dst = [dst], self.io_attach[self.io_nodes.index(dst)]
        (r, c), (r2, c2) = self.position(src), self.position(dst)
        nodes = [src]
        steps = ("x", "y") if order == "xy" else ("y", "x")
        for dim in steps:
            if dim == "x":
                while c != c2:
                    c += 1 if c2 > c else -1
                    nodes.append(self.rank(r, c))
            else:
                while r != r2:
                    r += 1 if r2 > r else -1
                    nodes.append(self.rank(r, c))
        return head + nodes + tail
