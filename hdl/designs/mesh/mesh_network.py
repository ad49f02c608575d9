"""The routers and wires of a 2D mesh (docs/mesh_rtl.md): :func:`add_mesh` (shared by the mesh
fabric ``fred_mesh_fabric`` and :class:`MeshNetwork`) and :class:`MeshNetwork`, the mesh with
every NPU's local port as a link of its own (what a latency-load curve drives)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, LOCAL, MESH_VCS, NORTH, SOUTH, WEST, MeshFabricSpec
from hdl.designs.fabric.cut import link_cut_fields
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .mesh_router import MeshRouter
from .mesh_wire import MeshWire

__all__ = ["add_mesh", "mesh_cut_fields", "MeshNetwork"]


def mesh_cut_fields(partition, part: int) -> list[tuple[str, str, int]]:
    """The cut fields of part ``part`` of a cut mesh (``partition``, a
    :class:`~hdl.contracts.mesh_partition.MeshPartition`), LSB first, as ``(bus, name, width)``:
    for every cut wire (``MeshPartition.cut_wires`` order) the sending part drives
    ``<wire>_valid`` and ``<wire>_data`` and reads ``<wire>_credit``, the receiving part the
    reverse (what :func:`add_mesh`'s ``cut`` carries): part 0's ``cut_out`` is, field for field,
    part 1's ``cut_in``."""
    cuts = [(w.name, w.source_part, w.sink_part) for w in partition.cut_wires()]
    return link_cut_fields(cuts, part, [("valid", 1), ("data", partition.spec.flit.width)], [("credit", MESH_VCS)])


def add_mesh(m: Module, spec: MeshFabricSpec, *, partition=None, part: int | None = None,
             cut: dict | None = None) -> tuple[dict, list]:
    """Add ``spec.rows`` x ``spec.cols`` :class:`MeshRouter` s (``router_X_Y``, at the router
    coordinates of ``spec.position``) to ``m``, and a :class:`MeshWire` each way between every
    pair of neighbours (``spec.link_latency`` cycles; the routers' neighbour outputs at
    ``spec.link_rate``). Returns ``({(x, y): router}, [error signals])``: each router's
    ``overflow`` and ``credit_error``. Local ports are left to the caller; edge routers'
    outward ports are unconnected (dimension-order routes between NPUs never leave the mesh).

    One part of a cut mesh (``partition``, a :class:`~hdl.contracts.mesh_partition.MeshPartition`,
    and ``part``): only the part's routers; a wire to another part's router keeps its flit
    registers (the sending side) or its credit registers (the receiving side), and ``cut``
    (``{field: signal}``, the fields of ``MeshFabricTop.cut_fields``) carries the rest:
    ``<wire>_valid`` / ``<wire>_data`` (the flit registers' outputs, or what drives this
    router's input) and ``<wire>_credit`` (the credit registers' output, or what drives this
    router's credit input)."""
    def mine(position) -> bool:
        return partition is None or partition.part_of(position) == part

    routers, errors = {}, []
    for rank in range(spec.npus):
        x, y = spec.position(rank)
        if not mine((x, y)):
            continue
        router = m.submodules[f"router_{x}_{y}"] = MeshRouter(
            flit=spec.flit, depth=spec.depth, link_rate=spec.link_rate)
        routers[(x, y)] = router
        m.d.comb += [router.pos_x.eq(x), router.pos_y.eq(y)]
        errors += [router.overflow, router.credit_error]
    step = {EAST: (1, 0), SOUTH: (0, 1)}
    back = {EAST: WEST, SOUTH: NORTH}
    positions = [spec.position(rank) for rank in range(spec.npus)]
    for x, y in positions:
        for out, (dx, dy) in step.items():
            if (x + dx, y + dy) not in positions:
                continue
            # named by the sending router's coordinates and port, so the Verilog is the same
            # on every run
            for (ax, ay), pa, (bx, by), pb in (((x, y), out, (x + dx, y + dy), back[out]),
                                               ((x + dx, y + dy), back[out], (x, y), out)):
                sends, receives = mine((ax, ay)), mine((bx, by))
                if not (sends or receives):
                    continue
                name = f"wire_{ax}_{ay}_{pa}"
                wire = m.submodules[name] = MeshWire(flit=spec.flit, latency=spec.link_latency)
                if sends and receives:
                    a, b = routers[(ax, ay)], routers[(bx, by)]
                    m.d.comb += [wire.i.valid.eq(a.o[pa].valid), wire.i.payload.eq(a.o[pa].payload),
                                 b.i[pb].valid.eq(wire.o.valid), b.i[pb].payload.eq(wire.o.payload),
                                 wire.credit_in.eq(b.i_credit[pb]), a.o_credit[pa].eq(wire.credit_out)]
                elif sends:     # the flit registers here, the credit registers in the other part
                    a = routers[(ax, ay)]
                    m.d.comb += [wire.i.valid.eq(a.o[pa].valid), wire.i.payload.eq(a.o[pa].payload),
                                 a.o_credit[pa].eq(cut[f"{name}_credit"]),
                                 cut[f"{name}_valid"].eq(wire.o.valid), cut[f"{name}_data"].eq(wire.o.payload)]
                else:           # the credit registers here, the flit registers in the other part
                    b = routers[(bx, by)]
                    m.d.comb += [b.i[pb].valid.eq(cut[f"{name}_valid"]), b.i[pb].payload.eq(cut[f"{name}_data"]),
                                 wire.credit_in.eq(b.i_credit[pb]), cut[f"{name}_credit"].eq(wire.credit_out)]
    return routers, errors


class MeshNetwork(wiring.Component):
    """The mesh of :func:`add_mesh` with NPU ``rank``'s local router port as members indexed by
    rank (the router's own local-port protocol, docs/mesh_rtl.md):

    * ``i[rank]`` (In link: valid, payload of ``spec.flit``) and ``i_credit[rank]`` (Out(2):
      bit v pulses when the router frees a VC v slot of its local input; ``spec.depth`` per VC
      to start with): what the NPU injects.
    * ``o[rank]`` (Out link) and ``o_credit[rank]`` (In(2)): what the router ejects; the NPU
      returns one credit per flit it takes (the router starts with ``spec.depth`` per VC).
    * ``protocol_error``: sticky, some router's ``overflow`` or ``credit_error``.

    Latency: each router 2 cycles, each wire ``spec.link_latency``. For simulation (a
    latency-load curve, studies/mesh_load_curve.py) and use as a building block; the NPU
    engines of ``fred_mesh_fabric`` are not in it.
    """

    def __new__(cls, spec: MeshFabricSpec):
        # checked before the component exists (no "created but never used" warning on error)
        if not isinstance(spec, MeshFabricSpec):
            raise FredError(f"MeshNetwork needs a MeshFabricSpec, got {spec!r}")
        return super().__new__(cls)

    def __init__(self, spec: MeshFabricSpec):
        self.spec = spec
        shape = struct_layout(spec.flit.fields)
        super().__init__({
            "i": In(link_signature(shape)).array(spec.npus),
            "i_credit": Out(MESH_VCS).array(spec.npus),
            "o": Out(link_signature(shape)).array(spec.npus),
            "o_credit": In(MESH_VCS).array(spec.npus),
            "protocol_error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        routers, errors = add_mesh(m, self.spec)
        for rank in range(self.spec.npus):
            router = routers[self.spec.position(rank)]
            m.d.comb += [router.i[LOCAL].valid.eq(self.i[rank].valid),
                         router.i[LOCAL].payload.eq(self.i[rank].payload),
                         self.i_credit[rank].eq(router.i_credit[LOCAL]),
                         self.o[rank].valid.eq(router.o[LOCAL].valid),
                         self.o[rank].payload.eq(router.o[LOCAL].payload),
                         router.o_credit[LOCAL].eq(self.o_credit[rank])]
        with m.If(sum(errors) != 0):
            m.d.sync += self.protocol_error.eq(1)
        return m
