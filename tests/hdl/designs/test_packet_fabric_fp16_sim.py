"""fp16 on the packet fabric (Amaranth's simulator, the 4-NPU in-switch fabric): the engines
hash what they receive and the run is judged against the golden model's hash in the
configured tree order (hdl/compiler/fabric_golden.py), so a reduction added in another order,
or any flit altered, fails the run."""

from __future__ import annotations

from dataclasses import replace

from cocotb_tests.fabric.packet_fabric_sim import judge, run_packet_fabric_amaranth
from hdl.contracts.fabric import fabric_spec, make_request

SMALL_FP16 = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1, dtype="fp16")


def test_fp16_all_reduce_is_bit_exact_in_the_configured_tree_order():
    request = make_request(SMALL_FP16, op="all-reduce", size_flits=21, group="wafer")
    run = run_packet_fabric_amaranth(SMALL_FP16, request, sink_backpressure=0.3,
                                     watchdog_cycles=4000)
    assert run.errors == []
    hashes = run.program.expected_hashes
    assert [e["hash"] for e in run.engines] == hashes and len(set(hashes)) == 1 and hashes[0]
    # the same counters judged against another expected sum (e.g. another addition order):
    # every NPU is named
    other = replace(run.program, expected_hashes=[h ^ 1 for h in hashes])
    bad = judge(SMALL_FP16, request, other, run.cycles, run.engines, run.switches, done=True,
                watchdog_cycles=4000)
    assert len(bad.errors) == 4 and all("golden model" in e for e in bad.errors)
