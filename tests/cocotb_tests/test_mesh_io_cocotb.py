"""The paper's wafer (5 x 4 NPUs, 18 edge I/O controllers at 128 GBps) streaming weights under
Verilator (cocotb_tests/fabric/mesh_io_run.py): every NPU checks every flit of every stripe, and
the time is within 5 % of the model's, for each of the model's tree choices. The build takes
minutes (about 10 MB of Verilog): ``-m full`` only; the logic is in the default suite on 2 x 2
(tests/hdl/designs/test_mesh_io_sim.py)."""

import pytest

from studies.mesh_case import build_mesh_case, run_mesh_case

pytestmark = [pytest.mark.cocotb, pytest.mark.full]


@pytest.mark.parametrize("mode", ["tree-split", "tree-xy", "tree-yx"])
def test_weight_streaming_is_exact_and_within_5_percent_of_the_model(mode):
    case = run_mesh_case(build_mesh_case(op="io-load", size=18 * 100, group="wafer", algorithm=mode))
    print(f"io-load {mode}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}, "
          f"{case.rtl.cycles_per_s:,.0f} cycles/s")
    assert case.rtl.cycles >= case.estimate.bandwidth_cycles      # the busiest link's stripes
    assert case.rtl.cycles == pytest.approx(case.estimate.cycles, rel=0.05)


def test_weight_streaming_under_random_idle_loses_nothing():
    """Every controller and NPU forwarder idle in 30 % of the cycles (``--backpressure 0.3``):
    slower, and still every flit of every stripe at every NPU, once, in order, intact."""
    case = run_mesh_case(build_mesh_case(op="io-load", size=18 * 40, group="wafer"), sink_backpressure=0.3)
    print(f"io-load under 30 % idle: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}")
    assert case.rtl.cycles >= case.estimate.bandwidth_cycles



@pytest.mark.parametrize("size", [18 * 3, 18 * 100])
def test_gradient_reduce_out_is_exact(size):
    """io-store on the wafer: each controller receives each of its trees' flits once, in order,
    each the sum of all 20 NPUs' contributions (run_mesh_case raises otherwise); never faster
    than the busiest link."""
    case = run_mesh_case(build_mesh_case(op="io-store", size=size, group="wafer"))
    print(f"io-store {size}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}")
    assert case.rtl.cycles >= case.estimate.bandwidth_cycles


def test_gradient_reduce_out_within_5_percent_of_the_model():
    """100-flit stripes: the reduction's per-hop time (about 35 cycles in all, which the model's
    latency does not count) is ~1 % of the time (docs/mesh_rtl.md, io-store)."""
    case = run_mesh_case(build_mesh_case(op="io-store", size=18 * 100, group="wafer"))
    assert case.rtl.cycles == pytest.approx(case.estimate.cycles, rel=0.05)


@pytest.mark.parametrize("size", [18 * 3, 18 * 223])
def test_gradient_reduce_out_in_fp16_is_bit_exact_and_within_5_percent_of_the_model(size):
    """fp16 io-store on the wafer: every controller's tree hashes equal the golden model's fixed
    order (run_mesh_case raises otherwise), within 5 % of the model (which charges each
    reducing member its three adder levels)."""
    case = run_mesh_case(build_mesh_case(op="io-store", size=size, group="wafer", dtype="fp16"))
    print(f"io-store fp16 {size}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}")
    assert case.rtl.cycles == pytest.approx(case.estimate.cycles, rel=0.05)


@pytest.mark.parametrize("stripe", [1, 40])
@pytest.mark.parametrize("op", ["io-write", "io-read"])
def test_checkpoint_spills_are_exact_and_within_5_percent_of_the_model(op, stripe):
    """Every NPU's own stripe (1 flit: the latency-bound size an iteration's spills run at
    K = 100,000; 40 flits) to (io-write) or from (io-read) each of the 18 controllers: every
    receiver checks each sender's stripe (which NPU, which controller, which flit); the
    controllers' links bound it (20 stripes each at 16/375 flit per cycle), as the model's. At
    1 flit the senders' order decides the rest (``spill_order``: with every sender in index
    order 533 / 519 cycles against the model's 492.8)."""
    case = run_mesh_case(build_mesh_case(op=op, size=18 * stripe, group="wafer"))
    print(f"{op}: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}, {case.rtl.cycles_per_s:,.0f} cycles/s")
    assert case.rtl.cycles >= case.estimate.bandwidth_cycles
    assert case.rtl.cycles == pytest.approx(case.estimate.cycles, rel=0.05)


@pytest.mark.parametrize("op", ["io-write", "io-read"])
def test_checkpoint_spills_under_random_idle_lose_nothing(op):
    """Every sender and controller sink idle in 30 % of the cycles: slower, nothing lost."""
    case = run_mesh_case(build_mesh_case(op=op, size=18 * 10, group="wafer"), sink_backpressure=0.3)
    print(f"{op} under 30 % idle: model {case.estimate.cycles:.0f}, RTL {case.rtl.cycles}")
    assert case.rtl.cycles > case.estimate.bandwidth_cycles
