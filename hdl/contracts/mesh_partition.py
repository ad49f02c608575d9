"""How the mesh fabric RTL is cut into two parts that simulate on different cores (the
lock-step simulator, ``eda/fabric/lockstep.py``; docs/fabric_rtl.md, "Simulation speed").

A :class:`MeshPartition` cuts the mesh between two columns: part 0 holds the NPU columns
``0 .. cut_col - 1`` (their routers, engines and everything at their local ports), part 1 the
rest. A :class:`~hdl.designs.mesh.mesh_wire.MeshWire` between the two columns is *cut*: its
flit registers are elaborated in the sending router's part and its credit registers in the
receiving router's, so each signal that crosses (``valid`` / ``data`` forward, the credit
pulses back) is a register's output: it depends only on its own part's state, and two parts
can evaluate a cycle at the same time and swap these signals between cycles with the one
model's result (the circuit fabric's cut at its uplinks, ``hdl.contracts.fabric_partition``,
rests on the same property of its links).
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, WEST, MeshFabricSpec

__all__ = ["MeshCutWire", "MeshPartition", "mesh_partition", "part_problem"]


@dataclass(frozen=True)
class MeshCutWire:
    """One direction of a cut neighbour link: the ``MeshWire`` named ``name`` (as
    ``hdl.designs.mesh.mesh_network.add_mesh`` names it) from router ``source`` (output
    ``source_port``) to router ``sink`` (input ``sink_port``), router coordinates."""

    name: str
    source: tuple[int, int]
    source_port: int
    sink: tuple[int, int]
    sink_port: int
    source_part: int
    sink_part: int


@dataclass(frozen=True)
class MeshPartition:
    """The mesh of ``spec`` cut before NPU column ``cut_col`` (1 .. cols - 1) into two parts."""

    spec: MeshFabricSpec
    cut_col: int
    count: int = 2

    def __post_init__(self):
        cols = self.spec.cols
        if isinstance(self.cut_col, bool) or not isinstance(self.cut_col, int) or not 1 <= self.cut_col < cols:
            raise FredError(f"a {self.spec.rows} x {cols} mesh is cut before a column in 1..{cols - 1}, "
                            f"got {self.cut_col!r}")
        if self.count != 2:
            raise FredError(f"a mesh partition has two parts, got {self.count!r}")

    def part_of(self, position: tuple[int, int]) -> int:
        """The part of the router at ``position`` (router coordinates: column + 1, row + 1)."""
        return int(position[0] - 1 >= self.cut_col)

    def npu_part(self, rank: int) -> int:
        return self.part_of(self.spec.position(rank))

    def cut_wires(self) -> list[MeshCutWire]:
        """The cut wire directions, row by row, east then west (the order of the parts' cut
        buses)."""
        west_x, east_x = self.cut_col, self.cut_col + 1
        out = []
        for y in range(1, self.spec.rows + 1):
            out.append(MeshCutWire(f"wire_{west_x}_{y}_{EAST}", (west_x, y), EAST, (east_x, y), WEST, 0, 1))
            out.append(MeshCutWire(f"wire_{east_x}_{y}_{WEST}", (east_x, y), WEST, (west_x, y), EAST, 1, 0))
        return out


def mesh_partition(spec: MeshFabricSpec) -> MeshPartition:
    """The mesh of ``spec`` cut in the middle of its columns (5 x 4: two columns of ten routers
    and twenty engines each; every router, engine and wire costs the same in every part; a
    mesh has at least two columns, ``MeshFabricSpec``)."""
    return MeshPartition(spec, spec.cols // 2)


def part_problem(top: str, spec: MeshFabricSpec, partition, part) -> str:
    """What is wrong with ``top``'s ``partition`` and ``part`` for a mesh of ``spec`` ("" if
    nothing): both or neither (None: the whole mesh), ``partition`` a :class:`MeshPartition`
    of ``spec``, ``part`` one of its parts."""
    if (partition is None) != (part is None):
        return f"{top}: give both partition and part (one part of a cut mesh) or neither"
    if partition is not None and (not isinstance(partition, MeshPartition) or partition.spec != spec
                                  or isinstance(part, bool) or part not in range(partition.count)):
        where = (f"a partition of {partition.spec.rows} x {partition.spec.cols}"
                 if isinstance(partition, MeshPartition) else repr(partition))
        return (f"{top}: part {part!r} of {where}: not a part of this {spec.rows} x {spec.cols} "
                f"mesh's partition")
    return ""
