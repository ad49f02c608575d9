"""Rewriting the active slot of the packet switch in header mode (docs/switch.md, "Control unit":
a rewrite of the active slot takes effect at its next packet), in Amaranth's simulator. The
reproduction an independent bench found: slot 0 = ``0>1``, one packet; slot 0 rewritten as
``0>2`` at an idle switch; the next packet left output 1 (the active configuration is a copy and
the control unit never selected the same slot again)."""

from __future__ import annotations

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, run_packet_switch, slot_writer

PKT = PacketFormat(phase_bits=2, seq_bits=6, flow_bits=2, packet_flits=4)
P, M = 4, 2


def config(flows):
    return route(ports=P, middle=M, flows=flows).phases[0].config


def switch():
    return PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=3, packet=PKT, depth=8)


def outputs(run):
    return {p: [d for _, d, _, _ in r] for p, r in run.received.items() if r}


def test_a_rewritten_active_slot_takes_effect_at_its_next_packet():
    first, second = (packetize(PKT, [10 * s + k for k in range(4)], phase=0, vc=VC.DP, flow=0,
                               first_seq=s)[0] for s in (0, 1))
    dut = switch()
    host = slot_writer(dut, slot=0, config=config([Flow(inputs=(0,), outputs=(2,))]), at=100)
    run = run_packet_switch(dut, configs=[config([Flow(inputs=(0,), outputs=(1,))])],
                            injections=[Injection(0, 0, first), Injection(0, 200, second)],
                            host=host, max_cycles=1000)
    assert host.done is not None and host.done < 200
    assert outputs(run) == {1: [0, 1, 2, 3], 2: [10, 11, 12, 13]}
    # one select for the first packet, one to copy the rewritten slot in
    assert run.counters["selects"] == 2 and run.flags["busy"] == 0
    # the re-select costs what a select at an idle switch costs (select + settle + crossing)
    second_out = run.received[2][0][0]
    assert second_out - (200 + 1) == dut.select_cycles + 2 + dut.latency


def test_rewriting_another_slot_leaves_the_active_phase_running():
    packets = packetize(PKT, list(range(16)), phase=0, vc=VC.DP, flow=0)
    dut = switch()
    host = slot_writer(dut, slot=1, config=config([Flow(inputs=(1,), outputs=(3,))]), at=5)
    run = run_packet_switch(dut, configs=[config([Flow(inputs=(0,), outputs=(1,))])],
                            injections=[Injection(0, 0, pk) for pk in packets], host=host,
                            max_cycles=1000)
    assert outputs(run) == {1: list(range(16))} and run.counters["selects"] == 1
