"""The mesh cut in two (hdl/contracts/mesh_partition.py) in Amaranth's simulator: the two parts
``MeshFabricTop(spec, partition=..., part=p)`` wired back to back (each part's ``cut_out`` into
the other's ``cut_in``) run a program cycle for cycle as the whole mesh does. Every cut signal
is a wire register's output, so wiring the parts together is what the lock-step simulator does
between cycles (``eda/fabric/lockstep.cpp``; tests/eda/test_mesh_lockstep.py compares that
simulator with the one-model bench under Verilator, ``-m full``)."""

from hdl.compiler.mesh_program import mesh_program
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_partition import mesh_partition
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_UNIT
from hdl.designs.fabric.joined_parts import JoinedParts
from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ, PORT_REG_BASE, MeshFabricTop


def joined_parts(spec):
    """Both parts of the cut mesh of ``spec`` with the harness ports of one."""
    partition = mesh_partition(spec)
    return JoinedParts([MeshFabricTop(spec, partition=partition, part=p) for p in range(2)])


def test_the_parts_wired_together_run_cycle_for_cycle_as_the_whole_mesh(run_fabric_top):
    # two-way rings over the 2 x 2 mesh cross the cut both ways; sinks refuse 30 % of cycles
    spec = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32)
    program = mesh_program(spec, [list(range(4))], 16, algorithm="ring", sink_backpressure=0.3, seed=2)

    async def read_back(read):
        return {"engines": [{n: await read(u, i) for i, n in enumerate(ENGINE_READ)}
                            for u in range(len(program.engines))],
                "cycles": await read(GLOBAL_UNIT, MESH_GLOBAL_READ.index("cycles"))}

    whole, joined = (run_fabric_top(dut, program.writes(spec, PORT_REG_BASE), read_back, max_cycles=5000)
                     for dut in (MeshFabricTop(spec), joined_parts(spec)))
    assert whole == joined
    assert whole["cycles"] > 0
    assert all(e["received"] == 12 and e["sent"] == 12 and e["errors"] == 0 for e in whole["engines"])
