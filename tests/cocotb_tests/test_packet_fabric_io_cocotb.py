"""I/O controllers on Fred-B's packet fabric under Verilator (``fred fabric-sim --fabric fred-b
--op io-reduce|io-broadcast --group wafer``, docs/fabric_validation.md "I/O controllers"): the
controller's stream at 16/375 of an NPU link, every flit checked, within 5 % of the system
model's io-store / io-load on the same fabric. A cold build of the 20-NPU fabric takes about
4 minutes: full suite only."""

import pytest

from studies.fabric_case import build_case
from studies.packet_fabric_case import run_packet_case

pytestmark = [pytest.mark.cocotb, pytest.mark.full]


@pytest.mark.parametrize("op", ["io-reduce", "io-broadcast"])
def test_fred_b_wafer_io_ops_match_the_model(op):
    case = run_packet_case(build_case(fabric="fred-b", op=op, size=40, group="wafer",
                                      switch="packet"))
    assert case.rtl.errors == []
    assert case.rtl.flits_checked == (40 if op == "io-reduce" else 20 * 40)
    # bandwidth-bound: 40 flits at 16/375 = 937.5 cycles on the controller's link
    assert case.rtl.cycles >= 40 * 375 / 16
    assert abs(case.ratio - 1) <= 0.05


def test_fred_b_fp16_reduce_out_is_bit_exact_under_sink_backpressure():
    """fp16 io-reduce (a real reduction: the switches' trees, in their configured order, into
    the controller) with the endpoints refusing 30 % of the cycles, the I/O block's fp16 run
    (docs/fabric_validation.md, "`make fabric-validate`'s I/O block"): the controller's hash of
    the 40 sums is the golden model's, and the controller's pace still decides the time."""
    from studies.packet_fabric_case import build_packet_case
    case = run_packet_case(build_packet_case(fabric="fred-b", op="io-reduce", size=40, group="wafer",
                                             dtype="fp16"), sink_backpressure=0.3)
    assert case.rtl.errors == [] and case.rtl.flits_checked == 40
    # the errors above include the hash comparison (judge): the controller's hash was compared
    assert case.rtl.engines[20]["hash"] == case.rtl.program.expected_hashes[20]
    assert case.rtl.cycles >= 40 * 375 / 16
    assert abs(case.ratio - 1) <= 0.05
