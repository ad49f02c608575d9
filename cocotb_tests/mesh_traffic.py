"""Random traffic for one mesh router, drawn from mesh-wide patterns (pure Python).

The router under test sits at ``at`` inside a virtual ``cols`` x ``rows`` mesh. A pattern picks,
for a random source node, a destination (:func:`pattern_destination`) and a virtual channel; the
packet's dimension-order route (``hdl.contracts.mesh.route_hops``, the reference of the RTL's
route compute) says whether it crosses the router under test, by which input port it enters
and which output it must leave by. Only those packets are kept, so every input sees the turn
mix the pattern really produces there (a packet entering from the west under X-Y never turns
back west, one entering from the north under X-Y only goes on south or ejects).

Patterns: ``uniform`` (any other node), ``transpose`` ((x, y) -> (y, x), square meshes),
``hotspot`` (half the packets to :data:`HOTSPOT`, on the east edge where the mesh's I/O
controllers sit; the rest uniform).

A flit's data word identifies it: source node index (8 bits, top), per-(source, destination,
VC) sequence number, flit index in the packet, and random low bits, so a corrupted,
duplicated or misrouted flit is caught by the scoreboard keyed on (output, source,
destination, VC).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS, VC_ORDERS, MeshFlitFormat, route_hops

__all__ = ["PATTERNS", "MeshPacket", "pattern_destination", "router_traffic", "VIRTUAL_MESH",
           "ROUTER_AT", "HOTSPOT", "data_word", "SEQ_BITS"]

PATTERNS = ("uniform", "transpose", "hotspot")
#: The virtual mesh (cols, rows) around the router under test, its position, the hotspot node.
VIRTUAL_MESH = (5, 5)
ROUTER_AT = (1, 2)
HOTSPOT = (4, 2)
SEQ_BITS = 12
_INDEX_BITS = 6
_RANDOM_BITS = 6


@dataclass(frozen=True)
class MeshPacket:
    """One packet through the router: where it comes from and goes, and its flits' data."""

    src: tuple[int, int]
    dst: tuple[int, int]
    vc: int
    seq: int
    in_port: int
    out_port: int
    data: tuple[int, ...]

    def words(self, flit: MeshFlitFormat) -> list[int]:
        return [flit.pack(data=d, last=n == len(self.data) - 1, vc=self.vc, dest_x=self.dst[0],
                          dest_y=self.dst[1]) for n, d in enumerate(self.data)]


def data_word(flit: MeshFlitFormat, src_index: int, seq: int, index: int, noise: int) -> int:
    """The data of flit ``index`` of packet ``seq`` from node ``src_index`` (see the module doc)."""
    width = 8 + SEQ_BITS + _INDEX_BITS + _RANDOM_BITS
    if flit.data_width < width:
        raise FredError(f"mesh traffic needs data_width >= {width}, got {flit.data_width}")
    word = (((src_index << SEQ_BITS | seq % (1 << SEQ_BITS)) << _INDEX_BITS | index)
            << _RANDOM_BITS | noise % (1 << _RANDOM_BITS))
    return word << (flit.data_width - width)


def pattern_destination(pattern: str, src: tuple[int, int], rng: random.Random,
                        mesh: tuple[int, int] = VIRTUAL_MESH) -> tuple[int, int] | None:
    """The destination of a packet from ``src`` under ``pattern``; None when the pattern sends
    nothing from ``src`` (transpose on the diagonal)."""
    cols, rows = mesh
    nodes = [(x, y) for y in range(rows) for x in range(cols) if (x, y) != src]
    if pattern == "uniform":
        return rng.choice(nodes)
    if pattern == "transpose":
        if cols != rows:
            raise FredError(f"transpose needs a square mesh, got {cols} x {rows}")
        dst = (src[1], src[0])
        return None if dst == src else dst
    if pattern == "hotspot":
        if rng.random() < 0.5 and src != HOTSPOT:
            return HOTSPOT
        return rng.choice(nodes)
    raise FredError(f"unknown traffic pattern {pattern!r}; expected one of {', '.join(PATTERNS)}")


def router_traffic(pattern: str, *, packets_per_port: int, rng: random.Random, flit: MeshFlitFormat,
                   at: tuple[int, int] = ROUTER_AT, mesh: tuple[int, int] = VIRTUAL_MESH,
                   max_draws: int = 200_000) -> dict[int, list[MeshPacket]]:
    """``{input port: [packets]}``, up to ``packets_per_port`` per input: random sources and
    VCs, destinations by ``pattern``, kept when their route crosses ``at``; lengths 1 ..
    ``flit.packet_flits``. A port the pattern never feeds (transpose) stays empty."""
    cols, rows = mesh
    per_port: dict[int, list[MeshPacket]] = {p: [] for p in range(5)}
    seq: dict[tuple, int] = {}
    for _ in range(max_draws):
        if all(len(v) >= packets_per_port for v in per_port.values()):
            break
        src = (rng.randrange(cols), rng.randrange(rows))
        dst = pattern_destination(pattern, src, rng, mesh)
        if dst is None:
            continue
        vc = rng.randrange(MESH_VCS)
        crossing = [(i, o) for node, i, o in route_hops(src, dst, VC_ORDERS[vc]) if node == at]
        if not crossing or len(per_port[crossing[0][0]]) >= packets_per_port:
            continue
        in_port, out_port = crossing[0]
        key = (src, dst, vc)
        n = seq.get(key, 0)
        seq[key] = n + 1
        src_index = src[1] * cols + src[0]
        length = rng.randint(1, flit.packet_flits)
        data = tuple(data_word(flit, src_index, n, k, rng.getrandbits(8)) for k in range(length))
        per_port[in_port].append(MeshPacket(src, dst, vc, n, in_port, out_port, data))
    return per_port
