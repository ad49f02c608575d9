"""The mesh fabric on the lock-step simulator (docs/fabric_rtl.md, "Simulation speed"): the
mesh cut between two columns (``hdl/contracts/mesh_partition.py``), each half Verilated, run
one per core by ``eda/fabric/lockstep.cpp``, against the one-model cocotb bench: the same
cycles, every flit checked, under sink backpressure, for each of the mesh's algorithms (flits
cross the cut both ways; the rings and the 2D all-reduce's rows and columns use both cut
directions). Two Verilator builds of a 2 x 2 mesh: ``-m full``."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MeshFabricSpec

from cocotb_tests.fabric.mesh_run import run_mesh_fabric

SMALL = MeshFabricSpec(rows=2, cols=2)


@pytest.mark.full
@pytest.mark.cocotb
@pytest.mark.parametrize("algorithm, size", [("hierarchical-2d", 96), ("ring", 96), ("chain", 64)])
def test_mesh_lockstep_counts_the_same_cycles_as_the_one_model_bench(algorithm, size):
    runs = [run_mesh_fabric(SMALL, [[0, 1, 2, 3]], size, algorithm=algorithm, cflags="-O0",
                            sink_backpressure=0.3, seed=3, simulator=simulator)
            for simulator in ("lockstep", "cocotb")]
    assert runs[0].errors == runs[1].errors == []
    assert "lockstep" in runs[0].build_dir and runs[0].build_dir != runs[1].build_dir
    assert runs[0].cycles == runs[1].cycles


def test_an_unknown_mesh_simulator_is_refused_before_building():
    with pytest.raises(FredError, match="unknown mesh simulator 'verilog'; expected one of cocotb, lockstep"):
        run_mesh_fabric(SMALL, [[0, 1, 2, 3]], 8, simulator="verilog")
