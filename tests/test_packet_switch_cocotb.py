"""The packet switch's Verilog (``fred_packet_switch``) under Verilator via cocotb
(cocotb_tests/bench_packet_switch.py): an MP phase preempts a running DP all-reduce which
completes afterwards, bit-exact; random mixed-priority traffic with backpressure; per-flow
scoreboards, watchdog, credit checks every cycle."""

import pytest

from cocotb_tests.bench_packet_switch import DESIGN, PKT
from cocotb_tests.runner import run_bench
from hdl.switch.packet_switch import PacketSwitch
from hdl.verilog import to_verilog

pytestmark = pytest.mark.cocotb

BENCH = "cocotb_tests.bench_packet_switch"


def _verilog():
    dut = PacketSwitch(packet=PKT, **DESIGN)
    return to_verilog(dut, name="fred_packet_switch"), "fred_packet_switch"


def test_packet_switch_preemption_and_mixed_traffic():
    result = run_bench(verilog=_verilog(), test_module=BENCH, testcase=["preemption", "mixed_random"],
                       bench_params={"dp_flits": 64, "mp_flits": 16, "mp_at": 30, "flits": 24})
    m = result.metrics
    print(f"fred_packet_switch: {m}")
    # the select of Fred_2(4) is N + 2 = 4 cycles; latency 1 + 5; the preemption waits for the
    # DP packets in flight: at least select + settle + latency, at most one more packet + drain
    assert 4 + 1 + 6 <= m["preemption_latency_cycles"] <= 4 + 2 + 6 + PKT.packet_flits + 6
    assert m["selects"] == 3 and m["flits_checked"] > 0
    assert m["throughput_MP"] > 0 and m["throughput_DP"] > 0 and m["throughput_PP"] > 0
