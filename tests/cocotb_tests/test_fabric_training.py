"""The profile-guided builds of the mesh and the packet fabric runners
(``cocotb_tests.fabric.mesh_run``, ``cocotb_tests.fabric.packet_fabric_sim``): their training
workloads (no build: which checked runs train a build), and under ``-m full`` a PGO build
against a plain one, same run: the same cycles, every flit checked (PGO changes machine code,
never the model; docs/fabric_rtl.md, "Simulation speed")."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.mesh import MeshFabricSpec

from cocotb_tests.fabric import mesh_run
from cocotb_tests.fabric.mesh_run import TRAINING_FLITS, mesh_training, run_mesh_fabric
from cocotb_tests.fabric.packet_fabric_sim import packet_training, run_packet_fabric

SMALL_PACKET = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1)
SMALL_MESH = MeshFabricSpec(rows=2, cols=2)


def test_mesh_training_runs_every_algorithm_the_mesh_runs(monkeypatch):
    assert list(mesh_training(MeshFabricSpec())) == [f"{a} x {TRAINING_FLITS}" for a in
                                                     ("hierarchical-2d", "ring", "chain")]
    # an algorithm the mesh's program generator refuses is not trained
    real = mesh_run.mesh_program

    def refusing(spec, groups, size, *, algorithm, **kwargs):
        if algorithm == "hierarchical-2d":
            raise FredError("refused")
        return real(spec, groups, size, algorithm=algorithm, **kwargs)
    monkeypatch.setattr(mesh_run, "mesh_program", refusing)
    assert list(mesh_training(MeshFabricSpec())) == [f"{a} x {TRAINING_FLITS}" for a in ("ring", "chain")]
    monkeypatch.setattr(mesh_run, "mesh_program", real)
    # each entry runs the whole mesh on the build it is given, and a run with errors fails it
    seen = []

    def fake(spec, groups, size, *, algorithm, prebuilt, simulator):
        seen.append((groups, size, algorithm, prebuilt, simulator))
        return mesh_run.MeshRun(10, ["engine 0: received 1 of 2"] if algorithm == "chain" else [], 1.0, None)
    monkeypatch.setattr(mesh_run, "run_mesh_fabric", fake)
    workload = mesh_training(SMALL_MESH, simulator="lockstep")
    workload[f"ring x {TRAINING_FLITS}"]("built")
    assert seen == [([[0, 1, 2, 3]], TRAINING_FLITS, "ring", "built", "lockstep")]
    with pytest.raises(FredError, match="training run \\(chain\\) failed: engine 0"):
        workload[f"chain x {TRAINING_FLITS}"]("built")


def test_packet_training_runs_the_circuit_fabrics_workload_with_the_builds_routing():
    # in-switch (stored phases): all-reduce, reduce and multicast across the wafer
    assert list(packet_training(fabric_spec("fred-d"))) == [
        "wafer all-reduce x 2000", "wafer reduce x 2000", "wafer multicast x 2000"]
    # an online build trains only on what runs online (rings and chains), never on stored phases
    online = packet_training(fabric_spec("fred-a"), algorithm="ring", online=True)
    assert list(online) == ["wafer all-reduce x 2000"]
    with pytest.raises(FredError, match="no training collective"):
        packet_training(fabric_spec("fred-a"), algorithm="ring", online=False)


@pytest.mark.full
@pytest.mark.cocotb
def test_a_pgo_mesh_build_counts_the_same_cycles_as_the_plain_build():
    runs = [run_mesh_fabric(SMALL_MESH, [[0, 1, 2, 3]], 96, cflags="-O1", pgo=pgo,
                            sink_backpressure=0.3, seed=3) for pgo in (True, False)]
    assert runs[0].build_dir != runs[1].build_dir
    assert runs[0].errors == runs[1].errors == []
    assert runs[0].cycles == runs[1].cycles


@pytest.mark.full
@pytest.mark.cocotb
def test_a_pgo_packet_build_counts_the_same_cycles_as_the_plain_build():
    request = make_request(SMALL_PACKET, op="all-reduce", size_flits=60, group="wafer")
    runs = [run_packet_fabric(SMALL_PACKET, request, cflags="-O1", pgo=pgo, sink_backpressure=0.25, seed=1)
            for pgo in (True, False)]
    assert runs[0].build_dir != runs[1].build_dir
    assert runs[0].errors == runs[1].errors == []
    assert runs[0].cycles == runs[1].cycles and runs[0].flits_checked == runs[1].flits_checked == 4 * 60
