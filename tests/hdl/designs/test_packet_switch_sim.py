"""The packet switch (hdl/designs/switch/packet_switch.py: VC input buffers, credits, control unit) in
Amaranth's simulator: an MP phase preempts a running DP all-reduce, which resumes and completes
bit-exact; random mixed-priority traffic under backpressure; host-driven selects; the control VC."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hdl.compiler.flows import Flow
from hdl.compiler.functional import simulate
from hdl.compiler.router import route
from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, Packet, PacketFormat, depacketize, packetize
from hdl.designs.switch.control_unit import CUState
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, by_phase, run_packet_switch

PKT = PacketFormat(phase_bits=2, seq_bits=6, flow_bits=2, packet_flits=4)
P, M, DTYPE = 4, 2, "int32"


def switch(depth=8, phases=3):
    return PacketSwitch(ports=P, middle=M, dtype=DTYPE, lanes=1, phases=phases, packet=PKT,
                        depth=depth)


def config(flows):
    return route(ports=P, middle=M, flows=flows).phases[0].config


DP_CONFIG = config([Flow(inputs=(0, 1), outputs=(0, 1, 2, 3))])        # all-reduce of 0, 1
MP_CONFIG = config([Flow(inputs=(2,), outputs=(0,)), Flow(inputs=(3,), outputs=(1,))])


def words(rng, n):
    return [rng.getrandbits(32) for _ in range(n)]


def check_outputs(run, phases):
    """Every output, per phase, bit-exact against the functional model of that phase's
    configuration, and no flow lost / duplicated / reordered (depacketize checks sequence
    numbers)."""
    for p in range(P):
        records = run.received[p]
        depacketize(PKT, [(d, last, tag) for _, d, last, tag in records])
        got = by_phase(PKT, records)
        for phase, (cfg, inputs) in phases.items():
            expected = simulate(P, M, cfg, DTYPE, [None if x is None else np.array(x, dtype=np.uint32)[:, None]
                                                   for x in inputs])[p]
            want = [] if expected is None else [int(v) for v in expected[:, 0]]
            assert got.get(phase, []) == want, (p, phase)
    assert run.flags["overflow"] == 0 and run.flags["credit_error"] == 0
    assert run.credit_errors == []


def dp_mp_traffic(rng, *, dp_packets=10, mp_at=40, mp_packets=3):
    dp = [words(rng, dp_packets * PKT.packet_flits) for _ in range(2)]
    mp = [words(rng, mp_packets * PKT.packet_flits) for _ in range(2)]
    inj = [Injection(port, 0, pk) for port in (0, 1)
           for pk in packetize(PKT, dp[port], phase=0, vc=VC.DP, flow=0)]
    if mp_packets:
        inj += [Injection(port, mp_at, pk) for port, flow in ((2, 1), (3, 2))
                for pk in packetize(PKT, mp[port - 2], phase=1, vc=VC.MP, flow=flow)]
    phases = {0: (DP_CONFIG, [dp[0], dp[1], None, None])}
    if mp_packets:
        phases[1] = (MP_CONFIG, [None, None, mp[0], mp[1]])
    return inj, phases


def test_mp_preempts_a_running_dp_all_reduce_which_resumes_bit_exact():
    rng = random.Random(17)
    inj, phases = dp_mp_traffic(rng)
    dut = switch()
    run = run_packet_switch(dut, configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng)
    check_outputs(run, phases)
    assert run.counters == {"preemptions": 1, "selects": 3}      # DP, MP, DP again
    out0 = [PKT.unpack_header(tag)["phase"] for _, _, _, tag in run.received[0]]
    first_mp = out0.index(1)
    assert 0 < first_mp and 0 in out0[first_mp:]                  # DP before and after MP
    # preemption latency: from the MP header at the head of input 2 (one cycle after it was
    # sent) to its first flit out: the datapath drains, the select copies, the flit crosses
    mp_sent = run.sent[2][0][0]
    mp_out = next(c for c, _, _, tag in run.received[0] if PKT.unpack_header(tag)["phase"] == 1)
    latency = mp_out - (mp_sent + 1)
    assert dut.select_cycles + dut.latency <= latency <= dut.select_cycles + 4 * dut.latency + 4 * PKT.packet_flits


def test_dp_is_delayed_by_about_the_mp_traffic_and_two_switches():
    rng = random.Random(3)
    inj, phases = dp_mp_traffic(rng, mp_packets=0)
    alone = run_packet_switch(switch(), configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng)
    check_outputs(alone, phases)
    rng = random.Random(3)
    inj, phases = dp_mp_traffic(rng)
    dut = switch()
    mixed = run_packet_switch(dut, configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng)
    check_outputs(mixed, phases)

    def dp_done(run):
        return max(c for c, _, _, tag in run.received[0] if PKT.unpack_header(tag)["phase"] == 0)
    delay = dp_done(mixed) - dp_done(alone)
    mp_flits = 3 * PKT.packet_flits
    # at least the MP flits on the shared output, at most that plus two drains and selects
    assert mp_flits <= delay <= mp_flits + 2 * (dut.select_cycles + 2 * dut.latency + 8)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_mixed_priority_traffic_under_backpressure(seed):
    rng = random.Random(seed)
    cfg = {0: DP_CONFIG, 1: MP_CONFIG,
           2: config([Flow(inputs=(0,), outputs=(3,)), Flow(inputs=(1,), outputs=(2,))])}
    vcs = {0: VC.DP, 1: VC.MP, 2: VC.PP}
    data = {0: [words(rng, 12) for _ in range(2)], 1: [words(rng, 10) for _ in range(2)],
            2: [words(rng, 9) for _ in range(2)]}
    ins = {0: (0, 1), 1: (2, 3), 2: (0, 1)}
    inj = []
    for phase, ports in ins.items():
        for k, port in enumerate(ports):
            at = rng.randrange(0, 60)
            flow = 0 if phase == 0 else 1 + k if phase == 1 else 3
            for pk in (packetize(PKT, data[phase][k], phase=phase, vc=vcs[phase], flow=flow,
                                             packet_flits=rng.choice([2, 3, 4]) if phase else 4)):
                at += rng.randrange(0, 12)     # in order: a sender sends a flow's packets in sequence
                inj.append(Injection(port, at, pk))
    # the reduction's two inputs must cut the same packets: DP used a fixed size above
    run = run_packet_switch(switch(depth=6), configs=[cfg[0], cfg[1], cfg[2]], injections=inj,
                            rng=rng, send_rate=0.7, drain_rate=0.5, drain_delay=2)
    phases = {0: (cfg[0], [data[0][0], data[0][1], None, None]),
              1: (cfg[1], [None, None, data[1][0], data[1][1]]),
              2: (cfg[2], [data[2][0], data[2][1], None, None])}
    # flow 3 carries two flows' packets (inputs 0 and 1 of the PP phase): check per phase only
    for p in range(P):
        got = by_phase(PKT, run.received[p])
        for phase, (c, inputs) in phases.items():
            expected = simulate(P, M, c, DTYPE, [None if x is None else np.array(x, dtype=np.uint32)[:, None]
                                                 for x in inputs])[p]
            assert got.get(phase, []) == ([] if expected is None else [int(v) for v in expected[:, 0]])
    assert run.flags["overflow"] == 0 and run.flags["credit_error"] == 0 and run.credit_errors == []
    assert run.states[-1] == CUState.RUN and run.counters["preemptions"] >= 1


def test_malformed_packets_are_dropped_whole_and_counted():
    rng = random.Random(9)
    good = packetize(PKT, words(rng, 8), phase=0, vc=VC.DP, flow=0)
    partner = packetize(PKT, words(rng, 8), phase=0, vc=VC.DP, flow=0)
    bad_phase = packetize(PKT, words(rng, 4), phase=2, vc=VC.DP, flow=1)    # slot 2 not loaded
    bad_vc = packetize(PKT, words(rng, 4), phase=0, vc=VC.CTRL, flow=1)    # not a data VC
    inj = [Injection(0, 0, bad_phase[0]), Injection(0, 0, good[0]), Injection(0, 0, bad_vc[0]),
           Injection(0, 0, good[1]), Injection(1, 0, partner[0]), Injection(1, 0, partner[1])]
    run = run_packet_switch(switch(), configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng)
    assert run.flags["dropped"] == [2, 0, 0, 0] and run.flags["bad_header"] == 1
    total = simulate(P, M, DP_CONFIG, DTYPE, [np.array([w for pk in good for w in pk.flits], dtype=np.uint32)[:, None],
                                               np.array([w for pk in partner for w in pk.flits], dtype=np.uint32)[:, None],
                                               None, None])
    for p in range(P):
        assert [d for _, d, _, _ in run.received[p]] == [int(v) for v in total[p][:, 0]]
    assert run.credit_errors == [] and run.flags["overflow"] == 0


def test_host_driven_select_still_works():
    rng = random.Random(4)
    mp = packetize(PKT, words(rng, 8), phase=1, vc=VC.MP, flow=1)
    dp = packetize(PKT, words(rng, 4), phase=0, vc=VC.DP, flow=0)
    inj = [Injection(2, 0, pk) for pk in mp] + [Injection(0, 0, dp[0]), Injection(1, 0, dp[0])]
    log = {}

    async def host(ctx, cycle):
        dut = host.dut
        if cycle == 0:
            ctx.set(dut.host_vc, VC.MP)
            ctx.set(dut.phase.valid, 1)
            ctx.set(dut.phase.payload, 1)
        elif ctx.get(dut.phase.valid) and ctx.get(dut.phase.ready):
            ctx.set(dut.phase.valid, 0)
            log.setdefault("selected", cycle)
    host.dut = dut = switch()
    run = run_packet_switch(dut, configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng,
                            header_select=False, host=host)
    # only the selected phase moves: MP from input 2 to output 0; the DP packets wait
    assert [d for _, d, _, _ in run.received[0]] == [w for pk in mp for w in pk.flits]
    assert all(not run.received[p] for p in (1, 2, 3))
    assert run.counters["selects"] == 0


def test_bad_parameters_are_refused():
    with pytest.raises(FredError, match="depth"):
        PacketSwitch(ports=4, middle=2, dtype="int32", lanes=1, phases=3, packet=PKT, depth=3)
    with pytest.raises(FredError, match="phases"):
        PacketSwitch(ports=4, middle=2, dtype="int32", lanes=1, phases=5, packet=PKT, depth=8)
    with pytest.raises(FredError, match="PacketFormat"):
        PacketSwitch(ports=4, middle=2, dtype="int32", lanes=1, phases=3, packet=None, depth=8)


def test_control_vc_acks_pass_through_and_a_nack_reaches_every_input_of_its_flow():
    rng = random.Random(6)
    dp = dp_mp_traffic(rng, dp_packets=2, mp_packets=1)[0]
    ack = Packet(phase=0, vc=VC.CTRL, seq=0, flow=1, flits=(0xACC,))      # MP flow 1: input 2
    nack = Packet(phase=1, vc=VC.CTRL, seq=1, flow=0, flits=(0x0AC,))     # DP flow 0: inputs 0, 1
    stray = Packet(phase=1, vc=VC.CTRL, seq=0, flow=3, flits=(0x5,))      # flow 3 never seen
    long = Packet(phase=1, vc=VC.CTRL, seq=0, flow=0, flits=(1, 2))       # two flits: malformed
    inj = dp + [Injection(0, 300, ack), Injection(3, 300, nack), Injection(1, 300, stray),
                Injection(2, 300, long)]
    dut = PacketSwitch(ports=P, middle=M, dtype=DTYPE, lanes=1, phases=3, packet=PKT, depth=8,
                       ctrl_depth=4)
    run = run_packet_switch(dut, configs=[DP_CONFIG, MP_CONFIG], injections=inj, rng=rng)
    ctrl = {p: [(d, PKT.unpack_header(tag)) for _, d, _, tag in run.received[p]
                if PKT.unpack_header(tag)["vc"] == VC.CTRL] for p in range(P)}
    nack_header = {"phase": 1, "vc": VC.CTRL, "seq": 1, "flow": 0}
    assert ctrl[0] == [(0x0AC, nack_header)] and ctrl[1] == [(0x0AC, nack_header)]
    assert ctrl[2] == [(0xACC, {"phase": 0, "vc": VC.CTRL, "seq": 0, "flow": 1})]
    assert ctrl[3] == []
    assert run.flags["dropped"] == [0, 0, 1, 0]      # the two-flit control packet, whole
    assert run.flags["ctrl_unknown"] == 1            # the stray one
    assert run.credit_errors == [] and run.flags["overflow"] == 0 and run.flags["credit_error"] == 0
    # no control flit inside a data packet on any output
    for p in range(P):
        inside = False
        for _, _, last, tag in run.received[p]:
            if PKT.unpack_header(tag)["vc"] == VC.CTRL:
                assert not inside
            else:
                inside = not last


def test_a_control_packet_longer_than_one_flit_is_dropped_whole_by_design():
    """docs/switch.md, "Links and credits": the paper's control packet is one 512 B flit, so a
    longer one is malformed: dropped whole (nothing forwarded), counted in ``dropped[n]``,
    ``bad_header`` set, and every control credit it took returned (the reproduction: a two-flit
    control packet alone on input 2)."""
    rng = random.Random(5)
    dp = dp_mp_traffic(rng, dp_packets=1, mp_packets=0)[0]
    long = Packet(phase=1, vc=VC.CTRL, seq=0, flow=0, flits=(1, 2))
    ack = Packet(phase=0, vc=VC.CTRL, seq=0, flow=0, flits=(7,))        # the next one passes
    dut = PacketSwitch(ports=P, middle=M, dtype=DTYPE, lanes=1, phases=3, packet=PKT, depth=8,
                       ctrl_depth=2)
    run = run_packet_switch(dut, configs=[DP_CONFIG, MP_CONFIG],
                            injections=dp + [Injection(2, 100, long), Injection(2, 100, ack)],
                            rng=rng)
    assert run.flags["dropped"] == [0, 0, 1, 0] and run.flags["bad_header"] == 1
    assert run.credits[2][VC.CTRL] == dut.ctrl_depth and run.credit_errors == []
    ctrl = [(p, d) for p in range(P) for _, d, _, tag in run.received[p]
            if PKT.unpack_header(tag)["vc"] == VC.CTRL]
    assert sorted(ctrl) == [(0, 7), (1, 7)]          # the ACK to both inputs of flow 0 only
