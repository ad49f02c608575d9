"""The packet switch's Verilog (``fred_packet_switch``) under Verilator via cocotb
(cocotb_tests/bench_packet_switch.py): an MP phase preempts a running DP all-reduce which
completes afterwards, bit-exact; random mixed-priority traffic with backpressure; ACK / NACK
traffic on the control VC (a NACK fans out to every input of its flow; counted); random unicast
routed online (the default phase index) with the MP phase preempting it; per-flow scoreboards,
watchdog, credit checks every cycle (data and control VCs)."""

import pytest

from cocotb_tests.bench_packet_switch import DESIGN, PKT
from cocotb_tests.runner import run_bench
from hdl.designs.switch.packet_switch import PacketSwitch
from hdl.emit.verilog import to_verilog

pytestmark = pytest.mark.cocotb

BENCH = "cocotb_tests.bench_packet_switch"


def _verilog():
    dut = PacketSwitch(packet=PKT, **DESIGN)
    return to_verilog(dut, name="fred_packet_switch"), "fred_packet_switch"


def test_packet_switch_preemption_mixed_control_online():
    result = run_bench(verilog=_verilog(), test_module=BENCH,
                       testcase=["preemption", "mixed_random", "control_vc", "online_unicast"],
                       bench_params={"dp_flits": 64, "mp_flits": 16, "mp_at": 30, "flits": 24,
                                     "ctrl_data_flits": 16, "unicast_packets": 12})
    m = result.metrics
    print(f"fred_packet_switch: {m}")
    # the select of Fred_2(4) is N + 2 = 4 cycles; latency 1 + 5; the preemption waits for the
    # DP packets in flight: at least select + settle + latency, at most one more packet + drain
    assert 4 + 1 + 6 <= m["preemption_latency_cycles"] <= 4 + 2 + 6 + PKT.packet_flits + 6
    assert m["selects"] == 3 and m["flits_checked"] > 0
    assert m["throughput_MP"] > 0 and m["throughput_DP"] > 0 and m["throughput_PP"] > 0
    # control VC: 4 flows; per flow 2 ACKs per receiver + 1 NACK, each to every input of the flow
    assert m["ctrl_nacks"] == 4 and m["ctrl_nack_copies"] == 6       # DP and PP flows: 2 inputs
    # sent: DP flow 0 (4 receivers x 2 ACKs + NACK) 9, MP flows 1, 2: 3 each, PP flow 3: 5;
    # delivered: x 2 inputs for DP and PP, x 1 for MP
    assert m["ctrl_sent"] == 20 and m["ctrl_delivered"] == 9 * 2 + 3 + 3 + 5 * 2
    # online unicast: 12 packets of 4 flits per input, all delivered; MP preempted it once
    assert m["online_flits"] == 4 * 12 * 4 and m["online_preemptions"] == 1
    assert m["online_parallel_cycles"] > 0
