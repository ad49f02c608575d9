"""The RTL mesh fabric (hdl/designs/mesh/mesh_fabric_top.py) in Amaranth's simulator on small
meshes: the hierarchical 2D all-reduce (two chunks, three stages) and the two-way ring, every
int32 flit checked by the engines; a program with a wrong expected sum is caught (the check
can fail). The 5 x 4 fabric runs under Verilator (tests/cocotb_tests/test_mesh_fabric_cocotb.py)."""

import pytest

from hdl.compiler.mesh_program import mesh_program
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MeshFabricSpec
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_UNIT
from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ, PORT_REG_BASE, MeshFabricTop


def run(run_fabric_top, spec, program, *, max_cycles=5000):
    async def read_back(read):
        return {"global": {name: await read(GLOBAL_UNIT, i) for i, name in enumerate(MESH_GLOBAL_READ)},
                "engines": [{name: await read(u, i) for i, name in enumerate(ENGINE_READ)}
                            for u in range(len(program.engines))]}

    return run_fabric_top(MeshFabricTop(spec), program.writes(spec, PORT_REG_BASE), read_back,
                          max_cycles=max_cycles)


def _check_clean(out, program):
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    for got, want in zip(out["engines"], program.engines):
        assert (got["sent"], got["received"]) == (want["send_count"], want["recv_count"])
        assert got["errors"] == 0 and got["extra"] == 0


@pytest.mark.parametrize("rows, cols, size, algorithm", [(2, 2, 8, "hierarchical-2d"), (3, 3, 18, "ring")])
def test_all_reduce_is_exact_and_complete(rows, cols, size, algorithm, run_fabric_top):
    spec = MeshFabricSpec(rows=rows, cols=cols, eject_depth=32, engine_buffer=32)
    program = mesh_program(spec, [list(range(spec.npus))], size, algorithm=algorithm)
    out = run(run_fabric_top, spec, program)
    _check_clean(out, program)
    assert out["global"]["cycles"] > 0


def test_a_wrong_expected_sum_is_reported(run_fabric_top):
    spec = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32)
    program = mesh_program(spec, [list(range(4))], 8)
    program.engines[3]["stages"][-1]["wr"] ^= 2       # engine 3 expects another sum at the end
    out = run(run_fabric_top, spec, program)
    assert out["engines"][3]["errors"] > 0
    assert all(e["errors"] == 0 for n, e in enumerate(out["engines"]) if n != 3)


def test_multicast_chains_deliver_the_roots_data_to_every_destination(run_fabric_top):
    """Two chains at once (each group's first rank is the root): 0 -> 2 -> 5 (snake order)
    and 1 -> 3; each destination checks every flit against the root's data, forwarders pass
    it on."""
    spec = MeshFabricSpec(rows=2, cols=3, eject_depth=32, engine_buffer=32)
    program = mesh_program(spec, [[0, 2, 5], [1, 3]], 12, algorithm="chain")
    assert [program.engines[2 * r]["dest"][0] for r in (0, 2, 5, 1, 3)] == [2, 5, None, 3, None]
    out = run(run_fabric_top, spec, program)
    _check_clean(out, program)
    assert [out["engines"][2 * r]["received"] for r in (2, 5, 3, 4)] == [12, 12, 12, 0]


def test_fp16_two_way_ring_matches_the_golden_order_bit_for_bit(run_fabric_top):
    """fp16 (two lanes per word) on a 2 x 2 two-way ring: every engine's hash of what it
    received equals the golden model's (hdl.compiler.fabric_golden, in the ring's order of
    additions); other data (another seed) gives other hashes, so the comparison can fail."""
    from hdl.compiler.mesh_program import expected_hashes
    spec = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32, dtype="fp16")
    program = mesh_program(spec, [list(range(4))], 8, algorithm="ring")
    out = run(run_fabric_top, spec, program)
    _check_clean(out, program)
    want = expected_hashes(spec, program)
    got = [e["hash"] for e in out["engines"]]
    assert got == want and len(set(want)) > 2
    assert expected_hashes(spec, mesh_program(spec, [list(range(4))], 8, algorithm="ring", seed=1)) != want


def test_fp16_three_stage_2d_all_reduce_matches_the_golden_order_bit_for_bit(run_fabric_top):
    """fp16 hierarchical 2D all-reduce on 2 x 2 (rows, columns, rows for chunk 0; columns first
    for chunk 1): three stages per engine, every engine's hash equal to the golden model's
    (hdl.compiler.fabric_golden.endpoint_streams, stage by stage); another seed gives other hashes."""
    from hdl.compiler.mesh_program import expected_hashes
    spec = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32, dtype="fp16")
    program = mesh_program(spec, [list(range(4))], 8, algorithm="hierarchical-2d")
    assert {len(e["stages"]) for e in program.engines} == {3}
    out = run(run_fabric_top, spec, program)
    _check_clean(out, program)
    want = expected_hashes(spec, program)
    assert [e["hash"] for e in out["engines"]] == want and len(set(want)) > 2
    assert expected_hashes(spec, mesh_program(spec, [list(range(4))], 8, algorithm="hierarchical-2d", seed=1)) != want


def test_a_neighbour_hop_takes_eight_cycles_and_the_models_platform_says_so(run_fabric_top):
    """One flit down a chain 0 -> 1 -> 3 (east, then south on a 2 x 2 mesh): each hop is the source's
    router (2), the wire (1), the destination's router (2), its engine port's ejection (2) and
    the engine's forward (1) = 8 cycles, 16 for the two. The model's platform of the RTL mesh
    (sysmodel.mesh_rtl_model.mesh_platform) charges a link the wire and one router (3) and a
    forwarding member the rest (hdl.contracts.mesh.npu_receive_cycles + the engine's 1 = 5):
    its chain is the flit at 1/4 flit per cycle (4), the first link (3) and one more hop of
    max(3 + 5, 4) = 8: 15, one cycle under (the last member's own ejection is not charged)."""
    from dataclasses import replace

    from hdl.contracts.mesh import npu_receive_cycles
    from sysmodel.mesh_rtl_model import mesh_model_cycles, mesh_platform
    spec = MeshFabricSpec(rows=2, cols=2, eject_depth=32, engine_buffer=32)
    program = mesh_program(spec, [[0, 1, 3]], 1, algorithm="chain")
    out = run(run_fabric_top, spec, program)
    _check_clean(out, program)
    assert out["global"]["cycles"] == 16
    assert npu_receive_cycles() == 4
    # the paper-sized platform, resized to this mesh (its NPU count with it)
    platform = replace(mesh_platform(MeshFabricSpec()), npus=4, mesh_rows=2, mesh_cols=2)
    est = mesh_model_cycles(spec, [[0, 1, 3]], 1, op="multicast", algorithm="chain", platform=platform)
    assert est.cycles == pytest.approx(15)
