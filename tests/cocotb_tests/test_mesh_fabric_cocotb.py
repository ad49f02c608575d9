"""The 5 x 4 RTL mesh fabric under Verilator (cocotb_tests/fabric/mesh_run.py): the wafer-wide
hierarchical 2D all-reduce, the MP2-DP5-PP2 DP rings and PP multicast chains, every flit
checked, beside the model's cycles. The build takes minutes (about 10 MB of Verilog): ``-m full`` only; the
fabric's logic is in the default suite on small meshes (tests/hdl/designs/test_mesh_fabric_sim.py)."""

import pytest

from studies.mesh_case import build_mesh_case, run_mesh_case

pytestmark = [pytest.mark.cocotb, pytest.mark.full]


@pytest.mark.parametrize("op, where", [("all-reduce", dict(group="wafer")),
                                       ("all-reduce", dict(strategy="MP2-DP5-PP2", dim="dp")),
                                       ("multicast", dict(strategy="MP2-DP5-PP2", dim="pp"))])
def test_mesh_collective_completes_exactly_and_is_bounded_by_the_busiest_link(op, where):
    case = run_mesh_case(build_mesh_case(op=op, size=400, **where))
    print(f"{case.label}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}, "
          f"{case.rtl.cycles_per_s:,.0f} cycles/s")
    # the busiest link cannot move more than a flit every 4 cycles
    assert case.rtl.cycles >= case.estimate.bandwidth_cycles * 0.95
    assert case.rtl.cycles <= case.estimate.cycles * 1.5


@pytest.mark.parametrize("op, where", [("all-reduce", dict(strategy="MP2-DP5-PP2", dim="dp")),
                                       ("multicast", dict(strategy="MP2-DP5-PP2", dim="pp")),
                                       ("all-reduce", dict(group="wafer"))])
def test_fp16_rings_chains_and_the_2d_all_reduce_are_bit_exact_in_the_configured_order(op, where):
    """fp16 on the 5 x 4 mesh: every engine's hash of what it received equals the golden
    model's (run_mesh_case raises otherwise; the wafer's 2D all-reduce stage by stage); the
    time beside the model's."""
    case = run_mesh_case(build_mesh_case(op=op, size=400, dtype="fp16", **where))
    print(f"fp16 {case.label}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}")
    assert case.rtl.cycles == pytest.approx(case.estimate.cycles, rel=0.05)
