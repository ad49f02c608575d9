"""The model's weight streaming on the mesh (sysmodel.mesh_rtl_model.mesh_io_model_cycles)
agrees with the RTL's program on where the controllers are and what the busiest link carries."""

import pytest

from hdl.compiler.mesh_io_program import io_load_program
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from sysmodel.collectives import build_network
from sysmodel.mesh_rtl_model import mesh_io_model_cycles, mesh_io_platform


def test_the_model_attaches_the_controllers_where_the_rtl_does():
    spec = MeshIoSpec()
    net = build_network(mesh_io_platform(spec), "mesh")
    assert net.io_attach == [spec.attach_rank(k) for k in range(spec.controllers)]


@pytest.mark.parametrize("mode", IO_MODES)
def test_busiest_link_is_the_programs_stripes(mode):
    spec = MeshIoSpec()
    est = mesh_io_model_cycles(spec, 10, mode=mode)
    program = io_load_program(spec, 10, mode)
    assert est.algorithm == mode
    assert est.busiest_link_flits == pytest.approx(program.hottest * 10)
    # 1/4 flit per cycle on a mesh link
    assert est.bandwidth_cycles == pytest.approx(4 * program.hottest * 10)


def test_the_model_picks_the_split_trees():
    assert mesh_io_model_cycles(MeshIoSpec(), 10).algorithm == "tree-split"


@pytest.mark.parametrize("mode", IO_MODES)
def test_reduce_out_loads_the_reversed_trees_as_much_as_streaming(mode):
    from hdl.compiler.mesh_io_program import io_store_program
    spec = MeshIoSpec()
    est = mesh_io_model_cycles(spec, 10, mode=mode, op="io-store")
    assert est.algorithm == mode
    assert est.busiest_link_flits == pytest.approx(io_store_program(spec, 10, mode, max_stripe=256).hottest * 10)


def test_an_unknown_io_op_is_refused():
    from hdl.contracts.errors import FredError
    with pytest.raises(FredError, match="io-load, io-store, io-write and io-read"):
        mesh_io_model_cycles(MeshIoSpec(), 10, op="io-broadcast")
    with pytest.raises(FredError, match="runs unicasts, not trees"):
        mesh_io_model_cycles(MeshIoSpec(), 10, op="io-write", mode="tree-xy")


@pytest.mark.parametrize("op", ["io-write", "io-read"])
def test_a_spill_is_bound_by_the_controllers_links(op):
    """Every NPU's own stripe to (from) every controller: each controller's link carries 20
    stripes at 16/375 flit per cycle, 10-flit stripes 200 flits: 4,687.5 cycles; the latency
    is the longest unicast's, 8 links of wire + router (3 cycles each): 24 (a corner NPU to
    the controller beside the opposite corner: 3 + 4 mesh links and the controller's link).
    The controllers' links are the busiest, so their time already counts every flit's whole
    23.4 cycles: no paced-flit term (``Traffic.controller_lead_s`` 0)."""
    est = mesh_io_model_cycles(MeshIoSpec(), 10, op=op)
    assert est.algorithm == "unicast"
    assert est.busiest_link_flits == pytest.approx(200)
    assert est.bandwidth_cycles == pytest.approx(200 * 375 / 16)
    assert est.cycles - est.bandwidth_cycles == pytest.approx(24)


def test_reduce_out_charges_every_reducing_member_on_the_deepest_path():
    """5 x 4, 3-flit stripes, split trees: the busiest link carries 8.5 stripes (25.5 flits at
    1/4 flit per cycle: 102 cycles). The deepest leaf of a corner controller's tree is 7 mesh
    links away; with the controller's link that is 8 links of wire + router (3 cycles each): 24,
    io-load's latency. io-store adds each of the 7 NPUs that receive, add and send on
    (``reduce_member_cycles``: 4): 24 + 28 = 52. Both add the controllers' paced flit, 375/16
    cycles at 128 GBps (the busiest link is a mesh link, so a load's first flit reaches it that
    late and a store's last flit is stored that much after it: ``Traffic.controller_lead_s``):
    io-load 102 + 24 + 23.4375 = 149.4375, io-store 102 + 52 + 23.4375 = 177.4375."""
    from hdl.contracts.mesh_io import reduce_member_cycles
    load = mesh_io_model_cycles(MeshIoSpec(), 3, mode="tree-split")
    store = mesh_io_model_cycles(MeshIoSpec(), 3, mode="tree-split", op="io-store")
    assert reduce_member_cycles() == 4
    assert store.bandwidth_cycles == pytest.approx(load.bandwidth_cycles) == pytest.approx(102)
    assert load.cycles - load.bandwidth_cycles == pytest.approx(24 + 375 / 16)
    assert store.cycles - store.bandwidth_cycles == pytest.approx(24 + 7 * 4 + 375 / 16)
    assert store.cycles == pytest.approx(177.4375)


def test_the_papers_mesh_reduces_out_with_no_forwarding_latency():
    """The paper gives no NPU forwarding latency (``npu.forward_latency_ns`` 0): on its platform
    io-store's latency stays io-load's, so the evaluation's mesh figures do not move."""
    from sysmodel.collectives import Collective, evaluate
    from sysmodel.platform import default_platform
    platform = default_platform()
    assert platform.forward_latency_ns == 0
    group = tuple(range(platform.npus))
    load, store = (evaluate(platform, "mesh", [Collective(op, group=group, size=1 << 20)])
                   for op in ("io-load", "io-store"))
    assert store.latency_s == pytest.approx(load.latency_s)


def test_the_mesh_with_controllers_times_all_reduces_with_the_engines_and_reduce_out_with_the_reducers():
    """An iteration on the mesh with controllers (weight streaming) runs all-reduces on the
    NPUs' engines and io-store on their reducers: one platform, two latencies. An NPU forwards
    an all-reduce's flit in ``npu_receive_cycles() + engine_forward_cycles()`` = 5 cycles and
    reduces a store flit in ``reduce_member_cycles()`` = 4 (the test above pins the 52 cycles
    io-store's latency makes of it); a ring all-reduce is timed as on the mesh without
    controllers, to the cycle."""
    from hdl.contracts.fabric import engine_forward_cycles
    from hdl.contracts.mesh import npu_receive_cycles
    from hdl.contracts.mesh_io import reduce_member_cycles
    from sysmodel.mesh_rtl_model import mesh_model_cycles, mesh_platform
    spec = MeshIoSpec()
    with_io, without = mesh_io_platform(spec), mesh_platform(spec.mesh)
    cycle_ns = without.switch_at("l1").cycle_s * 1e9
    assert with_io.forward_latency_ns == without.forward_latency_ns == pytest.approx(5 * cycle_ns)
    assert npu_receive_cycles() + engine_forward_cycles("int32") == 5 and reduce_member_cycles() == 4
    assert with_io.reduce_forward_latency_ns == pytest.approx(4 * cycle_ns)
    assert without.reduce_forward_latency_ns is None
    groups = [list(range(4 * j, 4 * j + 4)) for j in range(5)]
    for algorithm in ("ring", None):
        a = mesh_model_cycles(spec.mesh, groups, 40, platform=with_io, algorithm=algorithm)
        b = mesh_model_cycles(spec.mesh, groups, 40, platform=without, algorithm=algorithm)
        assert (a.cycles, a.algorithm) == (pytest.approx(b.cycles), b.algorithm)


@pytest.mark.parametrize("op", ["io-load", "io-store", "io-write", "io-read"])
def test_a_stripe_of_part_of_a_flit_moves_as_a_whole_flit_on_the_rtl_mesh(op):
    """On the RTL mesh's platform (``mesh_flit_bytes``) every controller's stripe is whole flits,
    as the RTL's I/O request cuts it (hdl.contracts.trace_program.IoRequest: ceil(ceil(bytes /
    flit) / controllers) flits): a quarter of a flit per controller costs one flit per
    controller, and 1.25 flits two; on the paper's byte-granular mesh a quarter of a flit costs
    less than a whole one (docs/fabric_iteration.md, "Checkpoint spills in the iteration")."""
    from sysmodel.collectives import Collective, evaluate
    from sysmodel.platform import default_platform
    spec = MeshIoSpec()
    platform = mesh_io_platform(spec)
    flit, n = platform.mesh_flit_bytes, spec.controllers
    assert flit > 0

    def time(p, flits_per_controller):
        return evaluate(p, "mesh", [Collective(op, tuple(range(20)), flits_per_controller * flit * n)]).time_s

    assert time(platform, 0.25) == time(platform, 1.0) < time(platform, 1.25) == time(platform, 2.0)
    paper = default_platform()
    assert paper.mesh_flit_bytes == 0
    assert time(paper, 0.25) < time(paper, 1.0)
